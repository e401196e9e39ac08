// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `modprobe`, `rmmod` and `lsmod` for `uroce run` (the uroce binary started under those
// names from the directory `uroce run` puts first on PATH; docs/system-view.md).
#pragma once

#include <string>
#include <vector>

namespace uroce::modtools {

// The RDMA modules a set-up script for kernel Soft-RoCE loads or looks for.
const std::vector<std::string>& rdma_modules();

// modprobe (rmmod: true for rmmod): 0 without doing anything when every module named is an
// RDMA one, else the host's tool runs. Returns the exit status.
int modprobe(int argc, char** argv, bool rmmod);

// lsmod: the host's list, and the RDMA modules as loaded.
int lsmod(int argc, char** argv);

}  // namespace uroce::modtools
