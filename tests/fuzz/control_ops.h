// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The input format of fuzz_control (tests/fuzz/fuzz_control.cpp), shared with make_corpus,
// which writes seeds in it.
//
// An input is a sequence of operations, each an op byte (CtlOp, modulo kCount), a flags byte
// (bit 0: which of the two client connections sends it; the other bits depend on the op),
// then the op's fields, read in the order fuzz_control.cpp reads them. Integers are little
// endian; an input that ends early reads as zeros.
//
// A handle field ("pick") is one byte b: below 0xf0 it names b modulo their count of the
// handles of that kind the device returned so far in this input (b itself when there are
// none yet); 0xf0 and above, a raw 32-bit value follows.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace uroce::fuzz {

enum CtlOp : uint8_t {
    kOpen,            // [flags bit 1: u32 version follows, else the right one]
    kAllocPd,         //
    kDeallocPd,       // pick pd
    kRegMr,           // pick pd, u32 access, u16 offset, u16 length in the arena
                      //   [bit 1: u64 iova, else the address] [bit 2: u64 length]
    kDeregMr,         // pick mr
    kCreateChannel,   //
    kDestroyChannel,  // pick channel
    kCreateCq,        // u32 cqe, pick channel [bit 1: no channel]
    kDestroyCq,       // pick cq
    kCreateQp,     // u8 type (0 RC, 1 UC, 2 UD, 3 XRC_SEND, 4 XRC_RECV, else the value), pick pd,
                   // pick send cq, pick recv cq, pick srq [bit 1: none], pick xrcd, u8 send_wr,
                   // u8 recv_wr, u8 send_sge, u8 recv_sge, u16 inline [bit 2: sq_sig_all]
    kModifyQp,     // pick qp, u32 mask, then the ibv_qp_attr's bytes (the dgid's IPv4 part is
                   // replaced: see kToState's address selector)
    kToState,      // pick qp, u8 state, u8 QP type (0 RC, 1 UC, 2 UD, 3 XRC_SEND, 4 XRC_RECV),
                   // u8 address (0 the device, 1 a dead peer, 2 and 3 multicast groups, 4 another
                   // loopback address), pick dest qp, u32 rq_psn, u32 sq_psn, u8 mtu, u8 timeout,
                   // u8 retry, u8 rnr_retry, u8 rd_atomic, u32 qkey, u8 access: the transition
                   // with the attributes that type needs for it [bit 1: u32 more mask bits]
    kQueryQp,      // pick qp, u32 mask
    kDestroyQp,    // pick qp
    kCreateSrq,    // pick pd, u16 max_wr, u8 max_sge, u16 limit [bit 1: XRC, pick xrcd, pick cq]
                   // [bit 2: u32 srq_type]
    kModifySrq,    // pick srq, u32 mask, u32 max_wr, u32 limit
    kQuerySrq,     // pick srq
    kDestroySrq,   // pick srq
    kOpenXrcd,     // u8 file (0 none, 1 and 2 two files, 3 has_fd without an fd), u32 oflags
    kCloseXrcd,    // pick xrcd
    kOpenQp,       // pick xrcd, pick qp, u8 type (else XRC_RECV) [bit 1: the type is raw]
    kAttachMcast,  // pick qp, u16 lid, u8 gid (0-3 IPv4 groups, 4 an IPv6 group, 5+ 16 raw bytes)
    kDetachMcast,  // as kAttachMcast
    kAllocMw,      // pick pd, u8 type
    kDeallocMw,    // pick mw
    kPostSend,     // pick qp, u8 count, then count WQEs: u8 opcode, u8 send_flags, u8 num_sge,
                   // then per SGE written (at most what the slot holds) pick mr, u16 offset,
                   // u16 length; pick rkey (MR and MW keys), u16 remote offset, u32 imm (LOCAL_INV,
                   // SEND_WITH_INV: below 0xff000000 it picks an
                   // rkey),
                   // u8 compare_add, u8 swap, u8 address (as kToState), pick remote qp, u32 qkey,
                   // pick srq, u8 inline length + bytes [IBV_SEND_INLINE]; BIND_MW: pick mw,
                   // u8 rkey, pick mr, u32 access, u16 offset, u16 length
    kPostRecv,     // pick qp [bit 1: pick srq], u8 count, then count WQEs: u8 num_sge, SGEs
    kRing,         // u8 count, entries: u8 kind (0 pick qp, 1 pick cq, else u32), then the
                   // doorbell fires, then u8 engine turns [bit 1: set the overflow flag]
    kTurns,        // u8 engine turns
    kGarbage,      // u8 ring kind (CQ, SQ, RQ, SRQ, doorbell page), u8 which, u16 offset, u8 n,
                   // n bytes written there
    kArmCq,        // pick cq (its ring), u8 arm value
    kCm,        // u8 cm_op, pick cm id, u8 channel, u8 ps (0 TCP, 1 UDP, 2 IB, 3 IPoIB, else raw),
                // u8 qp_type, u8 backlog, u8 local address (0 the device, 1 any, else another),
                // u8 remote address (as kToState), u8 local port, u8 remote port (small numbers),
                // pick qp, u32 psn, u32 qkey, u32 event, 7 u8 parameters, u8 private length + bytes
                // [bit 1: one byte short]
    kRaw,       // u16 n, n bytes: a message as it came off the socket
    kDump,      // [bit 1: the trace since u8]; once per input (a dump is slow)
    kFaults,    // u8 n, n characters of a fault spec
    kClose,     // the connection closes (the device cleans its session up)
    kResizeCq,  // pick cq, u32 cqe: a new ring of that size's slots, as the library makes it
                // [bit 1: no descriptor] [bit 2: u32 slots, the memfd that size, unsealed]
    kReregMr,   // pick mr, u32 flags, pick pd, u32 access, u16 offset, u16 length in the arena
                // [bit 1: u64 addr and u64 length instead]
    kAdviseMr,  // pick pd, pick mr, u16 offset, u16 length in the MR's iova space
                // [bit 1: u64 addr and u64 length instead]
    kQueryPort,  //
    kQueryPd,    // pick pd (ibv_import_pd's request)
    kQueryMr,    // pick mr (ibv_import_mr's request)
    kCount
};

// The seeds make_corpus writes (control_seeds.cpp): name, input.
std::vector<std::pair<std::string, std::vector<uint8_t>>> control_seeds();

}  // namespace uroce::fuzz
