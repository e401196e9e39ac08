// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's objects. All of them are owned by the engine thread; nothing here is
// locked.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "emu/abi/caps.h"
#include "emu/abi/doorbell.h"
#include "emu/abi/rings.h"
#include "emu/verbs/shared_region.h"
#include "net/endpoint.h"
#include "net/headers.h"
#include "net/ip_marks.h"
#include "net/udp_sport.h"

namespace uroce::emu {

struct Session;

// Packets and bytes (UDP payload, BTH through ICRC) by BTH opcode, indexed by the raw opcode
// byte so that updating it is one add with no branch and no allocation.
struct OpCounters {
    uint64_t pkts[256] = {};
    uint64_t bytes[256] = {};
    void add(uint8_t opcode, size_t len) {
        ++pkts[opcode];
        bytes[opcode] += len;
    }
};

struct Pd {
    Session* owner = nullptr;
    uint32_t users = 0;  // MRs and QPs that name it
};

struct Mr {
    Session* owner = nullptr;
    uint32_t pd = 0;
    uint32_t access = 0;
    uint64_t addr = 0;  // process virtual address of the first byte
    uint64_t iova = 0;  // address remote peers use
    uint64_t length = 0;
    uint32_t lkey = 0;
    uint32_t rkey = 0;
    uint32_t windows = 0;  // memory windows bound into it: it cannot be deregistered then
};

// A memory window (IBTA 10.6.7): a range of an MR, with its own R_Key and remote rights,
// that the application binds and invalidates through its send queue. Type 1 belongs to
// its PD; type 2 (2B) also to the QP it was bound through, and only that QP may use it.
struct Mw {
    Session* owner = nullptr;
    uint32_t pd = 0;
    uint32_t type = IBV_MW_TYPE_1;
    uint32_t rkey = 0;   // kMwKeyBit | handle << 8 | the consumer's 8-bit key
    bool bound = false;  // remote access through rkey is possible
    uint32_t mr = 0;     // lkey of the MR it lies in (while bound)
    uint64_t addr = 0;   // first byte, in the MR's iova space
    uint64_t length = 0;
    uint32_t access = 0;  // IBV_ACCESS_REMOTE_* granted
    uint32_t qpn = 0;     // type 2: the QP it is bound to
};
// MW R_Keys have their top bit set, MR keys never (their index is below 2^23), so a key
// names an MR or a window by itself.
constexpr uint32_t kMwKeyBit = 0x80000000u;

struct CompChannel {
    Session* owner = nullptr;
    int write_fd = -1;
    uint32_t users = 0;
    ~CompChannel();
};

struct Cq {
    Session* owner = nullptr;
    SharedRegion ring;
    abi::RingHeader* hdr = nullptr;
    abi::Cqe* slots = nullptr;
    uint32_t mask = 0;
    uint32_t cqe = 0;      // capacity reported to the app
    uint32_t prod = 0;     // the device's own producer index (never read back from shm)
    uint32_t channel = 0;  // 0: none
    uint64_t cookie = 0;
    uint32_t users = 0;
    bool overrun = false;
};

// Packets and bytes by opcode for one QP. Every packet a QP sends or is handed carries its
// own transport's opcodes (the top 3 bits, Qp::transport), so 32 entries per direction hold
// them (1 KiB per QP instead of 8 with OpCounters); `uroce counters` adds the transport back.
struct QpOpCounters {
    uint64_t pkts[32] = {};
    uint64_t bytes[32] = {};
    void add(uint8_t opcode, size_t len) {
        ++pkts[opcode & 31];
        bytes[opcode & 31] += len;
    }
};

// The device's address number (its wire's, UdpUring::add_local) a packet leaves from, where
// there is none: a GID index the table does not have.
inline constexpr uint16_t kNoLocal = 0xffff;

// Snapshot of a send WQE, taken when the device fetches it from the ring so that the
// application cannot change it under the device (and so retransmission has it). Inline data
// is not copied: it stays in the WQE's ring slot, which is the device's until the WQE
// completes, and holds no address or key to check (Qp::sq_inline). Nor is a BIND_MW's MwBind:
// the device reads it from there once, when it executes the bind, and checks it then.
struct SendWr {
    uint64_t wr_id = 0;
    uint32_t opcode = 0;
    uint32_t flags = 0;
    uint32_t imm = 0;  // network order
    uint32_t length = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t compare_add = 0, swap = 0;
    net::Endpoint ud_dest;  // UD: the destination (address and port), from the AH
    uint16_t ud_local = 0;  // UD: the device's address it leaves from (the AH's sgid_index)
    net::IpMarks ud_marks;  // UD: the AH's IPv4 TOS and TTL (its GRH's)
    uint32_t ud_qpn = 0;    // UD: destination QP
    uint32_t ud_qkey = 0;   // UD: Q_Key to send with
    uint32_t xrc_srqn = 0;  // XRC INI: the remote SRQ (XRCETH)
    uint32_t num_sge = 0;
    uint32_t first_psn = 0;
    uint32_t last_psn = 0;
    bool is_inline = false;
    bool executed = false;  // a local operation (BIND_MW, LOCAL_INV) took effect already
    ibv_wc_status status = IBV_WC_SUCCESS;  // set when the WQE cannot be executed
    abi::Sge* sge = nullptr;  // checked and translated entries, max_send_sge (in Qp::swr_sge)
};

struct RecvWr {
    uint64_t wr_id = 0;
    uint32_t num_sge = 0;
    uint32_t length = 0;
    abi::Sge sge[abi::kMaxSge];
};

// An XRC domain. Processes share it by opening the same file (same inode); each open
// is an XrcdHandle. It lives while any handle or any object in it does.
struct Xrcd {
    bool has_inode = false;
    dev_t dev = 0;
    ino_t ino = 0;
    uint32_t handles = 0;
    uint32_t objects = 0;  // XRC SRQs and TGT QPs
};

struct XrcdHandle {
    Session* owner = nullptr;
    uint32_t xrcd = 0;
    uint32_t objects = 0;  // created through this handle: it cannot close before them
};

struct Srq {
    Session* owner = nullptr;
    uint32_t pd = 0;
    bool xrc = false;
    uint32_t xrcd = 0, xrcd_handle = 0;
    uint32_t cq = 0;  // XRC: receives complete here
    SharedRegion region;
    abi::RingHeader* ring = nullptr;
    uint32_t mask = 0, stride = 0, max_wr = 0, max_sge = 0;
    uint32_t next = 0;   // next ring index to take (published as ring->cons)
    uint32_t limit = 0;  // srq_limit; armed while non-zero
    uint64_t cookie = 0;
    uint32_t users = 0;  // QPs attached
};

struct Qp {
    Session* owner = nullptr;
    uint32_t qpn = 0;
    ibv_qp_type type = IBV_QPT_RC;
    uint8_t transport = 0;  // BTH opcode transport bits: RC 0x00, UC 0x20, UD 0x60, XRC 0xa0
    // XRC TGT: the domain, and every handle of the QP (ibv_create_qp_ex, and each
    // ibv_open_qp: one session may hold several) with the cookie its events carry. The first
    // holder is `owner`; the QP lives until the last handle is released.
    uint32_t xrcd = 0;
    struct Holder {
        Session* session;
        uint64_t cookie;           // the library's ibv_qp: names this handle
        uint32_t xrcd_handle = 0;  // the handle it was created or opened through (it pins it)
    };
    std::vector<Holder> holders;
    ibv_qp_state state = IBV_QPS_RESET;
    uint32_t pd = 0, send_cq = 0, recv_cq = 0, srq = 0;
    bool sq_sig_all = false;
    uint64_t cookie = 0;
    ibv_qp_cap cap{};
    ibv_qp_attr attr{};  // everything the app set (what query_qp reports)

