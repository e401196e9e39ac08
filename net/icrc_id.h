// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The ICRC of a packet whose IPv4 ID is not 0, derived from the ID-0 ICRC (net/icrc.h) without
// another pass over the packet.
//
// Why: a run of packets to one peer goes out as one UDP GSO train (sendmsg with UDP_SEGMENT), and
// the kernel numbers the IPv4 ID of the train's segments 0, 1, 2, ... (DF set, unconnected
// socket: segment k gets ID k). The ICRC covers the ID, so the packet that becomes segment k must
// carry the ICRC for ID k, or rxe, a NIC or tshark on a real interface see a bad ICRC. A uroce
// receiver cannot see the ID at all (a UDP socket does not hand over the IP header); with UDP_GRO
// it knows a packet's index in its train (a hint), without it nothing; and other senders (rxe,
// NICs) use any ID. So it tries ID 0 and the hint, then solves for the ID (IcrcIdSolver below).
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
#include <memory>

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

// Any peer's IPv4 ID: kernel Soft-RoCE (__ip_select_ident) and NICs set IDs anywhere in
// 0..65535, so a receiver that only knows uroce's own train numbering drops their packets.
//
// How: with diff = (ICRC for ID 0, DF) ^ (the stored ICRC), the sender's ID solves
// D(len, id) = diff, 32 equations over GF(2) in 16 unknowns. D(len, id) = x^b(len) Q(id) mod P
// where Q(id) is the ID's 16 bits as a polynomial of degree < 16 (net/icrc_id.cpp); x is
// invertible mod P, so multiplying diff by x^-b(len) (one 32x32 carry-less product with a
// per-length constant) turns the system into row echelon form: q = Q(id) exactly when q has no
// term of degree 16 or more. Those 16 terms are the consistency check (a solution exists iff
// they are 0, so a random diff passes with probability 2^-16), the other 16 are the ID itself
// (unique: the 16 columns are independent). DF clear moves q by a constant, so it costs one more
// mask test. Constant time, no search.
//
// The constants x^-b(len) for every length a UDP datagram can have are computed once, in the
// constructor (256 KiB, a few milliseconds); solve() allocates nothing, locks nothing and
// writes nothing, so one solver can be shared read-only.
class IcrcIdSolver {
public:
    // udp_len (BTH ... ICRC) of the largest IPv4 UDP datagram.
    static constexpr size_t kMaxUdpLen = 0xffff - 20 - 8;

    IcrcIdSolver();

    struct Solution {
        uint16_t id = 0;
        bool df = true;  // the flags field the ICRC was made for: DF (0x4000) or none (0)
    };
    // True if an IPv4 ID (with DF set, or with DF clear when nodf) makes the stored ICRC right,
    // given diff as above; *out is then that ID. False for udp_len below BTH + ICRC or above
    // kMaxUdpLen.
    bool solve(size_t udp_len, uint32_t diff, bool nodf, Solution* out) const;

private:
    std::unique_ptr<uint32_t[]> inv_;  // x^-b(len), indexed by udp_len
};

// How a received packet's ICRC was accepted (or not), in the order the receiver tries.
enum class IcrcWay : uint8_t {
    kBad,         // no ID makes it right: corrupted (or sent with headers uroce does not expect)
    kId0,         // right for ID 0 (a single packet from uroce, or a sender that uses ID 0)
    kHint,        // right for the GRO train index the socket gave (segment k of uroce's train)
    kSolved,      // IcrcIdSolver found the ID, DF set
    kSolvedNoDf,  // IcrcIdSolver found the ID, DF clear (only when asked for)
};

// The receiver's check: the ICRC is computed once (for ID 0 with DF); ID 0, then the hint (a GRO
// segment index, 0: none) cost a compare each; then the solver. *id (if not null) gets the ID
// the packet had and *df its DF bit, whenever the way is not kBad.
IcrcWay icrc_check_any_id(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                          const uint8_t* udp_payload, size_t udp_len, uint16_t hint, bool nodf,
                          IcrcIdDelta& d, const IcrcIdSolver& solver, uint16_t* id, bool* df);

}  // namespace uroce::net
