// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Memory windows, invalidation and fences through the public verbs API, between two uroce
// devices (docs/memory-windows.md). Built against the system's <infiniband/verbs.h> and
// linked to the drop-in libibverbs, as an application is.
//
// Every buffer the devices may touch sits inside guard bytes, and after every operation the
// whole allocation (guards, the MR around a window, the window) is compared byte for byte
// with what the test expects: an invalidated R_Key or an access past a window's end must
// change nothing anywhere.
//
// The devices are named by UROCE_MW_DEV_A and UROCE_MW_DEV_B (mw_inv_test.sh starts them).
//
// This header holds the fixture the mw_*_test.cpp files share. The tests stay off
// tests/transport's shared devices by design: mw_inv_test.sh runs them against two devices
// of their own that capture every frame (it checks the capture, the per-opcode counters
// and what a SIGKILLed holder of windows leaves behind).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/verbs_objects.h"
#include "tests/transport/verbs_util.h"

namespace mw_test {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardLen = 64;
constexpr int kAllRemote =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

inline ibv_context* open_named(const char* env, const char* fallback) {
    const char* want = getenv(env);
    return uroce::verbs_util::open_device(want ? want : fallback);
}

// Memory with guard bytes on both sides and a shadow of what every byte should hold.
struct Buf {
    std::vector<uint8_t> mem, want;
    ibv_mr* mr = nullptr;
    Buf(ibv_pd* pd, size_t len, int access, uint8_t seed) : mem(len + 2 * kGuardLen, kGuard) {
        for (size_t i = 0; i < len; ++i) mem[kGuardLen + i] = uint8_t(seed + i * 7);
        want = mem;
        mr = ibv_reg_mr(pd, data(), len, access);
    }
    ~Buf() {
        if (mr) ibv_dereg_mr(mr);
    }
    uint8_t* data() { return mem.data() + kGuardLen; }
    uint64_t addr(size_t off = 0) { return reinterpret_cast<uintptr_t>(data() + off); }
    // The device wrote `src` at `off` (the test expects it to).
    void expect(size_t off, const uint8_t* src, size_t n) {
        std::memcpy(want.data() + kGuardLen + off, src, n);
    }
    // First byte that differs from the expectation, or -1.
    long first_diff() const {
        for (size_t i = 0; i < mem.size(); ++i)
            if (mem[i] != want[i]) return long(i) - long(kGuardLen);
        return -1;
    }
};

struct Conn {
    ibv_qp* a = nullptr;  // on device A (the requester in most tests)
    ibv_qp* b = nullptr;  // on device B
};

// MRs that windows are bound into: the windows give the remote rights.
class MwTest : public ::testing::Test {
protected:
    static ibv_context* ctx_a_;
    static ibv_context* ctx_b_;

    static void SetUpTestSuite() {
        ctx_a_ = open_named("UROCE_MW_DEV_A", "mwa");
        ctx_b_ = open_named("UROCE_MW_DEV_B", "mwb");
    }
    static void TearDownTestSuite() {
        if (ctx_a_) ibv_close_device(ctx_a_);
        if (ctx_b_) ibv_close_device(ctx_b_);
    }

    void SetUp() override {
        ASSERT_TRUE(ctx_a_ && ctx_b_) << "devices not found";
        pd_a_ = ibv_alloc_pd(ctx_a_);
        pd_b_ = ibv_alloc_pd(ctx_b_);
        cq_a_ = ibv_create_cq(ctx_a_, 64, nullptr, nullptr, 0);
        cq_b_ = ibv_create_cq(ctx_b_, 64, nullptr, nullptr, 0);
        ASSERT_TRUE(pd_a_ && pd_b_ && cq_a_ && cq_b_);
    }

