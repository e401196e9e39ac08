// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm's addresses: what an application's sockaddr names (IPv4 or IPv6, a wildcard, a
// link-local address with its interface), which device has an address, which devices a
// wildcard listener listens on, and the sockaddrs an id reports. Pure functions
// (tests/unit/cma_addr_test.cpp); the rules are the kernel's RDMA CM's (docs/cm.md).
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "net/endpoint.h"

namespace uroce::rdmacm {

struct IpAddr {
    net::Endpoint ep;  // address and port; an IPv4-mapped one as the IPv4 address
    int family = 0;    // the family it was given in: AF_INET or AF_INET6
    bool any = false;  // the wildcard (0.0.0.0 or ::)
};

// 0, or EAFNOSUPPORT for an address of neither IP version (AF_IB among them), EINVAL for
// none.
int parse_addr(const sockaddr* sa, IpAddr* out);

bool link_local(const net::Endpoint& e);  // an IPv6 fe80::/10 address

// ::1 as 127.0.0.1 (same port), for when no device is on ::1: the IPv4 loopback's device
// serves it (docs/cm.md). Any other address as it is.
net::Endpoint v4_loopback_for(const net::Endpoint& e);

// Does a device on `dev` have the address `want`? The same address, and for a link-local
// one the same interface (scope id).
bool device_has(const net::Endpoint& dev, const net::Endpoint& want);

// Does a wildcard listener bound in `family` listen on a device at `dev`? An AF_INET one on
// IPv4 devices; an AF_INET6 one on every device, or with `afonly` (IPV6_V6ONLY) on IPv6 ones.
bool listens_on(int family, bool afonly, const net::Endpoint& dev);

// The address as an id reports it: sockaddr_in, or sockaddr_in6 with the scope of a
// link-local one. port in network order.
void to_sockaddr(const net::Endpoint& ep, uint16_t port_be, sockaddr_storage* ss);

// An address in the CM's 16-byte form (IPv4-mapped for IPv4); `scope` for a link-local one.
net::Endpoint from_addr16(const uint8_t* a, uint32_t scope);

}  // namespace uroce::rdmacm
