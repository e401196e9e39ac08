// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Packets a device sends to its own address (two processes, or two QPs, on one device).
// They never enter the UDP socket: the engine hands them to its own receive path at the
// next safe point of its loop, as an HCA loops same-port traffic back internally. Each
// still holds its transmit buffer until then, so the queue never holds more entries than
// there are transmit buffers.
#pragma once

#include <cstdint>

#include "net/udp_uring.h"

namespace uroce::emu {

class SelfLink {
public:
    struct Pkt {
        uint32_t slot;       // transmit buffer
        uint32_t len;        // with the ICRC
        bool icrc;           // the ICRC is stored (see Wire::transmit)
        net::IpMarks marks;  // the TOS and TTL it was sent with
        uint16_t sport;      // the UDP source port it was sent from
        uint16_t from, to;   // the device's addresses it went between (UdpUring::add_local)
    };
    static constexpr uint32_t kCap = net::UdpUring::kTxBufs;
    static_assert((kCap & (kCap - 1)) == 0, "a power of two");

    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    // Never fails: there are no more packets than transmit buffers.
    void push(uint32_t slot, uint32_t len, bool icrc, net::IpMarks marks, uint16_t sport,
              uint16_t from = 0, uint16_t to = 0) {
        q_[tail_++ & (kCap - 1)] = {slot, len, icrc, marks, sport, from, to};
    }
    Pkt pop() { return q_[head_++ & (kCap - 1)]; }

private:
    Pkt q_[kCap];
    uint32_t head_ = 0, tail_ = 0;
};

}  // namespace uroce::emu
