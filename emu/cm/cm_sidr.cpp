// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent's UD service ID resolution: SIDR_REQ and SIDR_REP received.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <cstring>

#include "emu/cm/cm_agent.h"
#include "emu/cm/cm_mad.h"

namespace uroce::emu {

void CmAgent::on_sidr_req(const CmAddr& peer, const uint8_t* mad, uint64_t tid, bool may_park) {
    cm::SidrReq m;
    cm::decode(mad, &m);
    auto dup = table_.remote.find({peer, m.request_id});
    if (dup != table_.remote.end()) {
        auto it = table_.ids.find(dup->second);
        if (it != table_.ids.end() && it->second->st == St::kSidrDone)
            send_mad(peer, it->second->mad, it->second->tos);
        return;
    }
    cm::IpHdr hdr;
    bool ip_cm;
    Id* listener = listener_for(m.service_id, m.private_data, &hdr, &ip_cm);
    if (!listener && ip_cm && may_park && park(peer, mad, tid, m.service_id, m.request_id)) return;
    if (!listener || listener->pending >= uint32_t(listener->backlog)) {
        cm::SidrRep rep;
        rep.request_id = m.request_id;
        rep.status = listener ? cm::kSidrReject : cm::kSidrNoService;
        rep.service_id = m.service_id;
        uint8_t out[cm::kMadLen];
        cm::encode(rep, tid, out);
        send_mad(peer, out, rx_tos_);
        return;
    }
    auto c = child_of(*listener, peer, hdr, IBV_QPT_UD, St::kSidrReqRcvd);
    Id& id = *c;
    id.remote_comm_id = m.request_id;
    id.tos = rx_tos_;  // a SIDR_REQ carries no path: the TOS it came with
    id.tid = tid;
    table_.remote[{peer, id.remote_comm_id}] = id.handle;
    post_connect_request(*listener, std::move(c), m.private_data + cm::kIpHdrLen,
                         abi::kCmSidrReqUserPrivate);
}

void CmAgent::on_sidr_rep(const uint8_t* mad) {
    cm::SidrRep m;
    cm::decode(mad, &m);
    Id* id = table_.by_comm(m.request_id);
    if (!id || id->st != St::kSidrReqSent) return;
    id->deadline = 0;
    id->st = St::kSidrDone;
    if (m.status == cm::kSidrOk) {
        id->remote_qpn = m.qpn;
        id->qkey = m.qkey;
        post(*id, RDMA_CM_EVENT_ESTABLISHED, 0, m.private_data, abi::kCmSidrRepPrivate);
    } else {
        post(*id, RDMA_CM_EVENT_UNREACHABLE, m.status);
    }
    if (!id->owner) table_.erase(id->handle);
}

}  // namespace uroce::emu
