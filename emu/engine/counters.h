// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's packet counters (`uroce counters`, docs/counters.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu/verbs/objects.h"
#include "net/headers.h"

namespace uroce::emu {

struct DeviceCounters {
    uint64_t tx_pkts = 0, rx_pkts = 0, tx_bytes = 0, rx_bytes = 0;
    uint64_t drops[size_t(net::DropReason::kCount)] = {};
    uint64_t retransmits = 0, tx_stalls = 0;
    // Why requesters went back (counters_retx): a NAK for a PSN sequence error, an ACK
    // timeout, a READ response after a gap; and RNR NAKs, which wait and resend without
    // counting as a retransmission.
    uint64_t retx_seq_nak = 0, retx_timeout = 0, retx_read_gap = 0, rnr_naks = 0;
    uint64_t xrc_bad_srqn = 0;  // XRC requests naming an SRQ outside the TGT QP's domain
    // Multicast: packets sent to a group, received for a group, and copies handed to
    // attached QPs (docs/multicast.md).
    uint64_t mcast_tx_pkts = 0, mcast_rx_pkts = 0, mcast_deliveries = 0;
    // By opcode (counters_op lines of `uroce counters`). rx counts every datagram of at least
    // one byte under its first byte, dropped ones included, as rx_pkts does.
    OpCounters tx_op, rx_op;
    // How each received packet's ICRC was accepted (counters_icrc line, net/icrc_id.h): right
    // for ID 0, for its GRO train index, for the ID the solver found (DF set / clear), or not
    // checked (a packet from this device to itself that nobody could see). Counted for packets
    // that pass the header checks and the ICRC; the rest count as drops.
    uint64_t icrc_id0 = 0, icrc_train = 0, icrc_solved = 0, icrc_solved_nodf = 0,
             icrc_unchecked = 0, icrc_ipv6 = 0;  // icrc_ipv6: checked over IPv6 (exact)

    void drop(net::DropReason r) { ++drops[size_t(r)]; }
    // A drop once the packet has reached a QP: counted for the device and for the QP.
    void drop(net::DropReason r, Qp& qp) {
        ++drops[size_t(r)];
        ++qp.drops[size_t(r)];
    }
};

}  // namespace uroce::emu
