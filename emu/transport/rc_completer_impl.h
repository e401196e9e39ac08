// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RcCompleter's member functions (emu/transport/rc_completer.h). Included by one
// translation unit per Env: emu/engine/stages/rc_completer.cpp for the device.
#pragma once

#include "emu/engine/dma_write_batch.h"
#include "emu/engine/sge_iov.h"
#include "emu/transport/rc_completer.h"
#include "emu/transport/rc_timers.h"
#include "emu/transport/send_ops.h"
#include "net/opcodes.h"

namespace uroce::emu {

namespace rc_completer_detail {
// Forward progress restores both retry budgets: IBTA counts retries (timeouts and RNR NAKs)
// per request, as rxe does, so a long-lived QP is not failed by retries spread over its life.
inline void restore_retries(Qp& qp) {
    qp.retry_left = qp.attr.retry_cnt;
    qp.rnr_left = qp.attr.rnr_retry;
}
}  // namespace rc_completer_detail

// Everything up to and including `psn` reached the responder. READ and ATOMIC WQEs
// complete only with their response data: an ACK beyond one means its responses were
// lost, so it is requested again. A READ response itself (`implicit`) acknowledges only
// what precedes the READ.
template <class Env>
void RcCompleter<Env>::ack_upto(Qp& qp, uint32_t psn, bool implicit) {
    bool lost_response = false;
    while (qp.sq_done != qp.sq_fetch) {
        const SendWr& w = qp.swr[qp.sq_done & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS) break;
        if (is_local_op(w.opcode)) {  // no PSN: done once it has taken effect
            if (!w.executed) break;
            env_.done.complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
            continue;
        }
        if (net::psn_lt(psn, w.first_psn)) break;
        if (is_rd_atomic(w.opcode)) {
            lost_response = !implicit;
            break;
        }
        if (net::psn_lt(psn, w.last_psn)) break;
        env_.done.complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
        qp.una_psn = net::psn_add(w.last_psn, 1);
        rc_completer_detail::restore_retries(qp);
    }
    if (implicit) return;  // the caller goes on with the response
    if (!lost_response && qp.sq_done != qp.sq_fetch) {
        const SendWr& w = qp.swr[qp.sq_done & qp.sq_mask];
        // Part of a multi-packet SEND/WRITE acknowledged.
        if (!is_rd_atomic(w.opcode) && net::psn_le(w.first_psn, psn) &&
            net::psn_lt(qp.una_psn, net::psn_add(psn, 1))) {
            qp.una_psn = net::psn_add(psn, 1);
            rc_completer_detail::restore_retries(qp);  // forward progress, as a completion is
        }
    } else if (qp.sq_done == qp.sq_fetch && net::psn_lt(qp.una_psn, net::psn_add(psn, 1))) {
        qp.una_psn = net::psn_add(psn, 1);
    }
    after_progress(qp, lost_response);
}

// Bookkeeping after una_psn moved: rewind if needed, re-arm the timer, send more.
template <class Env>
void RcCompleter<Env>::after_progress(Qp& qp, bool rerequest) {
    if (rerequest || net::psn_lt(qp.next_psn, qp.una_psn) ||
        int32_t(uint32_t(qp.sq_send - qp.sq_done)) < 0)
        env_.requester.go_back(qp, qp.una_psn);
    env_.requester.complete_blocked(qp);
    if (qp.state == IBV_QPS_ERR) return;
    // Waiting out an RNR NAK: its timer resends from una, whatever comes in meanwhile (the
    // NAKs of the packets that followed the refused one, ACKs of earlier ones).
    if (!qp.rnr_wait)
        env_.sched.arm_timer(
            qp, qp.una_psn == qp.next_psn ? 0 : env_.now_ns() + ack_timeout_ns(qp.attr.timeout));
    env_.sched.mark_ready(qp);
}

template <class Env>
void RcCompleter<Env>::fail_oldest(Qp& qp, ibv_wc_status status) {
    if (qp.owner->dead) return;
    if (qp.sq_done != qp.sq_fetch) env_.done.complete_send(qp, qp.sq_done, status);
    env_.done.qp_to_error(qp);
}

// A READ response or ATOMIC acknowledge for the oldest outstanding WQE. An ATOMIC WRITE and a
// FLUSH are answered with a READ response of no data (IBTA 1.5, as rxe): it only completes the
// WQE (for a FLUSH: the responder placed everything before it as the type asked).
template <class Env>
void RcCompleter<Env>::read_atomic_response(Qp& qp, const net::Packet& p) {
    uint32_t psn = p.bth.psn;
    if (psn != qp.una_psn) {
        // A gap: the responder sent it, we lost the ones before. Ask again, once.
        if (net::psn_lt(qp.una_psn, psn) && !qp.read_gap_nak) {
            qp.read_gap_nak = true;
            ++qp.retransmits;
            ++env_.counters.retransmits;
            ++env_.counters.retx_read_gap;
            env_.requester.go_back(qp, qp.una_psn);
        }
        return;
    }
    qp.read_gap_nak = false;
    // Responses acknowledge every SEND/WRITE before them.
    ack_upto(qp, net::psn_add(psn, -1), true);
    if (qp.state == IBV_QPS_ERR || qp.sq_done == qp.sq_fetch) return;
    SendWr& w = qp.swr[qp.sq_done & qp.sq_mask];
    bool atomic_ack = p.bth.opcode == net::op_on(qp.transport, net::kOpAtomicAck);
    bool read = w.opcode == IBV_WR_RDMA_READ;
    bool empty = w.opcode == IBV_WR_ATOMIC_WRITE || w.opcode == abi::kWrFlush;
    if ((read || empty) == atomic_ack || net::psn_lt(psn, w.first_psn) ||
        net::psn_lt(w.last_psn, psn) ||
        (empty && p.bth.opcode != net::op_on(qp.transport, net::kOpReadRespOnly)))
        return env_.counters.drop(net::DropReason::kOpNotForQp, qp);  // not what we asked for
    if (empty) {
        if (p.payload_len) return fail_oldest(qp, IBV_WC_REM_OP_ERR);  // data nobody asked for
    } else if (read) {
        uint32_t off = uint32_t(net::psn_diff(psn, w.first_psn)) * qp.mtu;
        if (p.payload_len > w.length - off) return fail_oldest(qp, IBV_WC_REM_OP_ERR);
        iovec iov[abi::kMaxSge];
        int n = sge_iov(w.sge, w.num_sge, off, p.payload_len, iov);
        // Written with the next flush; a failure: LOC_PROT_ERR (dma_write_failed).
        env_.dma.write_later(qp.owner, p.payload, iov, n, p.payload_len, qp.qpn, psn,
                             DmaWriteBatch::Path::kReadResp);
    } else {
        uint64_t orig = p.atomic_ack.orig;
        iovec iov{reinterpret_cast<void*>(w.sge[0].addr), 8};
        if (!env_.dma.write(qp.owner, &orig, &iov, 1, 8))
            return fail_oldest(qp, IBV_WC_LOC_PROT_ERR);
    }
    qp.una_psn = net::psn_add(psn, 1);
    rc_completer_detail::restore_retries(qp);
    if (psn == w.last_psn) {
        if (!env_.dma.settle(qp)) return;
        env_.done.complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
        env_.requester.complete_local_ops(qp);
    }
    after_progress(qp, false);
}

template <class Env>
void RcCompleter<Env>::receive(Qp& qp, const net::Packet& p) {
    if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD) return;
    ++qp.resp_rx;
    uint32_t psn = p.bth.psn;
    // Only PSNs in [una - 1, last assigned] can refer to something outstanding.
    if (net::psn_lt(psn, net::psn_add(qp.una_psn, -1)) || !net::psn_lt(psn, qp.wqe_psn)) return;
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    if (info->flags & (net::kReadResp | net::kAtomicAck)) {
        // A NAK can also arrive in a READ response's place; only real data goes here.
        if (!(info->flags & net::kReadResp) || !(info->hdrs & net::kAETH) ||
            net::aeth::type(p.aeth.syndrome) == net::aeth::kAck)
            return read_atomic_response(qp, p);
    } else if (p.bth.opcode != net::op_on(qp.transport, net::kOpAck)) {
        return env_.counters.drop(net::DropReason::kOpNotForQp, qp);
    }
    uint8_t syn = p.aeth.syndrome;
    switch (syn >> 5) {
    case 0:  // ACK
        ack_upto(qp, psn);
        break;
    case 1: {  // RNR NAK: the responder had no receive posted for `psn`
        ++env_.counters.rnr_naks;
        ack_upto(qp, net::psn_add(psn, -1));
        if (qp.state == IBV_QPS_ERR) return;
        if (qp.rnr_left == 0) return fail_oldest(qp, IBV_WC_RNR_RETRY_EXC_ERR);
        if (qp.attr.rnr_retry != 7) --qp.rnr_left;  // 7 means retry forever
        // From una, not `psn`: una is behind `psn` when READ/ATOMIC responses before it
        // were lost, and those requests must go again (ack_upto already went back there).
        env_.requester.go_back(qp, qp.una_psn);
        qp.rnr_wait = true;
        env_.sched.arm_timer(qp, env_.now_ns() + rnr_timer_ns(syn & 0x1f));
        break;
    }
    case 3: {  // NAK
        ack_upto(qp, net::psn_add(psn, -1));
        if (qp.state == IBV_QPS_ERR) return;
        switch (syn & 0x1f) {
        case 0:  // PSN sequence error: resend from the PSN the responder expects
            if (qp.rnr_wait) break;  // a packet sent behind the one refused for RNR
            ++qp.retransmits;
            ++env_.counters.retransmits;
            ++env_.counters.retx_seq_nak;
            env_.requester.go_back(qp, qp.una_psn);  // not `psn`: see the RNR case
            break;
        case 1: fail_oldest(qp, IBV_WC_REM_INV_REQ_ERR); break;
        case 2: fail_oldest(qp, IBV_WC_REM_ACCESS_ERR); break;
        case 3: fail_oldest(qp, IBV_WC_REM_OP_ERR); break;
        default: fail_oldest(qp, IBV_WC_REM_INV_RD_REQ_ERR); break;
        }
        break;
    }
    default:
        env_.counters.drop(net::DropReason::kBadLength, qp);  // reserved syndrome
        break;
    }
}

