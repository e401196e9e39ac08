// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Shared receive queues: a ring the application posts receives into and the device
// hands to whichever attached QP receives a message first.
#include <unistd.h>

#include <cerrno>

#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

namespace uroce::verbs {

// The one creation path behind ibv_create_srq and ibv_create_srq_ex.
ibv_srq* create_srq(ibv_context* context, ibv_pd* pd, ibv_srq_type type, uint32_t xrcd, ibv_cq* cq,
                    ibv_srq_attr* attr, void* srq_context) {
    auto* srq = new Srq();
    abi::Request req{};
    req.op = abi::Op::kCreateSrq;
    req.u.create_srq.pd = pd->handle;
    req.u.create_srq.max_wr = attr->max_wr;
    req.u.create_srq.max_sge = attr->max_sge;
    req.u.create_srq.srq_limit = attr->srq_limit;
    srq->cookie = new_cookie(ctx_of(context));
    req.u.create_srq.cookie = srq->cookie;
    req.u.create_srq.srq_type = type;
    req.u.create_srq.xrcd = xrcd;
    req.u.create_srq.cq = cq ? cq->handle : 0;
    abi::Response resp{};
    int fds[abi::kMaxFds], nfds = 0;
    int e = request(ctx_of(context), req, resp, fds, &nfds);
    const bool created = !e;
    const auto& o = resp.u.create_srq;
    e = take_ring(e, fds, nfds, o.slots, o.stride, &srq->ring);
    if (e) {
        if (created) give_back(ctx_of(context), abi::Op::kDestroySrq, o.handle);
        delete srq;
        errno = e;
        return nullptr;
    }
    srq->max_sge = o.max_sge;
    attr->max_wr = o.max_wr;  // report what was granted
    attr->max_sge = o.max_sge;
    ibv_srq& s = srq->srq;
    s.context = context;
    s.srq_context = srq_context;
    s.pd = pd;
    s.handle = o.handle;
    pthread_mutex_init(&s.mutex, nullptr);
    pthread_cond_init(&s.cond, nullptr);
    srq->xrc_cq = cq;
    srq->parent = hold_pd(pd);
    track(ctx_of(context), srq);
    return &s;
}

}  // namespace uroce::verbs

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
    return create_srq(pd->context, pd, IBV_SRQT_BASIC, 0, nullptr, &attr->attr, attr->srq_context);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
    abi::Request req{};
    req.op = abi::Op::kModifySrq;
    req.u.modify_srq.handle = srq->handle;
    req.u.modify_srq.mask = uint32_t(mask);
    req.u.modify_srq.attr = *attr;
    abi::Response resp{};
    return request(ctx_of(srq->context), req, resp);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
    abi::Request req{};
    req.op = abi::Op::kQuerySrq;
    req.u.handle.handle = srq->handle;
    abi::Response resp{};
    if (int e = request(ctx_of(srq->context), req, resp)) return e;
    *attr = resp.u.query_srq.attr;
    return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
    if (int e = destroy_handle(ctx_of(srq->context), abi::Op::kDestroySrq, srq->handle)) return e;
    Srq* s = srq_of(srq);
    untrack(ctx_of(srq->context), s);
    await_acks(srq, &s->events_reported);
    unmap_ring(s->ring);
    release_pd(s->parent);
    delete s;
    return 0;
}

}  // extern "C"
