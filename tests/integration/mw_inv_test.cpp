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
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardLen = 64;
constexpr int kAllRemote =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

ibv_context* open_named(const char* env, const char* fallback) {
    const char* want = getenv(env);
    if (!want) want = fallback;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) return nullptr;
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n; ++i)
        if (std::string(ibv_get_device_name(list[i])) == want) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    return ctx;
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
        ibv_qp_init_attr ia{};
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.qp_type = type;
        ia.cap.max_send_wr = 16;
        ia.cap.max_recv_wr = 16;
        ia.cap.max_send_sge = 2;
        ia.cap.max_recv_sge = 2;
        ibv_qp* qp = ibv_create_qp(pd, &ia);
        EXPECT_NE(qp, nullptr) << "ibv_create_qp: " << std::strerror(errno);
        if (qp) qps_.push_back(qp);
        return qp;
    }

    static void to_rts(ibv_qp* qp, ibv_context* peer_ctx, uint32_t peer_qpn, int access) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = access;
        bool rc = qp->qp_type == IBV_QPT_RC;
        int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        ASSERT_EQ(ibv_modify_qp(qp, &a, init_mask), 0);
        ibv_gid gid{};
        ASSERT_EQ(ibv_query_gid(peer_ctx, 1, 0, &gid), 0);
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = peer_qpn;
        a.rq_psn = 100;
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 1;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = 1;
        int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (rc || qp->qp_type == IBV_QPT_XRC_RECV)
            rtr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        ASSERT_EQ(ibv_modify_qp(qp, &a, rtr_mask), 0);
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = 100;
        a.max_rd_atomic = 4;
        int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (rc || qp->qp_type == IBV_QPT_XRC_SEND)
            rts_mask |=
                IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        else if (qp->qp_type == IBV_QPT_XRC_RECV)
            rts_mask |= IBV_QP_TIMEOUT;
        ASSERT_EQ(ibv_modify_qp(qp, &a, rts_mask), 0);
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

    static ibv_wc poll(ibv_cq* cq) {
        ibv_wc wc{};
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < end) {
            int n = ibv_poll_cq(cq, 1, &wc);
            if (n == 1) return wc;
            if (n < 0) break;
        }
        ADD_FAILURE() << "no completion within 10 s";
        wc.status = IBV_WC_GENERAL_ERR;
        wc.wr_id = ~0ull;
        return wc;
    }
    // No completion arrives within `ms`.
    static bool quiet(ibv_cq* cq, int ms = 200) {
        ibv_wc wc{};
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (std::chrono::steady_clock::now() < end)
            if (ibv_poll_cq(cq, 1, &wc) != 0) return false;
        return true;
    }

    static ibv_qp_state state(ibv_qp* qp) {
        ibv_qp_attr a{};
        ibv_qp_init_attr ia{};
        EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
        return a.qp_state;
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

ibv_context* MwTest::ctx_a_ = nullptr;
ibv_context* MwTest::ctx_b_ = nullptr;

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
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_1);
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
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    bind1(c.b, mw, &target, 1000, 2048, IBV_ACCESS_REMOTE_WRITE);
    // One byte past the end: a 2-packet WRITE whose last byte falls outside. Not one byte
    // of it may land, although the MR around the window would have room for it.
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 1500, mw->rkey, target,
                  target.addr(1000 + 2048 - 1499));
}

TEST_F(MwTest, Type1ReadBeforeTheWindowStartFails) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& dst = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    bind1(c.b, mw, &target, 1000, 512, IBV_ACCESS_REMOTE_READ);
    expect_denied(c, IBV_WR_RDMA_READ, dst, 16, mw->rkey, target, target.addr(999));
}

TEST_F(MwTest, WindowRightsAreItsOwn) {
    Conn c = connect();
    // The MR allows remote write; the window only read.
    Buf& target = buf(pd_b_, 4096, kMwMr | IBV_ACCESS_REMOTE_WRITE, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_1);
    bind1(c.b, mw, &target, 0, 4096, IBV_ACCESS_REMOTE_READ);
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, mw->rkey, target, target.addr(0));
}

