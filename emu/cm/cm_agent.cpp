#include "emu/cm/cm_agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "emu/cm/cm_mad.h"
#include "emu/engine/device.h"

namespace uroce::emu {

namespace {

const char* state_name(int st) {
    static const char* kNames[] = {"idle",          "listen",    "req_sent", "mra_req_rcvd",
                                   "req_rcvd",      "rep_sent",  "rep_rcvd", "established",
                                   "dreq_sent",     "dreq_rcvd", "timewait", "sidr_req_sent",
                                   "sidr_req_rcvd", "sidr_done", "parked"};
    return st >= 0 && st < int(sizeof kNames / sizeof kNames[0]) ? kNames[st] : "?";
}

// The QP type a REQ asks the passive side for (the kernel's cm_req_get_qp_type); 0: none.
uint32_t req_qp_type(const cm::Req& m) {
    if (m.transport == cm::kTransportRc) return IBV_QPT_RC;
    if (m.transport == cm::kTransportUc) return IBV_QPT_UC;
    if (m.transport == cm::kTransportExtended && m.ext_transport == cm::kExtTransportXrc)
        return IBV_QPT_XRC_RECV;
    return 0;
}

const char* attr_name(uint16_t attr) {
    switch (attr) {
    case cm::kAttrReq: return "REQ";
    case cm::kAttrMra: return "MRA";
    case cm::kAttrRej: return "REJ";
    case cm::kAttrRep: return "REP";
    case cm::kAttrRtu: return "RTU";
    case cm::kAttrDreq: return "DREQ";
    case cm::kAttrDrep: return "DREP";
    case cm::kAttrSidrReq: return "SIDR_REQ";
    case cm::kAttrSidrRep: return "SIDR_REP";
    default: return "MAD";
    }
}

const char* cm_event_name(uint32_t e) {
    static const char* kNames[] = {
        "ADDR_RESOLVED",   "ADDR_ERROR",       "ROUTE_RESOLVED", "ROUTE_ERROR",
        "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR",  "UNREACHABLE",
        "REJECTED",        "ESTABLISHED",      "DISCONNECTED",   "DEVICE_REMOVAL",
        "MULTICAST_JOIN",  "MULTICAST_ERROR",  "ADDR_CHANGE",    "TIMEWAIT_EXIT"};
    return e < sizeof kNames / sizeof kNames[0] ? kNames[e] : "?";
}

bool known_ps(uint32_t ps) {
    return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IB || ps == RDMA_PS_IPOIB;
}

void v4_gid(uint32_t ip_be, uint8_t* gid) {
    std::memset(gid, 0, 16);
    gid[10] = 0xff;
    gid[11] = 0xff;
    std::memcpy(gid + 12, &ip_be, 4);
}

}  // namespace

CmAgent::CmAgent(Device& dev) : dev_(dev), rng_(std::random_device{}()) {
    next_comm_ = rng_();
    tid_hi_ = rng_();
    gsi_psn_ = rng_() & 0xffffff;
}

CmAgent::~CmAgent() {
    for (auto& [key, ch] : channels_)
        if (ch.fd >= 0) close(ch.fd);
}

uint32_t CmAgent::new_comm_id() {
    for (;;) {
        uint32_t c = ++next_comm_;
        if (c && !comm_.count(c)) return c;
    }
}

uint64_t CmAgent::new_tid() { return (tid_hi_ << 32) | ++tid_lo_; }

CmAgent::Id* CmAgent::find(Session& s, uint32_t handle) {
    auto it = ids_.find(handle);
    if (it == ids_.end() || it->second->owner != &s) return nullptr;
    return it->second.get();
}

CmAgent::Id* CmAgent::by_comm(uint32_t comm_id) {
    auto it = comm_.find(comm_id);
    if (it == comm_.end()) return nullptr;
    auto id = ids_.find(it->second);
    return id == ids_.end() ? nullptr : id->second.get();
}

// ---- requests from the library -------------------------------------------------------------

void CmAgent::request(Session& s, const abi::CmReq& r, abi::CmResp& out, int in_fd) {
    using abi::CmOp;
    int err = 0;
    Id* id = nullptr;
    switch (r.cm_op) {
    case CmOp::kChannel: {
        // The library passes the write end of the channel's pipe (docs/cm.md); we keep a copy.
        // Anything but a pipe is refused: we write to it from the engine's control path.
        struct stat st {};
        if (in_fd < 0 || fstat(in_fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
            err = EINVAL;
            break;
        }
        int fd = fcntl(in_fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            break;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);  // never block the engine on a slow reader
        Channel& ch = channels_[{&s, r.channel}];
        if (ch.fd >= 0) close(ch.fd);
        ch.fd = fd;
        ch.dev_tag = r.dev_tag;
        break;
    }
    case CmOp::kChannelClose: {
        auto it = channels_.find({&s, r.channel});
        if (it == channels_.end()) {
            err = EINVAL;
            break;
        }
        close(it->second.fd);
        channels_.erase(it);
        break;
    }
    case CmOp::kBind: err = bind(s, r, out); break;
    case CmOp::kListen:
        if (!(id = find(s, r.handle)) || !id->bound ||
            (id->st != St::kIdle && id->st != St::kListen)) {
            err = EINVAL;
            break;
        }
        id->st = St::kListen;
        id->backlog = r.backlog > 0 && r.backlog < kDefaultBacklog ? r.backlog : kDefaultBacklog;
        {
            // Requests that arrived for this port before the listener did.
            std::vector<uint32_t> waiting;
            for (auto& [h, p] : ids_)
                if (p->st == St::kParked && p->ps == id->ps && p->local_port == id->local_port)
                    waiting.push_back(h);
            for (uint32_t h : waiting) unpark(*ids_[h]);
        }
        break;
    case CmOp::kConnect: err = (id = find(s, r.handle)) ? connect(*id, r) : EINVAL; break;
    case CmOp::kAccept: err = (id = find(s, r.handle)) ? accept(*id, r) : EINVAL; break;
    case CmOp::kEstablish:
        if (!(id = find(s, r.handle)) || id->st != St::kRepRcvd) {
            err = EINVAL;
            break;
        }
        {
            cm::Short rtu;
            rtu.local_comm_id = id->local_comm_id;
            rtu.remote_comm_id = id->remote_comm_id;
            cm::encode_rtu(rtu, id->tid, id->mad);
            send_mad(id->remote_ip, id->mad);
            id->st = St::kEstablished;  // the RTU is kept in id->mad for a repeated REP
        }
        break;
    case CmOp::kReject: err = (id = find(s, r.handle)) ? reject(*id, r) : EINVAL; break;
    case CmOp::kDisconnect: err = (id = find(s, r.handle)) ? disconnect(*id) : EINVAL; break;
    case CmOp::kDestroy:
        if (!(id = find(s, r.handle))) {
            err = EINVAL;
            break;
        }
        destroy(*id);
        break;
    case CmOp::kMigrate:
        if (!(id = find(s, r.handle)) || !channels_.count({&s, r.channel})) {
            err = EINVAL;
            break;
        }
        id->channel = r.channel;
        break;
    case CmOp::kNotify:
        if (!(id = find(s, r.handle))) {
            err = EINVAL;
            break;
        }
        // Traffic on a QP whose RTU was lost: the connection is established (IBTA 12.9.7).
        if (r.event == IBV_EVENT_COMM_EST && id->st == St::kRepSent) {
            id->st = St::kEstablished;
            id->deadline = 0;
            leave_pending(*id);
            abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_ESTABLISHED, 0);
            post(*id, ev);
        }
        break;
    default: err = EOPNOTSUPP;
    }
    out.err = err;
    trace_request(s, r, out);
}

// "cm pid P listen id N port X" and the like, for the calls that change a connection; every
// failed call with its errno.
void CmAgent::trace_request(const Session& s, const abi::CmReq& r, const abi::CmResp& out) {
    using abi::CmOp;
    const char* what = nullptr;
    switch (r.cm_op) {
    case CmOp::kBind: what = "bind"; break;
    case CmOp::kListen: what = "listen"; break;
    case CmOp::kConnect: what = "connect"; break;
    case CmOp::kAccept: what = "accept"; break;
    case CmOp::kEstablish: what = "establish"; break;
    case CmOp::kReject: what = "reject"; break;
    case CmOp::kDisconnect: what = "disconnect"; break;
    case CmOp::kDestroy: what = "destroy"; break;
    case CmOp::kMigrate: what = "migrate"; break;
    case CmOp::kNotify: what = "notify"; break;
    default:
        if (!out.err) return;
        what = "request";
    }
    const uint32_t handle = r.cm_op == CmOp::kBind ? out.handle : r.handle;
    char ip[INET_ADDRSTRLEN];
    if (out.err) {
        dev_.trace_.add("cm pid %d %s id %u failed: %s", int(s.pid), what, handle,
                        strerrorname_np(out.err) ? strerrorname_np(out.err) : "?");
    } else if (r.cm_op == CmOp::kBind || r.cm_op == CmOp::kListen) {
        auto it = ids_.find(handle);
        const Id* id = it == ids_.end() ? nullptr : it->second.get();
        inet_ntop(AF_INET, id ? &id->local_ip : &r.local_ip, ip, sizeof ip);
        dev_.trace_.add("cm pid %d %s id %u %s:%u ps 0x%x", int(s.pid), what, handle, ip,
                        id ? ntohs(id->local_port) : 0u, id ? id->ps : r.ps);
    } else if (r.cm_op == CmOp::kConnect) {
        inet_ntop(AF_INET, &r.remote_ip, ip, sizeof ip);
        dev_.trace_.add("cm pid %d connect id %u to %s:%u qp 0x%x", int(s.pid), handle, ip,
                        ntohs(r.remote_port), r.qpn);
    } else {
        dev_.trace_.add("cm pid %d %s id %u", int(s.pid), what, handle);
    }
}

int CmAgent::bind(Session& s, const abi::CmReq& r, abi::CmResp& out) {
    if (!known_ps(r.ps)) return EINVAL;
    if (!channels_.count({&s, r.channel})) return EINVAL;
    if (r.local_ip && r.local_ip != dev_.cfg_.ipv4_be) return EADDRNOTAVAIL;
    uint16_t port = ntohs(r.local_port);
    if (port == 0) {
        // An ephemeral port, as the kernel picks them (ip_local_port_range's default).
        constexpr uint32_t kLo = 32768, kHi = 60999;
        uint32_t start = kLo + rng_() % (kHi - kLo + 1);
        for (uint32_t i = 0; i <= kHi - kLo; ++i) {
            uint32_t p = kLo + (start - kLo + i) % (kHi - kLo + 1);
            if (!ports_.count({r.ps, uint16_t(p)})) {
                port = uint16_t(p);
                break;
            }
        }
        if (port == 0) return EADDRINUSE;
    } else if (ports_.count({r.ps, port})) {
        return EADDRINUSE;
    }
    auto id = std::make_unique<Id>();
    id->handle = next_handle_++;
    if (next_handle_ == 0) next_handle_ = 1;
    id->owner = &s;
    id->channel = r.channel;
    id->ps = r.ps;
    id->qp_type = r.qp_type;
    id->bound = true;
    id->local_ip = r.local_ip;
    id->local_port = htons(port);
    ports_[{r.ps, port}] = id->handle;
    out.handle = id->handle;
    out.port = id->local_port;
    ids_[id->handle] = std::move(id);
    return 0;
}

int CmAgent::connect(Id& id, const abi::CmReq& r) {
    if (id.st != St::kIdle || !id.bound || !r.remote_ip) return EINVAL;
    if (r.private_data_len >
        (r.qp_type == IBV_QPT_UD ? abi::kCmSidrReqUserPrivate : abi::kCmReqUserPrivate))
        return EINVAL;
    id.qp_type = r.qp_type;
    id.remote_ip = r.remote_ip;
    id.remote_port = r.remote_port;
    id.local_qpn = r.qpn & 0xffffff;
    id.local_psn = r.psn & 0xffffff;
    id.resp_res = r.responder_resources;
    id.init_depth = r.initiator_depth;
    id.flow = r.flow_control;
    id.retry = r.retry_count & 7;
    id.rnr_retry = r.rnr_retry_count & 7;
    id.srq = r.srq;
    id.mtu = r.mtu >= IBV_MTU_256 && r.mtu <= IBV_MTU_4096 ? r.mtu : uint8_t(IBV_MTU_1024);
    uint32_t src_ip = id.local_ip ? id.local_ip : dev_.cfg_.ipv4_be;
    cm::IpHdr hdr{id.local_port, src_ip, r.remote_ip};
    id.tid = new_tid();
    uint64_t sid = cm::service_id(id.ps, ntohs(r.remote_port));
    if (id.qp_type == IBV_QPT_UD) {
        cm::SidrReq m;
        id.local_comm_id = new_comm_id();  // the SIDR request ID
        comm_[id.local_comm_id] = id.handle;
        m.request_id = id.local_comm_id;
        m.service_id = sid;
        cm::put_ip_hdr(hdr, m.private_data);
        std::memcpy(m.private_data + cm::kIpHdrLen, r.private_data, r.private_data_len);
        cm::encode(m, id.tid, id.mad);
        id.st = St::kSidrReqSent;
    } else {
        cm::Req m;
        id.local_comm_id = new_comm_id();
        comm_[id.local_comm_id] = id.handle;
        m.local_comm_id = id.local_comm_id;
        m.service_id = sid;
        m.local_ca_guid = dev_.guid_;
        m.local_qpn = id.local_qpn;
        m.initiator_depth = id.init_depth;
        m.remote_cm_response_timeout = kMadTimeoutCode;
        m.flow_control = id.flow;
        m.starting_psn = id.local_psn;
        m.local_cm_response_timeout = kMadTimeoutCode;
        m.path_mtu = id.mtu;
        m.max_cm_retries = kMadRetries;
        if (id.qp_type == IBV_QPT_XRC_SEND) {
            // An XRC initiator has no receive side: no responder resources, retry counts
            // or SRQ in its REQ (the kernel's cm_format_req).
            m.transport = cm::kTransportExtended;
            m.ext_transport = cm::kExtTransportXrc;
        } else {
            m.transport = id.qp_type == IBV_QPT_UC ? cm::kTransportUc : cm::kTransportRc;
            m.responder_resources = id.resp_res;
            m.retry_count = id.retry;
            m.rnr_retry_count = id.rnr_retry;
            m.srq = id.srq;
        }
        v4_gid(src_ip, m.local_gid);
        v4_gid(r.remote_ip, m.remote_gid);
        m.packet_rate = 16;  // 100 Gb/s, what the port reports
        m.hop_limit = 64;
        m.local_ack_timeout = 14;
        cm::put_ip_hdr(hdr, m.private_data);
        std::memcpy(m.private_data + cm::kIpHdrLen, r.private_data, r.private_data_len);
        cm::encode(m, id.tid, id.mad);
        id.st = St::kReqSent;
    }
    id.retries_left = kMadRetries;
    id.wait_ns = kMadTimeoutNs;
    send_request(id);
    return 0;
}

int CmAgent::accept(Id& id, const abi::CmReq& r) {
    if (id.st == St::kSidrReqRcvd) {
        if (r.private_data_len > abi::kCmSidrRepPrivate) return EINVAL;
        cm::SidrRep m;
        m.request_id = id.remote_comm_id;
        m.status = cm::kSidrOk;
        m.qpn = r.qpn & 0xffffff;
        m.service_id = cm::service_id(id.ps, ntohs(id.local_port));
        m.qkey = r.qkey;
        std::memcpy(m.private_data, r.private_data, r.private_data_len);
        cm::encode(m, id.tid, id.mad);
        send_mad(id.remote_ip, id.mad);
        id.st = St::kSidrDone;  // id.mad answers a repeated SIDR_REQ
        leave_pending(id);
        return 0;
    }
    if (id.st != St::kReqRcvd) return EINVAL;
    if (r.private_data_len > abi::kCmRepPrivate) return EINVAL;
    id.local_qpn = r.qpn & 0xffffff;
    id.local_psn = r.psn & 0xffffff;
    id.resp_res = r.responder_resources;
    id.init_depth = r.initiator_depth;
    cm::Rep m;
    m.local_comm_id = id.local_comm_id;
    m.remote_comm_id = id.remote_comm_id;
    m.starting_psn = id.local_psn;
    m.responder_resources = r.responder_resources;
    m.target_ack_delay = 15;
    m.failover_accepted = 0;
    m.rnr_retry_count = r.rnr_retry_count & 7;
    m.local_ca_guid = dev_.guid_;
    if (id.qp_type == IBV_QPT_XRC_RECV) {
        // An XRC target names its QP as the EE context and always receives through an
        // SRQ (the kernel's cm_format_rep).
        m.local_eecn = id.local_qpn;
        m.srq = true;
    } else {
        m.local_qpn = id.local_qpn;
        m.initiator_depth = r.initiator_depth;
        m.flow_control = r.flow_control;
        m.srq = r.srq;
    }
    std::memcpy(m.private_data, r.private_data, r.private_data_len);
    cm::encode(m, id.tid, id.mad);
    id.st = St::kRepSent;
    id.retries_left = kMadRetries;
    id.wait_ns = kMadTimeoutNs;
    send_request(id);
    return 0;
}

int CmAgent::reject(Id& id, const abi::CmReq& r) {
    if (id.st == St::kSidrReqRcvd) {
        if (r.private_data_len > abi::kCmSidrRepPrivate) return EINVAL;
        cm::SidrRep m;
        m.request_id = id.remote_comm_id;
        m.status = cm::kSidrReject;
        m.service_id = cm::service_id(id.ps, ntohs(id.local_port));
        std::memcpy(m.private_data, r.private_data, r.private_data_len);
        cm::encode(m, id.tid, id.mad);
        send_mad(id.remote_ip, id.mad);
        id.st = St::kSidrDone;
        leave_pending(id);
        return 0;
    }
    if (id.st != St::kReqRcvd) return EINVAL;
    if (r.private_data_len > abi::kCmRejPrivate) return EINVAL;
    send_rej(id.remote_ip, id.local_comm_id, id.remote_comm_id, cm::kMsgReq, cm::kRejConsumer,
             id.tid, r.private_data, r.private_data_len, false);
    id.st = St::kIdle;
    leave_pending(id);
    return 0;
}

int CmAgent::disconnect(Id& id) {
    switch (id.st) {
    case St::kEstablished:
    case St::kRepSent:  // the RTU was lost, the passive side gives up on it
    case St::kRepRcvd: {
        leave_pending(id);
        cm::Short m;
        m.local_comm_id = id.local_comm_id;
        m.remote_comm_id = id.remote_comm_id;
        m.remote_qpn = id.remote_qpn;
        id.tid = new_tid();
        cm::encode_dreq(m, id.tid, id.mad);
        id.st = St::kDreqSent;
        id.retries_left = kMadRetries;
        id.wait_ns = kMadTimeoutNs;
        send_request(id);
        return 0;
    }
    case St::kDreqRcvd: {
        cm::Short m;
        m.local_comm_id = id.local_comm_id;
        m.remote_comm_id = id.remote_comm_id;
        cm::encode_drep(m, id.tid, id.mad);
        send_mad(id.remote_ip, id.mad);
        enter_timewait(id);
        return 0;
    }
    default: return EINVAL;
    }
}

void CmAgent::destroy(Id& id) {
    uint32_t h = id.handle;
    release_port(id);
    leave_pending(id);
    id.owner = nullptr;  // no more events
    switch (id.st) {
    case St::kReqSent:
    case St::kMraReqRcvd:
        send_rej(id.remote_ip, id.local_comm_id, id.remote_comm_id, cm::kMsgReq, cm::kRejTimeout,
                 id.tid, nullptr, 0, true);
        break;
    case St::kReqRcvd:
        send_rej(id.remote_ip, id.local_comm_id, id.remote_comm_id, cm::kMsgReq, cm::kRejConsumer,
                 id.tid, nullptr, 0, false);
        break;
    case St::kRepSent:
        send_rej(id.remote_ip, id.local_comm_id, id.remote_comm_id, cm::kMsgRep, cm::kRejConsumer,
                 id.tid, nullptr, 0, false);
        break;
    case St::kRepRcvd:
        send_rej(id.remote_ip, id.local_comm_id, id.remote_comm_id, cm::kMsgRep, cm::kRejConsumer,
                 id.tid, nullptr, 0, false);
        break;
    case St::kSidrReqRcvd: {
        cm::SidrRep m;
        m.request_id = id.remote_comm_id;
        m.status = cm::kSidrReject;
        m.service_id = cm::service_id(id.ps, ntohs(id.local_port));
        cm::encode(m, id.tid, id.mad);
        send_mad(id.remote_ip, id.mad);
        break;
    }
    case St::kEstablished:
    case St::kDreqRcvd:
        disconnect(id);  // DREQ (then retransmitted), or DREP and TimeWait
        return;
    case St::kDreqSent:
    case St::kTimewait: return;  // the protocol finishes on its own; the id goes when it does
    default: break;
    }
    erase(h);
}

void CmAgent::erase(uint32_t handle) {
    auto it = ids_.find(handle);
    if (it == ids_.end()) return;
    Id& id = *it->second;
    release_port(id);
    leave_pending(id);
    if (id.local_comm_id) {
        auto c = comm_.find(id.local_comm_id);
        if (c != comm_.end() && c->second == handle) comm_.erase(c);
    }
    if (id.remote_comm_id) {
        auto r = remote_.find({id.remote_ip, id.remote_comm_id});
        if (r != remote_.end() && r->second == handle) remote_.erase(r);
    }
    ids_.erase(it);
}

void CmAgent::release_port(Id& id) {
    if (!id.bound) return;
    auto it = ports_.find({id.ps, ntohs(id.local_port)});
    if (it != ports_.end() && it->second == id.handle) ports_.erase(it);
    id.bound = false;
}

// A connection request stops counting against its listener's backlog once it is answered.
void CmAgent::leave_pending(Id& id) {
    if (!id.listener) return;
    auto it = ids_.find(id.listener);
    if (it != ids_.end() && it->second->pending) --it->second->pending;
    id.listener = 0;
}

void CmAgent::close_session(Session& s) {
    std::vector<uint32_t> mine;
    for (auto& [h, id] : ids_)
        if (id->owner == &s) mine.push_back(h);
    // Listeners first, so their requests are not counted against a backlog that is going.
    std::stable_partition(mine.begin(), mine.end(),
                          [&](uint32_t h) { return ids_[h]->st == St::kListen; });
    for (uint32_t h : mine) {
        auto it = ids_.find(h);
        if (it != ids_.end() && it->second->owner == &s) destroy(*it->second);
    }
    for (auto it = channels_.begin(); it != channels_.end();) {
        if (it->first.first == &s) {
            close(it->second.fd);
            it = channels_.erase(it);
        } else {
            ++it;
        }
    }
}

// ---- packets ---------------------------------------------------------------------------------

void CmAgent::send_mad(uint32_t ip_be, const uint8_t* mad) {
    uint32_t slot;
    uint8_t* buf = dev_.tx_begin(&slot);
    if (!buf) return;  // every transmit buffer is in flight: the retransmit timer covers it
    net::Packet p{};
    p.bth.opcode = net::kUdSendOnly;
    p.bth.pkey = net::kDefaultPkey;
    p.bth.dqpn = cm::kGsiQpn;
    p.bth.psn = gsi_psn_;
    gsi_psn_ = (gsi_psn_ + 1) & 0xffffff;
    p.deth.qkey = cm::kGsiQkey;
    p.deth.src_qpn = cm::kGsiQpn;
    size_t h = net::encode_headers(p, buf);
    std::memcpy(buf + h, mad, cm::kMadLen);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = ip_be;
    to.sin_port = htons(dev_.cfg_.port);
    ++mads_tx_;
    trace_mad("tx", "to", ip_be, mad);
    dev_.transmit(slot, h + cm::kMadLen, to);
}

// "cm tx REQ to 127.0.0.3 comm 0x... 0x..." (the first two words after the MAD header are
// the local and remote communication IDs, or a SIDR request ID); a REJ adds its reason.
void CmAgent::trace_mad(const char* dir, const char* prep, uint32_t peer_be, const uint8_t* mad) {
    cm::MadHdr h;
    if (!cm::parse_hdr(mad, &h)) return;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &peer_be, ip, sizeof ip);
    uint32_t w[2];
    std::memcpy(w, mad + 24, sizeof w);
    if (h.attr_id == cm::kAttrRej) {
        cm::Rej m;
        cm::decode(mad, &m);
        dev_.trace_.add("cm %s REJ %s %s comm 0x%x 0x%x reason %u", dir, prep, ip, ntohl(w[0]),
                        ntohl(w[1]), m.reason);
        return;
    }
    dev_.trace_.add("cm %s %s %s %s comm 0x%x 0x%x", dir, attr_name(h.attr_id), prep, ip,
                    ntohl(w[0]), ntohl(w[1]));
}

