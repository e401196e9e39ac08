// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/engine/source_ports.h"

#include <cerrno>
#include <cstring>

namespace uroce::emu {

SourcePorts::Slot& SourcePorts::slot(uint16_t port, uint16_t local) {
    while (slots_.size() <= local) slots_.emplace_back(net::kRoceSportCount);
    return slots_[local][port - net::kRoceSportMin];
}

net::TxSource SourcePorts::acquire(uint16_t port, uint16_t local) {
    const net::TxSource device{device_port_, io_.local_sender(local), local};
    if (port < net::kRoceSportMin || port == device_port_) return device;
    Slot& k = slot(port, local);
    if (k.users++) return k.sock ? net::TxSource{port, k.sock, local} : device;
    int r = io_.senders_open() < kMaxSockets ? io_.open_sender(port, local) : -EMFILE;
    if (r > 0) {
        k.sock = uint16_t(r);
        return {port, k.sock, local};
    }
    // Every QP on this port sends from the device's until the last lets go: one port, one
    // socket, whoever asks.
    k.sock = 0;
    ++fallbacks_;
    last_errno_ = -r;
    return device;
}

void SourcePorts::release(uint16_t port, uint16_t local) {
    if (port < net::kRoceSportMin || port == device_port_ || local >= slots_.size()) return;
    Slot& k = slot(port, local);
    if (!k.users || --k.users) return;
    if (k.sock) io_.close_sender(k.sock);
    k.sock = 0;
}

bool SourcePorts::lookup(uint16_t port, uint16_t local, net::TxSource* s) const {
    if (local >= io_.locals()) return false;
    if (port == device_port_) {
        *s = {device_port_, io_.local_sender(local), local};
        return true;
    }
    if (port < net::kRoceSportMin || local >= slots_.size() || !slot(port, local).users ||
        !slot(port, local).sock)
        return false;
    *s = {port, slot(port, local).sock, local};
    return true;
}

std::string SourcePorts::line() const {
    uint32_t ports = 0;
    for (const auto& v : slots_)
        for (const Slot& k : v) ports += k.users != 0;
    std::string why =
        last_errno_ && strerrorname_np(last_errno_) ? strerrorname_np(last_errno_) : "-";
    return "counters_sport ports " + std::to_string(ports) + " sockets " +
           std::to_string(io_.senders_open()) + " fallbacks " + std::to_string(fallbacks_) +
           " last_error " + why + "\n";
}

}  // namespace uroce::emu
