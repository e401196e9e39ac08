// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Datagram rsockets (SOCK_DGRAM) as rdma-core's: a UD QP per socket carries each datagram
// behind a ds_header (version 4, length 8, source port and IPv4 address); a UDP socket bound
// to the same address and port is the side channel that finds a peer's QP. Until the AH of a
// destination is known, datagrams go over UDP behind a ds_udp_header (tag, version, op,
// length, sender's QPN, sender's address); the receiving side's service thread answers with
// an RS_OP_CTRL header (its own QPN), makes an AH to the sender, and hands the datagram to
// its own socket through its QP. docs/rsockets.md, "Datagrams".
#include <arpa/inet.h>
#include <endian.h>
#include <rdma/rsocket.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {

struct Dest {
    sockaddr_in addr{};       // as IPv4 (the AH's)
    sockaddr_storage orig{};  // as the application named it (UDP's)
    socklen_t orig_len = 0;
    std::atomic<uint32_t> qpn{0};
    std::atomic<ibv_ah*> ah{nullptr};
};

struct Dgram {
    int udp = -1;
    uint8_t hdr[8]{};  // our ds_header: version 4, length 8, port, IPv4 (network order)
    sockaddr_in src{};
    ibv_ah* self_ah = nullptr;
    std::mutex dest_mu;  // dests (the application and the service thread)
    std::map<uint64_t, Dest*> dests;
    Dest* conn = nullptr;  // rconnect's destination
    Dest* last = nullptr;  // the last rsendto destination (slock): a repeat takes no other lock
    std::vector<uint32_t> free_slots;  // send slots (offsets into sbuf)
    struct Msg {
        uint32_t offset, length;
    };
    std::vector<Msg> msgs;  // received, not yet read (a ring of rq_size + 1)
    size_t head = 0, tail = 0;
    std::atomic<bool> ready{false};  // the QP exists (made by the first send, or receive)
};

namespace {

constexpr uint32_t kUdpTag = 0x55555555;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kSlot = kSndLowat;  // bytes per datagram, header included
constexpr uint8_t kHdrLen = 8, kUdpHdrLen = 16;

// Inside, every address is IPv4; an AF_INET6 socket (dual-stack, as getaddrinfo's passive
// answers often are) takes and reports IPv4-mapped addresses.
int to_v4(const sockaddr* a, socklen_t len, sockaddr_in* out) {
    if (a->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        *out = *reinterpret_cast<const sockaddr_in*>(a);
        return 0;
    }
    if (a->sa_family != AF_INET6 || len < sizeof(sockaddr_in6)) return fail(EAFNOSUPPORT);
    auto* a6 = reinterpret_cast<const sockaddr_in6*>(a);
    const uint8_t* b = a6->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    *out = {};
    out->sin_family = AF_INET;
    out->sin_port = a6->sin6_port;
    if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr)) return 0;
    if (IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) {
        out->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return 0;
    }
    if (memcmp(b, mapped, 12)) return fail(EAFNOSUPPORT);
    memcpy(&out->sin_addr.s_addr, b + 12, 4);
    return 0;
}

// a as the socket's family would name it; returns its length.
socklen_t from_v4(int domain, const sockaddr_in& a, sockaddr_storage* out) {
    *out = {};
    if (domain == AF_INET) {
        memcpy(out, &a, sizeof a);
        return sizeof a;
    }
    auto* a6 = reinterpret_cast<sockaddr_in6*>(out);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = a.sin_port;
    a6->sin6_addr.s6_addr[10] = a6->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&a6->sin6_addr.s6_addr[12], &a.sin_addr.s_addr, 4);
    return sizeof *a6;
}

int udp_name(Rsocket* rs, sockaddr_in* a) {
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(rs->dg->udp, reinterpret_cast<sockaddr*>(&ss), &len)) return -1;
    return to_v4(reinterpret_cast<sockaddr*>(&ss), len, a);
}

uint64_t key_of(const sockaddr_in& a) { return (uint64_t(a.sin_addr.s_addr) << 16) | a.sin_port; }

