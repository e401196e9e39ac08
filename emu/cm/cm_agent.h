// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's connection manager agent: the IB CM protocol on QP1 (the GSI QP) over
// RoCEv2, on behalf of librdmacm. It owns the CM ids of every session (listeners, connection
// requests, connections), sends and retransmits REQ/REP/RTU/REJ/MRA/DREQ/DREP and
// SIDR_REQ/SIDR_REP MADs, and reports what happens as rdma_cm events written into the
// sessions' event channel pipes. Everything here runs on the engine thread. See docs/cm.md;
// cm_agent.cpp says which file holds which part. Of the device it uses what CmEnv names
// (emu/cm/cm_env.h): the wire, counters, trace, config, GUID and port MTU.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "emu/abi/cm_protocol.h"
#include "emu/cm/cm_env.h"
#include "emu/cm/cm_id_table.h"
#include "net/endpoint.h"
#include "net/headers.h"

namespace uroce::emu {

namespace cm {
struct IpHdr;
}

struct Session;

class CmAgent {
public:
    // MAD retransmission: every request MAD (REQ, REP, DREQ, SIDR_REQ) is sent again after
    // kMadTimeoutNs without an answer, kMadRetries times; then the operation fails (REQ:
    // RDMA_CM_EVENT_UNREACHABLE, 2.5 s after rdma_connect). An MRA stretches the wait.
    static constexpr uint64_t kMadTimeoutNs = kCmMadTimeoutNs;  // 500 ms
    static constexpr int kMadRetries = 4;
    static constexpr uint8_t kMadTimeoutCode = 17;     // 4.096 us * 2^17 = 537 ms, as sent in REQ
    static constexpr uint8_t kMraServiceTimeout = 20;  // 4.3 s: what we ask for in an MRA
    static constexpr uint64_t kMaxMraWaitNs = 16'000'000'000ull;
    // A connection stays in TimeWait this long after DREQ/DREP before TIMEWAIT_EXIT. Like
    // the kernel's (about twice the ACK timeout), long enough that a program which exits
    // right after rdma_disconnect is gone before the event: rping 44 tears its event
    // channel down under its CM thread, which an early TIMEWAIT_EXIT would wake.
    static constexpr uint64_t kTimewaitNs = 1'000'000'000;
    static constexpr int kDefaultBacklog = 1024;
    // A REQ or SIDR_REQ for a port nobody listens on waits this long for a listener before
    // it is rejected (docs/cm.md: programs that close and reopen their listener between
    // connection phases, as perftest -R does, rely on the peer being slower than that).
    static constexpr uint64_t kParkNs = 200'000'000;
    static constexpr size_t kMaxParked = 64;

    explicit CmAgent(const CmEnv& env);
    ~CmAgent();
    CmAgent(const CmAgent&) = delete;
    CmAgent& operator=(const CmAgent&) = delete;

    // A CmReq from session s. in_fd: the descriptor that came with it (-1: none), which the
    // caller closes afterwards (kChannel keeps a copy).
    void request(Session& s, const abi::CmReq& r, abi::CmResp& out, int in_fd);
    // A packet for QP1 that passed the ICRC and P_Key checks.
    void on_mad(const net::Endpoint& from, const net::Packet& p);
    // The session is gone: its ids end as rdma_destroy_id would end them, its channels close.
    void close_session(Session& s);
    void run_timers(uint64_t now);
    // Nanoseconds until the next CM timer from now (~0 when there is none).
    uint64_t next_timeout(uint64_t now) const;
    std::string dump() const;
    // What the agent holds. An id whose session closed (no owner) finishes its protocol and
    // goes when its timer ends it; one with neither owner nor timer would stay for ever.
    struct Objects {
        size_t owned_ids = 0, stuck_ids = 0, channels = 0, ports = 0;
        bool operator==(const Objects&) const = default;
    };
    Objects objects() const;

private:
    // Ids and their table are in cm_id_table.h; the protocol code names them as before.
    using St = CmState;
    using Id = CmId;
    struct Channel {
        int fd = -1;
        uint32_t dev_tag = 0;
    };

    uint64_t new_tid();
    int bind(Session& s, const abi::CmReq& r, abi::CmResp& out);
    int connect(Id& id, const abi::CmReq& r);
    int accept(Id& id, const abi::CmReq& r);
    int reject(Id& id, const abi::CmReq& r);
    int disconnect(Id& id);
    void destroy(Id& id);

