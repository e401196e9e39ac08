// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The extended verbs of verbs_context: XRC domains, SRQs of any type, QP creation
// with ibv_qp_init_attr_ex, and ibv_open_qp. verbs.h's inline wrappers call these.
#include <cerrno>
#include <cstring>

#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

namespace {

// The QP types ibv_create_qp_ex creates, each with what it needs.
ibv_qp* create_qp_of_type(ibv_context* c, ibv_qp_init_attr_ex* attr) {
    auto* base = reinterpret_cast<ibv_qp_init_attr*>(attr);  // the common prefix
    ibv_pd* pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr;
    switch (attr->qp_type) {
    case IBV_QPT_XRC_RECV: {
        if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) break;
        // A TGT QP has no queues: CQs and SRQ given with it are ignored, as the kernel's
        // create_xrc_qp does; the PD, if any, is kept in qp->pd (rdma-core's set_qp).
        ibv_qp_init_attr tgt = *base;
        tgt.send_cq = tgt.recv_cq = nullptr;
        tgt.srq = nullptr;
        ibv_qp* qp = create_qp(c, nullptr, &tgt, reinterpret_cast<Xrcd*>(attr->xrcd)->handle);
        if (qp) {
            attr->cap = tgt.cap;
            qp->pd = pd;
        }
        return qp;
    }
    case IBV_QPT_XRC_SEND:
        if (!pd || !attr->send_cq) break;
        return create_qp(c, pd, base, 0);
    default:
        if (!pd || !attr->send_cq || !attr->recv_cq) break;
        return create_qp(c, pd, base, 0);
    }
    errno = EINVAL;
    return nullptr;
}

}  // namespace

ibv_xrcd* open_xrcd(ibv_context* c, ibv_xrcd_init_attr* attr) {
    // As rdma-core: unknown bits are unsupported, fd and oflags are both required.
    if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
        !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS)) {
        errno = EINVAL;
        return nullptr;
    }
    if (attr->fd < -1) {
        errno = EBADF;
        return nullptr;
    }
    abi::Request req{};
    req.op = abi::Op::kOpenXrcd;
    req.u.open_xrcd.has_fd = attr->fd >= 0;
    req.u.open_xrcd.oflags = attr->oflags;
    abi::Response resp{};
    // The device looks at the file's inode itself, so the fd travels with the request.
    if (int e = request(ctx_of(c), req, resp, nullptr, nullptr, attr->fd)) {
        errno = e;
        return nullptr;
    }
    auto* x = new Xrcd();
    x->xrcd.context = c;
    x->handle = resp.u.xrcd.handle;
    return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
    auto* x = reinterpret_cast<Xrcd*>(xrcd);
    // As rdma-core: the errno value, returned and left in errno (the failed command's).
    if (int e = destroy_handle(ctx_of(xrcd->context), abi::Op::kCloseXrcd, x->handle))
        return errno = e;
    delete x;
    return 0;
}

ibv_srq* create_srq_ex(ibv_context* c, ibv_srq_init_attr_ex* attr) {
    uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                     IBV_SRQ_INIT_ATTR_CQ;
    if (attr->comp_mask & ~known) {  // tag matching
        errno = EOPNOTSUPP;
        return nullptr;
    }
    ibv_srq_type type =
        (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
        errno = EINVAL;
        return nullptr;
    }
    uint32_t xrcd = 0;
    ibv_cq* cq = nullptr;
    if (type == IBV_SRQT_XRC) {
        // An XRC SRQ needs its domain and the CQ its receives complete on.
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
            !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
            errno = EINVAL;
            return nullptr;
        }
        xrcd = reinterpret_cast<Xrcd*>(attr->xrcd)->handle;
        cq = attr->cq;
    } else if (type != IBV_SRQT_BASIC) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    return create_srq(c, attr->pd, type, xrcd, cq, &attr->attr, attr->srq_context);
}

// The SRQ number an XRC initiator names in wr.qp_type.xrc.remote_srqn.
int get_srq_num(ibv_srq* srq, uint32_t* num) {
    *num = srq->handle;
    return 0;
}

ibv_qp* create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* attr) {
    uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if ((attr->comp_mask & ~known) ||
        ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
        // RSS, TSO, create flags: see docs/verbs-support.md
        errno = EOPNOTSUPP;
        return nullptr;
    }
    bool wr_api = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if (wr_api) {
        if (int e = check_send_ops(attr->qp_type, attr->send_ops_flags)) {
            errno = e;
            return nullptr;
        }
    }
    ibv_qp* qp = create_qp_of_type(c, attr);
    if (qp && wr_api) {
        if (int e = enable_wr_api(qp_of(qp))) {
            ibv_destroy_qp(qp);
            errno = e;
            return nullptr;
        }
    }
    return qp;
}

ibv_qp* open_qp(ibv_context* c, ibv_qp_open_attr* attr) {
    uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED || (attr->comp_mask & need) != need ||
        !attr->xrcd) {
        errno = EINVAL;
        return nullptr;
    }
    auto* qp = new Qp();
    abi::Request req{};
    req.op = abi::Op::kOpenQp;
    req.u.open_qp.xrcd = reinterpret_cast<Xrcd*>(attr->xrcd)->handle;
    req.u.open_qp.qpn = attr->qp_num;
    req.u.open_qp.qp_type = attr->qp_type;
    qp->cookie = new_cookie(ctx_of(c));
    req.u.open_qp.cookie = qp->cookie;
    abi::Response resp{};
    if (int e = request(ctx_of(c), req, resp)) {
        delete qp;
        errno = e;
        return nullptr;
    }
    ibv_qp& q = qp->qpx.qp_base;
    q.context = c;
    q.qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr;
    q.handle = resp.u.open_qp.qpn;
    q.qp_num = resp.u.open_qp.qpn;
    q.state = ibv_qp_state(resp.u.open_qp.state);
    q.qp_type = IBV_QPT_XRC_RECV;
    pthread_mutex_init(&q.mutex, nullptr);
    pthread_cond_init(&q.cond, nullptr);
    track_events(ctx_of(c), qp);
    return &q;
}

}  // namespace uroce::verbs
