// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UDP source port of a QP's packets, chosen as kernel Soft-RoCE chooses it, so that a
// uroce device's flows spread over ECMP paths and link aggregation as rxe's and NICs' do
// (IBTA annex A17: the source port is free for entropy, 0xC000 and up by convention). A QP
// starts with a hash of its number (rxe_qp_init_req); an address vector (ibv_modify_qp with
// IBV_QP_AV) sets the port from the GRH's flow label, or, when the label is 0, from a label
// computed of the two QP numbers (rdma_get_udp_sport in the kernel's ib_verbs.h). Receivers
// take any source port; replies always go to 4791.
#pragma once

#include <cstdint>

namespace uroce::net {

inline constexpr uint16_t kRoceSportMin = 0xC000;
inline constexpr uint32_t kRoceSportCount = 0x4000;  // 0xC000..0xFFFF

// The kernel's hash_32: the top `bits` bits of v times the 32-bit golden ratio.
constexpr uint32_t golden_hash_32(uint32_t v, unsigned bits) {
    return (v * 0x61C88647u) >> (32 - bits);
}

// A new QP's port (rxe_qp_init_req).
constexpr uint16_t sport_for_qpn(uint32_t qpn) {
    return uint16_t(kRoceSportMin + (golden_hash_32(qpn, 14) & 0x3fff));
}

// The flow label of a path whose GRH gives none (rdma_calc_flow_label).
constexpr uint32_t flow_label_for_qpns(uint32_t lqpn, uint32_t rqpn) {
    uint64_t v = uint64_t(lqpn) * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    return uint32_t(v & 0xfffff);
}

// A flow label's 20 bits folded into 14 (rdma_flow_label_to_udp_sport).
constexpr uint16_t sport_for_flow_label(uint32_t fl) {
    uint32_t low = fl & 0x3fff, high = fl & 0xfc000;
    low ^= high >> 14;
    return uint16_t(low | kRoceSportMin);
}

// The port after an address vector with flow label `fl` (rdma_get_udp_sport).
constexpr uint16_t sport_for_path(uint32_t fl, uint32_t lqpn, uint32_t rqpn) {
    return sport_for_flow_label(fl ? fl : flow_label_for_qpns(lqpn, rqpn));
}

// Where a QP's packets leave from: the port, the send socket bound to it (UdpUring's
// sender number; 0 is the device's own socket, whose port is the device's) and which of the
// device's addresses that socket is bound to (UdpUring::add_local; 0: the first).
struct TxSource {
    uint16_t port = 0;
    uint16_t sock = 0;
    uint16_t local = 0;
};

}  // namespace uroce::net
