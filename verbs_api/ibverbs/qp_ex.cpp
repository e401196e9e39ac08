// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The ibv_wr_* interface of struct ibv_qp_ex (ibv_wr_post(3)). A builder starts a work
// request as an ibv_send_wr, the setters complete it, and it goes into the SQ ring through
// the same write_send_wqe as ibv_post_send, so both paths build identical WQEs.
// ibv_wr_complete publishes the batch; on any error it publishes nothing, as mlx5.
#include <cerrno>
#include <cstring>
#include <new>

#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

namespace {

// What each QP type supports, as mlx5 (and the IBTA opcode table) has them.
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint64_t kUcOps = kUdOps | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV |
                            IBV_QP_EX_WITH_BIND_MW;
constexpr uint64_t kXrcOps = kUcOps | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                             IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
// RDMA ATOMIC WRITE and FLUSH are RC only, as rxe has them (the kernel defines no XRC opcode
// for them).
constexpr uint64_t kRcOps = kXrcOps | IBV_QP_EX_WITH_ATOMIC_WRITE | abi::kQpExWithFlush;

void fail(WrStage& s, int err) {
    if (!s.err) s.err = err;
}

// Puts the work request in progress into the ring: it is complete once the next builder
// or ibv_wr_complete comes.
void flush(Qp* qp) {
    WrStage& s = *qp->stage;
    if (!s.open) return;
    s.open = false;
    if (s.err) return;
    if (int e = write_send_wqe(qp, &s.wr, s.prod))
        fail(s, e);
    else
        ++s.prod;
}

// Every builder: the previous work request is done; this one takes wr_id and wr_flags.
ibv_send_wr& begin(ibv_qp_ex* x, ibv_wr_opcode opcode) {
    Qp* qp = qp_of(x);
    flush(qp);
    WrStage& s = *qp->stage;
    s.wr = ibv_send_wr{};
    s.wr.wr_id = x->wr_id;
    s.wr.opcode = opcode;
    // Inline or not is what the data setter says, not the flag (as mlx5).
    s.wr.send_flags = x->wr_flags & ~unsigned(IBV_SEND_INLINE);
    s.open = true;
    return s.wr;
}

// The work request a setter completes; NULL (and the batch fails) without a builder.
ibv_send_wr* current(ibv_qp_ex* x) {
    WrStage& s = *qp_of(x)->stage;
    if (s.open) return &s.wr;
    fail(s, EINVAL);
    return nullptr;
}

void wr_send(ibv_qp_ex* x) { begin(x, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* x, __be32 imm) { begin(x, IBV_WR_SEND_WITH_IMM).imm_data = imm; }

void wr_send_inv(ibv_qp_ex* x, uint32_t rkey) {
    begin(x, IBV_WR_SEND_WITH_INV).invalidate_rkey = rkey;
}

void wr_rdma(ibv_qp_ex* x, ibv_wr_opcode opcode, uint32_t rkey, uint64_t addr, __be32 imm) {
    ibv_send_wr& wr = begin(x, opcode);
    wr.wr.rdma.rkey = rkey;
    wr.wr.rdma.remote_addr = addr;
    wr.imm_data = imm;
}

void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) {
    wr_rdma(x, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, __be32 imm) {
    wr_rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

void wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) {
    wr_rdma(x, IBV_WR_RDMA_READ, rkey, addr, 0);
}

void wr_atomic(ibv_qp_ex* x, ibv_wr_opcode opcode, uint32_t rkey, uint64_t addr,
               uint64_t compare_add, uint64_t swap) {
    ibv_send_wr& wr = begin(x, opcode);
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.remote_addr = addr;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
}

void wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
    wr_atomic(x, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

void wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t add) {
    wr_atomic(x, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

// The 8 bytes are copied now (ibv_wr_post(3)) and travel in the WQE as inline data, which
// every send slot has room for whatever max_inline_data is (write_send_wqe).
void wr_atomic_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
    ibv_send_wr& wr = begin(x, IBV_WR_ATOMIC_WRITE);
    wr.wr.rdma.rkey = rkey;
    wr.wr.rdma.remote_addr = addr;
    WrStage& s = *qp_of(x)->stage;
    std::memcpy(s.inline_data, atomic_wr, 8);
    s.sge[0] = ibv_sge{reinterpret_cast<uint64_t>(s.inline_data), 8, 0};
    wr.sg_list = s.sge;
    wr.num_sge = 1;
    wr.send_flags |= IBV_SEND_INLINE;
}

// rdma-core 56's ibv_wr_flush: no local data; the WQE carries the range, the placement type
// and the selectivity level (emu/abi/rings.h). Set whatever headers this library was built
// with (abi::QpEx).
void wr_flush(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, size_t len, uint8_t type, uint8_t level) {
    ibv_send_wr& wr = begin(x, static_cast<ibv_wr_opcode>(abi::kWrFlush));
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.remote_addr = addr;
    wr.wr.atomic.compare_add = len;
    wr.wr.atomic.swap = abi::flush_wqe_bits(type, level);
}

void wr_local_inv(ibv_qp_ex* x, uint32_t rkey) {
    begin(x, IBV_WR_LOCAL_INV).invalidate_rkey = rkey;
}

void wr_bind_mw(ibv_qp_ex* x, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
    ibv_send_wr& wr = begin(x, IBV_WR_BIND_MW);
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    if (info) wr.bind_mw.bind_info = *info;
}

void wr_set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* list) {
    ibv_send_wr* wr = current(x);
    if (!wr) return;
    WrStage& s = *qp_of(x)->stage;
    // More than the QP's max_send_sge fails in write_send_wqe; copy what fits meanwhile.
    size_t copy = n < abi::kMaxSge ? n : abi::kMaxSge;
    if (copy) std::memcpy(s.sge, list, copy * sizeof *list);
    wr->sg_list = s.sge;
    wr->num_sge = n > size_t(abi::kMaxSge) ? int(abi::kMaxSge) + 1 : int(n);
    wr->send_flags &= ~unsigned(IBV_SEND_INLINE);
}

void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
    ibv_sge sge{addr, length, lkey};
    wr_set_sge_list(x, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs) {
    ibv_send_wr* wr = current(x);
    if (!wr) return;
    WrStage& s = *qp_of(x)->stage;
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        // The QP's max_inline_data is checked in write_send_wqe; this is our copy's size.
        if (bufs[i].length > sizeof s.inline_data - total) return fail(s, EINVAL);
        total += bufs[i].length;
    }
    uint8_t* p = s.inline_data;
    for (size_t i = 0; i < n; ++i) {
        if (bufs[i].length) std::memcpy(p, bufs[i].addr, bufs[i].length);
        p += bufs[i].length;
    }
    s.sge[0] = ibv_sge{reinterpret_cast<uint64_t>(s.inline_data), uint32_t(total), 0};
    wr->sg_list = s.sge;
    wr->num_sge = 1;
    wr->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
    ibv_data_buf buf{addr, length};
    wr_set_inline_data_list(x, 1, &buf);
}

void wr_set_ud_addr(ibv_qp_ex* x, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
    if (ibv_send_wr* wr = current(x)) {
        wr->wr.ud.ah = ah;
        wr->wr.ud.remote_qpn = remote_qpn;
        wr->wr.ud.remote_qkey = remote_qkey;
    }
}

void wr_set_xrc_srqn(ibv_qp_ex* x, uint32_t remote_srqn) {
    if (ibv_send_wr* wr = current(x)) wr->qp_type.xrc.remote_srqn = remote_srqn;
}

void wr_start(ibv_qp_ex* x) {
    Qp* qp = qp_of(x);
    qp->sq_lock.lock();  // held until wr_complete/wr_abort: the critical region
    WrStage& s = *qp->stage;
    s.prod = qp->sq.hdr()->prod.load(std::memory_order_relaxed);
    s.err = 0;
    s.open = false;
}

int wr_complete(ibv_qp_ex* x) {
    Qp* qp = qp_of(x);
    WrStage& s = *qp->stage;
    flush(qp);
    // As mlx5, whose wr_complete fails with EINVAL until the QP reaches RTS.
    if (!s.err && !sq_accepts(&x->qp_base)) s.err = EINVAL;
    // As post_send: under the SQ lock, which device_gone flushes the ring under.
    if (ctx_of(x->qp_base.context)->gone.load(std::memory_order_relaxed)) s.err = EIO;
    uint32_t first = qp->sq.hdr()->prod.load(std::memory_order_relaxed);
    bool posted = !s.err && s.prod != first;
    if (posted) publish_send(qp, s.prod);
    int err = s.err;
    qp->sq_lock.unlock();
    if (posted) ring_qp(qp);
    return err;
}

void wr_abort(ibv_qp_ex* x) {
    Qp* qp = qp_of(x);
    qp->stage->open = false;  // the slots written are beyond prod: the device never saw them
    qp->sq_lock.unlock();
}

}  // namespace

