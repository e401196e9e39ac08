// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/icrc_id.h"

#include "net/headers.h"
#include "net/icrc.h"

namespace uroce::net {
namespace {

// Polynomials modulo P (the CRC-32 polynomial) in the CRC register's reflected order: bit 31
// holds x^0, bit 0 holds x^31. A register that has taken in a message M from 0 holds
// M(x) x^32 mod P; a byte's bit 0 is its highest power (sent first).
constexpr uint32_t kPolyReflected = 0xedb88320u;
constexpr uint32_t kOne = 0x80000000u;  // x^0

// Branch-free (masks instead of tests): the receiver's solver multiplies a random-looking
// difference per packet, whose bits a branch would mispredict half the time.
constexpr uint32_t times_x(uint32_t v) { return (v >> 1) ^ (kPolyReflected & (0u - (v & 1))); }

// a(x) b(x) mod P: shift-and-add over a's terms, lowest power first; 32 steps whatever a is.
constexpr uint32_t gf2_mul(uint32_t a, uint32_t b) {
    uint32_t r = 0;
    for (int i = 0; i < 32; ++i, a <<= 1, b = times_x(b)) r ^= b & (0u - (a >> 31));
    return r;
}

// x^(2^i) mod P, i < 64: any exponent is a product of these.
using Squares = std::array<uint32_t, 64>;
constexpr Squares make_squares() {
    Squares s{};
    s[0] = times_x(kOne);
    for (size_t i = 1; i < s.size(); ++i) s[i] = gf2_mul(s[i - 1], s[i - 1]);
    return s;
}
constexpr Squares kSquares = make_squares();

constexpr uint32_t x_pow(uint64_t e) {
    uint32_t r = kOne;
    for (size_t i = 0; e != 0; ++i, e >>= 1)
        if (e & 1) r = gf2_mul(r, kSquares[i]);
    return r;
}
static_assert(x_pow(32) == kPolyReflected);  // x^32 = P - x^32 mod P
static_assert(gf2_mul(x_pow(1000), x_pow(2345)) == x_pow(3345));

// Bytes the CRC takes in after the 2-byte ID field: the rest of the IPv4 header (14), the UDP
// header (8), then BTH ... pad (the ICRC itself is not covered).
constexpr size_t kAfterId = 20 - 6 + 8 - kIcrcLen;

// x^-1 mod P: times_x(kXInv) == 1 (P has a constant term, so x is invertible).
constexpr uint32_t kXInv = 0xdb710641u;
static_assert(times_x(kXInv) == kOne);

// x^-e mod P, from the squares of x^-1.
constexpr uint32_t x_inv_pow(uint64_t e) {
    uint32_t r = kOne, s = kXInv;
    for (; e != 0; e >>= 1, s = gf2_mul(s, s))
        if (e & 1) r = gf2_mul(r, s);
    return r;
}
static_assert(gf2_mul(x_inv_pow(1234), x_pow(1234)) == kOne);

// The exponent b(len) of D(len, id) = x^b Q(id) (IcrcIdDelta::recompute: basis[k] = x^(b + e)).
constexpr uint64_t id_exponent(size_t udp_len) { return 32 + 8 * (uint64_t{udp_len} + kAfterId); }

// DF is bit 6 of the flags field's first byte, which ends 16 bits after the ID: x^(15 - 6 - 16)
// relative to the ID's x^0. Clearing DF adds this to q.
constexpr uint32_t kDfQ = x_inv_pow(7);
// q and q ^ kDfQ cannot both pass the check: at most one of DF set / clear solves a packet.
static_assert((kDfQ & 0xffffu) != 0);

// q = Q(id): bit 31 - e holds x^e, and ID bit k is x^e for e = 7 - k (k < 8) or 23 - k
// (k >= 8), so the upper half of q is the ID with its two bytes swapped.
constexpr bool q_to_id(uint32_t q, uint16_t* id) {
    if ((q & 0xffffu) != 0) return false;  // the 16 constraints: no term of degree >= 16
    const uint32_t h = q >> 16;
    *id = static_cast<uint16_t>((h >> 8) | (h & 0xffu) << 8);
    return true;
}

}  // namespace

IcrcIdSolver::IcrcIdSolver() : inv_(new uint32_t[kMaxUdpLen + 1]) {
    const uint32_t step = x_inv_pow(8);  // one byte more
    uint32_t v = x_inv_pow(id_exponent(0));
    for (size_t len = 0; len <= kMaxUdpLen; ++len, v = gf2_mul(v, step)) inv_[len] = v;
}

bool IcrcIdSolver::solve(size_t udp_len, uint32_t diff, bool nodf, Solution* out) const {
    if (udp_len < kBthLen + kIcrcLen || udp_len > kMaxUdpLen) return false;
    const uint32_t q = gf2_mul(diff, inv_[udp_len]);
    uint16_t id;
    if (q_to_id(q, &id)) {
        *out = {id, true};
        return true;
    }
    if (nodf && q_to_id(q ^ kDfQ, &id)) {
        *out = {id, false};
        return true;
    }
    return false;
}

IcrcWay icrc_check_any_id(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                          const uint8_t* udp_payload, size_t udp_len, uint16_t hint, bool nodf,
                          IcrcIdDelta& d, const IcrcIdSolver& solver, uint16_t* id, bool* df) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return IcrcWay::kBad;
    const uint32_t diff = icrc_compute(src_ip_be, dst_ip_be, sport, dport, udp_payload, udp_len) ^
                          icrc_load(udp_payload + udp_len - kIcrcLen);
    IcrcIdSolver::Solution s{};
    IcrcWay way = IcrcWay::kBad;
    if (diff == 0) {
        way = IcrcWay::kId0;
    } else if (hint != 0 && d.delta(udp_len, hint) == diff) {
        way = IcrcWay::kHint;
        s.id = hint;
    } else if (solver.solve(udp_len, diff, nodf, &s)) {
        way = s.df ? IcrcWay::kSolved : IcrcWay::kSolvedNoDf;
    }
    if (way != IcrcWay::kBad) {
        if (id != nullptr) *id = s.id;
        if (df != nullptr) *df = s.df;
    }
    return way;
}

