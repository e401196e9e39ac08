// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `modprobe`, `rmmod` and `lsmod` under `uroce run` for the kernel modules of RDMA that
// set-up scripts written for kernel Soft-RoCE load (`modprobe rdma_rxe`): uroce needs none
// of them, so loading or removing them succeeds without doing anything, and lsmod and
// /sys/module (the view's) list them as loaded. Any other module goes to the host's tool,
// the next one on PATH. docs/system-view.md, "Kernel modules".
#include "emu/sysview/module_tools.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu/cli/cli.h"

namespace uroce::modtools {

const std::vector<std::string>& rdma_modules() {
    static const std::vector<std::string> k = {"rdma_rxe", "ib_uverbs", "rdma_ucm", "rdma_cm",
                                               "ib_cm",    "iw_cm",     "ib_core"};
    return k;
}

namespace {

bool is_rdma(std::string m) {
    for (char& c : m)
        if (c == '-') c = '_';  // modprobe takes either
    for (const auto& k : rdma_modules())
        if (m == k) return true;
    return false;
}

int pass_on(const char* tool, char** argv) {
    std::string real = cli::next_on_path(tool);
    if (!real.empty()) execv(real.c_str(), argv);
    std::fprintf(stderr, "%s: the host has no %s (uroce run answers only for %s)\n", tool, tool,
                 "rdma_rxe, ib_uverbs, rdma_ucm, rdma_cm, ib_cm, iw_cm, ib_core");
    return 1;
}

}  // namespace

// modprobe [-a] [-r] [-q] [-v] [-n] ... MODULE [PARAMS...] / rmmod MODULE...: the modules
// named (all words with -a, -r or rmmod; else the first) must all be RDMA ones.
int modprobe(int argc, char** argv, bool rmmod) {
    bool all = rmmod;
    std::vector<std::string> words;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-a" || a == "--all" || a == "-r" || a == "--remove") {
            all = true;
        } else if (a.size() > 1 && a[0] == '-') {
            // -q, -v, -n, -b, -s, -f ... change nothing here; any other is the host's.
            if (a != "-q" && a != "--quiet" && a != "-v" && a != "--verbose" && a != "-n" &&
                a != "--dry-run" && a != "-b" && a != "--use-blacklist" && a != "-s" &&
                a != "--syslog" && a != "-f" && a != "--force")
                return pass_on(rmmod ? "rmmod" : "modprobe", argv);
        } else {
            words.push_back(a);
        }
    }
    if (words.empty()) return pass_on(rmmod ? "rmmod" : "modprobe", argv);
    size_t modules = all ? words.size() : 1;
    for (size_t i = 0; i < modules; ++i)
        if (!is_rdma(words[i])) return pass_on(rmmod ? "rmmod" : "modprobe", argv);
    return 0;
}

// The host's lsmod, then the RDMA modules it does not list, in its format.
int lsmod(int argc, char** argv) {
    std::string real = cli::next_on_path("lsmod");
    std::string out;
    if (!real.empty()) {
        int p[2];
        if (pipe(p) != 0) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
            execv(real.c_str(), argv);
            _exit(127);
        }
        close(p[1]);
        char buf[4096];
        ssize_t n;
        while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
        close(p[0]);
        int st = 0;
        waitpid(pid, &st, 0);
    }
    (void)argc;
    if (out.empty()) out = "Module                  Size  Used by\n";
    std::fputs(out.c_str(), stdout);
    for (const auto& m : rdma_modules())
        if (out.find("\n" + m + " ") == std::string::npos)
            std::printf("%-19s %8d  %d\n", m.c_str(), 0, 0);
    return 0;
}

}  // namespace uroce::modtools
