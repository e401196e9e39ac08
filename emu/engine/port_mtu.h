// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The port's active MTU, from the MTU of the interface that holds the device's address, as
// rxe and hardware derive it from their netdev (docs/behaviour.md, "Port MTU").
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "net/endpoint.h"

namespace uroce::emu {

// The largest IB MTU (256..4096) whose packets, with every header the transport may put
// around a payload (IPv4, UDP, BTH and the largest extension headers, ICRC), fit an
// interface MTU of `if_mtu` bytes: 1500 gives 1024, 9000 and loopback's 65536 give 4096.
// Below 256, 256 (as rxe).
// `ip_hdr`: the IP header's length (20, or IPv6's 40).
ibv_mtu ib_mtu_for_interface(int if_mtu, int ip_hdr = 20);

// The MTU of the interface that holds `ipv4_be` in the calling thread's network namespace
// (or whose subnet holds it: 127.0.0.2 is on lo), 0 if none does. A few system calls.
int interface_mtu(uint32_t ipv4_be);

// ib_mtu_for_interface(interface_mtu(ipv4_be)), an Ethernet 1500 when no interface holds the
// address.
ibv_mtu port_mtu_for(uint32_t ipv4_be);

// The same for an IPv6 address (the interface that holds it; 40-byte IP header), or for
// either kind.
ibv_mtu port_mtu_for6(const uint8_t* ipv6);
ibv_mtu port_mtu_for(const net::Endpoint& addr);

inline uint32_t mtu_bytes(ibv_mtu m) { return 128u << unsigned(m); }

}  // namespace uroce::emu
