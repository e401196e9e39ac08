// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// QP1's packets for the CM agent: MADs out (with their trace lines, REJs among them), MADs in
// by attribute, and requests parked until their listener comes.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "emu/cm/cm_agent.h"
#include "emu/cm/cm_mad.h"
#include "emu/engine/device.h"

namespace uroce::emu {

namespace {

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

}  // namespace

// ---- packets ---------------------------------------------------------------------------------

CmAddr CmAgent::own_addr() const {
    CmAddr a;
    env_.config.endpoint().gid(a.data());
    return a;
}

uint32_t CmAgent::scope() const {
    const net::Endpoint self = env_.config.endpoint();
    return self.is_v6() ? self.v6.sin6_scope_id : 0;
}

void CmAgent::send_mad(const CmAddr& to_addr, const uint8_t* mad, uint8_t tos) {
    uint32_t slot;
    uint8_t* buf = env_.wire.tx_begin(&slot);
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
    // A link-local peer is on the device's interface (its address's scope).
    net::Endpoint to = net::Endpoint::from_gid(to_addr.data(), env_.config.port, scope());
    if (to.is_v6() && !IN6_IS_ADDR_LINKLOCAL(&to.v6.sin6_addr)) to.v6.sin6_scope_id = 0;
    ++mads_tx_;
    trace_mad("tx", "to", to_addr, mad);
    // TOS: the connection's (the id's, or the REQ's on the passive side), as the kernel's CM
    // sends with the path's traffic class; TTL: the path's hop limit, 64.
    env_.wire.transmit(slot, h + cm::kMadLen, to, nullptr, net::IpMarks{tos, net::kDefaultTtl});
}

// "cm tx REQ to 127.0.0.3 comm 0x... 0x..." (the first two words after the MAD header are
// the local and remote communication IDs, or a SIDR request ID); a REJ adds its reason.
void CmAgent::trace_mad(const char* dir, const char* prep, const CmAddr& peer, const uint8_t* mad) {
    cm::MadHdr h;
    if (!cm::parse_hdr(mad, &h)) return;
    const std::string s = cm_addr_str(peer, scope());
    const char* ip = s.c_str();
    uint32_t w[2];
    std::memcpy(w, mad + 24, sizeof w);
    if (h.attr_id == cm::kAttrRej) {
        cm::Rej m;
        cm::decode(mad, &m);
        env_.trace.add("cm %s REJ %s %s comm 0x%x 0x%x reason %u", dir, prep, ip, ntohl(w[0]),
                       ntohl(w[1]), m.reason);
        return;
    }
    env_.trace.add("cm %s %s %s %s comm 0x%x 0x%x", dir, attr_name(h.attr_id), prep, ip,
                   ntohl(w[0]), ntohl(w[1]));
}

void CmAgent::send_rej(const CmAddr& to, uint32_t local_comm, uint32_t remote_comm, uint8_t msg,
                       uint16_t reason, uint64_t tid, const uint8_t* pd, size_t pd_len,
                       bool ari_guid, uint8_t tos) {
    cm::Rej m;
    m.local_comm_id = local_comm;
    m.remote_comm_id = remote_comm;
    m.msg_rejected = msg;
    m.reason = reason;
    if (ari_guid) {  // a timeout REJ names the CA that timed out
        uint64_t g = htobe64(env_.guid);
        std::memcpy(m.ari, &g, 8);
        m.ari_len = 8;
    }
    if (pd && pd_len) std::memcpy(m.private_data, pd, std::min(pd_len, sizeof m.private_data));
    uint8_t mad[cm::kMadLen];
    cm::encode(m, tid, mad);
    send_mad(to, mad, tos);
}

void CmAgent::send_mra(const Id& id, uint8_t msg, const CmAddr& to, uint64_t tid) {
    cm::Mra m;
    m.local_comm_id = id.local_comm_id;
    m.remote_comm_id = id.remote_comm_id;
    m.msg_mraed = msg;
    m.service_timeout = kMraServiceTimeout;
    uint8_t mad[cm::kMadLen];
    cm::encode(m, tid, mad);
    send_mad(to, mad, id.tos);
}

void CmAgent::send_sidr_rep(Id& id, uint8_t status, const uint8_t* pd, uint32_t pd_len,
                            uint32_t qpn, uint32_t qkey) {
    cm::SidrRep m;
    m.request_id = id.remote_comm_id;
    m.status = status;
    m.qpn = qpn;
    m.service_id = cm::service_id(id.ps, ntohs(id.local_port));
    m.qkey = qkey;
    if (pd_len) std::memcpy(m.private_data, pd, pd_len);
    cm::encode(m, id.tid, id.mad);
    send_mad(id.remote_addr, id.mad, id.tos);
}

void CmAgent::on_mad(const net::Endpoint& from, const net::Packet& p) {
    ++mads_rx_;
    if (p.bth.opcode != net::kUdSendOnly) {
        ++mads_bad_;
        return env_.counters.drop(net::DropReason::kOpNotForQp);
    }
    if (p.deth.qkey != cm::kGsiQkey) {
        ++mads_bad_;
        return env_.counters.drop(net::DropReason::kBadQkey);
    }
    cm::MadHdr h;
    if (p.payload_len < cm::kMadLen || !cm::parse_hdr(p.payload, &h)) {
        ++mads_bad_;  // not a CM MAD we speak (other management classes are not served)
        return env_.counters.drop(net::DropReason::kBadLength);
    }
    const uint8_t* mad = p.payload;
    rx_tos_ = p.ip.tos;
    CmAddr peer;
    from.gid(peer.data());
    trace_mad("rx", "from", peer, mad);
    switch (h.attr_id) {
    case cm::kAttrReq: return on_req(peer, mad, h.tid);
    case cm::kAttrRep: return on_rep(mad, h.tid);
    case cm::kAttrRtu: return on_rtu(mad);
    case cm::kAttrRej: return on_rej(mad);
    case cm::kAttrMra: return on_mra(mad);
    case cm::kAttrDreq: return on_dreq(peer, mad, h.tid);
    case cm::kAttrDrep: return on_drep(mad);
    case cm::kAttrSidrReq: return on_sidr_req(peer, mad, h.tid);
    case cm::kAttrSidrRep: return on_sidr_rep(mad);
    default: ++mads_bad_; return;  // LAP/APR/ClassPortInfo: not supported, ignored
    }
}

// Keeps a request for a port with no listener (as an id in state kParked, so duplicates of
// it are recognised and its timer runs with the others) until a listener comes or kParkNs
// pass. False when too many are waiting already.
bool CmAgent::park(const CmAddr& peer, const uint8_t* mad, uint64_t tid, uint64_t service_id,
                   uint32_t remote_id) {
    if (parked_ >= kMaxParked) return false;
    auto p = table_.make();
    p->st = St::kParked;
    p->ps = cm::service_ps(service_id);
    p->local_port = htons(cm::service_port(service_id));
    p->remote_addr = peer;
    p->remote_comm_id = remote_id;
    p->tid = tid;
    p->tos = rx_tos_;
    std::memcpy(p->mad, mad, cm::kMadLen);
    table_.remote[{peer, remote_id}] = p->handle;
    arm(*p, now_ns() + kParkNs);
    ++parked_;
    table_.ids[p->handle] = std::move(p);
    return true;
}

// A parked request is handled again, now without parking: a listener takes it, or the
// sender gets the REJ (SIDR_REP) a request for nobody gets.
void CmAgent::unpark(Id& id) {
    uint8_t mad[cm::kMadLen];
    std::memcpy(mad, id.mad, sizeof mad);
    const CmAddr from = id.remote_addr;
    uint64_t tid = id.tid;
    rx_tos_ = id.tos;  // answers go with the TOS the request came with
    --parked_;
    table_.erase(id.handle);
    cm::MadHdr h;
    if (!cm::parse_hdr(mad, &h)) return;
    if (h.attr_id == cm::kAttrReq) on_req(from, mad, tid, false);
    if (h.attr_id == cm::kAttrSidrReq) on_sidr_req(from, mad, tid, false);
}

}  // namespace uroce::emu
