// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// uroce: the operator's tool. A dispatcher: each command family is a file under emu/cli/
// (cli.h), the ladder and the resource graph theirs, `rdma` the system view's tool.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"
#include "emu/ladder/ladder_cli.h"
#include "emu/resgraph/res_graph.h"
#include "emu/sysview/module_tools.h"
#include "emu/sysview/rdma_tool.h"

using namespace uroce;
using namespace uroce::cli;

int main(int argc, char** argv) {
    // Started as `rdma` (the link `uroce run` puts on PATH): iproute2's rdma for the view.
    const char* base = std::strrchr(argv[0], '/');
    const char* as = base ? base + 1 : argv[0];
    if (std::strcmp(as, "rdma") == 0) return rdmatool::run(argc, argv);
    // As `modprobe`, `rmmod`, `lsmod`: the RDMA modules uroce needs none of.
    if (std::strcmp(as, "modprobe") == 0) return modtools::modprobe(argc, argv, false);
    if (std::strcmp(as, "rmmod") == 0) return modtools::modprobe(argc, argv, true);
    if (std::strcmp(as, "lsmod") == 0) return modtools::lsmod(argc, argv);
    // As `uroce-cluster-agent` (beside `rdma`): a launcher's remote shell (docs/cluster.md).
    if (std::strcmp(base ? base + 1 : argv[0], "uroce-cluster-agent") == 0) {
        std::vector<std::string> a = {"agent"};
        a.insert(a.end(), argv + 1, argv + argc);
        return cmd_cluster(a);
    }
    if (argc < 2) return usage();
    using Args = std::vector<std::string>;
    struct Command {
        const char* name;
        int (*run)(const Args&);
    };
    static const Command kCommands[] = {
        {"start", [](const Args& a) { return cmd_start(a); }},
        {"stop", cmd_stop},
        {"list", [](const Args&) { return cmd_list(); }},
        {"res",
         [](const Args& a) {
             if (std::find(a.begin(), a.end(), "--graph") != a.end())
                 return resgraph::cmd_res_graph(a);
             return cmd_dump(a, false);
         }},
        {"counters", [](const Args& a) { return cmd_dump(a, true); }},
        {"run", [](const Args& a) { return cmd_run(a); }},
        {"env", cmd_env},
        {"cluster", cmd_cluster},
        {"capture", cmd_capture},
        {"faults", cmd_faults},
        {"trace", cmd_trace},
        {"ladder", ladder::cmd_ladder},
    };
    std::string cmd = argv[1];
    Args args(argv + 2, argv + argc);
    signal(SIGPIPE, SIG_IGN);
    for (const Command& c : kCommands) {
        if (cmd != c.name) continue;
        // Every command trusts what the runtime directory holds (a device's socket, the pid
        // to signal, the log to write): none runs in one that someone else controls.
        if (std::string why =
                abi::check_runtime_dir(cmd == "start" || cmd == "run" || cmd == "cluster");
            !why.empty()) {
            std::fprintf(stderr, "%s\n", why.c_str());
            return 1;
        }
        return c.run(args);
    }
    return usage();
}
