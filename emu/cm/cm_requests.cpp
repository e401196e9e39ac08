// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent's answers to librdmacm's calls (rdma_bind_addr, rdma_listen, rdma_connect,
// rdma_accept, rdma_reject, rdma_destroy_id, ...), and their trace lines.
#include <arpa/inet.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emu/cm/cm_agent.h"
#include "emu/cm/cm_mad.h"
#include "emu/control/trace.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

namespace {

bool known_ps(uint32_t ps) {
    return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IB || ps == RDMA_PS_IPOIB;
}

CmAddr addr_of(const uint8_t* a16) {
    CmAddr a;
    std::memcpy(a.data(), a16, 16);
    return a;
}

}  // namespace

// ---- requests from the library -------------------------------------------------------------

void CmAgent::request(Session& s, const abi::CmReq& r, abi::CmResp& out, int in_fd) {
    using abi::CmOp;
    int err = 0;
    Id* id = nullptr;
    switch (r.cm_op) {
    case CmOp::kChannel: {
        // The library passes the write end of the channel's pipe (docs/cm.md); we keep a copy.
        // Anything but a pipe is refused: we write to it from the engine's control path.
        struct stat st = {};
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
        // As the kernel's ucma_close: the ids whose events went there go with the channel
        // (REJ, DREQ, ... as their state requires); a later rdma_destroy_id finds none.
        std::vector<uint32_t> orphans;
        for (auto& [h, p] : table_.ids)
            if (p->owner == &s && p->channel == r.channel) orphans.push_back(h);
        for (uint32_t h : orphans)
            if (Id* o = table_.find(s, h)) destroy(*o);
        break;
    }
    case CmOp::kBind: err = bind(s, r, out); break;
    case CmOp::kListen:
        if (!(id = table_.find(s, r.handle)) || !id->bound ||
            (id->st != St::kIdle && id->st != St::kListen)) {
            err = EINVAL;
            break;
        }
        id->st = St::kListen;
        id->backlog = r.backlog > 0 && r.backlog < kDefaultBacklog ? r.backlog : kDefaultBacklog;
        {
            // Requests that arrived for this port before the listener did.
            std::vector<uint32_t> waiting;
            for (auto& [h, p] : table_.ids)
                if (p->st == St::kParked && p->ps == id->ps && p->local_port == id->local_port)
                    waiting.push_back(h);
            for (uint32_t h : waiting) unpark(*table_.ids[h]);
        }
        break;
    case CmOp::kConnect: err = (id = table_.find(s, r.handle)) ? connect(*id, r) : EINVAL; break;
    case CmOp::kAccept: err = (id = table_.find(s, r.handle)) ? accept(*id, r) : EINVAL; break;
    case CmOp::kEstablish:
        if (!(id = table_.find(s, r.handle)) || id->st != St::kRepRcvd) {
            err = EINVAL;
            break;
        }
        {
            cm::Short rtu;
            rtu.local_comm_id = id->local_comm_id;
            rtu.remote_comm_id = id->remote_comm_id;
            cm::encode_rtu(rtu, id->tid, id->mad);
            send_mad(id->remote_addr, id->mad, id->tos);
            id->st = St::kEstablished;  // the RTU is kept in id->mad for a repeated REP
        }
        break;
    case CmOp::kReject: err = (id = table_.find(s, r.handle)) ? reject(*id, r) : EINVAL; break;
    case CmOp::kDisconnect: err = (id = table_.find(s, r.handle)) ? disconnect(*id) : EINVAL; break;
    case CmOp::kDestroy:
        if (!(id = table_.find(s, r.handle))) {
            err = EINVAL;
            break;
        }
        destroy(*id);
        break;
    case CmOp::kMigrate:
        if (!(id = table_.find(s, r.handle)) || !channels_.count({&s, r.channel})) {
            err = EINVAL;
            break;
        }
        id->channel = r.channel;
        break;
    case CmOp::kNotify:
        if (!(id = table_.find(s, r.handle))) {
            err = EINVAL;
            break;
        }
        // Traffic on a QP whose RTU was lost: the connection is established (IBTA 12.9.7).
        if (r.event == IBV_EVENT_COMM_EST && id->st == St::kRepSent) {
            id->st = St::kEstablished;
            id->deadline = 0;
            table_.leave_pending(*id);
            post(*id, RDMA_CM_EVENT_ESTABLISHED);
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
    if (out.err) {
        env_.trace.add("cm pid %d %s id %u failed: %s", int(s.pid), what, handle,
                       strerrorname_np(out.err) ? strerrorname_np(out.err) : "?");
    } else if (r.cm_op == CmOp::kBind || r.cm_op == CmOp::kListen) {
        auto it = table_.ids.find(handle);
        const Id* id = it == table_.ids.end() ? nullptr : it->second.get();
        const std::string a =
            id ? cm_addr_port(id->local_addr, id->local_port, id->family == AF_INET6, scope())
               : cm_addr_port(addr_of(r.local_addr), 0, r.family == AF_INET6);
        env_.trace.add("cm pid %d %s id %u %s ps 0x%x", int(s.pid), what, handle, a.c_str(),
                       id ? id->ps : r.ps);
    } else if (r.cm_op == CmOp::kConnect) {
        const std::string a = cm_addr_port(addr_of(r.remote_addr), r.remote_port, false, scope());
        env_.trace.add("cm pid %d connect id %u to %s qp 0x%x", int(s.pid), handle, a.c_str(),
                       r.qpn);
    } else {
        env_.trace.add("cm pid %d %s id %u", int(s.pid), what, handle);
    }
}

int CmAgent::bind(Session& s, const abi::CmReq& r, abi::CmResp& out) {
    if (!known_ps(r.ps)) return EINVAL;
    if (!channels_.count({&s, r.channel})) return EINVAL;
    const CmAddr local = addr_of(r.local_addr);
    if (!cm_addr_any(local) && local != own_addr()) return EADDRNOTAVAIL;
    uint16_t port = ntohs(r.local_port);
    if (port == 0) {
        // An ephemeral port, as the kernel picks them (ip_local_port_range's default).
        constexpr uint32_t kLo = 32768, kHi = 60999;
        uint32_t start = kLo + rng_() % (kHi - kLo + 1);
        for (uint32_t i = 0; i <= kHi - kLo; ++i) {
            uint32_t p = kLo + (start - kLo + i) % (kHi - kLo + 1);
            if (!table_.ports.count({r.ps, uint16_t(p)})) {
                port = uint16_t(p);
                break;
            }
        }
        if (port == 0) return EADDRINUSE;
    } else if (table_.ports.count({r.ps, port})) {
        return EADDRINUSE;
    }
    auto id = table_.make();
    id->owner = &s;
    id->channel = r.channel;
    id->ps = r.ps;
    id->qp_type = r.qp_type;
    id->bound = true;
    id->local_addr = local;
    // A wildcard's family (a bound address's is its own) and afonly (the library sends
    // the kernel's: always for AF_INET).
    id->family = cm_addr_any(local) ? r.family : cm_addr_v4(local) ? AF_INET : AF_INET6;
    id->afonly = r.afonly;
    id->local_port = htons(port);
    table_.ports[{r.ps, port}] = id->handle;
    out.handle = id->handle;
    out.port = id->local_port;
    table_.ids[id->handle] = std::move(id);
    return 0;
}

int CmAgent::connect(Id& id, const abi::CmReq& r) {
    const CmAddr remote = addr_of(r.remote_addr);
    // The peer is of the device's IP version (the library resolved it so; the kernel
    // refuses a path between versions).
    if (id.st != St::kIdle || !id.bound || cm_addr_any(remote) ||
        cm_addr_v4(remote) != cm_addr_v4(own_addr()))
        return EINVAL;
    if (r.private_data_len >
        (r.qp_type == IBV_QPT_UD ? abi::kCmSidrReqUserPrivate : abi::kCmReqUserPrivate))
        return EINVAL;
    id.qp_type = r.qp_type;
    id.remote_addr = remote;
    id.remote_port = r.remote_port;
    id.local_qpn = r.qpn & 0xffffff;
    id.local_psn = r.psn & 0xffffff;
    id.resp_res = r.responder_resources;
    id.init_depth = r.initiator_depth;
    id.flow = r.flow_control;
    id.retry = r.retry_count & 7;
    id.rnr_retry = r.rnr_retry_count & 7;
    id.srq = r.srq;
    id.tos = r.tos;
    id.mtu = r.mtu >= IBV_MTU_256 && r.mtu <= IBV_MTU_4096 ? r.mtu : uint8_t(IBV_MTU_1024);
    // The CMA header names the id's addresses, IPv4 or IPv6 (the kernel's cma_format_hdr).
    cm::IpHdr hdr;
    hdr.src_port = id.local_port;
    hdr.src = cm_addr_any(id.local_addr) ? own_addr() : id.local_addr;
    hdr.dst = remote;
    id.tid = new_tid();
    uint64_t sid = cm::service_id(id.ps, ntohs(r.remote_port));
    if (id.qp_type == IBV_QPT_UD) {
        cm::SidrReq m;
        id.local_comm_id = table_.new_comm_id();  // the SIDR request ID
        table_.comm[id.local_comm_id] = id.handle;
        m.request_id = id.local_comm_id;
        m.service_id = sid;
        cm::put_ip_hdr(hdr, m.private_data);
        std::memcpy(m.private_data + cm::kIpHdrLen, r.private_data, r.private_data_len);
        cm::encode(m, id.tid, id.mad);
        id.st = St::kSidrReqSent;
    } else {
        cm::Req m;
        id.local_comm_id = table_.new_comm_id();
        table_.comm[id.local_comm_id] = id.handle;
        m.local_comm_id = id.local_comm_id;
        m.service_id = sid;
        m.local_ca_guid = env_.guid;
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
        std::memcpy(m.local_gid, hdr.src.data(), 16);
        std::memcpy(m.remote_gid, remote.data(), 16);
        m.packet_rate = 16;  // 100 Gb/s, what the port reports
        m.traffic_class = id.tos;
        m.hop_limit = 64;
        m.local_ack_timeout = 14;
        cm::put_ip_hdr(hdr, m.private_data);
        std::memcpy(m.private_data + cm::kIpHdrLen, r.private_data, r.private_data_len);
        cm::encode(m, id.tid, id.mad);
        id.st = St::kReqSent;
    }
    send_request(id);
    return 0;
}

int CmAgent::accept(Id& id, const abi::CmReq& r) {
    if (id.st == St::kSidrReqRcvd) {
        if (r.private_data_len > abi::kCmSidrRepPrivate) return EINVAL;
        send_sidr_rep(id, cm::kSidrOk, r.private_data, r.private_data_len, r.qpn & 0xffffff,
                      r.qkey);
        id.st = St::kSidrDone;  // id.mad answers a repeated SIDR_REQ
        table_.leave_pending(id);
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
    m.local_ca_guid = env_.guid;
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
    send_request(id);
    return 0;
}

int CmAgent::reject(Id& id, const abi::CmReq& r) {
    if (id.st == St::kSidrReqRcvd) {
        if (r.private_data_len > abi::kCmSidrRepPrivate) return EINVAL;
        send_sidr_rep(id, cm::kSidrReject, r.private_data, r.private_data_len);
        id.st = St::kSidrDone;
        table_.leave_pending(id);
        return 0;
    }
    if (id.st != St::kReqRcvd) return EINVAL;
    if (r.private_data_len > abi::kCmRejPrivate) return EINVAL;
    send_rej(id.remote_addr, id.local_comm_id, id.remote_comm_id, cm::kMsgReq, cm::kRejConsumer,
             id.tid, r.private_data, r.private_data_len, false, id.tos);
    id.st = St::kIdle;
    table_.leave_pending(id);
    return 0;
}

void CmAgent::destroy(Id& id) {
    uint32_t h = id.handle;
    table_.release_port(id);
    table_.leave_pending(id);
    id.owner = nullptr;  // no more events
    switch (id.st) {
    case St::kReqSent:
    case St::kMraReqRcvd:
        send_rej(id.remote_addr, id.local_comm_id, id.remote_comm_id, cm::kMsgReq, cm::kRejTimeout,
                 id.tid, nullptr, 0, true, id.tos);
        break;
    case St::kReqRcvd:
        send_rej(id.remote_addr, id.local_comm_id, id.remote_comm_id, cm::kMsgReq, cm::kRejConsumer,
                 id.tid, nullptr, 0, false, id.tos);
        break;
    case St::kRepSent:
    case St::kRepRcvd:
        send_rej(id.remote_addr, id.local_comm_id, id.remote_comm_id, cm::kMsgRep, cm::kRejConsumer,
                 id.tid, nullptr, 0, false, id.tos);
        break;
    case St::kSidrReqRcvd: send_sidr_rep(id, cm::kSidrReject); break;
    case St::kEstablished:
    case St::kDreqRcvd:
        disconnect(id);  // DREQ (then retransmitted), or DREP and TimeWait
        return;
    case St::kDreqSent:
    case St::kTimewait: return;  // the protocol finishes on its own; the id goes when it does
    default: break;
    }
    table_.erase(h);
}

}  // namespace uroce::emu
