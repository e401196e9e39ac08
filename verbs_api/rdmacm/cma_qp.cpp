// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm over uroce, QPs: the INIT/RTR/RTS transitions the CM drives with ibv_modify_qp
// (as rdma-core's librdmacm does), rdma_init_qp_attr, and the QPs, CQs and SRQs
// rdma_create_qp/rdma_create_srq make on an id. docs/cm.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/flush.h"
#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

// ---- QP transitions ------------------------------------------------------------------------

int modify_to(Id* id, ibv_qp_state st, uint8_t resp_res, uint8_t init_depth) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = st;
    if (rdma_init_qp_attr(&id->id, &a, &mask)) return errno;
    if (st == IBV_QPS_RTR && resp_res != RDMA_MAX_RESP_RES) a.max_dest_rd_atomic = resp_res;
    if (st == IBV_QPS_RTS && init_depth != RDMA_MAX_INIT_DEPTH) a.max_rd_atomic = init_depth;
    return ibv_modify_qp(id->id.qp, &a, mask);
}

int modify_rtr(Id* id, uint8_t resp_res) {
    if (!id->id.qp) return 0;
    // INIT again first: the access flags depend on what the peer agreed to.
    if (int e = modify_to(id, IBV_QPS_INIT, resp_res, RDMA_MAX_INIT_DEPTH)) return e;
    return modify_to(id, IBV_QPS_RTR, resp_res, RDMA_MAX_INIT_DEPTH);
}

int modify_rts(Id* id, uint8_t init_depth) {
    if (!id->id.qp) return 0;
    return modify_to(id, IBV_QPS_RTS, RDMA_MAX_RESP_RES, init_depth);
}

int modify_err(Id* id) {
    if (!id->id.qp) return 0;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    return ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

int init_ud_qp(Id* id, ibv_qp* qp) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_INIT;
    if (rdma_init_qp_attr(&id->id, &a, &mask)) return errno;
    if (int e = ibv_modify_qp(qp, &a, mask)) return e;
    std::memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    if (int e = ibv_modify_qp(qp, &a, IBV_QP_STATE)) return e;
    std::memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int init_conn_qp(Id* id, ibv_qp* qp) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_INIT;
    if (rdma_init_qp_attr(&id->id, &a, &mask)) return errno;
    return ibv_modify_qp(qp, &a, mask);
}

