// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Verbs objects made through the public verbs API with the attributes the tests use (for XRC,
// those of ibv_xsrq_pingpong where it has them): plain calls that return what the verb
// returns, so the checking programs and the GoogleTests alike check the answers their own way.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace verbs_objects {

// The attributes of a QP of `type` on `cq` (send and receive), `wr` work requests of up to
// `sge` SGEs each way.
inline ibv_qp_init_attr qp_init_attr(ibv_cq* cq, ibv_qp_type type, uint32_t wr, uint32_t sge) {
    return {.send_cq = cq,
            .recv_cq = cq,
            .cap = {.max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = sge, .max_recv_sge = sge},
            .qp_type = type};
}

// Destroys `obj` with `destroy` (ibv_destroy_qp, ibv_dereg_mr, ...) when it is set, and clears
// it: what the verb returned, 0 when there was nothing to destroy.
template <class T, class Destroy>
int destroy_if(T*& obj, Destroy destroy) {
    int r = obj ? destroy(obj) : 0;
    obj = nullptr;
    return r;
}

inline ibv_xrcd* open_xrcd(ibv_context* ctx, int fd, int oflags,
                           uint32_t mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS) {
    ibv_xrcd_init_attr a{};
    a.comp_mask = mask;
    a.fd = fd;
    a.oflags = oflags;
    return ibv_open_xrcd(ctx, &a);
}

// A signaled work request of `op` with the one SGE `sge`; the caller adds the rest.
inline ibv_send_wr send_wr(uint64_t wr_id, ibv_wr_opcode op, ibv_sge* sge) {
    return {.wr_id = wr_id,
            .sg_list = sge,
            .num_sge = 1,
            .opcode = op,
            .send_flags = IBV_SEND_SIGNALED};
}

// A receive of wr_id `wr_id` into the one SGE `sge`.
inline ibv_recv_wr recv_wr(uint64_t wr_id, ibv_sge* sge) {
    return {.wr_id = wr_id, .sg_list = sge, .num_sge = 1};
}

constexpr uint32_t kXrcSrqMask =
    IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;

// The attributes of an XRC SRQ of `max_wr` one-SGE receives; `mask` says which count.
inline ibv_srq_init_attr_ex xrc_srq_attr(ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq, uint32_t max_wr,
                                         uint32_t mask = kXrcSrqMask) {
    return {.attr = {.max_wr = max_wr, .max_sge = 1},
            .comp_mask = mask,
            .srq_type = IBV_SRQT_XRC,
            .pd = pd,
            .xrcd = xrcd,
            .cq = cq};
}

inline ibv_srq* create_xrc_srq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq,
                               uint32_t max_wr = 64, uint32_t mask = kXrcSrqMask) {
    ibv_srq_init_attr_ex a = xrc_srq_attr(pd, xrcd, cq, max_wr, mask);
    return ibv_create_srq_ex(ctx, &a);
}

inline ibv_srq* create_basic_srq(ibv_context* ctx, ibv_pd* pd) {
    ibv_srq_init_attr_ex a{};
    a.attr.max_wr = 4;
    a.attr.max_sge = 1;
    a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    a.srq_type = IBV_SRQT_BASIC;
    a.pd = pd;
    return ibv_create_srq_ex(ctx, &a);
}

// As ibv_xsrq_pingpong creates them.
inline ibv_qp* create_tgt(ibv_context* ctx, ibv_xrcd* xrcd, uint32_t mask = IBV_QP_INIT_ATTR_XRCD) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_RECV;
    a.comp_mask = mask;
    a.xrcd = xrcd;
    return ibv_create_qp_ex(ctx, &a);
}

inline ibv_qp* create_ini(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq,
                          uint32_t mask = IBV_QP_INIT_ATTR_PD, uint32_t max_send_wr = 32) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.send_cq = cq;
    a.cap.max_send_wr = max_send_wr;
    a.cap.max_send_sge = 1;
    a.comp_mask = mask;
    a.pd = pd;
    return ibv_create_qp_ex(ctx, &a);
}

}  // namespace verbs_objects
