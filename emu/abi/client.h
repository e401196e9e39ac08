// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The application side of the control protocol (used by the verbs library and the
// uroce CLI).
#pragma once

#include <sys/types.h>

#include <string>

#include "emu/abi/protocol.h"

namespace uroce::abi {

// Connects to device `name`'s control socket and checks, with the kernel's word for it
// (SO_PEERCRED), that the process serving it runs as this user or as root: another user's
// "device" would be handed our memory. Returns the fd, or -errno: -EACCES for another
// user's device (with a one-line message on stderr, once per process).
int connect_device(const std::string& name);

// Whether the process at the other end of a control connection, running as `peer_uid`, may
// be dealt with: this user or root, as /dev/infiniband/uverbs* serves its owner and root.
// Both ends ask: the library of the device, the device of each application.
bool trusted_peer_uid(uid_t peer_uid);

// Lets the process serving `sock` read and write this process's memory where Yama restricts
// ptrace (ptrace_scope 1), with PR_SET_PTRACER. The pid is the socket's peer as the kernel
// reports it, never one from a message. Returns that pid, or -errno.
pid_t allow_device_ptrace(int sock);

// One message on a control socket, with send_fd (>= 0) passed along (SCM_RIGHTS); retried on
// EINTR. What sendmsg returns.
ssize_t send_message(int sock, const void* data, size_t len, int send_fd = -1);

// Sends `req`, waits for the response. Received fds are stored in fds[0..*nfds).
// Returns 0 or an errno for a transport failure (the device's verdict is resp->err).
// `send_fd` (if >= 0) travels with the request.
int transact(int fd, const Request& req, Response* resp, int* fds = nullptr, int* nfds = nullptr,
             int send_fd = -1);

// Sends a request with no session (kDump, kShutdown) and returns the raw reply.
int simple_request(const std::string& name, Op op, std::string* reply);
int simple_request(const std::string& name, const Request& req, std::string* reply);

}  // namespace uroce::abi
