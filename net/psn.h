// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// 24-bit sequence-number arithmetic (PSN; the same rules serve MSN). IBTA compares PSNs modulo
// 2^24 within a half window, so "a < b" means "a is at most 2^23 behind b".
#pragma once

#include <cstdint>

namespace uroce::net {

constexpr uint32_t kPsnMask = 0xffffff;  // PSN, MSN
constexpr uint32_t kQpnMask = 0xffffff;  // QPN, SRQN

constexpr uint32_t psn_add(uint32_t a, uint32_t n) { return (a + n) & kPsnMask; }

// Signed distance a - b modulo 2^24, in [-2^23, 2^23).
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
    // Move the 24-bit difference into the top of a 32-bit word and shift back arithmetically
    // (well defined in C++20) to sign-extend it.
    return static_cast<int32_t>(((a - b) & kPsnMask) << 8) >> 8;
}

constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }
constexpr bool psn_gt(uint32_t a, uint32_t b) { return psn_diff(a, b) > 0; }
constexpr bool psn_ge(uint32_t a, uint32_t b) { return psn_diff(a, b) >= 0; }

static_assert(psn_diff(0, kPsnMask) == 1);
static_assert(psn_diff(kPsnMask, 0) == -1);
static_assert(psn_diff(0x800000, 0) == -0x800000);
static_assert(psn_diff(0x7fffff, 0) == 0x7fffff);
static_assert(psn_add(kPsnMask, 2) == 1);

}  // namespace uroce::net
