// librdmacm over uroce: CM ids, event channels, address and route resolution, connection
// setup and teardown. The IB CM protocol itself runs in the device (emu/cm_agent.cpp); this
// library drives it with CmReq messages on a control connection of its own, moves the QP
// through INIT/RTR/RTS with ibv_modify_qp as rdma-core's librdmacm does, and turns the
// device's event records into rdma_cm_events. docs/cm.md.
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
#include "verbs_api/rdmacm/internal.h"

using namespace uroce;
using namespace uroce::rdmacm;

namespace {

constexpr uint32_t kLocalTag = 0xffffffff;  // dev_tag of events the library writes itself
constexpr uint8_t kHopLimit = 64;
constexpr uint8_t kPacketLifeTime = 16;  // as the kernel's RDMA CM reports for RoCE
constexpr uint8_t kRate = 16;            // 100 Gb/s (IB rate enum), what the port reports
// An application's event channel may collect many events before it reads (a listener's
// connection requests): room for about 3,000. A synchronous id's own channel holds its one
// pending event, so the default pipe does.
constexpr int kChannelPipeBytes = 1 << 20;

// The tables live as long as the process (never destroyed, so no exit-time destruction
// races a thread still in the library): devices keep their verbs context, PD and control
// connection open until the process ends, as rdma-core keeps its cma_devices.
std::mutex g_mu;  // the tables below
auto& g_devs = *new std::vector<std::unique_ptr<DevConn>>();
auto& g_ids = *new std::map<uint64_t, Id*>();  // (dev_tag, handle) -> id; (kLocalTag, lid) too
uint32_t g_next_lid = 1;
std::atomic<uint32_t> g_next_chan{1};
std::mutex g_chan_mu;  // ensure_channel

uint64_t key(uint32_t tag, uint32_t handle) { return (uint64_t(tag) << 32) | handle; }

int fail(int e) {
    errno = e;
    return -1;
}

uint32_t random_psn() {
    static std::mutex mu;
    static std::mt19937 rng{std::random_device{}()};
    std::lock_guard<std::mutex> g(mu);
    return rng() & 0xffffff;
}

// ---- devices -------------------------------------------------------------------------------

DevConn* dev_by_tag(uint32_t tag) {
    std::lock_guard<std::mutex> g(g_mu);
    return tag < g_devs.size() ? g_devs[tag].get() : nullptr;
}

// A device entry ids can be placed on: running, as far as we know.
bool usable(const DevConn& d) { return d.ibdev && !d.gone; }

DevConn* dev_by_ip(uint32_t ip) {
    std::lock_guard<std::mutex> g(g_mu);
    for (auto& d : g_devs)
        if (d->ipv4 == ip && usable(*d)) return d.get();
    return nullptr;
}

std::vector<DevConn*> all_devs() {
    std::lock_guard<std::mutex> g(g_mu);
    std::vector<DevConn*> v;
    for (auto& d : g_devs)
        if (usable(*d)) v.push_back(d.get());
    return v;
}

int ensure_open(DevConn& d) {
    std::lock_guard<std::mutex> g(d.open_mu);
    if (d.gone) return ENODEV;
    if (d.open) return 0;
    if (!d.verbs) {
        d.verbs = ibv_open_device(d.ibdev);
        if (!d.verbs) return errno ? errno : ENODEV;
    }
    if (!d.pd) {
        d.pd = ibv_alloc_pd(d.verbs);
        if (!d.pd) return errno ? errno : ENOMEM;
    }
    int sock = abi::connect_device(d.name);
    if (sock < 0) return -sock == ENOENT || -sock == ECONNREFUSED ? ENODEV : -sock;
    abi::Request req{};
    req.op = abi::Op::kOpen;
    req.u.open.version = abi::kProtocolVersion;
    req.u.open.pid = getpid();
    abi::Response resp{};
    int fds[abi::kMaxFds], nfds = 0;
    int err = abi::transact(sock, req, &resp, fds, &nfds);
    if (!err) err = resp.err;
    if (err) {
        for (int i = 0; i < nfds; ++i) close(fds[i]);
        close(sock);
        return err;
    }
    // The session's doorbell and async pipe stay open (and unused) while we are connected.
    for (int i = 0; i < nfds && i < 2; ++i) d.session_fds[i] = fds[i];
    for (int i = 2; i < nfds; ++i) close(fds[i]);
    // Paths from this device get the port's active MTU (the kernel's cma takes the
    // netdev's, iboe_get_mtu), which the device derives from its interface.
    ibv_port_attr pa{};
    d.mtu = ibv_query_port(d.verbs, 1, &pa) == 0 ? pa.active_mtu : IBV_MTU_1024;
    d.sock = sock;
    d.open = true;
    watch_device(&d);
    return 0;
}

// The device's XRC domain for XRC QPs and SRQs made through the CM (rdma-core's
// ucma_get_xrcd): one per device, private (no file), open for the life of the process.
ibv_xrcd* dev_xrcd(DevConn& d) {
    std::lock_guard<std::mutex> g(d.open_mu);
    if (!d.xrcd && d.verbs) {
        ibv_xrcd_init_attr a{};
        a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        a.fd = -1;
        a.oflags = O_CREAT;
        d.xrcd = ibv_open_xrcd(d.verbs, &a);
    } else if (!d.verbs) {
        errno = ENODEV;
    }
    return d.xrcd;
}

// One CM request on the device's control connection. Returns 0 or a positive errno.
// fd_in (>= 0) travels with the request (kChannel's write end). Returns 0 or a positive errno.
int cm_call(DevConn& d, abi::CmReq& r, abi::CmResp* out = nullptr, int fd_in = -1) {
    if (int e = ensure_open(d)) return e;
    r.op = abi::Op::kCm;
    std::lock_guard<std::mutex> g(d.mu);
    ssize_t n = abi::send_message(d.sock, &r, sizeof r, fd_in);
    if (n != ssize_t(sizeof r)) return n < 0 ? errno : EPROTO;
    abi::CmResp resp{};
    do {
        n = recv(d.sock, &resp, sizeof resp, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    if (n < ssize_t(sizeof resp)) return ENODEV;  // the device went away
    if (out) *out = resp;
    return resp.err;
}

abi::CmReq cm_req(abi::CmOp op, uint32_t handle = 0) {
    abi::CmReq r{};
    r.cm_op = op;
    r.handle = handle;
    return r;
}

// ---- channels ------------------------------------------------------------------------------

// pipe_size: room for events nobody has read yet (best effort; the user's pipe quota may
// refuse it, then the pipe keeps the default 64 KiB).
Channel* new_channel(int pipe_size) {
    auto* c = new Channel();
    c->id = g_next_chan++;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        int e = errno;
        delete c;
        errno = e;
        return nullptr;
    }
    c->ch.fd = p[0];
    c->wr = p[1];
    c->rd = fcntl(p[0], F_DUPFD_CLOEXEC, 0);
    if (c->rd < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        delete c;
        errno = e;
        return nullptr;
    }
    fcntl(c->wr, F_SETFL, O_NONBLOCK);
    if (pipe_size > 0) fcntl(c->wr, F_SETPIPE_SZ, pipe_size);
    return c;
}

void unref_channel(Channel* c) {
    if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    close(c->rd);
    close(c->wr);
    delete c;
}

// The application's end of the channel: the devices drop their write ends and ch.fd closes.
// The Channel itself goes with its last reference (unref_channel).
void free_channel(Channel* c) {
    std::set<DevConn*> devs;
    {
        std::lock_guard<std::mutex> g(g_mu);
        devs.swap(c->devs);
    }
    for (DevConn* d : devs) {
        abi::CmReq r = cm_req(abi::CmOp::kChannelClose);
        r.channel = c->id;
        cm_call(*d, r);
    }
    close(c->ch.fd);
    unref_channel(c);
}

// Makes sure device d holds channel c's write end and stamps c's events with d's tag.
int ensure_channel(Channel* c, DevConn* d) {
    std::lock_guard<std::mutex> cg(g_chan_mu);
    {
        std::lock_guard<std::mutex> g(g_mu);
        if (c->devs.count(d)) return 0;
    }
    abi::CmReq r = cm_req(abi::CmOp::kChannel);
    r.channel = c->id;
    r.dev_tag = d->tag;
    if (int e = cm_call(*d, r, nullptr, c->wr)) return e;
    std::lock_guard<std::mutex> g(g_mu);
    c->devs.insert(d);
    return 0;
}

void write_local(Channel* c, const abi::CmEventRec& rec) {
    if (write(c->wr, &rec, sizeof rec) < 0) {
        // A full pipe: the application has left a megabyte of events unread.
    }
}

void post_local(Id* id, rdma_cm_event_type type, int status) {
    abi::CmEventRec rec{};
    rec.event = type;
    rec.status = status;
    rec.dev_tag = kLocalTag;
    rec.handle = id->lid;
    write_local(id->chan, rec);
}

// Reads one event record from the channel. 0 or an errno (EAGAIN: non-blocking and empty).
// Every writer writes whole records of at most PIPE_BUF bytes, which a pipe keeps whole.
int read_record(Channel* c, abi::CmEventRec* rec) {
    for (;;) {
        ssize_t r = read(c->rd, rec, sizeof *rec);
        if (r == ssize_t(sizeof *rec)) return 0;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        return EPROTO;  // cannot happen while c->wr is open: no writer writes part of a record
    }
}

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

// ---- QP transitions ------------------------------------------------------------------------

int modify_to(Id* id, ibv_qp_state st, uint8_t resp_res, uint8_t init_depth) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = st;
    if (rdma_init_qp_attr(&id->id, &a, &mask)) return errno;
    if (st == IBV_QPS_RTR && resp_res != RDMA_MAX_RESP_RES) a.max_dest_rd_atomic = resp_res;
    if (st == IBV_QPS_RTS && init_depth != RDMA_MAX_INIT_DEPTH) a.max_rd_atomic = init_depth;
    return ibv_modify_qp(id->id.qp, &a, mask);
}

int modify_rtr(Id* id, uint8_t resp_res) {
    if (!id->id.qp) return 0;
    // INIT again first: the access flags depend on what the peer agreed to.
    if (int e = modify_to(id, IBV_QPS_INIT, resp_res, RDMA_MAX_INIT_DEPTH)) return e;
    return modify_to(id, IBV_QPS_RTR, resp_res, RDMA_MAX_INIT_DEPTH);
}

int modify_rts(Id* id, uint8_t init_depth) {
    if (!id->id.qp) return 0;
    return modify_to(id, IBV_QPS_RTS, RDMA_MAX_RESP_RES, init_depth);
}

int modify_err(Id* id) {
    if (!id->id.qp) return 0;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    return ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

int init_ud_qp(Id* id, ibv_qp* qp) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_INIT;
    if (rdma_init_qp_attr(&id->id, &a, &mask)) return errno;
    if (int e = ibv_modify_qp(qp, &a, mask)) return e;
    std::memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    if (int e = ibv_modify_qp(qp, &a, IBV_QP_STATE)) return e;
    std::memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int init_conn_qp(Id* id, ibv_qp* qp) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_INIT;
    if (rdma_init_qp_attr(&id->id, &a, &mask)) return errno;
    return ibv_modify_qp(qp, &a, mask);
}

// rdma-core's ucma_complete: a call on a synchronous id waits for its event.
int complete(Id* id) {
    if (!id->sync) return 0;
    if (id->id.event) {
        rdma_ack_cm_event(id->id.event);
        id->id.event = nullptr;
    }
    if (rdma_get_cm_event(id->id.channel, &id->id.event)) return -1;
    int st = id->id.event->status;
    if (!st) return 0;
    if (id->id.event->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(st < 0 ? -st : st);
}

void fill_ud(Event* e, Id* id, const abi::CmEventRec& rec) {
    rdma_ud_param& u = e->ev.param.ud;
    u.private_data_len = rec.private_data_len;
    if (rec.private_data_len) {
        std::memcpy(e->private_data, rec.private_data, rec.private_data_len);
        u.private_data = e->private_data;
    }
    u.ah_attr.is_global = 1;
    v4_gid(rec.remote_ip, &u.ah_attr.grh.dgid);
    u.ah_attr.grh.sgid_index = 0;
    u.ah_attr.grh.hop_limit = kHopLimit;
    u.ah_attr.grh.traffic_class = id->tos;
    u.ah_attr.port_num = 1;
    u.qp_num = rec.remote_qpn;
    u.qkey = rec.qkey;
}

void fill_conn(Event* e, const abi::CmEventRec& rec) {
    rdma_conn_param& c = e->ev.param.conn;
    c.private_data_len = rec.private_data_len;
    if (rec.private_data_len) {
        std::memcpy(e->private_data, rec.private_data, rec.private_data_len);
        c.private_data = e->private_data;
    }
    c.responder_resources = rec.responder_resources;
    c.initiator_depth = rec.initiator_depth;
    c.flow_control = rec.flow_control;
    c.retry_count = rec.retry_count;
    c.rnr_retry_count = rec.rnr_retry_count;
    c.srq = rec.srq;
    c.qp_num = rec.remote_qpn;
}

bool is_ud(const Id* id) { return id->id.qp_type == IBV_QPT_UD; }

// A connection request: the new id, on the listener's channel (or a synchronous one of its
// own when the listener is synchronous, as rdma-core does).
Id* make_child(Id* l, const abi::CmEventRec& rec) {
    DevConn* d = dev_by_tag(rec.dev_tag);
    if (!d) return nullptr;
    Id* c = new_id(l->chan, l->id.context, l->id.ps, l->id.qp_type);
    if (!c) return nullptr;
    c->handle = rec.new_handle;
    c->bound = true;
    c->conn_req = true;
    c->have_conn = true;
    c->port = rec.local_port;
    set_sin(&c->id.route.addr.src_storage, rec.local_ip, rec.local_port);
    set_sin(&c->id.route.addr.dst_storage, rec.remote_ip, rec.remote_port);
    c->id.pd = nullptr;
    attach(c, d);
    c->mtu = std::min<uint8_t>(rec.mtu ? rec.mtu : uint8_t(IBV_MTU_1024), d->mtu);
    v4_gid(rec.remote_ip, &c->id.route.addr.addr.ibaddr.dgid);
    set_path(c, rec.local_ip, rec.remote_ip);
    c->remote_ip = rec.remote_ip;
    c->remote_qpn = rec.remote_qpn;
    c->remote_psn = rec.remote_psn;
    c->resp_res = rec.responder_resources;
    c->init_depth = rec.initiator_depth;
    c->retry_count = rec.retry_count;
    c->rnr_retry_count = rec.rnr_retry_count;
    c->addr_resolved = c->route_resolved = true;
    register_key(d->tag, c->handle, c);
    if (l->sync) {
        // rdma_migrate_id(child, NULL): its own synchronous channel.
        Channel* nc = new_channel(0);
        int e = nc ? ensure_channel(nc, d) : ENOMEM;
        if (!e) {
            abi::CmReq r = cm_req(abi::CmOp::kMigrate, c->handle);
            r.channel = nc->id;
            e = cm_call(*d, r);
        }
        if (e) {
            if (nc) free_channel(nc);
            rdma_destroy_id(&c->id);
            return nullptr;
        }
        c->chan = nc;
        c->id.channel = &nc->ch;
        c->sync = true;
    }
    return c;
}

int establish(Id* id) {
    abi::CmReq r = cm_req(abi::CmOp::kEstablish, id->handle);
    return cm_call(*id->dev, r);
}

// ---- multicast (docs/multicast.md) ----------------------------------------------------------

constexpr uint32_t kMcastQpn = 0xffffff;

// rdma_join_multicast(_ex): what the kernel's RDMA CM does for RoCEv2 (cma_iboe_join_multicast),
// then rdma-core's wait on a synchronous id. The group's GID is the IPv4-mapped address; the
// QP is attached when the application reads the MULTICAST_JOIN event, as rdma-core does.
int join_multicast(Id* id, const sockaddr* addr, socklen_t len, uint16_t flags, void* context) {
    // The id must sit on a device, bound or address-resolved and no further, and be UD.
    if (!id->dev || id->listening || id->route_resolved || id->have_conn || !is_ud(id))
        return fail(EINVAL);
    uint32_t ip = 0;
    if (addr->sa_family == AF_INET) {
        ip = reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr;
    } else if (addr->sa_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
        if (!IN6_IS_ADDR_UNSPECIFIED(&a) && !IN6_IS_ADDR_V4MAPPED(&a))
            return fail(EOPNOTSUPP);  // an IPv6 group: RoCEv2 over IPv6 is not supported
        std::memcpy(&ip, &a.s6_addr[12], 4);
    } else {
        return fail(EINVAL);
    }
    if (ip == 0) return fail(EINVAL);  // no SA to assign a group on RoCE
    auto mc = std::make_unique<Mcast>();
    std::memcpy(&mc->addr, addr, len);
    mc->addr_len = len;
    v4_gid(ip, &mc->mgid);
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
    u.ah_attr.grh.sgid_index = 0;
    u.ah_attr.grh.hop_limit = kHopLimit;  // the kernel's for RoCEv2 over IPv4
    u.ah_attr.port_num = 1;
    u.qp_num = kMcastQpn;
    u.qkey = id->qkey ? id->qkey : RDMA_UDP_QKEY;
}

}  // namespace

namespace uroce::rdmacm {

bool sync_devices() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);  // starts the default device if none runs
    auto infos = abi::list_devices();
    std::lock_guard<std::mutex> g(g_mu);
    for (auto& info : infos) {
        ibv_device* dev = nullptr;
        for (int i = 0; list && i < n; ++i)
            if (info.name == ibv_get_device_name(list[i])) dev = list[i];
        DevConn* known = nullptr;  // a device that went away is not the one running now
        for (auto& d : g_devs)
            if (d->name == info.name && !d->gone) known = d.get();
        if (known) {
            if (!known->ibdev) known->ibdev = dev;
            continue;
        }
        auto d = std::make_unique<DevConn>();
        d->name = info.name;
        inet_pton(AF_INET, info.addr.c_str(), &d->ipv4);
        d->ibdev = dev;
        d->tag = uint32_t(g_devs.size());
        g_devs.push_back(std::move(d));
    }
    // Our libibverbs keeps every ibv_device for the life of the process, so the pointers
    // stay valid after the list is freed.
    if (list) ibv_free_device_list(list);
    for (auto& d : g_devs)
        if (usable(*d)) return true;
    return false;
}

