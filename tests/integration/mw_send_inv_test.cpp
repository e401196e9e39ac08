// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// SEND_WITH_INVALIDATE between two uroce devices (mw_test_fixture.h), RC and XRC, and what
// deregistering or deallocating under bound windows does.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

#include "mw_test_fixture.h"

namespace mw_test {
namespace {

TEST_F(MwTest, SendWithInvalidateRetiresTheResponderKey) {
    for (uint32_t len : {100u, 3000u, 0u}) {  // one packet, three packets, empty
        SCOPED_TRACE(len);
        Conn c = connect();
        Buf& target = buf(pd_b_, 4096, kMwMr, 10);
        Buf& rbuf = buf(pd_b_, 4096, IBV_ACCESS_LOCAL_WRITE, 20);
        Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
        ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
        uint32_t key = bound_type2(c.b, mw, target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
        recv(c.b, rbuf, 0, 4096, 12);
        send_inv(c.a, src, 0, len, key, 13);
        expect_wc(poll(cq_a_), 13, IBV_WC_SUCCESS, IBV_WC_SEND);
        ibv_wc wc = poll(cq_b_);
        expect_wc(wc, 12, IBV_WC_SUCCESS, IBV_WC_RECV);
        EXPECT_EQ(wc.byte_len, len);
        EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
        EXPECT_FALSE(wc.wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(wc.invalidated_rkey, key);
        EXPECT_EQ(wc.qp_num, c.b->qp_num);
        rbuf.expect(0, src.data(), len);
        EXPECT_EQ(rbuf.first_diff(), -1);
        // The key is gone: a WRITE through it changes nothing.
        expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, key, target, target.addr(0));
    }
}

// Invalidating what cannot be invalidated: the receive completes with
// IBV_WC_REM_INV_REQ_ERR (rxe), the requester gets an Invalid Request NAK, both QPs are
// in the error state and the receive buffer is untouched.
TEST_F(MwTest, SendWithInvalidateOfWhatCannotBeInvalidatedFails) {
    for (int kind = 0; kind < 5; ++kind) {
        SCOPED_TRACE(kind);  // MR rkey, type 1, unbound type 2, other PD, other QP
        Conn c = connect();
        Buf& target = buf(pd_b_, 4096, kMwMr | IBV_ACCESS_REMOTE_WRITE, 10);
        Buf& rbuf = buf(pd_b_, 4096, IBV_ACCESS_LOCAL_WRITE, 20);
        Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
        uint32_t key = uninvalidatable_key(kind, c, target);
        recv(c.b, rbuf, 0, 4096, 12);
        send_inv(c.a, src, 0, 200, key, 13);
        expect_wc(poll(cq_a_), 13, IBV_WC_REM_INV_REQ_ERR, IBV_WC_SEND);
        ibv_wc wc = poll(cq_b_);
        expect_wc(wc, 12, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV);
        EXPECT_EQ(rbuf.first_diff(), -1);
        EXPECT_EQ(target.first_diff(), -1);
        EXPECT_EQ(state(c.a), IBV_QPS_ERR);
        EXPECT_EQ(state(c.b), IBV_QPS_ERR);
        if (kind == 1) {  // a type 1 window survives a refused invalidation
            Conn d = connect();
            Buf& dst = buf(pd_a_, 64, IBV_ACCESS_LOCAL_WRITE, 30);
            rdma(d.a, IBV_WR_RDMA_READ, dst, 0, 64, key, target.addr(0), 15);
            expect_wc(poll(cq_a_), 15, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
            dst.expect(0, target.data(), 64);
            EXPECT_EQ(dst.first_diff(), -1);
        }
    }
}

// XRC: the SRQ a message names gives its PD, and a bound type 2 window of that PD is
// invalidated (an XRC TGT QP binds nothing, so no QP is asked for; docs/memory-windows.md).
TEST_F(MwTest, XrcSendWithInvalidate) {
    using namespace verbs_objects;
    ibv_xrcd* xrcd = open_xrcd(ctx_b_, -1, O_CREAT);
    ASSERT_NE(xrcd, nullptr) << std::strerror(errno);
    ibv_srq* srq = create_xrc_srq(ctx_b_, pd_b_, xrcd, cq_b_, 8);
    ASSERT_NE(srq, nullptr) << std::strerror(errno);
    uint32_t srqn = 0;
    ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);
    ibv_qp* tgt = create_tgt(ctx_b_, xrcd);
    ibv_qp* ini = create_ini(ctx_a_, pd_a_, cq_a_, IBV_QP_INIT_ATTR_PD, 8);
    ASSERT_TRUE(tgt && ini);
    to_rts(ini, ctx_b_, tgt->qp_num, 0);
    to_rts(tgt, ctx_a_, ini->qp_num, kAllRemote);

    Conn c = connect();  // binds the window on device B
    Buf& target = buf(pd_b_, 4096, kMwMr | IBV_ACCESS_REMOTE_WRITE, 10);
    Buf& rbuf = buf(pd_b_, 4096, IBV_ACCESS_LOCAL_WRITE, 20);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    uint32_t key =
        bound_type2(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_2), target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    auto xrc_send_inv = [&](uint32_t rkey, uint32_t len, uint64_t wr_id) {
        ibv_sge rsge{rbuf.addr(0), 4096, rbuf.mr->lkey};
        ibv_recv_wr rwr{};
        rwr.wr_id = wr_id + 100;
        rwr.sg_list = &rsge;
        rwr.num_sge = 1;
        ibv_recv_wr* rbad = nullptr;
        ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
        ibv_sge sge{src.addr(0), len, src.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.opcode = IBV_WR_SEND_WITH_INV;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.invalidate_rkey = rkey;
        wr.qp_type.xrc.remote_srqn = srqn;
        ASSERT_EQ(post(ini, wr), 0);
    };
    xrc_send_inv(key, 2500, 1);
    expect_wc(poll(cq_a_), 1, IBV_WC_SUCCESS, IBV_WC_SEND);
    ibv_wc wc = poll(cq_b_);
    expect_wc(wc, 101, IBV_WC_SUCCESS, IBV_WC_RECV);
    EXPECT_EQ(wc.byte_len, 2500u);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
    EXPECT_EQ(wc.invalidated_rkey, key);
    EXPECT_EQ(wc.qp_num, tgt->qp_num);
    rbuf.expect(0, src.data(), 2500);
    EXPECT_EQ(rbuf.first_diff(), -1);
    EXPECT_EQ(ibv_dereg_mr(target.mr), 0) << "the window was unbound";
    target.mr = ibv_reg_mr(pd_b_, target.data(), 4096, kMwMr | IBV_ACCESS_REMOTE_WRITE);

    // An MR's R_Key cannot be invalidated: both sides fail, nothing lands.
    xrc_send_inv(target.mr->rkey, 100, 2);
    expect_wc(poll(cq_a_), 2, IBV_WC_REM_INV_REQ_ERR, IBV_WC_SEND);
    expect_wc(poll(cq_b_), 102, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV);
    EXPECT_EQ(rbuf.first_diff(), -1);
    EXPECT_EQ(state(ini), IBV_QPS_ERR);
    EXPECT_EQ(state(tgt), IBV_QPS_ERR);

    EXPECT_EQ(ibv_destroy_qp(ini), 0);
    EXPECT_EQ(ibv_destroy_qp(tgt), 0);
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
    EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
}

TEST_F(MwTest, SendWithInvalidateIsRcAndXrcOnly) {
    Conn c = connect(IBV_QPT_UC);
    Buf& src = buf(pd_a_, 64, IBV_ACCESS_LOCAL_WRITE, 99);
    send_inv(c.a, src, 0, 16, 0x1234, 13);
    expect_wc(poll(cq_a_), 13, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND);
    // A send error on UC stops only the send queue (docs/behaviour.md, UC and UD).
    EXPECT_EQ(state(c.a), IBV_QPS_SQE);
}

// IBTA 10.6.7.2.6: an MR with windows bound into it cannot be deregistered (EINVAL, as rxe).
TEST_F(MwTest, DeregOfAnMrWithBoundWindowsFails) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    ibv_mw* mw1 = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    ibv_mw* mw2 = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    bind1(c.b, mw1, &target, 0, 64, IBV_ACCESS_REMOTE_READ);
    uint32_t key2 = bound_type2(c.b, mw2, target, 64, 64, IBV_ACCESS_REMOTE_READ);
    EXPECT_EQ(ibv_dereg_mr(target.mr), EINVAL);
    // Unbinding the type 1 window is not enough while the type 2 one is bound...
    bind1(c.b, mw1, nullptr, 0, 0, 0);
    EXPECT_EQ(ibv_dereg_mr(target.mr), EINVAL);
    // ...invalidating it too frees the region.
    local_inv(c.b, key2, 5);
    expect_wc(poll(cq_b_), 5, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
    EXPECT_EQ(ibv_dereg_mr(target.mr), 0);
    target.mr = nullptr;
}

TEST_F(MwTest, DeallocOfABoundWindowEndsItsAccess) {
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_2, 64);
    uint32_t key = bound_type2(c.b, mw, target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    EXPECT_EQ(ibv_dealloc_mw(mw), 0);
    forget_mw(mw);
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, key, target, target.addr(0));
    EXPECT_EQ(ibv_dereg_mr(target.mr), 0) << "the region is free again";
    target.mr = nullptr;
}

}  // namespace
}  // namespace mw_test
