// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce faults SPEC|off`: the fault injector of running devices (docs/faults.md).
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"
#include "net/fault_injector.h"

namespace uroce::cli {

// uroce faults SPEC|off [NAME]: sends a kFaults message to NAME, or to every device.
int cmd_faults(const std::vector<std::string>& args) {
    if (args.empty() || args.size() > 2) return usage();
    net::FaultSpec spec;
    std::string why;
    if (!net::parse_fault_spec(args[0], &spec, &why)) {
        std::fprintf(stderr, "uroce: bad fault spec: %s\n", why.c_str());
        return 2;
    }
    if (args[0].size() >= abi::kMaxFaultSpec) {
        std::fprintf(stderr, "uroce: fault spec too long\n");
        return 2;
    }
    auto devs = select_some(std::vector<std::string>(args.begin() + 1, args.end()));
    if (devs.empty()) return 1;
    int rc = 0;
    for (auto& d : devs) {
        abi::FaultsReq req{};
        req.op = abi::Op::kFaults;
        std::memcpy(req.spec, args[0].data(), args[0].size());
        abi::Response resp{};
        int e = 0;
        int fd = abi::connect_device(d.name);
        if (fd < 0) {
            e = -fd;
        } else {
            ssize_t n;
            do {
                n = send(fd, &req, sizeof req, MSG_NOSIGNAL);
            } while (n < 0 && errno == EINTR);
            if (n != ssize_t(sizeof req)) e = n < 0 ? errno : EPROTO;
            if (!e) {
                do {
                    n = recv(fd, &resp, sizeof resp, 0);
                } while (n < 0 && errno == EINTR);
                if (n < 0)
                    e = errno;
                else if (n < ssize_t(offsetof(abi::Response, u) + sizeof(abi::FaultsResp)))
                    e = ENODEV;
                else
                    e = resp.err;
            }
            close(fd);
        }
        if (e) {
            std::fprintf(stderr, "uroce: %s: faults: %s\n", d.name.c_str(), std::strerror(e));
            rc = 1;
            continue;
        }
        spec.seed = resp.u.faults.seed;
        spec.has_seed = true;
        std::printf("%s: faults %s\n", d.name.c_str(), net::format_fault_spec(spec).c_str());
    }
    return rc;
}

}  // namespace uroce::cli
