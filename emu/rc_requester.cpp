// RC and UC requester: turns send WQEs into request packets, one MTU at a time, and rewinds
// (go-back-N) when the completer asks for a retransmission.
#include <cstring>

#include "emu/device.h"
#include "emu/process_memory.h"
#include "emu/sge_iov.h"
#include "emu/rc_timers.h"
#include "net/opcodes.h"

namespace uroce::emu {

namespace {
constexpr uint32_t kMaxOutstandingPkts = 1024;  // unacknowledged packets per QP
constexpr uint32_t kAckReqEvery = 64;           // ask for an ACK at least this often


uint8_t send_opcode(bool first, bool last, bool imm) {
    if (first && last) return imm ? net::kRcSendOnlyImm : net::kRcSendOnly;
    if (first) return net::kRcSendFirst;
    if (last) return imm ? net::kRcSendLastImm : net::kRcSendLast;
    return net::kRcSendMiddle;
}
}  // namespace

// Copies the next WQE out of the application's ring. Returns false when the ring is
// empty (or its indices are garbage, which puts the QP in error).
bool Device::fetch_send_wqe(Qp& qp) {
    uint32_t prod = qp.sq->prod.load(std::memory_order_acquire);
    if (prod == qp.sq_fetch) return false;
    if (uint32_t(prod - qp.sq_done) > qp.sq_mask + 1 ||
        uint32_t(prod - qp.sq_done) < uint32_t(qp.sq_fetch - qp.sq_done)) {
        // The library never overfills the ring and never takes back a posted WQE (prod
        // behind sq_fetch would make us run on through unposted slots, overwriting the
        // shadows of outstanding WQEs); something scribbled on it.
        if (qp.state != IBV_QPS_ERR) {
            post_async(qp.owner, IBV_EVENT_QP_FATAL, qp.cookie);
            qp_to_error(qp);
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
    w.status = IBV_WC_SUCCESS;
    w.is_inline = (h.send_flags & IBV_SEND_INLINE) != 0;
    uint64_t total = 0;
    if (w.is_inline) {
        w.num_sge = 0;
        if (h.inline_len > qp.cap.max_inline_data) {
            w.status = IBV_WC_LOC_LEN_ERR;
        } else {
            std::memcpy(w.inline_data.get(), slot + sizeof h, h.inline_len);
            total = h.inline_len;
        }
    } else if (h.num_sge > qp.cap.max_send_sge) {
        w.num_sge = 0;
        w.status = IBV_WC_LOC_LEN_ERR;
    } else {
        w.num_sge = h.num_sge;
        std::memcpy(w.sge, slot + sizeof h, sizeof(abi::Sge) * h.num_sge);
        if (!check_local_sges(qp, w.sge, w.num_sge, false, &total))
            w.status = IBV_WC_LOC_PROT_ERR;
    }
    if (w.status == IBV_WC_SUCCESS && total > abi::kMaxMsgSize) w.status = IBV_WC_LOC_LEN_ERR;
    if (w.status == IBV_WC_SUCCESS && w.opcode != IBV_WR_SEND &&
        w.opcode != IBV_WR_SEND_WITH_IMM)
        w.status = IBV_WC_LOC_QP_OP_ERR;  // other opcodes arrive with the full transport
    w.length = w.status == IBV_WC_SUCCESS ? uint32_t(total) : 0;
    uint32_t npkts = w.length ? (w.length + qp.mtu - 1) / qp.mtu : 1;
    w.first_psn = qp.wqe_psn;
    w.last_psn = net::psn_add(qp.wqe_psn, npkts - 1);
    if (w.status == IBV_WC_SUCCESS) qp.wqe_psn = net::psn_add(qp.wqe_psn, npkts);
    ++qp.sq_fetch;
    return true;
}

// A WQE that cannot be executed completes in order: once everything before it has.
void Device::complete_blocked(Qp& qp) {
    if (qp.sq_done == qp.sq_send && qp.sq_send != qp.sq_fetch) {
        SendWr& w = qp.swr[qp.sq_send & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS) {
            complete_send(qp, qp.sq_send, w.status);
            ++qp.sq_send;
            qp_to_error(qp);
        }
    }
}

void Device::requester_progress(Qp& qp) {
    if (qp.state == IBV_QPS_ERR) {
        flush_queues(qp);
        return;
    }
    if (qp.state != IBV_QPS_RTS || qp.rnr_wait) return;
    for (;;) {
        if (qp.sq_send == qp.sq_fetch && !fetch_send_wqe(qp)) break;
        if (qp.state == IBV_QPS_ERR) return;
        SendWr& w = qp.swr[qp.sq_send & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS) {
            complete_blocked(qp);
            return;
        }
        if (net::psn_diff(qp.next_psn, qp.una_psn) >= int32_t(kMaxOutstandingPkts)) break;
        uint32_t slot;
        uint8_t* buf = tx_begin(&slot);
        if (!buf) {
            mark_ready(qp);  // resume when transmit buffers come back
            break;
        }
        uint32_t off = qp.sq_send_off;
        uint32_t len = w.length - off < qp.mtu ? w.length - off : qp.mtu;
        bool first = off == 0, last = off + len == w.length;
        bool imm = w.opcode == IBV_WR_SEND_WITH_IMM;
        bool uc = qp.type == IBV_QPT_UC;
        net::Packet p{};
        p.bth.opcode = net::op_on(uc ? net::kTransportUc : net::kTransportRc,
                                  send_opcode(first, last, imm));
        p.bth.se = last && (w.flags & IBV_SEND_SOLICITED);
        p.bth.pad = net::pad_for(len);
        p.bth.pkey = net::kDefaultPkey;
        p.bth.dqpn = qp.attr.dest_qp_num;
        p.bth.psn = qp.next_psn;
        p.bth.ackreq = !uc && (last || (p.bth.psn % kAckReqEvery) == 0);
        p.imm = be32toh(w.imm);
        size_t hdr = net::encode_headers(p, buf);
        uint8_t* payload = buf + hdr;
        if (w.is_inline) {
            std::memcpy(payload, w.inline_data.get() + off, len);
        } else {
            iovec iov[abi::kMaxSge];
            int n = sge_iov(w.sge, w.num_sge, off, len, iov);
            if (!mem_read(qp.owner->pid, payload, iov, n, len)) {
                // The application unmapped registered memory under the device.
                io_.tx_free(slot);
                w.status = IBV_WC_LOC_PROT_ERR;
                complete_blocked(qp);
                return;
            }
        }
        std::memset(payload + len, 0, p.bth.pad);
        transmit(slot, hdr + len + p.bth.pad, qp.dest);
        ++qp.tx_pkts;
        qp.next_psn = net::psn_add(qp.next_psn, 1);
        if (uc) {
            // Unreliable: nothing is acknowledged, a WQE is done once it is sent.
            qp.una_psn = qp.next_psn;
        } else if (qp.deadline_ns == 0) {
            arm_timer(qp, now_ns() + ack_timeout_ns(qp.attr.timeout));
        }
        if (last) {
            ++qp.sq_send;
            qp.sq_send_off = 0;
            if (uc) complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
        } else {
            qp.sq_send_off = off + len;
        }
    }
}

void Device::go_back(Qp& qp, uint32_t psn) {
    uint32_t i = qp.sq_done;
    while (i != qp.sq_fetch && net::psn_lt(qp.swr[i & qp.sq_mask].last_psn, psn)) ++i;
    qp.sq_send = i;
    qp.sq_send_off = 0;
    qp.next_psn = psn;
    if (i != qp.sq_fetch) {
        const SendWr& w = qp.swr[i & qp.sq_mask];
        int32_t d = net::psn_diff(psn, w.first_psn);
        if (d > 0) qp.sq_send_off = uint32_t(d) * qp.mtu;
        else qp.next_psn = w.first_psn;
    }
    mark_ready(qp);
}

}  // namespace uroce::emu
