// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The stream data path: data goes as RDMA WRITE WITH IMMEDIATE into the peer's receive
// buffer (immediate: op and length), credits come back as target SGL updates and sequence
// numbers, control messages (shutdown, disconnect) as immediates with no data. Every send
// is signaled; the completion returns its room in the send ring and queue. Nothing here
// allocates; a call takes the socket's send or receive lock (uncontended: no system call).
#include <byteswap.h>
#include <endian.h>
#include <rdma/rsocket.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {
namespace {

uint64_t polling_time_us() {
    uint64_t us = 10;
    if (const char* env = getenv("RS_POLLING_TIME")) return strtoull(env, nullptr, 10);
    if (FILE* f = fopen("/etc/rdma/rsocket/polling_time", "r")) {
        if (fscanf(f, "%lu", &us) != 1) us = 10;
        fclose(f);
    }
    return us;
}

int post_msg(Rsocket* rs, uint32_t msg) { return post_write_msg(rs, nullptr, 0, msg, 0, 0, 0); }

bool ctrl_avail(Rsocket* rs) { return rs->ctrl_seqno != rs->ctrl_max_seqno; }

// Hands the peer the free half of the receive buffer (an SGE written into its target SGL)
// or, when no half is free, only new credits (sequence numbers).
void send_credits(Rsocket* rs) {
    rs->ctrl_seqno++;
    rs->rseq_comp = uint16_t(rs->rseq_no + (rs->rq_size >> 1));
    uint32_t msg = msg_set(kOpSgl, uint16_t(rs->rseq_no + rs->rq_size));
    if (rs->rbuf_bytes_avail < (rs->rbuf_size >> 1)) {
        post_msg(rs, msg);
        return;
    }
    Sge sge;
    sge.addr = uintptr_t(&rs->rbuf[rs->rbuf_free_offset]);
    sge.key = rs->rmr->rkey;
    sge.length = rs->rbuf_size >> 1;
    if (rs->swap_sgl) {
        sge.addr = bswap_64(sge.addr);
        sge.key = bswap_32(sge.key);
        sge.length = bswap_32(sge.length);
    }
    ibv_sge isge;
    int flags = IBV_SEND_INLINE;
    if (rs->sq_inline < sizeof sge) {
        // A slot of its own after the send ring, one per control message in flight.
        void* slot = rs->sbuf + rs->sbuf_size + sizeof(Sge) * (rs->ctrl_seqno & (kCtrlSize - 1));
        memcpy(slot, &sge, sizeof sge);
        isge = {uintptr_t(slot), sizeof sge, rs->smr->lkey};
        flags = 0;
    } else {
        isge = {uintptr_t(&sge), sizeof sge, 0};
    }
    post_write_msg(rs, &isge, 1, msg, flags, rs->remote_sgl.addr + rs->remote_sge * sizeof(Sge),
                   rs->remote_sgl.key);
    rs->rbuf_bytes_avail -= rs->rbuf_size >> 1;
    rs->rbuf_free_offset += rs->rbuf_size >> 1;
    if (rs->rbuf_free_offset >= rs->rbuf_size) rs->rbuf_free_offset = 0;
    if (++rs->remote_sge == int(rs->remote_sgl.length)) rs->remote_sge = 0;
}

void update_credits(Rsocket* rs) {
    if ((rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1) ||
         int16_t(rs->rseq_no - rs->rseq_comp) >= 0) &&
        ctrl_avail(rs) && (rs->state & kConnected))
        send_credits(rs);
}

void set_error(Rsocket* rs, int e) {
    rs->err = e;
    rs->state = kError;
}

