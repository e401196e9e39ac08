// The application side of the control protocol (used by the verbs library and the
// uroce CLI).
#pragma once

#include <string>

#include "emu/abi/protocol.h"

namespace uroce::abi {

// Connects to device `name`'s control socket. Returns the fd or -errno.
int connect_device(const std::string& name);

// Sends `req`, waits for the response. Received fds are stored in fds[0..*nfds).
// Returns 0 or an errno for a transport failure (the device's verdict is resp->err).
// `send_fd` (if >= 0) travels with the request.
int transact(int fd, const Request& req, Response* resp, int* fds = nullptr, int* nfds = nullptr,
             int send_fd = -1);

// Sends a request with no session (kDump, kShutdown) and returns the raw reply.
int simple_request(const std::string& name, Op op, std::string* reply);
int simple_request(const std::string& name, const Request& req, std::string* reply);

}  // namespace uroce::abi
