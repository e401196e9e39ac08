// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Connection setup of stream rsockets: every rsocket's CM id is on one event channel of the
// process, read by one thread (as rdma-core's connect and listen service threads), which
// drives address and route resolution, connects, accepts and notes disconnections; the
// application's calls wait on the socket's eventfd for what they need. docs/rsockets.md.
#include <byteswap.h>
#include <endian.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {
namespace {

constexpr int kResolveMs = 2000;

std::once_flag g_once;
rdma_event_channel* g_ch = nullptr;
int g_ch_errno = 0;
// Held while the CM thread handles an event and while a socket is detached from its id, so
// no event reaches a socket being freed; also guards listeners' accept queues.
std::mutex g_cm_mu;

// rdma-core's 8-bit scale for the iomap size: values above 128 keep their high bits.
int value_to_scale(int v, int bits) {
    return v <= (1 << (bits - 1)) ? v : (1 << (bits - 1)) | (v >> bits);
}
int scale_to_value(int v, int bits) {
    return v <= (1 << (bits - 1)) ? v : (v & ~(1 << (bits - 1))) << bits;
}

void* zalloc_pages(size_t len) {
    long page = sysconf(_SC_PAGESIZE);
    len = (len + page - 1) / page * page;
    void* p = nullptr;
    if (posix_memalign(&p, page, len)) return nullptr;
    memset(p, 0, len);
    return p;
}

void format_conn_data(Rsocket* rs, ConnData* c) {
    memset(c, 0, sizeof *c);
    c->version = 1;
    c->flags = kConnFlagIomap | (__BYTE_ORDER == __BIG_ENDIAN ? kConnFlagNet : 0);
    c->credits = htobe16(rs->rq_size);
    c->target_iomap_size = uint8_t(value_to_scale(rs->target_iomap_size, 8));
    c->target_sgl.addr = htobe64(uintptr_t(rs->target_buffer_list));
    c->target_sgl.length = htobe32(kSglSize);
    c->target_sgl.key = htobe32(rs->target_mr->rkey);
    c->data_buf.addr = htobe64(uintptr_t(rs->rbuf));
    c->data_buf.length = htobe32(rs->rbuf_size >> 1);
    c->data_buf.key = htobe32(rs->rmr->rkey);
}

void save_conn_data(Rsocket* rs, const ConnData* c) {
    rs->remote_sgl.addr = be64toh(c->target_sgl.addr);
    rs->remote_sgl.length = be32toh(c->target_sgl.length);
    rs->remote_sgl.key = be32toh(c->target_sgl.key);
    rs->remote_sge = 1;
    bool host_net = __BYTE_ORDER == __BIG_ENDIAN;
    rs->swap_sgl = host_net != bool(c->flags & kConnFlagNet);
    if (c->flags & kConnFlagIomap) {
        rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(Sge) * rs->remote_sgl.length;
        rs->remote_iomap.length = uint32_t(scale_to_value(c->target_iomap_size, 8));
        rs->remote_iomap.key = rs->remote_sgl.key;
    }
    rs->target_sgl[0].addr = be64toh(c->data_buf.addr);
    rs->target_sgl[0].length = be32toh(c->data_buf.length);
    rs->target_sgl[0].key = be32toh(c->data_buf.key);
    rs->sseq_comp = be16toh(c->credits);
}

void set_state(Rsocket* rs, int st) {
    rs->state = st;
    signal(rs);
}

void connect_failed(Rsocket* rs, int e) {
    rs->err = e;
    set_state(rs, kConnectError);
}

// The active side's next step after an event (called with g_cm_mu held).
void active_event(Rsocket* rs, rdma_cm_event* ev) {
    switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        rs->state = kResolvingRoute;
        if (!rs->route.empty()) {
            if (!rdma_set_option(rs->cm_id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, rs->route.data(),
                                 socklen_t(rs->route.size())))
                return;
        } else if (!rdma_resolve_route(rs->cm_id, kResolveMs)) {
            return;
        }
        connect_failed(rs, errno);
        return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        if (create_ep(rs)) return connect_failed(rs, errno);
        ConnData cd;
        format_conn_data(rs, &cd);
        rdma_conn_param p{};
        p.private_data = &cd;
        p.private_data_len = sizeof cd;
        p.flow_control = 1;
        p.retry_count = 7;
        p.rnr_retry_count = 7;
        rs->state = kConnecting;
        if (rdma_connect(rs->cm_id, &p)) connect_failed(rs, errno);
        return;
    }
    case RDMA_CM_EVENT_ESTABLISHED: {
        auto* cd = static_cast<const ConnData*>(ev->param.conn.private_data);
        if (!cd || ev->param.conn.private_data_len < sizeof(ConnData) || cd->version != 1)
            return connect_failed(rs, ENOTSUP);
        save_conn_data(rs, cd);
        set_state(rs, kConnectRdwr);
        return;
    }
    case RDMA_CM_EVENT_REJECTED: return connect_failed(rs, ECONNREFUSED);
    case RDMA_CM_EVENT_ADDR_ERROR: return connect_failed(rs, EHOSTUNREACH);
    case RDMA_CM_EVENT_ROUTE_ERROR: return connect_failed(rs, ENETUNREACH);
    case RDMA_CM_EVENT_UNREACHABLE: return connect_failed(rs, ETIMEDOUT);
    case RDMA_CM_EVENT_CONNECT_ERROR: return connect_failed(rs, ECONNREFUSED);
    default: return;
    }
}