void format_hdr(uint8_t* h, const sockaddr_in& a) {
    h[0] = 4;
    h[1] = kHdrLen;
    memcpy(h + 2, &a.sin_port, 2);
    memcpy(h + 4, &a.sin_addr.s_addr, 4);
}

ibv_ah* make_ah(Rsocket* rs, uint32_t ipv4) {
    ibv_ah_attr a{};
    a.is_global = 1;
    a.grh.dgid.raw[10] = a.grh.dgid.raw[11] = 0xff;
    memcpy(&a.grh.dgid.raw[12], &ipv4, 4);
    a.grh.hop_limit = 64;
    a.port_num = rs->cm_id->port_num ? rs->cm_id->port_num : 1;
    return ibv_create_ah(rs->cm_id->qp->pd, &a);
}

int post_recv(Rsocket* rs, uint32_t offset) {
    ibv_sge sge{uintptr_t(rs->rbuf + offset), kGrh + kSlot, rs->rmr->lkey};
    ibv_recv_wr wr{}, *bad;
    wr.wr_id = kWrRecv | offset;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(rs->cm_id->qp, &wr, &bad);
}

// A UD send of header + payload from a send slot to (ah, qpn).
int post_ud(Rsocket* rs, const uint8_t* hdr, const void* buf, size_t len, ibv_ah* ah,
            uint32_t qpn) {
    Dgram* d = rs->dg;
    uint32_t off;
    {
        std::lock_guard<std::mutex> c(rs->cq_lock);  // completions give slots back
        if (d->free_slots.empty()) return fail(EAGAIN);
        off = d->free_slots.back();
        d->free_slots.pop_back();
        rs->sqe_avail--;
    }
    memcpy(rs->sbuf + off, hdr, kHdrLen);
    memcpy(rs->sbuf + off + kHdrLen, buf, len);
    ibv_sge sge{uintptr_t(rs->sbuf + off), uint32_t(kHdrLen + len), rs->smr->lkey};
    ibv_send_wr wr{}, *bad;
    wr.wr_id = off;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = sge.length <= rs->sq_inline ? IBV_SEND_INLINE : 0;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
    int e = ibv_post_send(rs->cm_id->qp, &wr, &bad);
    return e ? fail(e) : 0;
}

void poll_cq(Rsocket* rs) {
    Dgram* d = rs->dg;
    ibv_wc wc;
    while (ibv_poll_cq(rs->cm_id->recv_cq, 1, &wc) > 0) {
        uint32_t off = uint32_t(wc.wr_id);
        if (!(wc.wr_id & kWrRecv)) {
            d->free_slots.push_back(off);
            rs->sqe_avail++;
            continue;
        }
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {  // the QP failed: its device went away
            rs->err = EIO;
            rs->state = kError;
            continue;
        }
        const uint8_t* h = rs->rbuf + off + kGrh;
        bool ok = wc.status == IBV_WC_SUCCESS && wc.byte_len >= kGrh + kHdrLen && h[0] == 4 &&
                  h[1] == kHdrLen;
        size_t next = (d->tail + 1) % d->msgs.size();
        if (!ok || next == d->head) {  // malformed, or no room: dropped, as UDP would
            post_recv(rs, off);
            continue;
        }
        d->msgs[d->tail] = {off, wc.byte_len - kGrh};
        d->tail = next;
    }
}

bool have_data(Rsocket* rs) { return rs->dg->head != rs->dg->tail; }
bool can_send_dg(Rsocket* rs) { return rs->sqe_avail > 0; }

// Polls until test holds (or EAGAIN); sleeps on the completion channel and the eventfd.
int wait_dg(Rsocket* rs, bool nonblock, bool (*test)(Rsocket*)) {
    std::unique_lock<std::mutex> g(rs->cq_lock);
    bool drained = false;
    for (;;) {
        poll_cq(rs);
        if (test(rs)) return 0;
        if (rs->state & kError) return fail(rs->err ? rs->err : EIO);
        if (nonblock) return fail(EAGAIN);
        if (!wait_step(rs, g, &drained) && rs->closing) return fail(EBADF);
    }
}

