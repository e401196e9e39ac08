// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce ladder --trace FILE`: the lines of `uroce trace` (or `uroce run --trace FILE`,
// docs/trace.md) that belong on a QP's lane: who created the QP (its pid), its state changes,
// its error completions and refused requests. The trace names devices, the capture
// addresses: a device is the address whose lanes carry the PSNs its QPs were given
// (modify_qp's rq_psn and sq_psn), so no mapping has to be spelled out.
#pragma once

#include <string>
#include <vector>

#include "emu/ladder/ladder_model.h"

namespace uroce::ladder {

struct TraceStats {
    size_t lines = 0;
    size_t events = 0;                 // put on lanes
    std::vector<std::string> devices;  // "uroce0=127.0.0.2", or "uroce0=?" when not placed
};

// Reads FILE and adds its events to ladder->events and pids to its lanes (call after
// build_packets, before build_rows). False with *err when FILE cannot be read.
bool apply_trace(const std::string& path, Ladder* ladder, TraceStats* stats, std::string* err);

// The same over lines already read (the unit tests).
void apply_trace_lines(const std::vector<std::string>& lines, Ladder* ladder, TraceStats* stats);

}  // namespace uroce::ladder