    void TearDown() override {
        for (ibv_mw* mw : mws_) ibv_dealloc_mw(mw);
        bufs_.clear();
        for (ibv_qp* qp : qps_) ibv_destroy_qp(qp);
        for (ibv_pd* pd : extra_pds_) ibv_dealloc_pd(pd);
        ibv_destroy_cq(cq_a_);
        ibv_destroy_cq(cq_b_);
        EXPECT_EQ(ibv_dealloc_pd(pd_a_), 0);
        EXPECT_EQ(ibv_dealloc_pd(pd_b_), 0);
    }

    Buf& buf(ibv_pd* pd, size_t len, int access, uint8_t seed = 1) {
        bufs_.push_back(std::make_unique<Buf>(pd, len, access, seed));
        EXPECT_NE(bufs_.back()->mr, nullptr) << "ibv_reg_mr: " << std::strerror(errno);
        return *bufs_.back();
    }

    ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
        ibv_mw* mw = ibv_alloc_mw(pd, type);
        EXPECT_NE(mw, nullptr) << "ibv_alloc_mw: " << std::strerror(errno);
        if (mw) mws_.push_back(mw);
        return mw;
    }

    void forget_mw(ibv_mw* mw) { std::erase(mws_, mw); }

    ibv_qp* make_qp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, ibv_qp_type type) {
        ibv_qp_init_attr ia = verbs_objects::qp_init_attr(cq, type, 16, 2);
        ibv_qp* qp = ibv_create_qp(pd, &ia);
        EXPECT_NE(qp, nullptr) << "ibv_create_qp: " << std::strerror(errno);
        if (qp) qps_.push_back(qp);
        return qp;
    }

    static void to_rts(ibv_qp* qp, ibv_context* peer_ctx, uint32_t peer_qpn, int access) {
        ibv_gid gid{};
        ASSERT_EQ(ibv_query_gid(peer_ctx, 1, 0, &gid), 0);
        uroce::verbs_util::PathAttrs p;
        p.access = access;
        p.max_rd_atomic = p.max_dest_rd_atomic = 4;
        ibv_qp_state failed = IBV_QPS_RESET;
        ASSERT_EQ(uroce::verbs_util::connect_qp(qp, qp->qp_type, gid, peer_qpn, 100, 100, p, true,
                                                &failed),
                  0)
            << "to " << uroce::verbs_util::qp_state_name(failed);
    }

    // A connected pair: `a` on device A in pd_a, `b` on device B in `pd_b` (default pd_b_).
    Conn connect(ibv_qp_type type = IBV_QPT_RC, ibv_pd* pd_b = nullptr) {
        Conn c;
        c.a = make_qp(ctx_a_, pd_a_, cq_a_, type);
        c.b = make_qp(ctx_b_, pd_b ? pd_b : pd_b_, cq_b_, type);
        if (!c.a || !c.b) return c;
        to_rts(c.a, ctx_b_, c.b->qp_num, kAllRemote);
        to_rts(c.b, ctx_a_, c.a->qp_num, kAllRemote);
        return c;
    }

    // The setting of most window tests: a connection, a 4096-byte target on B registered with
    // kMwMr and `extra_access` (pattern 10), a buffer of `len` bytes on A (pattern 99) and a
    // window of `type` in pd_b_, made in that order.
    struct Scene {
        Conn c;
        Buf& target;
        Buf& local;
        ibv_mw* mw;
    };
    Scene scene(ibv_mw_type type, size_t len = 4096, int extra_access = 0) {
        Conn c = connect();
        Buf& target = buf(pd_b_, 4096, kMwMr | extra_access, 10);
        Buf& local = buf(pd_a_, len, IBV_ACCESS_LOCAL_WRITE, 99);
        return {c, target, local, alloc_mw(pd_b_, type)};
    }

    static ibv_wc poll(ibv_cq* cq) {
        ibv_wc wc{};
        if (uroce::verbs_util::poll_one(cq, &wc, 10.0) == 1) return wc;
        ADD_FAILURE() << "no completion within 10 s";
        wc.status = IBV_WC_GENERAL_ERR;
        wc.wr_id = ~0ull;
        return wc;
    }
    // No completion arrives within `ms`.
    static bool quiet(ibv_cq* cq, int ms = 200) {
        ibv_wc wc{};
        return uroce::verbs_util::poll_one(cq, &wc, ms / 1000.0) == 0;
    }

    static ibv_qp_state state(ibv_qp* qp) {
        int e = 0;
        int s = uroce::verbs_util::query_qp_state(qp, &e);
        EXPECT_EQ(e, 0);
        return ibv_qp_state(e ? 0 : s);
    }

    static int post(ibv_qp* qp, ibv_send_wr& wr) {
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(qp, &wr, &bad);
    }

    // One-sided operation of `len` bytes between local [lbuf + loff] and remote `raddr`.
    static void rdma(ibv_qp* qp, ibv_wr_opcode op, Buf& l, size_t loff, uint32_t len, uint32_t rkey,
                     uint64_t raddr, uint64_t wr_id = 1, int flags = 0) {
        ibv_sge sge{l.addr(loff), len, l.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.opcode = op;
        wr.send_flags = IBV_SEND_SIGNALED | flags;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = rkey;
        ASSERT_EQ(post(qp, wr), 0);
    }

    static void send_inv(ibv_qp* qp, Buf& l, size_t loff, uint32_t len, uint32_t inv_rkey,
                         uint64_t wr_id = 7) {
        ibv_sge sge{l.addr(loff), len, l.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.opcode = IBV_WR_SEND_WITH_INV;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.sg_list = &sge;
        wr.num_sge = len ? 1 : 0;
        wr.invalidate_rkey = inv_rkey;
        ASSERT_EQ(post(qp, wr), 0);
    }

    static void recv(ibv_qp* qp, Buf& l, size_t loff, uint32_t len, uint64_t wr_id = 9) {
        ibv_sge sge{l.addr(loff), len, l.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
    }

    // Posts a type 2 bind (IBV_WR_BIND_MW) with the next key; returns that key.
    static uint32_t bind2(ibv_qp* qp, ibv_mw* mw, uint32_t old_rkey, ibv_mr* mr, uint64_t addr,
                          uint64_t len, unsigned access, uint64_t wr_id = 3) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.bind_mw.mw = mw;
        wr.bind_mw.rkey = ibv_inc_rkey(old_rkey);
        wr.bind_mw.bind_info = {mr, addr, len, access};
        EXPECT_EQ(post(qp, wr), 0);
        return wr.bind_mw.rkey;
    }

    // The type 2 bind just posted on `qp` (wr_id 3, by device B) failed as the device executed
    // it: IBV_WC_MW_BIND_ERR, and the QP is in the error state.
    void expect_bind_failed(ibv_qp* qp) {
        expect_wc(poll(cq_b_), 3, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
        EXPECT_EQ(state(qp), IBV_QPS_ERR);
    }

    static void local_inv(ibv_qp* qp, uint32_t rkey, uint64_t wr_id = 5, int flags = 0) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.opcode = IBV_WR_LOCAL_INV;
        wr.send_flags = IBV_SEND_SIGNALED | flags;
        wr.invalidate_rkey = rkey;
        ASSERT_EQ(post(qp, wr), 0);
    }

    static void expect_wc(const ibv_wc& wc, uint64_t wr_id, ibv_wc_status st, ibv_wc_opcode op) {
        EXPECT_EQ(wc.wr_id, wr_id);
        EXPECT_EQ(wc.status, st) << ibv_wc_status_str(wc.status);
        if (st == IBV_WC_SUCCESS) {
            EXPECT_EQ(wc.opcode, op);
        }
    }

    // A bound type 2 window: B binds [off, off + len) of `target` through `qp`.
    uint32_t bound_type2(ibv_qp* qp, ibv_mw* mw, Buf& target, size_t off, size_t len,
                         unsigned access) {
        uint32_t key = bind2(qp, mw, mw->rkey, target.mr, target.addr(off), len, access);
        expect_wc(poll(cq_b_), 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
        return key;
    }

    // A remote access through `c` that must be refused: IBV_WC_REM_ACCESS_ERR, both QPs in
    // the error state, and not one byte changed in `local` or `remote` (guards included).
    void expect_denied(const Conn& c, ibv_wr_opcode op, Buf& local, uint32_t len, uint32_t rkey,
                       Buf& remote, uint64_t raddr) {
        rdma(c.a, op, local, 0, len, rkey, raddr, 66);
        ibv_wc wc = poll(cq_a_);
        EXPECT_EQ(wc.wr_id, 66u);
        EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
        EXPECT_EQ(local.first_diff(), -1) << "the local buffer changed";
        EXPECT_EQ(remote.first_diff(), -1) << "the remote buffer changed";
        EXPECT_EQ(state(c.a), IBV_QPS_ERR);
        EXPECT_EQ(state(c.b), IBV_QPS_ERR);
    }

    // ibv_bind_mw of [off, off + len) of `target` (no MR: unbind) through `qp` on device B,
    // completed; returns the window's new R_Key.
    uint32_t bind1(ibv_qp* qp, ibv_mw* mw, Buf* target, size_t off, size_t len, unsigned access) {
        ibv_mw_bind mb{};
        mb.wr_id = 21;
        mb.send_flags = IBV_SEND_SIGNALED;
        mb.bind_info = {target ? target->mr : nullptr, target ? target->addr(off) : 0, len, access};
        uint32_t old_key = mw->rkey;
        EXPECT_EQ(ibv_bind_mw(qp, mw, &mb), 0);
        EXPECT_EQ(mw->rkey, ibv_inc_rkey(old_key)) << "ibv_bind_mw sets the new R_Key at once";
        ibv_wc wc = poll(cq_b_);
        expect_wc(wc, 21, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
        EXPECT_EQ(wc.byte_len, 0u);
        return mw->rkey;
    }

    // An R_Key of device B that no invalidation may retire, for QP `c.b`: 0 an MR's,
    // 1 a bound type 1 window's, 2 an unbound type 2 window's, 3 a type 2 window bound in
    // another PD, 4 a type 2 window bound through another QP. `target` is in pd_b_.
    uint32_t uninvalidatable_key(int kind, Conn& c, Buf& target) {
        switch (kind) {
        case 1:
            return bind1(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_1), &target, 0, 64,
                         IBV_ACCESS_REMOTE_READ);
        case 2: return alloc_mw(pd_b_, IBV_MW_TYPE_2)->rkey;
        case 3: {
            ibv_pd* other = ibv_alloc_pd(ctx_b_);
            extra_pds_.push_back(other);
            Conn o = connect(IBV_QPT_RC, other);
            Buf& t2 = buf(other, 4096, kMwMr, 10);
            return bound_type2(o.b, alloc_mw(other, IBV_MW_TYPE_2), t2, 0, 64,
                               IBV_ACCESS_REMOTE_READ);
        }
        case 4: {
            Conn o = connect();
            return bound_type2(o.b, alloc_mw(pd_b_, IBV_MW_TYPE_2), target, 0, 64,
                               IBV_ACCESS_REMOTE_READ);
        }
        default: return target.mr->rkey;
        }
    }

    static constexpr int kMwMr = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;

    ibv_pd* pd_a_ = nullptr;
    ibv_pd* pd_b_ = nullptr;
    ibv_cq* cq_a_ = nullptr;
    ibv_cq* cq_b_ = nullptr;
    std::vector<std::unique_ptr<Buf>> bufs_;
    std::vector<ibv_qp*> qps_;
    std::vector<ibv_mw*> mws_;
    std::vector<ibv_pd*> extra_pds_;
};

inline ibv_context* MwTest::ctx_a_ = nullptr;
inline ibv_context* MwTest::ctx_b_ = nullptr;

}  // namespace mw_test
