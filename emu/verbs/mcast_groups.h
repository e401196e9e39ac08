// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD multicast groups on the device side (docs/multicast.md): ibv_attach_mcast and
// ibv_detach_mcast, and the delivery of a packet sent to a group to every QP of this device
// attached to it. Engine thread only; it reaches the QP table, the group sockets and the UD
// receive path through its Device (a friend of it).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emu/abi/protocol.h"
#include "emu/verbs/objects.h"
#include "net/endpoint.h"
#include "net/headers.h"

namespace uroce::emu {

class Device;

class McastGroups {
public:
    explicit McastGroups(Device& dev) : dev_(dev) {}

    int attach(Session& s, const abi::McastReq& r);
    int detach(Session& s, const abi::McastReq& r);
    void detach_all(uint32_t qpn);  // the QP is being destroyed
    // `group`: the address it was sent to (IPv4 or IPv6).
    void receive(const net::Packet& p, const net::Endpoint& from, const net::Endpoint& group,
                 size_t len);
    bool member(uint32_t group_be) const;
    size_t count() const { return groups_.size(); }
    std::string lines() const;  // the "mcast" lines of Device::dump()

private:
    Device& dev_;
    std::vector<McastGroup> groups_;  // few: looked up by scanning
};

}  // namespace uroce::emu
