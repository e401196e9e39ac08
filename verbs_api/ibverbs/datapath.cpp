// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The data path: WQEs go into the rings shared with the device, completions come out
// of the CQ ring. No system call except the doorbell that wakes the device.
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

namespace {
// After an entry was pushed: the eventfd only if the device may be asleep (doorbell.h).
void wake_device(Context* ctx) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (ctx->db->awake.load(std::memory_order_relaxed)) return;
    uint64_t one = 1;
    ssize_t r = write(ctx->doorbell, &one, sizeof one);
    (void)r;  // only fails on counter overflow, which cannot happen with +1 steps
}
}  // namespace

void ring_qp(Qp* qp) {
    Context* ctx = ctx_of(qp->qpx.qp_base.context);
    abi::RingHeader* h = qp->sq.hdr();
    // Queued once until the device takes it (emu/abi/doorbell.h). seq_cst: the WQE's
    // producer index is stored before `arm` is read, and the device clears `arm` before it
    // reads the index, so one of the two sides sees the other.
    if (!h)
        ctx->db->overflow.store(1, std::memory_order_release);
    else if (h->arm.exchange(1, std::memory_order_seq_cst) == 0)
        abi::doorbell_push(ctx->db, qp->qpx.qp_base.qp_num);
    else
        return;  // still queued: whoever queued it woke the device, which has yet to look
    wake_device(ctx);
}

bool sq_accepts(const ibv_qp* qp) {
    // As rxe: the send queue accepts work only from RTS on; in SQE (UC/UD after a send
    // error) and ERR it accepts WRs to flush them. A TGT QP has no SQ.
    return (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD || qp->state == IBV_QPS_SQE ||
            qp->state == IBV_QPS_ERR) &&
           qp_of(const_cast<ibv_qp*>(qp))->sq.base && qp->qp_type != IBV_QPT_XRC_RECV;
}

int write_send_wqe(Qp* qp, const ibv_send_wr* wr, uint32_t prod) {
    if (uint32_t(prod - qp->sq.hdr()->cons.load(std::memory_order_acquire)) > qp->sq.mask)
        return ENOMEM;
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->cap.max_send_sge) return EINVAL;
    ibv_qp_type type = qp->qpx.qp_base.qp_type;
    bool rd_atomic = wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
                     wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    uint8_t* slot = qp->sq.slot(prod);
    abi::SendWqe w{};
    w.wr_id = wr->wr_id;
    w.opcode = wr->opcode;
    w.send_flags = wr->send_flags;
    w.imm_data = wr->imm_data;
    w.rkey = wr->wr.rdma.rkey;
    w.remote_addr = wr->wr.rdma.remote_addr;
    if (type == IBV_QPT_XRC_SEND) w.remote_srqn = wr->qp_type.xrc.remote_srqn;
    if (type == IBV_QPT_UD) {
        if (!wr->wr.ud.ah) return EINVAL;
        const Ah* ah = reinterpret_cast<Ah*>(wr->wr.ud.ah);
        w.ah = ah->ipv4_be;
        w.ud_grh[0] = ah->traffic_class;
        w.ud_grh[1] = ah->hop_limit;
        w.ud_grh[3] = ah->sgid_index;
        if (ah->ipv6) {  // rings.h: the address in two fields a UD send does not use
            w.ud_grh[2] = abi::kUdIpv6;
            std::memcpy(&w.remote_addr, ah->gid, 8);
            std::memcpy(&w.compare_add, ah->gid + 8, 8);
        }
        w.remote_qpn = wr->wr.ud.remote_qpn;
        w.remote_qkey = wr->wr.ud.remote_qkey;
    } else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
               wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || wr->opcode == abi::kWrFlush) {
        // A FLUSH (from ibv_wr_flush only) comes in the same fields: length, type and level.
        w.remote_addr = wr->wr.atomic.remote_addr;
        w.rkey = wr->wr.atomic.rkey;
        w.compare_add = wr->wr.atomic.compare_add;
        w.swap = wr->wr.atomic.swap;
    }
    if (wr->opcode == IBV_WR_BIND_MW) {
        abi::MwBind b;
        if (!mw_bind_wqe(wr->bind_mw.mw, wr->bind_mw.rkey, wr->bind_mw.bind_info, &b))
            return EINVAL;
        std::memcpy(slot + sizeof w, &b, sizeof b);
    } else if (wr->send_flags & IBV_SEND_INLINE) {
        // Inline data is for SENDs and WRITEs only (ibv_post_send(3)); rxe: EINVAL.
        if (rd_atomic) return EINVAL;
        uint64_t total = 0;  // 64 bits: lengths that wrap a 32-bit sum are still too long
        for (int i = 0; i < wr->num_sge; ++i) total += wr->sg_list[i].length;
        // An ATOMIC WRITE's 8 bytes fit in every slot (ibv_wr_atomic_write puts them here).
        uint32_t max_inline = qp->cap.max_inline_data;
        if (wr->opcode == IBV_WR_ATOMIC_WRITE && max_inline < abi::kAtomicWriteLen)
            max_inline = abi::kAtomicWriteLen;
        if (total > max_inline) return EINVAL;
        uint8_t* data = slot + sizeof w;
        for (int i = 0; i < wr->num_sge; ++i) {
            if (wr->sg_list[i].length)  // a zero-length entry may have no address
                std::memcpy(data, reinterpret_cast<void*>(wr->sg_list[i].addr),
                            wr->sg_list[i].length);
            data += wr->sg_list[i].length;
        }
        w.inline_len = uint32_t(total);
    } else {
        w.num_sge = uint32_t(wr->num_sge);
        if (w.num_sge) std::memcpy(slot + sizeof w, wr->sg_list, sizeof(abi::Sge) * w.num_sge);
    }
    std::memcpy(slot, &w, sizeof w);
    return 0;
}

