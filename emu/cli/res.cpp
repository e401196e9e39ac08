// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce res` and `uroce counters`: a running device's objects and counters, as it dumps them.

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"

namespace uroce::cli {

int cmd_dump(const std::vector<std::string>& all_args, bool counters_only) {
    // `uroce res [NAME] [xrcd|srq|qp|mr|mw]...`: the kind words keep only the lines that
    // start with them (docs/xrc.md, docs/memory-windows.md); the other words name devices.
    std::vector<std::string> args, kinds;
    for (const auto& a : all_args) {
        bool kind = a == "xrcd" || a == "srq" || a == "qp" || a == "mr" || a == "mw";
        (!counters_only && kind ? kinds : args).push_back(a);
    }
    auto devs = select(args);
    if (devs.empty()) {
        std::fprintf(stderr, "uroce: no device running\n");
        return 1;
    }
    for (auto& d : devs) {
        std::string text;
        if (int e = abi::simple_request(d.name, abi::Op::kDump, &text)) {
            std::fprintf(stderr, "uroce: %s: %s\n", d.name.c_str(), std::strerror(e));
            return 1;
        }
        if (!counters_only && !kinds.empty()) {
            for (size_t pos = 0; pos < text.size();) {
                size_t nl = text.find('\n', pos);
                std::string line = text.substr(pos, nl - pos);
                std::string first = line.substr(0, line.find(' '));
                for (const auto& k : kinds)
                    if (first == k) std::printf("%s\n", line.c_str());
                pos = nl == std::string::npos ? text.size() : nl + 1;
            }
            continue;
        }
        if (!counters_only) {
            std::fputs(text.c_str(), stdout);
            continue;
        }
        std::printf("device %s\n", d.name.c_str());
        size_t pos = 0;
        while (pos < text.size()) {
            size_t nl = text.find('\n', pos);
            std::string line = text.substr(pos, nl - pos);
            // counters, counters_op (by opcode), drop (by reason), qp_counters (per QP).
            if (line.rfind("counters", 0) == 0 || line.rfind("drop", 0) == 0 ||
                line.rfind("qp_counters", 0) == 0 || line.rfind("faults", 0) == 0)
                std::printf("%s\n", line.c_str());
            pos = nl == std::string::npos ? text.size() : nl + 1;
        }
    }
    return 0;
}

}  // namespace uroce::cli
