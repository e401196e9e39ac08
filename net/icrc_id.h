// The ICRC of a packet whose IPv4 ID is not 0, derived from the ID-0 ICRC (net/icrc.h) without
// another pass over the packet.
//
// Why: a run of packets to one peer goes out as one UDP GSO train (sendmsg with UDP_SEGMENT), and
// the kernel numbers the IPv4 ID of the train's segments 0, 1, 2, ... (DF set, unconnected
// socket: segment k gets ID k). The ICRC covers the ID, so the packet that becomes segment k must
// carry the ICRC for ID k, or rxe, a NIC or tshark on a real interface see a bad ICRC. A uroce
// receiver cannot see the ID at all (a UDP socket does not hand over the IP header); with UDP_GRO
// it knows a packet's index in its train (a hint), without it nothing. So it accepts a packet
// whose ICRC is right for some ID in [0, max_ids), trying the hint first.
//
// How: CRC-32 is affine over GF(2). Two packets of one length that differ only in the 16-bit ID
// have ICRCs that differ by D(len, id), the CRC register contribution of the ID bits followed by
// the n bytes after the ID field (n fixed by the length). D is linear in id, so it is the XOR of
// 16 basis values, one per ID bit, each a power of x modulo the CRC polynomial; a power x^(8n)
// costs O(log n) carry-less multiplications from a compile-time table of x^(2^i).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uroce::net {

// D(udp_len, id): what the ICRC of a udp_len-byte RoCEv2 payload (BTH ... ICRC, as in icrc.h)
// changes by when the IPv4 ID goes from 0 to id (or from a to a ^ id). Owned by one thread (the
// engine's): no lock, no allocation, nothing static written at run time. It keeps the basis of
// the last length asked about: a train's packets share one length, so nearly every call is a hit
// (16 conditional XORs at most); a miss costs about 20 multiplications of 32-bit polynomials.
class IcrcIdDelta {
public:
    static constexpr unsigned kIdBits = 16;
    using Basis = std::array<uint32_t, kIdBits>;

    uint32_t delta(size_t udp_len, uint16_t id) {
        const Basis& b = basis(udp_len);
        uint32_t d = 0;
        for (unsigned k = 0; id != 0; ++k, id >>= 1)
            if (id & 1) d ^= b[k];
        return d;
    }

    // basis(len)[k] == delta(len, 1 << k).
    const Basis& basis(size_t udp_len) {
        if (udp_len != len_) recompute(udp_len);
        return basis_;
    }

    // Calls that recomputed the basis (a length other than the previous call's); for tests.
    uint64_t misses() const { return misses_; }

private:
    void recompute(size_t udp_len);

    size_t len_ = 0;  // not a valid udp_len (below BTH + ICRC): the first call computes
    Basis basis_{};
    uint64_t misses_ = 0;
};

// Turns the ICRC stored in the last 4 bytes of udp_payload, right for IPv4 ID from_id, into the
// one for to_id (the sender: icrc_store, then icrc_set_id(p, len, 0, k, d) for GSO segment k). It
// only XORs the difference in: a packet whose ICRC was wrong stays wrong. No-op if udp_len is
// below BTH + ICRC.
void icrc_set_id(uint8_t* udp_payload, size_t udp_len, uint16_t from_id, uint16_t to_id,
                 IcrcIdDelta& d);

// True if the last 4 bytes of udp_payload hold the ICRC for some IPv4 ID in [0, max_ids), with
// the other headers as icrc_check assumes; *id_found (if not null) is then that ID (only one can
// match: D(len, id) != 0 for id != 0). The CRC runs once (for ID 0); then ID hint if it is in
// range, then every ID in [1, max_ids) by a Gray-code walk, one XOR and one compare each.
// max_ids: the most segments one UDP_SEGMENT send can have (the kernel's UDP_MAX_SEGMENTS: 64 on
// older kernels, 128 on recent ones); any value up to 65536 works; 0 accepts nothing, 1 is
// icrc_check.
bool icrc_check_ids(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                    const uint8_t* udp_payload, size_t udp_len, uint16_t hint, uint32_t max_ids,
                    IcrcIdDelta& d, uint16_t* id_found);

}  // namespace uroce::net