void publish_send(Qp* qp, uint32_t prod) {
    qp->sq.hdr()->prod.store(prod, std::memory_order_release);
}

int post_send(ibv_qp* qp_pub, ibv_send_wr* wr, ibv_send_wr** bad) {
    Qp* qp = qp_of(qp_pub);
    if (!sq_accepts(qp_pub)) {
        *bad = wr;
        return EINVAL;
    }
    int err = 0;
    qp->sq_lock.lock();
    uint32_t first = qp->sq.hdr()->prod.load(std::memory_order_relaxed), prod = first;
    // Under the ring's lock: device_gone flushes the ring under it (device_gone.cpp).
    if (ctx_of(qp_pub->context)->gone.load(std::memory_order_relaxed)) err = EIO;
    for (; wr && !err; wr = wr->next) {
        // ibv_send_wr has no room for a FLUSH's placement type and selectivity level: rdma-core
        // offers FLUSH through ibv_wr_flush only (ibv_wr_post(3)).
        if (wr->opcode == abi::kWrFlush) err = EINVAL;
        if (err || (err = write_send_wqe(qp, wr, prod))) break;
        publish_send(qp, ++prod);  // the device may start on it while we build the next
    }
    qp->sq_lock.unlock();
    if (prod != first) ring_qp(qp);
    if (err) *bad = wr;
    return err;
}

// Writes receive WQEs into a ring (a QP's RQ or an SRQ). Receives need no doorbell:
// the device looks when a message arrives.
static int post_to_ring(const Context* ctx, Ring& ring, SpinLock& lock, uint32_t max_sge,
                        ibv_recv_wr* wr, ibv_recv_wr** bad) {
    int err = 0;
    lock.lock();
    abi::RingHeader* h = ring.hdr();
    uint32_t prod = h->prod.load(std::memory_order_relaxed);
    if (ctx->gone.load(std::memory_order_relaxed)) err = EIO;  // as post_send
    for (; wr && !err; wr = wr->next) {
        uint32_t cons = h->cons.load(std::memory_order_acquire);
        if (uint32_t(prod - cons) > ring.mask) {
            err = ENOMEM;
            break;
        }
        if (wr->num_sge < 0 || uint32_t(wr->num_sge) > max_sge) {
            err = EINVAL;
            break;
        }
        uint8_t* slot = ring.slot(prod);
        abi::RecvWqe r{wr->wr_id, uint32_t(wr->num_sge), 0};
        std::memcpy(slot, &r, sizeof r);
        if (r.num_sge) std::memcpy(slot + sizeof r, wr->sg_list, sizeof(abi::Sge) * r.num_sge);
        ++prod;
        h->prod.store(prod, std::memory_order_release);
    }
    lock.unlock();
    if (err) *bad = wr;
    return err;
}

int post_recv(ibv_qp* qp_pub, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    Qp* qp = qp_of(qp_pub);
    if (qp_pub->state == IBV_QPS_RESET || qp_pub->srq || qp_pub->qp_type == IBV_QPT_XRC_SEND ||
        qp_pub->qp_type == IBV_QPT_XRC_RECV) {
        *bad = wr;
        return EINVAL;
    }
    int err =
        post_to_ring(ctx_of(qp_pub->context), qp->rq, qp->rq_lock, qp->cap.max_recv_sge, wr, bad);
    // In ERR the device must flush them, so wake it.
    if (qp_pub->state == IBV_QPS_ERR) ring_qp(qp);
    return err;
}