// Every id on d gets RDMA_CM_EVENT_DEVICE_REMOVAL, as the kernel's RDMA CM sends when a
// device is removed; the application then destroys them (which still succeeds). A wildcard
// listener is not told: it goes on listening on the other devices, as the kernel's does.
void device_gone(DevConn* d) {
    std::lock_guard<std::mutex> g(g_mu);  // no id is destroyed while we post to it
    d->gone = true;
    for (auto& [k, id] : g_ids) {
        if ((k >> 32) != kLocalTag || id->dev != d) continue;
        std::lock_guard<std::mutex> l(id->mu);  // rdma_migrate_id may be moving it
        post_local(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
    }
}

}  // namespace uroce::rdmacm

extern "C" {

// ---- devices and channels ------------------------------------------------------------------

ibv_context** rdma_get_devices(int* num_devices) {
    if (num_devices) *num_devices = 0;
    sync_devices();
    std::vector<ibv_context*> ctxs;
    for (DevConn* d : all_devs())
        if (!ensure_open(*d)) ctxs.push_back(d->verbs);
    auto** list = static_cast<ibv_context**>(calloc(ctxs.size() + 1, sizeof(ibv_context*)));
    if (!list) {
        errno = ENOMEM;
        return nullptr;
    }
    for (size_t i = 0; i < ctxs.size(); ++i) list[i] = ctxs[i];
    if (num_devices) *num_devices = int(ctxs.size());
    return list;
}

void rdma_free_devices(ibv_context** list) { free(list); }

rdma_event_channel* rdma_create_event_channel(void) {
    if (!sync_devices()) {
        errno = ENODEV;
        return nullptr;
    }
    Channel* c = new_channel(kChannelPipeBytes);
    return c ? &c->ch : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
    if (channel) free_channel(chan_of(channel));
}

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

int rdma_init_qp_attr(rdma_cm_id* idp, ibv_qp_attr* a, int* mask) {
    Id* id = id_of(idp);
    if (!id->id.verbs || !a || !mask) return fail(EINVAL);
    ibv_qp_state st = a->qp_state;
    std::memset(a, 0, sizeof *a);
    a->qp_state = st;
    switch (st) {
    case IBV_QPS_INIT:
        a->pkey_index = 0;
        a->port_num = 1;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        if (is_ud(id)) {
            a->qkey = RDMA_UDP_QKEY;
            *mask |= IBV_QP_QKEY;
        } else {
            // Before the peer answered: no remote access; after, what the IB CM grants.
            if (id->have_conn) {
                a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
                if (id->resp_res)
                    a->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
            }
            *mask |= IBV_QP_ACCESS_FLAGS;
        }
        return 0;
    case IBV_QPS_RTR:
        *mask = IBV_QP_STATE;
        if (is_ud(id)) return 0;
        if (!id->have_conn) return fail(EINVAL);
        a->path_mtu = ibv_mtu(id->mtu);
        a->dest_qp_num = id->remote_qpn;
        a->rq_psn = id->remote_psn;
        a->ah_attr.is_global = 1;
        v4_gid(id->remote_ip, &a->ah_attr.grh.dgid);
        a->ah_attr.grh.sgid_index = 0;
        a->ah_attr.grh.hop_limit = kHopLimit;
        a->ah_attr.grh.traffic_class = id->tos;
        a->ah_attr.port_num = 1;
        *mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        // Only a QP that answers requests has responder resources and an RNR timer (the
        // kernel's cm_init_qp_rtr_attr: RC and XRC targets, not UC or XRC initiators).
        if (idp->qp_type == IBV_QPT_RC || idp->qp_type == IBV_QPT_XRC_RECV) {
            a->max_dest_rd_atomic = id->resp_res;
            a->min_rnr_timer = 0;
            *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
        return 0;
    case IBV_QPS_RTS:
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (is_ud(id)) {
            a->sq_psn = 0;
            return 0;
        }
        if (!id->have_conn) return fail(EINVAL);
        a->sq_psn = id->local_psn;
        // As the kernel's cm_init_qp_rts_attr: requesters (RC, XRC initiators) get the
        // retry counts and read depth; XRC targets only the ACK timeout; UC neither.
        if (idp->qp_type == IBV_QPT_RC || idp->qp_type == IBV_QPT_XRC_SEND) {
            a->retry_cnt = id->retry_count;
            a->rnr_retry = id->rnr_retry_count;
            a->max_rd_atomic = id->init_depth;
            *mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        if (idp->qp_type != IBV_QPT_UC) {
            a->timeout = id->ack_timeout;
            *mask |= IBV_QP_TIMEOUT;
        }
        return 0;
    default: return fail(EINVAL);
    }
}

// ---- QPs, CQs, SRQs ----------------------------------------------------------------------

static void destroy_cq(ibv_cq** cq, ibv_comp_channel** ch) {
    if (*cq) ibv_destroy_cq(*cq);
    if (*ch) ibv_destroy_comp_channel(*ch);
    *cq = nullptr;
    *ch = nullptr;
}

// The CQs (and channels) the CM made for the id's QP. A receive CQ made for an XRC SRQ
// stays while the SRQ does: it is the SRQ's, and rdma_destroy_srq frees it.
static void destroy_cqs(rdma_cm_id* idp) {
    if (idp->send_cq == idp->recv_cq) idp->send_cq = nullptr;
    if (idp->send_cq_channel == idp->recv_cq_channel) idp->send_cq_channel = nullptr;
    destroy_cq(&idp->send_cq, &idp->send_cq_channel);
    if (!id_of(idp)->srq_cq) destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
}

// CQs (each with its own completion channel) for the queues the caller gave none for, as
// rdma_get_send_comp/rdma_get_recv_comp expect.
static int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
    if (recv_size) {
        id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
        if (!id->recv_cq_channel) goto err;
        id->recv_cq = ibv_create_cq(id->verbs, int(recv_size), id, id->recv_cq_channel, 0);
        if (!id->recv_cq) goto err;
    }
    if (send_size) {
        id->send_cq_channel = ibv_create_comp_channel(id->verbs);
        if (!id->send_cq_channel) goto err;
        id->send_cq = ibv_create_cq(id->verbs, int(send_size), id, id->send_cq_channel, 0);
        if (!id->send_cq) goto err;
    }
    return 0;
err:
    int e = errno;
    if (send_size) destroy_cq(&id->send_cq, &id->send_cq_channel);
    if (recv_size) destroy_cq(&id->recv_cq, &id->recv_cq_channel);
    return e ? e : ENOMEM;
}

int rdma_create_qp_ex(rdma_cm_id* idp, ibv_qp_init_attr_ex* attr) {
    Id* id = id_of(idp);
    if (!attr || idp->qp || !idp->verbs || !id->dev) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
        attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
        attr->pd = idp->pd;
    } else if (attr->pd->context != idp->verbs) {
        return fail(EINVAL);
    }
    if (!attr->pd) return fail(EINVAL);
    if ((idp->recv_cq && attr->recv_cq && idp->recv_cq != attr->recv_cq) ||
        (idp->send_cq && attr->send_cq && idp->send_cq != attr->send_cq))
        return fail(EINVAL);
    // An XRC target QP lives in the device's XRC domain and has no queues of its own: no
    // CQs are made for it (rdma-core makes a receive CQ nobody uses, and leaks it when the
    // XRC SRQ's CQ takes its place in the id); its receives complete on the SRQ's CQ.
    bool tgt = idp->qp_type == IBV_QPT_XRC_RECV;
    if (tgt && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
        attr->xrcd = dev_xrcd(*id->dev);
        if (!attr->xrcd) return -1;
        attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    uint32_t send_size = tgt || attr->send_cq || idp->send_cq ? 0 : attr->cap.max_send_wr;
    uint32_t recv_size = tgt || attr->recv_cq || idp->recv_cq ? 0 : attr->cap.max_recv_wr;
    if (int e = create_cqs(idp, send_size, recv_size)) return fail(e);
    auto undo_cqs = [&] {
        if (send_size) destroy_cq(&idp->send_cq, &idp->send_cq_channel);
        if (recv_size) destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
    };
    if (!tgt) {
        if (!attr->send_cq) attr->send_cq = idp->send_cq;
        if (!attr->recv_cq) attr->recv_cq = idp->recv_cq;
        if (idp->srq && !attr->srq) attr->srq = idp->srq;
    }
    ibv_qp* qp;
    if ((attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD)) == 0) {
        ibv_qp_init_attr ia{};
        ia.qp_context = attr->qp_context;
        ia.send_cq = attr->send_cq;
        ia.recv_cq = attr->recv_cq;
        ia.srq = attr->srq;
        ia.cap = attr->cap;
        ia.qp_type = attr->qp_type;
        ia.sq_sig_all = attr->sq_sig_all;
        qp = ibv_create_qp(attr->pd, &ia);
        if (qp) attr->cap = ia.cap;
    } else {
        qp = ibv_create_qp_ex(idp->verbs, attr);
    }
    if (!qp) {
        int e = errno ? errno : ENOMEM;
        undo_cqs();
        return fail(e);
    }
    int e = is_ud(id) ? init_ud_qp(id, qp) : init_conn_qp(id, qp);
    if (e) {
        ibv_destroy_qp(qp);
        undo_cqs();
        return fail(e);
    }
    if (qp->pd) idp->pd = qp->pd;
    idp->qp = qp;
    return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (!qp_init_attr) return fail(EINVAL);
    ibv_qp_init_attr_ex ax{};
    std::memcpy(&ax, qp_init_attr, sizeof *qp_init_attr);
    ax.comp_mask = IBV_QP_INIT_ATTR_PD;
    ax.pd = pd ? pd : id->pd;
    int r = rdma_create_qp_ex(id, &ax);
    std::memcpy(qp_init_attr, &ax, sizeof *qp_init_attr);
    return r;
}

void rdma_destroy_qp(rdma_cm_id* id) {
    if (id->qp) ibv_destroy_qp(id->qp);
    id->qp = nullptr;
    destroy_cqs(id);
}

// rdma_create_srq(3): the id must be on a device (EINVAL otherwise, as for rdma_create_qp);
// a PD, when given, of that device (EINVAL); NULL: the device's default PD. An XRC SRQ
// without a CQ gets one made here, with its completion channel, in id->recv_cq and
// id->recv_cq_channel (rdma_get_recv_comp's); rdma_destroy_srq frees them. One SRQ per id:
// a second is EINVAL, as a second QP is (rdma-core would replace, and leak, the first).
int rdma_create_srq_ex(rdma_cm_id* idp, ibv_srq_init_attr_ex* attr) {
    Id* id = id_of(idp);
    if (!attr || !idp->verbs || !id->dev || idp->srq) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
        attr->pd = idp->pd;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    } else if (attr->pd->context != idp->verbs) {
        return fail(EINVAL);
    }
    bool made_cq = false;
    if (attr->srq_type == IBV_SRQT_XRC) {
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
            attr->xrcd = dev_xrcd(*id->dev);
            if (!attr->xrcd) return -1;
        }
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
            if (!idp->recv_cq) {
                if (!attr->attr.max_wr) return fail(EINVAL);
                if (int e = create_cqs(idp, 0, attr->attr.max_wr)) return fail(e);
                made_cq = true;
            }
            attr->cq = idp->recv_cq;
        }
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    }
    ibv_srq* srq;
    if (attr->srq_type == IBV_SRQT_BASIC &&
        (attr->comp_mask & ~uint32_t(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD)) == 0) {
        ibv_srq_init_attr sa{};
        sa.srq_context = attr->srq_context;
        sa.attr = attr->attr;
        srq = ibv_create_srq(attr->pd, &sa);
        if (srq) attr->attr = sa.attr;
    } else {
        srq = ibv_create_srq_ex(idp->verbs, attr);
    }
    if (!srq) {
        int e = errno ? errno : ENOMEM;
        if (made_cq) destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
        return fail(e);
    }
    if (!idp->pd) idp->pd = attr->pd;
    idp->srq = srq;
    id->srq_cq = made_cq;
    return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (!attr) return fail(EINVAL);
    ibv_srq_init_attr_ex ax{};
    std::memcpy(&ax, attr, sizeof *attr);
    ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    ax.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
    ax.pd = pd;
    int r = rdma_create_srq_ex(id, &ax);
    std::memcpy(attr, &ax, sizeof *attr);
    return r;
}

