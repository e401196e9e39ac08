// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent's ids (cm_agent.h) and the table that holds them: every id by handle, with the
// indexes the protocol finds them by (local comm ID, the peer's comm or request ID, the bound
// port). The agent runs the protocol; this keeps the indexes in step as ids come and go.
// Engine thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "emu/cm/cm_addr.h"

namespace uroce::emu {

struct Session;

// How long a request MAD waits for an answer before it is sent again
// (CmAgent::kMadTimeoutNs, which an MRA stretches).
inline constexpr uint64_t kCmMadTimeoutNs = 500'000'000;

enum class CmState : uint8_t {
    kIdle,
    kListen,
    kReqSent,
    kMraReqRcvd,  // REQ sent, the peer asked for more time
    kReqRcvd,     // reported to the application, not answered yet
    kRepSent,
    kRepRcvd,  // reported to the application, RTU not sent yet
    kEstablished,
    kDreqSent,
    kDreqRcvd,
    kTimewait,
    kSidrReqSent,
    kSidrReqRcvd,
    kSidrDone,
    kParked,  // a request for a port with no listener yet: mad holds it
};

struct CmId {
    uint32_t handle = 0;
    Session* owner = nullptr;  // nullptr: destroyed by the application, finishing the protocol
    uint32_t channel = 0;
    uint32_t ps = 0, qp_type = 0;
    CmState st = CmState::kIdle;
    bool bound = false;
    CmAddr local_addr{}, remote_addr{};        // local zero: the wildcard
    uint16_t local_port = 0, remote_port = 0;  // network order
    // A wildcard listener: the family it was bound in and whether it takes only that
    // family's requests (the kernel's afonly; cm::listener_takes).
    uint8_t family = 0;
    bool afonly = false;
    int backlog = 0;
    uint32_t pending = 0;   // listener: requests not yet established or failed
    uint32_t listener = 0;  // connection request: the listening id
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint32_t local_qpn = 0, remote_qpn = 0, local_psn = 0, remote_psn = 0, qkey = 0;
    uint8_t resp_res = 0, init_depth = 0, flow = 0, retry = 0, rnr_retry = 0, srq = 0;
    uint8_t mtu = 3;
    // The connection's IPv4 TOS (GRH traffic class): the application's (RDMA_OPTION_ID_TOS) on
    // the active side, the REQ's on the passive side (the kernel's path from the REQ); a SIDR
    // or parked request's: the TOS it arrived with. Every MAD of the id leaves with it.
    uint8_t tos = 0;
    uint64_t tid = 0;
    // The last request MAD, for retransmission (and the last SIDR_REP, for duplicates).
    uint8_t mad[256] = {};
    int retries_left = 0;
    uint64_t wait_ns = kCmMadTimeoutNs;
    uint64_t deadline = 0;  // 0: no timer
};

class CmIdTable {
public:
    // The id `handle` if session s owns it.
    CmId* find(const Session& s, uint32_t handle);
    CmId* by_comm(uint32_t comm_id);
    // A local communication ID no id uses (the first one comes from next_comm).
    uint32_t new_comm_id();
    // A new id with the next handle (0 is never one); not in the table yet.
    std::unique_ptr<CmId> make();
    // The id goes, and with it its entries in the indexes and its listener's count.
    void erase(uint32_t handle);
    void release_port(CmId& id);
    void leave_pending(CmId& id);

    std::map<uint32_t, std::unique_ptr<CmId>> ids;            // handle -> id
    std::map<uint32_t, uint32_t> comm;                        // local comm ID -> handle
    std::map<std::pair<CmAddr, uint32_t>, uint32_t> remote;   // (peer, peer comm ID/request ID)
    std::map<std::pair<uint32_t, uint16_t>, uint32_t> ports;  // (ps, port host order) -> handle
    uint32_t next_handle = 1;
    uint32_t next_comm = 0;
};

}  // namespace uroce::emu
