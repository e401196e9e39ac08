// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA FLUSH (IBTA 1.5) as rdma-core 56 names it in <infiniband/verbs.h> and the kernel in
// <rdma/ib_user_verbs.h>. Debian 12's rdma-core 44 headers have none of it, so the device,
// the rings and the library use these values whatever headers they are built with; a
// program built against newer headers passes the same numbers.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace uroce::abi {

constexpr uint32_t kWrFlush = 14;  // IBV_WR_FLUSH (enum ibv_wr_opcode)
constexpr uint32_t kWcFlush = 8;   // IBV_WC_FLUSH (enum ibv_wc_opcode)
// Memory region (and QP) access: a FLUSH of that placement type may target it.
constexpr uint32_t kAccessFlushGlobal = 1u << 8;      // IBV_ACCESS_FLUSH_GLOBAL
constexpr uint32_t kAccessFlushPersistent = 1u << 9;  // IBV_ACCESS_FLUSH_PERSISTENT
constexpr uint32_t kAccessFlush = kAccessFlushGlobal | kAccessFlushPersistent;
// ibv_wr_flush's `type` (enum ibv_placement_type) and `level` (enum ibv_selectivity_level).
constexpr uint8_t kFlushGlobal = 1u << 0;      // IBV_FLUSH_GLOBAL
constexpr uint8_t kFlushPersistent = 1u << 1;  // IBV_FLUSH_PERSISTENT
constexpr uint8_t kFlushRange = 0;             // IBV_FLUSH_RANGE
constexpr uint8_t kFlushMr = 1;                // IBV_FLUSH_MR
constexpr uint64_t kQpExWithFlush = 1u << 11;  // IBV_QP_EX_WITH_FLUSH (send_ops_flags)
// ibv_device_attr_ex.device_cap_flags_ex: IB_UVERBS_DEVICE_FLUSH_GLOBAL/_PERSISTENT.
constexpr uint64_t kDeviceFlushGlobal = uint64_t(1) << 38;
constexpr uint64_t kDeviceFlushPersistent = uint64_t(1) << 39;

// The MR access a FLUSH of placement type `type` needs: one flag per type it names.
constexpr uint32_t flush_access(uint8_t type) {
    return ((type & kFlushGlobal) ? kAccessFlushGlobal : 0) |
           ((type & kFlushPersistent) ? kAccessFlushPersistent : 0);
}

// A FLUSH send WQE (rings.h): rkey and remote_addr as for a WRITE, compare_add the length,
// swap these bits: the placement type in bits 7..0, the selectivity level in bits 15..8.
constexpr uint64_t flush_wqe_bits(uint8_t type, uint8_t level) {
    return uint64_t(type) | uint64_t(level) << 8;
}
constexpr uint8_t flush_wqe_type(uint64_t bits) { return uint8_t(bits); }
constexpr uint8_t flush_wqe_level(uint64_t bits) { return uint8_t(bits >> 8); }

// ibv_qp_ex's builder for it, the member rdma-core 56 has after wr_atomic_write.
using WrFlushFn = void (*)(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr, size_t len,
                           uint8_t type, uint8_t level);

// ibv_qp_ex as rdma-core 56 lays it out: the headers' struct, with wr_flush appended when
// they lack it. The library's QPs are this, so that a program built against newer headers
// finds wr_flush where it looks, whatever headers the library was built with.
#ifdef UROCE_HAVE_WR_FLUSH
using QpEx = ibv_qp_ex;
#else
struct QpEx : ibv_qp_ex {
    WrFlushFn wr_flush;
};
static_assert(sizeof(QpEx) == sizeof(ibv_qp_ex) + sizeof(WrFlushFn),
              "wr_flush must follow the headers' last member, as in rdma-core 56");
#endif

}  // namespace uroce::abi
