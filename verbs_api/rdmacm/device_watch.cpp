// Notices that a device the library holds a CM connection to has gone away (crash, kill,
// `uroce stop`): its end of the control socket hangs up. One thread for the process, asleep
// in poll() on those sockets, started with the first device; it only looks for the hang-up
// (no POLLIN: the responses on the sockets belong to cm_call) and hands the device to
// device_gone(), which tells the ids, as the kernel's RDMA CM does on device removal.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "verbs_api/rdmacm/internal.h"

namespace uroce::rdmacm {
namespace {

std::mutex g_watch_mu;                           // the list below and the thread's start
auto& g_watched = *new std::vector<DevConn*>();  // never destroyed: the thread outlives main
int g_wake = -1;                                 // eventfd: the list changed

void watch_loop() {
    std::vector<pollfd> fds;
    std::vector<DevConn*> devs;
    for (;;) {
        {
            std::lock_guard<std::mutex> g(g_watch_mu);
            devs = g_watched;
        }
        fds.assign(1, pollfd{g_wake, POLLIN, 0});
        for (DevConn* d : devs) fds.push_back(pollfd{d->sock, POLLRDHUP, 0});
        if (poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
        if (fds[0].revents & POLLIN) {
            uint64_t v;
            if (read(g_wake, &v, sizeof v) < 0) {
                // Another read took it; the list is read again either way.
            }
        }
        for (size_t i = 1; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
            DevConn* d = devs[i - 1];
            {
                std::lock_guard<std::mutex> g(g_watch_mu);
                std::erase(g_watched, d);
            }
            device_gone(d);
        }
    }
}

}  // namespace

void watch_device(DevConn* d) {
    std::lock_guard<std::mutex> g(g_watch_mu);
    if (g_wake < 0) {
        g_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (g_wake < 0) return;  // no watcher: ids then learn of a dead device from a call
        std::thread(watch_loop).detach();
    }
    g_watched.push_back(d);
    uint64_t one = 1;
    if (write(g_wake, &one, sizeof one) < 0) {
        // The counter is full, so the thread is due to wake anyway.
    }
}

}  // namespace uroce::rdmacm