void CmAgent::send_request(Id& id) {
    send_mad(id.remote_ip, id.mad);
    arm(id, now_ns() + id.wait_ns);
}

void CmAgent::arm(Id& id, uint64_t deadline) {
    id.deadline = deadline;
    if (deadline) timers_.emplace(deadline, id.handle);
}

void CmAgent::enter_timewait(Id& id) {
    id.st = St::kTimewait;
    arm(id, now_ns() + kTimewaitNs);
}

void CmAgent::send_rej(uint32_t ip, uint32_t local_comm, uint32_t remote_comm, uint8_t msg,
                       uint16_t reason, uint64_t tid, const uint8_t* pd, size_t pd_len,
                       bool ari_guid) {
    cm::Rej m;
    m.local_comm_id = local_comm;
    m.remote_comm_id = remote_comm;
    m.msg_rejected = msg;
    m.reason = reason;
    if (ari_guid) {  // a timeout REJ names the CA that timed out
        uint64_t g = htobe64(dev_.guid_);
        std::memcpy(m.ari, &g, 8);
        m.ari_len = 8;
    }
    if (pd && pd_len) std::memcpy(m.private_data, pd, std::min(pd_len, sizeof m.private_data));
    uint8_t mad[cm::kMadLen];
    cm::encode(m, tid, mad);
    send_mad(ip, mad);
}

