// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Wildcard listeners take devices started after them, as the kernel's RDMA CM attaches
// every listener on its listen-any list to a device added later (cma_add_one): a thread of
// the library's, started with the first wildcard listener, watches the runtime directory,
// where a device's info file appears (renamed into place) once it takes requests, and
// makes each wildcard listener listen on each new device of its families. A device on
// which the port is taken is left out, as the kernel leaves it. docs/cm.md, "Listeners".
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_addr.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

std::mutex g_listen_mu;

namespace {

// Each wildcard listener on each running device of its families it is not on yet.
void attach_waiting() {
    std::lock_guard<std::mutex> lg(g_listen_mu);
    sync_devices();
    std::vector<DevConn*> devs = all_devs();
    std::vector<Id*> listeners;
    {
        std::lock_guard<std::mutex> g(g_mu);
        for (auto& [k, id] : g_ids)
            if ((k >> 32) == kLocalTag && id->listening && !id->dev) listeners.push_back(id);
    }
    // An id in g_ids stays alive while g_listen_mu is held: rdma_destroy_id takes it first.
    // A device on which the port is taken (or that went away) is left out; the others
    // keep listening.
    for (Id* id : listeners) {
        const bool afonly = effective_afonly(id);
        for (DevConn* d : devs) {
            bool on = std::any_of(id->listens.begin(), id->listens.end(),
                                  [d](const auto& l) { return l.first == d; });
            if (!on && listens_on(id->bind_family, afonly, d->addr)) listen_on_dev(id, d);
        }
    }
}

// The watching thread: forever, as the library's device table lives as long as the process.
void watch() {
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0) return;
    int wd = -1;
    alignas(inotify_event) char buf[4096];
    for (;;) {
        if (wd < 0) {
            // The directory may not exist yet (no device ever started): look again soon.
            wd = inotify_add_watch(fd, abi::runtime_dir().c_str(),
                                   IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF);
            if (wd < 0) {
                usleep(200 * 1000);
                continue;
            }
            attach_waiting();  // started while we were not watching
        }
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) continue;
        bool arrived = false;
        for (char* p = buf; p < buf + n;) {
            auto* ev = reinterpret_cast<inotify_event*>(p);
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                inotify_rm_watch(fd, wd);
                wd = -1;
            } else if ((ev->mask & (IN_MOVED_TO | IN_CREATE)) && ev->len &&
                       !abi::info_file_device(ev->name).empty()) {
                arrived = true;
            }
            p += sizeof(inotify_event) + ev->len;
        }
        if (arrived) attach_waiting();
    }
}

}  // namespace

void watch_for_devices() {
    static std::once_flag once;
    std::call_once(once, [] { std::thread(watch).detach(); });
}

}  // namespace uroce::rdmacm