// The SRQ, and the CQ and channel rdma_create_srq_ex made for it; the QP's CQs are the
// QP's (rdma_destroy_qp frees them).
void rdma_destroy_srq(rdma_cm_id* idp) {
    if (idp->srq) ibv_destroy_srq(idp->srq);
    idp->srq = nullptr;
    Id* id = id_of(idp);
    if (id->srq_cq) {
        id->srq_cq = false;
        if (idp->send_cq == idp->recv_cq) idp->send_cq = nullptr;
        if (idp->send_cq_channel == idp->recv_cq_channel) idp->send_cq_channel = nullptr;
        destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
    }
}

// ---- connections -------------------------------------------------------------------------

static bool valid_param(Id* id, rdma_conn_param* p) {
    if (id->id.ps != RDMA_PS_TCP) return true;
    if (!id->id.qp && !p) return false;
    if (!p) return true;
    if (p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > abi::kMaxQpRdAtom)
        return false;
    if (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > abi::kMaxQpRdAtom)
        return false;
    return true;
}

int rdma_connect(rdma_cm_id* idp, rdma_conn_param* p) {
    Id* id = id_of(idp);
    if (!valid_param(id, p)) return fail(EINVAL);
    if (!id->route_resolved || !id->dev || id->conn_req || id->listening) return fail(EINVAL);
    size_t max = is_ud(id) ? abi::kCmSidrReqUserPrivate : abi::kCmReqUserPrivate;
    size_t pd_len = id->connect_data.size() + (p && p->private_data ? p->private_data_len : 0);
    if (pd_len > max) return fail(EINVAL);
    id->init_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ? p->initiator_depth
                                                                    : uint8_t(abi::kMaxQpRdAtom);
    id->resp_res = p && p->responder_resources != RDMA_MAX_RESP_RES ? p->responder_resources
                                                                    : uint8_t(abi::kMaxQpRdAtom);
    id->retry_count = p ? p->retry_count & 7 : 7;
    abi::CmReq r = cm_req(abi::CmOp::kConnect, id->handle);
    r.qp_type = idp->qp_type;
    r.remote_ip = id->remote_ip;
    uint16_t dport = 0;
    uint32_t ignored;
    to_ipv4(&idp->route.addr.dst_addr, &ignored, &dport);
    r.remote_port = dport;
    r.qpn = idp->qp ? idp->qp->qp_num : (p ? p->qp_num : 0);
    r.srq = idp->qp ? idp->qp->srq != nullptr : (p ? p->srq : 0);
    r.psn = id->local_psn;
    r.responder_resources = id->resp_res;
    r.initiator_depth = id->init_depth;
    r.flow_control = p ? p->flow_control : 0;
    r.retry_count = id->retry_count;
    r.rnr_retry_count = p ? p->rnr_retry_count & 7 : 7;
    r.mtu = id->mtu;
    r.private_data_len = uint8_t(pd_len);
    if (!id->connect_data.empty())
        std::memcpy(r.private_data, id->connect_data.data(), id->connect_data.size());
    if (p && p->private_data && p->private_data_len)
        std::memcpy(r.private_data + id->connect_data.size(), p->private_data, p->private_data_len);
    if (int e = cm_call(*id->dev, r)) return fail(e);
    id->connect_data.clear();
    return complete(id);
}

