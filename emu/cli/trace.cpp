// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce trace [-f]`: the devices' trace lines, interleaved by time (docs/trace.md).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"

namespace uroce::cli {

namespace {

// One device's trace lines after `*since`, as "TIME DEVICE TEXT" lines appended to out;
// advances *since. False when the device cannot be asked (it stopped).
bool fetch_trace(const std::string& dev, uint64_t* since, std::vector<std::string>* out) {
    for (;;) {
        abi::Request req{};
        req.op = abi::Op::kTrace;
        req.u.trace.since = *since;
        std::string text;
        if (abi::simple_request(dev, req, &text) != 0) return false;
        unsigned long long last = 0;
        if (std::sscanf(text.c_str(), "last %llu", &last) != 1) return false;
        if (last == *since) return true;
        size_t pos = text.find('\n');
        while (pos != std::string::npos && pos + 1 < text.size()) {
            size_t nl = text.find('\n', pos + 1);
            std::string line = text.substr(pos + 1, nl == std::string::npos ? nl : nl - pos - 1);
            pos = nl;
            unsigned long long lost = 0;
            size_t sp = line.find(' ');
            if (sp == std::string::npos) continue;
            std::string rest = line.substr(sp + 1);
            if (std::sscanf(rest.c_str(), "lost %llu", &lost) == 1) {
                out->push_back("-               " + dev + " " + std::to_string(lost) +
                               " earlier lines were overwritten (the device keeps the last " +
                               "4096)");
                continue;
            }
            size_t sp2 = rest.find(' ');
            if (sp2 == std::string::npos) continue;
            out->push_back(rest.substr(0, sp2) + " " + dev + " " + rest.substr(sp2 + 1));
        }
        *since = last;
    }
}

}  // namespace

// `uroce trace [-f] [NAME]...` (docs/trace.md): every retained line of the devices, oldest
// first; with -f, then new lines as they come, until every device has stopped.
int write_trace(const std::vector<std::string>& names, bool follow, FILE* out) {
    auto devs = select(names);
    if (devs.empty()) {
        std::fprintf(stderr, "uroce: no device running\n");
        return 1;
    }
    std::vector<uint64_t> since(devs.size(), 0);
    std::vector<bool> up(devs.size(), true);
    for (bool first = true;; first = false) {
        std::vector<std::string> lines;
        size_t live = 0;
        for (size_t i = 0; i < devs.size(); ++i) {
            if (up[i] && !fetch_trace(devs[i].name, &since[i], &lines)) {
                up[i] = false;
                if (first) {
                    std::fprintf(stderr, "uroce: %s does not answer\n", devs[i].name.c_str());
                    return 1;
                }
            }
            live += up[i];
        }
        // Lines of several devices, interleaved by time (each device's are in order already).
        std::stable_sort(lines.begin(), lines.end(),
                         [](const std::string& a, const std::string& b) {
                             return a.compare(0, 15, b, 0, 15) < 0;
                         });
        for (const auto& l : lines) std::fprintf(out, "%s\n", l.c_str());
        std::fflush(out);
        if (!follow || live == 0) return 0;
        usleep(100000);
    }
}

int cmd_trace(const std::vector<std::string>& args) {
    bool follow = false;
    std::vector<std::string> names;
    for (const auto& a : args) {
        if (a == "-f" || a == "--follow")
            follow = true;
        else
            names.push_back(a);
    }
    return write_trace(names, follow, stdout);
}

}  // namespace uroce::cli
