// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Control messages between the verbs library and the device, carried over a Unix
// SOCK_SEQPACKET socket (one message each way per call; file descriptors travel with
// SCM_RIGHTS). One connection is one ibv_context; closing it (or the process dying)
// destroys everything created through it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/abi/caps.h"

namespace uroce::abi {

constexpr uint32_t kProtocolVersion = 6;

enum class Op : uint32_t {
    kOpen = 1,
    kAllocPd,
    kDeallocPd,
    kRegMr,
    kDeregMr,
    kCreateCompChannel,
    kDestroyCompChannel,
    kCreateCq,
    kDestroyCq,
    kCreateQp,
    kModifyQp,
    kQueryQp,
    kDestroyQp,
    kDump,      // text dump of the device's resources (uroce res)
    kShutdown,  // stop the device (uroce stop)
    kCapture,   // start/stop the packet capture (uroce capture); a CaptureReq, no session
    kCreateSrq,
    kModifySrq,
    kQuerySrq,
    kDestroySrq,
    kFaults,    // set the fault injection spec (uroce faults); a FaultsReq, no session
    kOpenXrcd,  // an fd may travel with it (SCM_RIGHTS): the file whose inode names the XRCD
    kCloseXrcd,
    kOpenQp,       // ibv_open_qp: another handle on an XRC TGT QP
    kCm,           // connection manager: a CmReq answered by a CmResp (emu/abi/cm_protocol.h)
    kAttachMcast,  // ibv_attach_mcast: a McastReq
    kDetachMcast,  // ibv_detach_mcast: a McastReq
    kAllocMw,      // a MwReq answered by a MwResp
    kDeallocMw,    // a HandleReq
    kTrace,        // trace lines after TraceReq::since (uroce trace); no session, text reply
    kQueryPort,    // ibv_query_port: answered by a PortResp
    kResizeCq,     // a ResizeCqReq with the new ring's memfd (SCM_RIGHTS); a ResizeCqResp
    kReregMr,      // a ReregMrReq answered by a RegMrResp
    kAdviseMr,     // ibv_advise_mr, one SGE: an AdviseMrReq answered by an AdviseMrResp
    kQueryPd,      // ibv_import_pd: a PdReq answered by a PdResp, the same PD of the session
    kQueryMr,      // ibv_import_mr: a HandleReq answered by a QueryMrResp
};

struct OpenReq {
    uint32_t version;
    int32_t pid;
};
struct OpenResp {
    char name[64];
    uint32_t ipv4_be;  // the first address, if it is IPv4 (0: IPv6)
    // The GID table: the device's addresses (IPv4 ones IPv4-mapped), DeviceConfig::gid_table.
    uint8_t gids[kGidTblLen][16];
    uint32_t gid_count;
    uint32_t ipv6_scope;  // the interface of its link-local addresses
    uint16_t udp_port;
    uint16_t reserved;
    int32_t device_pid;  // informative: the library asks the kernel (SO_PEERCRED) instead
    uint64_t guid_be;
    uint32_t session;
    // fds: [0] doorbell eventfd, [1] async event pipe (read end), [2] the doorbell page
    // (emu/abi/doorbell.h), a memfd of doorbell_page_bytes()
};

struct PdReq {
    uint32_t pd;
};
struct PdResp {
    uint32_t pd;
};

struct RegMrReq {
    uint32_t pd;
    uint32_t access;
    uint64_t addr;
    uint64_t length;
    uint64_t iova;
};
struct RegMrResp {
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
};
// ibv_rereg_mr: `flags` are IBV_REREG_MR_CHANGE_*; the fields of the others are ignored.
// A new translation's iova is its address, as rdma-core's providers pass it.
struct ReregMrReq {
    uint32_t handle;
    uint32_t flags;
    uint32_t pd;
    uint32_t access;
    uint64_t addr;
    uint64_t length;
};
// ibv_advise_mr checks each SGE with the device; the prefetch itself happens in the
// application's process, which owns the memory (verbs_api/ibverbs/advise_mr.cpp).
struct AdviseMrReq {
    uint32_t pd;
    uint32_t lkey;
    uint64_t addr;  // in the MR's iova space, as any local SGE
    uint64_t length;
};
struct AdviseMrResp {
    uint64_t va;  // where addr lies in the application's address space
};
struct HandleReq {
    uint32_t handle;
};
// kQueryMr: what ibv_import_mr gives the importer (the kernel's QUERY_MR: keys, length, iova).
struct QueryMrResp {
    uint32_t lkey;
    uint32_t rkey;
    uint64_t length;
    uint64_t iova;
};
// kTrace's reply: "last N\n", then the lines numbered after `since` up to N (docs/trace.md).
struct TraceReq {
    uint64_t since;
};

// What ibv_query_port learns from the device; the rest of ibv_port_attr is fixed.
struct PortResp {
    uint32_t active_mtu;  // enum ibv_mtu, from the interface's MTU (emu/engine/port_mtu.h)
    uint32_t reserved;
};

struct MwReq {
    uint32_t pd;
    uint32_t type;  // enum ibv_mw_type
};
struct MwResp {
    uint32_t handle;
    uint32_t rkey;
};

struct ChannelResp {
    uint32_t handle;
};  // fds: [0] pipe read end

struct CreateCqReq {
    uint32_t cqe;
    int32_t channel;  // -1: none
    uint64_t cookie;  // the library's struct ibv_cq *, echoed in events
};
struct CreateCqResp {
    uint32_t handle;
    uint32_t cqe;    // usable entries reported to the app
    uint32_t slots;  // ring slots (power of two)
    uint32_t reserved;
    // fds: [0] ring memfd
};

// ibv_resize_cq. The library makes the new ring, a memfd of ring_bytes(slots, sizeof(Cqe))
// sealed against shrinking, with slots = cq_slots(cqe), and sends it along; the device moves
// the CQEs not yet polled into it, in order, and writes only there from then on.
struct ResizeCqReq {
    uint32_t handle;
    uint32_t cqe;  // as asked for
    uint32_t slots;
    uint32_t reserved;
};
struct ResizeCqResp {
    uint32_t cqe;  // usable entries now
};

struct CreateQpReq {
    uint32_t pd;
    uint32_t send_cq;
    uint32_t recv_cq;
    uint32_t srq;  // 0: none
    uint32_t qp_type;
    uint32_t sq_sig_all;
    ibv_qp_cap cap;
    uint64_t cookie;  // the library's struct ibv_qp *
    uint32_t xrcd;    // XRC TGT: the XRCD handle it is created through
    uint32_t reserved;
};
struct CreateQpResp {
    uint32_t qpn;
    ibv_qp_cap cap;  // granted
    uint32_t sq_slots;
    uint32_t rq_slots;
    uint32_t sq_stride;
    uint32_t rq_stride;
    // fds: [0] SQ memfd, [1] RQ memfd (absent when the QP uses an SRQ)
};

struct ModifyQpReq {
    uint32_t qpn;
    uint32_t reserved;
    uint64_t mask;
    ibv_qp_attr attr;
};
struct QueryQpReq {
    uint32_t qpn;
    uint32_t reserved;
    uint64_t mask;
};
struct QueryQpResp {
    ibv_qp_attr attr;
    ibv_qp_cap cap;
    uint32_t sq_sig_all;
};

// kCapture travels as its own message (not a Request), so the path does not grow every
// Request. It starts like a Request: op, then a reserved word.
constexpr size_t kMaxCapturePath = 4096;
struct CaptureReq {
    Op op;  // kCapture
    uint32_t reserved;
    uint64_t max_bytes;          // rotation size, 0: unlimited
    char path[kMaxCapturePath];  // absolute, NUL-terminated; empty: stop capturing
};
struct CaptureResp {
    uint64_t packets;  // written by the capture just stopped (or replaced)
};

// kFaults travels as its own message too: op, reserved, then the spec text
// (net/fault_injector.h; "off" stops injecting). docs/faults.md.
constexpr size_t kMaxFaultSpec = 512;
struct FaultsReq {
    Op op;  // kFaults
    uint32_t reserved;
    char spec[kMaxFaultSpec];  // NUL-terminated
};
struct FaultsResp {
    uint64_t seed;  // the seed in use (chosen by the device if the spec has none)
};

struct CreateSrqReq {
    uint32_t pd;
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
    uint64_t cookie;    // the library's struct ibv_srq *
    uint32_t srq_type;  // enum ibv_srq_type
    uint32_t xrcd;      // XRC: XRCD handle
    uint32_t cq;        // XRC: the CQ its receives complete on
    uint32_t reserved;
};
struct CreateSrqResp {
    uint32_t handle;
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t slots;
    uint32_t stride;
    // fds: [0] ring memfd
};
struct ModifySrqReq {
    uint32_t handle;
    uint32_t mask;  // enum ibv_srq_attr_mask
    ibv_srq_attr attr;
};
struct QuerySrqResp {
    ibv_srq_attr attr;
};

struct OpenXrcdReq {
    int32_t has_fd;  // 0: fd == -1, a domain with no inode
    int32_t oflags;
};
struct XrcdResp {
    uint32_t handle;
};
struct OpenQpReq {
    uint32_t xrcd;  // XRCD handle
    uint32_t qpn;
    uint32_t qp_type;
    uint32_t reserved;
    uint64_t cookie;
};
// kDestroyQp. An XRC TGT QP can be held several times by one session (each ibv_open_qp is
// a handle of its own, as in the kernel): `cookie` names the handle. 0: any of the session's
// (the layout is HandleReq's with the cookie after it).
struct DestroyQpReq {
    uint32_t qpn;
    uint32_t reserved;
    uint64_t cookie;
};
struct OpenQpResp {
    uint32_t qpn;
    uint32_t state;
};

struct McastReq {
    uint32_t qpn;
    uint16_t lid;  // as given; ignored on RoCE, but detach must name the one attach did
    uint16_t reserved;
    uint8_t gid[16];
};

struct Request {
    Op op;
    uint32_t reserved;
    union {
        OpenReq open;
        PdReq pd;
        RegMrReq reg_mr;
        ReregMrReq rereg_mr;
        HandleReq handle;
        CreateCqReq create_cq;
        ResizeCqReq resize_cq;
        CreateQpReq create_qp;
        ModifyQpReq modify_qp;
        QueryQpReq query_qp;
        DestroyQpReq destroy_qp;
        CreateSrqReq create_srq;
        ModifySrqReq modify_srq;
        OpenXrcdReq open_xrcd;
        OpenQpReq open_qp;
        McastReq mcast;
        MwReq mw;
        TraceReq trace;
        AdviseMrReq advise_mr;
    } u;
};

struct Response {
    int32_t err;  // 0 or a positive errno
    uint32_t reserved;
    union {
        OpenResp open;
        PdResp pd;
        RegMrResp reg_mr;
        ChannelResp channel;
        CreateCqResp create_cq;
        ResizeCqResp resize_cq;
        CreateQpResp create_qp;
        QueryQpResp query_qp;
        CreateSrqResp create_srq;
        QuerySrqResp query_srq;
        XrcdResp xrcd;
        OpenQpResp open_qp;
        CaptureResp capture;
        FaultsResp faults;
        MwResp mw;
        PortResp port;
        AdviseMrResp advise_mr;
        QueryMrResp query_mr;
    } u;
};

// Records the device writes into a completion channel pipe and the async event pipe.
struct CompEvent {
    uint64_t cq_cookie;
};
struct AsyncEvent {
    uint32_t event_type;  // enum ibv_event_type
    uint32_t reserved;
    uint64_t cookie;  // the library object (qp/cq/srq) or the port number
};

constexpr int kMaxFds = 4;
constexpr size_t kMaxDumpBytes = 60000;

}  // namespace uroce::abi