int rdma_establish(rdma_cm_id* idp) {
    Id* id = id_of(idp);
    if (idp->qp || !id->have_conn || !id->dev) return fail(EINVAL);
    if (int e = establish(id)) return fail(e);
    return 0;
}

// Binds and listens on id->port on every device (a wildcard listener). On failure nothing
// is left registered and the errno is returned.
static int listen_everywhere(Id* id, int backlog) {
    sync_devices();
    std::vector<DevConn*> devs = all_devs();
    if (devs.empty()) return ENODEV;
    int err = 0;
    for (DevConn* d : devs) {
        if (int e = ensure_open(*d)) {
            if (!err) err = e;
            continue;
        }
        if (int e = ensure_channel(id->chan, d)) {
            err = e;
            break;
        }
        abi::CmReq r = cm_req(abi::CmOp::kBind);
        r.channel = id->chan->id;
        r.ps = id->id.ps;
        r.qp_type = id->id.qp_type;
        r.local_port = id->port;
        abi::CmResp resp{};
        if (int e = cm_call(*d, r, &resp)) {
            err = e;
            break;
        }
        register_key(d->tag, resp.handle, id);
        id->listens.emplace_back(d, resp.handle);
        abi::CmReq l = cm_req(abi::CmOp::kListen, resp.handle);
        l.backlog = backlog;
        if (int e = cm_call(*d, l)) {
            err = e;
            break;
        }
    }
    if (err && (id->listens.empty() || err == EADDRINUSE)) {
        for (auto& [d, h] : id->listens) {
            {
                std::lock_guard<std::mutex> g(g_mu);
                g_ids.erase(key(d->tag, h));
            }
            abi::CmReq r = cm_req(abi::CmOp::kDestroy, h);
            cm_call(*d, r);
        }
        id->listens.clear();
        return err;
    }
    return 0;
}

