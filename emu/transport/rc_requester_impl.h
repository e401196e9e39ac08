// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RcRequester's member functions (emu/transport/rc_requester.h). Included by one
// translation unit per Env: emu/engine/stages/rc_requester.cpp for the device.
#pragma once

#include <cstring>

#include "emu/engine/process_memory.h"
#include "emu/engine/sge_iov.h"
#include "emu/transport/rc_requester.h"
#include "emu/transport/rc_timers.h"
#include "emu/transport/send_ops.h"
#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::emu {

namespace rc_requester_detail {
inline constexpr uint32_t kMaxOutstandingPkts = 128;  // unacknowledged packets per QP
inline constexpr uint32_t kAckReqEvery = 64;          // ask for an ACK at least this often

inline bool opcode_allowed(ibv_qp_type type, uint32_t op) {
    switch (op) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: return true;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return type != IBV_QPT_UD;
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_SEND_WITH_INV:  // the IETH exists for RC and XRC only
        return type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;
    case IBV_WR_ATOMIC_WRITE:
    case abi::kWrFlush:
        return type == IBV_QPT_RC;  // as rxe: no XRC opcode for them
    // Local operations, on the QP types rxe allows them on (a window bound through an
    // XRC INI QP could never be reached: its QP receives nothing).
    case IBV_WR_LOCAL_INV:
        return type == IBV_QPT_RC || type == IBV_QPT_UC || type == IBV_QPT_XRC_SEND;
    case IBV_WR_BIND_MW: return type == IBV_QPT_RC || type == IBV_QPT_UC;
    default: return false;
    }
}

// Transport-independent operation code (low 5 bits of the BTH opcode) for a packet of
// a SEND or WRITE message, or of an ATOMIC WRITE (one packet: RETH and its 8 bytes).
inline uint8_t message_op(uint32_t wr_op, bool first, bool last) {
    if (wr_op == IBV_WR_ATOMIC_WRITE) return net::kOpAtomicWrite;
    bool imm = wr_op == IBV_WR_SEND_WITH_IMM || wr_op == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (wr_op == IBV_WR_RDMA_WRITE || wr_op == IBV_WR_RDMA_WRITE_WITH_IMM) {
        if (first && last) return imm ? net::kOpWriteOnlyImm : net::kOpWriteOnly;
        if (first) return net::kOpWriteFirst;
        if (last) return imm ? net::kOpWriteLastImm : net::kOpWriteLast;
        return net::kOpWriteMiddle;
    }
    bool inv = wr_op == IBV_WR_SEND_WITH_INV;
    if (first && last)
        return imm ? net::kOpSendOnlyImm : inv ? net::kOpSendOnlyInv : net::kOpSendOnly;
    if (first) return net::kOpSendFirst;
    if (last) return imm ? net::kOpSendLastImm : inv ? net::kOpSendLastInv : net::kOpSendLast;
    return net::kOpSendMiddle;
}

// READ/ATOMIC WQEs among [from, to): what a fenced WQE waits for (IBV_SEND_FENCE).
inline bool rd_atomic_between(const Qp& qp, uint32_t from, uint32_t to) {
    for (uint32_t i = from; i != to; ++i)
        if (is_rd_atomic(qp.swr[i & qp.sq_mask].opcode)) return true;
    return false;
}

// READ/ATOMIC WQEs sent and not yet completed, against the initiator depth.
inline bool rd_atomic_window_full(const Qp& qp) {
    uint32_t limit = qp.attr.max_rd_atomic ? qp.attr.max_rd_atomic : 1;
    uint32_t n = 0;
    for (uint32_t i = qp.sq_done; i != qp.sq_send; ++i)
        if (is_rd_atomic(qp.swr[i & qp.sq_mask].opcode) && ++n >= limit) return true;
    return false;
}
}  // namespace rc_requester_detail

