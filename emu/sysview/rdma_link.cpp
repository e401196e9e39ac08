// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma link add NAME type rxe netdev IF` and `rdma link delete NAME` under `uroce run`: the
// set-up CI scripts written for kernel Soft-RoCE do, made into `uroce start --name NAME
// --addr IF` and `uroce stop NAME`. What rxe (and the kernel's nldev_newlink) refuse, this
// refuses with the same words and exit status (iproute2's "error: " and strerror of the
// kernel's errno, exit 1). docs/system-view.md, "rdma link add".
#include <linux/magic.h>
#include <net/if.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/protocol.h"
#include "emu/abi/runtime.h"
#include "emu/sysview/rdma_tool.h"
#include "net/endpoint.h"

namespace uroce::rdmatool {

namespace {

// iproute2's report of a kernel refusal: perror("error"), exit status 1.
int kernel_says(int err) {
    std::fprintf(stderr, "error: %s\n", std::strerror(err));
    return 1;
}

bool overlap(const std::vector<net::Endpoint>& a, const std::vector<net::Endpoint>& b) {
    for (const auto& x : a)
        for (const auto& y : b)
            if (x.same_addr(y)) return true;
    return false;
}

// `uroce ARGS...` (this program), its standard output dropped; its exit status.
int uroce(std::vector<std::string> args) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        if (FILE* null = std::freopen("/dev/null", "w", stdout); !null) _exit(1);
        args.insert(args.begin(), "uroce");
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

// The device `uroce run` started because none ran (UROCE_RUN_DEVICE), while no program
// holds it: a set-up script's `rdma link add` on its netdev replaces it, as the script asks
// for the device of that netdev; any other device there is rxe's "already configured".
bool replaceable(const abi::DeviceInfo& d) {
    const char* own = std::getenv("UROCE_RUN_DEVICE");
    if (!own || d.name != own) return false;
    std::string dump;
    if (abi::simple_request(d.name, abi::Op::kDump, &dump) != 0) return false;
    return dump.find("\ncounts sessions 0 ") != std::string::npos;
}

// In `uroce run`'s view (its /sys/class/infiniband a tmpfs), waits until the view has caught
// up with NAME's start or stop (the keeper resyncs on the device's info file): the kernel's
// `rdma link add` returns with the device's files there, and scripts look at once.
void wait_for_view(const std::string& name, bool present) {
    struct statfs fs;
    if (statfs("/sys/class/infiniband", &fs) != 0 || fs.f_type != TMPFS_MAGIC) return;
    const std::string dir = "/sys/class/infiniband/" + name;
    for (int i = 0; i < 1000; ++i) {  // 10 s: a loaded host's view takes a library start
        if ((access(dir.c_str(), F_OK) == 0) == present) return;
        usleep(10000);
    }
}

}  // namespace

// words: NAME [type TYPE [netdev IF]], iproute2's order.
int link_add(const std::vector<std::string>& words, int (*help)()) {
    if (words.empty()) {
        std::fprintf(stderr, "Please provide a link name to add.\n");
        return 1;
    }
    const std::string& name = words[0];
    // iproute2's parse, keyword by keyword: none left shows the help (and succeeds), another
    // word is an unknown parameter (also exit 0, as iproute2), a keyword without its value
    // an error.
    static const struct {
        const char* keyword;
        const char* missing;
    } kArgs[] = {{"type", "Please provide a link type name.\n"},
                 {"netdev", "Please provide a net device name.\n"}};
    std::string value[2];
    for (size_t k = 0, at = 1; k < 2; ++k, at += 2) {
        if (words.size() <= at) return help(), 0;
        if (words[at] != kArgs[k].keyword) {
            std::fprintf(stderr, "Unknown parameter '%s'.\n", words[at].c_str());
            return 0;
        }
        if (words.size() <= at + 1) {
            std::fputs(kArgs[k].missing, stderr);
            return 1;
        }
        value[k] = words[at + 1];
    }
    const std::string &type = value[0], &netdev = value[1];
    // The kernel's order: the name, the netdev, the link type (no module for any but rxe:
    // uroce is RoCE only, so siw is what a kernel without the siw module answers), then rxe's
    // one device per netdev, then the name taken (by a device that stays).
    if (name.empty() || name.find('%') != std::string::npos) return kernel_says(EINVAL);
    if (!if_nametoindex(netdev.c_str())) return kernel_says(ENODEV);
    if (type != "rxe") return kernel_says(EINVAL);
    std::vector<net::Endpoint> mine = net::address_list(netdev, 0);
    std::vector<std::string> replaced;
    bool name_taken = false;
    for (const auto& d : abi::list_devices()) {
        bool on_netdev = overlap(mine, net::address_list(d.addr, 0));
        if (on_netdev && !replaceable(d)) return kernel_says(EEXIST);
        if (on_netdev)
            replaced.push_back(d.name);
        else
            name_taken |= d.name == name;
    }
    if (name_taken) return kernel_says(ENFILE);
    if (mine.empty()) {
        // rxe makes the device and fills its GID table when addresses come; a uroce device
        // needs one to start with.
        std::fprintf(stderr, "error: %s has no IPv4 or IPv6 address (uroce needs one)\n",
                     netdev.c_str());
        return 1;
    }
    for (const std::string& r : replaced)
        if (uroce({"stop", r}) != 0) return kernel_says(EEXIST);
    if (uroce({"start", "--name", name, "--addr", netdev}) != 0) return 1;
    wait_for_view(name, true);
    return 0;
}

// words: NAME (a device of the view; any uroce device can be deleted, as any rxe one).
int link_delete(const std::vector<std::string>& words) {
    if (words.empty()) {
        std::fprintf(stderr, "Please provide device name.\n");
        return 1;
    }
    std::string name = words[0].substr(0, words[0].find('/'));
    if (words.size() > 1) {
        std::fprintf(stderr, "Unknown parameter %s\n", words[1].c_str());
        return 1;
    }
    for (const auto& d : abi::list_devices())
        if (d.name == name) {
            if (uroce({"stop", name}) != 0) return kernel_says(EIO);
            wait_for_view(name, false);
            return 0;
        }
    std::fprintf(stderr, "Wrong device name - %s\n", name.c_str());
    return 1;
}

}  // namespace uroce::rdmatool