int post_srq_recv(ibv_srq* srq_pub, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    Srq* srq = srq_of(srq_pub);
    return post_to_ring(ctx_of(srq_pub->context), srq->ring, srq->lock, srq->max_sge, wr, bad);
}

void lock_cq(Cq* cq) {
    if (!cq->single_threaded) cq->lock.lock();
}

void unlock_cq(Cq* cq) {
    if (!cq->single_threaded) cq->lock.unlock();
}

bool empty_poll(Cq* cq) {
    // An empty poll means the application is spinning while the device works. On a
    // host with fewer cores than spinning processes the device would otherwise wait for
    // the spinner's time slice to end, so give the CPU away now and then.
    if ((++cq->empty_polls & 15) != 0) return false;
    sched_yield();
    return true;
}

namespace {

int take_cqes(Cq* cq, int n, ibv_wc* wc) {
    lock_cq(cq);
    abi::RingHeader* h = cq->ring.hdr();
    uint32_t cons = h->cons.load(std::memory_order_relaxed);
    uint32_t prod = h->prod.load(std::memory_order_acquire);
    int k = 0;
    for (; k < n && cons != prod; ++k, ++cons) {
        const auto* c = reinterpret_cast<const abi::Cqe*>(cq->ring.slot(cons));
        ibv_wc& w = wc[k];
        w.wr_id = c->wr_id;
        w.status = ibv_wc_status(c->status);
        w.opcode = ibv_wc_opcode(c->opcode);
        w.vendor_err = c->vendor_err;
        w.byte_len = c->byte_len;
        w.imm_data = c->imm_data;
        w.qp_num = c->qp_num;
        w.src_qp = c->src_qp;
        w.wc_flags = c->wc_flags;
        w.pkey_index = c->pkey_index;
        w.slid = c->slid;
        w.sl = c->sl;
        w.dlid_path_bits = c->dlid_path_bits;
    }
    h->cons.store(cons, std::memory_order_release);
    unlock_cq(cq);
    return k;
}

}  // namespace

int poll_cq(ibv_cq* cq_pub, int n, ibv_wc* wc) {
    Cq* cq = cq_of(cq_pub);
    int k = take_cqes(cq, n, wc);
    // After giving the CPU away, look again: the caller acts on "empty" at once (libfabric's
    // rxm then reads its connection events), and must not act on a look a time slice old
    // (docs/behaviour.md, "Scheduling on small hosts").
    if (k == 0 && empty_poll(cq)) k = take_cqes(cq, n, wc);
    return k;
}

void clean_cq(ibv_cq* cq_pub, uint32_t qpn) {
    Cq* cq = cq_of(cq_pub);
    lock_cq(cq);
    abi::RingHeader* h = cq->ring.hdr();
    const uint32_t cons = h->cons.load(std::memory_order_relaxed);
    const uint32_t prod = h->prod.load(std::memory_order_acquire);
    // The entries kept slide towards `prod`, in order, and the consumer index skips the
    // removed ones. The device writes only at `prod` and beyond, so it meets none of this.
    uint32_t keep = prod;
    for (uint32_t i = prod; i != cons;) {
        --i;
        const auto* c = reinterpret_cast<const abi::Cqe*>(cq->ring.slot(i));
        if (c->qp_num == qpn) continue;
        if (--keep != i) std::memcpy(cq->ring.slot(keep), c, sizeof(abi::Cqe));
    }
    h->cons.store(keep, std::memory_order_release);
    unlock_cq(cq);
}

int req_notify_cq(ibv_cq* cq_pub, int solicited_only) {
    Cq* cq = cq_of(cq_pub);
    // Under the CQ's lock: ibv_resize_cq moves the arm to the new ring (cq_resize.cpp).
    // The arm is for the next completion the device adds (IBTA's Request Completion
    // Notification, ibv_req_notify_cq(3), rxe_req_notify_cq): completions already in the CQ
    // raise no event, so an application arms, then polls to catch what came before the arm.
    // After the device is gone no completion comes: ibv_get_cq_event hands out what the
    // flush raised, then EIO (device_gone.cpp).
    lock_cq(cq);
    cq->ring.hdr()->arm.store(solicited_only ? abi::kCqArmSolicited : abi::kCqArmNext,
                              std::memory_order_seq_cst);
    unlock_cq(cq);
    return 0;
}

}  // namespace uroce::verbs
