// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Memory windows (IBTA 10.6.7) and invalidation: allocating windows, binding them through
// a send queue (type 1 with ibv_bind_mw, type 2 with an IBV_WR_BIND_MW work request),
// LOCAL_INV and the invalidation a SEND_WITH_INV asks of its responder, and resolving a
// window's R_Key for remote access. Rules and their sources: docs/memory-windows.md.
#include "emu/verbs/memory_windows.h"

#include <cerrno>
#include <cstring>

namespace uroce::emu {

namespace {
constexpr uint32_t kRemoteAccess =
    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
constexpr uint32_t kMwIndexMask = 0x7fffff;
}  // namespace

int MemoryWindows::alloc_mw(Session& s, const abi::MwReq& r, abi::MwResp* out) {
    Pd* pd = pds_.get(r.pd);
    if (!owned(s, pd)) return EINVAL;
    if (r.type != IBV_MW_TYPE_1 && r.type != IBV_MW_TYPE_2) return EINVAL;
    auto mw = std::make_unique<Mw>();
    mw->owner = &s;
    mw->pd = r.pd;
    mw->type = r.type;
    uint32_t h;
    Mw* m = mws_.add(std::move(mw), &h);
    if (!m) return ENOMEM;
    // The key portion starts from the device's generation counter, as an MR key's does,
    // so a stale key of a reused slot is unlikely to match.
    m->rkey = kMwKeyBit | (h << 8) | verbs_.next_key_byte();
    ++pd->users;
    s.mws.push_back(h);
    out->handle = h;
    out->rkey = m->rkey;
    return 0;
}

int MemoryWindows::dealloc_mw(Session& s, uint32_t h) {
    Mw* mw = mws_.get(h);
    if (!owned(s, mw)) return EINVAL;
    unbind(*mw);  // a bound window may be freed; its range is no longer reachable
    if (Pd* pd = pds_.get(mw->pd)) --pd->users;
    mws_.remove(h);
    erase_handle(s.mws, h);
    return 0;
}

void MemoryWindows::unbind(Mw& mw) {
    if (mw.bound)
        if (Mr* mr = verbs_.mr_for_key(mw.mr)) --mr->windows;
    mw.bound = false;
    mw.mr = 0;
    mw.addr = mw.length = 0;
    mw.access = 0;
    mw.qpn = 0;
}

// A QP going away takes the type 2 windows bound to it along: nothing could reach them
// any more, and a later QP with the same number must not inherit them.
void MemoryWindows::unbind_qp_windows(const Qp& qp) {
    for (uint32_t h : qp.owner->mws)
        if (Mw* mw = mws_.get(h); mw && mw->type == IBV_MW_TYPE_2 && mw->qpn == qp.qpn) unbind(*mw);
}

Mw* MemoryWindows::mw_for_key(uint32_t rkey) const {
    if (!(rkey & kMwKeyBit)) return nullptr;
    Mw* mw = mws_.get((rkey >> 8) & kMwIndexMask);
    return mw && mw->rkey == rkey ? mw : nullptr;
}

// Executes the IBV_WR_BIND_MW at ring index `index` of `qp` (the checks of IBTA 10.6.7.2
// and 10.6.7.3). What to bind is read from the WQE's slot now, once, and checked as read.
ibv_wc_status MemoryWindows::bind_mw(Qp& qp, uint32_t index) {
    abi::MwBind b;
    std::memcpy(&b, qp.sq_inline(index), sizeof b);
    Mw* mw = mws_.get(b.mw);
    if (!mw || mw->owner != qp.owner) return IBV_WC_MW_BIND_ERR;
    // Zero-based windows: not for type 1 (o10-36.2.2) and, as on ConnectX, not for type 2.
    if (b.access & IBV_ACCESS_ZERO_BASED) return IBV_WC_MW_BIND_ERR;
    if (mw->type == IBV_MW_TYPE_2) {
        if (mw->bound) return IBV_WC_MW_BIND_ERR;        // invalidate first (o10-37.2.30)
        if (mw->pd != qp.pd) return IBV_WC_MW_BIND_ERR;  // C10-72
        if (b.length == 0) return IBV_WC_MW_BIND_ERR;    // no unbinding by bind (o10-37.2.40)
    }
    Mr* mr = nullptr;
    if (b.length) {
        mr = verbs_.mr_for_key(b.mr_lkey);
        if (!mr || mr->owner != qp.owner || mr->pd != mw->pd) return IBV_WC_MW_BIND_ERR;
        if (!(mr->access & IBV_ACCESS_MW_BIND)) return IBV_WC_MW_BIND_ERR;  // C10-73
        // A writable window needs a locally writable region (C10-74).
        if ((b.access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
            !(mr->access & IBV_ACCESS_LOCAL_WRITE))
            return IBV_WC_MW_BIND_ERR;
        // Entirely inside the region (C10-75).
        if (b.addr < mr->iova || b.addr + b.length < b.addr ||
            b.addr + b.length > mr->iova + mr->length)
            return IBV_WC_MW_BIND_ERR;
    }
    unbind(*mw);  // type 1: a bind replaces the previous one
    mw->rkey = (mw->rkey & ~0xffu) | (b.rkey & 0xffu);
    if (!mr) return IBV_WC_SUCCESS;  // type 1, length 0: unbound, under a new key
    mw->bound = true;
    mw->mr = mr->lkey;
    ++mr->windows;
    mw->addr = b.addr;
    mw->length = b.length;
    mw->access = b.access & kRemoteAccess;
    mw->qpn = mw->type == IBV_MW_TYPE_2 ? qp.qpn : 0;
    return IBV_WC_SUCCESS;
}

// Executes an IBV_WR_LOCAL_INV: only a bound type 2 window of the QP's PD can be
// invalidated; MRs from ibv_reg_mr cannot (IBTA allows it for fast-registered regions only,
// which libibverbs has no verb for), nor type 1 windows (o10-37.2.26). rxe's status.
ibv_wc_status MemoryWindows::local_invalidate(Qp& qp, uint32_t rkey) {
    Mw* mw = mw_for_key(rkey);
    if (!mw || mw->type != IBV_MW_TYPE_2 || !mw->bound || mw->pd != qp.pd)
        return IBV_WC_LOC_QP_OP_ERR;
    unbind(*mw);
    return IBV_WC_SUCCESS;
}

// The window a SEND_WITH_INV arriving at `qp` may invalidate, or nullptr: a bound type 2
// window of the PD its receive uses, bound to this QP (for XRC, whose TGT QPs bind nothing,
// the SRQ's PD alone decides).
Mw* MemoryWindows::remote_invalidatable(const Qp& qp, uint32_t rkey) const {
    Mw* mw = mw_for_key(rkey);
    if (!mw || mw->type != IBV_MW_TYPE_2 || !mw->bound || mw->pd != qp.pd) return nullptr;
    if (qp.type != IBV_QPT_XRC_RECV && mw->qpn != qp.qpn) return nullptr;
    return mw;
}

// Remote access of [va, va + len) through a window's R_Key: the window's own range and
// rights, its PD (and for type 2 its QP), then the region underneath.
uint64_t MemoryWindows::mw_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len,
                                  uint32_t access, Session** owner) const {
    Mw* mw = mw_for_key(rkey);
    if (!mw || !mw->bound || mw->pd != qp.pd || !(mw->access & access)) return 0;
    if (mw->type == IBV_MW_TYPE_2 && mw->qpn != qp.qpn) return 0;  // IBTA 10.6.7: its QP only
    if (va < mw->addr || va + len < va || va + len > mw->addr + mw->length) return 0;
    Mr* mr = verbs_.mr_for_key(mw->mr);
    if (!mr) return 0;
    *owner = mr->owner;
    return mr->addr + (va - mr->iova);
}

}  // namespace uroce::emu
