// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD multicast groups on the device side (docs/multicast.md): ibv_attach_mcast and
// ibv_detach_mcast, and the delivery of a packet sent to a group to every QP of this device
// attached to it. Engine thread only. Of VerbsEnv (emu/verbs/verbs_env.h) it uses the QP
// table, the XRC verbs (who holds a QP), the wire's group sockets, the counters and the UD
// stage's receive path.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emu/abi/protocol.h"
#include "emu/verbs/objects.h"
#include "emu/verbs/verbs_env.h"
#include "net/endpoint.h"
#include "net/headers.h"

namespace uroce::emu {

class McastGroups {
public:
    explicit McastGroups(VerbsEnv& env) : env_(env) {}

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
    VerbsEnv& env_;
    std::vector<McastGroup> groups_;  // few: looked up by scanning
};

}  // namespace uroce::emu
