// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm over uroce, CM ids and addresses: creating and destroying ids, binding, address
// and route resolution (which device an address belongs to, the path record), options.
// docs/cm.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

// ---- ids -----------------------------------------------------------------------------------

void register_key(uint32_t tag, uint32_t handle, Id* id) {
    std::lock_guard<std::mutex> g(g_mu);
    g_ids[key(tag, handle)] = id;
}

Id* new_id(Channel* chan, void* context, rdma_port_space ps, ibv_qp_type qp_type) {
    auto* id = new Id();
    std::memset(&id->id, 0, sizeof id->id);
    if (!chan) {
        chan = new_channel(0);
        if (!chan) {
            delete id;
            return nullptr;
        }
        id->sync = true;
    }
    id->chan = chan;
    id->id.channel = &chan->ch;
    id->id.context = context;
    id->id.ps = ps;
    id->id.qp_type = qp_type;
    // The starting PSN of our send queue, fixed for the id's life (the kernel's CMA picks
    // its seq_num when the id is created): rdma_init_qp_attr may hand it out (RTS) before
    // rdma_connect or rdma_accept put it into the REQ or REP.
    id->local_psn = random_psn();
    std::lock_guard<std::mutex> g(g_mu);
    id->lid = g_next_lid++;
    g_ids[key(kLocalTag, id->lid)] = id;
    return id;
}

uint16_t port_of(const sockaddr* sa) {
    if (!sa) return 0;
    if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
    if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
    return 0;
}

socklen_t addr_len(const sockaddr* sa) {
    if (!sa) return 0;
    if (sa->sa_family == AF_INET) return sizeof(sockaddr_in);
    if (sa->sa_family == AF_INET6) return sizeof(sockaddr_in6);
    return 0;
}