// Copies the next WQE out of the application's ring. Returns false when the ring is
// empty (or its indices are garbage, which puts the QP in error).
template <class Env>
bool RcRequester<Env>::fetch_send_wqe(Qp& qp) {
    uint32_t prod = qp.sq->prod.load(std::memory_order_acquire);
    if (prod == qp.sq_fetch) return false;
    if (uint32_t(prod - qp.sq_done) > qp.sq_mask + 1 ||
        uint32_t(prod - qp.sq_done) < uint32_t(qp.sq_fetch - qp.sq_done)) {
        // The library never overfills the ring and never takes back a posted WQE (prod
        // behind sq_fetch would make us run on through unposted slots, overwriting the
        // shadows of outstanding WQEs); something scribbled on it.
        if (qp.state != IBV_QPS_ERR) {
            env_.xrc.post_qp_async(qp, IBV_EVENT_QP_FATAL);
            env_.done.qp_to_error(qp);
        }
        return false;
    }
    const uint8_t* slot = abi::ring_slot(qp.sq, qp.sq_stride, qp.sq_mask, qp.sq_fetch);
    abi::SendWqe h;
    std::memcpy(&h, slot, sizeof h);
    SendWr& w = qp.swr[qp.sq_fetch & qp.sq_mask];
    w.wr_id = h.wr_id;
    w.opcode = h.opcode;
    w.flags = h.send_flags;
    w.imm = h.imm_data;
    w.remote_addr = h.remote_addr;
    w.rkey = h.rkey;
    w.compare_add = h.compare_add;
    w.swap = h.swap;
    if (qp.type == IBV_QPT_UD) {
        w.ud_marks = net::ip_marks_from_grh(h.ud_grh[0], h.ud_grh[1]);
        w.ud_local = env_.wire.local_of_gid(h.ud_grh[3]);
        if (h.ud_grh[2] == abi::kUdIpv6) {  // abi/rings.h: the 16 bytes in two fields
            uint8_t g[16];
            std::memcpy(g, &h.remote_addr, 8);
            std::memcpy(g + 8, &h.compare_add, 8);
            w.ud_dest = net::Endpoint::from_gid(g, env_.config.port, env_.config.ipv6_scope);
        } else {
            w.ud_dest = net::Endpoint::ipv4(h.ah, env_.config.port);
        }
    }
    w.ud_qpn = h.remote_qpn & 0xffffff;
    w.ud_qkey = h.remote_qkey;
    w.xrc_srqn = h.remote_srqn & 0xffffff;
    w.status = IBV_WC_SUCCESS;
    w.is_inline = (h.send_flags & IBV_SEND_INLINE) != 0;
    w.executed = false;
    bool rd_atomic = is_rd_atomic(w.opcode);
    bool atomic_write = w.opcode == IBV_WR_ATOMIC_WRITE;
    bool local = is_local_op(w.opcode);
    bool flush = w.opcode == abi::kWrFlush;
    uint64_t total = 0;
    if (!rc_requester_detail::opcode_allowed(qp.type, w.opcode)) {
        w.num_sge = 0;
        w.status = IBV_WC_LOC_QP_OP_ERR;
    } else if (flush) {
        // No local data: the length is the remote range's (the RETH's DMA length, 32 bits).
        w.num_sge = 0;
        w.is_inline = false;
        if (h.compare_add > UINT32_MAX) w.status = IBV_WC_LOC_LEN_ERR;
    } else if (local) {
        // No data: a BIND_MW's data area holds what to bind, a LOCAL_INV's nothing.
        w.num_sge = 0;
        w.is_inline = false;
    } else if (w.is_inline && (!rd_atomic || atomic_write)) {
        w.num_sge = 0;
        if (h.inline_len > qp.cap.max_inline_data &&
            !(atomic_write && h.inline_len <= abi::kAtomicWriteLen))
            w.status = IBV_WC_LOC_LEN_ERR;
        else
            total = h.inline_len;  // the data stays in the slot (Qp::sq_inline)
    } else if (h.num_sge > qp.cap.max_send_sge) {
        w.num_sge = 0;
        w.status = IBV_WC_LOC_LEN_ERR;
    } else {
        w.is_inline = false;
        w.num_sge = h.num_sge;
        std::memcpy(w.sge, slot + sizeof h, sizeof(abi::Sge) * h.num_sge);
        // READ and ATOMIC results are written into the local SGEs (an ATOMIC WRITE's are
        // read, as a WRITE's).
        if (!env_.verbs.check_local_sges(qp.owner, qp.pd, w.sge, w.num_sge,
                                         rd_atomic && !atomic_write, &total))
            w.status = IBV_WC_LOC_PROT_ERR;
    }
    if (w.status == IBV_WC_SUCCESS && total > abi::kMaxMsgSize) w.status = IBV_WC_LOC_LEN_ERR;
    // ibv_poll_cq(3): an atomic of other than 8 bytes is a local length error; an ATOMIC
    // WRITE carries exactly 8 (rxe sends what it has; IBTA fixes its DMA length at 8).
    bool atomic = rd_atomic && w.opcode != IBV_WR_RDMA_READ && !flush;
    if (w.status == IBV_WC_SUCCESS && atomic && total != 8) w.status = IBV_WC_LOC_LEN_ERR;
    // A UD message is one packet of at most the port's active MTU. A longer one completes
    // in error and sends nothing (rxe sends nothing and reports success, IBA C10-93.1.1;
    // an error tells the application why nothing arrives).
    if (w.status == IBV_WC_SUCCESS && qp.type == IBV_QPT_UD && total > env_.port_mtu_bytes)
        w.status = IBV_WC_LOC_LEN_ERR;
    w.length = w.status == IBV_WC_SUCCESS ? uint32_t(total) : 0;
    uint32_t npkts = local                          ? 0
                     : atomic || flush || !w.length ? 1
                                                    : (w.length + qp.mtu - 1) / qp.mtu;
    // A FLUSH's completion reports the length it named, as rxe's (its dma.length).
    if (flush && w.status == IBV_WC_SUCCESS) w.length = uint32_t(h.compare_add);
    w.first_psn = qp.wqe_psn;
    w.last_psn = net::psn_add(qp.wqe_psn, npkts - 1);
    if (w.status == IBV_WC_SUCCESS) qp.wqe_psn = net::psn_add(qp.wqe_psn, npkts);
    ++qp.sq_fetch;
    return true;
}

