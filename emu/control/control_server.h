// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's control plane: application sessions on a Unix SOCK_SEQPACKET socket,
// served with Asio on the daemon's main thread. Each request is executed on the
// engine thread through Device::call; the two threads share no other state.
#pragma once

#include <asio.hpp>
#include <memory>
#include <string>
#include <vector>

#include "emu/engine/device.h"

namespace uroce::emu {

class ControlServer {
public:
    ControlServer(asio::io_context& io, Device& dev) : io_(io), dev_(dev) {}
    // Binds and listens on `path` (mode 0600). Returns 0 or errno.
    int listen(const std::string& path);
    bool shutdown_requested() const { return shutdown_; }

private:
    struct Conn;
    void accept_next();
    void read_next(std::shared_ptr<Conn> c);
    bool serve(Conn& c);  // false: close the connection
    void close_departed();

    asio::io_context& io_;
    Device& dev_;
    std::unique_ptr<asio::posix::stream_descriptor> listener_;
    std::vector<Conn*> conns_;  // every open connection (each kept alive by its read_next)
    bool shutdown_ = false;
};

}  // namespace uroce::emu
