// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UcResponder's member functions (uc_responder.h): included by emu/engine/stages/uc_responder.cpp,
// which instantiates them for TransportEnv; a test can instantiate them with a fake Env.
#pragma once

#include "emu/engine/dma_write_batch.h"
#include "emu/transport/uc_responder.h"
#include "net/opcodes.h"

namespace uroce::emu {

// One packet of a UC RDMA WRITE (with or without immediate). UC has no NAK: a message that
// fails a check (R_Key, bounds, access, length) is discarded and counted, and the responder
// waits for the next FIRST or ONLY, as for a lost packet (IBTA 9.7.6 class D).
template <class Env>
void UcResponder<Env>::execute_write(Qp& qp, const net::Packet& p, bool first, bool last,
                                     bool imm) {
    auto discard = [&](net::DropReason why) {
        qp.have_write = false;
        qp.uc_drop = !last;
        env_.counters.drop(why, qp);
    };
    if (first) {
        uint64_t dst = 0;
        if (p.reth.dma_len) {
            dst = env_.responder.remote_target(qp, p.reth.rkey, p.reth.va, p.reth.dma_len,
                                               IBV_ACCESS_REMOTE_WRITE, &qp.write_owner);
            if (!dst) return discard(net::DropReason::kBadRkey);
        }
        qp.write_va = dst;
        qp.write_left = qp.write_total = p.reth.dma_len;
        qp.have_write = true;
    } else if (!qp.have_write) {
        return discard(net::DropReason::kOpNotForQp);
    }
    if (p.payload_len > qp.write_left || (last && p.payload_len != qp.write_left))
        return discard(net::DropReason::kBadLength);
    // The immediate needs a receive; without one the message ends here (its earlier
    // packets stay written, as on a lossy link).
    if (imm && !qp.have_rwr && !env_.recv.take(qp)) return discard(net::DropReason::kNoRecv);
    iovec iov{reinterpret_cast<void*>(qp.write_va), p.payload_len};
    env_.dma.write_later(qp.write_owner, p.payload, &iov, 1, p.payload_len, qp.qpn, p.bth.psn,
                         DmaWriteBatch::Path::kUcWrite);
    qp.write_va += p.payload_len;
    qp.write_left -= p.payload_len;
    if (!last) return;
    // A write of this message failed: it ended there (dma_write_failed), no completion.
    if (imm && !env_.dma.settle(qp)) return;
    qp.have_write = false;
    if (imm) {
        qp.rwr_off = qp.write_total;  // reported as the completion's byte_len
        env_.recv.complete(qp, p, IBV_WC_SUCCESS);
    }
}

template <class Env>
void UcResponder<Env>::receive(Qp& qp, const net::Packet& p) {
    if (qp.state != IBV_QPS_RTR && qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD &&
        qp.state != IBV_QPS_SQE)
        return env_.counters.drop(net::DropReason::kBadQp, qp);
    if (qp.state == IBV_QPS_RTR && !qp.comm_est) env_.recv.comm_established(qp);
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    bool write = info->flags & net::kWriteOp;
    if (!(info->flags & net::kSendOp) && !write) {
        qp.epsn = net::psn_add(p.bth.psn, 1);
        return env_.counters.drop(net::DropReason::kOpNotForQp, qp);
    }
    bool first = info->flags & net::kFirst, last = info->flags & net::kLast;
    if (p.bth.psn != qp.epsn) {
        qp.rwr_off = 0;  // a partial message is lost; its receive is reused
        qp.have_write = false;
        qp.uc_drop = !first;  // the rest of that message is discarded
    }
    qp.epsn = net::psn_add(p.bth.psn, 1);
    if (first) {
        qp.uc_drop = false;
        qp.have_write = false;
        qp.rwr_off = 0;
    } else if (qp.uc_drop) {
        qp.uc_drop = !last;
        return;
    }
    if (write) return execute_write(qp, p, first, last, info->flags & net::kImmOp);
    if (first) {
        if (!qp.have_rwr && !env_.recv.take(qp)) {
            qp.uc_drop = !last;  // nowhere to put it
            return env_.counters.drop(net::DropReason::kNoRecv, qp);
        }
    } else if (!qp.have_rwr) {
        qp.uc_drop = !last;
        return;
    }
    if (!qp.rwr_ok || p.payload_len > qp.rwr.length - qp.rwr_off) {
        env_.recv.complete(qp, p, qp.rwr_ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
        env_.xrc.post_qp_async(qp, IBV_EVENT_QP_REQ_ERR);
        return env_.done.qp_to_error(qp);
    }
    env_.recv.place_payload(qp, p,
                            DmaWriteBatch::Path::kUcSend);  // a failure: LOC_PROT_ERR, QP in ERR
    if (last && env_.dma.settle(qp)) env_.recv.complete(qp, p, IBV_WC_SUCCESS);
}

}  // namespace uroce::emu
