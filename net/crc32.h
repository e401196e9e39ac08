// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, the zlib/Ethernet CRC). Used for the
// RoCEv2 ICRC on every packet sent and received: on x86-64 CPUs with PCLMULQDQ (checked at run
// time) buffers of kClmulMin bytes or more are folded with carry-less multiplication, about six
// times faster than tables; anything else goes through slice-by-8 tables. Allocation free.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::net {

// Advance a raw CRC state over n bytes. The state is not inverted on entry or exit, so a CRC can
// be computed in pieces: crc32_update(crc32_update(s, a, n), b, m).
uint32_t crc32_update(uint32_t state, const uint8_t* p, size_t n);

// The same, always through the tables (the portable path; tests compare the two).
uint32_t crc32_update_tables(uint32_t state, const uint8_t* p, size_t n);

// Whether crc32_update uses carry-less multiplication on this CPU.
bool crc32_accelerated();
constexpr size_t kClmulMin = 64;  // shorter buffers take the tables

// Complete CRC-32 of one buffer, as zlib's crc32(0, p, n) returns it.
inline uint32_t crc32(const uint8_t* p, size_t n) { return ~crc32_update(~0u, p, n); }

}  // namespace uroce::net
