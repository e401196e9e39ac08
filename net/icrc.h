// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RoCEv2 Invariant CRC over IPv4/UDP and IPv6/UDP (IBTA annex A17.3.3).
//
// The ICRC is a CRC-32 (IEEE, as zlib/Ethernet) over:
//   8 bytes of 0xFF                   (stands in for the InfiniBand LRH, which RoCEv2 lacks)
//   the IPv4 header with ToS, TTL and header checksum set to all 1s
//   the UDP header with the checksum set to all 1s
//   the BTH with byte 4 (FECN, BECN, resv6) set to 0xFF
//   the extension headers, payload and pad
// i.e. everything a router or switch may rewrite in flight is masked. The 4 ICRC bytes are not
// covered. On the wire the CRC value is stored least-significant byte first (what rxe and
// ConnectX emit and scapy.contrib.roce / Wireshark expect).
//
// The (src, dst, sport, dport) entry points assume the IPv4 and UDP headers uroce emits (and
// PcapTap records): version 4, IHL 5, ToS 0, total length 20 + 8 + udp_len, ID 0, flags DF
// (0x4000), TTL 64, protocol 17; UDP length 8 + udp_len, checksum 0. ToS/TTL/checksums are
// masked anyway; ID and flags are covered, so a peer must send ID 0 + DF for these to match.
// The *_ipv4 entry points take the real headers instead. Packets sent as UDP GSO segments carry
// IDs 0, 1, 2, ...: net/icrc_id.h moves a stored ICRC to another ID and checks one whose ID the
// receiver cannot see.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::net {

// Addresses in network byte order (as in in_addr.s_addr); ports in host order. udp_payload is
// BTH ... ICRC and udp_len includes the 4 ICRC bytes. Returns 0 if udp_len < BTH + ICRC.
uint32_t icrc_compute(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                      const uint8_t* udp_payload, size_t udp_len);

// Compute and write the ICRC into the last 4 bytes of udp_payload. No-op if udp_len is too short.
void icrc_store(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                uint8_t* udp_payload, size_t udp_len);

// True if the last 4 bytes of udp_payload hold the right ICRC.
bool icrc_check(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                const uint8_t* udp_payload, size_t udp_len);

// Same over a complete IPv4 datagram as captured (IPv4 header of any IHL, UDP header, BTH ...
// ICRC), covering its real ID/flags/options. `len` bounds the read; the lengths in the headers
// must be consistent with it. icrc_compute_ipv4 returns false if they are not.
bool icrc_compute_ipv4(const uint8_t* ip, size_t len, uint32_t* icrc);
bool icrc_check_ipv4(const uint8_t* ip, size_t len);

// Over IPv6 the pseudo header is the IPv6 header with traffic class, flow label and hop limit
// all 1s (the version nibble stays), payload length 8 + udp_len, next header 17, then UDP and
// BTH masked as over IPv4. IPv6 has no ID and no flags: a receiver sees every covered field, so
// its check is exact. Addresses are the 16 bytes of each.
uint32_t icrc_compute6(const uint8_t* src16, const uint8_t* dst16, uint16_t sport, uint16_t dport,
                       const uint8_t* udp_payload, size_t udp_len);
void icrc_store6(const uint8_t* src16, const uint8_t* dst16, uint16_t sport, uint16_t dport,
                 uint8_t* udp_payload, size_t udp_len);
bool icrc_check6(const uint8_t* src16, const uint8_t* dst16, uint16_t sport, uint16_t dport,
                 const uint8_t* udp_payload, size_t udp_len);
// Over a complete IPv6 datagram as captured (no extension headers: next header UDP).
bool icrc_check_ipv6(const uint8_t* ip6, size_t len);

// The value stored in a packet's ICRC field (reads the 4 bytes LSB first). p must hold 4 bytes.
inline uint32_t icrc_load(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// Writes v into a packet's ICRC field, as icrc_load reads it.
inline void icrc_put(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
    p[2] = static_cast<uint8_t>(v >> 16);
    p[3] = static_cast<uint8_t>(v >> 24);
}

}  // namespace uroce::net