void CmAgent::on_mad(const sockaddr_in& from, const net::Packet& p) {
    ++mads_rx_;
    if (p.bth.opcode != net::kUdSendOnly) {
        ++mads_bad_;
        return dev_.count_drop(net::DropReason::kOpNotForQp);
    }
    if (p.deth.qkey != cm::kGsiQkey) {
        ++mads_bad_;
        return dev_.count_drop(net::DropReason::kBadQkey);
    }
    cm::MadHdr h;
    if (p.payload_len < cm::kMadLen || !cm::parse_hdr(p.payload, &h)) {
        ++mads_bad_;  // not a CM MAD we speak (other management classes are not served)
        return dev_.count_drop(net::DropReason::kBadLength);
    }
    const uint8_t* mad = p.payload;
    trace_mad("rx", "from", from.sin_addr.s_addr, mad);
    switch (h.attr_id) {
    case cm::kAttrReq: return on_req(from, mad, h.tid);
    case cm::kAttrRep: return on_rep(mad, h.tid);
    case cm::kAttrRtu: return on_rtu(mad);
    case cm::kAttrRej: return on_rej(mad);
    case cm::kAttrMra: return on_mra(mad);
    case cm::kAttrDreq: return on_dreq(from, mad, h.tid);
    case cm::kAttrDrep: return on_drep(mad);
    case cm::kAttrSidrReq: return on_sidr_req(from, mad, h.tid);
    case cm::kAttrSidrRep: return on_sidr_rep(mad);
    default: ++mads_bad_; return;  // LAP/APR/ClassPortInfo: not supported, ignored
    }
}