int poll_cq(Rsocket* rs) {
    // Read before polling: a DISCONNECTED with the CQ empty afterwards and no control
    // message seen means the peer went away without closing (killed): ECONNRESET.
    bool gone = rs->cm_gone.load(std::memory_order_acquire);
    ibv_wc wc;
    int ret, rcnt = 0;
    while ((ret = ibv_poll_cq(rs->cm_id->recv_cq, 1, &wc)) > 0) {
        if (wc.wr_id & kWrRecv) {
            if (wc.status != IBV_WC_SUCCESS) continue;
            rcnt++;
            uint32_t msg = be32toh(wc.imm_data);
            switch (msg_op(msg)) {
            case kOpSgl: rs->sseq_comp = uint16_t(msg_data(msg)); break;
            case kOpIomapSgl: break;  // the peer's iomap entry is in place
            case kOpCtrl:
                if (msg_data(msg) == kCtrlDisconnect) {
                    rs->state = kDisconnected;
                    return 0;
                }
                if (msg_data(msg) == kCtrlShutdown) {
                    if (rs->state & kWritable) {
                        rs->state &= ~kReadable;
                    } else {
                        rs->state = kDisconnected;
                        return 0;
                    }
                }
                break;
            case kOpWrite: break;
            default:
                rs->rmsg[rs->rmsg_tail] = {msg_op(msg), msg_data(msg)};
                if (++rs->rmsg_tail == rs->rq_size + 1) rs->rmsg_tail = 0;
                break;
            }
        } else {
            uint32_t data = uint32_t(wc.wr_id);
            switch (msg_op(data)) {
            case kOpSgl: rs->ctrl_max_seqno++; break;
            case kOpCtrl:
                rs->ctrl_max_seqno++;
                if (msg_data(data) == kCtrlDisconnect) rs->state = kDisconnected;
                break;
            case kOpIomapSgl:
                rs->sqe_avail++;
                rs->sbuf_bytes_avail += sizeof(IomapEntry);
                break;
            default:
                rs->sqe_avail++;
                rs->sbuf_bytes_avail += msg_data(data);
                break;
            }
            if (wc.status != IBV_WC_SUCCESS && (rs->state & kConnected))
                set_error(rs, wc.status == IBV_WC_WR_FLUSH_ERR ? EIO : ECONNRESET);
        }
    }
    if (rs->state & kConnected) {
        while (!ret && rcnt--) {
            ibv_recv_wr wr{}, *bad;
            wr.wr_id = kWrRecv;
            ret = ibv_post_recv(rs->cm_id->qp, &wr, &bad);
        }
        if (ret) set_error(rs, ret > 0 ? ret : EIO);
        if (gone && (rs->state & kConnected)) set_error(rs, ECONNRESET);
    }
    return ret < 0 ? fail(EIO) : 0;
}

// Copies len bytes into the send ring (wrapping: two SGEs) and advances it.
template <class Copy>
int stage(Rsocket* rs, uint32_t len, ibv_sge* sg, Copy copy) {
    uint32_t left = uint32_t(uintptr_t(rs->sbuf + rs->sbuf_size) - rs->ssgl[0].addr);
    sg[0] = rs->ssgl[0];
    if (len <= left) {
        copy(reinterpret_cast<void*>(sg[0].addr), len);
        sg[0].length = len;
        rs->ssgl[0].addr = len < left ? rs->ssgl[0].addr + len : uintptr_t(rs->sbuf);
        return 1;
    }
    sg[0].length = left;
    copy(reinterpret_cast<void*>(sg[0].addr), left);
    sg[1] = {uintptr_t(rs->sbuf), len - left, rs->smr->lkey};
    copy(rs->sbuf, len - left);
    rs->ssgl[0].addr = uintptr_t(rs->sbuf) + (len - left);
    return 2;
}

// One data message into the peer's current target buffer (rdma-core's rs_write_data).
int write_data(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t len, int flags) {
    rs->sseq_no++;
    rs->sqe_avail--;
    rs->sbuf_bytes_avail -= len;
    volatile Sge& t = rs->target_sgl[rs->target_sge];
    uint64_t addr = t.addr;
    uint32_t rkey = t.key;
    t.addr = addr + len;
    t.length = t.length - len;
    if (!t.length && ++rs->target_sge == kSglSize) rs->target_sge = 0;
    return post_write_msg(rs, sgl, nsge, msg_set(kOpData, len), flags, addr, rkey);
}