int rdma_listen(rdma_cm_id* idp, int backlog) {
    Id* id = id_of(idp);
    if (id->listening || id->addr_resolved) return fail(EINVAL);
    if (!id->bound) {
        // rdma-core binds an unbound listener to the IPv4 wildcard.
        sockaddr_in any{};
        any.sin_family = AF_INET;
        if (rdma_bind_addr(idp, reinterpret_cast<sockaddr*>(&any))) return -1;
    }
    if (id->dev) {
        abi::CmReq r = cm_req(abi::CmOp::kListen, id->handle);
        r.backlog = backlog;
        if (int e = cm_call(*id->dev, r)) return fail(e);
        id->listening = true;
        return 0;
    }
    // Wildcard: listen on every device. A port the library picked (bind to port 0) that is
    // taken on some device is picked again, as the kernel finds a port free everywhere.
    int err = listen_everywhere(id, backlog);
    for (int tries = 0; err == EADDRINUSE && id->any_port && tries < 64; ++tries) {
        id->port = random_port();
        set_port(&id->id.route.addr.src_storage, id->port);
        err = listen_everywhere(id, backlog);
    }
    if (err) return fail(err);
    id->listening = true;
    return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** idp) {
    Id* l = id_of(listen);
    if (!l->sync || !idp) return fail(EINVAL);
    if (listen->event) {
        rdma_ack_cm_event(listen->event);
        listen->event = nullptr;
    }
    rdma_cm_event* ev;
    if (rdma_get_cm_event(listen->channel, &ev)) return -1;
    int e = 0;
    if (ev->status) {
        e = ev->status < 0 ? -ev->status : ev->status;
    } else if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        e = EINVAL;
    } else if (l->qp_init_attr) {
        ibv_qp_init_attr attr = *l->qp_init_attr;
        if (rdma_create_qp(ev->id, listen->pd, &attr)) e = errno;
    }
    if (e) {
        listen->event = ev;
        return fail(e);
    }
    *idp = ev->id;
    (*idp)->event = ev;
    return 0;
}