// Keeps a request for a port with no listener (as an id in state kParked, so duplicates of
// it are recognised and its timer runs with the others) until a listener comes or kParkNs
// pass. False when too many are waiting already.
bool CmAgent::park(uint32_t peer, const uint8_t* mad, uint64_t tid, uint32_t ps, uint16_t port,
                   uint32_t remote_id) {
    if (parked_ >= kMaxParked) return false;
    auto p = std::make_unique<Id>();
    p->handle = next_handle_++;
    if (next_handle_ == 0) next_handle_ = 1;
    p->st = St::kParked;
    p->ps = ps;
    p->local_port = htons(port);
    p->remote_ip = peer;
    p->remote_comm_id = remote_id;
    p->tid = tid;
    std::memcpy(p->mad, mad, cm::kMadLen);
    remote_[{peer, remote_id}] = p->handle;
    arm(*p, now_ns() + kParkNs);
    ++parked_;
    ids_[p->handle] = std::move(p);
    return true;
}

// A parked request is handled again, now without parking: a listener takes it, or the
// sender gets the REJ (SIDR_REP) a request for nobody gets.
void CmAgent::unpark(Id& id) {
    uint8_t mad[cm::kMadLen];
    std::memcpy(mad, id.mad, sizeof mad);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = id.remote_ip;
    uint64_t tid = id.tid;
    --parked_;
    erase(id.handle);
    cm::MadHdr h;
    if (!cm::parse_hdr(mad, &h)) return;
    if (h.attr_id == cm::kAttrReq) on_req(from, mad, tid, false);
    if (h.attr_id == cm::kAttrSidrReq) on_sidr_req(from, mad, tid, false);
}