int send_error(Rsocket* rs) {
    return fail(rs->state & kError ? (rs->err ? rs->err : ECONNRESET) : EPIPE);
}

}  // namespace

// A data call on a socket still connecting waits for it (or EAGAIN); never connected: ENOTCONN.
int io_ready(Rsocket* rs, int flags) {
    if (rs->state & kOpening) {
        if (wait_connected(rs, nonblocking(rs, flags))) {
            if (errno == EINPROGRESS) errno = EAGAIN;
            return -1;
        }
    }
    if (!(rs->state & (kConnected | kDisconnected | kError))) return fail(ENOTCONN);
    return 0;
}

namespace {

// Common to rsend and rsendv: `copy(dst, n)` takes the next n bytes of the caller's data.
template <class Copy>
ssize_t send_stream(Rsocket* rs, size_t len, int flags, const void* flat, Copy copy) {
    if (io_ready(rs, flags)) return -1;
    std::lock_guard<std::mutex> g(rs->slock);
    size_t left = len;
    uint32_t olen = kOlapStart;
    int ret = 0;
    if (rs->iomap_pending) ret = send_iomaps(rs, flags);
    while (!ret && left) {
        if (!(rs->state & kWritable)) {
            ret = send_error(rs);
            break;
        }
        if (!can_send(rs)) {
            ret = get_comp(rs, nonblocking(rs, flags), conn_can_send);
            if (ret) break;
            if (!(rs->state & kWritable)) {
                ret = send_error(rs);
                break;
            }
        }
        uint32_t x = next_xfer(rs, left, &olen, rs->target_sgl[rs->target_sge].length);
        ibv_sge sg[2];
        if (flat && x <= rs->sq_inline) {
            sg[0] = {uintptr_t(flat) + (len - left), x, 0};
            copy(nullptr, x);  // advance the caller's position only
            ret = write_data(rs, sg, 1, x, IBV_SEND_INLINE);
        } else {
            int n = stage(rs, x, sg, copy);
            ret = write_data(rs, sg, n, x, x <= rs->sq_inline ? IBV_SEND_INLINE : 0);
        }
        if (ret) break;
        left -= x;
    }
    return (ret && left == len) ? ret : ssize_t(len - left);
}

ssize_t send_iov(int socket, const struct iovec* iov, int iovcnt, int flags) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (iovcnt < 0 || (iovcnt && !iov)) return fail(EINVAL);
    if (rs->dg) return dgram_sendv(rs, iov, iovcnt, flags, nullptr, 0);
    size_t len = 0;
    for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
    const iovec* cur = iov;
    size_t off = 0;
    return send_stream(rs, len, flags, nullptr, [&](void* dst, size_t n) {
        while (n) {
            size_t k = std::min(n, cur->iov_len - off);
            memcpy(dst, static_cast<const uint8_t*>(cur->iov_base) + off, k);
            dst = static_cast<uint8_t*>(dst) + k;
            n -= k;
            off += k;
            if (off == cur->iov_len) {
                ++cur;
                off = 0;
            }
        }
    });
}

// Copies up to len received bytes (consuming them unless peek); returns the count.
size_t copy_out(Rsocket* rs, uint8_t* buf, size_t len, bool peek) {
    int head = rs->rmsg_head;
    uint32_t off = rs->rbuf_offset;
    size_t left = len;
    while (left && head != rs->rmsg_tail) {
        uint32_t rsize;
        if (left < rs->rmsg[head].data) {
            rsize = uint32_t(left);
            if (!peek) rs->rmsg[head].data -= rsize;
        } else {
            rsize = rs->rmsg[head].data;
            if (!peek) rs->rseq_no++;
            if (++head == rs->rq_size + 1) head = 0;
        }
        left -= rsize;
        uint32_t end = rs->rbuf_size - off;
        if (rsize > end) {
            memcpy(buf, &rs->rbuf[off], end);
            buf += end;
            rsize -= end;
            off = 0;
            if (!peek) rs->rbuf_bytes_avail += end;
        }
        memcpy(buf, &rs->rbuf[off], rsize);
        buf += rsize;
        off += rsize;
        if (!peek) rs->rbuf_bytes_avail += rsize;
    }
    if (!peek) {
        rs->rmsg_head = head;
        rs->rbuf_offset = off;
    }
    return len - left;
}

}  // namespace

