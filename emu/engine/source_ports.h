// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UDP source ports a device's QPs send from (net/udp_sport.h; docs/behaviour.md, "IPv4
// and UDP headers"): one send socket per port in use (net/udp_uring.h, open_sender), shared
// by the QPs whose port it is, opened on the control path (a QP created, an address vector
// set) and closed when its last QP lets go. A port that cannot be had (another program has
// it bound, or the device holds kMaxSockets already) falls back to the device's own socket
// and port, and is counted: the packets are as right, only their port is not rxe's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/udp_sport.h"
#include "net/udp_uring.h"

namespace uroce::emu {

class SourcePorts {
public:
    static constexpr uint32_t kMaxSockets = 4096;

    SourcePorts(net::UdpUring& io, uint16_t device_port) : io_(io), device_port_(device_port) {}

    // A QP takes `port` (0xC000..0xFFFF; what it gets may be the device's, see above), and
    // gives back the port it asked for. A sent packet the fault injector holds takes its port
    // too, until it leaves: it is on the wire already, and its QP may be gone by then.
    // `local`: the device's address it is sent from (UdpUring::add_local), each with ports of
    // its own.
    net::TxSource acquire(uint16_t port, uint16_t local = 0);
    void release(uint16_t port, uint16_t local = 0);
    // The socket `port` is sent from now, if one is open (a held packet released later).
    bool lookup(uint16_t port, uint16_t local, net::TxSource* s) const;
    // Whether a packet from the device's address `local` and `port` may be this device's own.
    bool ours(uint16_t port, uint16_t local = 0) const {
        return port == device_port_ ||
               (port >= net::kRoceSportMin && local < slots_.size() && slot(port, local).users);
    }
    std::string line() const;  // counters_sport (docs/counters.md)

private:
    struct Slot {
        uint16_t sock = 0;   // 0: falls back to the device's socket
        uint32_t users = 0;  // QPs (and the CM, and held packets) holding the port
    };
    const Slot& slot(uint16_t port, uint16_t local) const {
        return slots_[local][port - net::kRoceSportMin];
    }
    Slot& slot(uint16_t port, uint16_t local);  // (grows the table for a new address)

    net::UdpUring& io_;
    const uint16_t device_port_;
    std::vector<std::vector<Slot>> slots_{std::vector<Slot>(net::kRoceSportCount)};
    uint64_t fallbacks_ = 0;  // acquires that got the device's socket
    int last_errno_ = 0;      // why the last of them did
};

}  // namespace uroce::emu