int check_send_ops(ibv_qp_type type, uint64_t ops) {
    uint64_t supported = 0;
    switch (type) {
    case IBV_QPT_RC: supported = kRcOps; break;
    case IBV_QPT_XRC_SEND: supported = kXrcOps; break;
    case IBV_QPT_UC: supported = kUcOps; break;
    case IBV_QPT_UD: supported = kUdOps; break;
    default:  // XRC_RECV has no send queue
        return EOPNOTSUPP;
    }
    return (ops & ~supported) ? EOPNOTSUPP : 0;
}

int enable_wr_api(Qp* qp) {
    abi::QpEx& x = qp->qpx;
    void* m = take_mem(x.qp_base.pd, sizeof(WrStage), kResQpStage, &qp->stage_custom);
    if (!m) return ENOMEM;
    qp->stage = new (m) WrStage();
    ibv_qp_type type = x.qp_base.qp_type;
    // As mlx5: every builder the QP type supports, whatever send_ops_flags asked for; the
    // others (TSO, and those of other QP types) stay NULL.
    x.wr_send = wr_send;
    x.wr_send_imm = wr_send_imm;
    if (type != IBV_QPT_UD) {
        x.wr_send_inv = wr_send_inv;
        x.wr_rdma_write = wr_rdma_write;
        x.wr_rdma_write_imm = wr_rdma_write_imm;
        x.wr_local_inv = wr_local_inv;
        x.wr_bind_mw = wr_bind_mw;
    }
    if (type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND) {
        x.wr_rdma_read = wr_rdma_read;
        x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
        x.wr_atomic_fetch_add = wr_atomic_fetch_add;
    }
    if (type == IBV_QPT_RC) {
        x.wr_atomic_write = wr_atomic_write;
        x.wr_flush = wr_flush;
    }
    if (type == IBV_QPT_UD) x.wr_set_ud_addr = wr_set_ud_addr;
    if (type == IBV_QPT_XRC_SEND) x.wr_set_xrc_srqn = wr_set_xrc_srqn;
    x.wr_set_sge = wr_set_sge;
    x.wr_set_sge_list = wr_set_sge_list;
    x.wr_set_inline_data = wr_set_inline_data;
    x.wr_set_inline_data_list = wr_set_inline_data_list;
    x.wr_start = wr_start;
    x.wr_complete = wr_complete;
    x.wr_abort = wr_abort;
    return 0;
}

}  // namespace uroce::verbs
