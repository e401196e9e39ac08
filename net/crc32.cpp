#include "net/crc32.h"

#include <array>

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

}  // namespace

uint32_t crc32_update(uint32_t c, const uint8_t* p, size_t n) {
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

}  // namespace uroce::net