// A connection request on a listener: the new socket answers with its own buffers and
// waits for ESTABLISHED before raccept may hand it out. Returns the id to destroy on failure.
rdma_cm_id* abandon(Rsocket* rs, rdma_cm_id* id) {
    rdma_reject(id, nullptr, 0);
    if (rs) {
        id->context = nullptr;
        if (id->qp) rdma_destroy_qp(id);
        rs->cm_id = nullptr;
        free_socket(rs);
    }
    return id;
}

// A connection request on a listener: the new socket answers with its own buffers and
// waits for ESTABLISHED before raccept may hand it out. Returns the id to destroy on failure.
rdma_cm_id* request_event(Rsocket* l, rdma_cm_event* ev) {
    rdma_cm_id* id = ev->id;
    auto* req = static_cast<const ConnData*>(ev->param.conn.private_data);
    if (l->closing || l->state != kListening || !req ||
        ev->param.conn.private_data_len < sizeof(ConnData) || req->version != 1)
        return abandon(nullptr, id);
    Rsocket* rs = alloc_socket(l, SOCK_STREAM, l->domain);
    if (!rs) return abandon(nullptr, id);
    rs->cm_id = id;
    id->context = rs;
    if (create_ep(rs)) return abandon(rs, id);
    save_conn_data(rs, req);
    ConnData cd;
    format_conn_data(rs, &cd);
    rdma_conn_param p = ev->param.conn;
    p.private_data = &cd;
    p.private_data_len = sizeof cd;
    rs->state = kAccepting;
    if (rdma_accept(id, &p)) return abandon(rs, id);
    rs->listener = l;
    l->pending.push_back(rs);
    table_insert(rs);
    return nullptr;
}

// Returns a socket to free once the event is acknowledged (an accept that failed).
Rsocket* passive_event(Rsocket* rs, rdma_cm_event* ev) {
    Rsocket* l = rs->listener;
    switch (ev->event) {
    case RDMA_CM_EVENT_ESTABLISHED:
        rs->state = kConnectRdwr;
        if (l) {
            l->pending.remove(rs);
            l->accept_q.push_back(rs);
            signal(l);
        }
        return nullptr;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_DISCONNECTED:
        if (l) l->pending.remove(rs);
        rs->listener = nullptr;
        rs->cm_id->context = nullptr;
        return rs;
    default: return nullptr;
    }
}

void handle(rdma_cm_event* ev, Rsocket** to_free, rdma_cm_id** id_to_destroy) {
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        auto* l = static_cast<Rsocket*>(ev->listen_id->context);
        if (!l) {
            *id_to_destroy = abandon(nullptr, ev->id);
        } else {
            *id_to_destroy = request_event(l, ev);
        }
        return;
    }
    auto* rs = static_cast<Rsocket*>(ev->id->context);
    if (!rs) return;
    int st = rs->state;
    if (st == kAccepting) {
        *to_free = passive_event(rs, ev);
        return;
    }
    if (st & kOpening) return active_event(rs, ev);
    switch (ev->event) {
    case RDMA_CM_EVENT_DISCONNECTED:
        // The data path tells an orderly close (the peer's RS_CTRL_DISCONNECT came first)
        // from an abortive one once it has drained the CQ (rsocket_stream.cpp).
        rs->cm_gone = true;
        signal(rs);
        break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        rs->err = ENODEV;
        rs->cm_gone = true;
        set_state(rs, kError);
        break;
    default: break;
    }
}

void cm_thread() {
    for (;;) {
        rdma_cm_event* ev;
        if (rdma_get_cm_event(g_ch, &ev)) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return;
        }
        Rsocket* to_free = nullptr;
        rdma_cm_id* id_to_destroy = nullptr;
        {
            std::lock_guard<std::mutex> g(g_cm_mu);
            handle(ev, &to_free, &id_to_destroy);
        }
        rdma_ack_cm_event(ev);
        if (to_free) free_socket(to_free);
        if (id_to_destroy) rdma_destroy_id(id_to_destroy);
    }
}

}  // namespace

