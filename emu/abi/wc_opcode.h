// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The completion opcode of a send queue work request: the device's completions and the
// library's flush completions (after the device went away) say the same.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/abi/flush.h"

namespace uroce::abi {

inline ibv_wc_opcode wc_opcode_for(uint32_t wr_opcode) {
    switch (wr_opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_ATOMIC_WRITE: return IBV_WC_ATOMIC_WRITE;
    case kWrFlush: return static_cast<ibv_wc_opcode>(kWcFlush);
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    default: return IBV_WC_SEND;
    }
}

}  // namespace uroce::abi
