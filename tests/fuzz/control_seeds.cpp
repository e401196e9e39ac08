// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// fuzz_control's seeds (make_corpus writes them to OUT/control/): the sessions a verbs
// application builds, in the input format of control_ops.h, so that mutations start from
// QPs that reach RTS and exchange traffic rather than from requests the device refuses.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "emu/abi/cm_protocol.h"
#include "emu/abi/protocol.h"
#include "tests/fuzz/control_ops.h"

namespace uroce::fuzz {

namespace {

// Writes ops in the order fuzz_control.cpp reads their fields.
class In {
public:
    In& op(CtlOp o, uint8_t flags = 0) { return u8(o).u8(flags); }
    In& u8(uint8_t v) { return put(&v, 1); }
    In& u16(uint16_t v) { return put(&v, 2); }
    In& u32(uint32_t v) { return put(&v, 4); }
    In& u64(uint64_t v) { return put(&v, 8); }
    In& pick(uint8_t index) { return u8(index); }  // the index-th handle of its kind
    In& put(const void* p, size_t n) {
        auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
        return *this;
    }
    std::vector<uint8_t> bytes;

    // Common requests (default picks: the first handle of each kind).
    In& open(uint8_t conn = 0) { return op(kOpen, conn); }
    In& reg_mr(uint32_t access, uint16_t off, uint16_t len, uint8_t conn = 0) {
        return op(kRegMr, conn).pick(0).u32(access).u16(off).u16(len);
    }
    In& create_cq(uint32_t cqe = 64, uint8_t conn = 0) {
        return op(kCreateCq, conn | 2).u32(cqe).pick(0);
    }
    // type: the control_ops.h selector (0 RC, 1 UC, 2 UD, 3 XRC_SEND, 4 XRC_RECV).
    In& create_qp(uint8_t type, uint8_t srq = 0xff, uint8_t conn = 0) {
        op(kCreateQp, conn | (srq == 0xff ? 2 : 0)).u8(type).pick(0).pick(0).pick(0);
        return pick(srq == 0xff ? 0 : srq).pick(0).u8(16).u8(16).u8(4).u8(4).u16(64);
    }
    // kToState for a QP of `type` (the create_qp selector).
    In& to_state(uint8_t qp, ibv_qp_state st, uint8_t dest_qp, uint8_t type = 0, uint8_t addr = 0) {
        op(kToState).pick(qp).u8(st).u8(type).u8(addr).pick(dest_qp).u32(0).u32(0);
        return u8(IBV_MTU_1024 - 1).u8(14).u8(7).u8(7).u8(4).u32(0x11111111).u8(0xe);
    }
    In& connect(uint8_t a, uint8_t b, uint8_t type_a = 0, uint8_t type_b = 0) {
        for (ibv_qp_state st : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
            to_state(a, st, b, type_a);
            to_state(b, st, a, type_b);
        }
        return *this;
    }
    // One SGE in the first MR.
    In& sge(uint16_t off, uint16_t len) { return u8(0).u16(off).u16(len); }
    // WQE fields after the SGEs, as post_send reads them.
    // remote_qpn: a raw QPN instead of the remote_qp-th QP.
    In& wqe_tail(uint8_t rkey = 0, uint16_t roff = 0x4000, uint8_t addr = 0, uint8_t remote_qp = 1,
                 uint32_t remote_qpn = 0) {
        pick(rkey).u16(roff).u32(0x01020304).u8(1).u8(2).u8(addr);
        if (remote_qpn)
            u8(0xf0).u32(remote_qpn);
        else
            pick(remote_qp);
        return u32(0x11111111).pick(0);
    }
    In& send_wqe(uint8_t opcode, uint16_t len, uint8_t flags = IBV_SEND_SIGNALED) {
        return u8(opcode).u8(flags).u8(1).sge(0x1000, len).wqe_tail();
    }
    In& recv(uint8_t qp, uint8_t n, uint8_t flags = 0) {
        op(kPostRecv, flags).u8(qp).u8(n);
        for (uint8_t i = 0; i < n; ++i) u8(1).sge(uint16_t(0x2000 + i * 0x400), 0x400);
        return *this;
    }
    In& ring(uint8_t qp, uint8_t turns = 8) { return op(kRing).u8(1).u8(0).u8(qp).u8(turns); }
    In& turns(uint8_t n) { return op(kTurns).u8(n); }
    In& cm(abi::CmOp o, uint8_t id, uint8_t lport, uint8_t rport, uint8_t qp, uint8_t conn = 0,
           uint8_t qp_type = IBV_QPT_RC) {
        op(kCm, conn).u8(uint8_t(o)).pick(id).u8(0).u8(0).u8(qp_type).u8(0).u8(0).u8(0);
        u8(lport).u8(rport).pick(qp).u32(0).u32(0x11111111).u32(0);
        for (int i = 0; i < 7; ++i) u8(i == 6 ? 3 : 1);
        return u8(4).u32(0xfeedf00d);
    }
};

constexpr uint32_t kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                IBV_ACCESS_MW_BIND;

// A session with a PD, an MR over the arena's first 32 KiB and a CQ.
In base(uint8_t conn = 0) {
    In in;
    in.open(conn).op(kAllocPd, conn).reg_mr(kAllAccess, 0, 0x8000, conn).create_cq(64, conn);
    return in;
}

// Two RC (or UC) QPs of one session connected to each other through the device.
In connected_pair(uint8_t type) {
    In in = base();
    in.create_qp(type).create_qp(type).connect(0, 1, type, type).recv(0, 4).recv(1, 4);
    return in;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<uint8_t>>> control_seeds() {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
    auto add = [&](const char* name, const In& in) { out.emplace_back(name, in.bytes); };

    // Every op once, with its fields zero: the answers to requests naming nothing.
    for (int o = 0; o < kCount; ++o) {
        In in;
        in.open().op(CtlOp(o)).put(std::vector<uint8_t>(24).data(), 24);
        add(("op_" + std::to_string(o)).c_str(), in);
    }

    // RC: SEND, WRITE, READ and both atomics from one QP to the other, then the doorbell.
    {
        In in = connected_pair(0);
        in.op(kPostSend).u8(0).u8(5);
        in.send_wqe(IBV_WR_SEND, 256);
        in.send_wqe(IBV_WR_RDMA_WRITE_WITH_IMM, 3000);
        in.send_wqe(IBV_WR_RDMA_READ, 2048);
        in.send_wqe(IBV_WR_ATOMIC_FETCH_AND_ADD, 8);
        in.send_wqe(IBV_WR_ATOMIC_CMP_AND_SWP, 8);
        in.ring(0, 15).turns(15).op(kQueryQp).pick(0).u32(0xffffffff);
        add("rc_traffic", in);
    }
    // UC: SEND and WRITE; inline data.
    {
        In in = connected_pair(1);
        in.op(kPostSend).u8(0).u8(2);
        in.send_wqe(IBV_WR_SEND_WITH_IMM, 1500);
        in.u8(IBV_WR_SEND).u8(IBV_SEND_SIGNALED | IBV_SEND_INLINE).u8(0).wqe_tail().u8(10);
        for (int i = 0; i < 30; ++i) in.u8(uint8_t(i));
        in.ring(0, 15);
        add("uc_traffic", in);
    }
    // UC: WRITE and WRITE_WITH_IMM into the other QP's MR.
    {
        In in = connected_pair(1);
        in.op(kPostSend).u8(0).u8(2);
        in.send_wqe(IBV_WR_RDMA_WRITE, 2500);
        in.send_wqe(IBV_WR_RDMA_WRITE_WITH_IMM, 100);
        in.ring(0, 15);
        add("uc_write", in);
    }
    // RC over a lossy, reordering, duplicating link (the fault injector), then the receiver
    // reset and connected again while a message may be half received, and more traffic.
    {
        const char spec[] = "loss=0.3,dup=0.2,reorder=0.2,corrupt=0.1,seed=7";
        In in;
        in.op(kFaults).u8(sizeof spec).put(spec, sizeof spec);
        In pair = connected_pair(0);
        in.put(pair.bytes.data(), pair.bytes.size());
        in.op(kPostSend).u8(0).u8(3);
        in.send_wqe(IBV_WR_RDMA_WRITE, 3000);
        in.send_wqe(IBV_WR_SEND, 3000);
        in.send_wqe(IBV_WR_RDMA_READ, 3000);
        in.ring(0, 15).turns(15);
        for (ibv_qp_state st : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS})
            in.to_state(1, st, 0);
        in.recv(1, 4).op(kPostSend).u8(0).u8(1).send_wqe(IBV_WR_RDMA_WRITE, 100);
        in.ring(0, 15).turns(15);
        add("rc_lossy_reset", in);
    }
    // UD: a datagram to the other QP, and to a multicast group it is attached to.
    {
        In in = base();
        in.create_qp(2).create_qp(2);
        for (ibv_qp_state st : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS})
            in.to_state(0, st, 1, 2).to_state(1, st, 0, 2);
        in.recv(0, 4).recv(1, 4);
        in.op(kAttachMcast).pick(1).u16(0).u8(0);
        in.op(kPostSend).u8(0).u8(2);
        in.send_wqe(IBV_WR_SEND, 512);
        in.u8(IBV_WR_SEND_WITH_IMM)
            .u8(IBV_SEND_SIGNALED)
            .u8(1)
            .sge(0, 64)
            .wqe_tail(0, 0, 2, 0, 0xffffff);
        in.ring(0, 15).op(kDetachMcast).pick(1).u16(0).u8(0);
        add("ud_traffic", in);
    }
    // SRQ: two RC QPs receiving through one SRQ, with a limit armed.
    {
        In in = base();
        in.op(kCreateSrq).pick(0).u16(64).u8(2).u16(2);
        in.create_qp(0, 0).create_qp(0, 0).connect(0, 1).recv(0, 4, 2);
        in.op(kPostSend).u8(0).u8(1).send_wqe(IBV_WR_SEND, 100);
        in.ring(0, 15).op(kModifySrq).pick(0).u32(IBV_SRQ_LIMIT).u32(0).u32(3);
        add("srq_traffic", in);
    }
    // XRC: a domain (a file), an XRC SRQ, TGT and INI QPs connected, a SEND to the SRQ; the
    // second connection opens the same domain and the TGT QP.
    {
        In in = base();
        in.op(kOpenXrcd).u8(1).u32(O_CREAT);
        in.op(kCreateSrq, 2).pick(0).u16(16).u8(2).u16(0).pick(0).pick(0);
        in.create_qp(4).create_qp(3).connect(0, 1, 4, 3);
        in.recv(0, 4, 2);
        in.op(kPostSend).u8(1).u8(1).send_wqe(IBV_WR_SEND, 100);
        in.ring(1, 15);
        in.open(1).op(kOpenXrcd, 1).u8(1).u32(0).op(kOpenQp, 1).pick(1).pick(0).u8(0);
        in.op(kClose);
        add("xrc_traffic", in);
    }
    // Memory windows: type 2 bound through the send queue, used for a WRITE by the peer,
    // invalidated; a type 1 window allocated and freed while bound.
    {
        In in = connected_pair(0);
        in.op(kAllocMw).pick(0).u8(IBV_MW_TYPE_2).op(kAllocMw).pick(0).u8(IBV_MW_TYPE_1);
        in.op(kPostSend).u8(1).u8(2);
        in.u8(IBV_WR_BIND_MW).u8(IBV_SEND_SIGNALED).u8(0).wqe_tail();
        in.pick(0).u8(7).u8(0).u32(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        in.u16(0x4000).u16(0x1000);
        in.u8(IBV_WR_BIND_MW).u8(IBV_SEND_SIGNALED).u8(0).wqe_tail();
        in.pick(1).u8(9).u8(0).u32(IBV_ACCESS_REMOTE_READ).u16(0).u16(0x100);
        in.ring(1, 15);
        in.op(kPostSend).u8(0).u8(1).u8(IBV_WR_RDMA_WRITE).u8(IBV_SEND_SIGNALED).u8(1);
        in.sge(0x1000, 64).wqe_tail(1, 0x4000);
        in.ring(0, 15);
        // SEND_WITH_INV of the type 2 window's key (as the bind set it), then LOCAL_INV.
        in.recv(1, 1).op(kPostSend).u8(0).u8(1).u8(IBV_WR_SEND_WITH_INV).u8(IBV_SEND_SIGNALED);
        in.u8(1).sge(0x1000, 16).pick(0).u16(0).u32(1).u8(0).u8(0).u8(0).pick(1).u32(0).pick(0);
        in.op(kPostSend).u8(1).u8(1).u8(IBV_WR_LOCAL_INV).u8(IBV_SEND_SIGNALED).u8(0);
        in.pick(0).u16(0).u32(1).u8(0).u8(0).u8(0).pick(0).u32(0).pick(0);
        in.ring(0, 15).ring(1, 15).op(kDeallocMw).pick(1).op(kDeregMr).pick(0);
        add("mw_bind", in);
    }
    // The connection manager: a listener, a connect to it through the device, the request
    // accepted (its id comes with the CONNECT_REQUEST event), RTU, then a disconnect.
    {
        In in = connected_pair(0);
        in.cm(abi::CmOp::kChannel, 0, 0, 0, 0);
        in.cm(abi::CmOp::kBind, 0, 1, 0, 0).cm(abi::CmOp::kListen, 0, 1, 0, 0);
        in.cm(abi::CmOp::kBind, 0, 0, 0, 0).cm(abi::CmOp::kConnect, 1, 0, 1, 0);
        in.turns(8).cm(abi::CmOp::kAccept, 2, 0, 0, 1).turns(8);
        in.cm(abi::CmOp::kEstablish, 1, 0, 0, 0).turns(8);
        in.cm(abi::CmOp::kDisconnect, 1, 0, 0, 0).turns(8);
        add("cm_connect", in);
        In ud = base();
        ud.create_qp(2);
        ud.cm(abi::CmOp::kChannel, 0, 0, 0, 0);
        ud.cm(abi::CmOp::kBind, 0, 2, 0, 0).cm(abi::CmOp::kListen, 0, 2, 0, 0);
        ud.cm(abi::CmOp::kBind, 0, 0, 0, 0).cm(abi::CmOp::kConnect, 1, 0, 2, 0, 0, IBV_QPT_UD);
        ud.turns(8).cm(abi::CmOp::kAccept, 2, 0, 0, 0, 0, IBV_QPT_UD).turns(8);
        add("cm_sidr", ud);
    }
    // Garbage: an armed CQ, a doorbell page that overflowed, a producer index far ahead.
    {
        In in = connected_pair(0);
        in.op(kArmCq).u8(0).u8(1);
        in.op(kPostSend).u8(0).u8(1).send_wqe(IBV_WR_SEND, 16);
        in.op(kRing, 2).u8(0).u8(0);
        in.op(kGarbage).u8(1).u8(0).u16(0).u8(4).u32(0x7fffffff);
        in.ring(0, 4);
        in.op(kGarbage).u8(0).u8(0).u16(64).u8(4).u32(0xffffff00);
        in.op(kGarbage).u8(4).u8(0).u16(64).u8(4).u32(0x12345678);
        in.ring(1, 4);
        add("garbage", in);
    }
    // A raw Request (kAllocPd) two bytes short, and a kOpen of the wrong version.
    {
        In in;
        in.op(kOpen, 2).u32(abi::kProtocolVersion + 1).open();
        abi::Request q{};
        q.op = abi::Op::kAllocPd;
        in.op(kRaw).u16(6).put(&q, 6);
        in.op(kDump).op(kDump, 2).u8(0);
        const char spec[] = "rx:drop=0.5,seed=1";
        in.op(kFaults).u8(sizeof spec).put(spec, sizeof spec);
        add("raw", in);
    }
    // The later verbs on traffic: the CQ resized under completions (grown, then below what
    // it holds), the MR re-registered (access, then translation) and advised, the port.
    {
        In in = connected_pair(0);
        in.op(kPostSend).u8(0).u8(2).send_wqe(IBV_WR_SEND, 64).send_wqe(IBV_WR_RDMA_WRITE, 512);
        in.ring(0, 8);
        in.op(kResizeCq).pick(0).u32(256).op(kResizeCq).pick(0).u32(1);
        in.op(kReregMr).pick(0).u32(IBV_REREG_MR_CHANGE_ACCESS).pick(0).u32(0xf).u16(0).u16(0);
        in.op(kReregMr).pick(0).u32(IBV_REREG_MR_CHANGE_TRANSLATION).pick(0).u32(0);
        in.u16(0x100).u16(0x2000);
        in.reg_mr(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE, 0, 0x4000);  // advise wants ODP
        in.op(kAdviseMr).pick(0).pick(1).u16(0).u16(0x1000).op(kQueryPort);
        in.op(kQueryPd).pick(0).op(kQueryMr).pick(1);
        in.op(kPostSend).u8(0).u8(1).send_wqe(IBV_WR_SEND, 64).ring(0, 8);
        add("resize_rereg_advise", in);
    }
    return out;
}

}  // namespace uroce::fuzz