int ensure_ep(Rsocket* rs, const sockaddr_in* to);

// The UDP service thread: every datagram socket's side channel.
std::mutex g_svc_mu;
std::vector<Rsocket*>* g_svc;
int g_svc_wake = -1;

Dest* get_dest(Rsocket* rs, const sockaddr_in& a, const sockaddr* orig, socklen_t orig_len) {
    std::lock_guard<std::mutex> g(rs->dg->dest_mu);
    Dest*& d = rs->dg->dests[key_of(a)];
    if (!d) {
        d = new Dest();
        d->addr = a;
        d->orig_len = std::min<socklen_t>(orig_len, sizeof d->orig);
        memcpy(&d->orig, orig, d->orig_len);
    }
    return d;
}

void send_udp(Rsocket* rs, const Dest& to, uint8_t op, const void* buf, size_t len, int flags) {
    uint8_t h[kUdpHdrLen];
    uint32_t tag = htobe32(kUdpTag), qpn = htobe32(rs->cm_id->qp->qp_num & 0xffffff);
    memcpy(h, &tag, 4);
    h[4] = 4;
    h[5] = op;
    h[6] = kUdpHdrLen;
    h[7] = 0;
    memcpy(h + 8, &qpn, 4);
    memcpy(h + 12, &rs->dg->src.sin_addr.s_addr, 4);
    iovec iov[2] = {{h, sizeof h}, {const_cast<void*>(buf), len}};
    msghdr m{};
    m.msg_name = const_cast<sockaddr_storage*>(&to.orig);
    m.msg_namelen = to.orig_len;
    m.msg_iov = iov;
    m.msg_iovlen = len ? 2 : 1;
    sendmsg(rs->dg->udp, &m, flags | MSG_NOSIGNAL);
}

void svc_datagram(Rsocket* rs) {
    uint8_t buf[kUdpHdrLen + kSlot];
    sockaddr_storage ss{};
    socklen_t flen = sizeof ss;
    ssize_t n = recvfrom(rs->dg->udp, buf, sizeof buf, MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&ss), &flen);
    sockaddr_in from;
    uint32_t tag;
    if (n < kUdpHdrLen || to_v4(reinterpret_cast<sockaddr*>(&ss), flen, &from)) return;
    memcpy(&tag, buf, 4);
    if (be32toh(tag) != kUdpTag || buf[4] != 4 || buf[6] != kUdpHdrLen) return;
    if (ensure_ep(rs, &from)) return;
    uint32_t qpn;
    memcpy(&qpn, buf + 8, 4);
    qpn = be32toh(qpn) & 0xffffff;
    Dest* d = get_dest(rs, from, reinterpret_cast<sockaddr*>(&ss), flen);
    if (buf[5] == kOpData) send_udp(rs, *d, kOpCtrl, nullptr, 0, 0);  // our QPN back
    if (!d->ah.load() || d->qpn != qpn) {
        ibv_ah* ah = make_ah(rs, from.sin_addr.s_addr);
        d->qpn = qpn;
        if (ibv_ah* old = d->ah.exchange(ah)) ibv_destroy_ah(old);  // not in use: qpn changed
    }
    if (buf[5] != kOpData) return;
    // The datagram itself, to our own QP, as if it had come that way.
    std::lock_guard<std::mutex> g(rs->slock);
    if (!can_send_dg(rs) && wait_dg(rs, true, can_send_dg)) return;  // full: dropped, as UDP
    uint8_t h[kHdrLen];
    format_hdr(h, from);
    post_ud(rs, h, buf + kUdpHdrLen, size_t(n) - kUdpHdrLen, rs->dg->self_ah,
            rs->cm_id->qp->qp_num);
}

