// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm over uroce, UD and multicast: joining and leaving groups (what the kernel's RDMA
// CM does for RoCEv2), the multicast events, the small accessors and ECE. docs/multicast.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

// rdma_join_multicast(_ex): what the kernel's RDMA CM does for RoCEv2 (cma_iboe_join_multicast),
// then rdma-core's wait on a synchronous id. An IPv4 group's GID is the IPv4-mapped address, an
// IPv6 group's the address itself (cma_iboe_set_mgid); the kernel stops there for IPv6 with
// ENOTSUPP, uroce joins it as ibv_attach_mcast does (docs/multicast.md). The QP is attached
// when the application reads the MULTICAST_JOIN event, as rdma-core does.
int join_multicast(Id* id, const sockaddr* addr, socklen_t len, uint16_t flags, void* context) {
    // The id must sit on a device, bound or address-resolved and no further, and be UD.
    if (!id->dev || id->listening || id->route_resolved || id->have_conn || !is_ud(id))
        return fail(EINVAL);
    ibv_gid mgid{};
    if (addr->sa_family == AF_INET) {
        uint32_t ip = reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr;
        if (ip == 0) return fail(EINVAL);  // no SA to assign a group on RoCE
        v4_gid(ip, &mgid);
    } else if (addr->sa_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
        if (IN6_IS_ADDR_UNSPECIFIED(&a)) return fail(EINVAL);
        if (IN6_IS_ADDR_V4MAPPED(&a) && std::memcmp(&a.s6_addr[12], "\0\0\0\0", 4) == 0)
            return fail(EINVAL);
        std::memcpy(mgid.raw, a.s6_addr, 16);
        // RoCEv2 has no path between IP versions: an IPv6 group from an IPv6 source only.
        if (!IN6_IS_ADDR_V4MAPPED(&a) && !id->dev->addr.is_v6()) return fail(EINVAL);
    } else {
        return fail(EINVAL);
    }
    auto mc = std::make_unique<Mcast>();
    std::memcpy(&mc->addr, addr, len);
    mc->addr_len = len;
    mc->mgid = mgid;
    mc->join_flags = flags;
    mc->context = context;
    abi::CmEventRec rec{};
    rec.event = RDMA_CM_EVENT_MULTICAST_JOIN;
    rec.dev_tag = kLocalTag;
    rec.handle = id->lid;
    {
        std::lock_guard<std::mutex> g(id->mu);
        mc->serial = id->next_mcast++;
        rec.new_handle = mc->serial;
        id->mcasts.push_back(std::move(mc));
    }
    write_local(id->chan, rec);
    return complete(id);
}

// The MULTICAST_JOIN event of group `serial`, or nullptr if the id has left it since.
Mcast* take_mcast_event(Id* id, uint32_t serial) {
    std::lock_guard<std::mutex> g(id->mu);
    for (auto& m : id->mcasts)
        if (m->serial == serial) {
            ++m->reported;
            return m.get();
        }
    return nullptr;
}

void fill_mcast(Event* e, const Id* id, const Mcast& mc) {
    rdma_ud_param& u = e->ev.param.ud;
    u.private_data = mc.context;  // rdma-core hands the join's context back here
    u.private_data_len = 0;
    u.ah_attr.is_global = 1;
    u.ah_attr.dlid = mc.mlid;  // no multicast LIDs on RoCE
    u.ah_attr.grh.dgid = mc.mgid;
    u.ah_attr.grh.sgid_index = sgid_index(id);
    u.ah_attr.grh.hop_limit = kHopLimit;  // the kernel's for RoCEv2
    u.ah_attr.port_num = 1;
    u.qp_num = kMcastQpn;
    u.qkey = id->qkey ? id->qkey : RDMA_UDP_QKEY;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

// ---- small accessors, multicast, ECE -----------------------------------------------------

__be16 rdma_get_src_port(rdma_cm_id* id) { return port_of(&id->route.addr.src_addr); }

__be16 rdma_get_dst_port(rdma_cm_id* id) { return port_of(&id->route.addr.dst_addr); }

int rdma_join_multicast(rdma_cm_id* idp, sockaddr* addr, void* context) {
    socklen_t len = addr_len(addr);
    if (!idp || !len) return fail(EINVAL);
    return join_multicast(id_of(idp), addr, len, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

int rdma_join_multicast_ex(rdma_cm_id* idp, rdma_cm_join_mc_attr_ex* attr, void* context) {
    if (!idp || !attr) return fail(EINVAL);
    if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return fail(ENOTSUP);
    if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
    if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
        attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
        return fail(EINVAL);
    socklen_t len = addr_len(attr->addr);
    if (!len) return fail(EINVAL);
    return join_multicast(id_of(idp), attr->addr, len, uint16_t(attr->join_flags), context);
}

// As rdma-core: the group is found by the address bytes given to the join; the QP is
// detached (unless it joined send-only); then wait until its events are acknowledged.
int rdma_leave_multicast(rdma_cm_id* idp, sockaddr* addr) {
    socklen_t len = addr_len(addr);
    if (!idp || !len) return fail(EINVAL);
    Id* id = id_of(idp);
    std::unique_ptr<Mcast> mc;
    {
        std::lock_guard<std::mutex> g(id->mu);
        for (auto it = id->mcasts.begin(); it != id->mcasts.end(); ++it)
            if (std::memcmp(&(*it)->addr, addr, len) == 0) {
                mc = std::move(*it);
                id->mcasts.erase(it);
                break;
            }
    }
    if (!mc) return fail(EADDRNOTAVAIL);
    if (idp->qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
        ibv_detach_mcast(idp->qp, &mc->mgid, mc->mlid);
    // A synchronous id keeps its last event (the join's) until its next call: this is that
    // call. (rdma-core would wait for it forever.)
    if (id->sync && idp->event && reinterpret_cast<Event*>(idp->event)->mc == mc.get()) {
        rdma_ack_cm_event(idp->event);
        idp->event = nullptr;
    }
    std::unique_lock<std::mutex> lk(id->mu);
    id->cv.wait(lk, [&] { return mc->completed >= mc->reported; });
    return 0;
}

// Enhanced Connection Establishment: uroce has no vendor options to negotiate; the local
// value is kept and the remote one reads as "none".
int rdma_set_local_ece(rdma_cm_id* idp, ibv_ece* ece) {
    if (!idp || !ece) return fail(EINVAL);
    id_of(idp)->local_ece = *ece;
    return 0;
}

int rdma_get_remote_ece(rdma_cm_id* idp, ibv_ece* ece) {
    if (!idp || !ece) return fail(EINVAL);
    std::memset(ece, 0, sizeof *ece);
    return 0;
}

}  // extern "C"
