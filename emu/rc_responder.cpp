// RC responder: checks request PSNs, places SEND payloads into posted receives, and
// answers with ACKs (coalesced: only where the requester asked), sequence NAKs, RNR
// NAKs and error NAKs.
#include <cstring>

#include "emu/device.h"
#include "emu/process_memory.h"
#include "net/opcodes.h"

namespace uroce::emu {

namespace {
// AETH syndromes (IBTA 9.7.5.2): ACK with "credits not used", RNR NAK, NAK codes.
constexpr uint8_t kAckUnlimited = 0x1f;
constexpr uint8_t kRnrNak = 0x20;
constexpr uint8_t kNakSeqErr = 0x60;
constexpr uint8_t kNakInvReq = 0x61;
constexpr uint8_t kNakRemAccess = 0x62;
constexpr uint8_t kNakRemOp = 0x63;

int sge_iov(const abi::Sge* sge, uint32_t n, uint32_t off, uint32_t len, iovec* iov) {
    int k = 0;
    for (uint32_t i = 0; i < n && len; ++i) {
        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        uint32_t take = sge[i].length - off;
        if (take > len) take = len;
        iov[k].iov_base = reinterpret_cast<void*>(sge[i].addr + off);
        iov[k].iov_len = take;
        ++k;
        len -= take;
        off = 0;
    }
    return k;
}
}  // namespace

void Device::send_ack(Qp& qp, uint8_t syndrome, uint32_t psn) {
    uint32_t slot;
    uint8_t* buf = tx_begin(&slot);
    if (!buf) return;  // the requester's timer recovers a lost ACK
    net::Packet p{};
    p.bth.opcode = net::kRcAck;
    p.bth.pkey = net::kDefaultPkey;
    p.bth.dqpn = qp.attr.dest_qp_num;
    p.bth.psn = psn;
    p.aeth.syndrome = syndrome;
    p.aeth.msn = qp.msn & 0xffffff;
    size_t hdr = net::encode_headers(p, buf);
    transmit(slot, hdr, qp.dest);
    ++qp.tx_pkts;
}

// A responder-side error: the receive (if any) completes with `status`, the requester
// is told with `nak`, and the QP enters the error state.
void Device::responder_error(Qp& qp, ibv_wc_status status, uint8_t nak, uint32_t psn,
                             ibv_event_type event) {
    if (qp.have_rwr) {
        abi::Cqe c{};
        c.wr_id = qp.rwr.wr_id;
        c.status = status;
        c.opcode = IBV_WC_RECV;
        c.qp_num = qp.qpn;
        c.src_qp = qp.attr.dest_qp_num;
        push_cqe(qp.recv_cq, c, false);
        ++qp.rq_next;
        qp.rq->cons.store(qp.rq_next, std::memory_order_release);
        qp.have_rwr = false;
    }
    send_ack(qp, nak, psn);
    post_async(qp.owner, event, qp.cookie);
    qp_to_error(qp);
}

// Takes the next posted receive. Returns false if there is none (RNR).
bool Device::take_recv(Qp& qp) {
    uint32_t prod = qp.rq->prod.load(std::memory_order_acquire);
    if (prod == qp.rq_next) return false;
    const uint8_t* slot = abi::ring_slot(qp.rq, qp.rq_stride, qp.rq_mask, qp.rq_next);
    abi::RecvWqe h;
    std::memcpy(&h, slot, sizeof h);
    qp.rwr.wr_id = h.wr_id;
    qp.rwr.num_sge = h.num_sge <= qp.cap.max_recv_sge ? h.num_sge : 0;
    std::memcpy(qp.rwr.sge, slot + sizeof h, sizeof(abi::Sge) * qp.rwr.num_sge);
    qp.have_rwr = true;
    qp.rwr_off = 0;
    uint64_t total = 0;
    qp.rwr_ok = h.num_sge <= qp.cap.max_recv_sge &&
                check_local_sges(qp, qp.rwr.sge, qp.rwr.num_sge, true, &total);
    qp.rwr.length = uint32_t(total > abi::kMaxMsgSize ? abi::kMaxMsgSize : total);
    return true;
}

void Device::responder_receive(Qp& qp, const net::Packet& p) {
    if (qp.state != IBV_QPS_RTR && qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD &&
        qp.state != IBV_QPS_SQE)
        return count_drop(net::DropReason::kBadQp);
    int32_t d = net::psn_diff(p.bth.psn, qp.epsn);
    if (d < 0) {
        // Duplicate: already executed; acknowledge again so the requester moves on.
        send_ack(qp, kAckUnlimited, net::psn_add(qp.epsn, -1));
        return;
    }
    if (d > 0) {
        if (!qp.nak_sent) send_ack(qp, kNakSeqErr, qp.epsn);
        qp.nak_sent = true;
        return;
    }
    qp.nak_sent = false;
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    if (!(info->flags & net::kSendOp)) {
        // RDMA WRITE/READ/ATOMIC arrive with the full transport; until then the
        // requester learns that this responder does not execute them.
        return responder_error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn,
                               IBV_EVENT_QP_REQ_ERR);
    }
    bool first = info->flags & net::kFirst, last = info->flags & net::kLast;
    if (first) {
        if (qp.have_rwr)  // a FIRST or ONLY while a message is still open
            return responder_error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn,
                                   IBV_EVENT_QP_REQ_ERR);
        if (!take_recv(qp)) {
            send_ack(qp, uint8_t(kRnrNak | (qp.attr.min_rnr_timer & 0x1f)), p.bth.psn);
            return;
        }
    } else if (!qp.have_rwr) {
        return responder_error(qp, IBV_WC_REM_INV_REQ_ERR, kNakInvReq, p.bth.psn,
                               IBV_EVENT_QP_REQ_ERR);
    }
    if (!qp.rwr_ok)
        return responder_error(qp, IBV_WC_LOC_PROT_ERR, kNakRemOp, p.bth.psn,
                               IBV_EVENT_QP_ACCESS_ERR);
    if (p.payload_len > qp.rwr.length - qp.rwr_off)
        return responder_error(qp, IBV_WC_LOC_LEN_ERR, kNakInvReq, p.bth.psn,
                               IBV_EVENT_QP_REQ_ERR);
    if (p.payload_len) {
        iovec iov[abi::kMaxSge];
        int n = sge_iov(qp.rwr.sge, qp.rwr.num_sge, qp.rwr_off, p.payload_len, iov);
        if (!mem_write(qp.owner->pid, p.payload, iov, n, p.payload_len))
            return responder_error(qp, IBV_WC_LOC_PROT_ERR, kNakRemAccess, p.bth.psn,
                                   IBV_EVENT_QP_ACCESS_ERR);
    }
    qp.rwr_off += p.payload_len;
    qp.epsn = net::psn_add(qp.epsn, 1);
    if (last) {
        abi::Cqe c{};
        c.wr_id = qp.rwr.wr_id;
        c.status = IBV_WC_SUCCESS;
        c.opcode = IBV_WC_RECV;
        c.byte_len = qp.rwr_off;
        c.qp_num = qp.qpn;
        c.src_qp = qp.attr.dest_qp_num;
        if (info->flags & net::kImmOp) {
            c.imm_data = htobe32(p.imm);
            c.wc_flags = IBV_WC_WITH_IMM;
        }
        push_cqe(qp.recv_cq, c, p.bth.se);
        ++qp.rq_next;
        qp.rq->cons.store(qp.rq_next, std::memory_order_release);
        qp.have_rwr = false;
        qp.msn = (qp.msn + 1) & 0xffffff;
    }
    if (p.bth.ackreq) send_ack(qp, kAckUnlimited, p.bth.psn);
}

}  // namespace uroce::emu