void CmAgent::on_req(const sockaddr_in& from, const uint8_t* mad, uint64_t tid, bool may_park) {
    cm::Req m;
    cm::decode(mad, &m);
    uint32_t peer = from.sin_addr.s_addr;
    // A repeated REQ: the answer was lost or is late.
    auto dup = remote_.find({peer, m.local_comm_id});
    if (dup != remote_.end()) {
        auto it = ids_.find(dup->second);
        if (it != ids_.end()) {
            Id& id = *it->second;
            if (id.st == St::kReqRcvd) {
                cm::Mra mra;
                mra.local_comm_id = id.local_comm_id;
                mra.remote_comm_id = id.remote_comm_id;
                mra.msg_mraed = cm::kMsgReq;
                mra.service_timeout = kMraServiceTimeout;
                uint8_t out[cm::kMadLen];
                cm::encode(mra, id.tid, out);
                send_mad(peer, out);
            } else if (id.st == St::kRepSent) {
                send_mad(peer, id.mad);
            }
        }
        return;
    }
    cm::IpHdr hdr;
    Id* listener = nullptr;
    bool ip_cm = cm::is_rdma_cm_service(m.service_id) && cm::get_ip_hdr(m.private_data, &hdr);
    if (ip_cm) {
        uint32_t ps = cm::service_ps(m.service_id);
        auto it = ports_.find({ps, cm::service_port(m.service_id)});
        if (it != ports_.end()) {
            Id& l = *ids_[it->second];
            if (l.st == St::kListen && l.owner && (!l.local_ip || l.local_ip == hdr.dst_ip))
                listener = &l;
        }
    }
    if (!listener && ip_cm && may_park &&
        park(peer, mad, tid, cm::service_ps(m.service_id), cm::service_port(m.service_id),
             m.local_comm_id))
        return;
    if (!listener) {
        send_rej(peer, 0, m.local_comm_id, cm::kMsgReq, cm::kRejInvalidServiceId, tid, nullptr, 0,
                 false);
        return;
    }
    // The REQ's transport must be the listener's QP type (the kernel's
    // cma_check_req_qp_type; a mismatch ends in a consumer REJ, as the kernel's does when
    // the RDMA CM refuses the request).
    uint32_t qp_type = req_qp_type(m);
    if (qp_type != listener->qp_type || listener->pending >= uint32_t(listener->backlog)) {
        send_rej(peer, 0, m.local_comm_id, cm::kMsgReq, cm::kRejConsumer, tid, nullptr, 0, false);
        return;
    }
    auto c = std::make_unique<Id>();
    Id& id = *c;
    id.handle = next_handle_++;
    if (next_handle_ == 0) next_handle_ = 1;
    id.owner = listener->owner;
    id.channel = listener->channel;
    id.ps = listener->ps;
    id.qp_type = qp_type;
    id.st = St::kReqRcvd;
    id.local_ip = hdr.dst_ip;
    id.local_port = listener->local_port;
    id.remote_ip = peer;
    id.remote_port = hdr.src_port;
    id.listener = listener->handle;
    id.local_comm_id = new_comm_id();
    id.remote_comm_id = m.local_comm_id;
    id.remote_qpn = m.local_qpn;
    id.remote_psn = m.starting_psn;
    // The REQ speaks for the active side; from here its initiator depth is our responder
    // resources and the other way round.
    id.resp_res = m.initiator_depth;
    id.init_depth = m.responder_resources;
    id.flow = m.flow_control;
    id.retry = m.retry_count;
    id.rnr_retry = m.rnr_retry_count;
    id.srq = m.srq;
    // The path MTU: the REQ's, but no more than this port carries (the active side chose
    // its own port's).
    id.mtu = std::min<uint8_t>(std::clamp<uint8_t>(m.path_mtu, IBV_MTU_256, IBV_MTU_4096),
                               uint8_t(dev_.port_mtu_));
    id.tid = tid;
    comm_[id.local_comm_id] = id.handle;
    remote_[{peer, id.remote_comm_id}] = id.handle;
    ++listener->pending;
    abi::CmEventRec ev = event_for(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    ev.handle = listener->handle;
    ev.new_handle = id.handle;
    ev.private_data_len = abi::kCmReqUserPrivate;
    std::memcpy(ev.private_data, m.private_data + cm::kIpHdrLen, abi::kCmReqUserPrivate);
    ids_[id.handle] = std::move(c);
    post(*ids_[id.handle], ev);
}

void CmAgent::on_rep(const uint8_t* mad, uint64_t tid) {
    cm::Rep m;
    cm::decode(mad, &m);
    Id* id = by_comm(m.remote_comm_id);
    if (!id) return;
    switch (id->st) {
    case St::kReqSent:
    case St::kMraReqRcvd: {
        id->deadline = 0;
        id->remote_comm_id = m.local_comm_id;
        id->remote_qpn = id->qp_type == IBV_QPT_XRC_SEND ? m.local_eecn : m.local_qpn;
        id->remote_psn = m.starting_psn;
        // Seen from here, the passive side's initiator depth bounds our responder resources.
        id->resp_res = m.initiator_depth;
        id->init_depth = m.responder_resources;
        id->flow = m.flow_control;
        id->rnr_retry = m.rnr_retry_count;
        id->srq = m.srq;
        id->st = St::kRepRcvd;
        remote_[{id->remote_ip, id->remote_comm_id}] = id->handle;
        if (!id->owner) {  // destroyed meanwhile: refuse
            send_rej(id->remote_ip, id->local_comm_id, id->remote_comm_id, cm::kMsgRep,
                     cm::kRejConsumer, id->tid, nullptr, 0, false);
            erase(id->handle);
            return;
        }
        abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
        ev.private_data_len = abi::kCmRepPrivate;
        std::memcpy(ev.private_data, m.private_data, abi::kCmRepPrivate);
        post(*id, ev);
        break;
    }
    case St::kRepRcvd: {
        // The application has not established yet: ask the passive side for patience.
        cm::Mra mra;
        mra.local_comm_id = id->local_comm_id;
        mra.remote_comm_id = id->remote_comm_id;
        mra.msg_mraed = cm::kMsgRep;
        mra.service_timeout = kMraServiceTimeout;
        uint8_t out[cm::kMadLen];
        cm::encode(mra, tid, out);
        send_mad(id->remote_ip, out);
        break;
    }
    case St::kEstablished:
        send_mad(id->remote_ip, id->mad);  // our RTU was lost
        break;
    default: break;
    }
}

void CmAgent::on_rtu(const uint8_t* mad) {
    cm::Short m;
    cm::decode_rtu(mad, &m);
    Id* id = by_comm(m.remote_comm_id);
    if (!id || id->st != St::kRepSent) return;
    id->deadline = 0;
    id->st = St::kEstablished;
    leave_pending(*id);
    abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_ESTABLISHED, 0);
    post(*id, ev);
}

