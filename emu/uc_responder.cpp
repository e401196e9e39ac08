// UC responder: like RC without ACKs. A PSN gap loses the message in progress (its
// receive is reused for the next message, as IBTA 9.7.6 describes) and the responder
// resynchronizes on the next FIRST or ONLY packet. A message with no receive posted
// is dropped.
#include "emu/device.h"
#include "net/opcodes.h"

namespace uroce::emu {

void Device::uc_responder_receive(Qp& qp, const net::Packet& p) {
    if (qp.state != IBV_QPS_RTR && qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD &&
        qp.state != IBV_QPS_SQE)
        return count_drop(net::DropReason::kBadQp, qp);
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    if (!(info->flags & net::kSendOp)) {
        // RDMA WRITE on UC arrives with the full transport; drop it silently, as a UC
        // responder does with requests it cannot execute.
        qp.epsn = net::psn_add(p.bth.psn, 1);
        return count_drop(net::DropReason::kOpNotForQp, qp);
    }
    bool first = info->flags & net::kFirst, last = info->flags & net::kLast;
    if (p.bth.psn != qp.epsn) {
        qp.rwr_off = 0;           // a partial message is lost; its receive is reused
        qp.uc_drop = !first;      // the rest of that message is discarded
    }
    qp.epsn = net::psn_add(p.bth.psn, 1);
    if (first) {
        qp.uc_drop = false;
        qp.rwr_off = 0;
        if (!qp.have_rwr && !take_recv(qp)) {
            qp.uc_drop = !last;  // nowhere to put it
            return;
        }
    } else if (qp.uc_drop || !qp.have_rwr) {
        qp.uc_drop = !last;
        return;
    }
    if (!qp.rwr_ok || p.payload_len > qp.rwr.length - qp.rwr_off) {
        complete_recv(qp, p, qp.rwr_ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
        post_qp_async(qp, IBV_EVENT_QP_REQ_ERR);
        return qp_to_error(qp);
    }
    if (!place_payload(qp, p)) {
        if (qp.owner->dead) return;
        complete_recv(qp, p, IBV_WC_LOC_PROT_ERR);
        post_qp_async(qp, IBV_EVENT_QP_ACCESS_ERR);
        return qp_to_error(qp);
    }
    if (last) complete_recv(qp, p, IBV_WC_SUCCESS);
}

}  // namespace uroce::emu
