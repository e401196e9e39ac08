// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce capture start|stop`: a device's pcap, started, rotated and stopped at run time.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"

namespace uroce::cli {

namespace {

// Sends a kCapture message (path empty: stop). Returns 0 or an errno (transport or the
// device's verdict); *packets: what the previous capture wrote.
int capture_request(const std::string& name, const std::string& path, uint64_t max_bytes,
                    uint64_t* packets) {
    int fd = abi::connect_device(name);
    if (fd < 0) return -fd;
    auto req = std::make_unique<abi::CaptureReq>();
    std::memset(req.get(), 0, sizeof *req);
    req->op = abi::Op::kCapture;
    req->max_bytes = max_bytes;
    std::memcpy(req->path, path.data(), std::min(path.size(), sizeof req->path - 1));
    ssize_t n;
    do {
        n = send(fd, req.get(), sizeof *req, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != ssize_t(sizeof *req)) {
        int e = n < 0 ? errno : EPROTO;
        close(fd);
        return e;
    }
    abi::Response resp{};
    do {
        n = recv(fd, &resp, sizeof resp, 0);
    } while (n < 0 && errno == EINTR);
    int e = n < 0 ? errno : 0;
    close(fd);
    if (e) return e;
    if (n < ssize_t(offsetof(abi::Response, u) + sizeof(abi::CaptureResp))) return ENODEV;
    *packets = resp.u.capture.packets;
    return resp.err;
}

}  // namespace

int cmd_capture(const std::vector<std::string>& args) {
    if (args.empty()) return usage();
    const std::string& what = args[0];
    std::vector<std::string> pos;
    uint64_t max_bytes = 0;
    for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--max-bytes") {
            if (what != "start" || i + 1 >= args.size()) return usage();
            const std::string& v = args[++i];
            char* end = nullptr;
            errno = 0;
            max_bytes = std::strtoull(v.c_str(), &end, 10);
            if (v.empty() || v[0] == '-' || *end != 0 || errno) {
                std::fprintf(stderr, "uroce: bad --max-bytes %s\n", v.c_str());
                return 2;
            }
        } else {
            pos.push_back(args[i]);
        }
    }
    if (what == "start") {
        if (pos.empty() || pos.size() > 2) return usage();
        std::string file = absolute(pos[0]);
        if (file.empty()) return 1;
        if (file.size() >= abi::kMaxCapturePath) {
            std::fprintf(stderr, "uroce: path too long\n");
            return 1;
        }
        auto devs = select_some(std::vector<std::string>(pos.begin() + 1, pos.end()));
        if (devs.empty()) return 1;
        if (devs.size() > 1) {
            std::fprintf(stderr, "uroce: %zu devices are running; name one\n", devs.size());
            return 1;
        }
        uint64_t before = 0;
        if (int e = capture_request(devs[0].name, file, max_bytes, &before)) {
            std::fprintf(stderr, "uroce: %s: capture to %s: %s\n", devs[0].name.c_str(),
                         file.c_str(), std::strerror(e));
            return 1;
        }
        if (!devs[0].pcap.empty())
            std::printf("%s: closed %s (%llu packets)\n", devs[0].name.c_str(),
                        devs[0].pcap.c_str(), (unsigned long long)before);
        std::printf("%s: capturing to %s", devs[0].name.c_str(), file.c_str());
        if (max_bytes)
            std::printf(" (rotating to %s.1 at %llu bytes)", file.c_str(),
                        (unsigned long long)max_bytes);
        std::printf("\n");
        return 0;
    }
    if (what == "stop") {
        auto devs = select_some(pos);
        if (devs.empty()) return 1;
        int rc = 0;
        for (auto& d : devs) {
            uint64_t packets = 0;
            if (int e = capture_request(d.name, "", 0, &packets)) {
                std::fprintf(stderr, "uroce: %s: %s\n", d.name.c_str(), std::strerror(e));
                rc = 1;
                continue;
            }
            if (d.pcap.empty())
                std::printf("%s: no capture running\n", d.name.c_str());
            else
                std::printf("%s: capture stopped, %llu packets written to %s\n", d.name.c_str(),
                            (unsigned long long)packets, d.pcap.c_str());
        }
        return rc;
    }
    return usage();
}

}  // namespace uroce::cli