void CmAgent::on_rej(const uint8_t* mad) {
    cm::Rej m;
    cm::decode(mad, &m);
    Id* id = by_comm(m.remote_comm_id);
    if (!id) return;
    switch (id->st) {
    case St::kReqSent:
    case St::kMraReqRcvd:
    case St::kRepSent:
    case St::kRepRcvd: {
        id->deadline = 0;
        id->st = St::kIdle;
        leave_pending(*id);
        abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_REJECTED, m.reason);
        ev.private_data_len = abi::kCmRejPrivate;
        std::memcpy(ev.private_data, m.private_data, abi::kCmRejPrivate);
        post(*id, ev);
        if (!id->owner) erase(id->handle);
        break;
    }
    default: break;
    }
}

void CmAgent::on_mra(const uint8_t* mad) {
    cm::Mra m;
    cm::decode(mad, &m);
    Id* id = by_comm(m.remote_comm_id);
    if (!id) return;
    bool req = m.msg_mraed == cm::kMsgReq && (id->st == St::kReqSent || id->st == St::kMraReqRcvd);
    bool rep = m.msg_mraed == cm::kMsgRep && id->st == St::kRepSent;
    if (!req && !rep) return;
    if (req) id->st = St::kMraReqRcvd;
    // Wait the service timeout the peer asked for (plus one of our own timeouts for the
    // round trip), with the retries counted afresh.
    id->wait_ns = std::min(cm::timeout_ns(m.service_timeout), kMaxMraWaitNs) + kMadTimeoutNs;
    id->retries_left = kMadRetries;
    arm(*id, now_ns() + id->wait_ns);
}