template <class Env>
void RcCompleter<Env>::retransmit_timeout(Qp& qp) {
    if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD) return;
    if (qp.rnr_wait) {
        qp.rnr_wait = false;
        env_.sched.mark_ready(qp);
        return;
    }
    if (qp.una_psn == qp.next_psn && qp.sq_send == qp.sq_done) return;
    if (qp.attr.timeout == 0) return;  // infinite: never give up, never resend
    // The peer kept talking during the whole period (READ responses still streaming,
    // duplicate ACKs): it is alive but slow, as a loaded host makes it. Wait another
    // period rather than resend everything and spend a retry.
    if (qp.resp_rx != qp.rx_at_arm) {
        env_.sched.arm_timer(qp, env_.now_ns() + ack_timeout_ns(qp.attr.timeout));
        return;
    }
    if (qp.retry_left <= 0) return fail_oldest(qp, IBV_WC_RETRY_EXC_ERR);
    --qp.retry_left;
    ++qp.retransmits;
    ++env_.counters.retransmits;
    ++env_.counters.retx_timeout;
    qp.read_gap_nak = false;
    env_.requester.go_back(qp, qp.una_psn);
    env_.sched.arm_timer(qp, env_.now_ns() + ack_timeout_ns(qp.attr.timeout));
}

}  // namespace uroce::emu
