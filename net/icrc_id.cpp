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

constexpr uint32_t times_x(uint32_t v) { return (v & 1) ? (v >> 1) ^ kPolyReflected : v >> 1; }

// a(x) b(x) mod P: shift-and-add over a's terms, lowest power first.
constexpr uint32_t gf2_mul(uint32_t a, uint32_t b) {
    uint32_t r = 0;
    for (; a != 0; a <<= 1, b = times_x(b))
        if (a & kOne) r ^= b;
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

}  // namespace

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
