#include "emu/engine/source_ports.h"

#include <cerrno>
#include <cstring>

namespace uroce::emu {

net::TxSource SourcePorts::acquire(uint16_t port) {
    if (port < net::kRoceSportMin || port == device_port_) return {device_port_, 0};
    Slot& k = slot(port);
    if (k.users++) return k.sock ? net::TxSource{port, k.sock} : net::TxSource{device_port_, 0};
    int r = io_.senders_open() < kMaxSockets ? io_.open_sender(port) : -EMFILE;
    if (r > 0) {
        k.sock = uint16_t(r);
        return {port, k.sock};
    }
    // Every QP on this port sends from the device's until the last lets go: one port, one
    // socket, whoever asks.
    k.sock = 0;
    ++fallbacks_;
    last_errno_ = -r;
    return {device_port_, 0};
}

void SourcePorts::release(uint16_t port) {
    if (port < net::kRoceSportMin || port == device_port_) return;
    Slot& k = slot(port);
    if (!k.users || --k.users) return;
    if (k.sock) io_.close_sender(k.sock);
    k.sock = 0;
}

bool SourcePorts::lookup(uint16_t port, net::TxSource* s) const {
    if (port == device_port_) {
        *s = {device_port_, 0};
        return true;
    }
    if (port < net::kRoceSportMin || !slot(port).users || !slot(port).sock) return false;
    *s = {port, slot(port).sock};
    return true;
}

std::string SourcePorts::line() const {
    uint32_t ports = 0;
    for (const Slot& k : slots_) ports += k.users != 0;
    std::string why =
        last_errno_ && strerrorname_np(last_errno_) ? strerrorname_np(last_errno_) : "-";
    return "counters_sport ports " + std::to_string(ports) + " sockets " +
           std::to_string(io_.senders_open()) + " fallbacks " + std::to_string(fallbacks_) +
           " last_error " + why + "\n";
}

}  // namespace uroce::emu