rdma_event_channel* cm_channel() {
    std::call_once(g_once, [] {
        g_ch = rdma_create_event_channel();
        if (!g_ch) {
            g_ch_errno = errno;
            return;
        }
        std::thread(cm_thread).detach();
    });
    if (!g_ch) errno = g_ch_errno;
    return g_ch;
}

int create_ep(Rsocket* rs) {
    rdma_cm_id* id = rs->cm_id;
    ibv_device_attr da;
    uint16_t max = kQpMax;
    if (!ibv_query_device(id->verbs, &da) && da.max_qp_wr < max) max = uint16_t(da.max_qp_wr);
    rs->sq_size = std::clamp<uint16_t>(rs->sq_size, kQpMin, max);
    rs->rq_size = std::clamp<uint16_t>(rs->rq_size, kQpMin, max);

    ibv_comp_channel* cc = ibv_create_comp_channel(id->verbs);
    if (!cc) return -1;
    int fl = fcntl(cc->fd, F_GETFL);
    fcntl(cc->fd, F_SETFL, fl | O_NONBLOCK);  // waiting is poll()'s job (rsocket_stream.cpp)
    ibv_cq* cq = ibv_create_cq(id->verbs, rs->sq_size + rs->rq_size, id, cc, 0);
    if (!cq) {
        ibv_destroy_comp_channel(cc);
        return -1;
    }
    id->recv_cq_channel = id->send_cq_channel = cc;
    id->recv_cq = id->send_cq = cq;

    ibv_qp_init_attr qa{};
    qa.qp_context = rs;
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 1;
    qa.cap.max_send_wr = rs->sq_size;
    qa.cap.max_recv_wr = rs->rq_size;
    qa.cap.max_send_sge = 2;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = rs->sq_inline;
    if (rdma_create_qp(id, nullptr, &qa)) return -1;  // rdma_destroy_qp frees the CQs too
    rs->sq_inline = uint16_t(qa.cap.max_inline_data);

    rs->rmsg = new (std::nothrow) Rsocket::Rmsg[rs->rq_size + 1]();
    size_t sbuf_total = rs->sbuf_size + (rs->sq_inline < sizeof(Sge) ? sizeof(Sge) * kCtrlSize : 0);
    rs->sbuf = static_cast<uint8_t*>(zalloc_pages(sbuf_total));
    size_t tlen = sizeof(Sge) * kSglSize + sizeof(IomapEntry) * rs->target_iomap_size;
    rs->target_buffer_list = static_cast<uint8_t*>(zalloc_pages(tlen));
    rs->rbuf = static_cast<uint8_t*>(zalloc_pages(rs->rbuf_size));
    if (!rs->rmsg || !rs->sbuf || !rs->target_buffer_list || !rs->rbuf) return fail(ENOMEM);
    ibv_pd* pd = id->qp->pd;
    int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    rs->smr = ibv_reg_mr(pd, rs->sbuf, sbuf_total, IBV_ACCESS_LOCAL_WRITE);
    rs->target_mr = ibv_reg_mr(pd, rs->target_buffer_list, tlen, rw);
    rs->rmr = ibv_reg_mr(pd, rs->rbuf, rs->rbuf_size, rw);
    if (!rs->smr || !rs->target_mr || !rs->rmr) return -1;
    rs->target_sgl = reinterpret_cast<volatile Sge*>(rs->target_buffer_list);
    if (rs->target_iomap_size)
        rs->target_iomap = reinterpret_cast<volatile IomapEntry*>(rs->target_sgl + kSglSize);

    rs->ssgl[0].addr = rs->ssgl[1].addr = uintptr_t(rs->sbuf);
    rs->ssgl[0].lkey = rs->ssgl[1].lkey = rs->smr->lkey;
    rs->sbuf_bytes_avail = rs->sbuf_size;
    rs->rbuf_free_offset = rs->rbuf_size >> 1;
    rs->rbuf_bytes_avail = rs->rbuf_size >> 1;
    rs->sqe_avail = rs->sq_size - int(rs->ctrl_max_seqno);
    rs->rseq_comp = rs->rq_size >> 1;
    for (int i = 0; i < rs->rq_size; ++i) {
        ibv_recv_wr wr{}, *bad;
        wr.wr_id = kWrRecv;
        if (int e = ibv_post_recv(id->qp, &wr, &bad)) return fail(e);
    }
    return 0;
}

