// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Memory windows between two uroce devices (mw_test_fixture.h): type 1 and type 2 binds,
// their checks and the access they give, and LOCAL_INV.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

#include "mw_test_fixture.h"

namespace mw_test {
namespace {

TEST_F(MwTest, DeviceReportsWindowsAsConnectX) {
    ibv_device_attr a{};
    ASSERT_EQ(ibv_query_device(ctx_a_, &a), 0);
    EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
    EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
    EXPECT_FALSE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
    EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS);
    EXPECT_GT(a.max_mw, 0);
}

TEST_F(MwTest, AllocAndDealloc) {
    ibv_mw* m1 = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    ibv_mw* m2 = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    ASSERT_TRUE(m1 && m2);
    EXPECT_EQ(m1->type, IBV_MW_TYPE_1);
    EXPECT_EQ(m2->type, IBV_MW_TYPE_2);
    EXPECT_EQ(m1->pd, pd_b_);
    EXPECT_EQ(m1->context, ctx_b_);
    EXPECT_NE(m1->rkey, m2->rkey);
    errno = 0;
    EXPECT_EQ(ibv_alloc_mw(pd_b_, ibv_mw_type(3)), nullptr);
    EXPECT_EQ(errno, EINVAL);
    // A window holds its PD, as an MR does.
    EXPECT_EQ(ibv_dealloc_pd(pd_b_), EBUSY);
    EXPECT_EQ(ibv_dealloc_mw(m1), 0);
    forget_mw(m1);
}

// Type 1: ibv_bind_mw, remote WRITE and READ inside the window, nothing outside it.
TEST_F(MwTest, Type1BindGivesRemoteAccessInsideTheWindowOnly) {
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_1);
    ASSERT_TRUE(mw);
    bind1(c.b, mw, &target, 1000, 512, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);

    // WRITE the whole window, exactly.
    rdma(c.a, IBV_WR_RDMA_WRITE, src, 0, 512, mw->rkey, target.addr(1000), 31);
    expect_wc(poll(cq_a_), 31, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    target.expect(1000, src.data(), 512);
    EXPECT_EQ(target.first_diff(), -1);

    // READ part of it back.
    rdma(c.a, IBV_WR_RDMA_READ, src, 2048, 100, mw->rkey, target.addr(1200), 32);
    ibv_wc r = poll(cq_a_);
    expect_wc(r, 32, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    EXPECT_EQ(r.byte_len, 100u);
    src.expect(2048, target.data() + 1200, 100);
    EXPECT_EQ(src.first_diff(), -1);

    // The MR's own R_Key gives nothing: the MR has no remote rights of its own.
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 8, target.mr->rkey, target, target.addr(1000));
}

TEST_F(MwTest, Type1WindowEndIsEnforced) {
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_1);
    bind1(c.b, mw, &target, 1000, 2048, IBV_ACCESS_REMOTE_WRITE);
    // One byte past the end: a 2-packet WRITE whose last byte falls outside. Not one byte
    // of it may land, although the MR around the window would have room for it.
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 1500, mw->rkey, target,
                  target.addr(1000 + 2048 - 1499));
}

TEST_F(MwTest, Type1ReadBeforeTheWindowStartFails) {
    auto [c, target, dst, mw] = scene(IBV_MW_TYPE_1);
    bind1(c.b, mw, &target, 1000, 512, IBV_ACCESS_REMOTE_READ);
    expect_denied(c, IBV_WR_RDMA_READ, dst, 16, mw->rkey, target, target.addr(999));
}

TEST_F(MwTest, WindowRightsAreItsOwn) {
    // The MR allows remote write; the window only read.
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_1, 4096, IBV_ACCESS_REMOTE_WRITE);
    bind1(c.b, mw, &target, 0, 4096, IBV_ACCESS_REMOTE_READ);
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, mw->rkey, target, target.addr(0));
}

