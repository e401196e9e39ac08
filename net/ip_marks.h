// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The IPv4 header fields a RoCEv2 packet takes from its GRH: the traffic class becomes the
// TOS byte (DSCP and ECN) and the hop limit the TTL, as kernel Soft-RoCE sets them
// (drivers/infiniband/sw/rxe/rxe_net.c, prepare4: av->grh.traffic_class, av->grh.hop_limit).
// The GRH is the AH's for UD, the QP's address vector (ibv_modify_qp, IBV_QP_AV) otherwise.
// The ICRC masks both fields (IBTA A17.7.1), so they change no ICRC.
#pragma once

#include <cstdint>

namespace uroce::net {

// The TTL of a packet whose GRH gives none (hop limit 0, which no socket can send: the kernel
// takes IP_TTL 1..255 only), and of packets no AH or QP sends: the kernel's default.
inline constexpr uint8_t kDefaultTtl = 64;

struct IpMarks {
    uint8_t tos = 0;
    uint8_t ttl = kDefaultTtl;
    friend bool operator==(const IpMarks&, const IpMarks&) = default;
};

inline IpMarks ip_marks_from_grh(uint8_t traffic_class, uint8_t hop_limit) {
    return IpMarks{traffic_class, hop_limit ? hop_limit : kDefaultTtl};
}

}  // namespace uroce::net
