// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device clock that stamps completions (ibv_wc_read_completion_ts) and that
// ibv_query_rt_values_ex reads: CLOCK_MONOTONIC in nanoseconds, the same in the device and
// in every application on the host. ibv_query_device_ex reports it as a 1 GHz
// hca_core_clock with a 64-bit completion_timestamp_mask.
#pragma once

#include <time.h>

#include <cstdint>

namespace uroce::abi {

constexpr uint64_t kHcaCoreClockKhz = 1000000;

inline uint64_t device_clock_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace uroce::abi
