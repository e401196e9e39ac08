// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the benchmark tools (udp_baseline, path_costs) share.
#pragma once

#include <time.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace uroce::bench {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Exits with "TOOL: WHAT: strerror(errno)".
[[noreturn]] inline void die(const char* tool, const char* what) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, what, std::strerror(errno));
    std::exit(1);
}

}  // namespace uroce::bench
