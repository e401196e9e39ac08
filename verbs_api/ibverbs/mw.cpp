// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Memory windows (docs/memory-windows.md): ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw,
// reached through ibv_context.ops. A bind is a work request on the QP's send queue, like
// any other; the device checks it when it executes it and completes it as IBV_WC_BIND_MW.
#include <cerrno>

#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
    abi::Request req{};
    req.op = abi::Op::kAllocMw;
    req.u.mw.pd = pd->handle;
    req.u.mw.type = uint32_t(type);
    abi::Response resp{};
    if (int e = request(ctx_of(pd->context), req, resp)) {
        errno = e;
        return nullptr;
    }
    auto* mw = new ibv_mw{};
    mw->context = pd->context;
    mw->pd = pd;
    mw->rkey = resp.u.mw.rkey;
    mw->handle = resp.u.mw.handle;
    mw->type = type;
    return mw;
}

int dealloc_mw(ibv_mw* mw) {
    if (int e = destroy_handle(ctx_of(mw->context), abi::Op::kDeallocMw, mw->handle)) return e;
    delete mw;
    return 0;
}

// Type 1 (the header's ibv_bind_mw has checked the type and the PDs it can see). As mlx5:
// the new R_Key is the old one's key byte plus one, and mw->rkey takes it as soon as the
// work request is posted; a failed bind leaves it to the application to undo.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
    const ibv_mw_bind_info& bind = mw_bind->bind_info;
    int err = 0;
    if (!bind.mr && (bind.addr || bind.length))
        err = EINVAL;
    else if (bind.mw_access_flags & IBV_ACCESS_ZERO_BASED)
        err = EINVAL;
    else if (bind.mr && bind.mr->pd != mw->pd)
        err = EPERM;
    if (err) {
        errno = err;
        return err;
    }
    ibv_send_wr wr{};
    wr.wr_id = mw_bind->wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = mw_bind->send_flags;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info = bind;
    ibv_send_wr* bad = nullptr;
    if (int e = post_send(qp, &wr, &bad)) return e;
    mw->rkey = wr.bind_mw.rkey;
    return 0;
}

}  // namespace uroce::verbs
