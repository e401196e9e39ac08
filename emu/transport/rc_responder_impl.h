// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RcResponder's member functions (rc_responder.h): included by emu/engine/stages/rc_responder.cpp,
// which instantiates them for TransportEnv, and by tests that instantiate them with a fake Env.
#pragma once

#include <atomic>
#include <cstring>

#include "emu/abi/flush.h"
#include "emu/abi/verbs_names.h"
#include "emu/engine/dma_write_batch.h"
#include "emu/engine/tx_batch.h"
#include "emu/transport/rc_responder.h"
#include "net/opcodes.h"

namespace uroce::emu {

// Replay entries in use: max_dest_rd_atomic, 0 counting as 1.
template <class Env>
uint32_t RcResponder<Env>::replay_slots(const Qp& qp) {
    return qp.attr.max_dest_rd_atomic ? qp.attr.max_dest_rd_atomic : 1;
}

// The replay entry of the ATOMIC or ATOMIC WRITE at `psn`; null when it is older than the
// entries kept.
template <class Env>
const Qp::AtomicReplay* RcResponder<Env>::find_replay(const Qp& qp, uint32_t psn) {
    for (uint32_t i = 0; i < replay_slots(qp); ++i)
        if (qp.atomic_replay[i].valid && qp.atomic_replay[i].psn == psn)
            return &qp.atomic_replay[i];
    return nullptr;
}

// An ATOMIC or ATOMIC WRITE executed: it takes the oldest replay entry, and the responder
// moves past it.
template <class Env>
void RcResponder<Env>::record_executed(Qp& qp, uint32_t psn, uint64_t orig) {
    qp.atomic_replay[qp.atomic_replay_next++ % replay_slots(qp)] = {psn, orig, true};
    qp.epsn = net::psn_add(qp.epsn, 1);
    qp.msn = (qp.msn + 1) & 0xffffff;
}

template <class Env>
void RcResponder<Env>::send_ack(Qp& qp, uint8_t syndrome, uint32_t psn) {
    // Not ahead of the responses of a READ before it (the requester would take them for lost).
    if (qp.read_owed.active) resume_read(qp);
    uint32_t slot;
    uint8_t* buf = qp.read_owed.active ? nullptr : env_.wire.tx_begin(&slot);
    if (!buf) {
        // Every transmit buffer is in flight: owed until one comes back. Left to the
        // requester's timer it cost a retransmission and the whole ACK timeout (about a
        // second at UCX's timeout 18, each time a burst filled the buffers).
        qp.ack_owed = true;
        qp.ack_owed_syndrome = syndrome;
        qp.ack_owed_psn = psn;
        env_.sched.mark_ready(qp);
        return;
    }
    qp.ack_owed = false;
    net::Packet p{};
    p.bth.opcode = net::op_on(qp.transport, net::kOpAck);
    p.bth.pkey = net::kDefaultPkey;
    p.bth.dqpn = qp.attr.dest_qp_num;
    p.bth.psn = psn;
    p.aeth.syndrome = syndrome;
    p.aeth.msn = qp.msn & 0xffffff;
    size_t hdr = net::encode_headers(p, buf);
    env_.wire.transmit(slot, hdr, qp.dest, &qp);
    ++qp.tx_pkts;
}

template <class Env>
void RcResponder<Env>::send_owed(Qp& qp) {
    if (!qp.ack_owed && !qp.read_owed.active) return;
    if (qp.owner->dead || qp.state == IBV_QPS_RESET || qp.state == IBV_QPS_ERR) {
        qp.ack_owed = false;
        qp.read_owed.active = false;
        return;
    }
    if (qp.read_owed.active) resume_read(qp);
    if (qp.ack_owed) send_ack(qp, qp.ack_owed_syndrome, qp.ack_owed_psn);
}

// A responder-side error: the receive (if any) completes with `status`, the requester
// is told with `nak`, and the QP enters the error state.
template <class Env>
void RcResponder<Env>::error(Qp& qp, ibv_wc_status status, uint8_t nak, uint32_t psn,
                             ibv_event_type event) {
    if (qp.owner->dead) return;  // its process is gone: nobody to tell, nothing to NAK
    env_.trace.add("qp 0x%x responder: request psn 0x%x refused (%s), NAK syndrome 0x%02x sent",
                   qp.qpn, psn, abi::wc_status_id(status), nak);
    if (qp.have_rwr) env_.recv.complete(qp, net::Packet{}, status);
    send_ack(qp, nak, psn);
    env_.xrc.post_qp_async(qp, event);
    env_.done.qp_to_error(qp);
}

// Resolves an rkey for remote access of [va, va + len): the MR (or memory window) must
// belong to the QP's PD and allow `access`, and the QP must allow it too. Returns the
// process address, or 0 when access is denied.
template <class Env>
uint64_t RcResponder<Env>::remote_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len,
                                         uint32_t access, Session** owner) const {
    if (!(qp.attr.qp_access_flags & access)) return 0;
    if (rkey & kMwKeyBit) return env_.windows.mw_target(qp, rkey, va, len, access, owner);
    Mr* mr = env_.verbs.mr_for_key(rkey);
    if (!mr || mr->pd != qp.pd || !(mr->access & access)) return 0;
    if (va < mr->iova || va + len < va || va + len > mr->iova + mr->length) return 0;
    *owner = mr->owner;  // an XRC target's MRs belong to the SRQ owner, not the QP's
    return mr->addr + (va - mr->iova);
}