TEST_F(MwTest, Type1RebindAndUnbindRetireTheOldKey) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_1);
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
        expect_wc(poll(cq_b_), 3, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
        EXPECT_EQ(state(c.b), IBV_QPS_ERR);
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
    expect_wc(poll(cq_b_), 3, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
    EXPECT_EQ(state(c.b), IBV_QPS_ERR);
}

TEST_F(MwTest, Type2BindOfABoundWindowFails) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    uint32_t key = bound_type2(c.b, mw, target, 0, 64, IBV_ACCESS_REMOTE_READ);
    bind2(c.b, mw, key, target.mr, target.addr(0), 128, IBV_ACCESS_REMOTE_READ);
    expect_wc(poll(cq_b_), 3, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
    EXPECT_EQ(state(c.b), IBV_QPS_ERR);
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
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 4096, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
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
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = -1;
    xa.oflags = O_CREAT;
    ibv_xrcd* xrcd = ibv_open_xrcd(ctx_b_, &xa);
    ASSERT_NE(xrcd, nullptr) << std::strerror(errno);
    ibv_srq_init_attr_ex sa{};
    sa.attr.max_wr = 8;
    sa.attr.max_sge = 1;
    sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                   IBV_SRQ_INIT_ATTR_CQ;
    sa.srq_type = IBV_SRQT_XRC;
    sa.pd = pd_b_;
    sa.xrcd = xrcd;
    sa.cq = cq_b_;
    ibv_srq* srq = ibv_create_srq_ex(ctx_b_, &sa);
    ASSERT_NE(srq, nullptr) << std::strerror(errno);
    uint32_t srqn = 0;
    ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);
    ibv_qp_init_attr_ex ta{};
    ta.qp_type = IBV_QPT_XRC_RECV;
    ta.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    ta.xrcd = xrcd;
    ibv_qp* tgt = ibv_create_qp_ex(ctx_b_, &ta);
    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_XRC_SEND;
    ia.send_cq = cq_a_;
    ia.cap.max_send_wr = 8;
    ia.cap.max_send_sge = 1;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = pd_a_;
    ibv_qp* ini = ibv_create_qp_ex(ctx_a_, &ia);
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
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 64, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    uint32_t key = bound_type2(c.b, mw, target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    EXPECT_EQ(ibv_dealloc_mw(mw), 0);
    forget_mw(mw);
    expect_denied(c, IBV_WR_RDMA_WRITE, src, 64, key, target, target.addr(0));
    EXPECT_EQ(ibv_dereg_mr(target.mr), 0) << "the region is free again";
    target.mr = nullptr;
}

// Local operations complete in order behind the work requests posted before them.
TEST_F(MwTest, LocalOperationsCompleteInOrder) {
    Conn c = connect();
    Buf& target = buf(pd_a_, 4096, kMwMr, 10);
    Buf& remote =
        buf(pd_b_, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
            40);
    Buf& src = buf(pd_a_, 65536, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_a_, IBV_MW_TYPE_2);
    // A long WRITE, then a bind and an invalidation on the same QP, all signaled.
    rdma(c.a, IBV_WR_RDMA_WRITE, src, 0, 65536, remote.mr->rkey, remote.addr(0), 1);
    uint32_t key =
        bind2(c.a, mw, mw->rkey, target.mr, target.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 2);
    local_inv(c.a, key, 3);
    rdma(c.a, IBV_WR_RDMA_READ, src, 0, 16, remote.mr->rkey, remote.addr(0), 4);
    expect_wc(poll(cq_a_), 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    expect_wc(poll(cq_a_), 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    expect_wc(poll(cq_a_), 3, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
    expect_wc(poll(cq_a_), 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    remote.expect(0, src.data(), 65536);
    EXPECT_EQ(remote.first_diff(), -1);
}

// Under loss, duplication and reordering (the device's fault injector) the requester goes
// back and sends SENDs again; the invalidations and binds between them must take effect
// exactly once and complete in order.
TEST_F(MwTest, LocalOperationsRunOnceUnderLoss) {
    const char* cli = getenv("UROCE_CLI");
    if (!cli) GTEST_SKIP() << "UROCE_CLI is not set: cannot inject faults";
    Conn c = connect();
    Buf& src = buf(pd_a_, 2000, IBV_ACCESS_LOCAL_WRITE, 99);
    Buf& target = buf(pd_a_, 4096, kMwMr, 10);
    Buf& rbuf = buf(pd_b_, 4 * 2000, IBV_ACCESS_LOCAL_WRITE, 20);
    ibv_mw* mw = alloc_mw(pd_a_, IBV_MW_TYPE_2);
    const char* dev = getenv("UROCE_MW_DEV_A") ? getenv("UROCE_MW_DEV_A") : "mwa";
    std::string on = std::string(cli) + " faults loss=0.05,dup=0.05,reorder=0.05,seed=11 " + dev;
    ASSERT_EQ(std::system((on + " >/dev/null").c_str()), 0) << on;
    // Each step invalidates the key the previous one bound and binds the next: running
    // either operation twice fails (a stale key, or a bind of a bound type 2 window).
    uint32_t key =
        bind2(c.a, mw, mw->rkey, target.mr, target.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 9);
    expect_wc(poll(cq_a_), 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    for (int round = 0; round < 30; ++round) {
        for (uint64_t j = 0; j < 4; ++j) recv(c.b, rbuf, j * 2000, 2000, 100 + j);
        for (uint64_t j = 0; j < 4; ++j) {
            ibv_sge sge{src.addr(0), 2000, src.mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = 10 * j;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            ASSERT_EQ(post(c.a, wr), 0);
            local_inv(c.a, key, 10 * j + 1);
            key = bind2(c.a, mw, key, target.mr, target.addr(0), 4096, IBV_ACCESS_REMOTE_READ,
                        10 * j + 2);
        }
        const ibv_wc_opcode ops[] = {IBV_WC_SEND, IBV_WC_LOCAL_INV, IBV_WC_BIND_MW};
        for (uint64_t j = 0; j < 12; ++j)
            expect_wc(poll(cq_a_), 10 * (j / 3) + j % 3, IBV_WC_SUCCESS, ops[j % 3]);
        for (uint64_t j = 0; j < 4; ++j) {
            expect_wc(poll(cq_b_), 100 + j, IBV_WC_SUCCESS, IBV_WC_RECV);
            rbuf.expect(j * 2000, src.data(), 2000);
        }
        ASSERT_EQ(rbuf.first_diff(), -1);
        if (HasFailure()) break;
    }
    std::string off = std::string(cli) + " faults off " + dev + " >/dev/null";
    EXPECT_EQ(std::system(off.c_str()), 0);
    EXPECT_EQ(state(c.a), IBV_QPS_RTS);
}

// `uroce res NAME mw` lists the windows: a bound one with its range, rights and QP.
TEST_F(MwTest, ResourceDumpShowsWindows) {
    const char* cli = getenv("UROCE_CLI");
    if (!cli) GTEST_SKIP() << "UROCE_CLI is not set";
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    uint32_t key = bound_type2(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_2), target, 256, 1024,
                               IBV_ACCESS_REMOTE_WRITE);
    uint32_t key1 = alloc_mw(pd_b_, IBV_MW_TYPE_1)->rkey;
    const char* dev = getenv("UROCE_MW_DEV_B") ? getenv("UROCE_MW_DEV_B") : "mwb";
    std::string cmd = std::string(cli) + " res " + dev + " mw";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::vector<std::string> lines;
    char line[512];
    while (std::fgets(line, sizeof line, p)) lines.emplace_back(line);
    EXPECT_EQ(pclose(p), 0);
    auto find = [&](uint32_t rkey) {
        char want[32];
        std::snprintf(want, sizeof want, " rkey 0x%x ", rkey);
        for (const auto& l : lines)
            if (l.find(want) != std::string::npos) return l;
        return std::string();
    };
    for (const auto& l : lines) EXPECT_EQ(l.rfind("mw ", 0), 0u) << l;
    char want[160];
    std::snprintf(want, sizeof want, " addr 0x%llx length 1024 access 0x%x qpn 0x%x",
                  static_cast<unsigned long long>(target.addr(256)), IBV_ACCESS_REMOTE_WRITE,
                  c.b->qp_num);
    std::string bound = find(key);
    EXPECT_NE(bound.find(" type 2 "), std::string::npos) << bound;
    EXPECT_NE(bound.find(want), std::string::npos) << bound << " lacks" << want;
    std::string unbound = find(key1);
    EXPECT_NE(unbound.find(" type 1 "), std::string::npos) << unbound;
    EXPECT_NE(unbound.find(" unbound"), std::string::npos) << unbound;
}

// Run by mw_inv_test.sh on its own (UROCE_MW_KILL=1): the process dies by SIGKILL holding
// bound windows of both types, and the script checks that the devices freed everything.
TEST_F(MwTest, KilledWithBoundWindows) {
    if (!getenv("UROCE_MW_KILL")) GTEST_SKIP() << "only with UROCE_MW_KILL=1";
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    bind1(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_1), &target, 0, 64, IBV_ACCESS_REMOTE_READ);
    bound_type2(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_2), target, 64, 64, IBV_ACCESS_REMOTE_READ);
    alloc_mw(pd_a_, IBV_MW_TYPE_2);
    kill(getpid(), SIGKILL);
}

// IBV_SEND_FENCE: a fenced SEND of the buffer a READ is filling goes out only after the
// READ's data has landed, so the peer receives what the READ brought.
TEST_F(MwTest, FencedSendWaitsForEarlierRead) {
    Conn c = connect();
    constexpr uint32_t kLen = 32768;  // 32 response packets: the SEND would overtake them
    Buf& remote = buf(pd_b_, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 50);
    Buf& local = buf(pd_a_, kLen, IBV_ACCESS_LOCAL_WRITE, 60);
    Buf& rbuf = buf(pd_b_, kLen, IBV_ACCESS_LOCAL_WRITE, 70);
    recv(c.b, rbuf, 0, kLen, 12);
    rdma(c.a, IBV_WR_RDMA_READ, local, 0, kLen, remote.mr->rkey, remote.addr(0), 1);
    ibv_sge sge{local.addr(0), kLen, local.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 2;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ASSERT_EQ(post(c.a, wr), 0);
    expect_wc(poll(cq_a_), 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    expect_wc(poll(cq_a_), 2, IBV_WC_SUCCESS, IBV_WC_SEND);
    expect_wc(poll(cq_b_), 12, IBV_WC_SUCCESS, IBV_WC_RECV);
    local.expect(0, remote.data(), kLen);
    rbuf.expect(0, remote.data(), kLen);
    EXPECT_EQ(local.first_diff(), -1);
    EXPECT_EQ(rbuf.first_diff(), -1) << "the fenced SEND did not wait for the READ";
}

TEST_F(MwTest, WindowsOfAClosedQpAreGone) {
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    Buf& src = buf(pd_a_, 64, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_b_, IBV_MW_TYPE_2);
    uint32_t key = bound_type2(c.b, mw, target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(ibv_destroy_qp(c.b), 0);
    std::erase(qps_, c.b);
    EXPECT_EQ(ibv_dereg_mr(target.mr), 0) << "the QP's windows were unbound with it";
    target.mr = ibv_reg_mr(pd_b_, target.data(), 4096, kMwMr);
    Conn d = connect();
    expect_denied(d, IBV_WR_RDMA_WRITE, src, 64, key, target, target.addr(0));
}

}  // namespace