int stage_copy(Rsocket* rs, const void* src, uint32_t len, ibv_sge* sg) {
    auto* p = static_cast<const uint8_t*>(src);
    return stage(rs, len, sg, [&](void* dst, size_t n) {
        memcpy(dst, p, n);
        p += n;
    });
}

uint32_t next_xfer(Rsocket* rs, size_t left, uint32_t* olen, uint32_t room) {
    uint32_t x;
    if (*olen < left) {
        x = *olen;
        if (*olen < kMaxTransfer) *olen <<= 1;
    } else {
        x = uint32_t(left);
    }
    uint32_t avail = rs->sbuf_bytes_avail;
    if (x > avail) x = avail;
    if (x > room) x = room;
    return x;
}

namespace {
// Every message is an RDMA WRITE (WITH IMMEDIATE: the immediate is the message, which the
// completion's wr_id repeats); post_msg's have no data.
int post_rdma(Rsocket* rs, ibv_wr_opcode op, ibv_sge* sgl, int nsge, uint32_t msg, int flags,
              uint64_t addr, uint32_t rkey) {
    ibv_send_wr wr{}, *bad;
    wr.wr_id = msg;
    wr.sg_list = sgl;
    wr.num_sge = nsge;
    wr.opcode = op;
    wr.send_flags = flags;
    if (op == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htobe32(msg);
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    int e = ibv_post_send(rs->cm_id->qp, &wr, &bad);
    return e ? fail(e) : 0;
}
}  // namespace

int post_write(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t wr_data, int flags, uint64_t addr,
               uint32_t rkey) {
    return post_rdma(rs, IBV_WR_RDMA_WRITE, sgl, nsge, wr_data, flags, addr, rkey);
}

int post_write_msg(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t msg, int flags, uint64_t addr,
                   uint32_t rkey) {
    return post_rdma(rs, IBV_WR_RDMA_WRITE_WITH_IMM, sgl, nsge, msg, flags, addr, rkey);
}

// The peer must have room for the data and for its notification (a receive and an rmsg
// slot): our sequence number may not reach the credit it granted.
bool can_send(Rsocket* rs) {
    return rs->sqe_avail && rs->sbuf_bytes_avail >= kSndLowat && rs->sseq_no != rs->sseq_comp &&
           rs->target_sgl[rs->target_sge].length != 0;
}
bool conn_can_send(Rsocket* rs) { return can_send(rs) || !(rs->state & kWritable); }
bool have_rdata(Rsocket* rs) { return rs->rmsg_head != rs->rmsg_tail; }
bool conn_have_rdata(Rsocket* rs) { return have_rdata(rs) || !(rs->state & kReadable); }
bool conn_can_send_ctrl(Rsocket* rs) { return ctrl_avail(rs) || !(rs->state & kConnected); }
bool all_sends_done(Rsocket* rs) {
    return int(rs->ctrl_max_seqno - rs->ctrl_seqno) + rs->sqe_avail.load() == rs->sq_size ||
           !(rs->state & kConnected);
}

void arm_cq(Rsocket* rs) {
    if (rs->cq_armed) return;
    ibv_req_notify_cq(rs->cm_id->recv_cq, 0);
    rs->cq_armed = true;
}

void take_cq_event(Rsocket* rs) {
    ibv_cq* cq;
    void* ctx;
    if (ibv_get_cq_event(rs->cm_id->recv_cq_channel, &cq, &ctx)) {
        // Not "nothing yet": the channel is gone with its device (EIO). The socket fails,
        // as rdma-core's, rather than poll a dead channel forever.
        if (errno != EAGAIN && errno != EINTR) set_error(rs, EIO);
        return;
    }
    if (++rs->unack_cqe >= rs->sq_size + rs->rq_size) {
        ibv_ack_cq_events(rs->cm_id->recv_cq, rs->unack_cqe);
        rs->unack_cqe = 0;
    }
    rs->cq_armed = false;
}

void poll_cq_once(Rsocket* rs) {
    std::lock_guard<std::mutex> g(rs->cq_lock);
    update_credits(rs);
    poll_cq(rs);
    update_credits(rs);
}

bool wait_step(Rsocket* rs, std::unique_lock<std::mutex>& g, bool* drained) {
    if (!rs->cq_armed) {
        arm_cq(rs);
        return true;
    }
    if (!*drained) {  // the doorbell: only what rings from now on wakes us
        drain(rs);
        *drained = true;
        return true;
    }
    *drained = false;
    g.unlock();
    {
        std::lock_guard<std::mutex> w(rs->cq_wait_lock);
        pollfd p[2] = {{rs->cm_id->recv_cq_channel->fd, POLLIN, 0}, {rs->fd, POLLIN, 0}};
        poll(p, 2, kWakeMs);
        if (p[0].revents) take_cq_event(rs);  // POLLHUP too: the device is gone
    }
    g.lock();
    return false;
}

// Polls until test holds; blocking, it arms the CQ, drains the socket's doorbell, polls once
// more (so nothing that came before is missed) and sleeps on both.
int process_cq(Rsocket* rs, bool nonblock, Test test) {
    std::unique_lock<std::mutex> g(rs->cq_lock);
    bool drained = false;
    int ret;
    for (;;) {
        update_credits(rs);
        ret = poll_cq(rs);
        if (test(rs)) {
            ret = 0;
            break;
        }
        if (ret) break;
        if (nonblock) {
            ret = fail(EWOULDBLOCK);
            break;
        }
        update_credits(rs);
        wait_step(rs, g, &drained);
    }
    update_credits(rs);
    return ret;
}

// Busy-polls for polling_time microseconds (rdma-core's /etc/rdma/rsocket/polling_time,
// default 10) before sleeping: a reply that is already on its way costs no wake-up.
int get_comp(Rsocket* rs, bool nonblock, Test test) {
    static const uint64_t spin_ns = polling_time_us() * 1000;
    uint64_t start = 0;
    for (;;) {
        int ret = process_cq(rs, true, test);
        if (!ret || nonblock || errno != EWOULDBLOCK) return ret;
        timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t now = uint64_t(t.tv_sec) * 1000000000 + uint64_t(t.tv_nsec);
        if (!start) start = now;
        if (now - start > spin_ns) break;
    }
    return process_cq(rs, false, test);
}

}  // namespace uroce::rsock

