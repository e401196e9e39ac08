// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Completions and the error state (emu/transport/completions.h): the template's
// definitions, included where it is instantiated.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emu/abi/clock.h"
#include "emu/abi/verbs_names.h"
#include "emu/abi/wc_opcode.h"
#include "emu/transport/completions.h"
#include "emu/verbs/qp_state.h"

namespace uroce::emu {

namespace completions_detail {
constexpr uint8_t kNakRemAccess = 0x62;  // AETH NAK: remote access error (rc_responder.h)
}  // namespace completions_detail

template <class Env>
void Completions<Env>::push_cqe(uint32_t cq_handle, const abi::Cqe& cqe, bool solicited) {
    env_.dma.flush();  // the data a completion reports lands before it (emu/engine/dma.cpp)
    Cq* cq = env_.cqs.get(cq_handle);
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

template <class Env>
void Completions<Env>::fire_cq_event(Cq& cq) {
    if (cq.hdr->arm.exchange(abi::kCqArmNone) == abi::kCqArmNone) return;
    if (CompChannel* ch = env_.channels.get(cq.channel)) {
        abi::CompEvent ev{cq.cookie};
        if (write(ch->write_fd, &ev, sizeof ev) < 0) {
            // A channel nobody reads: the event is dropped, the CQE itself is not.
        }
    }
}

template <class Env>
void Completions<Env>::complete_send(Qp& qp, uint32_t index, ibv_wc_status status) {
    env_.dma.flush();  // a READ's data before its slot is free, signaled or not
    SendWr& w = qp.swr[index & qp.sq_mask];
    // Free the slot before the CQE is visible: an application that sees the
    // completion may post into that slot at once.
    qp.sq_done = index + 1;
    qp.sq->cons.store(qp.sq_done, std::memory_order_release);
    if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR)  // flushes: see qp_to_error
        env_.trace.add("qp 0x%x send wr_id 0x%llx completed with %s", qp.qpn,
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

template <class Env>
void Completions<Env>::qp_to_error(Qp& qp) {
    if (qp.state == IBV_QPS_ERR) return;
    env_.trace.add("qp 0x%x %s -> ERR (outstanding work requests complete with WR_FLUSH_ERR)",
                   qp.qpn, qp_state_name(qp.state));
    qp.state = IBV_QPS_ERR;
    qp.attr.qp_state = IBV_QPS_ERR;
    flush_queues(qp);
    last_wqe_reached(qp);
}

// IBTA 11.6.3: a QP attached to an SRQ that enters the error state takes no more receives
// from it; its owner learns so (and may then destroy it without losing a receive).
template <class Env>
void Completions<Env>::last_wqe_reached(Qp& qp) {
    if (qp.srq && qp.type != IBV_QPT_XRC_RECV && !qp.owner->dead)
        env_.xrc.post_qp_async(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}

// A WQE failed before reaching the wire. RC and XRC QPs go to ERR; a UC or UD QP only stops
// its send queue (IBTA 10.3.1, Send Queue Error): receives go on, sends are flushed until the
// application moves it back to RTS, as ConnectX does.
template <class Env>
void Completions<Env>::send_queue_error(Qp& qp) {
    if (qp.type != IBV_QPT_UC && qp.type != IBV_QPT_UD) return qp_to_error(qp);
    if (qp.state == IBV_QPS_ERR || qp.state == IBV_QPS_SQE) return;
    env_.trace.add("qp 0x%x %s -> SQE (the send queue's work requests complete with WR_FLUSH_ERR)",
                   qp.qpn, qp_state_name(qp.state));
    qp.state = IBV_QPS_SQE;
    qp.attr.qp_state = IBV_QPS_SQE;
    flush_send_queue(qp);
}

template <class Env>
void Completions<Env>::flush_send_queue(Qp& qp) {
    qp.deadline_ns = 0;
    qp.rnr_wait = false;
    // Everything fetched but not completed, then everything still in the ring.
    while (qp.sq_done != qp.sq_fetch) complete_send(qp, qp.sq_done, IBV_WC_WR_FLUSH_ERR);
    while (env_.requester.fetch_send_wqe(qp)) complete_send(qp, qp.sq_done, IBV_WC_WR_FLUSH_ERR);
    qp.sq_send = qp.sq_fetch;
    qp.sq_send_off = 0;
}

template <class Env>
void Completions<Env>::flush_queues(Qp& qp) {
    flush_send_queue(qp);
    // A receive in progress was already taken from its ring; then the rest of the RQ.
    // Receives posted to an SRQ belong to the SRQ and stay there.
    if (qp.have_rwr) env_.recv.complete(qp, net::Packet{}, IBV_WC_WR_FLUSH_ERR);
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

template <class Env>
void Completions<Env>::post_async(Session* s, ibv_event_type type, uint64_t cookie,
                                  const char* what, uint32_t id) {
    if (!s || s->async_write_fd < 0) return;
    if (what && std::strcmp(what, "qp") == 0)
        env_.trace.add("async %s qp 0x%x -> pid %d", abi::event_id(type), id, int(s->pid));
    else if (what)
        env_.trace.add("async %s %s %u -> pid %d", abi::event_id(type), what, id, int(s->pid));
    else
        env_.trace.add("async %s -> pid %d", abi::event_id(type), int(s->pid));
    abi::AsyncEvent ev{uint32_t(type), 0, cookie};
    if (write(s->async_write_fd, &ev, sizeof ev) < 0) {
        // The application is not reading its events; like a full EQ, this one is lost.
    }
}

// What the path that wrote the entry did when its write failed. It counts in the QP's
// dma_errors, so that Dma::settle() stops the path that is waiting for it.
template <class Env>
void Completions<Env>::dma_write_failed(const DmaWriteBatch::Failure& f) {
    using Path = DmaWriteBatch::Path;
    Qp* qp = env_.qps.get(f.qpn);
    if (!qp) return;
    if (f.path == Path::kUcWrite) {
        // UC reports nothing: the rest of the message it belongs to (if that is still the
        // one in progress) is discarded, and a WRITE_WITH_IMM does not complete.
        uint64_t start = qp->write_va - (qp->write_total - qp->write_left);
        if (!qp->have_write || f.addr < start || f.addr >= qp->write_va) return;
        qp->have_write = false;
        ++qp->dma_errors;
        return;
    }
    ++qp->dma_errors;
    bool gone = qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET;
    switch (f.path) {
    case Path::kRcWrite:
    case Path::kRcSend:
        if (gone) return;
        return env_.responder.error(
            *qp, f.path == Path::kRcWrite ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR,
            completions_detail::kNakRemAccess, f.psn, IBV_EVENT_QP_ACCESS_ERR);
    case Path::kUcSend:
        if (gone || qp->owner->dead) return;
        if (qp->have_rwr) env_.recv.complete(*qp, net::Packet{}, IBV_WC_LOC_PROT_ERR);
        env_.xrc.post_qp_async(*qp, IBV_EVENT_QP_ACCESS_ERR);
        return qp_to_error(*qp);
    case Path::kUdRecv:
        if (!qp->owner->dead && qp->have_rwr)
            env_.recv.complete(*qp, net::Packet{}, IBV_WC_LOC_PROT_ERR);
        qp->have_rwr = false;
        return;
    case Path::kReadResp:
        if (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD)
            env_.completer.fail_oldest(*qp, IBV_WC_LOC_PROT_ERR);
        return;
    case Path::kUcWrite: return;
    }
}

}  // namespace uroce::emu