    // Resolved destination (from attr.ah_attr), and the IPv4 TOS and TTL (IPv6: traffic class
    // and hop limit) of what the QP sends
    // there (its GRH's traffic class and hop limit; net/ip_marks.h).
    net::Endpoint dest;
    net::IpMarks ip_marks;
    uint32_t mtu = 1024;
    // The UDP source port rxe would give it (net/udp_sport.h: from its number, then from its
    // address vector), and the port and socket its packets leave from (the same port unless
    // the device fell back to its own; emu/engine/source_ports.h).
    uint16_t udp_sport = 0;
    net::TxSource tx;

    // Send queue.
    SharedRegion sq_region;
    abi::RingHeader* sq = nullptr;
    uint32_t sq_mask = 0, sq_stride = 0;
    std::vector<SendWr> swr;        // shadow of each SQ slot
    std::vector<abi::Sge> swr_sge;  // their SGEs: max_send_sge per slot
    uint32_t sq_fetch = 0;          // next ring index to read from the application
    uint32_t sq_send = 0;           // next WQE to transmit (go-back-N resets it)
    uint32_t sq_send_off = 0;       // byte offset within that WQE
    uint32_t sq_done = 0;           // oldest WQE not yet completed (published as sq->cons)

    // Requester PSN state.
    uint32_t wqe_psn = 0;   // PSN the next fetched WQE starts at
    uint32_t next_psn = 0;  // PSN of the next packet to transmit
    uint32_t una_psn = 0;   // oldest unacknowledged PSN
    int retry_left = 0;
    int rnr_left = 0;
    uint64_t deadline_ns = 0;  // retransmit or RNR timer; 0: none
    bool rnr_wait = false;
    bool on_timer_list = false;
    bool on_ready_list = false;

