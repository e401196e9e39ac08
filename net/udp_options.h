// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UDP socket options of the kernel's that glibc's headers may not name yet (linux/udp.h):
// what net/udp_uring*.cpp set on the device's sockets.
#pragma once

#include <netinet/udp.h>

namespace uroce::net {

#ifndef UDP_SEGMENT
constexpr int UDP_SEGMENT = 103;  // linux/udp.h, since 4.18
#endif
#ifndef UDP_GRO
constexpr int UDP_GRO = 104;  // since 5.0
#endif
#ifndef UDP_NO_CHECK6_TX
constexpr int UDP_NO_CHECK6_TX = 101;  // linux/udp.h
constexpr int UDP_NO_CHECK6_RX = 102;
#endif

}  // namespace uroce::net
