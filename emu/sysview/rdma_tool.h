// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma dev` and `rdma link` for `uroce run`'s system view (docs/system-view.md): the
// uroce binary runs this when it is started as `rdma`, from the directory `uroce run` puts
// first on PATH.
#pragma once

#include <string>
#include <vector>

namespace uroce::rdmatool {

// iproute2's `rdma [-j] [-p] [-d] {dev|link} [show [DEV[/PORT]]]` from /sys/class/infiniband;
// any other command is handed to the next `rdma` on PATH. Returns the exit status.
int run(int argc, char** argv);

// `rdma link add NAME type rxe netdev IF` (words: what follows "add"; help: the usage
// iproute2 shows for an incomplete command) and `rdma link delete NAME` (rdma_link.cpp).
int link_add(const std::vector<std::string>& words, int (*help)());
int link_delete(const std::vector<std::string>& words);

// The kernel's index of device `dev` (its uverbs number), as `rdma dev` shows it.
unsigned device_index(const std::string& dev);

// `rdma res [show [qp]]` and `rdma statistic [show] [link [DEV[/1]]]` for uroce's devices,
// from what each device reports (rdma_reports.cpp); words: what follows the object. Return
// the exit status, or -1 for what the host's tool answers.
int res(const std::vector<std::string>& words, bool json, bool pretty);
int statistic(const std::vector<std::string>& words, bool json, bool pretty);

}  // namespace uroce::rdmatool
