// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Layout of the queues shared between an application (the verbs library) and the
// device. Both sides map the same memfd. The device never trusts anything it reads
// from here: indices are masked, lengths clamped, keys checked against its own tables.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace uroce::abi {

constexpr size_t kCacheLine = 64;

// Producer/consumer indices are free-running 32-bit counters; slot = index & (size-1).
struct alignas(kCacheLine) RingHeader {
    alignas(kCacheLine) std::atomic<uint32_t> prod;
    alignas(kCacheLine) std::atomic<uint32_t> cons;
    // CQ only: request-notification state written by the library, consumed by the
    // device with an atomic exchange so one arm yields at most one event.
    alignas(kCacheLine) std::atomic<uint32_t> arm;
};
static_assert(sizeof(RingHeader) == 3 * kCacheLine);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

enum CqArm : uint32_t { kCqArmNone = 0, kCqArmNext = 1, kCqArmSolicited = 2 };

struct Sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

// One send work request. Followed in its slot by the data area: max_sge Sge entries,
// or (IBV_SEND_INLINE) inline_len bytes of data, or (IBV_WR_BIND_MW) one MwBind.
inline constexpr uint8_t kUdIpv6 = 6;  // SendWqe::ud_grh[2]

struct SendWqe {
    uint64_t wr_id;
    uint32_t opcode;      // enum ibv_wr_opcode
    uint32_t send_flags;  // enum ibv_send_flags
    // The ibv_send_wr union as is: imm_data in network order, or (IBV_WR_SEND_WITH_INV,
    // IBV_WR_LOCAL_INV) invalidate_rkey in host order.
    uint32_t imm_data;
    uint32_t num_sge;
    uint32_t inline_len;  // bytes of inline data when IBV_SEND_INLINE
    uint32_t rkey;
    uint64_t remote_addr;
    uint64_t compare_add;
    uint64_t swap;
    uint32_t ah;           // UD: address handle number
    uint32_t remote_qpn;   // UD
    uint32_t remote_qkey;  // UD
    union {
        uint32_t remote_srqn;  // XRC
        // UD: the AH's GRH traffic class [0] and hop limit [1]; [2] the destination's IP
        // version: kUdIpv6 when it is an IPv6 address, whose 16 bytes are then in
        // remote_addr and compare_add (which no UD send uses), else `ah` is its IPv4 address;
        // [3] the GRH's sgid_index (the device's address it leaves from).
        uint8_t ud_grh[4];
    };
    // abi::kWrFlush (RDMA FLUSH, any headers): compare_add is the length, swap the placement
    // type and selectivity level (flush.h: flush_wqe_bits); no SGEs, no inline data.
};
static_assert(sizeof(SendWqe) == 72);

// IBV_WR_BIND_MW (ibv_bind_mw for type 1, post_send/ibv_wr_bind_mw for type 2): what to
// bind, in the send slot's data area (num_sge and inline_len are 0). Every slot's data area
// holds at least 64 bytes (create_qp), so it always fits.
struct MwBind {
    uint32_t mw;       // the window: ibv_mw.handle
    uint32_t rkey;     // the new R_Key; the device takes its low 8 bits (the consumer's key)
    uint32_t mr_lkey;  // bind_info.mr->lkey; 0 when there is no MR (type 1 unbind, length 0)
    uint32_t access;   // bind_info.mw_access_flags
    uint64_t addr;     // bind_info.addr
    uint64_t length;   // bind_info.length
};
static_assert(sizeof(MwBind) == 32);

struct RecvWqe {
    uint64_t wr_id;
    uint32_t num_sge;
    uint32_t reserved;
    // followed by max_sge Sge entries
};

// A completion, as the device writes it. The library copies it into struct ibv_wc.
struct Cqe {
    uint64_t wr_id;
    uint32_t status;  // enum ibv_wc_status
    uint32_t opcode;  // enum ibv_wc_opcode
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data;  // network order, as in ibv_wc
    uint32_t qp_num;
    uint32_t src_qp;
    uint32_t wc_flags;
    uint16_t pkey_index;
    uint16_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
    uint8_t reserved[2];
    // When the device wrote it, in the device clock: CLOCK_MONOTONIC nanoseconds
    // (ibv_wc_read_completion_ts; hca_core_clock is 1 GHz).
    uint64_t timestamp;
};
static_assert(sizeof(Cqe) == 56);

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

inline uint32_t round_pow2(uint32_t v) {
    uint32_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

// The slots of a CQ ring for at least `cqe` completions; create and resize report slots - 1.
inline uint32_t cq_slots(uint32_t cqe) { return round_pow2(cqe + 1); }

inline size_t send_stride(uint32_t max_sge, uint32_t max_inline) {
    size_t data = max_sge * sizeof(Sge);
    if (max_inline > data) data = max_inline;
    return align_up(sizeof(SendWqe) + data, 64);
}

inline size_t recv_stride(uint32_t max_sge) {
    return align_up(sizeof(RecvWqe) + max_sge * sizeof(Sge), 32);
}

inline size_t ring_bytes(uint32_t slots, size_t stride) {
    return align_up(sizeof(RingHeader) + slots * stride, 4096);
}

inline uint8_t* ring_slot(void* base, size_t stride, uint32_t mask, uint32_t index) {
    return static_cast<uint8_t*>(base) + sizeof(RingHeader) + size_t(index & mask) * stride;
}

// A ring (or doorbell page) as the application's process maps it: libibverbs' rings, and the
// control fuzzer's, which maps them the way the library does.
struct RingMap {
    uint8_t* base = nullptr;
    size_t bytes = 0;
    uint32_t mask = 0;
    uint32_t stride = 0;
    RingHeader* hdr() const { return reinterpret_cast<RingHeader*>(base); }
    uint8_t* slot(uint32_t i) const { return ring_slot(base, stride, mask, i); }
};

}  // namespace uroce::abi
