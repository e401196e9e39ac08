// Completions, local key checks and the error state: the paths every transport shares.
#include <unistd.h>

#include <cerrno>

#include "emu/abi/clock.h"
#include "emu/abi/verbs_names.h"
#include "emu/abi/wc_opcode.h"
#include "emu/engine/device.h"
#include "emu/engine/process_memory.h"
#include "emu/verbs/qp_state.h"

namespace uroce::emu {

void Device::push_cqe(uint32_t cq_handle, const abi::Cqe& cqe, bool solicited) {
    dma_flush();  // the data a completion reports lands before it (dma_write_batch.cpp)
    Cq* cq = cqs_.get(cq_handle);
    if (!cq || cq->overrun) return;
    uint32_t cons = cq->hdr->cons.load(std::memory_order_acquire);
    if (uint32_t(cq->prod - cons) > cq->mask) {
        // Overrun: the CQ is unusable from now on, as on hardware.
        cq->overrun = true;
        post_async(cq->owner, IBV_EVENT_CQ_ERR, cq->cookie, "cq", cq_handle);
        return;
    }
    abi::Cqe& slot = cq->slots[cq->prod & cq->mask];
    slot = cqe;
    slot.timestamp = abi::device_clock_ns();
    ++cq->prod;
    cq->hdr->prod.store(cq->prod, std::memory_order_seq_cst);
    uint32_t arm = cq->hdr->arm.load(std::memory_order_seq_cst);
    if (arm == abi::kCqArmNone) return;
    if (arm == abi::kCqArmSolicited && !solicited && cqe.status == IBV_WC_SUCCESS) return;
    fire_cq_event(*cq);
}

void Device::fire_cq_event(Cq& cq) {
    if (cq.hdr->arm.exchange(abi::kCqArmNone) == abi::kCqArmNone) return;
    if (CompChannel* ch = channels_.get(cq.channel)) {
        abi::CompEvent ev{cq.cookie};
        if (write(ch->write_fd, &ev, sizeof ev) < 0) {
            // A channel nobody reads: the event is dropped, the CQE itself is not.
        }
    }
}

// The application armed a CQ that still holds unpolled completions.
void Device::notify_if_pending(Cq& cq) {
    if (cq.hdr->arm.load(std::memory_order_seq_cst) == abi::kCqArmNone) return;
    if (cq.hdr->cons.load(std::memory_order_seq_cst) != cq.prod) fire_cq_event(cq);
}

void Device::complete_send(Qp& qp, uint32_t index, ibv_wc_status status) {
    dma_flush();  // a READ's data before its slot is free, signaled or not
    SendWr& w = qp.swr[index & qp.sq_mask];
    // Free the slot before the CQE is visible: an application that sees the
    // completion may post into that slot at once.
    qp.sq_done = index + 1;
    qp.sq->cons.store(qp.sq_done, std::memory_order_release);
    if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR)  // flushes: see qp_to_error
        trace_.add("qp 0x%x send wr_id 0x%llx completed with %s", qp.qpn,
                   static_cast<unsigned long long>(w.wr_id), abi::wc_status_id(status));
    if (status != IBV_WC_SUCCESS || (w.flags & IBV_SEND_SIGNALED) || qp.sq_sig_all) {
        abi::Cqe c{};
        c.wr_id = w.wr_id;
        c.status = status;
        c.opcode = abi::wc_opcode_for(w.opcode);
        c.byte_len = w.length;
        c.qp_num = qp.qpn;
        push_cqe(qp.send_cq, c, false);
    }
}

