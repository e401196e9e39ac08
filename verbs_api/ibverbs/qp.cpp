// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Queue pairs: creation maps the SQ/RQ rings the device shares with us.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

namespace uroce::verbs {

// The one creation path behind ibv_create_qp and ibv_create_qp_ex. `attr` is the
// common prefix of ibv_qp_init_attr and ibv_qp_init_attr_ex; its cap is updated.
ibv_qp* create_qp(ibv_context* context, ibv_pd* pd, ibv_qp_init_attr* attr, uint32_t xrcd) {
    auto* qp = new Qp();
    abi::Request req{};
    req.op = abi::Op::kCreateQp;
    auto& r = req.u.create_qp;
    r.pd = pd ? pd->handle : 0;
    r.send_cq = attr->send_cq ? attr->send_cq->handle : 0;
    r.recv_cq = attr->recv_cq ? attr->recv_cq->handle : 0;
    r.srq = attr->srq ? attr->srq->handle : 0;
    r.qp_type = attr->qp_type;
    r.sq_sig_all = uint32_t(attr->sq_sig_all);
    r.cap = attr->cap;
    qp->cookie = new_cookie(ctx_of(context));
    r.cookie = qp->cookie;
    r.xrcd = xrcd;
    abi::Response resp{};
    int fds[abi::kMaxFds], nfds = 0;
    Context* ctx = ctx_of(context);
    int e = request(ctx, req, resp, fds, &nfds);
    const auto& o = resp.u.create_qp;
    if (!e && nfds != 2) e = EPROTO;
    if (!e) {
        bool ok = map_ring(fds[0], abi::ring_bytes(o.sq_slots, o.sq_stride), o.sq_slots,
                           o.sq_stride, &qp->sq);
        ok &= map_ring(fds[1], abi::ring_bytes(o.rq_slots, o.rq_stride), o.rq_slots, o.rq_stride,
                       &qp->rq);
        nfds = 0;
        if (!ok) e = ENOMEM;
    }
    if (e) {
        for (int i = 0; i < nfds; ++i) close(fds[i]);
        unmap_ring(qp->sq);
        unmap_ring(qp->rq);
        if (!resp.err && o.qpn) give_back(ctx, abi::Op::kDestroyQp, o.qpn);
        delete qp;
        errno = e;
        return nullptr;
    }
    qp->cap = o.cap;
    qp->doorbell = ctx->doorbell;
    attr->cap = o.cap;  // the verbs contract: report what was granted
    ibv_qp& q = qp->qpx.qp_base;
    q.context = context;
    q.qp_context = attr->qp_context;
    q.pd = pd;
    q.send_cq = attr->send_cq;
    q.recv_cq = attr->recv_cq;
    q.srq = attr->srq;
    q.handle = o.qpn;
    q.qp_num = o.qpn;
    q.state = IBV_QPS_RESET;
    q.qp_type = attr->qp_type;
    pthread_mutex_init(&q.mutex, nullptr);
    pthread_cond_init(&q.cond, nullptr);
    qp->parent = hold_pd(pd);
    track(ctx, qp);
    return &q;
}

namespace {

// Takes the QP's completions out of its CQs (clean_cq).
void clean_cqs(ibv_qp* qp) {
    if (qp->recv_cq) clean_cq(qp->recv_cq, qp->qp_num);
    if (qp->send_cq && qp->send_cq != qp->recv_cq) clean_cq(qp->send_cq, qp->qp_num);
}

}  // namespace

}  // namespace uroce::verbs

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
    // verbs.h sends ibv_create_qp_ex with only a PD here, XRC INI QPs included (they
    // have no receive CQ). A TGT QP needs its XRCD, which only ibv_create_qp_ex carries.
    bool ini = attr->qp_type == IBV_QPT_XRC_SEND;
    if (!attr->send_cq || (!ini && !attr->recv_cq) || attr->qp_type == IBV_QPT_XRC_RECV) {
        errno = EINVAL;
        return nullptr;
    }
    return create_qp(pd->context, pd, attr, 0);
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    abi::Request req{};
    req.op = abi::Op::kModifyQp;
    req.u.modify_qp.qpn = qp->handle;
    req.u.modify_qp.mask = uint32_t(attr_mask);
    req.u.modify_qp.attr = *attr;
    abi::Response resp{};
    if (int e = request(ctx_of(qp->context), req, resp)) return e;
    if (attr_mask & IBV_QP_STATE) qp->state = attr->qp_state;
    // In RESET the device writes no more completions of the QP: the ones it wrote before
    // (the flushes of its error state) go too, as on mlx5, so that a QP reset and connected
    // again does not hand its old work's completions to the new.
    if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) clean_cqs(qp);
    return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
    abi::Request req{};
    req.op = abi::Op::kQueryQp;
    req.u.query_qp.qpn = qp->handle;
    req.u.query_qp.mask = uint32_t(attr_mask);
    abi::Response resp{};
    if (int e = request(ctx_of(qp->context), req, resp)) return e;
    *attr = resp.u.query_qp.attr;
    if (init_attr) {
        std::memset(init_attr, 0, sizeof *init_attr);
        init_attr->qp_context = qp->qp_context;
        init_attr->send_cq = qp->send_cq;
        init_attr->recv_cq = qp->recv_cq;
        init_attr->srq = qp->srq;
        init_attr->cap = resp.u.query_qp.cap;
        init_attr->qp_type = qp->qp_type;
        init_attr->sq_sig_all = int(resp.u.query_qp.sq_sig_all);
    }
    qp->state = attr->qp_state;
    return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
    abi::Request req{};
    req.op = abi::Op::kDestroyQp;
    req.u.destroy_qp.qpn = qp->handle;
    // Names this handle of a TGT QP, which the process may hold several times (ibv_open_qp).
    req.u.destroy_qp.cookie = qp_of(qp)->cookie;
    abi::Response resp{};
    if (int e = destroy_request(ctx_of(qp->context), req, resp)) return e;
    // The device writes no more completions of the QP: the ones it wrote and nobody polled
    // go too, as on mlx5 (docs/verbs-support.md, "Destroyed QPs"); libfabric 1.17's rxm
    // reposts the buffer of a receive it finds there onto the endpoint it is closing.
    clean_cqs(qp);
    Qp* q = qp_of(qp);
    untrack(ctx_of(qp->context), q);
    await_acks(qp, &q->events_reported);
    unmap_ring(q->sq);
    unmap_ring(q->rq);
    if (q->stage) {
        q->stage->~WrStage();
        give_mem(qp->pd, q->stage, q->stage_custom, kResQpStage);
    }
    release_pd(q->parent);
    delete q;
    return 0;
}

// Only QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS have the ibv_wr_* interface; for
// the others NULL, as rdma-core's mlx5 (docs/verbs-support.md).
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
    Qp* q = qp_of(qp);
    return q->stage ? &q->qpx : nullptr;
}

}  // extern "C"