int rdma_accept(rdma_cm_id* idp, rdma_conn_param* p) {
    Id* id = id_of(idp);
    if (!valid_param(id, p)) return fail(EINVAL);
    if (!id->conn_req || !id->dev) return fail(EINVAL);
    if (!idp->qp && !p) return fail(EINVAL);
    size_t max = is_ud(id) ? abi::kCmSidrRepPrivate : abi::kCmRepPrivate;
    if (p && p->private_data && p->private_data_len > max) return fail(EINVAL);
    if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
        id->init_depth = std::min<uint8_t>(id->init_depth, abi::kMaxQpRdAtom);
    else
        id->init_depth = p->initiator_depth;
    if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
        id->resp_res = std::min<uint8_t>(id->resp_res, abi::kMaxQpRdAtom);
    else
        id->resp_res = p->responder_resources;
    if (!is_ud(id)) {
        int e = modify_rtr(id, id->resp_res);
        if (!e) e = modify_rts(id, id->init_depth);
        if (e) return fail(e);
    }
    abi::CmReq r = cm_req(abi::CmOp::kAccept, id->handle);
    r.qpn = idp->qp ? idp->qp->qp_num : p->qp_num;
    r.srq = idp->qp ? idp->qp->srq != nullptr : p->srq;
    r.psn = id->local_psn;
    r.qkey = RDMA_UDP_QKEY;
    r.responder_resources = id->resp_res;
    r.initiator_depth = id->init_depth;
    r.flow_control = p ? p->flow_control : 0;
    r.rnr_retry_count = p ? p->rnr_retry_count & 7 : 7;
    if (p && p->private_data && p->private_data_len) {
        r.private_data_len = p->private_data_len;
        std::memcpy(r.private_data, p->private_data, p->private_data_len);
    }
    if (int e = cm_call(*id->dev, r)) {
        modify_err(id);
        return fail(e);
    }
    id->conn_req = false;
    if (is_ud(id)) {
        if (id->sync && idp->event) {
            rdma_ack_cm_event(idp->event);
            idp->event = nullptr;
        }
        return 0;
    }
    return complete(id);
}