// Reads and immediate writes of application memory come after every deferred write.
bool Device::dma_read(Session* s, void* dst, const iovec* remote, int n, size_t total) {
    dma_flush();
    if (mem_read(s->pid, dst, remote, n, total)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

bool Device::dma_readv(Session* s, const iovec* local, int nlocal, const iovec* remote, int nremote,
                       size_t total) {
    dma_flush();
    if (mem_readv(s->pid, local, nlocal, remote, nremote, total)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

bool Device::dma_write(Session* s, const void* src, const iovec* remote, int n, size_t total) {
    dma_flush();
    if (mem_write(s->pid, src, remote, n, total)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

bool Device::dma_store64(Session* s, uint64_t addr, uint64_t value) {
    dma_flush();  // the earlier writes land first, as rxe's store-release orders them
    if (mem_store64(s->pid, addr, value)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

void Device::qp_to_error(Qp& qp) {
    if (qp.state == IBV_QPS_ERR) return;
    trace_.add("qp 0x%x %s -> ERR (outstanding work requests complete with WR_FLUSH_ERR)", qp.qpn,
               qp_state_name(qp.state));
    qp.state = IBV_QPS_ERR;
    qp.attr.qp_state = IBV_QPS_ERR;
    flush_queues(qp);
    last_wqe_reached(qp);
}

// IBTA 11.6.3: a QP attached to an SRQ that enters the error state takes no more receives
// from it; its owner learns so (and may then destroy it without losing a receive).
void Device::last_wqe_reached(Qp& qp) {
    if (qp.srq && qp.type != IBV_QPT_XRC_RECV && !qp.owner->dead)
        post_qp_async(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}

// A WQE failed before reaching the wire. RC and XRC QPs go to ERR; a UC or UD QP only stops
// its send queue (IBTA 10.3.1, Send Queue Error): receives go on, sends are flushed until the
// application moves it back to RTS, as ConnectX does.
void Device::send_queue_error(Qp& qp) {
    if (qp.type != IBV_QPT_UC && qp.type != IBV_QPT_UD) return qp_to_error(qp);
    if (qp.state == IBV_QPS_ERR || qp.state == IBV_QPS_SQE) return;
    trace_.add("qp 0x%x %s -> SQE (the send queue's work requests complete with WR_FLUSH_ERR)",
               qp.qpn, qp_state_name(qp.state));
    qp.state = IBV_QPS_SQE;
    qp.attr.qp_state = IBV_QPS_SQE;
    flush_send_queue(qp);
}

void Device::flush_send_queue(Qp& qp) {
    qp.deadline_ns = 0;
    qp.rnr_wait = false;
    // Everything fetched but not completed, then everything still in the ring.
    while (qp.sq_done != qp.sq_fetch) complete_send(qp, qp.sq_done, IBV_WC_WR_FLUSH_ERR);
    while (fetch_send_wqe(qp)) complete_send(qp, qp.sq_done, IBV_WC_WR_FLUSH_ERR);
    qp.sq_send = qp.sq_fetch;
    qp.sq_send_off = 0;
}

void Device::flush_queues(Qp& qp) {
    flush_send_queue(qp);
    // A receive in progress was already taken from its ring; then the rest of the RQ.
    // Receives posted to an SRQ belong to the SRQ and stay there.
    if (qp.have_rwr) complete_recv(qp, net::Packet{}, IBV_WC_WR_FLUSH_ERR);
    if (qp.srq) return;
    uint32_t prod = qp.rq->prod.load(std::memory_order_acquire);
    if (uint32_t(prod - qp.rq_next) > qp.rq_mask + 1) prod = qp.rq_next + qp.rq_mask + 1;
    while (qp.rq_next != prod) {
        const auto* r = reinterpret_cast<const abi::RecvWqe*>(
            abi::ring_slot(qp.rq, qp.rq_stride, qp.rq_mask, qp.rq_next));
        abi::Cqe c{};
        c.wr_id = r->wr_id;
        c.status = IBV_WC_WR_FLUSH_ERR;
        c.opcode = IBV_WC_RECV;
        c.qp_num = qp.qpn;
        push_cqe(qp.recv_cq, c, false);
        ++qp.rq_next;
        qp.rq->cons.store(qp.rq_next, std::memory_order_release);
    }
}

bool Device::check_local_sges(const Session* owner, uint32_t pd, abi::Sge* sge, uint32_t n,
                              bool write, uint64_t* total) const {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
        sum += sge[i].length;
        if (sge[i].length == 0) continue;
        Mr* mr = mr_for_key(sge[i].lkey);
        if (!mr || mr->pd != pd || mr->owner != owner) return false;
        if (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)) return false;
        uint64_t a = sge[i].addr, len = sge[i].length;
        if (a < mr->iova || a + len < a || a + len > mr->iova + mr->length) return false;
        // From here on the SGE holds the process address the device copies to/from.
        sge[i].addr = mr->addr + (a - mr->iova);
    }
    *total = sum;
    return true;
}

}  // namespace uroce::emu
