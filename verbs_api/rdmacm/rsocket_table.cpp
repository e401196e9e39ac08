// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The rsocket table: each socket is an eventfd of its own (a real descriptor, so rpoll can
// mix it with ordinary ones and librspreload can map the program's descriptors onto it),
// found by number without a lock. Creation, close and the calls that only read the socket.
#include <rdma/rsocket.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {
namespace {

// Two levels, 1024 x 1024 descriptors; a chunk is made when a socket first needs it and kept.
constexpr int kChunkBits = 10, kChunk = 1 << kChunkBits, kChunks = 1024;
std::atomic<Rsocket*>* g_chunks[kChunks];
std::mutex g_table_mu;  // making chunks

void copy_addr(sockaddr* dst, const sockaddr* src, socklen_t* len) {
    socklen_t size = src->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    memcpy(dst, src, std::min(*len, size));
    *len = size;
}

// rgetpeername / rgetsockname: a stream's CM addresses (the peer's once connected), a
// datagram socket's UDP ones.
int name_of(int socket, bool peer, sockaddr* addr, socklen_t* addrlen) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (!addr || !addrlen) return fail(EFAULT);
    if (rs->dg) return dgram_name(rs, peer, addr, addrlen);
    if (peer && !(rs->state & (kConnected | kDisconnected | kError))) return fail(ENOTCONN);
    copy_addr(addr, peer ? rdma_get_peer_addr(rs->cm_id) : rdma_get_local_addr(rs->cm_id), addrlen);
    return 0;
}

}  // namespace

Rsocket* lookup(int fd) {
    if (fd < 0 || fd >= kChunk * kChunks) return nullptr;
    std::atomic<Rsocket*>* c = __atomic_load_n(&g_chunks[fd >> kChunkBits], __ATOMIC_ACQUIRE);
    return c ? c[fd & (kChunk - 1)].load(std::memory_order_acquire) : nullptr;
}

void table_insert(Rsocket* rs) {
    std::lock_guard<std::mutex> g(g_table_mu);
    auto*& c = g_chunks[rs->fd >> kChunkBits];
    if (!c) __atomic_store_n(&c, new std::atomic<Rsocket*>[kChunk](), __ATOMIC_RELEASE);
    c[rs->fd & (kChunk - 1)].store(rs, std::memory_order_release);
}

void table_remove(Rsocket* rs) {
    if (rs->fd < 0) return;
    std::lock_guard<std::mutex> g(g_table_mu);
    g_chunks[rs->fd >> kChunkBits][rs->fd & (kChunk - 1)].store(nullptr);
}

void signal(Rsocket* rs) {
    uint64_t one = 1;
    (void)!write(rs->fd, &one, sizeof one);
}

void drain(Rsocket* rs) {
    uint64_t v;
    (void)!read(rs->fd, &v, sizeof v);
}

// The eventfd moved up (to FD_SETSIZE / 2 and above, or half the descriptor limit if that is
// lower): Debian's librspreload
// (rdma-core 44) maps select()'s results back by scanning descriptors upwards from 0 and
// takes the first whose mapping matches, so an rsocket numbered below the program's
// descriptor for it would be reported as itself. rdma-core's own sockets are mostly made
// after that descriptor; ours (an accepted one especially) may not be.
int high_fd(int fd) {
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY) return fd;
    // Below FD_SETSIZE while it can be, so rselect's fd_sets hold it.
    int base = int(std::min<rlim_t>(rl.rlim_cur / 2, FD_SETSIZE / 2));
    if (fd >= base) return fd;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (hi < 0) return fd;
    close(fd);
    return hi;
}

