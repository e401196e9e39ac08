// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/control/trace.h"

#include <time.h>

#include <cstdarg>
#include <cstdio>

namespace uroce::emu {

Trace::Trace() : ring_(new Entry[kEntries]) {}

void Trace::add(const char* fmt, ...) {
    Entry& e = ring_[next_ % kEntries];
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);  // wall clock: lines up with capture timestamps
    e.realtime_ns = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(e.text, sizeof e.text, fmt, ap);
    va_end(ap);
    ++next_;
}

uint64_t Trace::read(uint64_t since, std::string* out, size_t max_bytes) const {
    uint64_t first = since + 1;
    const uint64_t oldest = next_ > kEntries ? next_ - kEntries : 1;
    char line[kText + 64];
    if (first < oldest) {
        int n = std::snprintf(line, sizeof line, "%llu lost %llu\n",
                              static_cast<unsigned long long>(oldest - 1),
                              static_cast<unsigned long long>(oldest - first));
        if (out->size() + size_t(n) > max_bytes) return since;
        out->append(line, size_t(n));
        since = oldest - 1;
        first = oldest;
    }
    for (uint64_t seq = first; seq < next_; ++seq) {
        const Entry& e = ring_[seq % kEntries];
        time_t secs = time_t(e.realtime_ns / 1000000000u);
        tm t;
        gmtime_r(&secs, &t);
        int n = std::snprintf(line, sizeof line, "%llu %02d:%02d:%02d.%06u %s\n",
                              static_cast<unsigned long long>(seq), t.tm_hour, t.tm_min, t.tm_sec,
                              unsigned(e.realtime_ns % 1000000000u / 1000u), e.text);
        if (n < 0) break;
        if (size_t(n) >= sizeof line) n = int(sizeof line - 1);
        if (out->size() + size_t(n) > max_bytes) break;
        out->append(line, size_t(n));
        since = seq;
    }
    return since;
}

}  // namespace uroce::emu