// Sends the responses of an RDMA READ: one packet per MTU, PSNs from the request's.
template <class Env>
void RcResponder<Env>::execute_read(Qp& qp, const net::Packet& p, bool duplicate) {
    uint32_t len = p.reth.dma_len;
    uint64_t src = 0;
    Session* mem = qp.owner;
    if (len) {
        src = remote_target(qp, p.reth.rkey, p.reth.va, len, IBV_ACCESS_REMOTE_READ, &mem);
        if (!src) {
            if (duplicate) return;
            return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn,
                         IBV_EVENT_QP_ACCESS_ERR);
        }
    }
    uint32_t npkts = len ? (len + qp.mtu - 1) / qp.mtu : 1;
    if (!duplicate) {
        qp.epsn = net::psn_add(qp.epsn, npkts);
        qp.msn = (qp.msn + 1) & 0xffffff;
    }
    // Behind the rest of an earlier READ, which still has no transmit buffers: this one goes
    // unanswered, and the requester's timer asks for it again (one READ is owed at a time).
    if (qp.read_owed.active) resume_read(qp);
    if (qp.read_owed.active) return;
    Qp::ReadOwed r;
    r.duplicate = duplicate;
    r.psn = p.bth.psn;
    r.npkts = npkts;
    r.len = len;
    r.rkey = p.reth.rkey;
    r.va = p.reth.va;
    send_read_responses(qp, r, src, mem);
}

// The rest of an owed READ: its target resolved again (the MR may be gone meanwhile).
template <class Env>
void RcResponder<Env>::resume_read(Qp& qp) {
    Qp::ReadOwed r = qp.read_owed;
    qp.read_owed.active = false;
    uint64_t src = 0;
    Session* mem = qp.owner;
    if (r.len) {
        src = remote_target(qp, r.rkey, r.va, r.len, IBV_ACCESS_REMOTE_READ, &mem);
        if (!src) {
            if (r.duplicate) return;
            return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, net::psn_add(r.psn, r.next),
                         IBV_EVENT_QP_ACCESS_ERR);
        }
    }
    send_read_responses(qp, r, src, mem);
}

