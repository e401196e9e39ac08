// Whether this process may make an io_uring at all, for a message that says why a device
// cannot start. Apart from udp_uring.h so that its callers need not include liburing.h
// (uroced.cpp: which standard headers come before asio's changes asio's configuration).
#pragma once

namespace uroce::net {

// 0 when a ring can be made here, else the errno the kernel gave (EPERM from a seccomp
// profile or kernel.io_uring_disabled, ENOSYS from a kernel without io_uring).
int io_uring_probe();

}  // namespace uroce::net
