// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's trace (`uroce trace`, docs/trace.md): what changed, in order: objects created
// and destroyed, QP state transitions, failed control calls and why, async events and who got
// them, error completions, CM messages and events, XRC domain sharing. A fixed ring of recent
// lines, written on the engine thread without allocating; readers ask for the lines after a
// sequence number through Device::call().
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace uroce::emu {

class Trace {
public:
    static constexpr size_t kEntries = 4096;  // ~1 MiB: minutes of connection setup
    static constexpr size_t kText = 232;

    Trace();
    // Formats one line (truncated at kText). Engine thread only.
    void add(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
    // Appends the lines numbered after `since`, oldest first, as "SEQ HH:MM:SS.uuuuuu TEXT",
    // stopping before out would exceed max_bytes. Lines overwritten before they were read are
    // reported as one "SEQ lost N" line. Returns the number of the last line appended (or
    // `since` when there was none).
    uint64_t read(uint64_t since, std::string* out, size_t max_bytes) const;
    uint64_t last() const { return next_ - 1; }

private:
    struct Entry {
        uint64_t realtime_ns;
        char text[kText];
    };
    std::unique_ptr<Entry[]> ring_;
    uint64_t next_ = 1;  // number of the next line; line n lives in ring_[n % kEntries]
};

}  // namespace uroce::emu