// The responses of READ `r` from its packet r.next on. Out of transmit buffers, the rest is
// owed (qp.read_owed) and goes when they come back (send_owed).
template <class Env>
void RcResponder<Env>::send_read_responses(Qp& qp, const Qp::ReadOwed& rd, uint64_t src,
                                           Session* mem) {
    const uint32_t npkts = rd.npkts, len = rd.len;
    // In bursts of up to kBurst packets whose payloads one process_vm_readv fills (the
    // source is contiguous); a burst that cannot be read is read again packet by packet, so
    // that the packets before the unreadable one still leave, then the NAK.
    constexpr uint32_t kBurst = TxBatch::kMaxPkts;
    uint32_t slot[kBurst], frame[kBurst];
    iovec local[kBurst];
    for (uint32_t first = rd.next; first < npkts; first += kBurst) {
        uint32_t k = 0;
        for (uint32_t i = first; i < npkts && k < kBurst; ++i, ++k) {
            uint8_t* buf = env_.wire.tx_begin(&slot[k]);
            if (!buf) break;  // the rest is owed, below
            uint32_t off = i * qp.mtu;
            uint32_t n = len - off < qp.mtu ? len - off : qp.mtu;
            net::Packet r{};
            r.bth.opcode = net::op_on(qp.transport, npkts == 1       ? net::kOpReadRespOnly
                                                    : i == 0         ? net::kOpReadRespFirst
                                                    : i == npkts - 1 ? net::kOpReadRespLast
                                                                     : net::kOpReadRespMiddle);
            r.bth.pkey = net::kDefaultPkey;
            r.bth.dqpn = qp.attr.dest_qp_num;
            r.bth.psn = net::psn_add(rd.psn, i);
            r.bth.pad = net::pad_for(n);
            r.aeth.syndrome = kAckUnlimited;
            r.aeth.msn = qp.msn;
            size_t hdr = net::encode_headers(r, buf);
            std::memset(buf + hdr + n, 0, r.bth.pad);
            local[k] = {buf + hdr, n};
            frame[k] = uint32_t(hdr + n + r.bth.pad);
        }
        uint64_t off = uint64_t(first) * qp.mtu, bytes = 0;
        for (uint32_t j = 0; j < k; ++j) bytes += local[j].iov_len;
        iovec remote{reinterpret_cast<void*>(src + off), bytes};
        uint32_t good = k;
        if (bytes && !env_.dma.readv(mem, local, int(k), &remote, 1, bytes)) {
            for (good = 0; good < k; ++good) {
                iovec one{reinterpret_cast<void*>(src + off), local[good].iov_len};
                if (!env_.dma.read(mem, local[good].iov_base, &one, 1, one.iov_len)) break;
                off += one.iov_len;
            }
        }
        for (uint32_t j = 0; j < k; ++j) {
            if (j >= good) {
                env_.wire.tx_free(slot[j]);
                continue;
            }
            env_.wire.transmit(slot[j], frame[j], qp.dest, &qp);
            ++qp.tx_pkts;
        }
        if (good < k) {
            if (rd.duplicate) return;
            // At the PSN of the first response not sent: the requester has taken the ones
            // before it, and a NAK for the request's PSN would look old.
            return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess,
                         net::psn_add(rd.psn, first + good), IBV_EVENT_QP_ACCESS_ERR);
        }
        if (k < kBurst && first + k < npkts) {
            // Out of transmit buffers: the rest when they come back, not after the
            // requester's timeout (a second at UCX's, for every large rendezvous READ).
            qp.read_owed = rd;
            qp.read_owed.next = first + k;
            qp.read_owed.active = true;
            env_.sched.mark_ready(qp);
            return;
        }
    }
}

// A response that acknowledges one request and carries no payload: the ATOMIC ACKNOWLEDGE
// (with the original value), or the RDMA READ response of no data that answers an ATOMIC
// WRITE (IBTA 1.5; rxe's send_read_response_ack).
template <class Env>
void RcResponder<Env>::send_ack_response(Qp& qp, uint8_t op, uint32_t psn, uint64_t orig) {
    uint32_t slot;
    uint8_t* buf = env_.wire.tx_begin(&slot);
    if (!buf) return;  // the requester's timer recovers, and the replay answers
    net::Packet r{};
    r.bth.opcode = net::op_on(qp.transport, op);
    r.bth.pkey = net::kDefaultPkey;
    r.bth.dqpn = qp.attr.dest_qp_num;
    r.bth.psn = psn;
    r.aeth.syndrome = kAckUnlimited;
    r.aeth.msn = qp.msn;
    r.atomic_ack.orig = orig;  // written only for an ATOMIC ACKNOWLEDGE
    env_.wire.transmit(slot, net::encode_headers(r, buf), qp.dest, &qp);
    ++qp.tx_pkts;
}

