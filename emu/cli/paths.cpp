// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Where the uroce command finds its own files, the daemon and the libraries (docs/install.md).
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"

namespace uroce::cli {

std::string exe_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    std::string p = buf;
    return p.substr(0, p.rfind('/'));
}

// `path` made absolute against the working directory (a file handed to a daemon, or written
// by a later step, whose own directory differs). "" when there is no working directory.
std::string absolute(const std::string& path) {
    if (path.empty() || path[0] == '/') return path;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return "";
    return std::string(cwd) + "/" + path;
}

// The programs and libraries are found relative to this executable, so an installed prefix
// can be moved (docs/install.md): first where the install rules put them, then the build
// tree's build/bin and build/lib.
std::string lib_dir() {
    std::string lib = exe_dir() + "/" UROCE_BIN_TO_LIB;
    if (access((lib + "/libibverbs.so.1").c_str(), R_OK) != 0) lib = exe_dir() + "/../lib";
    if (char* real = realpath(lib.c_str(), nullptr)) {
        lib = real;
        free(real);
    }
    return lib;
}

// `list` (a colon-separated path) with `value` in front, unless it is already in it.
std::string path_with(const std::string& value, const char* list) {
    std::string l = list ? list : "";
    if ((":" + l + ":").find(":" + value + ":") != std::string::npos) return l;
    return l.empty() ? value : value + ":" + l;
}

// Commands that ask the kernel about RDMA devices rather than libibverbs (iproute2's
// `rdma link`, which pyverbs runs): links to this program, which `uroce run` puts first on
// PATH (emu/sysview/rdma_tool.cpp). "" when they are not there.
std::string tools_dir() {
    std::string dir = exe_dir() + "/" UROCE_BIN_TO_DAEMON "/path";
    if (access((dir + "/rdma").c_str(), X_OK) != 0) dir = exe_dir() + "/../libexec/uroce/path";
    if (access((dir + "/rdma").c_str(), X_OK) != 0) return "";
    if (char* real = realpath(dir.c_str(), nullptr)) {
        dir = real;
        free(real);
    }
    return dir;
}

std::string daemon_path() {
    if (const char* d = getenv("UROCE_DAEMON")) return d;
    std::string installed = exe_dir() + "/" UROCE_BIN_TO_DAEMON "/uroced";
    if (access(installed.c_str(), X_OK) == 0) return installed;
    return exe_dir() + "/uroced";
}

std::string next_on_path(const char* tool) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    const char* path = getenv("PATH");
    std::string p = path ? path : "/usr/sbin:/usr/bin:/sbin:/bin";
    p += ":/usr/sbin:/sbin";  // where kmod's tools are, off a user's PATH
    for (size_t start = 0; start <= p.size();) {
        size_t end = p.find(':', start);
        if (end == std::string::npos) end = p.size();
        std::string cand = p.substr(start, end - start) + "/" + tool;
        start = end + 1;
        char real[4096];
        if (!realpath(cand.c_str(), real) || std::strcmp(real, self) == 0) continue;
        if (access(real, X_OK) == 0) return real;
    }
    return "";
}

}  // namespace uroce::cli
