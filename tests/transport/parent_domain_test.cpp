// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Parent domains and thread domains (ibv_alloc_parent_domain(3), ibv_alloc_td(3)): a parent
// domain stands for its PD wherever one is taken (QPs, CQs through IBV_CQ_INIT_ATTR_MASK_PD,
// MRs), its allocator gives the library buffers of its QPs, and the order of deallocation
// is enforced: the PD and the TD are busy while a parent domain names them, the parent
// domain while objects made on it live.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

// What the allocator saw: pyverbs' test only checks that traffic flows; this one checks
// the calls too.
struct Calls {
    int allocs = 0, frees = 0;
    size_t size = 0, alignment = 0;
    uint64_t type = 0;
    ibv_pd* pd = nullptr;
    void* last = nullptr;
    enum { kMemalign, kDefault, kFail } mode = kMemalign;
};

void* counting_alloc(ibv_pd* pd, void* pd_context, size_t size, size_t alignment, uint64_t type) {
    auto* c = static_cast<Calls*>(pd_context);
    ++c->allocs;
    c->size = size;
    c->alignment = alignment;
    c->type = type;
    c->pd = pd;
    if (c->mode == Calls::kDefault) return IBV_ALLOCATOR_USE_DEFAULT;
    if (c->mode == Calls::kFail) return nullptr;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size) != 0) return nullptr;
    c->last = p;
    return p;
}

void counting_free(ibv_pd* pd, void* pd_context, void* ptr, uint64_t type) {
    auto* c = static_cast<Calls*>(pd_context);
    ++c->frees;
    EXPECT_EQ(pd, c->pd);
    EXPECT_EQ(ptr, c->last);
    EXPECT_EQ(type, c->type);
    free(ptr);
}

class ParentDomain : public TransportTest {
protected:
    ibv_pd* parent(ibv_pd* pd, Calls* calls, ibv_td* td = nullptr) {
        ibv_parent_domain_init_attr a{};
        a.pd = pd;
        a.td = td;
        if (calls) {
            a.comp_mask =
                IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
            a.alloc = counting_alloc;
            a.free = counting_free;
            a.pd_context = calls;
        }
        ibv_pd* p = ibv_alloc_parent_domain(pd->context, &a);
        EXPECT_NE(p, nullptr) << std::strerror(errno);
        return p;
    }
    ibv_cq_ex* cq_on(ibv_pd* parent_domain) {
        ibv_cq_init_attr_ex a{};
        a.cqe = 64;
        a.wc_flags = IBV_WC_STANDARD_FLAGS;
        a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
        a.parent_domain = parent_domain;
        return ibv_create_cq_ex(A().ctx, &a);
    }
};

