// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// QP state machine legality: which ibv_modify_qp() attribute masks are acceptable for a given
// QP type and state transition (IBTA vol. 1, ch. 10.3 / 11.2.5, as enforced by Linux's
// ib_modify_qp_is_ok()). A wrong mask must fail with EINVAL exactly as it does on hardware,
// because applications (and rdma-core's own tests) probe these rules.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

namespace uroce::emu {

// Is modifying a QP of `type` from `cur` to `next` with `attr_mask` legal?
//
// - If IBV_QP_STATE is not in attr_mask this is an attribute-only modify and `next` is ignored
//   (treated as `cur`), matching how the kernel derives the target state.
// - The mask must contain every attribute the transition requires and nothing outside
//   required | optional | IBV_QP_STATE. IBV_QP_CUR_STATE is accepted only where the table lists
//   it as optional (transitions into RTS from RTR/RTS/SQD/SQE).
// - Any state -> RESET and any state except RESET -> ERR take no attributes. RESET -> ERR is
//   rejected, as the kernel rejects it.
// - Supported types: RC, UC, UD, XRC_SEND, XRC_RECV, RAW_PACKET. Anything else (and any state
//   outside RESET..ERR) returns false.
bool qp_modify_is_ok(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint64_t attr_mask);

// Same check, in the errno form the verbs provider returns: 0 or EINVAL.
int qp_modify_check(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint64_t attr_mask);

// The attributes uverbs drops from an XRC QP's modify mask before that check (its
// modify_qp_mask): given, they are ignored, neither refused nor applied.
uint64_t qp_ignored_attrs(ibv_qp_type type);

// Why qp_modify_is_ok refuses (for `uroce trace`): e.g. "INIT -> RTR of an RC QP needs
// DEST_QPN|RQ_PSN" or "RESET -> RTS is not a legal transition"; empty when the mask is fine.
void qp_modify_explain(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint64_t attr_mask,
                       char* buf, size_t len);

// An enum field of a client's request, as the integer it holds: loading a value outside the
// enum's range as the enum is undefined behaviour, so requests are checked this way first.
template <typename E>
uint32_t enum_bits(const E& field) {
    static_assert(sizeof(E) == sizeof(uint32_t));
    uint32_t v;
    std::memcpy(&v, &field, sizeof v);
    return v;
}

// "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"; "UNKNOWN" for anything else.
const char* qp_state_name(ibv_qp_state s);

// "RC", "UC", "UD", "XRC_INI", "XRC_TGT" (as `uroce res` shows them); "?" for anything else.
const char* qp_type_name(ibv_qp_type t);

}  // namespace uroce::emu