    // Receive queue and responder state.
    SharedRegion rq_region;
    abi::RingHeader* rq = nullptr;
    uint32_t rq_mask = 0, rq_stride = 0;
    uint32_t rq_next = 0;   // next ring index to take (published as rq->cons on completion)
    bool have_rwr = false;  // a receive is in progress (multi-packet SEND)
    bool rwr_ok = false;    // its SGEs passed the key/bounds/access checks
    // Where the receive in progress came from: the QP's own RQ (its owner, its recv
    // CQ) or an SRQ (the SRQ's owner and, for XRC, the SRQ's CQ).
    Session* rx_owner = nullptr;
    uint32_t rx_cq = 0;
    RecvWr rwr;
    uint32_t rwr_off = 0;
    uint32_t epsn = 0;
    uint32_t msn = 0;
    bool nak_sent = false;  // one sequence NAK per gap
    bool comm_est = false;  // IBV_EVENT_COMM_EST posted for this stay in RTR
    bool uc_drop = false;   // UC: discarding the rest of a message after a loss
    // RDMA WRITE in progress (responder): where the next payload byte goes.
    bool have_write = false;
    uint64_t write_va = 0;  // process address
    uint32_t write_left = 0;
    uint32_t write_total = 0;        // the WRITE's DMA length, reported with WRITE_WITH_IMM
    Session* write_owner = nullptr;  // whose memory the WRITE lands in
    bool write_imm_pending = false;
    uint32_t dma_errors = 0;  // deferred writes of this QP that failed (Dma::settle)
    // Replay state for atomics (responder), so a duplicate is answered, not re-executed.
    struct AtomicReplay {
        uint32_t psn = 0;
        uint64_t orig = 0;
        bool valid = false;
    };
    std::vector<AtomicReplay> atomic_replay;  // max_dest_rd_atomic entries, at least 1
    uint32_t atomic_replay_next = 0;
    bool read_gap_nak = false;  // requester: one re-request per read response gap
    // Responder: an ACK (or NAK) that found every transmit buffer in flight, sent once one
    // comes back (RcResponder::send_owed_ack) instead of left to the requester's timer. A
    // later ACK replaces it: ACKs are cumulative.
    bool ack_owed = false;
    uint8_t ack_owed_syndrome = 0;
    uint32_t ack_owed_psn = 0;
    // Responder: the rest of an RDMA READ's responses, likewise (the ACKs after it wait).
    struct ReadOwed {
        bool active = false;
        bool duplicate = false;  // the answer to a repeated request
        uint32_t psn = 0;        // the request's (its first response's)
        uint32_t npkts = 0, next = 0;
        uint32_t len = 0, rkey = 0;
        uint64_t va = 0;
    };
    ReadOwed read_owed;

    // Counters for `uroce res`.
    uint64_t tx_pkts = 0, rx_pkts = 0, retransmits = 0;
    // ACKs and responses received (not the peer's own requests), and their count when the
    // retransmit timer was last armed: the "peer is alive" test of retransmit_timeout.
    uint64_t resp_rx = 0, rx_at_arm = 0;
    // By opcode, for `uroce counters` (qp_counters lines): packets transmit() sent for this QP
    // and packets on_packet() delivered to it.
    QpOpCounters tx_op, rx_op;
    uint64_t drops[size_t(net::DropReason::kCount)] = {};  // of packets that reached the QP

    // The inline data of the send WQE at ring index `index` (its length is SendWr::length).
    const uint8_t* sq_inline(uint32_t index) const {
        return abi::ring_slot(sq, sq_stride, sq_mask, index) + sizeof(abi::SendWqe);
    }
};

// A multicast group at least one QP of this device is attached to (docs/multicast.md).
struct McastGroup {
    uint8_t gid[16] = {};
    uint32_t ipv4_be = 0;  // the IPv4 group of an IPv4-mapped GID (::ffff:224.0.0.0/4), else 0
    int sock = 0;          // the device's socket for the group (> 0) while ipv4_be is set
    struct Member {
        uint32_t qpn;
        uint16_t lid;  // as attached: detach must name the same one (uverbs)
    };
    std::vector<Member> members;
};

struct Session {
    uint32_t id = 0;
    pid_t pid = 0;
    int doorbell_fd = -1;
    SharedRegion db_region;  // the doorbell page (emu/abi/doorbell.h)
    abi::DoorbellPage* db = nullptr;
    bool awake = false;    // on the device's awake_ list: the device reads its page every turn
    uint32_t db_head = 0;  // the next entry to read; the page's own head is only published
    int async_write_fd = -1;
    bool dead = false;  // the process is gone; cleanup follows when its socket closes
    std::vector<uint32_t> pds, mrs, cqs, qps, channels, srqs, xrcd_handles, mws;
    ~Session();
};

// Whether `obj` exists and belongs to the session (a handle of another process is as
// good as none).
template <typename T>
bool owned(const Session& s, const T* obj) {
    return obj && obj->owner == &s;
}

// Drops handle `h` from one of a session's lists (order does not matter).
inline void erase_handle(std::vector<uint32_t>& v, uint32_t h) {
    for (auto& x : v)
        if (x == h) {
            x = v.back();
            v.pop_back();
            return;
        }
}

}  // namespace uroce::emu