void svc_thread() {
    std::vector<pollfd> fds;
    std::vector<Rsocket*> socks;
    for (;;) {
        {
            std::lock_guard<std::mutex> g(g_svc_mu);
            socks = *g_svc;
        }
        fds.assign(1, {g_svc_wake, POLLIN, 0});
        for (Rsocket* rs : socks) fds.push_back({rs->dg->udp, POLLIN, 0});
        if (poll(fds.data(), fds.size(), -1) <= 0) continue;
        if (fds[0].revents) {
            uint64_t v;
            (void)!read(g_svc_wake, &v, sizeof v);
            continue;  // the set changed: take it again
        }
        std::lock_guard<std::mutex> g(g_svc_mu);  // a socket is not freed under us
        for (size_t i = 1; i < fds.size(); ++i)
            if (fds[i].revents &&
                std::find(g_svc->begin(), g_svc->end(), socks[i - 1]) != g_svc->end())
                svc_datagram(socks[i - 1]);
    }
}

void svc_add(Rsocket* rs) {
    std::lock_guard<std::mutex> g(g_svc_mu);
    if (!g_svc) {
        g_svc = new std::vector<Rsocket*>();
        g_svc_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        std::thread(svc_thread).detach();
    }
    if (std::find(g_svc->begin(), g_svc->end(), rs) != g_svc->end()) return;
    g_svc->push_back(rs);
    uint64_t one = 1;
    (void)!write(g_svc_wake, &one, sizeof one);
}

// The local address a datagram to `to` leaves from (the bound one, or the route's).
int source_for(Rsocket* rs, const sockaddr_in& to, sockaddr_in* src) {
    if (udp_name(rs, src)) return -1;
    if (src->sin_addr.s_addr != htonl(INADDR_ANY)) return 0;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    sockaddr_in r{};
    socklen_t len = sizeof r;
    int ret = connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    if (!ret) ret = getsockname(s, reinterpret_cast<sockaddr*>(&r), &len);
    close(s);
    if (!ret) src->sin_addr = r.sin_addr;
    return ret;
}

// The UD QP, its buffers and receives, bound to src (rdma-core: ds_create_qp).
int create_qp(Rsocket* rs, const sockaddr_in& src) {
    Dgram* d = rs->dg;
    rs->sq_size = std::clamp<uint16_t>(rs->sq_size, 1, uint16_t(rs->sbuf_size / kSlot));
    rs->rq_size = std::clamp<uint16_t>(rs->rq_size, 1, uint16_t(rs->rbuf_size / kSlot));
    if (rdma_create_id(cm_channel(), &rs->cm_id, nullptr, RDMA_PS_UDP)) return -1;
    if (rdma_bind_addr(rs->cm_id, const_cast<sockaddr*>(reinterpret_cast<const sockaddr*>(&src))))
        return -1;
    ibv_comp_channel* cc = ibv_create_comp_channel(rs->cm_id->verbs);
    if (!cc) return -1;
    fcntl(cc->fd, F_SETFL, fcntl(cc->fd, F_GETFL) | O_NONBLOCK);
    ibv_cq* cq = ibv_create_cq(rs->cm_id->verbs, rs->sq_size + rs->rq_size, rs->cm_id, cc, 0);
    if (!cq) {
        ibv_destroy_comp_channel(cc);
        return -1;
    }
    rs->cm_id->recv_cq_channel = rs->cm_id->send_cq_channel = cc;
    rs->cm_id->recv_cq = rs->cm_id->send_cq = cq;
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_UD;
    qa.sq_sig_all = 1;
    qa.cap.max_send_wr = rs->sq_size;
    qa.cap.max_recv_wr = rs->rq_size;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = rs->sq_inline;
    if (rdma_create_qp(rs->cm_id, nullptr, &qa)) return -1;
    rs->sq_inline = uint16_t(qa.cap.max_inline_data);
    size_t sl = size_t(rs->sq_size) * kSlot, rl = size_t(rs->rq_size) * (kGrh + kSlot);
    rs->sbuf = static_cast<uint8_t*>(calloc(1, sl));
    rs->rbuf = static_cast<uint8_t*>(calloc(1, rl));
    if (!rs->sbuf || !rs->rbuf) return fail(ENOMEM);
    rs->smr = ibv_reg_mr(rs->cm_id->qp->pd, rs->sbuf, sl, IBV_ACCESS_LOCAL_WRITE);
    rs->rmr = ibv_reg_mr(rs->cm_id->qp->pd, rs->rbuf, rl, IBV_ACCESS_LOCAL_WRITE);
    d->self_ah = make_ah(rs, src.sin_addr.s_addr);
    if (!rs->smr || !rs->rmr || !d->self_ah) return -1;
    for (uint32_t i = 0; i < rs->sq_size; ++i) d->free_slots.push_back(i * kSlot);
    rs->sqe_avail = rs->sq_size;
    d->msgs.resize(rs->rq_size + 1);
    for (uint32_t i = 0; i < rs->rq_size; ++i)
        if (int e = post_recv(rs, i * (kGrh + kSlot))) return fail(e);
    d->src = src;
    format_hdr(d->hdr, src);
    rs->state = kConnectRdwr;
    return 0;
}

