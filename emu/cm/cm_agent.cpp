// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent: its event channels, session teardown, timers, the events it posts and its
// dump. Its ids are in cm_id_table.cpp; the protocol in cm_requests.cpp (calls from
// librdmacm), cm_mad_io.cpp (QP1 packets in and out), cm_connect.cpp (REQ/REP/RTU/REJ/MRA),
// cm_disconnect.cpp (DREQ/DREP/TimeWait) and cm_sidr.cpp (UD service ID resolution).
#include "emu/cm/cm_agent.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "emu/cm/cm_mad.h"
#include "emu/control/trace.h"
#include "emu/engine/schedule.h"  // now_ns
#include "emu/verbs/objects.h"

namespace uroce::emu {

namespace {

const char* state_name(int st) {
    static const char* kNames[] = {"idle",          "listen",    "req_sent", "mra_req_rcvd",
                                   "req_rcvd",      "rep_sent",  "rep_rcvd", "established",
                                   "dreq_sent",     "dreq_rcvd", "timewait", "sidr_req_sent",
                                   "sidr_req_rcvd", "sidr_done", "parked"};
    return st >= 0 && st < int(sizeof kNames / sizeof kNames[0]) ? kNames[st] : "?";
}

const char* cm_event_name(uint32_t e) {
    static const char* kNames[] = {
        "ADDR_RESOLVED",   "ADDR_ERROR",       "ROUTE_RESOLVED", "ROUTE_ERROR",
        "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR",  "UNREACHABLE",
        "REJECTED",        "ESTABLISHED",      "DISCONNECTED",   "DEVICE_REMOVAL",
        "MULTICAST_JOIN",  "MULTICAST_ERROR",  "ADDR_CHANGE",    "TIMEWAIT_EXIT"};
    return e < sizeof kNames / sizeof kNames[0] ? kNames[e] : "?";
}

}  // namespace

CmAgent::CmAgent(const CmEnv& env) : env_(env), rng_(std::random_device{}()) {
    table_.next_comm = rng_();
    tid_hi_ = rng_();
    gsi_psn_ = rng_() & 0xffffff;
}

CmAgent::~CmAgent() {
    for (auto& [key, ch] : channels_)
        if (ch.fd >= 0) close(ch.fd);
}

uint64_t CmAgent::new_tid() { return (tid_hi_ << 32) | ++tid_lo_; }

void CmAgent::close_session(Session& s) {
    std::vector<uint32_t> mine;
    for (auto& [h, id] : table_.ids)
        if (id->owner == &s) mine.push_back(h);
    // Listeners first, so their requests are not counted against a backlog that is going.
    std::stable_partition(mine.begin(), mine.end(),
                          [&](uint32_t h) { return table_.ids[h]->st == St::kListen; });
    for (uint32_t h : mine) {
        auto it = table_.ids.find(h);
        if (it != table_.ids.end() && it->second->owner == &s) destroy(*it->second);
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

void CmAgent::send_request(Id& id) {
    id.retries_left = kMadRetries;
    id.wait_ns = kMadTimeoutNs;
    send_mad(id.remote_addr, id.mad, id.tos);
    arm(id, now_ns() + id.wait_ns);
}

void CmAgent::arm(Id& id, uint64_t deadline) {
    id.deadline = deadline;
    if (deadline) timers_.emplace(deadline, id.handle);
}

// ---- timers ------------------------------------------------------------------------------

void CmAgent::run_timers(uint64_t now) {
    while (!timers_.empty() && timers_.begin()->first <= now) {
        auto [deadline, handle] = *timers_.begin();
        timers_.erase(timers_.begin());
        auto it = table_.ids.find(handle);
        if (it == table_.ids.end() || it->second->deadline != deadline) continue;  // stale
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
            send_mad(id.remote_addr, id.mad, id.tos);
            arm(id, now + id.wait_ns);
            return;
        }
        break;
    case St::kParked: return unpark(id);  // no listener came: rejected now
    case St::kTimewait: {
        id.st = St::kIdle;
        if (!id.owner) return table_.erase(id.handle);
        return post(id, RDMA_CM_EVENT_TIMEWAIT_EXIT);
    }
    default: return;
    }
    // Out of retries.
    if (id.st == St::kDreqSent) {
        enter_timewait(id);
        return post(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT);
    }
    id.st = St::kIdle;
    table_.leave_pending(id);
    if (!id.owner) return table_.erase(id.handle);
    post(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
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
    const CmAddr local = cm_addr_any(id.local_addr) ? own_addr() : id.local_addr;
    std::memcpy(ev.local_addr, local.data(), 16);
    std::memcpy(ev.remote_addr, id.remote_addr.data(), 16);
    ev.local_port = id.local_port;
    ev.remote_port = id.remote_port;
    ev.responder_resources = id.resp_res;
    ev.initiator_depth = id.init_depth;
    ev.flow_control = id.flow;
    ev.retry_count = id.retry;
    ev.rnr_retry_count = id.rnr_retry;
    ev.srq = id.srq;
    ev.tos = id.tos;
    ev.mtu = id.mtu;
    ev.ps = id.ps;
    return ev;
}

void CmAgent::post(const Id& id, abi::CmEventRec& ev) {
    if (!id.owner) return;
    auto it = channels_.find({id.owner, id.channel});
    if (it == channels_.end()) return;
    env_.trace.add("cm event %s id %u status %d -> pid %d", cm_event_name(ev.event), ev.handle,
                   ev.status, int(id.owner->pid));
    ev.dev_tag = it->second.dev_tag;
    if (write(it->second.fd, &ev, sizeof ev) < 0) {
        // The application is not reading its channel (or closed it): the event is lost, as
        // an event the kernel cannot queue would be.
    }
}

void CmAgent::post(const Id& id, uint32_t type, int32_t status, const uint8_t* pd,
                   uint32_t pd_len) {
    abi::CmEventRec ev = event_for(id, type, status);
    ev.private_data_len = uint8_t(pd_len);
    if (pd_len) std::memcpy(ev.private_data, pd, pd_len);
    post(id, ev);
}

void CmAgent::post_connect_request(Id& listener, std::unique_ptr<Id> child, const uint8_t* user_pd,
                                   uint32_t user_pd_len) {
    Id& id = *child;
    ++listener.pending;
    abi::CmEventRec ev = event_for(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    ev.handle = listener.handle;
    ev.new_handle = id.handle;
    ev.private_data_len = uint8_t(user_pd_len);
    std::memcpy(ev.private_data, user_pd, user_pd_len);
    table_.ids[id.handle] = std::move(child);
    post(id, ev);
}

CmAgent::Objects CmAgent::objects() const {
    Objects o;
    for (const auto& [h, id] : table_.ids) {
        if (id->owner)
            ++o.owned_ids;
        else if (!id->deadline)
            ++o.stuck_ids;
    }
    o.channels = channels_.size();
    o.ports = table_.ports.size();
    return o;
}

std::string CmAgent::dump() const {
    std::ostringstream o;
    o << "cm ids " << table_.ids.size() << " channels " << channels_.size() << " mads_tx "
      << mads_tx_ << " mads_rx " << mads_rx_ << " mads_bad " << mads_bad_ << " retransmits "
      << retransmits_ << "\n";
    for (auto& [h, id] : table_.ids) {
        // IPv6 addresses in brackets ("[fd77::1]:7174"); a wildcard as its family's.
        const bool v6 = id->family == AF_INET6;
        o << "cm_id " << h << " state " << state_name(int(id->st)) << " ps 0x" << std::hex << id->ps
          << std::dec << " local " << cm_addr_port(id->local_addr, id->local_port, v6, scope())
          << " remote " << cm_addr_port(id->remote_addr, id->remote_port, v6, scope()) << " qpn 0x"
          << std::hex << id->local_qpn << " remote_qpn 0x" << id->remote_qpn << std::dec << " pid "
          << (id->owner ? int(id->owner->pid) : 0) << "\n";
    }
    return o.str();
}

}  // namespace uroce::emu