using namespace uroce::rsock;

extern "C" {

ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (rs->dg) return dgram_recv(rs, buf, len, flags, nullptr, nullptr);
    if (io_ready(rs, flags)) return -1;
    std::lock_guard<std::mutex> g(rs->rlock);
    auto* p = static_cast<uint8_t*>(buf);
    size_t left = len;
    int ret = 0;
    do {
        if (!have_rdata(rs)) {
            ret = get_comp(rs, nonblocking(rs, flags), conn_have_rdata);
            if (ret) break;
        }
        if (flags & MSG_PEEK) {
            left -= copy_out(rs, p, left, true);
            break;
        }
        size_t n = copy_out(rs, p, left, false);
        p += n;
        left -= n;
        if (!n && !have_rdata(rs)) break;  // end of stream or error
    } while (left && (flags & MSG_WAITALL) && (rs->state & kReadable));
    if (len != left) {
        poll_cq_once(rs);  // hand the consumed room back without waiting for the next call
        return ssize_t(len - left);
    }
    if (ret) return ret;
    if ((rs->state & kError) && len) return fail(rs->err ? rs->err : ECONNRESET);
    return 0;
}

ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, struct sockaddr* src_addr,
                  socklen_t* addrlen) {
    Rsocket* rs = lookup(socket);
    if (rs && rs->dg) return dgram_recv(rs, buf, len, flags, src_addr, addrlen);
    ssize_t ret = rrecv(socket, buf, len, flags);
    if (ret > 0 && src_addr && addrlen) rgetpeername(socket, src_addr, addrlen);
    return ret;
}