Rsocket* alloc_socket(const Rsocket* inherit, int type, int domain) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return nullptr;
    fd = high_fd(fd);
    auto* rs = new Rsocket();
    rs->fd = fd;
    rs->type = type;
    rs->domain = domain;
    if (inherit) {
        rs->sbuf_size = inherit->sbuf_size;
        rs->rbuf_size = inherit->rbuf_size;
        rs->sq_inline = inherit->sq_inline;
        rs->sq_size = inherit->sq_size;
        rs->rq_size = inherit->rq_size;
        rs->target_iomap_size = inherit->target_iomap_size;
        rs->fs_flags = inherit->fs_flags;
        rs->fd_flags = inherit->fd_flags;
        rs->so_opts = inherit->so_opts;
        rs->tcp_opts = inherit->tcp_opts;
    }
    return rs;
}

void free_socket(Rsocket* rs) {
    free_iomaps(rs);
    if (rs->cm_id) {
        if (rs->cm_id->qp) {
            if (rs->unack_cqe) ibv_ack_cq_events(rs->cm_id->recv_cq, rs->unack_cqe);
            rdma_destroy_qp(rs->cm_id);
        }
        rdma_destroy_id(rs->cm_id);
    }
    if (rs->smr) ibv_dereg_mr(rs->smr);
    if (rs->rmr) ibv_dereg_mr(rs->rmr);
    if (rs->target_mr) ibv_dereg_mr(rs->target_mr);
    free(rs->sbuf);
    free(rs->rbuf);
    free(rs->target_buffer_list);
    delete[] rs->rmsg;
    table_remove(rs);
    close(rs->fd);
    delete rs;
}

}  // namespace uroce::rsock

using namespace uroce::rsock;

extern "C" {

int rsocket(int domain, int type, int protocol) {
    int stype = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
    if ((domain != AF_INET && domain != AF_INET6) ||
        (stype != SOCK_STREAM && stype != SOCK_DGRAM) ||
        (stype == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
        (stype == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
        return fail(ENOTSUP);
    rdma_event_channel* ch = cm_channel();
    if (!ch) return -1;
    Rsocket* rs = alloc_socket(nullptr, stype, domain);
    if (!rs) return -1;
    rs->fd_flags = (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0;
    rs->fs_flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
    if (stype == SOCK_DGRAM) {
        if (dgram_open(rs)) {
            int e = errno;
            free_socket(rs);
            return fail(e);
        }
        table_insert(rs);
        return rs->fd;
    }
    if (rdma_create_id(ch, &rs->cm_id, rs, RDMA_PS_TCP)) {
        int e = errno;
        free_socket(rs);
        return fail(e);
    }
    rs->cm_id->route.addr.src_addr.sa_family = sa_family_t(domain);
    table_insert(rs);
    return rs->fd;
}

int rclose(int socket) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (rs->type == SOCK_DGRAM) {
        table_remove(rs);
        dgram_close(rs);
        free_socket(rs);
        return 0;
    }
    if (rs->state & kConnected) rshutdown(socket, SHUT_RDWR);
    keepalive_stop(rs);
    table_remove(rs);  // the number is free for reuse once closed; nobody finds it now
    release_cm(rs);
    free_socket(rs);
    return 0;
}

int rgetpeername(int socket, struct sockaddr* addr, socklen_t* addrlen) {
    return name_of(socket, true, addr, addrlen);
}

int rgetsockname(int socket, struct sockaddr* addr, socklen_t* addrlen) {
    return name_of(socket, false, addr, addrlen);
}

int rfcntl(int socket, int cmd, ... /* arg */) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    va_list ap;
    va_start(ap, cmd);
    int ret = 0;
    switch (cmd) {
    case F_GETFL: ret = rs->fs_flags | O_RDWR; break;
    case F_SETFL: rs->fs_flags = va_arg(ap, int) & ~O_ACCMODE; break;
    case F_GETFD: ret = rs->fd_flags; break;
    case F_SETFD: rs->fd_flags = va_arg(ap, int); break;
    default: ret = fail(ENOTSUP); break;
    }
    va_end(ap);
    return ret;
}

}  // extern "C"
