// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD multicast (docs/multicast.md): ibv_attach_mcast/ibv_detach_mcast and the delivery of a
// packet sent to a group to every QP of this device attached to it. A group with an
// IPv4-mapped GID (::ffff:224.0.0.0/4) is a real IPv4 multicast group: the device joins it on
// its interface with a socket of its own (net/udp_uring.h), so the kernel hands every device
// of the host (and of the link) that joined it a copy, and captures show the group address.
// An IPv6 group (ff00::/8) is joined the same way (MLD) on the interface of the device's IPv6
// address, where it has one.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "emu/engine/counters.h"
#include "emu/engine/transport_env.h"
#include "emu/engine/wire.h"
#include "emu/transport/ud_transport.h"
#include "emu/verbs/mcast_groups.h"
#include "emu/verbs/xrc_domains.h"

namespace uroce::emu {

namespace {

const uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// The kernel's rdma_is_multicast_addr: an IPv6 multicast GID, or an IPv4-mapped one whose
// IPv4 address is multicast.
bool multicast_gid(const uint8_t* gid, uint32_t* ipv4_be) {
    *ipv4_be = 0;
    if (gid[0] == 0xff) return true;
    if (std::memcmp(gid, kV4Prefix, sizeof kV4Prefix) != 0) return false;
    std::memcpy(ipv4_be, gid + 12, 4);
    return net::is_ipv4_multicast(*ipv4_be);
}

}  // namespace

bool McastGroups::member(uint32_t group_be) const {
    for (const McastGroup& g : groups_)
        if (g.ipv4_be == group_be) return true;
    return false;
}

int McastGroups::attach(Session& s, const abi::McastReq& r) {
    Qp* qp = env_.qps.get(r.qpn);
    uint32_t ipv4 = 0;
    // As ib_attach_mcast: UD QPs only, a multicast GID; the LID is ignored on RoCE.
    if (!env_.xrc.holds(s, qp) || qp->type != IBV_QPT_UD || !multicast_gid(r.gid, &ipv4))
        return EINVAL;
    auto g = std::find_if(groups_.begin(), groups_.end(), [&](const McastGroup& x) {
        return std::memcmp(x.gid, r.gid, sizeof x.gid) == 0;
    });
    if (g == groups_.end()) {
        if (groups_.size() >= abi::kMaxMcastGrp) return ENOMEM;
        McastGroup ng;
        std::memcpy(ng.gid, r.gid, sizeof ng.gid);
        ng.ipv4_be = ipv4;
        if (ipv4 || (r.gid[0] == 0xff && env_.wire.io().has_ipv6())) {
            int sock = ipv4 ? env_.wire.io().open_group(ipv4) : env_.wire.io().open_group6(r.gid);
            if (sock < 0) return -sock;
            ng.sock = sock;
        }
        groups_.push_back(std::move(ng));
        g = groups_.end() - 1;
    }
    // Attaching a QP twice is no error and changes nothing (uverbs and rxe).
    for (const auto& m : g->members)
        if (m.qpn == r.qpn) return 0;
    if (g->members.size() >= abi::kMaxMcastQpAttach) return ENOMEM;
    g->members.push_back({r.qpn, r.lid});
    return 0;
}

int McastGroups::detach(Session& s, const abi::McastReq& r) {
    Qp* qp = env_.qps.get(r.qpn);
    uint32_t ipv4;
    if (!env_.xrc.holds(s, qp) || qp->type != IBV_QPT_UD || !multicast_gid(r.gid, &ipv4))
        return EINVAL;
    for (McastGroup& g : groups_) {
        if (std::memcmp(g.gid, r.gid, sizeof g.gid) != 0) continue;
        // uverbs finds the attachment by GID and LID: another LID is not attached.
        auto m = std::find_if(g.members.begin(), g.members.end(),
                              [&](const McastGroup::Member& x) { return x.qpn == r.qpn; });
        if (m == g.members.end() || m->lid != r.lid) return EINVAL;
        g.members.erase(m);
        if (g.members.empty()) {
            env_.wire.io().close_group(g.sock);
            groups_.erase(groups_.begin() + (&g - groups_.data()));
        }
        return 0;
    }
    return EINVAL;
}

void McastGroups::detach_all(uint32_t qpn) {
    for (size_t i = groups_.size(); i-- > 0;) {
        McastGroup& g = groups_[i];
        std::erase_if(g.members, [&](const McastGroup::Member& m) { return m.qpn == qpn; });
        if (g.members.empty()) {
            env_.wire.io().close_group(g.sock);
            groups_.erase(groups_.begin() + ptrdiff_t(i));
        }
    }
}

// A packet that came in on a group socket: one copy for each attached QP, each checked
// (state, Q_Key, a posted receive) as a unicast UD packet to it would be.
void McastGroups::receive(const net::Packet& p, const net::Endpoint& from,
                          const net::Endpoint& group, size_t len) {
    ++env_.counters.mcast_rx_pkts;
    // IBTA 9.6.1.1: a multicast packet names the multicast QP, and only UD sends are one.
    if (p.bth.dqpn != net::kMcastQpn) return env_.counters.drop(net::DropReason::kBadQp);
    if (net::op_info(p.bth.opcode)->cls != net::QpClass::UD)
        return env_.counters.drop(net::DropReason::kOpNotForQp);
    uint8_t gid[16];
    group.gid(gid);
    const McastGroup* g = nullptr;
    for (const McastGroup& x : groups_)
        if (std::memcmp(x.gid, gid, sizeof gid) == 0) g = &x;
    if (!g) return env_.counters.drop(net::DropReason::kNoMcastGroup);
    bool any = false;
    for (const auto& m : g->members) {
        Qp* qp = env_.qps.get(m.qpn);
        if (!qp || qp->owner->dead) continue;
        any = true;
        ++env_.counters.mcast_deliveries;
        ++qp->rx_pkts;
        qp->rx_op.add(p.bth.opcode, len);
        env_.ud.receive(*qp, p, from, group);
    }
    if (!any) env_.counters.drop(net::DropReason::kNoMcastGroup);
}

// "mcast GID ipv4 A.B.C.D qps 0xQPN..." for each group; "counters_mcast ..." totals.
std::string McastGroups::lines() const {
    std::ostringstream o;
    for (const McastGroup& g : groups_) {
        char gid[INET6_ADDRSTRLEN], ip[INET_ADDRSTRLEN] = "-";
        inet_ntop(AF_INET6, g.gid, gid, sizeof gid);
        if (g.ipv4_be) inet_ntop(AF_INET, &g.ipv4_be, ip, sizeof ip);
        o << "mcast " << gid << " ipv4 " << ip << " qps";
        for (const auto& m : g.members) o << " 0x" << std::hex << m.qpn << std::dec;
        o << "\n";
    }
    o << "counters_mcast tx_pkts " << env_.counters.mcast_tx_pkts << " rx_pkts "
      << env_.counters.mcast_rx_pkts << " deliveries " << env_.counters.mcast_deliveries << "\n";
    return o.str();
}

}  // namespace uroce::emu