ssize_t rrecvmsg(int socket, struct msghdr* msg, int flags) {
    if (msg->msg_control && msg->msg_controllen) return fail(ENOTSUP);
    // As rdma-core: the first buffer only.
    if (!msg->msg_iovlen) return 0;
    Rsocket* rs = lookup(socket);
    if (rs && rs->dg)
        return dgram_recv(rs, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, flags,
                          static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen);
    return rrecv(socket, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, flags);
}

ssize_t rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }

ssize_t rreadv(int socket, const struct iovec* iov, int iovcnt) {
    if (iovcnt <= 0) return iovcnt ? fail(EINVAL) : 0;
    return rrecv(socket, iov[0].iov_base, iov[0].iov_len, 0);
}

ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (rs->dg) return dgram_send(rs, buf, len, flags, nullptr, 0);
    auto* src = static_cast<const uint8_t*>(buf);
    return send_stream(rs, len, flags, buf, [&](void* dst, size_t n) {
        if (dst) memcpy(dst, src, n);
        src += n;
    });
}

ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const struct sockaddr* to,
                socklen_t tolen) {
    Rsocket* rs = lookup(socket);
    if (rs && rs->dg) return dgram_send(rs, buf, len, flags, to, tolen);
    return rsend(socket, buf, len, flags);  // a stream ignores the address, as TCP does
}

ssize_t rsendmsg(int socket, const struct msghdr* msg, int flags) {
    if (msg->msg_control && msg->msg_controllen) return fail(ENOTSUP);
    Rsocket* rs = lookup(socket);
    if (rs && rs->dg)
        return dgram_sendv(rs, msg->msg_iov, int(msg->msg_iovlen), flags,
                           static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
    return send_iov(socket, msg->msg_iov, int(msg->msg_iovlen), flags);
}

ssize_t rwrite(int socket, const void* buf, size_t count) { return rsend(socket, buf, count, 0); }

ssize_t rwritev(int socket, const struct iovec* iov, int iovcnt) {
    return send_iov(socket, iov, iovcnt, 0);
}

// Orderly close as rdma-core: tell the peer (RS_CTRL_SHUTDOWN or _DISCONNECT), then wait
// until every send has completed.
int rshutdown(int socket, int how) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
    if (rs->dg) return 0;  // no connection to end
    if (!(rs->state & (kConnected | kDisconnected | kError))) return fail(ENOTCONN);
    keepalive_stop(rs);
    if (rs->state & kConnected) {
        uint32_t ctrl;
        if (how == SHUT_RDWR) {
            ctrl = kCtrlDisconnect;
            rs->state &= ~(kReadable | kWritable);
        } else if (how == SHUT_WR) {
            rs->state &= ~kWritable;
            ctrl = (rs->state & kReadable) ? kCtrlShutdown : kCtrlDisconnect;
        } else {
            rs->state &= ~kReadable;
            if (rs->state & kWritable) return 0;
            ctrl = kCtrlDisconnect;
        }
        std::lock_guard<std::mutex> g(rs->slock);
        if (!ctrl_avail(rs) && process_cq(rs, false, conn_can_send_ctrl)) return -1;
        {
            std::lock_guard<std::mutex> c(rs->cq_lock);  // ctrl_seqno is the CQ side's too
            if ((rs->state & kConnected) && ctrl_avail(rs)) {
                rs->ctrl_seqno++;
                post_msg(rs, msg_set(kOpCtrl, ctrl));
            }
        }
        if (rs->state & kConnected) process_cq(rs, false, all_sends_done);
    }
    signal(rs);  // pollers look again
    return 0;
}

}  // extern "C"