void IcrcIdDelta::recompute(size_t udp_len) {
    ++misses_;
    len_ = udp_len;
    // The ID is big-endian: ID bit k sits, for k < 8, in the second byte as x^(7 - k), and for
    // k >= 8 in the first as x^(23 - k); then n = udp_len + kAfterId zero bytes follow and the
    // register adds x^32. So basis[k] = x^(32 + 8n + e) for e = 0 ... 15 in that order.
    uint32_t v = x_pow(32 + 8 * (uint64_t{udp_len} + kAfterId));
    for (unsigned e = 0; e < kIdBits; ++e, v = times_x(v)) basis_[e < 8 ? 7 - e : 23 - e] = v;
}

void icrc_set_id(uint8_t* udp_payload, size_t udp_len, uint16_t from_id, uint16_t to_id,
                 IcrcIdDelta& d) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen) return;
    uint8_t* icrc = udp_payload + udp_len - kIcrcLen;
    icrc_put(icrc, icrc_load(icrc) ^ d.delta(udp_len, static_cast<uint16_t>(from_id ^ to_id)));
}

bool icrc_check_ids(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t sport, uint16_t dport,
                    const uint8_t* udp_payload, size_t udp_len, uint16_t hint, uint32_t max_ids,
                    IcrcIdDelta& d, uint16_t* id_found) {
    if (udp_payload == nullptr || udp_len < kBthLen + kIcrcLen || max_ids == 0) return false;
    // What the stored ICRC differs from the ID-0 one by: D(len, id) for the sender's ID.
    const uint32_t diff = icrc_compute(src_ip_be, dst_ip_be, sport, dport, udp_payload, udp_len) ^
                          icrc_load(udp_payload + udp_len - kIcrcLen);
    auto found = [id_found](uint32_t id) {
        if (id_found != nullptr) *id_found = static_cast<uint16_t>(id);
        return true;
    };
    if (diff == 0) return found(0);
    if (max_ids > 65536) max_ids = 65536;
    if (hint != 0 && hint < max_ids && d.delta(udp_len, hint) == diff) return found(hint);
    // Gray code: step i flips ID bit ctz(i), so D follows with one XOR. The walk covers the
    // power of two at or above max_ids; IDs past max_ids are refused when they match (at most
    // one ID matches, so nothing in range is missed).
    const IcrcIdDelta::Basis& b = d.basis(udp_len);
    uint32_t walk = 1;
    while (walk < max_ids) walk <<= 1;
    uint32_t id = 0, acc = 0;
    for (uint32_t i = 1; i < walk; ++i) {
        const unsigned bit = static_cast<unsigned>(__builtin_ctz(i));
        id ^= 1u << bit;
        acc ^= b[bit];
        if (acc == diff) return id < max_ids && found(id);
    }
    return false;
}

}  // namespace uroce::net
