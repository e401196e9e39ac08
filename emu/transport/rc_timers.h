// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// IBTA timer encodings used by RC QPs.
#pragma once

#include <cstdint>

namespace uroce::emu {

// Local ACK timeout: 4.096 us * 2^timeout; 0 means infinite (never retransmit).
// Values below 1 ms are raised to 1 ms: the engine's timers are not finer than that
// under load, and spurious retransmissions would only add noise. See docs/transport.md.
inline uint64_t ack_timeout_ns(uint8_t timeout) {
    if (timeout == 0) return 0;
    uint64_t ns = 4096ull << (timeout > 31 ? 31 : timeout);
    return ns < 1000000 ? 1000000 : ns;
}

// RNR NAK timer field (IBTA table "Encoding of RNR NAK timer"), in microseconds.
inline uint64_t rnr_timer_ns(uint8_t code) {
    static constexpr uint32_t kUs[32] = {
        655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
        480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
        20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
    return uint64_t(kUs[code & 31]) * 1000;
}

}  // namespace uroce::emu
