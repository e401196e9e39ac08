// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/icrc.h"

#include <cstring>

#include "net/byteorder.h"
#include "net/crc32.h"
#include "net/headers.h"

namespace uroce::net {
namespace {

constexpr size_t kLrhMaskLen = 8;
constexpr size_t kIpv4Len = 20;
constexpr size_t kUdpLen = 8;
constexpr size_t kIpv6Len = 40;
constexpr size_t kMaxIpv4Len = 60;

// CRC state after the 8 masked-LRH bytes of 0xFF, starting from the usual ~0 seed. Computed at
// compile time (bitwise; it runs once) so the hot path starts from it and no static
// initialisation order is involved.
constexpr uint32_t lrh_state() {
    uint32_t c = ~0u;
    for (size_t i = 0; i < kLrhMaskLen; ++i) {
        c ^= 0xff;
        for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return c;
}
constexpr uint32_t kLrhState = lrh_state();
static_assert(kLrhState == 0xdebb20e3);  // the seed rxe documents for the same purpose

// Masks the variant fields of a copied IPv4 + UDP header + BTH in place.
inline void mask_variant(uint8_t* ip, size_t ihl_bytes) {
    ip[1] = 0xff;            // ToS (DSCP/ECN)
    ip[8] = 0xff;            // TTL
    ip[10] = ip[11] = 0xff;  // header checksum
    uint8_t* udp = ip + ihl_bytes;
    udp[6] = udp[7] = 0xff;   // UDP checksum
    udp[kUdpLen + 4] = 0xff;  // BTH FECN, BECN, resv6
}

// CRC over pseudo (masked IP + UDP + BTH, already copied) and the rest of the UDP payload.
inline uint32_t finish(const uint8_t* pseudo, size_t pseudo_len, const uint8_t* udp_payload,
                       size_t udp_len) {
    uint32_t c = crc32_update(kLrhState, pseudo, pseudo_len);
    c = crc32_update(c, udp_payload + kBthLen, udp_len - kBthLen - kIcrcLen);
    return ~c;
}

}  // namespace

uint32_t icrc_compute(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                      const uint8_t* udp_payload, size_t udp_len) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return 0;
    // The headers uroce puts on the wire, rebuilt rather than passed in: the receive path only
    // has the addresses and ports from the socket.
    uint8_t h[kIpv4Len + kUdpLen + kBthLen];
    h[0] = 0x45;
    h[1] = 0;
    store_be16(h + 2, static_cast<uint16_t>(kIpv4Len + kUdpLen + udp_len));
    store_be16(h + 4, 0);       // ID
    store_be16(h + 6, 0x4000);  // DF, fragment offset 0
    h[8] = 64;
    h[9] = 17;  // UDP
    std::memcpy(h + 12, &src_ip_be, 4);
    std::memcpy(h + 16, &dst_ip_be, 4);
    store_be16(h + 20, sport);
    store_be16(h + 22, dport);
    store_be16(h + 24, static_cast<uint16_t>(kUdpLen + udp_len));
    std::memcpy(h + kIpv4Len + kUdpLen, udp_payload, kBthLen);
    mask_variant(h, kIpv4Len);
    return finish(h, sizeof h, udp_payload, udp_len);
}

void icrc_store(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                uint8_t* udp_payload, size_t udp_len) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return;
    const uint32_t c = icrc_compute(src_ip_be, dst_ip_be, sport, dport, udp_payload, udp_len);
    icrc_put(udp_payload + udp_len - kIcrcLen, c);
}

bool icrc_check(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                const uint8_t* udp_payload, size_t udp_len) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return false;
    const uint32_t c = icrc_compute(src_ip_be, dst_ip_be, sport, dport, udp_payload, udp_len);
    return c == icrc_load(udp_payload + udp_len - kIcrcLen);
}

uint32_t icrc_compute6(const uint8_t* src16, const uint8_t* dst16, uint16_t sport, uint16_t dport,
                       const uint8_t* udp_payload, size_t udp_len) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return 0;
    uint8_t h[kIpv6Len + kUdpLen + kBthLen];
    h[0] = 0x6f;  // version 6; traffic class and flow label masked
    h[1] = h[2] = h[3] = 0xff;
    store_be16(h + 4, static_cast<uint16_t>(kUdpLen + udp_len));
    h[6] = 17;    // next header: UDP
    h[7] = 0xff;  // hop limit, masked
    std::memcpy(h + 8, src16, 16);
    std::memcpy(h + 24, dst16, 16);
    uint8_t* udp = h + kIpv6Len;
    store_be16(udp, sport);
    store_be16(udp + 2, dport);
    store_be16(udp + 4, static_cast<uint16_t>(kUdpLen + udp_len));
    udp[6] = udp[7] = 0xff;
    std::memcpy(udp + kUdpLen, udp_payload, kBthLen);
    udp[kUdpLen + 4] = 0xff;
    return finish(h, sizeof h, udp_payload, udp_len);
}

void icrc_store6(const uint8_t* src16, const uint8_t* dst16, uint16_t sport, uint16_t dport,
                 uint8_t* udp_payload, size_t udp_len) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return;
    icrc_put(udp_payload + udp_len - kIcrcLen,
             icrc_compute6(src16, dst16, sport, dport, udp_payload, udp_len));
}

bool icrc_check6(const uint8_t* src16, const uint8_t* dst16, uint16_t sport, uint16_t dport,
                 const uint8_t* udp_payload, size_t udp_len) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return false;
    return icrc_compute6(src16, dst16, sport, dport, udp_payload, udp_len) ==
           icrc_load(udp_payload + udp_len - kIcrcLen);
}

bool icrc_check_ipv6(const uint8_t* ip6, size_t len) {
    if (ip6 == nullptr || len < kIpv6Len + kUdpLen || (ip6[0] >> 4) != 6 || ip6[6] != 17)
        return false;
    const size_t plen = load_be16(ip6 + 4);
    const uint8_t* udp = ip6 + kIpv6Len;
    if (kIpv6Len + plen > len || load_be16(udp + 4) != plen) return false;
    return icrc_check6(ip6 + 8, ip6 + 24, load_be16(udp), load_be16(udp + 2), udp + kUdpLen,
                       plen - kUdpLen);
}

bool icrc_compute_ipv4(const uint8_t* ip, size_t len, uint32_t* icrc) {
    if (ip == nullptr || len < kIpv4Len || (ip[0] >> 4) != 4 || ip[9] != 17) return false;
    const size_t ihl = size_t{ip[0] & 0x0fu} * 4;
    const size_t total = load_be16(ip + 2);
    if (ihl < kIpv4Len || total > len || total < ihl + kUdpLen) return false;
    const uint8_t* udp = ip + ihl;
    const size_t udp_total = load_be16(udp + 4);
    if (udp_total != total - ihl || udp_total < kUdpLen + kBthLen + kIcrcLen) return false;

    uint8_t h[kMaxIpv4Len + kUdpLen + kBthLen];
    const size_t hlen = ihl + kUdpLen + kBthLen;
    std::memcpy(h, ip, hlen);
    mask_variant(h, ihl);
    *icrc = finish(h, hlen, udp + kUdpLen, udp_total - kUdpLen);
    return true;
}

bool icrc_check_ipv4(const uint8_t* ip, size_t len) {
    uint32_t c;
    if (!icrc_compute_ipv4(ip, len, &c)) return false;
    const size_t total = load_be16(ip + 2);
    return c == icrc_load(ip + total - kIcrcLen);
}

}  // namespace uroce::net
