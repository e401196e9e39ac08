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

bool to_ipv4(const sockaddr* sa, uint32_t* ip, uint16_t* port) {
    if (!sa) return false;
    if (sa->sa_family == AF_INET) {
        auto* s = reinterpret_cast<const sockaddr_in*>(sa);
        *ip = s->sin_addr.s_addr;
        *port = s->sin_port;
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        auto* s = reinterpret_cast<const sockaddr_in6*>(sa);
        const in6_addr& a = s->sin6_addr;
        *port = s->sin6_port;
        if (IN6_IS_ADDR_UNSPECIFIED(&a)) {
            *ip = 0;
            return true;
        }
        if (IN6_IS_ADDR_V4MAPPED(&a)) {
            std::memcpy(ip, &a.s6_addr[12], 4);
            return true;
        }
        if (IN6_IS_ADDR_LOOPBACK(&a)) {
            *ip = htonl(INADDR_LOOPBACK);
            return true;
        }
    }
    return false;
}

socklen_t addr_len(const sockaddr* sa) {
    if (!sa) return 0;
    if (sa->sa_family == AF_INET) return sizeof(sockaddr_in);
    if (sa->sa_family == AF_INET6) return sizeof(sockaddr_in6);
    return 0;
}

void set_sin(sockaddr_storage* ss, uint32_t ip, uint16_t port) {
    std::memset(ss, 0, sizeof *ss);
    auto* s = reinterpret_cast<sockaddr_in*>(ss);
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = ip;
    s->sin_port = port;
}

