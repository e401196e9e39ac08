// RC responder: checks request PSNs, places SEND payloads into posted receives, and
// answers with ACKs (coalesced: only where the requester asked), sequence NAKs, RNR
// NAKs and error NAKs.
#include <cstring>

#include "emu/device.h"
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
    if (qp.have_rwr) complete_recv(qp, net::Packet{}, status);
    send_ack(qp, nak, psn);
    post_async(qp.owner, event, qp.cookie);
    qp_to_error(qp);
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
    if (!place_payload(qp, p))
        return responder_error(qp, IBV_WC_LOC_PROT_ERR, kNakRemAccess, p.bth.psn,
                               IBV_EVENT_QP_ACCESS_ERR);
    qp.epsn = net::psn_add(qp.epsn, 1);
    if (last) {
        complete_recv(qp, p, IBV_WC_SUCCESS);
        qp.msn = (qp.msn + 1) & 0xffffff;
    }
    if (p.bth.ackreq) send_ack(qp, kAckUnlimited, p.bth.psn);
}

}  // namespace uroce::emu