static int reject(rdma_cm_id* idp, const void* private_data, uint8_t len) {
    Id* id = id_of(idp);
    if (!id->conn_req || !id->dev) return fail(EINVAL);
    size_t max = is_ud(id) ? abi::kCmSidrRepPrivate : abi::kCmRejPrivate;
    if (private_data && len > max) return fail(EINVAL);
    abi::CmReq r = cm_req(abi::CmOp::kReject, id->handle);
    if (private_data && len) {
        r.private_data_len = len;
        std::memcpy(r.private_data, private_data, len);
    }
    if (int e = cm_call(*id->dev, r)) return fail(e);
    id->conn_req = false;
    return 0;
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject(id, private_data, private_data_len);
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject(id, private_data, private_data_len);
}

int rdma_notify(rdma_cm_id* idp, ibv_event_type event) {
    Id* id = id_of(idp);
    if (!id->dev || !id->handle) return fail(EINVAL);
    abi::CmReq r = cm_req(abi::CmOp::kNotify, id->handle);
    r.event = event;
    if (int e = cm_call(*id->dev, r)) return fail(e);
    return 0;
}

int rdma_disconnect(rdma_cm_id* idp) {
    Id* id = id_of(idp);
    if (!idp->verbs || !id->dev) return fail(EINVAL);
    // The QP stops first (rdma-core's ucma_shutdown), then the DREQ (or DREP) goes out.
    if (int e = modify_err(id)) return fail(e);
    abi::CmReq r = cm_req(abi::CmOp::kDisconnect, id->handle);
    if (int e = cm_call(*id->dev, r)) return fail(e);
    return complete(id);
}

