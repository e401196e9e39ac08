// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What a send work request's opcode asks of the RC requester and completer.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/abi/flush.h"

namespace uroce::emu {

// What takes a responder resource and is answered with data, not an ACK: READ, the two
// ATOMICs, ATOMIC WRITE and FLUSH (their zero-length READ response). Each counts against
// max_rd_atomic, is waited for by IBV_SEND_FENCE and completes only with its response, as
// rxe counts ATOMIC WRITE with them (and gives FLUSH a responder resource).
inline bool is_rd_atomic(uint32_t op) {
    return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
           op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_WRITE || op == abi::kWrFlush;
}

// CMP_AND_SWP and FETCH_AND_ADD: an AtomicETH out, the original value back.
inline bool is_fetching_atomic(uint32_t op) {
    return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// Work requests the device executes on its own, with no packet: they take no PSN and
// complete, in order, once they have taken effect.
inline bool is_local_op(uint32_t op) { return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV; }

}  // namespace uroce::emu