void CmAgent::on_dreq(const sockaddr_in& from, const uint8_t* mad, uint64_t tid) {
    cm::Short m;
    cm::decode_dreq(mad, &m);
    Id* id = by_comm(m.remote_comm_id);
    cm::Short rep;
    rep.local_comm_id = m.remote_comm_id;
    rep.remote_comm_id = m.local_comm_id;
    if (!id || id->remote_comm_id != m.local_comm_id) {
        // No such connection (any more): answer, so the peer stops asking (as the kernel does).
        uint8_t out[cm::kMadLen];
        cm::encode_drep(rep, tid, out);
        send_mad(from.sin_addr.s_addr, out);
        return;
    }
    switch (id->st) {
    case St::kEstablished:
    case St::kRepSent:
    case St::kRepRcvd: {
        id->deadline = 0;
        leave_pending(*id);
        id->tid = tid;
        id->st = St::kDreqRcvd;
        abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
        post(*id, ev);
        break;
    }
    case St::kDreqSent: {
        // Both sides disconnect at once: answer theirs, and ours is answered too.
        cm::encode_drep(rep, tid, id->mad);
        send_mad(id->remote_ip, id->mad);
        enter_timewait(*id);
        abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
        post(*id, ev);
        break;
    }
    case St::kTimewait: {
        uint8_t out[cm::kMadLen];
        cm::encode_drep(rep, tid, out);
        send_mad(id->remote_ip, out);
        break;
    }
    default: break;
    }
}

