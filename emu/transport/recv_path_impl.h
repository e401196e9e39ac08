// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RecvPath's member functions (recv_path.h): included by emu/engine/stages/recv_path.cpp, which
// instantiates them for TransportEnv; a test can instantiate them with a fake Env.
#pragma once

#include <endian.h>

#include <cstring>

#include "emu/abi/verbs_names.h"
#include "emu/engine/sge_iov.h"
#include "emu/transport/recv_path.h"
#include "net/opcodes.h"

namespace uroce::emu {

// IBTA 11.6.3.1: the first packet an RC or UC QP receives while in RTR raises
// IBV_EVENT_COMM_EST, once per stay in RTR, as ConnectX does (docs/behaviour.md).
template <class Env>
void RecvPath<Env>::comm_established(Qp& qp) {
    qp.comm_est = true;
    env_.xrc.post_qp_async(qp, IBV_EVENT_COMM_EST);
}

// Takes (consumes) the next posted receive. Returns false if there is none.
template <class Env>
bool RecvPath<Env>::take(Qp& qp) {
    abi::RingHeader* ring;
    uint32_t *next, mask, stride, max_sge;
    Srq* srq = qp.srq ? env_.srqs.get(qp.srq) : nullptr;
    if (srq) {
        ring = srq->ring;
        next = &srq->next;
        mask = srq->mask;
        stride = srq->stride;
        max_sge = srq->max_sge;
    } else {
        ring = qp.rq;
        next = &qp.rq_next;
        mask = qp.rq_mask;
        stride = qp.rq_stride;
        max_sge = qp.cap.max_recv_sge;
    }
    uint32_t prod = ring->prod.load(std::memory_order_acquire);
    if (prod == *next) return false;
    Session* owner = srq ? srq->owner : qp.owner;
    uint32_t pd = srq ? srq->pd : qp.pd;
    qp.rx_owner = owner;
    qp.rx_cq = srq && srq->cq ? srq->cq : qp.recv_cq;
    const uint8_t* slot = abi::ring_slot(ring, stride, mask, *next);
    abi::RecvWqe h;
    std::memcpy(&h, slot, sizeof h);
    qp.rwr.wr_id = h.wr_id;
    qp.rwr.num_sge = h.num_sge <= max_sge ? h.num_sge : 0;
    std::memcpy(qp.rwr.sge, slot + sizeof h, sizeof(abi::Sge) * qp.rwr.num_sge);
    // Consumed now: the slot is the application's again (we hold a copy).
    ++*next;
    ring->cons.store(*next, std::memory_order_release);
    qp.have_rwr = true;
    qp.rwr_off = 0;
    uint64_t total = 0;
    qp.rwr_ok = h.num_sge <= max_sge &&
                env_.verbs.check_local_sges(owner, pd, qp.rwr.sge, qp.rwr.num_sge, true, &total);
    qp.rwr.length = uint32_t(total > abi::kMaxMsgSize ? abi::kMaxMsgSize : total);
    if (srq && srq->limit && uint32_t(prod - *next) < srq->limit) {
        // The limit event fires once per arming (ibv_modify_srq).
        srq->limit = 0;
        env_.done.post_async(srq->owner, IBV_EVENT_SRQ_LIMIT_REACHED, srq->cookie, "srq", qp.srq);
    }
    return true;
}

// Writes a packet's payload at the current offset of the receive in progress, with the
// next flush; `path` says what a failure to write it means (dma_write_failed). The caller
// checks Dma::settle() before it completes the receive.
template <class Env>
void RecvPath<Env>::place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path path) {
    if (!p.payload_len) return;
    iovec iov[abi::kMaxSge];
    int n = sge_iov(qp.rwr.sge, qp.rwr.num_sge, qp.rwr_off, p.payload_len, iov);
    env_.dma.write_later(qp.rx_owner, p.payload, iov, n, p.payload_len, qp.qpn, p.bth.psn, path);
    qp.rwr_off += p.payload_len;
}

// Completes the receive in progress; `p` is the packet that ended it.
template <class Env>
void RecvPath<Env>::complete(Qp& qp, const net::Packet& p, ibv_wc_status status) {
    if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR)
        env_.trace.add("qp 0x%x receive wr_id 0x%llx completed with %s", qp.qpn,
                       static_cast<unsigned long long>(qp.rwr.wr_id), abi::wc_status_id(status));
    abi::Cqe c{};
    c.wr_id = qp.rwr.wr_id;
    c.status = status;
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    bool write = info && (info->flags & net::kWriteOp);
    c.opcode = write ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    c.byte_len = status == IBV_WC_SUCCESS ? qp.rwr_off : 0;
    c.qp_num = qp.qpn;
    c.src_qp = qp.attr.dest_qp_num;
    if (status == IBV_WC_SUCCESS && info && (info->flags & net::kImmOp)) {
        c.imm_data = htobe32(p.imm);
        c.wc_flags = IBV_WC_WITH_IMM;
    } else if (status == IBV_WC_SUCCESS && info && (info->flags & net::kInvOp)) {
        c.imm_data = p.ieth;  // ibv_wc.invalidated_rkey (host order), imm_data's union twin
        c.wc_flags = IBV_WC_WITH_INV;
    }
    env_.done.push_cqe(qp.rx_cq, c, p.bth.se);
    qp.have_rwr = false;
}

}  // namespace uroce::emu