// Executes an ATOMIC once. A duplicate is answered from the replay state, never
// executed again (IBTA 9.4.5).
template <class Env>
void RcResponder<Env>::execute_atomic(Qp& qp, const net::Packet& p, bool duplicate) {
    if (duplicate) {  // older than the replay window: nothing to answer
        if (const auto* r = find_replay(qp, p.bth.psn))
            send_ack_response(qp, net::kOpAtomicAck, r->psn, r->orig);
        return;
    }
    if (p.atomic.va & 7)
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    Session* mem = nullptr;
    uint64_t addr =
        remote_target(qp, p.atomic.rkey, p.atomic.va, 8, IBV_ACCESS_REMOTE_ATOMIC, &mem);
    if (!addr)
        return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn, IBV_EVENT_QP_ACCESS_ERR);
    // The engine thread executes every atomic of this device, one at a time: atomic
    // with respect to all other atomics through it (IBV_ATOMIC_HCA).
    uint64_t orig;
    iovec iov{reinterpret_cast<void*>(addr), 8};
    if (!env_.dma.read(mem, &orig, &iov, 1, 8))
        return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn, IBV_EVENT_QP_ACCESS_ERR);
    bool cas = (p.bth.opcode & 0x1f) == net::kOpCmpSwap;
    uint64_t val =
        cas ? (orig == p.atomic.compare ? p.atomic.swap_add : orig) : orig + p.atomic.swap_add;
    if (val != orig && !env_.dma.write(mem, &val, &iov, 1, 8))
        return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn, IBV_EVENT_QP_ACCESS_ERR);
    record_executed(qp, p.bth.psn, orig);
    send_ack_response(qp, net::kOpAtomicAck, p.bth.psn, orig);
}

// Executes an ATOMIC WRITE once: its 8 bytes land as one store, after every write before it
// (rxe: smp_store_release). It needs REMOTE_WRITE, as rxe checks it (of the QP and the key),
// and an 8-byte aligned address, checked first as for the other atomics. A duplicate is
// answered from the replay state the ATOMICs use, never written again (as rxe replays it
// from its responder resource).
template <class Env>
void RcResponder<Env>::execute_atomic_write(Qp& qp, const net::Packet& p, bool duplicate) {
    if (duplicate) {
        if (find_replay(qp, p.bth.psn)) send_ack_response(qp, net::kOpReadRespOnly, p.bth.psn, 0);
        return;
    }
    // IBTA 1.5: the DMA length is 8 and so is the payload (rxe: pktlen != resid is a length
    // error, NAK invalid request); a SEND or WRITE still open lacks its LAST (rxe: likewise).
    if (p.reth.dma_len != 8 || p.payload_len != 8 || (p.reth.va & 7) || qp.have_write ||
        qp.have_rwr)
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    Session* mem = nullptr;
    uint64_t addr = remote_target(qp, p.reth.rkey, p.reth.va, 8, IBV_ACCESS_REMOTE_WRITE, &mem);
    uint64_t value;
    std::memcpy(&value, p.payload, 8);
    if (!addr || !env_.dma.store64(mem, addr, value))
        return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn, IBV_EVENT_QP_ACCESS_ERR);
    record_executed(qp, p.bth.psn, 0);
    send_ack_response(qp, net::kOpReadRespOnly, p.bth.psn, 0);
}

// Whether the FLUSH's key names memory it may flush: each placement type asked for needs its
// access flag on the MR (or window); a range flush needs the range inside it, a whole-MR flush
// only the key (rxe skips the range check for it; a window's range is still checked).
template <class Env>
bool RcResponder<Env>::flush_allowed(const Qp& qp, const net::Packet& p, uint32_t access) const {
    for (uint32_t a : {abi::kAccessFlushGlobal, abi::kAccessFlushPersistent}) {
        if (!(access & a)) continue;
        Session* owner = nullptr;
        if (p.feth.selectivity == net::feth::kFlushMr && !(p.reth.rkey & kMwKeyBit)) {
            const Mr* mr = env_.verbs.mr_for_key(p.reth.rkey);
            if (!mr || mr->pd != qp.pd || !(mr->access & a)) return false;
        } else if (!remote_target(qp, p.reth.rkey, p.reth.va, p.reth.dma_len, a, &owner)) {
            return false;
        }
    }
    return true;
}

