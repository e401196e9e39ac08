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

// In the view enter() made: brings it in step with the devices running now (a device
// started since appears, one stopped leaves), asking the library in `libdir` again.
// Returns "" or a one-line reason.
std::string resync(const std::string& libdir);

// In the view enter() made, while `cmd` (a child running CMD) lives: resyncs whenever a
// device starts or stops in the runtime directory (view_keeper.cpp). SIGTERM and SIGHUP
// are passed on to cmd; SIGINT and SIGQUIT (a terminal's, sent to the whole group) are
// CMD's to act on. Returns CMD's exit status (128+N for a signal N).
int follow(const std::string& libdir, pid_t cmd);

}  // namespace uroce::sysview
