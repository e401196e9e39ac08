// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UdTransport's member functions (emu/transport/ud_transport.h). Included by one
// translation unit per Env: emu/engine/stages/ud_transport.cpp for the device.
#pragma once

#include <arpa/inet.h>

#include <cstring>

#include "emu/engine/dma_write_batch.h"
#include "emu/engine/sge_iov.h"
#include "emu/transport/ud_transport.h"
#include "net/opcodes.h"

namespace uroce::emu {

namespace ud_detail {
inline constexpr uint32_t kGrhLen = 40;
// wc.sl of a UD receive: the kernel's RDMA_NETWORK_IPV4 / _IPV6 (enum rdma_network_type).
inline constexpr uint8_t kWcSlNetworkIpv4 = 2;
inline constexpr uint8_t kWcSlNetworkIpv6 = 3;

// Over IPv6 the GRH area holds the IPv6 header itself (RoCEv2's GRH is the IP header): its
// traffic class and hop limit as received; the flow label is not reported by the socket (0).
inline void ipv6_header(uint8_t* h, const uint8_t* src16, const uint8_t* dst16,
                        size_t udp_payload_len, net::IpMarks marks) {
    uint16_t plen = uint16_t(8 + udp_payload_len);
    h[0] = uint8_t(0x60 | marks.tos >> 4);
    h[1] = uint8_t(marks.tos << 4);
    h[2] = h[3] = 0;
    h[4] = uint8_t(plen >> 8);
    h[5] = uint8_t(plen);
    h[6] = 17;
    h[7] = marks.ttl;
    std::memcpy(h + 8, src16, 16);
    std::memcpy(h + 24, dst16, 16);
}

// The IPv4 header the packet arrived with, as uroce sends it (see net/icrc.h), with the TOS and
// TTL it really had (as rxe copies the received header; ibv_init_ah_from_wc reads it).
inline void ipv4_header(uint8_t* h, uint32_t src_be, uint32_t dst_be, size_t udp_payload_len,
                        net::IpMarks marks) {
    uint16_t total = uint16_t(20 + 8 + udp_payload_len);
    uint8_t v[20] = {
        0x45, marks.tos, uint8_t(total >> 8), uint8_t(total), 0, 0, 0x40, 0, marks.ttl, 17, 0, 0};
    std::memcpy(v + 12, &src_be, 4);
    std::memcpy(v + 16, &dst_be, 4);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += uint32_t(v[i] << 8 | v[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    uint16_t csum = uint16_t(~sum);
    v[10] = uint8_t(csum >> 8);
    v[11] = uint8_t(csum);
    std::memcpy(h, v, 20);
}
}  // namespace ud_detail

template <class Env>
void UdTransport<Env>::requester_progress(Qp& qp) {
    for (;;) {
        if (qp.sq_send == qp.sq_fetch && !env_.requester.fetch_send_wqe(qp)) break;
        if (qp.state == IBV_QPS_ERR || qp.state == IBV_QPS_SQE) return;
        SendWr& w = qp.swr[qp.sq_send & qp.sq_mask];
        if (w.status != IBV_WC_SUCCESS) {
            env_.requester.complete_blocked(qp);
            return;
        }
        const net::Endpoint& to = w.ud_dest;
        // A source GID the table does not have, or an address of the other IP version than
        // the source's (garbage in the ring: the library never writes either), cannot leave.
        if (w.ud_local == kNoLocal || to.is_v6() != env_.wire.local(w.ud_local).is_v6()) {
            w.status = IBV_WC_LOC_QP_OP_ERR;
            env_.requester.complete_blocked(qp);
            return;
        }
        if (env_.wire.self_paced(to)) {
            env_.sched.mark_ready(qp);
            break;
        }
        uint32_t slot;
        uint8_t* buf = env_.wire.tx_begin(&slot);
        if (!buf) {
            env_.sched.mark_ready(qp);
            break;
        }
        net::Packet p{};
        bool imm = w.opcode == IBV_WR_SEND_WITH_IMM;
        p.bth.opcode = imm ? net::kUdSendOnlyImm : net::kUdSendOnly;
        p.bth.se = (w.flags & IBV_SEND_SOLICITED) != 0;
        p.bth.pad = net::pad_for(w.length);
        p.bth.pkey = net::kDefaultPkey;
        p.bth.dqpn = w.ud_qpn;
        p.bth.psn = qp.next_psn;
        // A Q_Key with the high bit set means "use the QP's own" (IBTA 10.2.5).
        p.deth.qkey = (w.ud_qkey & 0x80000000u) ? qp.attr.qkey : w.ud_qkey;
        p.deth.src_qpn = qp.qpn;
        p.imm = be32toh(w.imm);
        size_t hdr = net::encode_headers(p, buf);
        if (w.is_inline) {
            std::memcpy(buf + hdr, qp.sq_inline(qp.sq_send), w.length);
        } else if (w.length) {
            iovec iov[abi::kMaxSge];
            int n = sge_iov(w.sge, w.num_sge, 0, w.length, iov);
            if (!env_.dma.read(qp.owner, buf + hdr, iov, n, w.length)) {
                env_.wire.tx_free(slot);
                w.status = IBV_WC_LOC_PROT_ERR;
                env_.requester.complete_blocked(qp);
                return;
            }
        }
        std::memset(buf + hdr + w.length, 0, p.bth.pad);
        // From another address than the QP's (an AH with another sgid_index): that address's
        // socket, on the device's port (a port of the QP's own there would take a socket
        // opened on the packet path).
        const net::TxSource other = env_.wire.device_source(w.ud_local);
        env_.wire.transmit(slot, hdr + w.length + p.bth.pad, to, &qp, w.ud_marks,
                           w.ud_local == qp.tx.local ? nullptr : &other);
        ++qp.tx_pkts;
        qp.next_psn = qp.una_psn = net::psn_add(qp.next_psn, 1);
        ++qp.sq_send;
        env_.done.complete_send(qp, qp.sq_done, IBV_WC_SUCCESS);
    }
}

template <class Env>
void UdTransport<Env>::receive(Qp& qp, const net::Packet& p, const net::Endpoint& from,
                               const net::Endpoint& to) {
    if (qp.state != IBV_QPS_RTR && qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD &&
        qp.state != IBV_QPS_SQE)
        return env_.counters.drop(net::DropReason::kBadQp, qp);
    if (p.deth.qkey != qp.attr.qkey) return env_.counters.drop(net::DropReason::kBadQkey, qp);
    if (!env_.recv.take(qp)) return env_.counters.drop(net::DropReason::kNoRecv, qp);
    if (!qp.rwr_ok || ud_detail::kGrhLen + p.payload_len > qp.rwr.length) {
        env_.recv.complete(qp, p, qp.rwr_ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
        return;
    }
    uint8_t grh[ud_detail::kGrhLen] = {};
    const size_t udp_len = net::op_info(p.bth.opcode)->hdr_len + p.payload_len + p.bth.pad + 4;
    if (from.is_v6())
        ud_detail::ipv6_header(grh, from.addr6(), to.addr6(), udp_len, p.ip);
    else
        ud_detail::ipv4_header(grh + 20, from.v4_be(), to.v4_be(), udp_len, p.ip);
    iovec iov[abi::kMaxSge];
    int n = sge_iov(qp.rwr.sge, qp.rwr.num_sge, 0, ud_detail::kGrhLen, iov);
    // GRH and payload with one write; a failure completes the receive with LOC_PROT_ERR.
    env_.dma.write_later(qp.rx_owner, grh, iov, n, ud_detail::kGrhLen, qp.qpn, p.bth.psn,
                         DmaWriteBatch::Path::kUdRecv);
    qp.rwr_off = ud_detail::kGrhLen;
    env_.recv.place_payload(qp, p, DmaWriteBatch::Path::kUdRecv);
    if (!env_.dma.settle(qp)) return;
    abi::Cqe c{};
    c.wr_id = qp.rwr.wr_id;
    c.status = IBV_WC_SUCCESS;
    c.opcode = IBV_WC_RECV;
    c.byte_len = qp.rwr_off;
    c.qp_num = qp.qpn;
    c.src_qp = p.deth.src_qpn;
    c.wc_flags = IBV_WC_GRH;
    // The network header type (the kernel's RDMA_NETWORK_IPV4), where mlx5 reports it: UCX
    // reads wc.sl to find the source address in the GRH area.
    c.sl = from.is_v6() ? ud_detail::kWcSlNetworkIpv6 : ud_detail::kWcSlNetworkIpv4;
    if (p.bth.opcode == net::kUdSendOnlyImm) {
        c.imm_data = htobe32(p.imm);
        c.wc_flags |= IBV_WC_WITH_IMM;
    }
    env_.done.push_cqe(qp.rx_cq, c, p.bth.se);
    qp.have_rwr = false;
}

}  // namespace uroce::emu
