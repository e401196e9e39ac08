// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Shared receive queues (device side). One SRQ feeds the receives of every QP
// attached to it; the limit event fires once each time it is armed.
#include <algorithm>
#include <cerrno>

#include "emu/verbs/control_verbs.h"
#include "emu/verbs/xrc_domains.h"

namespace uroce::emu {

int ControlVerbs::create_srq(Session& s, const abi::CreateSrqReq& r, abi::CreateSrqResp* out,
                             int* fd) {
    Pd* pd = env_.pds.get(r.pd);
    if (!owned(s, pd)) return EINVAL;
    bool xrc = r.srq_type == IBV_SRQT_XRC;
    if (r.srq_type != IBV_SRQT_BASIC && !xrc) return EOPNOTSUPP;  // tag matching
    XrcdHandle* xh = nullptr;
    Cq* cq = nullptr;
    if (xrc) {
        xh = env_.xrcd_handles.get(r.xrcd);
        cq = env_.cqs.get(r.cq);
        if (!owned(s, xh) || !owned(s, cq)) return EINVAL;
    }
    if (r.max_wr == 0 || r.max_wr > abi::kMaxSrqWr || r.max_sge == 0 || r.max_sge > abi::kMaxSge ||
        r.srq_limit > r.max_wr)
        return EINVAL;
    auto srq = std::make_unique<Srq>();
    srq->owner = &s;
    srq->pd = r.pd;
    uint32_t slots = abi::round_pow2(r.max_wr);
    size_t stride = abi::recv_stride(r.max_sge);
    if (int e = srq->region.create("uroce-srq", abi::ring_bytes(slots, stride))) return e;
    srq->ring = static_cast<abi::RingHeader*>(srq->region.data());
    srq->mask = slots - 1;
    srq->stride = uint32_t(stride);
    srq->max_wr = slots;
    srq->max_sge = r.max_sge;
    srq->limit = r.srq_limit;
    srq->cookie = r.cookie;
    if (xrc) {
        srq->xrc = true;
        srq->xrcd = xh->xrcd;
        srq->xrcd_handle = r.xrcd;
        srq->cq = r.cq;
    }
    uint32_t h;
    Srq* q = env_.srqs.add(std::move(srq), &h);
    if (!q) return ENOMEM;
    ++pd->users;
    if (xrc) {
        ++cq->users;
        ++xh->objects;
        ++env_.xrcds.get(xh->xrcd)->objects;
    }
    s.srqs.push_back(h);
    out->handle = h;
    out->max_wr = q->max_wr;
    out->max_sge = q->max_sge;
    out->slots = slots;
    out->stride = q->stride;
    *fd = q->region.take_fd();
    return 0;
}

int ControlVerbs::modify_srq(Session& s, const abi::ModifySrqReq& r) {
    Srq* q = env_.srqs.get(r.handle);
    if (!owned(s, q)) return EINVAL;
    if (r.mask & ~uint32_t(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
    // Resizing needs IBV_DEVICE_SRQ_RESIZE, which uroce does not claim.
    if (r.mask & IBV_SRQ_MAX_WR) return EINVAL;
    if (r.mask & IBV_SRQ_LIMIT) {
        if (r.attr.srq_limit > q->max_wr) return EINVAL;
        q->limit = r.attr.srq_limit;
    }
    return 0;
}

int ControlVerbs::query_srq(Session& s, uint32_t handle, abi::QuerySrqResp* out) {
    Srq* q = env_.srqs.get(handle);
    if (!owned(s, q)) return EINVAL;
    out->attr.max_wr = q->max_wr;
    out->attr.max_sge = q->max_sge;
    out->attr.srq_limit = q->limit;
    return 0;
}

int ControlVerbs::destroy_srq(Session& s, uint32_t handle) {
    Srq* q = env_.srqs.get(handle);
    if (!owned(s, q)) return EINVAL;
    if (q->users) return EBUSY;
    if (Pd* pd = env_.pds.get(q->pd)) --pd->users;
    if (q->xrc) {
        if (Cq* cq = env_.cqs.get(q->cq)) --cq->users;
        env_.xrc.object_gone(q->xrcd, q->xrcd_handle);
        env_.xrc.srq_gone(handle);
    }
    env_.srqs.remove(handle);
    auto it = std::find(s.srqs.begin(), s.srqs.end(), handle);
    if (it != s.srqs.end()) s.srqs.erase(it);
    return 0;
}

}  // namespace uroce::emu