// The port of a bound address, whichever family it was given in (network order).
void set_port(sockaddr_storage* ss, uint16_t port) {
    if (ss->ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = port;
    else
        reinterpret_cast<sockaddr_in*>(ss)->sin_port = port;
}

void v4_gid(uint32_t ip, ibv_gid* gid) {
    std::memset(gid, 0, sizeof *gid);
    gid->raw[10] = 0xff;
    gid->raw[11] = 0xff;
    std::memcpy(&gid->raw[12], &ip, 4);
}

// The id now lives on device d: its verbs context, default PD and port.
void attach(Id* id, DevConn* d) {
    id->dev = d;
    id->id.verbs = d->verbs;
    if (!id->id.pd) id->id.pd = d->pd;
    id->id.port_num = 1;
    id->mtu = d->mtu;
    v4_gid(d->ipv4, &id->id.route.addr.addr.ibaddr.sgid);
    id->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
}

void set_path(Id* id, uint32_t local_ip, uint32_t remote_ip) {
    auto* p = id->id.route.path_rec;
    if (!p) p = static_cast<ibv_sa_path_rec*>(calloc(1, sizeof *p));
    if (!p) return;
    std::memset(p, 0, sizeof *p);
    v4_gid(remote_ip, &p->dgid);
    v4_gid(local_ip, &p->sgid);
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

// Binds the id on device d (the device's CM id is created here).
int bind_on(Id* id, DevConn* d, uint32_t ip, uint16_t port) {
    if (int e = ensure_open(*d)) return e;
    if (int e = ensure_channel(id->chan, d)) return e;
    abi::CmReq r = cm_req(abi::CmOp::kBind);
    r.channel = id->chan->id;
    r.ps = id->id.ps;
    r.qp_type = id->id.qp_type;
    r.local_ip = ip;
    r.local_port = port;
    abi::CmResp resp{};
    if (int e = cm_call(*d, r, &resp)) return e;
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

// 127.0.0.0/8 (ip in network order).
bool is_loopback(uint32_t ip) { return (ntohl(ip) >> 24) == 127; }

// Is ip an address of this host? (bind() of a UDP socket answers it.)
bool local_address(uint32_t ip) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = ip;
    bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 || errno == EADDRINUSE;
    close(s);
    return ok;
}

// The device that reaches dst: the one on dst itself (loopback on one device), else the one
// on the source address the host routes dst from. nullptr with *why set when there is none.
DevConn* route_dev(uint32_t dst, int* why) {
    if (DevConn* d = dev_by_ip(dst)) return d;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *why = errno;
        return nullptr;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = dst;
    sa.sin_port = htons(4791);
    sockaddr_in src{};
    socklen_t len = sizeof src;
    if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        getsockname(s, reinterpret_cast<sockaddr*>(&src), &len) != 0) {
        *why = errno;
        close(s);
        return nullptr;
    }
    close(s);
    if (DevConn* d = dev_by_ip(src.sin_addr.s_addr)) return d;
    *why = ENODEV;
    return nullptr;
}

// UROCE_RDMACM_SRC_ADDR: the source address rdma_resolve_addr uses when the application
// names none, as if the process ran on a host with that address (docs/cm.md): it lets a
// program with no source option use one of several devices on this host.
bool default_source(sockaddr_in* sa) {
    const char* s = std::getenv("UROCE_RDMACM_SRC_ADDR");
    if (!s || !*s) return false;
    sa->sin_family = AF_INET;
    return inet_pton(AF_INET, s, &sa->sin_addr) == 1;
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
    std::vector<std::pair<DevConn*, uint32_t>> handles = id->listens;
    if (id->dev && id->handle) handles.emplace_back(id->dev, id->handle);
    {
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
    free(id->id.route.path_rec);
    delete id->qp_init_attr;
    delete id;
    return 0;
}

int rdma_bind_addr(rdma_cm_id* idp, sockaddr* addr) {
    Id* id = id_of(idp);
    uint32_t ip;
    uint16_t port;
    socklen_t len = addr_len(addr);
    if (!len) return fail(EINVAL);
    if (!to_ipv4(addr, &ip, &port)) return fail(EAFNOSUPPORT);
    if (id->bound || id->listening) return fail(EINVAL);
    sync_devices();
    // A loopback address no device has is a wildcard, as the kernel's cma_any_addr makes
    // every loopback address one (libfabric binds "localhost" when given no address). A
    // device on a loopback address (127.0.0.2 for a second device on one host) is that
    // device's, as a bind to its address.
    if (ip == 0 || (is_loopback(ip) && !dev_by_ip(ip))) {
        // Wildcard: no device yet; rdma_listen registers on every device.
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
        id->bound = true;
        return 0;
    }
    DevConn* d = dev_by_ip(ip);
    if (!d) return fail(local_address(ip) ? ENODEV : EADDRNOTAVAIL);
    if (int e = bind_on(id, d, ip, port)) return fail(e);
    set_sin(&id->id.route.addr.src_storage, ip, id->port);
    id->bound = true;
    return 0;
}

int rdma_resolve_addr(rdma_cm_id* idp, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
    Id* id = id_of(idp);
    uint32_t dst, sip;
    uint16_t dport, sport;
    if (!addr_len(dst_addr)) return fail(EINVAL);
    if (src_addr && !addr_len(src_addr)) return fail(EINVAL);
    if (!to_ipv4(dst_addr, &dst, &dport) || dst == 0) return fail(EAFNOSUPPORT);
    if (id->listening || id->addr_resolved) return fail(EINVAL);
    sockaddr_in env_src{};
    if (!src_addr && !id->bound && default_source(&env_src))
        src_addr = reinterpret_cast<sockaddr*>(&env_src);
    if (src_addr && !id->bound) {
        if (!to_ipv4(src_addr, &sip, &sport)) return fail(EAFNOSUPPORT);
        if (rdma_bind_addr(idp, src_addr)) return -1;
    }
    std::memset(&id->id.route.addr.dst_storage, 0, sizeof id->id.route.addr.dst_storage);
    std::memcpy(&id->id.route.addr.dst_storage, dst_addr, addr_len(dst_addr));
    id->remote_ip = dst;
    sync_devices();
    if (!id->dev) {
        int why = ENODEV;
        DevConn* d = route_dev(dst, &why);
        int e = d ? bind_on(id, d, d->ipv4, id->port) : why;
        if (e) {
            post_local(id, RDMA_CM_EVENT_ADDR_ERROR, -e);
            return complete(id);
        }
        id->bound = true;
    }
    set_sin(&id->id.route.addr.src_storage, id->dev->ipv4, id->port);
    v4_gid(dst, &id->id.route.addr.addr.ibaddr.dgid);
    id->addr_resolved = true;
    post_local(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    (void)timeout_ms;
    return complete(id);
}

int rdma_resolve_route(rdma_cm_id* idp, int timeout_ms) {
    Id* id = id_of(idp);
    (void)timeout_ms;
    if (!id->addr_resolved || !id->dev) return fail(EINVAL);
    set_path(id, id->dev->ipv4, id->remote_ip);
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
        case RDMA_OPTION_ID_AFONLY:
            if (optlen != sizeof(int)) return fail(EINVAL);
            return 0;  // accepted; port reuse rules are the device's (docs/cm.md)
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
            set_path(id, id->dev->ipv4, id->remote_ip);
            id->route_resolved = true;
            post_local(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
        }
        return 0;
    }
    return fail(ENOSYS);
}

}  // extern "C"