// Executes a FLUSH once (IBTA 1.5 as rxe): every WRITE and ATOMIC before it has landed in the
// target process's memory before the zero-length READ response leaves, which says so. The
// memory is DRAM: both placement types are that and a full fence (docs/verbs-support.md). A
// placement type the QP's access flags do not allow, or a reserved FETH value, is an invalid
// request (rxe: unsupported opcode); one the key's MR does not allow is a remote access error.
// A duplicate is answered from the replay state, as ATOMIC WRITE's.
template <class Env>
void RcResponder<Env>::execute_flush(Qp& qp, const net::Packet& p, bool duplicate) {
    if (duplicate) {
        if (find_replay(qp, p.bth.psn)) send_ack_response(qp, net::kOpReadRespOnly, p.bth.psn, 0);
        return;
    }
    uint8_t type = p.feth.placement;
    uint32_t access = abi::flush_access(type);
    if (!type || (type & ~(abi::kFlushGlobal | abi::kFlushPersistent)) ||
        p.feth.selectivity > net::feth::kFlushMr || (qp.attr.qp_access_flags & access) != access ||
        qp.have_write || qp.have_rwr)
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    if (!flush_allowed(qp, p, access))
        return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn, IBV_EVENT_QP_ACCESS_ERR);
    if (!env_.dma.settle(qp)) return;  // an earlier WRITE's memory is gone: its error path ran
    std::atomic_thread_fence(std::memory_order_seq_cst);
    record_executed(qp, p.bth.psn, 0);
    send_ack_response(qp, net::kOpReadRespOnly, p.bth.psn, 0);
}

// One packet of an RDMA WRITE (with or without immediate).
template <class Env>
void RcResponder<Env>::execute_write(Qp& qp, const net::Packet& p, const net::OpInfo* info) {
    bool first = info->flags & net::kFirst, last = info->flags & net::kLast;
    bool imm = info->flags & net::kImmOp;
    if (first) {
        if (qp.have_write || qp.have_rwr)  // a new message while one is still open
            return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
        uint64_t dst = 0;
        if (p.reth.dma_len) {
            dst = remote_target(qp, p.reth.rkey, p.reth.va, p.reth.dma_len, IBV_ACCESS_REMOTE_WRITE,
                                &qp.write_owner);
            if (!dst)
                return error(qp, IBV_WC_REM_ACCESS_ERR, kNakRemAccess, p.bth.psn,
                             IBV_EVENT_QP_ACCESS_ERR);
        }
        qp.write_va = dst;
        qp.write_left = qp.write_total = p.reth.dma_len;
        qp.have_write = true;
    } else if (!qp.have_write) {
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    }
    if (p.payload_len > qp.write_left || (last && p.payload_len != qp.write_left))
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    // The immediate consumes a receive: without one, nothing of this packet happens.
    if (imm && !env_.recv.take(qp)) {
        if (first) qp.have_write = false;
        send_ack(qp, uint8_t(kRnrNak | (qp.attr.min_rnr_timer & 0x1f)), p.bth.psn);
        return;
    }
    // Written with the next flush; memory the application unmapped since it registered it
    // brings REM_ACCESS_ERR then (dma_write_failed), before this WRITE is acknowledged.
    iovec iov{reinterpret_cast<void*>(qp.write_va), p.payload_len};
    env_.dma.write_later(qp.write_owner, p.payload, &iov, 1, p.payload_len, qp.qpn, p.bth.psn,
                         DmaWriteBatch::Path::kRcWrite);
    qp.write_va += p.payload_len;
    qp.write_left -= p.payload_len;
    qp.epsn = net::psn_add(qp.epsn, 1);
    if (((last && imm) || p.bth.ackreq) && !env_.dma.settle(qp)) return;
    if (last) {
        qp.have_write = false;
        qp.msn = (qp.msn + 1) & 0xffffff;
        if (imm) {
            qp.rwr_off = qp.write_total;  // reported as the completion's byte_len
            env_.recv.complete(qp, p, IBV_WC_SUCCESS);
        }
    }
    if (p.bth.ackreq) send_ack(qp, kAckUnlimited, p.bth.psn);
}

