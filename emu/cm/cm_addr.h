// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent's addresses: one 16-byte form for either IP version (an IPv6 address, or an
// IPv4 one IPv4-mapped, as a GID writes it), and which listener takes a request, as the
// kernel's RDMA CM decides it. Pure functions (tests/unit/cm_mad_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace uroce::emu {

using CmAddr = std::array<uint8_t, 16>;  // all zero: none, or the wildcard

bool cm_addr_any(const CmAddr& a);
bool cm_addr_v4(const CmAddr& a);  // IPv4-mapped
// "10.0.0.1:7174", "[fd77::1]:7174", "[fe80::1%eth0]:7174" (a link-local address with the
// interface `scope`); the wildcard as its family's ("0.0.0.0", "[::]"). port in network order.
std::string cm_addr_port(const CmAddr& a, uint16_t port_be, bool wildcard_v6 = false,
                         uint32_t scope = 0);
std::string cm_addr_str(const CmAddr& a, uint32_t scope = 0);  // without the port

// Does a listener bound to `bound` (zero: a wildcard of `family`, AF_INET or AF_INET6, only
// that family's requests if `afonly`) take a request whose RDMA CM header names `dst` and IP
// `version` (4 or 6)? As the kernel's cma_match_private_data: a wildcard that is not afonly
// takes either version (an IPv6 wildcard with IPV6_V6ONLY off), else the versions must
// agree and a bound address must be the request's destination.
bool listener_takes(const CmAddr& bound, uint8_t family, bool afonly, int version,
                    const CmAddr& dst);

}  // namespace uroce::emu
