// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Connection manager messages between librdmacm (verbs_api/rdmacm/) and the device's CM
// agent (emu/cm/cm_agent.*). See docs/cm.md.
//
// The library opens its own control connection to each device it uses for connections
// (kOpen, as ibv_open_device does) and sends CmReq messages (op = Op::kCm) on it; the device
// answers each with one CmResp. Events travel the other way, asynchronously, as fixed-size
// CmEventRec records written into one pipe per event channel: the library creates it, keeps
// the read end as the channel's fd, and registers the channel with every device it uses
// (CmOp::kChannel), passing the write end along; the library writes the events it generates
// itself (address and route resolution, events moved between channels) into the same pipe.
#pragma once

#include <cstdint>

#include "emu/abi/protocol.h"

namespace uroce::abi {

enum class CmOp : uint32_t {
    kChannel = 1,   // register event channel `channel`; the request carries the write end of
                    // the pipe its events go into, each stamped with `dev_tag`
    kChannelClose,  // forget channel `channel`
    kBind,          // new CM id bound to (local_addr, local_port) in port space `ps`; port 0
                    // picks a free port. Resp: handle, port. local_addr zero = wildcard.
    kListen,        // `handle` listens, with `backlog` (<= 0: the default)
    kConnect,       // `handle` sends a REQ (RC/UC) or SIDR_REQ (UD) to remote_addr:remote_port
    kAccept,        // `handle` (a connection request) answers with REP or SIDR_REP
    kEstablish,     // active side: the QP is ready, send the RTU
    kReject,        // `handle` (a connection request) answers with REJ (consumer reject)
    kDisconnect,    // DREQ, or DREP when the peer's DREQ came first
    kDestroy,       // the id is gone: REJ/DREQ/DREP as its state requires, no more events
    kMigrate,       // `handle`'s events go to channel `channel` from now on
    kNotify,        // rdma_notify: `event` (IBV_EVENT_COMM_EST completes a passive connect)
};

constexpr uint32_t kCmPrivateMax = 224;  // the largest IB CM private data field (RTU, DREP)

// IB CM private data sizes (IBTA vol. 1, 12.6) and what is left for the application after
// the RDMA CM IP header in a REQ or SIDR_REQ.
constexpr uint32_t kCmReqPrivate = 92;
constexpr uint32_t kCmRepPrivate = 196;
constexpr uint32_t kCmRejPrivate = 148;
constexpr uint32_t kCmRtuPrivate = 224;
constexpr uint32_t kCmMraPrivate = 222;
constexpr uint32_t kCmDreqPrivate = 220;
constexpr uint32_t kCmDrepPrivate = 224;
constexpr uint32_t kCmSidrReqPrivate = 216;
constexpr uint32_t kCmSidrRepPrivate = 136;
constexpr uint32_t kCmIpHdrLen = 36;
constexpr uint32_t kCmReqUserPrivate = kCmReqPrivate - kCmIpHdrLen;          // 56
constexpr uint32_t kCmSidrReqUserPrivate = kCmSidrReqPrivate - kCmIpHdrLen;  // 180

struct CmReq {
    Op op;  // kCm
    CmOp cm_op;
    uint32_t handle;
    uint32_t channel;  // library's channel id
    uint32_t dev_tag;  // kChannel: echoed in CmEventRec::dev_tag
    uint32_t ps;       // enum rdma_port_space
    uint32_t qp_type;  // enum ibv_qp_type
    int32_t backlog;
    // Addresses in their 16-byte form: an IPv6 address, or an IPv4 one IPv4-mapped
    // (::ffff:a.b.c.d); all zero: the wildcard (kBind).
    uint8_t local_addr[16], remote_addr[16];
    uint16_t local_port, remote_port;  // network order
    uint32_t qpn;                      // local QP number (connect, accept)
    uint32_t psn;                      // local starting PSN (connect, accept)
    uint32_t qkey;                     // UD accept
    uint32_t event;                    // kNotify
    uint8_t responder_resources, initiator_depth, flow_control, retry_count;
    uint8_t rnr_retry_count, srq, mtu /* enum ibv_mtu */, private_data_len;
    uint8_t tos;  // connect: the id's TOS (RDMA_OPTION_ID_TOS), the REQ's traffic class
    // kBind to a wildcard: the family it was given in (AF_INET, AF_INET6) and whether it
    // takes requests of that family only (the kernel's afonly: RDMA_OPTION_ID_AFONLY,
    // IPV6_V6ONLY); an AF_INET6 one that is not takes IPv4 requests too.
    uint8_t family, afonly;
    uint8_t reserved;
    uint8_t private_data[kCmPrivateMax];
};

struct CmResp {
    int32_t err;  // 0 or a positive errno
    uint32_t handle;
    uint16_t port;  // network order (kBind)
    uint16_t reserved;
};

// One event, as the device (or the library itself) writes it into a channel pipe. Fixed
// size and below PIPE_BUF, so every write and every read moves exactly one record.
struct CmEventRec {
    uint32_t event;  // enum rdma_cm_event_type
    int32_t status;
    uint32_t dev_tag;     // which device connection of the library it came through
    uint32_t handle;      // the id it is for; for CONNECT_REQUEST, the listening id
    uint32_t new_handle;  // CONNECT_REQUEST: the new id, owned by the listener's session
    uint32_t remote_qpn;  // the peer's QP (REQ/REP/SIDR_REP)
    uint32_t remote_psn;  // the peer's starting PSN (REQ/REP)
    uint32_t qkey;        // UD
    uint8_t local_addr[16], remote_addr[16];  // as in CmReq (IPv4-mapped for IPv4)
    uint16_t local_port, remote_port;         // network order
    uint8_t responder_resources, initiator_depth, flow_control, retry_count;
    uint8_t rnr_retry_count, srq, mtu, private_data_len;
    uint32_t ps;
    uint8_t tos;  // CONNECT_REQUEST: the REQ's traffic class, the new id's TOS
    uint8_t reserved[3];
    uint8_t private_data[kCmPrivateMax];
};
static_assert(sizeof(CmEventRec) <= 512, "one atomic pipe write");

}  // namespace uroce::abi
