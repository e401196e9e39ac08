// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce ladder` (docs/ladder.md): captures (and a trace) to a ladder diagram.
#pragma once

#include <string>
#include <vector>

namespace uroce::ladder {

// args: what follows `uroce ladder`. Returns the exit status (2: usage).
int cmd_ladder(const std::vector<std::string>& args);

}  // namespace uroce::ladder
