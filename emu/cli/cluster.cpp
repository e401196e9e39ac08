// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce cluster`: the script beside the daemon that makes RDMA hosts in namespaces
// (docs/cluster.md).
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"

namespace uroce::cli {

namespace {

// `uroce cluster` is a script beside the daemon (emu/cluster/uroce-cluster.sh): what it
// does is run ip(8) and this program, in that order, many times.
std::string cluster_script() {
    std::string installed = exe_dir() + "/" UROCE_BIN_TO_DAEMON "/cluster";
    if (access(installed.c_str(), X_OK) == 0) return installed;
    return exe_dir() + "/../libexec/uroce/cluster";
}

}  // namespace

// Runs the cluster script with `args` (docs/cluster.md); it calls back this program by its
// path and finds clusters under the runtime directory.
int cmd_cluster(const std::vector<std::string>& args) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string rt = absolute(abi::runtime_base_dir());
    if (n <= 0 || rt.empty()) return 1;
    self[n] = 0;
    setenv("UROCE", self, 1);
    setenv("UROCE_RUNTIME_DIR", rt.c_str(), 1);
    std::string script = cluster_script();
    std::vector<char*> argv = {const_cast<char*>("bash"), script.data()};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    signal(SIGPIPE, SIG_DFL);
    execvp("bash", argv.data());
    std::fprintf(stderr, "uroce: cannot run %s: %s\n", script.c_str(), std::strerror(errno));
    return 127;
}

}  // namespace uroce::cli