template <class Env>
void RcResponder<Env>::receive(Qp& qp, const net::Packet& p) {
    if (qp.state != IBV_QPS_RTR && qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD &&
        qp.state != IBV_QPS_SQE)
        return env_.counters.drop(net::DropReason::kBadQp, qp);
    if (qp.state == IBV_QPS_RTR && !qp.comm_est && qp.type == IBV_QPT_RC)
        env_.recv.comm_established(qp);
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    int32_t d = net::psn_diff(p.bth.psn, qp.epsn);
    if (d < 0) {
        // Duplicate: reads are served again, atomics replayed, the rest acknowledged.
        if (info->flags & net::kReadReq) return execute_read(qp, p, true);
        if (info->flags & net::kAtomicOp) return execute_atomic(qp, p, true);
        if (info->flags & net::kAtomicWriteOp) return execute_atomic_write(qp, p, true);
        if (info->flags & net::kFlushOp) return execute_flush(qp, p, true);
        send_ack(qp, kAckUnlimited, net::psn_add(qp.epsn, -1));
        return;
    }
    if (d > 0) {
        if (!qp.nak_sent) send_ack(qp, kNakSeqErr, qp.epsn);
        qp.nak_sent = true;
        return;
    }
    qp.nak_sent = false;
    if (info->flags & net::kReadReq) return execute_read(qp, p, false);
    if (info->flags & net::kAtomicOp) return execute_atomic(qp, p, false);
    if (info->flags & net::kAtomicWriteOp) return execute_atomic_write(qp, p, false);
    if (info->flags & net::kFlushOp) return execute_flush(qp, p, false);
    if (info->flags & net::kWriteOp) return execute_write(qp, p, info);
    if (!(info->flags & net::kSendOp))
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    bool first = info->flags & net::kFirst, last = info->flags & net::kLast;
    if (first) {
        if (qp.have_rwr || qp.have_write)  // a FIRST or ONLY while a message is still open
            return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
        if (!env_.recv.take(qp)) {
            send_ack(qp, uint8_t(kRnrNak | (qp.attr.min_rnr_timer & 0x1f)), p.bth.psn);
            return;
        }
    } else if (!qp.have_rwr) {
        return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    }
    if (!qp.rwr_ok)
        return error(qp, IBV_WC_LOC_PROT_ERR, kNakRemOp, p.bth.psn, IBV_EVENT_QP_ACCESS_ERR);
    if (p.payload_len > qp.rwr.length - qp.rwr_off)
        return error(qp, IBV_WC_LOC_LEN_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    // SEND_WITH_INVALIDATE: the R_Key in the IETH is invalidated before the receive
    // completes. One that cannot be (not a bound type 2 window of this PD and QP) is an
    // invalid request, with rxe's status for the receive (docs/memory-windows.md).
    Mw* inv = nullptr;
    if (info->flags & net::kInvOp) {
        inv = env_.windows.remote_invalidatable(qp, p.ieth);
        if (!inv)
            return error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn, IBV_EVENT_QP_REQ_ERR);
    }
    env_.recv.place_payload(qp, p, DmaWriteBatch::Path::kRcSend);  // a failure: LOC_PROT_ERR, NAK
    qp.epsn = net::psn_add(qp.epsn, 1);
    if ((last || p.bth.ackreq) && !env_.dma.settle(qp)) return;
    if (last) {
        if (inv) env_.windows.unbind(*inv);
        env_.recv.complete(qp, p, IBV_WC_SUCCESS);
        qp.msn = (qp.msn + 1) & 0xffffff;
    }
    if (p.bth.ackreq) send_ack(qp, kAckUnlimited, p.bth.psn);
}

}  // namespace uroce::emu
