// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rpoll and rselect over rsockets and ordinary descriptors together. An rsocket is ready by
// its state (data queued, room to send, a connection to accept, an error); to sleep, rpoll
// polls the socket's eventfd (the CM thread's doorbell) and, once connected, its CQ's
// completion channel, armed first; ordinary descriptors are polled as given.
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <time.h>

#include <cerrno>
#include <vector>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {
namespace {

short revents_of(Rsocket* rs, short events) {
    if (rs->dg) return dgram_revents(rs, events);
    int st = rs->state;
    if (st == kListening) return (events & POLLIN) && accept_ready(rs) ? POLLIN : 0;
    if (st & kOpening) return 0;
    if (st == kConnectError) return short((events & (POLLIN | POLLOUT)) | POLLERR);
    if (!(st & (kConnected | kDisconnected | kError))) return POLLHUP;  // as TCP unconnected
    poll_cq_once(rs);
    st = rs->state;
    short r = 0;
    if ((events & POLLIN) && conn_have_rdata(rs)) r |= POLLIN;
    if ((events & POLLOUT) && can_send(rs) && (st & kWritable)) r |= POLLOUT;
    // Hang-up (and error) once what arrived before it has been read: a reader polling for
    // the last bytes of a stream the peer closed after sending them still gets them.
    if (!(st & kConnected) && !have_rdata(rs)) r |= (st & kError) ? POLLERR | POLLHUP : POLLHUP;
    return r;
}

int check(pollfd* fds, nfds_t nfds) {
    int cnt = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
        fds[i].revents = 0;
        if (Rsocket* rs = lookup(fds[i].fd))
            fds[i].revents = revents_of(rs, fds[i].events);
        else if (fds[i].fd >= 0)
            ::poll(&fds[i], 1, 0);
        if (fds[i].revents) cnt++;
    }
    return cnt;
}

uint64_t now_us() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000 + uint64_t(t.tv_nsec) / 1000;
}

}  // namespace

}  // namespace uroce::rsock

using namespace uroce::rsock;

extern "C" {

int rpoll(struct pollfd* fds, nfds_t nfds, int timeout) {
    if (nfds && !fds) return fail(EFAULT);
    // Two slots per descriptor (an rsocket's eventfd and completion channel), reused.
    thread_local std::vector<pollfd> rfds;
    uint64_t start = now_us();
    for (;;) {
        int n = check(fds, nfds);
        if (n || !timeout) return n;
        if (rfds.size() < 2 * nfds) rfds.resize(2 * nfds);
        // Arm and look once more before sleeping: what came in between is seen now.
        for (nfds_t i = 0; i < nfds; ++i) {
            pollfd* r = &rfds[2 * i];
            r[0] = {fds[i].fd, fds[i].events, 0};
            r[1] = {-1, 0, 0};
            Rsocket* rs = lookup(fds[i].fd);
            if (!rs) continue;
            drain(rs);
            r[0] = {rs->fd, POLLIN, 0};
            if ((rs->state & (kConnected | kDisconnected | kError)) && rs->cm_id->qp) {
                std::lock_guard<std::mutex> g(rs->cq_lock);
                arm_cq(rs);
                r[1] = {rs->cm_id->recv_cq_channel->fd, POLLIN, 0};
            }
        }
        n = check(fds, nfds);
        if (n) return n;
        int sleep = kWakeMs;
        if (timeout > 0) {
            // Microseconds: a 1 ms timeout sleeps its millisecond, however late in one it began.
            int64_t rest = int64_t(timeout) * 1000 - int64_t(now_us() - start);
            if (rest <= 0) return 0;
            if (rest < int64_t(sleep) * 1000) sleep = int((rest + 999) / 1000);
        }
        int r = ::poll(rfds.data(), 2 * nfds, sleep);
        if (r < 0) return -1;
        for (nfds_t i = 0; i < nfds; ++i) {
            Rsocket* rs = lookup(fds[i].fd);
            if (!rs) {
                fds[i].revents = rfds[2 * i].revents;
                continue;
            }
            if (rfds[2 * i + 1].revents) {  // POLLHUP too: the device is gone
                std::lock_guard<std::mutex> g(rs->cq_wait_lock);
                take_cq_event(rs);
            }
        }
        // Ordinary descriptors that fired are reported with the rsockets' state.
        int cnt = 0;
        for (nfds_t i = 0; i < nfds; ++i) {
            if (Rsocket* rs = lookup(fds[i].fd)) fds[i].revents = revents_of(rs, fds[i].events);
            if (fds[i].revents) cnt++;
        }
        if (cnt) return cnt;
    }
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
            struct timeval* timeout) {
    if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
        short ev = 0;
        if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
        if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
        if (ev || (exceptfds && FD_ISSET(fd, exceptfds))) fds.push_back({fd, ev, 0});
    }
    int ms = timeout ? int(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
    int ret = rpoll(fds.data(), fds.size(), ms);
    if (ret < 0) return ret;
    if (readfds) FD_ZERO(readfds);
    if (writefds) FD_ZERO(writefds);
    if (exceptfds) FD_ZERO(exceptfds);
    int cnt = 0;
    for (const pollfd& p : fds) {
        if (readfds && (p.revents & (POLLIN | POLLHUP | POLLERR)) && (p.events & POLLIN)) {
            FD_SET(p.fd, readfds);
            cnt++;
        }
        if (writefds && (p.revents & (POLLOUT | POLLERR)) && (p.events & POLLOUT)) {
            FD_SET(p.fd, writefds);
            cnt++;
        }
        if (exceptfds && (p.revents & POLLPRI)) {
            FD_SET(p.fd, exceptfds);
            cnt++;
        }
    }
    return cnt;
}

}  // extern "C"
