// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The system view of `uroce run` (docs/system-view.md): the files the kernel provides for an
// RDMA device (/dev/infiniband/uverbs<N>, /sys/class/infiniband/<dev>/...,
// /sys/class/infiniband_verbs/uverbs<N>/...), made for uroce's devices in a private mount
// namespace of the calling process, so that middleware that looks for them (UCX, libfabric's
// verbs provider, libibumad's tools) finds the devices. The host's /dev and /sys are not
// changed.
#pragma once

#include <string>

namespace uroce::sysview {

// Asks uroce's library in `libdir` (through ibv_query_*) about the devices it lists,
// moves this process into a private mount namespace (a user namespace too when it may not
// make one alone) and makes there the files for them. The process must have one thread. Returns ""
// when the view is in place, else a one-line reason; on failure the process is unchanged
// or, if it already entered the namespace, the host's view of /dev and /sys is intact.
std::string enter(const std::string& libdir);

}  // namespace uroce::sysview
