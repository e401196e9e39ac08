// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma dev` and `rdma link` for `uroce run`'s system view (docs/system-view.md): the
// uroce binary runs this when it is started as `rdma`, from the directory `uroce run` puts
// first on PATH.
#pragma once

namespace uroce::rdmatool {

// iproute2's `rdma [-j] [-p] [-d] {dev|link} [show [DEV[/PORT]]]` from /sys/class/infiniband;
// any other command is handed to the next `rdma` on PATH. Returns the exit status.
int run(int argc, char** argv);

}  // namespace uroce::rdmatool
