// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent's connection establishment MADs received: REQ, REP, RTU, REJ and MRA.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstring>

#include "emu/cm/cm_agent.h"
#include "emu/cm/cm_mad.h"
#include "emu/engine/schedule.h"  // now_ns

namespace uroce::emu {

namespace {

// The QP type a REQ asks the passive side for (the kernel's cm_req_get_qp_type); 0: none.
uint32_t req_qp_type(const cm::Req& m) {
    if (m.transport == cm::kTransportRc) return IBV_QPT_RC;
    if (m.transport == cm::kTransportUc) return IBV_QPT_UC;
    if (m.transport == cm::kTransportExtended && m.ext_transport == cm::kExtTransportXrc)
        return IBV_QPT_XRC_RECV;
    return 0;
}

}  // namespace

std::unique_ptr<CmAgent::Id> CmAgent::child_of(const Id& listener, const CmAddr& peer,
                                               const cm::IpHdr& hdr, uint32_t qp_type, St st) {
    auto id = table_.make();
    id->owner = listener.owner;
    id->channel = listener.channel;
    id->ps = listener.ps;
    id->qp_type = qp_type;
    id->st = st;
    id->local_addr = hdr.dst;
    id->local_port = listener.local_port;
    id->remote_addr = peer;
    id->remote_port = hdr.src_port;
    id->listener = listener.handle;
    return id;
}

CmAgent::Id* CmAgent::listener_for(uint64_t service_id, const uint8_t* pd, cm::IpHdr* hdr,
                                   bool* ip_cm) {
    *ip_cm = cm::is_rdma_cm_service(service_id) && cm::get_ip_hdr(pd, hdr);
    if (!*ip_cm) return nullptr;
    auto it = table_.ports.find({cm::service_ps(service_id), cm::service_port(service_id)});
    if (it == table_.ports.end()) return nullptr;
    Id& l = *table_.ids[it->second];
    if (l.st != St::kListen || !l.owner) return nullptr;
    return listener_takes(l.local_addr, l.family, l.afonly, hdr->version, hdr->dst) ? &l : nullptr;
}

void CmAgent::on_req(const CmAddr& peer, const uint8_t* mad, uint64_t tid, bool may_park) {
    cm::Req m;
    cm::decode(mad, &m);
    // A repeated REQ: the answer was lost or is late.
    auto dup = table_.remote.find({peer, m.local_comm_id});
    if (dup != table_.remote.end()) {
        auto it = table_.ids.find(dup->second);
        if (it != table_.ids.end()) {
            Id& id = *it->second;
            if (id.st == St::kReqRcvd) {
                send_mra(id, cm::kMsgReq, peer, id.tid);
            } else if (id.st == St::kRepSent) {
                send_mad(peer, id.mad, id.tos);
            }
        }
        return;
    }
    cm::IpHdr hdr;
    bool ip_cm;
    Id* listener = listener_for(m.service_id, m.private_data, &hdr, &ip_cm);
    if (!listener && ip_cm && may_park && park(peer, mad, tid, m.service_id, m.local_comm_id))
        return;
    if (!listener) {
        send_rej(peer, 0, m.local_comm_id, cm::kMsgReq, cm::kRejInvalidServiceId, tid, nullptr, 0,
                 false, rx_tos_);
        return;
    }
    // The REQ's transport must be the listener's QP type (the kernel's
    // cma_check_req_qp_type; a mismatch ends in a consumer REJ, as the kernel's does when
    // the RDMA CM refuses the request).
    uint32_t qp_type = req_qp_type(m);
    if (qp_type != listener->qp_type || listener->pending >= uint32_t(listener->backlog)) {
        send_rej(peer, 0, m.local_comm_id, cm::kMsgReq, cm::kRejConsumer, tid, nullptr, 0, false,
                 rx_tos_);
        return;
    }
    auto c = child_of(*listener, peer, hdr, qp_type, St::kReqRcvd);
    Id& id = *c;
    id.local_comm_id = table_.new_comm_id();
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
    id.tos = m.traffic_class;
    // The path MTU: the REQ's, but no more than this port carries (the active side chose
    // its own port's).
    id.mtu = std::min<uint8_t>(std::clamp<uint8_t>(m.path_mtu, IBV_MTU_256, IBV_MTU_4096),
                               uint8_t(env_.port_mtu));
    id.tid = tid;
    table_.comm[id.local_comm_id] = id.handle;
    table_.remote[{peer, id.remote_comm_id}] = id.handle;
    post_connect_request(*listener, std::move(c), m.private_data + cm::kIpHdrLen,
                         abi::kCmReqUserPrivate);
}

void CmAgent::on_rep(const uint8_t* mad, uint64_t tid) {
    cm::Rep m;
    cm::decode(mad, &m);
    Id* id = table_.by_comm(m.remote_comm_id);
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
        table_.remote[{id->remote_addr, id->remote_comm_id}] = id->handle;
        if (!id->owner) {  // destroyed meanwhile: refuse
            send_rej(id->remote_addr, id->local_comm_id, id->remote_comm_id, cm::kMsgRep,
                     cm::kRejConsumer, id->tid, nullptr, 0, false, id->tos);
            table_.erase(id->handle);
            return;
        }
        post(*id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m.private_data, abi::kCmRepPrivate);
        break;
    }
    case St::kRepRcvd: {
        // The application has not established yet: ask the passive side for patience.
        send_mra(*id, cm::kMsgRep, id->remote_addr, tid);
        break;
    }
    case St::kEstablished:
        send_mad(id->remote_addr, id->mad, id->tos);  // our RTU was lost
        break;
    default: break;
    }
}

void CmAgent::on_rtu(const uint8_t* mad) {
    cm::Short m;
    cm::decode_rtu(mad, &m);
    Id* id = table_.by_comm(m.remote_comm_id);
    if (!id || id->st != St::kRepSent) return;
    id->deadline = 0;
    id->st = St::kEstablished;
    table_.leave_pending(*id);
    post(*id, RDMA_CM_EVENT_ESTABLISHED);
}

void CmAgent::on_rej(const uint8_t* mad) {
    cm::Rej m;
    cm::decode(mad, &m);
    Id* id = table_.by_comm(m.remote_comm_id);
    if (!id) return;
    switch (id->st) {
    case St::kReqSent:
    case St::kMraReqRcvd:
    case St::kRepSent:
    case St::kRepRcvd: {
        id->deadline = 0;
        id->st = St::kIdle;
        table_.leave_pending(*id);
        post(*id, RDMA_CM_EVENT_REJECTED, m.reason, m.private_data, abi::kCmRejPrivate);
        if (!id->owner) table_.erase(id->handle);
        break;
    }
    default: break;
    }
}

void CmAgent::on_mra(const uint8_t* mad) {
    cm::Mra m;
    cm::decode(mad, &m);
    Id* id = table_.by_comm(m.remote_comm_id);
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

}  // namespace uroce::emu
