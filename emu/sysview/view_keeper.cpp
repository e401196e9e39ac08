// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce run`'s view follows the devices (docs/system-view.md, "Devices that come and go"):
// the process that made the view stays in its namespace, with what it needs to change the
// files (capabilities in the view's user namespace; CMD has none), while CMD runs as its
// child. A device's info file appears in the runtime directory once it takes requests and
// leaves when it stops; each change brings the view in step, as the kernel adds and removes
// a device's files. A device that dies without removing its file is found by a look every
// two seconds at which devices run.
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/runtime.h"
#include "emu/sysview/system_view.h"

namespace uroce::sysview {

namespace {

// The devices running now, by name and process (a cheap look: no library, no device asked).
std::vector<std::string> running() {
    std::vector<std::string> v;
    for (const auto& d : abi::list_devices()) v.push_back(d.name + " " + std::to_string(d.pid));
    return v;
}

}  // namespace

int follow(const std::string& libdir, pid_t cmd) {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGCHLD);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    int wd = -1;
    std::vector<std::string> last = running();
    bool reported = false;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(cmd, &st, WNOHANG);
        if (r == cmd) return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
        if (r < 0 && errno != EINTR) return 1;
        if (wd < 0 && ifd >= 0)
            wd = inotify_add_watch(ifd, abi::runtime_dir().c_str(),
                                   IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM);
        pollfd p[2] = {{sfd, POLLIN, 0}, {ifd, POLLIN, 0}};
        int n = poll(p, 2, 2000);
        bool look = n == 0;  // the periodic look
        if (n > 0 && (p[0].revents & POLLIN)) {
            signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == ssize_t(sizeof si))
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) kill(cmd, int(si.ssi_signo));
        }
        if (n > 0 && (p[1].revents & POLLIN)) {
            alignas(inotify_event) char buf[4096];
            ssize_t got;
            while ((got = read(ifd, buf, sizeof buf)) > 0)
                for (char* q = buf; q < buf + got;) {
                    auto* ev = reinterpret_cast<inotify_event*>(q);
                    if (ev->mask & IN_IGNORED) wd = -1;
                    if (ev->len && !abi::info_file_device(ev->name).empty()) look = true;
                    q += sizeof(inotify_event) + ev->len;
                }
        }
        if (!look) continue;
        std::vector<std::string> now = running();
        if (now == last) continue;
        last = now;
        if (std::string why = resync(libdir); !why.empty() && !reported) {
            std::fprintf(stderr, "uroce: the system view no longer follows the devices: %s\n",
                         why.c_str());
            reported = true;
        }
    }
}

}  // namespace uroce::sysview
