// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// One control message of an application's connection, executed on the device: what
// ControlServer::serve does with a message once it has read it, without the socket, so that
// tests and the control fuzzer (tests/fuzz/fuzz_control.cpp) drive the very same code.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "emu/abi/cm_protocol.h"
#include "emu/abi/protocol.h"
#include "emu/engine/device.h"

namespace uroce::emu {

// Every message is a Request except kCapture's, kFaults' and kCm's, which are larger.
union ControlMsg {
    abi::Request req;
    abi::CaptureReq capture;
    abi::FaultsReq faults;
    abi::CmReq cm;
};

struct ControlConn {
    Session* session = nullptr;  // after kOpen
    pid_t pid = 0;               // the peer's (SO_PEERCRED)
};

struct ControlReply {
    std::string bytes;     // the message to send back
    std::vector<int> fds;  // sent with it; the caller closes them
    std::string log;       // a line for the daemon's log, if any
};

// `msg` holds the `n` bytes received, zero-filled past them; `in_fd` is the fd that came
// with them (or -1), which the caller closes. Not kCapture or kShutdown: they act on the
// daemon (its files, its event loop) and stay in ControlServer. Returns false when the
// connection must close instead (not our protocol); there is no reply then.
bool dispatch_control(Device& dev, ControlConn& c, const ControlMsg& msg, size_t n, int in_fd,
                      ControlReply* out);

}  // namespace uroce::emu