TEST_F(ParentDomain, BadAttributesAreEinval) {
    ibv_parent_domain_init_attr a{};
    errno = 0;
    EXPECT_EQ(ibv_alloc_parent_domain(A().ctx, &a), nullptr);  // no PD
    EXPECT_EQ(errno, EINVAL);
    a.pd = A().pd;
    a.comp_mask = 1u << 5;  // no such attribute
    errno = 0;
    EXPECT_EQ(ibv_alloc_parent_domain(A().ctx, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
    a.comp_mask = 0;
    errno = 0;
    EXPECT_EQ(ibv_alloc_parent_domain(B().ctx, &a), nullptr);  // A's PD in B's context
    EXPECT_EQ(errno, EINVAL);
    ibv_pd* p = parent(A().pd, nullptr);
    ASSERT_NE(p, nullptr);
    a.pd = p;  // a parent domain of a parent domain
    errno = 0;
    EXPECT_EQ(ibv_alloc_parent_domain(A().ctx, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);

    ibv_td_init_attr ta{};
    ta.comp_mask = 1;
    errno = 0;
    EXPECT_EQ(ibv_alloc_td(A().ctx, &ta), nullptr);
    EXPECT_EQ(errno, EINVAL);

    // IBV_CQ_INIT_ATTR_MASK_PD wants a parent domain (mlx5): a plain PD, or none, is EINVAL.
    errno = 0;
    EXPECT_EQ(cq_on(A().pd), nullptr);
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_EQ(cq_on(nullptr), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_dealloc_pd(p), 0);
}

// RC traffic over a QP, a CQ and an MR made on a parent domain with a TD and allocators;
// the allocator gives the QP's ibv_wr_* buffer; deallocation order is enforced.
TEST_F(ParentDomain, UsableAsItsPdWithItsAllocator) {
    Calls calls;
    ibv_td_init_attr ta{};
    ibv_td* td = ibv_alloc_td(A().ctx, &ta);
    ASSERT_NE(td, nullptr) << std::strerror(errno);
    ibv_pd* pd = ibv_alloc_pd(A().ctx);
    ASSERT_NE(pd, nullptr);
    ibv_pd* p = parent(pd, &calls, td);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->context, A().ctx);
    EXPECT_EQ(p->handle, pd->handle);  // the device sees the PD itself
    EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
    EXPECT_EQ(ibv_dealloc_td(td), EBUSY);

    ibv_cq_ex* cq = cq_on(p);
    ASSERT_NE(cq, nullptr) << std::strerror(errno);
    Side on_parent = A();
    on_parent.pd = p;
    QpOpts o;
    o.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
    Endpoint a = make_qp_with_cqs(on_parent, o, ibv_cq_ex_to_cq(cq), ibv_cq_ex_to_cq(cq));
    ASSERT_NE(a.qp, nullptr);
    EXPECT_EQ(a.qp->pd, p);
    EXPECT_EQ(calls.allocs, 1);
    EXPECT_EQ(calls.pd, p);
    EXPECT_EQ(calls.type, 1u);  // MLX5DV_RES_TYPE_QP's number
    EXPECT_EQ(calls.alignment, 64u);
    EXPECT_GT(calls.size, sizeof(ibv_send_wr));
    EXPECT_EQ(ibv_dealloc_pd(p), EBUSY);  // the QP and the CQ hold it

    Endpoint b = make_qp(B(), o, false);
    ASSERT_NE(b.qp, nullptr);
    connect_qp(a, B(), b.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(b, A(), a.qpn(), o, o.psn_b, o.psn_a);

    Buffer& src = reg(A(), 4096, kAllAccess, p);  // an MR on the parent domain
    EXPECT_EQ(src.mr->pd, p);
    Buffer& dst = reg(B(), 4096);
    src.fill(7);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(a.qp);
    ASSERT_NE(x, nullptr);
    ibv_wr_start(x);
    x->wr_id = 42;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, dst.rkey(), dst.addr());
    ibv_wr_set_sge(x, src.lkey(), src.addr(), 4096);
    ASSERT_EQ(ibv_wr_complete(x), 0);
    expect_send_ok(a, 42, IBV_WC_RDMA_WRITE, 4096);
    EXPECT_EQ(dst.mismatch(7, 0, 4096), -1);

    dereg(src);
    destroy_qp(a);
    EXPECT_EQ(calls.frees, 1);
    EXPECT_EQ(ibv_dealloc_pd(p), EBUSY);  // the CQ still holds it
    ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
    EXPECT_EQ(ibv_dealloc_pd(p), 0);
    EXPECT_EQ(ibv_dealloc_td(td), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// An allocator that answers IBV_ALLOCATOR_USE_DEFAULT is asked, and never asked to free;
// one that fails makes the creation fail with ENOMEM.
TEST_F(ParentDomain, DefaultAndFailingAllocators) {
    Calls calls;
    calls.mode = Calls::kDefault;
    ibv_pd* p = parent(A().pd, &calls);
    ASSERT_NE(p, nullptr);
    ibv_cq* cq = make_cq(A());
    ibv_qp_init_attr_ex ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.pd = p;
    ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
    ibv_qp* qp = ibv_create_qp_ex(A().ctx, &ia);
    ASSERT_NE(qp, nullptr) << std::strerror(errno);
    EXPECT_EQ(calls.allocs, 1);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    EXPECT_EQ(calls.frees, 0);

    calls.mode = Calls::kFail;
    errno = 0;
    EXPECT_EQ(ibv_create_qp_ex(A().ctx, &ia), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(calls.allocs, 2);
    EXPECT_EQ(ibv_dealloc_pd(p), 0);  // the failed QP left no hold behind
}

}  // namespace
}  // namespace uroce::transport_test
