// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/crc32.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define UROCE_CRC32_CLMUL 1
#endif

namespace uroce::net {
namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// T[0] is the classic byte-at-a-time table; T[k][i] is the CRC of byte i followed by k zero
// bytes, which lets the main loop fold 8 input bytes with 8 independent lookups.
constexpr Tables make_tables() {
    Tables t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
        t[0][i] = c;
    }
    for (size_t k = 1; k < 8; ++k) {
        for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
    return t;
}

constexpr Tables kT = make_tables();

// Byte-wise little-endian load: the reflected CRC consumes bytes in memory order whatever the
// host endianness; compilers turn this into a single load on x86/arm64.
inline uint32_t load_le32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

#ifdef UROCE_CRC32_CLMUL
// Carry-less multiplication (PCLMULQDQ), folding 64 bytes per step in four 128-bit lanes.
//
// Bit order: the CRC is reflected, so a 16-byte block loaded little-endian holds, from bit 0
// up, the coefficients of x^127 down to x^0 (bit 0 of the first byte is the highest power).
// Its low 64 bits are L(x) x^64 and its high 64 bits H(x). Moving the block D bytes further
// down the message multiplies it by x^(8D); modulo P that is L k1 + H k2 with
// k1 = x^(8D+64) mod P and k2 = x^(8D) mod P, both below x^32, so the result (below x^96) fits
// a block again and is XORed into the block D bytes on. A carry-less product of two reflected
// 64-bit values comes out one power of x short of the reflected 128-bit product, so each
// constant is x^(n-1) mod P, stored with the coefficient of x^j at bit 63-j.
// Folding keeps M(x) x^32 mod P, which is what the table-driven register computes from a zero
// start; the caller's state is XORed into the first 4 bytes (the same thing for a reflected
// CRC), and the 16 bytes left at the end, then the tail, go through the tables.
constexpr uint64_t xpow_mod(unsigned n) {  // x^n mod P, P = 0x104c11db7, normal bit order
    uint32_t r = 1;
    for (unsigned i = 0; i < n; ++i) r = (r << 1) ^ ((r & 0x80000000u) ? 0x04c11db7u : 0);
    return r;
}
constexpr uint64_t reflected_const(unsigned n) {  // x^(n-1) mod P, x^j at bit 63-j
    uint64_t r = xpow_mod(n - 1), out = 0;
    for (unsigned j = 0; j < 32; ++j)
        if (r >> j & 1) out |= uint64_t(1) << (63 - j);
    return out;
}
// For a fold over D bytes: (k1, k2) = (x^(8D+64), x^(8D)).
constexpr uint64_t kFold64Lo = reflected_const(8 * 64 + 64), kFold64Hi = reflected_const(8 * 64);
constexpr uint64_t kFold16Lo = reflected_const(8 * 16 + 64), kFold16Hi = reflected_const(8 * 16);

__attribute__((target("pclmul,sse2"))) inline __m128i fold(__m128i x, __m128i k, __m128i next) {
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);  // L * k1
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);  // H * k2
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

__attribute__((target("pclmul,sse2"))) uint32_t crc32_clmul(uint32_t c, const uint8_t* p,
                                                            size_t n) {
    auto load = [](const uint8_t* q) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    };
    __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(int(c)));
    __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
    p += 64;
    n -= 64;
    const __m128i k64 = _mm_set_epi64x(int64_t(kFold64Hi), int64_t(kFold64Lo));
    while (n >= 64) {
        x0 = fold(x0, k64, load(p));
        x1 = fold(x1, k64, load(p + 16));
        x2 = fold(x2, k64, load(p + 32));
        x3 = fold(x3, k64, load(p + 48));
        p += 64;
        n -= 64;
    }
    const __m128i k16 = _mm_set_epi64x(int64_t(kFold16Hi), int64_t(kFold16Lo));
    x1 = fold(x0, k16, x1);
    x2 = fold(x1, k16, x2);
    x3 = fold(x2, k16, x3);
    while (n >= 16) {
        x3 = fold(x3, k16, load(p));
        p += 16;
        n -= 16;
    }
    uint8_t last[16];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(last), x3);
    return crc32_update_tables(crc32_update_tables(0, last, 16), p, n);
}

bool have_clmul() {
    static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
    return yes;
}
#endif

}  // namespace

uint32_t crc32_update_tables(uint32_t c, const uint8_t* p, size_t n) {
    while (n >= 8) {
        const uint32_t a = load_le32(p) ^ c;
        const uint32_t b = load_le32(p + 4);
        c = kT[7][a & 0xff] ^ kT[6][(a >> 8) & 0xff] ^ kT[5][(a >> 16) & 0xff] ^ kT[4][a >> 24] ^
            kT[3][b & 0xff] ^ kT[2][(b >> 8) & 0xff] ^ kT[1][(b >> 16) & 0xff] ^ kT[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ kT[0][(c ^ *p++) & 0xff];
    return c;
}

bool crc32_accelerated() {
#ifdef UROCE_CRC32_CLMUL
    return have_clmul();
#else
    return false;
#endif
}

uint32_t crc32_update(uint32_t c, const uint8_t* p, size_t n) {
#ifdef UROCE_CRC32_CLMUL
    if (n >= kClmulMin && have_clmul()) return crc32_clmul(c, p, n);
#endif
    return crc32_update_tables(c, p, n);
}

}  // namespace uroce::net