// rdma-core's ucma_complete: a call on a synchronous id waits for its event.
int complete(Id* id) {
    if (!id->sync) return 0;
    if (id->id.event) {
        rdma_ack_cm_event(id->id.event);
        id->id.event = nullptr;
    }
    if (rdma_get_cm_event(id->id.channel, &id->id.event)) return -1;
    int st = id->id.event->status;
    if (!st) return 0;
    if (id->id.event->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(st < 0 ? -st : st);
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

int rdma_init_qp_attr(rdma_cm_id* idp, ibv_qp_attr* a, int* mask) {
    Id* id = id_of(idp);
    if (!id->id.verbs || !a || !mask) return fail(EINVAL);
    ibv_qp_state st = a->qp_state;
    std::memset(a, 0, sizeof *a);
    a->qp_state = st;
    switch (st) {
    case IBV_QPS_INIT:
        a->pkey_index = 0;
        a->port_num = 1;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        if (is_ud(id)) {
            a->qkey = RDMA_UDP_QKEY;
            *mask |= IBV_QP_QKEY;
        } else {
            // Before the peer answered: no remote access; after, what the IB CM grants: with
            // responder resources READ, ATOMIC and, the device having FLUSH of both placement
            // types, FLUSH (the kernel's cm_init_qp_init_attr, Linux 6.2 on).
            if (id->have_conn) {
                a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
                if (id->resp_res)
                    a->qp_access_flags |=
                        IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | int(abi::kAccessFlush);
            }
            *mask |= IBV_QP_ACCESS_FLAGS;
        }
        return 0;
    case IBV_QPS_RTR:
        *mask = IBV_QP_STATE;
        if (is_ud(id)) return 0;
        if (!id->have_conn) return fail(EINVAL);
        a->path_mtu = ibv_mtu(id->mtu);
        a->dest_qp_num = id->remote_qpn;
        a->rq_psn = id->remote_psn;
        a->ah_attr.is_global = 1;
        set_gid(id->remote, &a->ah_attr.grh.dgid);
        a->ah_attr.grh.sgid_index = sgid_index(id);
        a->ah_attr.grh.hop_limit = kHopLimit;
        a->ah_attr.grh.traffic_class = id->tos;
        a->ah_attr.port_num = 1;
        *mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        // Only a QP that answers requests has responder resources and an RNR timer (the
        // kernel's cm_init_qp_rtr_attr: RC and XRC targets, not UC or XRC initiators).
        if (idp->qp_type == IBV_QPT_RC || idp->qp_type == IBV_QPT_XRC_RECV) {
            a->max_dest_rd_atomic = id->resp_res;
            a->min_rnr_timer = 0;
            *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
        return 0;
    case IBV_QPS_RTS:
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (is_ud(id)) {
            a->sq_psn = 0;
            return 0;
        }
        if (!id->have_conn) return fail(EINVAL);
        a->sq_psn = id->local_psn;
        // As the kernel's cm_init_qp_rts_attr: requesters (RC, XRC initiators) get the
        // retry counts and read depth; XRC targets only the ACK timeout; UC neither.
        if (idp->qp_type == IBV_QPT_RC || idp->qp_type == IBV_QPT_XRC_SEND) {
            a->retry_cnt = id->retry_count;
            a->rnr_retry = id->rnr_retry_count;
            a->max_rd_atomic = id->init_depth;
            *mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        if (idp->qp_type != IBV_QPT_UC) {
            a->timeout = id->ack_timeout;
            *mask |= IBV_QP_TIMEOUT;
        }
        return 0;
    default: return fail(EINVAL);
    }
}

// ---- QPs, CQs, SRQs ----------------------------------------------------------------------

static void destroy_cq(ibv_cq** cq, ibv_comp_channel** ch) {
    if (*cq) ibv_destroy_cq(*cq);
    if (*ch) ibv_destroy_comp_channel(*ch);
    *cq = nullptr;
    *ch = nullptr;
}

// The CQs (and channels) the CM made for the id's QP. A receive CQ made for an XRC SRQ
// stays while the SRQ does: it is the SRQ's, and rdma_destroy_srq frees it.
static void destroy_cqs(rdma_cm_id* idp) {
    if (idp->send_cq == idp->recv_cq) idp->send_cq = nullptr;
    if (idp->send_cq_channel == idp->recv_cq_channel) idp->send_cq_channel = nullptr;
    destroy_cq(&idp->send_cq, &idp->send_cq_channel);
    if (!id_of(idp)->srq_cq) destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
}

// CQs (each with its own completion channel) for the queues the caller gave none for, as
// rdma_get_send_comp/rdma_get_recv_comp expect.
static int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
    if (recv_size) {
        id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
        if (!id->recv_cq_channel) goto err;
        id->recv_cq = ibv_create_cq(id->verbs, int(recv_size), id, id->recv_cq_channel, 0);
        if (!id->recv_cq) goto err;
    }
    if (send_size) {
        id->send_cq_channel = ibv_create_comp_channel(id->verbs);
        if (!id->send_cq_channel) goto err;
        id->send_cq = ibv_create_cq(id->verbs, int(send_size), id, id->send_cq_channel, 0);
        if (!id->send_cq) goto err;
    }
    return 0;
err:
    int e = errno;
    if (send_size) destroy_cq(&id->send_cq, &id->send_cq_channel);
    if (recv_size) destroy_cq(&id->recv_cq, &id->recv_cq_channel);
    return e ? e : ENOMEM;
}

int rdma_create_qp_ex(rdma_cm_id* idp, ibv_qp_init_attr_ex* attr) {
    Id* id = id_of(idp);
    if (!attr || idp->qp || !idp->verbs || !id->dev) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
        attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
        attr->pd = idp->pd;
    } else if (attr->pd->context != idp->verbs) {
        return fail(EINVAL);
    }
    if (!attr->pd) return fail(EINVAL);
    if ((idp->recv_cq && attr->recv_cq && idp->recv_cq != attr->recv_cq) ||
        (idp->send_cq && attr->send_cq && idp->send_cq != attr->send_cq))
        return fail(EINVAL);
    // An XRC target QP lives in the device's XRC domain and has no queues of its own: no
    // CQs are made for it (rdma-core makes a receive CQ nobody uses, and leaks it when the
    // XRC SRQ's CQ takes its place in the id); its receives complete on the SRQ's CQ.
    bool tgt = idp->qp_type == IBV_QPT_XRC_RECV;
    if (tgt && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
        attr->xrcd = dev_xrcd(*id->dev);
        if (!attr->xrcd) return -1;
        attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    uint32_t send_size = tgt || attr->send_cq || idp->send_cq ? 0 : attr->cap.max_send_wr;
    uint32_t recv_size = tgt || attr->recv_cq || idp->recv_cq ? 0 : attr->cap.max_recv_wr;
    if (int e = create_cqs(idp, send_size, recv_size)) return fail(e);
    auto undo_cqs = [&] {
        if (send_size) destroy_cq(&idp->send_cq, &idp->send_cq_channel);
        if (recv_size) destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
    };
    if (!tgt) {
        if (!attr->send_cq) attr->send_cq = idp->send_cq;
        if (!attr->recv_cq) attr->recv_cq = idp->recv_cq;
        if (idp->srq && !attr->srq) attr->srq = idp->srq;
    }
    ibv_qp* qp;
    if ((attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD)) == 0) {
        ibv_qp_init_attr ia;
        std::memcpy(&ia, attr, sizeof ia);  // the leading members of ibv_qp_init_attr_ex
        qp = ibv_create_qp(attr->pd, &ia);
        if (qp) attr->cap = ia.cap;
    } else {
        qp = ibv_create_qp_ex(idp->verbs, attr);
    }
    if (!qp) {
        int e = errno ? errno : ENOMEM;
        undo_cqs();
        return fail(e);
    }
    int e = is_ud(id) ? init_ud_qp(id, qp) : init_conn_qp(id, qp);
    if (e) {
        ibv_destroy_qp(qp);
        undo_cqs();
        return fail(e);
    }
    if (qp->pd) idp->pd = qp->pd;
    idp->qp = qp;
    return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (!qp_init_attr) return fail(EINVAL);
    ibv_qp_init_attr_ex ax{};
    std::memcpy(&ax, qp_init_attr, sizeof *qp_init_attr);
    ax.comp_mask = IBV_QP_INIT_ATTR_PD;
    ax.pd = pd ? pd : id->pd;
    int r = rdma_create_qp_ex(id, &ax);
    std::memcpy(qp_init_attr, &ax, sizeof *qp_init_attr);
    return r;
}

void rdma_destroy_qp(rdma_cm_id* id) {
    if (id->qp) ibv_destroy_qp(id->qp);
    id->qp = nullptr;
    destroy_cqs(id);
}

// rdma_create_srq(3): the id must be on a device (EINVAL otherwise, as for rdma_create_qp);
// a PD, when given, of that device (EINVAL); NULL: the device's default PD. An XRC SRQ
// without a CQ gets one made here, with its completion channel, in id->recv_cq and
// id->recv_cq_channel (rdma_get_recv_comp's); rdma_destroy_srq frees them. One SRQ per id:
// a second is EINVAL, as a second QP is (rdma-core would replace, and leak, the first).
int rdma_create_srq_ex(rdma_cm_id* idp, ibv_srq_init_attr_ex* attr) {
    Id* id = id_of(idp);
    if (!attr || !idp->verbs || !id->dev || idp->srq) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
        attr->pd = idp->pd;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    } else if (attr->pd->context != idp->verbs) {
        return fail(EINVAL);
    }
    bool made_cq = false;
    if (attr->srq_type == IBV_SRQT_XRC) {
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
            attr->xrcd = dev_xrcd(*id->dev);
            if (!attr->xrcd) return -1;
        }
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
            if (!idp->recv_cq) {
                if (!attr->attr.max_wr) return fail(EINVAL);
                if (int e = create_cqs(idp, 0, attr->attr.max_wr)) return fail(e);
                made_cq = true;
            }
            attr->cq = idp->recv_cq;
        }
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    }
    ibv_srq* srq;
    if (attr->srq_type == IBV_SRQT_BASIC &&
        (attr->comp_mask & ~uint32_t(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD)) == 0) {
        ibv_srq_init_attr sa;
        std::memcpy(&sa, attr, sizeof sa);  // the leading members of ibv_srq_init_attr_ex
        srq = ibv_create_srq(attr->pd, &sa);
        if (srq) attr->attr = sa.attr;
    } else {
        srq = ibv_create_srq_ex(idp->verbs, attr);
    }
    if (!srq) {
        int e = errno ? errno : ENOMEM;
        if (made_cq) destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
        return fail(e);
    }
    if (!idp->pd) idp->pd = attr->pd;
    idp->srq = srq;
    id->srq_cq = made_cq;
    return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (!attr) return fail(EINVAL);
    ibv_srq_init_attr_ex ax{};
    std::memcpy(&ax, attr, sizeof *attr);
    ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    ax.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
    ax.pd = pd;
    int r = rdma_create_srq_ex(id, &ax);
    std::memcpy(attr, &ax, sizeof *attr);
    return r;
}

// The SRQ, and the CQ and channel rdma_create_srq_ex made for it; the QP's CQs are the
// QP's (rdma_destroy_qp frees them).
void rdma_destroy_srq(rdma_cm_id* idp) {
    if (idp->srq) ibv_destroy_srq(idp->srq);
    idp->srq = nullptr;
    Id* id = id_of(idp);
    if (id->srq_cq) {
        id->srq_cq = false;
        if (idp->send_cq == idp->recv_cq) idp->send_cq = nullptr;
        if (idp->send_cq_channel == idp->recv_cq_channel) idp->send_cq_channel = nullptr;
        destroy_cq(&idp->recv_cq, &idp->recv_cq_channel);
    }
}

}  // extern "C"