void CmAgent::on_drep(const uint8_t* mad) {
    cm::Short m;
    cm::decode_drep(mad, &m);
    Id* id = by_comm(m.remote_comm_id);
    if (!id || id->st != St::kDreqSent) return;
    enter_timewait(*id);
    abi::CmEventRec ev = event_for(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
    post(*id, ev);
}

void CmAgent::on_sidr_req(const sockaddr_in& from, const uint8_t* mad, uint64_t tid,
                          bool may_park) {
    cm::SidrReq m;
    cm::decode(mad, &m);
    uint32_t peer = from.sin_addr.s_addr;
    auto dup = remote_.find({peer, m.request_id});
    if (dup != remote_.end()) {
        auto it = ids_.find(dup->second);
        if (it != ids_.end() && it->second->st == St::kSidrDone) send_mad(peer, it->second->mad);
        return;
    }
    cm::IpHdr hdr;
    Id* listener = nullptr;
    bool ip_cm = cm::is_rdma_cm_service(m.service_id) && cm::get_ip_hdr(m.private_data, &hdr);
    if (ip_cm) {
        auto it = ports_.find({cm::service_ps(m.service_id), cm::service_port(m.service_id)});
        if (it != ports_.end()) {
            Id& l = *ids_[it->second];
            if (l.st == St::kListen && l.owner && (!l.local_ip || l.local_ip == hdr.dst_ip))
                listener = &l;
        }
    }
    if (!listener && ip_cm && may_park &&
        park(peer, mad, tid, cm::service_ps(m.service_id), cm::service_port(m.service_id),
             m.request_id))
        return;
    if (!listener || listener->pending >= uint32_t(listener->backlog)) {
        cm::SidrRep rep;
        rep.request_id = m.request_id;
        rep.status = listener ? cm::kSidrReject : cm::kSidrNoService;
        rep.service_id = m.service_id;
        uint8_t out[cm::kMadLen];
        cm::encode(rep, tid, out);
        send_mad(peer, out);
        return;
    }
    auto c = std::make_unique<Id>();
    Id& id = *c;
    id.handle = next_handle_++;
    if (next_handle_ == 0) next_handle_ = 1;
    id.owner = listener->owner;
    id.channel = listener->channel;
    id.ps = listener->ps;
    id.qp_type = IBV_QPT_UD;
    id.st = St::kSidrReqRcvd;
    id.local_ip = hdr.dst_ip;
    id.local_port = listener->local_port;
    id.remote_ip = peer;
    id.remote_port = hdr.src_port;
    id.listener = listener->handle;
    id.remote_comm_id = m.request_id;
    id.tid = tid;
    remote_[{peer, id.remote_comm_id}] = id.handle;
    ++listener->pending;
    abi::CmEventRec ev = event_for(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    ev.handle = listener->handle;
    ev.new_handle = id.handle;
    ev.private_data_len = abi::kCmSidrReqUserPrivate;
    std::memcpy(ev.private_data, m.private_data + cm::kIpHdrLen, abi::kCmSidrReqUserPrivate);
    ids_[id.handle] = std::move(c);
    post(*ids_[id.handle], ev);
}

void CmAgent::on_sidr_rep(const uint8_t* mad) {
    cm::SidrRep m;
    cm::decode(mad, &m);
    Id* id = by_comm(m.request_id);
    if (!id || id->st != St::kSidrReqSent) return;
    id->deadline = 0;
    id->st = St::kSidrDone;
    abi::CmEventRec ev;
    if (m.status == cm::kSidrOk) {
        id->remote_qpn = m.qpn;
        id->qkey = m.qkey;
        ev = event_for(*id, RDMA_CM_EVENT_ESTABLISHED, 0);
        ev.private_data_len = abi::kCmSidrRepPrivate;
        std::memcpy(ev.private_data, m.private_data, abi::kCmSidrRepPrivate);
    } else {
        ev = event_for(*id, RDMA_CM_EVENT_UNREACHABLE, m.status);
    }
    post(*id, ev);
    if (!id->owner) erase(id->handle);
}

// ---- timers ------------------------------------------------------------------------------

void CmAgent::run_timers(uint64_t now) {
    while (!timers_.empty() && timers_.begin()->first <= now) {
        auto [deadline, handle] = *timers_.begin();
        timers_.erase(timers_.begin());
        auto it = ids_.find(handle);
        if (it == ids_.end() || it->second->deadline != deadline) continue;  // stale
        it->second->deadline = 0;
        timeout(*it->second, now);
    }
}

uint64_t CmAgent::next_timeout(uint64_t now) const {
    if (timers_.empty()) return ~uint64_t(0);
    uint64_t d = timers_.begin()->first;
    return d > now ? d - now : 1;
}

void CmAgent::timeout(Id& id, uint64_t now) {
    switch (id.st) {
    case St::kReqSent:
    case St::kMraReqRcvd:
    case St::kRepSent:
    case St::kDreqSent:
    case St::kSidrReqSent:
        if (id.retries_left > 0) {
            --id.retries_left;
            ++retransmits_;
            send_mad(id.remote_ip, id.mad);
            arm(id, now + id.wait_ns);
            return;
        }
        break;
    case St::kParked: return unpark(id);  // no listener came: rejected now
    case St::kTimewait: {
        id.st = St::kIdle;
        if (!id.owner) return erase(id.handle);
        abi::CmEventRec ev = event_for(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
        post(id, ev);
        return;
    }
    default: return;
    }
    // Out of retries.
    if (id.st == St::kDreqSent) {
        enter_timewait(id);
        abi::CmEventRec ev = event_for(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT);
        post(id, ev);
        return;
    }
    id.st = St::kIdle;
    leave_pending(id);
    if (!id.owner) return erase(id.handle);
    abi::CmEventRec ev = event_for(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
    post(id, ev);
}

// ---- events ------------------------------------------------------------------------------

abi::CmEventRec CmAgent::event_for(const Id& id, uint32_t type, int32_t status) const {
    abi::CmEventRec ev{};
    ev.event = type;
    ev.status = status;
    ev.handle = id.handle;
    ev.remote_qpn = id.remote_qpn;
    ev.remote_psn = id.remote_psn;
    ev.qkey = id.qkey;
    ev.local_ip = id.local_ip ? id.local_ip : dev_.cfg_.ipv4_be;
    ev.remote_ip = id.remote_ip;
    ev.local_port = id.local_port;
    ev.remote_port = id.remote_port;
    ev.responder_resources = id.resp_res;
    ev.initiator_depth = id.init_depth;
    ev.flow_control = id.flow;
    ev.retry_count = id.retry;
    ev.rnr_retry_count = id.rnr_retry;
    ev.srq = id.srq;
    ev.mtu = id.mtu;
    ev.ps = id.ps;
    return ev;
}

void CmAgent::post(const Id& id, abi::CmEventRec& ev) {
    if (!id.owner) return;
    auto it = channels_.find({id.owner, id.channel});
    if (it == channels_.end()) return;
    dev_.trace_.add("cm event %s id %u status %d -> pid %d", cm_event_name(ev.event), ev.handle,
                    ev.status, int(id.owner->pid));
    ev.dev_tag = it->second.dev_tag;
    if (write(it->second.fd, &ev, sizeof ev) < 0) {
        // The application is not reading its channel (or closed it): the event is lost, as
        // an event the kernel cannot queue would be.
    }
}

CmAgent::Objects CmAgent::objects() const {
    Objects o;
    for (const auto& [h, id] : ids_) {
        if (id->owner)
            ++o.owned_ids;
        else if (!id->deadline)
            ++o.stuck_ids;
    }
    o.channels = channels_.size();
    o.ports = ports_.size();
    return o;
}

std::string CmAgent::dump() const {
    std::ostringstream o;
    o << "cm ids " << ids_.size() << " channels " << channels_.size() << " mads_tx " << mads_tx_
      << " mads_rx " << mads_rx_ << " mads_bad " << mads_bad_ << " retransmits " << retransmits_
      << "\n";
    for (auto& [h, id] : ids_) {
        char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &id->local_ip, lip, sizeof lip);
        inet_ntop(AF_INET, &id->remote_ip, rip, sizeof rip);
        o << "cm_id " << h << " state " << state_name(int(id->st)) << " ps 0x" << std::hex << id->ps
          << std::dec << " local " << lip << ":" << ntohs(id->local_port) << " remote " << rip
          << ":" << ntohs(id->remote_port) << " qpn 0x" << std::hex << id->local_qpn
          << " remote_qpn 0x" << id->remote_qpn << std::dec << " pid "
          << (id->owner ? int(id->owner->pid) : 0) << "\n";
    }
    return o.str();
}

}  // namespace uroce::emu