    // `tos`: the IPv4 TOS it leaves with (an id's MADs: the id's; answers that no id
    // sends: rx_tos_, as the kernel answers with the traffic class of the request's GRH).
    void send_mad(const CmAddr& to, const uint8_t* mad, uint8_t tos);
    void trace_request(const Session& s, const abi::CmReq& r, const abi::CmResp& out);
    void trace_mad(const char* dir, const char* prep, const CmAddr& peer, const uint8_t* mad);
    CmAddr own_addr() const;    // the device's address
    uint32_t scope() const;     // its interface: link-local peers are on it (and print with it)
    void send_request(Id& id);  // id.mad, armed for kMadRetries retransmissions
    void arm(Id& id, uint64_t deadline);
    void timeout(Id& id, uint64_t now);
    void enter_timewait(Id& id);

    void on_req(const CmAddr& peer, const uint8_t* mad, uint64_t tid, bool may_park = true);
    void on_rep(const uint8_t* mad, uint64_t tid);
    void on_rtu(const uint8_t* mad);
    void on_rej(const uint8_t* mad);
    void on_mra(const uint8_t* mad);
    void on_dreq(const CmAddr& peer, const uint8_t* mad, uint64_t tid);
    void on_drep(const uint8_t* mad);
    void on_sidr_req(const CmAddr& peer, const uint8_t* mad, uint64_t tid, bool may_park = true);
    // The id a REQ or SIDR REQ from `peer` makes on `listener` (cm_connect.cpp).
    std::unique_ptr<Id> child_of(const Id& listener, const CmAddr& peer, const cm::IpHdr& hdr,
                                 uint32_t qp_type, St st);
    // The listener that takes a REQ or SIDR_REQ for `service_id`, by the RDMA CM IP header
    // its private data `pd` begins with (read into *hdr). nullptr: none, or (*ip_cm false)
    // not an RDMA CM request.
    Id* listener_for(uint64_t service_id, const uint8_t* pd, cm::IpHdr* hdr, bool* ip_cm);
    // The request waits (kParkNs) for a listener on its service ID's port; false: too many do.
    bool park(const CmAddr& peer, const uint8_t* mad, uint64_t tid, uint64_t service_id,
              uint32_t remote_id);
    void unpark(Id& id);
    void on_sidr_rep(const uint8_t* mad);
    // An MRA for the `msg` (cm::kMsgReq, kMsgRep) the id received.
    void send_mra(const Id& id, uint8_t msg, const CmAddr& to, uint64_t tid);
    // The answer to the SIDR_REQ the id holds, kept in id.mad for a repeated SIDR_REQ; the QP
    // and Q_Key only with kSidrOk.
    void send_sidr_rep(Id& id, uint8_t status, const uint8_t* pd = nullptr, uint32_t pd_len = 0,
                       uint32_t qpn = 0, uint32_t qkey = 0);
    void send_rej(const CmAddr& to, uint32_t local_comm, uint32_t remote_comm, uint8_t msg,
                  uint16_t reason, uint64_t tid, const uint8_t* pd, size_t pd_len, bool ari_guid,
                  uint8_t tos);

    abi::CmEventRec event_for(const Id& id, uint32_t type, int32_t status) const;
    void post(const Id& id, abi::CmEventRec& ev);
    // An event of `type` for the id's owner, with `pd_len` bytes of private data from `pd`.
    void post(const Id& id, uint32_t type, int32_t status = 0, const uint8_t* pd = nullptr,
              uint32_t pd_len = 0);
    // The id a REQ or SIDR_REQ made on `listener` (child_of) enters the table, and the
    // listener's owner hears CONNECT_REQUEST with the request's user private data.
    void post_connect_request(Id& listener, std::unique_ptr<Id> child, const uint8_t* user_pd,
                              uint32_t user_pd_len);

    CmEnv env_;  // references: copying it copies none of the parts
    CmIdTable table_;
    uint8_t rx_tos_ = 0;  // the IPv4 TOS of the MAD being handled (on_mad)
    std::map<std::pair<const Session*, uint32_t>, Channel> channels_;
    std::multimap<uint64_t, uint32_t> timers_;  // deadline -> handle (stale entries skipped)
    uint64_t tid_hi_ = 0;
    uint32_t tid_lo_ = 0;
    uint32_t gsi_psn_ = 0;
    std::mt19937 rng_;
    uint64_t mads_tx_ = 0, mads_rx_ = 0, mads_bad_ = 0, retransmits_ = 0;
    size_t parked_ = 0;
};

}  // namespace uroce::emu