// The port of a bound address, whichever family it was given in (network order).
void set_port(sockaddr_storage* ss, uint16_t port) {
    if (ss->ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = port;
    else
        reinterpret_cast<sockaddr_in*>(ss)->sin_port = port;
}

void set_gid(const net::Endpoint& a, ibv_gid* gid) { a.gid(gid->raw); }
void v4_gid(uint32_t ip, ibv_gid* gid) { set_gid(net::Endpoint::ipv4(ip, 0), gid); }

// The GID-table index of the id's source GID (its device may have several addresses); 0 when
// it is in none, as for a device of one address.
uint8_t sgid_index(const Id* id) {
    const ibv_gid& want = id->id.route.addr.addr.ibaddr.sgid;
    ibv_gid g;
    for (int i = 0; id->id.verbs && i < 256 && ibv_query_gid(id->id.verbs, 1, i, &g) == 0; ++i)
        if (std::memcmp(g.raw, want.raw, 16) == 0) return uint8_t(i);
    return 0;
}

net::Endpoint on_dev(const uint8_t* addr16, const DevConn* d) {
    return from_addr16(addr16, d && d->addr.is_v6() ? d->addr.v6.sin6_scope_id : 0);
}

// The id now lives on device d: its verbs context, default PD and port.
void attach(Id* id, DevConn* d) {
    id->dev = d;
    id->id.verbs = d->verbs;
    if (!id->id.pd) id->id.pd = d->pd;
    id->id.port_num = 1;
    id->mtu = d->mtu;
    set_gid(d->addr, &id->id.route.addr.addr.ibaddr.sgid);
    id->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
}

// The path record: the GIDs are the two addresses (IPv6 ones, or IPv4-mapped).
void set_path(Id* id, const net::Endpoint& local, const net::Endpoint& remote) {
    auto* p = id->id.route.path_rec;
    if (!p) p = static_cast<ibv_sa_path_rec*>(calloc(1, sizeof *p));
    if (!p) return;
    std::memset(p, 0, sizeof *p);
    set_gid(remote, &p->dgid);
    set_gid(local, &p->sgid);
    p->hop_limit = kHopLimit;
    p->traffic_class = id->tos;
    p->reversible = 1;
    p->numb_path = 1;
    p->pkey = htobe16(0xffff);
    p->mtu_selector = 2;
    p->mtu = id->mtu;
    p->rate_selector = 2;
    p->rate = kRate;
    p->packet_life_time_selector = 2;
    p->packet_life_time = kPacketLifeTime;
    id->id.route.path_rec = p;
    id->id.route.num_paths = 1;
}

// The kernel's afonly for a wildcard bound in `family`: RDMA_OPTION_ID_AFONLY if set, else
// always for AF_INET and the namespace's net.ipv6.bindv6only (0 by default) for AF_INET6.
bool effective_afonly(const Id* id) {
    if (id->afonly >= 0) return id->afonly != 0;
    if (id->bind_family != AF_INET6) return true;
    int v = 0;
    if (FILE* f = fopen("/proc/sys/net/ipv6/bindv6only", "r")) {
        if (fscanf(f, "%d", &v) != 1) v = 0;
        fclose(f);
    }
    return v != 0;
}

// The device's CM id for id on d: bound to addr (nullptr: the wildcard of the id's bind
// family) and port (network order; 0: the device picks); *resp has its handle and port.
int bind_request(Id* id, DevConn* d, const net::Endpoint* addr, uint16_t port, abi::CmResp* resp) {
    if (int e = ensure_open(*d)) return e;
    if (int e = ensure_channel(id->chan, d)) return e;
    abi::CmReq r = cm_req(abi::CmOp::kBind);
    r.channel = id->chan->id;
    r.ps = id->id.ps;
    r.qp_type = id->id.qp_type;
    if (addr) addr->gid(r.local_addr);
    r.family = uint8_t(id->bind_family ? id->bind_family : AF_INET);
    r.afonly = effective_afonly(id);
    r.local_port = port;
    return cm_call(*d, r, resp);
}

// Binds the id on device d (the device's CM id is created here) to its address, or with
// addr nullptr to the wildcard (a listener of the id's bind family).
int bind_on(Id* id, DevConn* d, const net::Endpoint* addr, uint16_t port) {
    abi::CmResp resp{};
    if (int e = bind_request(id, d, addr, port, &resp)) return e;
    id->handle = resp.handle;
    id->port = resp.port;
    register_key(d->tag, resp.handle, id);
    attach(id, d);
    return 0;
}

// An ephemeral port (network order) from the kernel's default ip_local_port_range.
uint16_t random_port() {
    static thread_local std::mt19937 rng{std::random_device{}()};
    return htons(uint16_t(32768 + rng() % (60999 - 32768 + 1)));
}

// 127.0.0.0/8.
bool is_loopback(const net::Endpoint& a) { return !a.is_v6() && (ntohl(a.v4_be()) >> 24) == 127; }

// Is a an address of this host (on its interface, for a link-local one)? bind() of a UDP
// socket answers it.
bool local_address(const net::Endpoint& a) {
    int s = socket(a.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    net::Endpoint e = a;
    e.set_port(0);
    bool ok = ::bind(s, &e.sa, e.len()) == 0 || errno == EADDRINUSE;
    close(s);
    return ok;
}

// The device that reaches dst: the one on dst itself (loopback on one device), else the one
// on the source address the host routes dst from (a link-local dst: through its interface).
// nullptr with *why set when there is none.
DevConn* route_dev(const net::Endpoint& dst, int* why) {
    if (DevConn* d = dev_by_addr(dst)) return d;
    int s = socket(dst.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *why = errno;
        return nullptr;
    }
    net::Endpoint to = dst;
    to.set_port(4791);
    net::Endpoint src;
    socklen_t len = sizeof src.v6;
    if (connect(s, &to.sa, to.len()) != 0 || getsockname(s, &src.sa, &len) != 0) {
        *why = errno;
        close(s);
        return nullptr;
    }
    close(s);
    if (DevConn* d = dev_by_addr(src)) return d;
    *why = ENODEV;
    return nullptr;
}

// UROCE_RDMACM_SRC_ADDR: the source address rdma_resolve_addr uses when the application
// names none, as if the process ran on a host with that address (docs/cm.md): it lets a
// program with no source option use one of several devices on this host. IPv4 or IPv6
// (a link-local one as fe80::1%eth0).
bool default_source(sockaddr_storage* sa) {
    const char* s = std::getenv("UROCE_RDMACM_SRC_ADDR");
    net::Endpoint e;
    if (!s || !*s || !net::parse_address(s, 0, &e)) return false;
    to_sockaddr(e, 0, sa);
    return true;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

// ---- ids -----------------------------------------------------------------------------------

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
    if (!id) return fail(EINVAL);
    if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB)
        return fail(EINVAL);
    if (!sync_devices()) return fail(ENODEV);
    ibv_qp_type qt = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
    Id* i = new_id(channel ? chan_of(channel) : nullptr, context, ps, qt);
    if (!i) return fail(ENOMEM);
    *id = &i->id;
    return 0;
}

int rdma_destroy_id(rdma_cm_id* idp) {
    if (!idp) return fail(EINVAL);
    Id* id = id_of(idp);
    std::vector<std::pair<DevConn*, uint32_t>> handles;
    {
        // Out of g_ids under g_listen_mu: no device started now adds a listen to it.
        std::lock_guard<std::mutex> lg(g_listen_mu);
        handles = id->listens;
        if (id->dev && id->handle) handles.emplace_back(id->dev, id->handle);
        std::lock_guard<std::mutex> g(g_mu);
        g_ids.erase(key(kLocalTag, id->lid));
        for (auto& [d, h] : handles) g_ids.erase(key(d->tag, h));
    }
    // The device ends the connection as the protocol requires (REJ, DREQ or DREP).
    for (auto& [d, h] : handles) {
        abi::CmReq r = cm_req(abi::CmOp::kDestroy, h);
        cm_call(*d, r);
    }
    drop_events(id, id->chan);
    if (id->id.event) {
        rdma_ack_cm_event(id->id.event);
        id->id.event = nullptr;
    }
    // As in rdma-core: every event handed out must be acknowledged first.
    {
        std::unique_lock<std::mutex> lk(id->mu);
        id->cv.wait(lk, [&] { return id->completed >= id->reported; });
    }
    if (id->sync) free_channel(id->chan);
    if (id->resolved_ai) rdma_freeaddrinfo(id->resolved_ai);
    free(id->id.route.path_rec);
    delete id->qp_init_attr;
    delete id;
    return 0;
}

int rdma_bind_addr(rdma_cm_id* idp, sockaddr* addr) {
    Id* id = id_of(idp);
    socklen_t len = addr_len(addr);
    IpAddr a;
    if (!len) return fail(EINVAL);
    if (int e = parse_addr(addr, &a)) return fail(e);
    if (id->bound || id->listening) return fail(EINVAL);
    // A link-local address names its interface (the kernel's cma_check_linklocal).
    if (link_local(a.ep) && !a.ep.v6.sin6_scope_id) return fail(EINVAL);
    sync_devices();
    if (!dev_by_addr(a.ep)) a.ep = v4_loopback_for(a.ep);
    uint16_t port = a.ep.is_v6() ? a.ep.v6.sin6_port : a.ep.v4.sin_port;
    // A loopback address no device has is a wildcard, as the kernel's cma_any_addr makes
    // every loopback address one (libfabric binds "localhost" when given no address). A
    // device on a loopback address (127.0.0.2 for a second device on one host) is that
    // device's, as a bind to its address.
    if (a.any || (is_loopback(a.ep) && !dev_by_addr(a.ep))) {
        // Wildcard: no device yet; rdma_listen registers on every device of its family.
        if (port == 0) {
            port = random_port();
            id->any_port = true;
        }
        std::memset(&id->id.route.addr.src_storage, 0, sizeof id->id.route.addr.src_storage);
        std::memcpy(&id->id.route.addr.src_storage, addr, len);
        if (addr->sa_family == AF_INET)
            id->id.route.addr.src_sin.sin_port = port;
        else
            id->id.route.addr.src_sin6.sin6_port = port;
        id->port = port;
        id->bind_family = addr->sa_family;
        id->bound = true;
        return 0;
    }
    DevConn* d = dev_by_addr(a.ep);
    // No device: ENODEV for an address of this host (a link-local one names an interface
    // whose address has no device, the kernel's cma_acquire_dev), else EADDRNOTAVAIL.
    if (!d) return fail(link_local(a.ep) || local_address(a.ep) ? ENODEV : EADDRNOTAVAIL);
    id->bind_family = a.ep.family();
    if (int e = bind_on(id, d, &d->addr, port)) return fail(e);
    to_sockaddr(a.ep, id->port, &id->id.route.addr.src_storage);
    id->bound = true;
    return 0;
}

int rdma_resolve_addr(rdma_cm_id* idp, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
    Id* id = id_of(idp);
    if (!addr_len(dst_addr)) return fail(EINVAL);
    if (src_addr && !addr_len(src_addr)) return fail(EINVAL);
    IpAddr dst;
    if (int e = parse_addr(dst_addr, &dst)) return fail(e);
    if (dst.any) return fail(EAFNOSUPPORT);
    if (id->listening || id->addr_resolved) return fail(EINVAL);
    sync_devices();
    if (!dev_by_addr(dst.ep)) dst.ep = v4_loopback_for(dst.ep);
    sockaddr_storage env_src{};
    if (!src_addr && !id->bound && default_source(&env_src) &&
        (env_src.ss_family == AF_INET6) == dst.ep.is_v6())
        src_addr = reinterpret_cast<sockaddr*>(&env_src);
    if (src_addr && !id->bound) {
        IpAddr src;
        if (int e = parse_addr(src_addr, &src)) return fail(e);
        if (rdma_bind_addr(idp, src_addr)) return -1;
    }
    // The source is of the destination's IP version (the kernel: EINVAL when the bound
    // family is not the destination's; a wildcard's is the family it was given in).
    if (id->bound &&
        (id->dev ? id->dev->addr.is_v6() != dst.ep.is_v6() : id->bind_family != dst.family))
        return fail(EINVAL);
    std::memset(&id->id.route.addr.dst_storage, 0, sizeof id->id.route.addr.dst_storage);
    std::memcpy(&id->id.route.addr.dst_storage, dst_addr, addr_len(dst_addr));
    id->remote = dst.ep;
    id->remote.set_port(0);
    if (!id->dev) {
        int why = ENODEV;
        DevConn* d = route_dev(dst.ep, &why);
        int e = d ? bind_on(id, d, &d->addr, id->port) : why;
        if (e) {
            post_local(id, RDMA_CM_EVENT_ADDR_ERROR, -e);
            return complete(id);
        }
        id->bound = true;
    }
    // A link-local peer is on the device's interface.
    if (link_local(id->remote) && !id->remote.v6.sin6_scope_id)
        id->remote.v6.sin6_scope_id = id->dev->addr.v6.sin6_scope_id;
    to_sockaddr(id->dev->addr, id->port, &id->id.route.addr.src_storage);
    set_gid(id->remote, &id->id.route.addr.addr.ibaddr.dgid);
    id->addr_resolved = true;
    post_local(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    (void)timeout_ms;
    return complete(id);
}

int rdma_resolve_route(rdma_cm_id* idp, int timeout_ms) {
    Id* id = id_of(idp);
    (void)timeout_ms;
    if (!id->addr_resolved || !id->dev) return fail(EINVAL);
    set_path(id, id->dev->addr, id->remote);
    id->route_resolved = true;
    post_local(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    return complete(id);
}

int rdma_set_option(rdma_cm_id* idp, int level, int optname, void* optval, size_t optlen) {
    Id* id = id_of(idp);
    if (!optval) return fail(EINVAL);
    if (level == RDMA_OPTION_ID) {
        switch (optname) {
        case RDMA_OPTION_ID_TOS:
            if (optlen != sizeof(uint8_t)) return fail(EINVAL);
            id->tos = *static_cast<uint8_t*>(optval);
            return 0;
        case RDMA_OPTION_ID_REUSEADDR:
            if (optlen != sizeof(int)) return fail(EINVAL);
            return 0;  // accepted; port reuse rules are the device's (docs/cm.md)
        case RDMA_OPTION_ID_AFONLY:
            // Which families a wildcard listener takes; before it listens or resolves, as
            // the kernel's rdma_set_afonly (idle or bound).
            if (optlen != sizeof(int)) return fail(EINVAL);
            if (id->listening || id->addr_resolved || id->conn_req) return fail(EINVAL);
            id->afonly = *static_cast<int*>(optval) ? 1 : 0;
            return 0;
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (optlen != sizeof(uint8_t)) return fail(EINVAL);
            id->ack_timeout = std::min<uint8_t>(*static_cast<uint8_t*>(optval), 31);
            return 0;
        default: return fail(ENOSYS);
        }
    }
    if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
        // A path from ibacm: RoCE routes come from IP, so the path is taken as given.
        if (optlen % sizeof(ibv_path_data)) return fail(EINVAL);
        if (id->addr_resolved && id->dev) {
            set_path(id, id->dev->addr, id->remote);
            id->route_resolved = true;
            post_local(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
        }
        return 0;
    }
    return fail(ENOSYS);
}

}  // extern "C"