TEST_F(MwTest, Type1RebindAndUnbindRetireTheOldKey) {
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_1);
    uint32_t first_key = bind1(c.b, mw, &target, 0, 1024, IBV_ACCESS_REMOTE_WRITE);
    // Rebind elsewhere: the old key stops working, the new one works on the new range.
    EXPECT_NE(bind1(c.b, mw, &target, 2048, 1024, IBV_ACCESS_REMOTE_WRITE), first_key);
    rdma(c.a, IBV_WR_RDMA_WRITE, src, 0, 64, mw->rkey, target.addr(2048), 61);
    expect_wc(poll(cq_a_), 61, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    target.expect(2048, src.data(), 64);
    // Unbind: a zero-length bind with no MR.
    bind1(c.b, mw, nullptr, 0, 0, 0);
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, mw->rkey, target, target.addr(2048));

    // And on a fresh connection, the first key is dead too.
    Conn d = connect();
    expect_denied(d, IBV_WR_RDMA_WRITE, src, 64, first_key, target, target.addr(0));
}

// A type 1 window belongs to its PD: any QP of the PD reaches it.
TEST_F(MwTest, Type1ServesEveryQpOfItsPd) {
    Conn c = connect(), d = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    bind1(c.b, mw, &target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    rdma(d.a, IBV_WR_RDMA_WRITE, src, 0, 300, mw->rkey, target.addr(10), 71);
    expect_wc(poll(cq_a_), 71, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    target.expect(10, src.data(), 300);
    EXPECT_EQ(target.first_diff(), -1);
}

TEST_F(MwTest, BindMwVerbChecksLikeMlx5) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    ibv_mw* mw1 = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    ibv_mw* mw2 = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    ibv_mw_bind mb{};
    mb.bind_info = {target.mr, target.addr(0), 64, IBV_ACCESS_REMOTE_READ};
    EXPECT_EQ(ibv_bind_mw(c.b, mw2, &mb), EINVAL) << "ibv_bind_mw is for type 1";
    mb.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
    EXPECT_EQ(ibv_bind_mw(c.b, mw1, &mb), EINVAL);
    mb.bind_info = {nullptr, 0, 64, IBV_ACCESS_REMOTE_READ};
    EXPECT_EQ(ibv_bind_mw(c.b, mw1, &mb), EINVAL);
    ibv_pd* other = ibv_alloc_pd(ctx_b_);
    extra_pds_.push_back(other);
    ibv_mw* foreign = alloc_mw(other, IBV_MW_TYPE_1);
    mb.bind_info = {target.mr, target.addr(0), 64, IBV_ACCESS_REMOTE_READ};
    uint32_t key = foreign->rkey;
    EXPECT_EQ(ibv_bind_mw(c.b, foreign, &mb), EPERM);
    EXPECT_EQ(foreign->rkey, key) << "a refused bind changes no key";
    EXPECT_TRUE(quiet(cq_b_)) << "a refused bind posts nothing";
    EXPECT_EQ(state(c.b), IBV_QPS_RTS);
}

// Bind checks the device makes when it executes the bind: IBV_WC_MW_BIND_ERR and the QP in
// the error state (rxe's behaviour), the window unchanged.
struct BadBind {
    const char* what;
    int mr_access;
    size_t off, len;
    unsigned mw_access;
};

TEST_F(MwTest, BadBindsCompleteWithMwBindError) {
    const BadBind cases[] = {
        {"MR without IBV_ACCESS_MW_BIND", IBV_ACCESS_LOCAL_WRITE, 0, 64, IBV_ACCESS_REMOTE_READ},
        {"writable window on an MR without local write", IBV_ACCESS_MW_BIND, 0, 64,
         IBV_ACCESS_REMOTE_WRITE},
        {"atomic window on an MR without local write", IBV_ACCESS_MW_BIND, 0, 64,
         IBV_ACCESS_REMOTE_ATOMIC},
        {"window one byte past the MR", kMwMr, 4096 - 63, 64, IBV_ACCESS_REMOTE_READ},
        {"zero-based window", kMwMr, 0, 64, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED},
        {"type 2 of zero length", kMwMr, 0, 0, IBV_ACCESS_REMOTE_READ},
    };
    for (const BadBind& b : cases) {
        SCOPED_TRACE(b.what);
        Conn c = connect();
        Buf& target = buf(pd_b_, 4096, b.mr_access, 10);
        Buf& good = buf(pd_b_, 4096, kMwMr, 11);
        Buf& src = buf(pd_a_, 64, IBV_ACCESS_LOCAL_WRITE, 99);
        ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
        uint32_t key = bind2(c.b, mw, mw->rkey, target.mr, target.addr(b.off), b.len, b.mw_access);
        expect_bind_failed(c.b);
        // Nothing was bound: the window is still free, and binds (under that same key)
        // through another QP, which then reaches the new range only.
        Conn d = connect();
        EXPECT_EQ(bind2(d.b, mw, mw->rkey, good.mr, good.addr(64), 64, IBV_ACCESS_REMOTE_READ),
                  key);
        expect_wc(poll(cq_b_), 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
        rdma(d.a, IBV_WR_RDMA_READ, src, 0, 64, key, good.addr(64), 81);
        expect_wc(poll(cq_a_), 81, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
        src.expect(0, good.data() + 64, 64);
        EXPECT_EQ(src.first_diff(), -1);
        EXPECT_EQ(target.first_diff(), -1);
        EXPECT_EQ(good.first_diff(), -1);
    }
}

TEST_F(MwTest, Type2BindOnQpOfAnotherPdFails) {
    ibv_pd* other = ibv_alloc_pd(ctx_b_);
    extra_pds_.push_back(other);
    Conn c = connect(IBV_QPT_RC, other);
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    bind2(c.b, mw, mw->rkey, target.mr, target.addr(0), 64, IBV_ACCESS_REMOTE_READ);
    expect_bind_failed(c.b);
}

TEST_F(MwTest, Type2BindOfABoundWindowFails) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    uint32_t key = bound_type2(c.b, mw, target, 0, 64, IBV_ACCESS_REMOTE_READ);
    bind2(c.b, mw, key, target.mr, target.addr(0), 128, IBV_ACCESS_REMOTE_READ);
    expect_bind_failed(c.b);
}

// IBTA 10.6.7: a type 2 window is reachable only through the QP it was bound through.
TEST_F(MwTest, Type2ServesOnlyItsQp) {
    Conn c = connect(), d = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    uint32_t key =
        bound_type2(c.b, mw, target, 512, 1024, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    EXPECT_EQ(key & 0xffu, (mw->rkey + 1) & 0xffu);
    rdma(c.a, IBV_WR_RDMA_WRITE, src, 0, 1024, key, target.addr(512), 91);
    expect_wc(poll(cq_a_), 91, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    target.expect(512, src.data(), 1024);
    expect_denied(d, IBV_WR_RDMA_WRITE, src, 16, key, target, target.addr(512));
    EXPECT_EQ(state(c.b), IBV_QPS_RTS);
}

TEST_F(MwTest, LocalInvalidateRetiresAType2Key) {
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_2);
    uint32_t key = bound_type2(c.b, mw, target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    local_inv(c.b, key, 55);
    ibv_wc wc = poll(cq_b_);
    expect_wc(wc, 55, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
    EXPECT_EQ(state(c.b), IBV_QPS_RTS);
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, key, target, target.addr(0));

    // Invalidated, the window can be bound again (under a new key) and works.
    Conn d = connect();
    uint32_t key2 = bind2(d.b, mw, key, target.mr, target.addr(100), 200, IBV_ACCESS_REMOTE_WRITE);
    expect_wc(poll(cq_b_), 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    EXPECT_NE(key2, key);
    rdma(d.a, IBV_WR_RDMA_WRITE, src, 0, 200, key2, target.addr(100), 57);
    expect_wc(poll(cq_a_), 57, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    target.expect(100, src.data(), 200);
    EXPECT_EQ(target.first_diff(), -1);
}

TEST_F(MwTest, LocalInvalidateOfWhatCannotBeInvalidatedFails) {
    for (int kind = 0; kind < 4; ++kind) {
        SCOPED_TRACE(kind);  // MR rkey, type 1, unbound type 2, other PD
        Conn c = connect();
        Buf& target = buf(pd_b_, 4096, kMwMr | IBV_ACCESS_REMOTE_READ, 10);
        uint32_t key = uninvalidatable_key(kind, c, target);
        local_inv(c.b, key, 77);
        expect_wc(poll(cq_b_), 77, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV);
        EXPECT_EQ(state(c.b), IBV_QPS_ERR);
    }
}

}  // namespace
}  // namespace mw_test