// Before the first datagram: a bound UDP socket (an ephemeral port if none) and the QP.
int ensure_ep(Rsocket* rs, const sockaddr_in* to) {
    if (rs->dg->ready.load(std::memory_order_acquire)) return 0;
    std::lock_guard<std::mutex> g(rs->cm_mu);  // the application and the service thread
    if (rs->dg->ready) return 0;
    sockaddr_in a{};
    if (udp_name(rs, &a)) return -1;
    if (!a.sin_port) {  // an ephemeral port, as UDP's first sendto
        sockaddr_storage any;
        a = {};
        a.sin_family = AF_INET;
        socklen_t len = from_v4(rs->domain, a, &any);
        if (rs->domain == AF_INET6) reinterpret_cast<sockaddr_in6*>(&any)->sin6_addr = in6addr_any;
        if (bind(rs->dg->udp, reinterpret_cast<sockaddr*>(&any), len)) return -1;
    }
    sockaddr_in src{};
    if (to ? source_for(rs, *to, &src) : udp_name(rs, &src)) return -1;
    if (create_qp(rs, src)) return -1;
    rs->dg->ready = true;
    signal(rs);  // a receiver waiting for the QP
    svc_add(rs);
    return 0;
}

}  // namespace

int dgram_open(Rsocket* rs) {
    rs->dg = new Dgram();
    rs->dg->udp = socket(rs->domain, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    return rs->dg->udp < 0 ? -1 : 0;
}

void dgram_close(Rsocket* rs) {
    Dgram* d = rs->dg;
    if (!d) return;
    rs->closing = true;
    {
        std::lock_guard<std::mutex> g(g_svc_mu);
        if (g_svc) std::erase(*g_svc, rs);
    }
    for (auto& [k, dest] : d->dests) {
        if (ibv_ah* ah = dest->ah.load()) ibv_destroy_ah(ah);
        delete dest;
    }
    if (d->self_ah) ibv_destroy_ah(d->self_ah);
    if (d->udp >= 0) close(d->udp);
    delete d;
    rs->dg = nullptr;
}

int dgram_bind(Rsocket* rs, const sockaddr* addr, socklen_t len) {
    sockaddr_in a;
    if (to_v4(addr, len, &a) || bind(rs->dg->udp, addr, len)) return -1;
    if (a.sin_addr.s_addr != htonl(INADDR_ANY)) return ensure_ep(rs, nullptr);
    svc_add(rs);  // the QP comes with the first datagram, sent or received
    return 0;
}

int dgram_connect(Rsocket* rs, const sockaddr* addr, socklen_t len) {
    sockaddr_in to;
    if (to_v4(addr, len, &to) || ensure_ep(rs, &to) || connect(rs->dg->udp, addr, len)) return -1;
    rs->dg->conn = get_dest(rs, to, addr, len);
    return 0;
}

ssize_t dgram_send(Rsocket* rs, const void* buf, size_t len, int flags, const sockaddr* to,
                   socklen_t tolen) {
    Dgram* d = rs->dg;
    sockaddr_in a;
    if (to && to_v4(to, tolen, &a)) return -1;
    if (!to && !d->conn) return fail(EDESTADDRREQ);
    if (len > kSlot - kHdrLen) return fail(EMSGSIZE);
    if (ensure_ep(rs, to ? &a : &d->conn->addr)) return -1;
    std::lock_guard<std::mutex> g(rs->slock);
    Dest* dest = d->conn;
    if (to) {
        if (!d->last || key_of(d->last->addr) != key_of(a)) d->last = get_dest(rs, a, to, tolen);
        dest = d->last;
    }
    ibv_ah* ah = dest->ah.load(std::memory_order_acquire);
    if (!ah) {
        send_udp(rs, *dest, kOpData, buf, len, flags & MSG_DONTWAIT);
        return ssize_t(len);
    }
    if (!can_send_dg(rs) && wait_dg(rs, nonblocking(rs, flags), can_send_dg)) return -1;
    return post_ud(rs, d->hdr, buf, len, ah, dest->qpn) ? -1 : ssize_t(len);
}

ssize_t dgram_recv(Rsocket* rs, void* buf, size_t len, int flags, sockaddr* from,
                   socklen_t* fromlen) {
    Dgram* d = rs->dg;
    while (!d->ready.load(std::memory_order_acquire)) {  // no datagram yet, either way
        if (nonblocking(rs, flags)) return fail(EAGAIN);
        drain(rs);
        pollfd p{rs->fd, POLLIN, 0};
        if (!d->ready) poll(&p, 1, kWakeMs);
    }
    std::lock_guard<std::mutex> g(rs->rlock);
    if (!have_data(rs) && wait_dg(rs, nonblocking(rs, flags), have_data)) return -1;
    std::lock_guard<std::mutex> c(rs->cq_lock);
    Dgram::Msg m = d->msgs[d->head];
    const uint8_t* h = rs->rbuf + m.offset + kGrh;
    size_t n = std::min<size_t>(len, m.length - kHdrLen);
    memcpy(buf, h + kHdrLen, n);
    if (from && fromlen) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        memcpy(&a.sin_port, h + 2, 2);
        memcpy(&a.sin_addr.s_addr, h + 4, 4);
        sockaddr_storage ss;
        socklen_t n = from_v4(rs->domain, a, &ss);
        memcpy(from, &ss, std::min(*fromlen, n));
        *fromlen = n;
    }
    if (!(flags & MSG_PEEK)) {
        d->head = (d->head + 1) % d->msgs.size();
        post_recv(rs, m.offset);
    }
    return ssize_t(n);
}