// ---- events --------------------------------------------------------------------------------

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
    if (!channel || !event) return fail(EINVAL);
    Channel* c = chan_of(channel);
    // Held while this thread uses the channel, so rdma_destroy_event_channel from another
    // thread leaves it blocked (as the kernel does) instead of freeing what it reads.
    c->refs.fetch_add(1, std::memory_order_relaxed);
    struct Unref {
        Channel* c;
        ~Unref() { unref_channel(c); }
    } unref{c};
    for (;;) {
        abi::CmEventRec rec;
        if (int e = read_record(c, &rec)) return fail(e);
        Id* id = nullptr;
        {
            std::lock_guard<std::mutex> g(g_mu);
            auto it = g_ids.find(key(rec.dev_tag, rec.handle));
            if (it != g_ids.end()) id = it->second;
        }
        if (!id) {
            // The id is gone. A request for a listener that is gone must not linger.
            if (rec.event == RDMA_CM_EVENT_CONNECT_REQUEST)
                if (DevConn* d = dev_by_tag(rec.dev_tag)) {
                    abi::CmReq r = cm_req(abi::CmOp::kDestroy, rec.new_handle);
                    cm_call(*d, r);
                }
            continue;
        }
        if (id->chan != c) {  // migrated: the event belongs to the other channel now
            write_local(id->chan, rec);
            continue;
        }
        auto ev = std::make_unique<Event>();
        std::memset(&ev->ev, 0, sizeof ev->ev);
        ev->owner = id;
        ev->ev.id = &id->id;
        ev->ev.event = rdma_cm_event_type(rec.event);
        ev->ev.status = rec.status;
        switch (rec.event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
            Id* child = make_child(id, rec);
            if (!child) {
                if (DevConn* d = dev_by_tag(rec.dev_tag)) {
                    abi::CmReq r = cm_req(abi::CmOp::kDestroy, rec.new_handle);
                    cm_call(*d, r);
                }
                continue;
            }
            ev->ev.listen_id = &id->id;
            ev->ev.id = &child->id;
            if (is_ud(child))
                fill_ud(ev.get(), child, rec);
            else
                fill_conn(ev.get(), rec);
            break;
        }
        case RDMA_CM_EVENT_CONNECT_RESPONSE: {
            id->remote_qpn = rec.remote_qpn;
            id->remote_psn = rec.remote_psn;
            id->resp_res = rec.responder_resources;
            id->init_depth = rec.initiator_depth;
            id->rnr_retry_count = rec.rnr_retry_count;
            id->have_conn = true;
            fill_conn(ev.get(), rec);
            if (!id->id.qp) break;  // the application moves its QP, then rdma_establish
            int e = modify_rtr(id, RDMA_MAX_RESP_RES);
            if (!e) e = modify_rts(id, RDMA_MAX_INIT_DEPTH);
            if (!e) e = establish(id);
            if (!e) {
                ev->ev.event = RDMA_CM_EVENT_ESTABLISHED;
            } else {
                modify_err(id);
                ev->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
                ev->ev.status = -e;
                id->connect_error = true;
            }
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            id->conn_req = false;
            if (is_ud(id)) {
                id->remote_qpn = rec.remote_qpn;
                id->qkey = rec.qkey;
                fill_ud(ev.get(), id, rec);
            } else {
                fill_conn(ev.get(), rec);
                ev->ev.param.conn.private_data_len = 0;
                ev->ev.param.conn.private_data = nullptr;
            }
            break;
        case RDMA_CM_EVENT_REJECTED:
            if (id->connect_error) continue;
            modify_err(id);
            fill_conn(ev.get(), rec);
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            if (id->connect_error) continue;
            fill_conn(ev.get(), rec);
            ev->ev.param.conn.private_data_len = 0;
            ev->ev.param.conn.private_data = nullptr;
            break;
        case RDMA_CM_EVENT_UNREACHABLE: modify_err(id); break;
        case RDMA_CM_EVENT_MULTICAST_JOIN: {
            Mcast* mc = take_mcast_event(id, rec.new_handle);
            if (!mc) continue;  // the id left the group before the event was read
            ev->mc = mc;
            fill_mcast(ev.get(), id, *mc);
            // A send-only member's QP is not attached (rdma-core's ucma_process_join).
            if (id->id.qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
                if (int e = ibv_attach_mcast(id->id.qp, &mc->mgid, mc->mlid)) {
                    errno = e;
                    ev->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
                    ev->ev.status = -1;  // rdma-core stores rdma_seterrno()'s -1 here
                }
            }
            break;
        }
        default: break;
        }
        {
            std::lock_guard<std::mutex> g(ev->owner->mu);
            ++ev->owner->reported;
        }
        *event = &ev.release()->ev;
        return 0;
    }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
    if (!event) return fail(EINVAL);
    auto* ev = reinterpret_cast<Event*>(event);
    {
        std::lock_guard<std::mutex> g(ev->owner->mu);
        ++ev->owner->completed;
        if (ev->mc) ++ev->mc->completed;
    }
    ev->owner->cv.notify_all();
    delete ev;
    return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
    switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default: return "UNKNOWN EVENT";
    }
}

int rdma_migrate_id(rdma_cm_id* idp, rdma_event_channel* channel) {
    Id* id = id_of(idp);
    if (id->sync && !channel) return fail(EINVAL);
    Channel* nc = channel ? chan_of(channel) : new_channel(0);
    if (!nc) return -1;
    std::vector<std::pair<DevConn*, uint32_t>> handles = id->listens;
    if (id->dev && id->handle) handles.emplace_back(id->dev, id->handle);
    for (auto& [d, h] : handles) {
        int e = ensure_channel(nc, d);
        if (!e) {
            abi::CmReq r = cm_req(abi::CmOp::kMigrate, h);
            r.channel = nc->id;
            e = cm_call(*d, r);
        }
        if (e) {
            if (!channel) free_channel(nc);
            return fail(e);
        }
    }
    Channel* old = id->chan;
    bool old_sync = id->sync;
    {
        std::lock_guard<std::mutex> g(id->mu);
        id->chan = nc;
        idp->channel = &nc->ch;
        id->sync = channel == nullptr;
    }
    if (old_sync) {
        if (idp->event) {
            rdma_ack_cm_event(idp->event);
            idp->event = nullptr;
        }
        free_channel(old);
    }
    // Events already handed out on the old channel must be acknowledged first.
    std::unique_lock<std::mutex> lk(id->mu);
    id->cv.wait(lk, [&] { return id->completed >= id->reported; });
    return 0;
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

// ---- endpoints -----------------------------------------------------------------------------

int rdma_create_ep(rdma_cm_id** idp, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
    if (!idp || !res) return fail(EINVAL);
    if (!sync_devices()) return fail(ENODEV);
    rdma_port_space ps = rdma_port_space(res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP);
    ibv_qp_type qt = res->ai_qp_type
                         ? ibv_qp_type(res->ai_qp_type)
                         : (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC);
    Id* id = new_id(nullptr, nullptr, ps, qt);
    if (!id) return fail(ENOMEM);
    rdma_cm_id* cm = &id->id;
    int r = 0;
    if (res->ai_flags & RAI_PASSIVE) {
        if (rdma_bind_addr(cm, res->ai_src_addr)) goto err;
        if (pd) cm->pd = pd;
        if (qp_init_attr) {
            id->qp_init_attr = new ibv_qp_init_attr(*qp_init_attr);
            id->qp_init_attr->qp_type = qt;
        }
        *idp = cm;
        return 0;
    }
    if (rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000)) goto err;
    if (rdma_resolve_route(cm, 2000)) goto err;
    if (qp_init_attr) {
        qp_init_attr->qp_type = qt;
        if (rdma_create_qp(cm, pd, qp_init_attr)) goto err;
    }
    if (res->ai_connect_len && res->ai_connect) {
        auto* b = static_cast<const uint8_t*>(res->ai_connect);
        id->connect_data.assign(b, b + res->ai_connect_len);
    }
    *idp = cm;
    return 0;
err:
    r = errno;
    rdma_destroy_ep(cm);
    return fail(r);
}

void rdma_destroy_ep(rdma_cm_id* id) {
    if (id->qp) rdma_destroy_qp(id);
    if (id->srq) rdma_destroy_srq(id);
    rdma_destroy_id(id);
}

// ---- small accessors, multicast, ECE -----------------------------------------------------

__be16 rdma_get_src_port(rdma_cm_id* id) {
    uint32_t ip;
    uint16_t port = 0;
    to_ipv4(&id->route.addr.src_addr, &ip, &port);
    return port;
}

__be16 rdma_get_dst_port(rdma_cm_id* id) {
    uint32_t ip;
    uint16_t port = 0;
    to_ipv4(&id->route.addr.dst_addr, &ip, &port);
    return port;
}

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