// A WQE that cannot be executed completes in order: once everything before it has.
template <class Env>
void RcRequester<Env>::complete_blocked(Qp& qp) {
    if (qp.owner->dead) return;
    if (qp.sq_done == qp.sq_send && qp.sq_send != qp.sq_fetch) {
        SendWr& w = qp.swr[qp.sq_send & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS) {
            env_.done.complete_send(qp, qp.sq_send, w.status);
            ++qp.sq_send;
            env_.done.send_queue_error(qp);
        }
    }
}

// Completes the local operations that follow the completed WQEs and have taken effect:
// they wait for nothing else (no acknowledgement comes for them).
template <class Env>
void RcRequester<Env>::complete_local_ops(Qp& qp) {
    while (qp.sq_done != qp.sq_send) {
        const SendWr& w = qp.swr[qp.sq_done & qp.sq_mask];
        if (!is_local_op(w.opcode) || !w.executed || w.status != IBV_WC_SUCCESS) return;
        env_.done.complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
    }
}

template <class Env>
void RcRequester<Env>::progress(Qp& qp) {
    if (qp.state == IBV_QPS_ERR) {
        env_.done.flush_queues(qp);
        return;
    }
    if (qp.state == IBV_QPS_SQE) return env_.done.flush_send_queue(qp);
    if (qp.state != IBV_QPS_RTS || qp.rnr_wait || qp.owner->dead) return;
    if (qp.type == IBV_QPT_UD) return env_.ud.requester_progress(qp);
    build(qp);
    tx_flush(qp);
}

// Reads the payloads of the packets in txb_ (one system call) and sends them in PSN order.
// If the application unmapped registered memory under the device, the packets before the
// one that cannot be read go out, and the requester resumes at that packet, whose WQE
// completes with IBV_WC_LOC_PROT_ERR (once every WQE before it has).
template <class Env>
void RcRequester<Env>::tx_flush(Qp& qp) {
    TxBatch& b = txb_;
    if (!b.npkt) return;
    uint32_t good = b.npkt;
    if (b.bytes &&
        !env_.dma.readv(qp.owner, b.local, int(b.nlocal), b.remote, int(b.nremote), b.bytes)) {
        // Find the first packet that cannot be read, one at a time.
        good = 0;
        for (uint32_t i = 0, l = 0, r = 0; i < b.npkt; ++i, ++good) {
            if (!b.pkt[i].has_payload) continue;
            uint32_t nr = 0;
            for (size_t want = b.local[l].iov_len; want; want -= b.remote[r + nr++].iov_len) {
            }
            if (!env_.dma.readv(qp.owner, &b.local[l], 1, &b.remote[r], int(nr),
                                b.local[l].iov_len))
                break;
            ++l;
            r += nr;
        }
    }
    // A QP that went to the error state meanwhile sends nothing more.
    if (qp.state == IBV_QPS_ERR || qp.owner->dead) good = 0;
    for (uint32_t i = 0; i < b.npkt; ++i) {
        if (i < good)
            env_.wire.transmit(b.pkt[i].slot, b.pkt[i].frame_len, qp.dest, &qp);
        else
            env_.wire.tx_free(b.pkt[i].slot);
    }
    if (good < b.npkt && qp.state != IBV_QPS_ERR && !qp.owner->dead) {
        const TxBatch::Pkt& bad = b.pkt[good];
        qp.sq_send = bad.sq_send;
        qp.sq_send_off = bad.sq_send_off;
        qp.next_psn = bad.psn;
        qp.swr[bad.sq_send & qp.sq_mask].status = IBV_WC_LOC_PROT_ERR;
        b.clear();
        complete_blocked(qp);
        return;
    }
    b.clear();
}