int wait_connected(Rsocket* rs, bool nonblock) {
    for (;;) {
        int st = rs->state;
        if (st & kConnected) return 0;
        if (!(st & kOpening)) {
            if (st == kConnectError) {
                int e = rs->err ? rs->err : ECONNREFUSED;
                return fail(e);
            }
            return fail(st & (kDisconnected | kError) ? ECONNRESET : ENOTCONN);
        }
        if (nonblock) return fail(EINPROGRESS);
        drain(rs);
        if (rs->state & kOpening) {
            pollfd p{rs->fd, POLLIN, 0};
            poll(&p, 1, kWakeMs);
        }
    }
}

bool accept_ready(Rsocket* l) {
    std::lock_guard<std::mutex> g(g_cm_mu);
    return !l->accept_q.empty();
}

void release_cm(Rsocket* rs) {
    std::vector<Rsocket*> children;
    {
        std::lock_guard<std::mutex> g(g_cm_mu);
        rs->closing = true;
        if (rs->cm_id) rs->cm_id->context = nullptr;
        for (Rsocket* c : rs->pending) children.push_back(c);
        for (Rsocket* c : rs->accept_q) children.push_back(c);
        rs->pending.clear();
        rs->accept_q.clear();
        for (Rsocket* c : children) {
            c->listener = nullptr;
            c->cm_id->context = nullptr;
        }
    }
    for (Rsocket* c : children) free_socket(c);
}

}  // namespace uroce::rsock

using namespace uroce::rsock;

extern "C" {

int rbind(int socket, const struct sockaddr* addr, socklen_t addrlen) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (!addr) return fail(EFAULT);
    if (addrlen < sizeof(sockaddr_in)) return fail(EINVAL);
    if (rs->dg) return dgram_bind(rs, addr, addrlen);
    if (rs->state != kInit) return fail(EINVAL);
    if (rdma_bind_addr(rs->cm_id, const_cast<sockaddr*>(addr))) return -1;
    rs->state = kBound;
    return 0;
}

int rlisten(int socket, int backlog) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (rs->dg) return fail(EOPNOTSUPP);
    if (rs->state == kListening) return 0;
    if (rs->state != kBound && rs->state != kInit) return fail(EINVAL);
    if (rdma_listen(rs->cm_id, backlog)) return -1;
    rs->state = kListening;
    return 0;
}

int raccept(int socket, struct sockaddr* addr, socklen_t* addrlen) {
    Rsocket* l = lookup(socket);
    if (!l) return fail(EBADF);
    if (l->dg) return fail(EOPNOTSUPP);
    if (l->state != kListening) return fail(EINVAL);
    for (;;) {
        Rsocket* rs = nullptr;
        {
            std::lock_guard<std::mutex> g(g_cm_mu);
            if (!l->accept_q.empty()) {
                rs = l->accept_q.front();
                l->accept_q.pop_front();
                rs->listener = nullptr;
            }
        }
        if (rs) {
            if (addr && addrlen) rgetpeername(rs->fd, addr, addrlen);
            return rs->fd;
        }
        if (l->fs_flags & O_NONBLOCK) return fail(EAGAIN);
        drain(l);
        if (!accept_ready(l)) {
            pollfd p{l->fd, POLLIN, 0};
            poll(&p, 1, kWakeMs);
        }
    }
}

int rconnect(int socket, const struct sockaddr* addr, socklen_t addrlen) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (rs->dg) return addr ? dgram_connect(rs, addr, addrlen) : fail(EFAULT);
    int st = rs->state;
    if (st & kConnected) return fail(EISCONN);
    if (st & kOpening) return nonblocking(rs, 0) ? fail(EALREADY) : wait_connected(rs, false);
    if (st != kInit && st != kBound) return fail(st == kListening ? EINVAL : EISCONN);
    if (!addr) return fail(EFAULT);
    if (addrlen < sizeof(sockaddr_in) ||
        (addr->sa_family == AF_INET6 && addrlen < sizeof(sockaddr_in6)))
        return fail(EINVAL);
    sockaddr_storage dst{};
    memcpy(&dst, addr, std::min<size_t>(addrlen, sizeof dst));
    {
        std::lock_guard<std::mutex> g(g_cm_mu);  // the CM thread sees the state first
        rs->state = kResolvingAddr;
        if (rdma_resolve_addr(rs->cm_id, nullptr, reinterpret_cast<sockaddr*>(&dst), kResolveMs)) {
            int e = errno;
            rs->state = st;
            return fail(e == ENODEV ? ENETUNREACH : e);
        }
    }
    // Nonblocking: in progress even when the CM thread has already finished the handshake
    // (a loaded machine can run it before we look), as rdma-core's rsocket and TCP say; the
    // result is POLLOUT and SO_ERROR.
    if (nonblocking(rs, 0)) return fail(EINPROGRESS);
    int ret = wait_connected(rs, false);
    if (ret) rs->err = 0;  // reported here, as connect(2) does
    return ret;
}

}  // extern "C"