short dgram_revents(Rsocket* rs, short events) {
    if (!rs->dg->ready.load(std::memory_order_acquire)) return 0;
    std::lock_guard<std::mutex> g(rs->cq_lock);
    poll_cq(rs);
    short r = 0;
    if ((events & POLLIN) && have_data(rs)) r |= POLLIN;
    if ((events & POLLOUT) && can_send_dg(rs)) r |= POLLOUT;
    if (rs->state & kError) r |= POLLERR;  // the device went away
    return r;
}

int dgram_name(Rsocket* rs, bool peer, sockaddr* addr, socklen_t* len) {
    return peer ? getpeername(rs->dg->udp, addr, len) : getsockname(rs->dg->udp, addr, len);
}

int dgram_setsockopt(Rsocket* rs, int level, int name, const void* val, socklen_t len) {
    return setsockopt(rs->dg->udp, level, name, val, len);
}

int dgram_getsockopt(Rsocket* rs, int level, int name, void* val, socklen_t* len) {
    return getsockopt(rs->dg->udp, level, name, val, len);
}

// rsendmsg / rwritev: the buffers gathered into one datagram.
ssize_t dgram_sendv(Rsocket* rs, const iovec* iov, int iovcnt, int flags, const sockaddr* to,
                    socklen_t tolen) {
    uint8_t buf[kSlot];
    size_t len = 0;
    for (int i = 0; i < iovcnt; ++i) {
        if (len + iov[i].iov_len > sizeof buf - kHdrLen) return fail(EMSGSIZE);
        memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    return dgram_send(rs, buf, len, flags, to, tolen);
}

}  // namespace uroce::rsock
