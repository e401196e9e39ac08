// RC completer: matches ACKs and NAKs to outstanding WQEs, completes them in order,
// and drives retransmission (timeout, sequence NAK, RNR NAK).
#include "emu/device.h"
#include "emu/rc_timers.h"
#include "net/opcodes.h"

namespace uroce::emu {

// Everything up to and including `psn` reached the responder.
void Device::ack_upto(Qp& qp, uint32_t psn) {
    while (qp.sq_done != qp.sq_fetch) {
        const SendWr& w = qp.swr[qp.sq_done & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS || net::psn_lt(psn, w.last_psn)) break;
        complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
    }
    uint32_t una = net::psn_add(psn, 1);
    if (net::psn_lt(qp.una_psn, una)) {
        qp.una_psn = una;
        qp.retry_left = qp.attr.retry_cnt;  // progress restores the retry budget
    }
    // An ACK for packets already rewound over (a go-back raced with it).
    if (net::psn_lt(qp.next_psn, qp.una_psn)) go_back(qp, qp.una_psn);
    if (int32_t(uint32_t(qp.sq_send - qp.sq_done)) < 0) go_back(qp, qp.una_psn);
    complete_blocked(qp);
    if (qp.state == IBV_QPS_ERR) return;
    arm_timer(qp, qp.una_psn == qp.next_psn ? 0 : now_ns() + ack_timeout_ns(qp.attr.timeout));
    mark_ready(qp);
}

void Device::fail_oldest(Qp& qp, ibv_wc_status status) {
    if (qp.sq_done != qp.sq_fetch) complete_send(qp, qp.sq_done, status);
    qp_to_error(qp);
}

void Device::completer_receive(Qp& qp, const net::Packet& p) {
    if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD) return;
    if (p.bth.opcode != net::kRcAck) return count_drop(net::DropReason::kOpNotForQp);
    uint32_t psn = p.bth.psn;
    // Only PSNs in [una - 1, next - 1] can refer to something outstanding.
    if (net::psn_lt(psn, net::psn_add(qp.una_psn, -1)) || !net::psn_lt(psn, qp.wqe_psn)) return;
    uint8_t syn = p.aeth.syndrome;
    switch (syn >> 5) {
    case 0:  // ACK
        ack_upto(qp, psn);
        break;
    case 1: {  // RNR NAK: the responder had no receive posted for `psn`
        ack_upto(qp, net::psn_add(psn, -1));
        if (qp.state == IBV_QPS_ERR) return;
        if (qp.rnr_left == 0) return fail_oldest(qp, IBV_WC_RNR_RETRY_EXC_ERR);
        if (qp.attr.rnr_retry != 7) --qp.rnr_left;  // 7 means retry forever
        go_back(qp, psn);
        qp.rnr_wait = true;
        arm_timer(qp, now_ns() + rnr_timer_ns(syn & 0x1f));
        break;
    }
    case 3: {  // NAK
        ack_upto(qp, net::psn_add(psn, -1));
        if (qp.state == IBV_QPS_ERR) return;
        switch (syn & 0x1f) {
        case 0:  // PSN sequence error: resend from the PSN the responder expects
            ++qp.retransmits;
            ++counters_.retransmits;
            go_back(qp, psn);
            break;
        case 1:
            fail_oldest(qp, IBV_WC_REM_INV_REQ_ERR);
            break;
        case 2:
            fail_oldest(qp, IBV_WC_REM_ACCESS_ERR);
            break;
        case 3:
            fail_oldest(qp, IBV_WC_REM_OP_ERR);
            break;
        default:
            fail_oldest(qp, IBV_WC_REM_INV_RD_REQ_ERR);
            break;
        }
        break;
    }
    default:
        count_drop(net::DropReason::kBadLength);  // reserved syndrome
        break;
    }
}

void Device::retransmit_timeout(Qp& qp) {
    if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD) return;
    if (qp.rnr_wait) {
        qp.rnr_wait = false;
        mark_ready(qp);
        return;
    }
    if (qp.una_psn == qp.next_psn && qp.sq_send == qp.sq_done) return;
    if (qp.attr.timeout == 0) return;  // infinite: never give up, never resend
    if (qp.retry_left <= 0) return fail_oldest(qp, IBV_WC_RETRY_EXC_ERR);
    --qp.retry_left;
    ++qp.retransmits;
    ++counters_.retransmits;
    go_back(qp, qp.una_psn);
    arm_timer(qp, now_ns() + ack_timeout_ns(qp.attr.timeout));
}

}  // namespace uroce::emu