// Builds request packets from the send queue into txb_, as far as the window, the
// transmit buffers and the batch allow; the caller sends them (tx_flush).
template <class Env>
void RcRequester<Env>::build(Qp& qp) {
    bool uc = qp.type == IBV_QPT_UC;
    uint8_t transport = qp.transport;
    for (;;) {
        if (txb_.full()) {
            tx_flush(qp);
            if (qp.state != IBV_QPS_RTS) return;
        }
        if (qp.sq_send == qp.sq_fetch && !fetch_send_wqe(qp)) break;
        if (qp.state == IBV_QPS_ERR) return;
        SendWr& w = qp.swr[qp.sq_send & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS) {
            tx_flush(qp);  // the packets before it leave first
            complete_blocked(qp);
            return;
        }
        // IBV_SEND_FENCE: not before every earlier READ and ATOMIC has completed.
        if ((w.flags & IBV_SEND_FENCE) && qp.sq_send_off == 0 &&
            rc_requester_detail::rd_atomic_between(qp, qp.sq_done, qp.sq_send))
            break;
        if (is_local_op(w.opcode)) {
            // Takes effect now, once (a rewind may pass it again); completes in order.
            if (!w.executed) {
                tx_flush(qp);  // the packets before it read their data first
                if (qp.state != IBV_QPS_RTS) return;
                w.executed = true;
                w.status = w.opcode == IBV_WR_BIND_MW ? env_.windows.bind_mw(qp, qp.sq_send)
                                                      : env_.windows.local_invalidate(qp, w.imm);
                if (w.status != IBV_WC_SUCCESS) {
                    complete_blocked(qp);
                    return;
                }
            }
            ++qp.sq_send;
            complete_local_ops(qp);
            continue;
        }
        if (net::psn_diff(qp.next_psn, qp.una_psn) >=
            int32_t(rc_requester_detail::kMaxOutstandingPkts))
            break;
        bool rd_atomic = is_rd_atomic(w.opcode);
        if (rd_atomic && qp.sq_send_off == 0 && rc_requester_detail::rd_atomic_window_full(qp))
            break;
        uint32_t slot;
        uint8_t* buf = env_.wire.tx_begin(&slot);
        if (!buf) {
            env_.sched.mark_ready(qp);  // resume when transmit buffers come back
            break;
        }
        uint32_t off = qp.sq_send_off;
        net::Packet p{};
        p.bth.pkey = net::kDefaultPkey;
        p.bth.dqpn = qp.attr.dest_qp_num;
        p.bth.psn = qp.next_psn;
        p.xrc.srqn = w.xrc_srqn;  // written only for XRC opcodes
        uint32_t len = 0, npsn = 1;
        bool last = true;
        if (w.opcode == IBV_WR_RDMA_READ) {
            // One request for everything not yet received; the responses use the PSNs
            // up to the WQE's last.
            p.bth.opcode = net::op_on(transport, net::kOpReadReq);
            p.reth = {w.remote_addr + off, w.rkey, w.length - off};
            npsn = uint32_t(net::psn_diff(w.last_psn, qp.next_psn)) + 1;
            p.bth.ackreq = true;
        } else if (w.opcode == abi::kWrFlush) {
            // One request: the FETH, then the RETH of the range (or of nothing, for a whole
            // MR), no payload (oA19-2). Answered by a zero-length READ response.
            p.bth.opcode = net::kRcFlush;
            p.feth = {abi::flush_wqe_type(w.swap), abi::flush_wqe_level(w.swap)};
            p.reth = {w.remote_addr, w.rkey, uint32_t(w.compare_add)};
            p.bth.ackreq = true;
        } else if (is_fetching_atomic(w.opcode)) {
            p.bth.opcode =
                net::op_on(transport, w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? net::kOpCmpSwap
                                                                            : net::kOpFetchAdd);
            p.atomic = {w.remote_addr, w.rkey,
                        w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w.swap : w.compare_add,
                        w.compare_add};
            p.bth.ackreq = true;
        } else {
            len = w.length - off < qp.mtu ? w.length - off : qp.mtu;
            bool first = off == 0;
            last = off + len == w.length;
            p.bth.opcode =
                net::op_on(transport, rc_requester_detail::message_op(w.opcode, first, last));
            p.bth.se = last && (w.flags & IBV_SEND_SOLICITED) && w.opcode != IBV_WR_ATOMIC_WRITE;
            p.bth.pad = net::pad_for(len);
            p.bth.ackreq = !uc && (last || (p.bth.psn % rc_requester_detail::kAckReqEvery) == 0);
            p.imm = be32toh(w.imm);
            p.ieth = w.imm;  // SEND_WITH_INV: invalidate_rkey, host order
            if (first) p.reth = {w.remote_addr, w.rkey, w.length};
        }
        size_t hdr = net::encode_headers(p, buf);
        uint8_t* payload = buf + hdr;
        TxBatch& b = txb_;
        b.pkt[b.npkt] = {slot,       uint32_t(hdr + len + p.bth.pad), false, qp.sq_send, off,
                         qp.next_psn};
        if (len && w.is_inline) {
            std::memcpy(payload, qp.sq_inline(qp.sq_send) + off, len);
        } else if (len) {
            // Read with the rest of the batch (tx_flush).
            b.nremote += uint32_t(sge_iov(w.sge, w.num_sge, off, len, &b.remote[b.nremote]));
            b.local[b.nlocal++] = {payload, len};
            b.bytes += len;
            b.pkt[b.npkt].has_payload = true;
        }
        ++b.npkt;
        std::memset(payload + len, 0, p.bth.pad);
        ++qp.tx_pkts;
        qp.next_psn = net::psn_add(qp.next_psn, npsn);
        if (uc) {
            // Unreliable: nothing is acknowledged, a WQE is done once it is sent.
            qp.una_psn = qp.next_psn;
        } else {
            // The ACK timer runs from the last transmission: the time spent building a long
            // burst (sent when the engine submits it) must not count as the peer's silence.
            env_.sched.arm_timer(qp, env_.now_ns() + ack_timeout_ns(qp.attr.timeout));
        }
        if (last) {
            ++qp.sq_send;
            qp.sq_send_off = 0;
            if (uc) {
                tx_flush(qp);  // the data is read before the application may reuse it
                if (qp.state == IBV_QPS_ERR) return;
                env_.done.complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
                complete_local_ops(qp);
            }
        } else {
            qp.sq_send_off = off + len;
        }
    }
}

template <class Env>
void RcRequester<Env>::go_back(Qp& qp, uint32_t psn) {
    uint32_t i = qp.sq_done;
    // Skips what the responder has; a local operation takes no PSN, and stays to be run
    // (or passed over, if it already ran) when the requester comes back to it.
    while (i != qp.sq_fetch && net::psn_lt(qp.swr[i & qp.sq_mask].last_psn, psn) &&
           !(is_local_op(qp.swr[i & qp.sq_mask].opcode) && !qp.swr[i & qp.sq_mask].executed))
        ++i;
    qp.sq_send = i;
    qp.sq_send_off = 0;
    qp.next_psn = psn;
    if (i != qp.sq_fetch) {
        const SendWr& w = qp.swr[i & qp.sq_mask];
        int32_t d = net::psn_diff(psn, w.first_psn);
        if (d > 0 && !(is_rd_atomic(w.opcode) && w.opcode != IBV_WR_RDMA_READ))
            qp.sq_send_off = uint32_t(d) * qp.mtu;
        else
            qp.next_psn = w.first_psn;
    }
    env_.sched.mark_ready(qp);
}

}  // namespace uroce::emu
