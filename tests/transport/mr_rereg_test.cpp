// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_rereg_mr between two devices: each IBV_REREG_MR_CHANGE_* flag alone and all together
// take effect for the peer's RDMA WRITEs (the keys stay, struct ibv_mr follows); rdma-core's
// input checks answer IBV_REREG_MR_ERR_INPUT, the device's IBV_REREG_MR_ERR_CMD with the
// kernel's errno, and neither changes the MR; an MR with a window bound into it is refused
// (docs/verbs-support.md).
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr size_t kLen = 4096;
constexpr int kRemoteWrite = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

class MrRereg : public TransportTest {
protected:
    // A writes 256 bytes of pattern `seed` to `addr` at B with `rkey` on a fresh pair; true
    // if the WRITE succeeded. A failed one must be REM_ACCESS_ERR (the pair is then in ERR).
    bool write(uint64_t addr, uint32_t rkey, uint32_t seed) {
        Pair p = connect_pair();
        if (!p.a.qp || !p.b.qp) {
            ADD_FAILURE() << "no pair";
            return false;
        }
        Buffer& src = reg(A(), 256);
        src.fill(seed);
        std::vector<ibv_sge> sg{src.sge(0, 256)};
        ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, sg, addr, rkey);
        EXPECT_EQ(post(p.a.qp, w), 0);
        ibv_wc wc = poll1(p.a.scq);
        EXPECT_EQ(wc.wr_id, 1u);
        if (wc.status == IBV_WC_SUCCESS) return true;
        EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << wc_str(wc);
        EXPECT_TRUE(wait_state(p.b.qp, IBV_QPS_ERR));
        ibv_async_event ev = next_async(B());
        EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
        return false;
    }

    // A mapping of `len` bytes poisoned, not registered; unmapped in TearDown.
    uint8_t* region(size_t len) {
        void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(m, MAP_FAILED);
        std::memset(m, kPoison, len);
        maps_.push_back({m, len});
        return static_cast<uint8_t*>(m);
    }
    void TearDown() override {
        TransportTest::TearDown();
        for (auto& [m, len] : maps_) munmap(m, len);
    }

    // The MR as it was, to compare after a refused rereg.
    struct Snapshot {
        ibv_pd* pd;
        void* addr;
        size_t length;
        uint32_t lkey, rkey;
        bool operator==(const Snapshot&) const = default;
    };
    static Snapshot snap(const ibv_mr* mr) {
        return {mr->pd, mr->addr, mr->length, mr->lkey, mr->rkey};
    }

private:
    std::vector<std::pair<void*, size_t>> maps_;
};

TEST_F(MrRereg, ChangeAccess) {
    Buffer& dst = reg(B(), kLen, IBV_ACCESS_LOCAL_WRITE);
    const Snapshot before = snap(dst.mr);
    EXPECT_FALSE(write(dst.addr(), dst.rkey(), 1)) << "a WRITE without REMOTE_WRITE";
    EXPECT_EQ(dst.not_poison(0, kLen), -1);
    ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRemoteWrite),
              0);
    EXPECT_TRUE(snap(dst.mr) == before) << "keys, PD and range stay";
    EXPECT_TRUE(write(dst.addr(), dst.rkey(), 2)) << "a WRITE with REMOTE_WRITE granted";
    EXPECT_EQ(dst.mismatch(2, 0, 256), -1);
    // And taken away again.
    ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
              0);
    EXPECT_FALSE(write(dst.addr(), dst.rkey(), 3)) << "a WRITE after REMOTE_WRITE was taken away";
    EXPECT_EQ(dst.mismatch(2, 0, 256), -1);
}

TEST_F(MrRereg, ChangeTranslation) {
    Buffer& dst = reg(B(), kLen, kRemoteWrite);
    uint8_t* other = region(2 * kLen);
    const Snapshot before = snap(dst.mr);
    ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other, 2 * kLen, 0),
              0);
    EXPECT_EQ(dst.mr->addr, other);
    EXPECT_EQ(dst.mr->length, 2 * kLen);
    EXPECT_EQ(dst.mr->lkey, before.lkey);
    EXPECT_EQ(dst.mr->rkey, before.rkey);
    EXPECT_EQ(dst.mr->pd, before.pd);
    // The new range takes WRITEs at its own addresses (iova = address), to its last byte.
    const uint64_t base = reinterpret_cast<uintptr_t>(other);
    EXPECT_TRUE(write(base + 2 * kLen - 256, dst.rkey(), 4));
    for (size_t i = 0; i < 256; ++i)
        ASSERT_EQ(other[2 * kLen - 256 + i], pattern_byte(4, i)) << "byte " << i;
    for (size_t i = 0; i < 2 * kLen - 256; ++i) ASSERT_EQ(other[i], kPoison) << "byte " << i;
    // The old range is no longer the MR's.
    EXPECT_FALSE(write(dst.addr(), dst.rkey(), 5));
    EXPECT_EQ(dst.not_poison(0, kLen), -1);
    // Back to the first range: WRITEs reach it again.
    EXPECT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, dst.data(), kLen, 0),
              0);
    EXPECT_TRUE(write(dst.addr(kLen - 256), dst.rkey(), 6));
    EXPECT_EQ(dst.mismatch(6, kLen - 256, 256), -1);
}

TEST_F(MrRereg, ChangePd) {
    ibv_pd* pd2 = alloc_pd(B());  // before the MR: TearDown destroys newest first
    ASSERT_NE(pd2, nullptr);
    Buffer& dst = reg(B(), kLen, kRemoteWrite);
    ibv_pd* pd1 = dst.mr->pd;
    ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
    EXPECT_EQ(dst.mr->pd, pd2);
    // B's QPs are of its first PD: the MR is out of their reach now.
    EXPECT_FALSE(write(dst.addr(), dst.rkey(), 7));
    EXPECT_EQ(dst.not_poison(0, kLen), -1);
    // The MR holds its new PD, not its old one.
    EXPECT_EQ(ibv_dealloc_pd(pd2), EBUSY);
    ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, pd1, nullptr, 0, 0), 0);
    EXPECT_EQ(dst.mr->pd, pd1);
    EXPECT_TRUE(write(dst.addr(), dst.rkey(), 8));
    EXPECT_EQ(dst.mismatch(8, 0, 256), -1);
}

TEST_F(MrRereg, AllThreeAtOnce) {
    ibv_pd* pd2 = alloc_pd(B());
    ASSERT_NE(pd2, nullptr);
    Buffer& dst = reg(B(), kLen, IBV_ACCESS_LOCAL_WRITE, pd2);
    uint8_t* other = region(kLen);
    const int all =
        IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    ASSERT_EQ(ibv_rereg_mr(dst.mr, all, B().pd, other, kLen, kRemoteWrite), 0);
    EXPECT_EQ(dst.mr->pd, B().pd);
    EXPECT_EQ(dst.mr->addr, other);
    EXPECT_EQ(dst.mr->length, kLen);
    EXPECT_TRUE(write(reinterpret_cast<uintptr_t>(other), dst.rkey(), 10));
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(other[i], pattern_byte(10, i)) << "byte " << i;
    EXPECT_EQ(dst.not_poison(0, kLen), -1);
}

// Each refused call leaves the MR as it was: the struct, and what the device does with it.
TEST_F(MrRereg, InvalidCallsChangeNothing) {
    Buffer& dst = reg(B(), kLen, kRemoteWrite);
    const Snapshot before = snap(dst.mr);
    ibv_context* other_ctx = A().ctx;
    ibv_pd* other_pd = A().pd;  // of another context
    // A page nothing maps: the kernel hands out addresses from the top down, so a range just
    // unmapped here could be another thread's by the time of the call (ASan's allocator took
    // one once), a page at 0x10000 never is.
    void* unmapped = reinterpret_cast<void*>(uintptr_t(0x10000));
    ASSERT_NE(msync(unmapped, kLen, MS_ASYNC), 0);
    ASSERT_EQ(errno, ENOMEM) << "0x10000 is mapped in this process";
    ASSERT_NE(other_ctx, B().ctx);
    struct Case {
        const char* what;
        int flags;
        ibv_pd* pd;
        void* addr;
        size_t length;
        int access;
        int ret, err;
    } cases[] = {
        // rdma-core's checks.
        {"an unknown flag", 8, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_INPUT, EINVAL},
        {"translation without a length", IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, dst.data(), 0, 0,
         IBV_REREG_MR_ERR_INPUT, EINVAL},
        {"translation without an address", IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, kLen,
         0, IBV_REREG_MR_ERR_INPUT, EINVAL},
        {"access without CHANGE_ACCESS", IBV_REREG_MR_CHANGE_PD, B().pd, nullptr, 0, kRemoteWrite,
         IBV_REREG_MR_ERR_INPUT, EINVAL},
        // uroce's: no PD, a PD of another context.
        {"CHANGE_PD without a PD", IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0,
         IBV_REREG_MR_ERR_INPUT, EINVAL},
        {"a PD of another context", IBV_REREG_MR_CHANGE_PD, other_pd, nullptr, 0, 0,
         IBV_REREG_MR_ERR_INPUT, EINVAL},
        // The kernel's.
        {"no flag", 0, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL},
        {"remote write without local write", IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
         IBV_ACCESS_REMOTE_WRITE, IBV_REREG_MR_ERR_CMD, EINVAL},
        {"on-demand paging", IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, IBV_REREG_MR_ERR_CMD, EOPNOTSUPP},
        {"unmapped memory", IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, unmapped, kLen, 0,
         IBV_REREG_MR_ERR_CMD, EFAULT},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        errno = 0;
        EXPECT_EQ(ibv_rereg_mr(dst.mr, c.flags, c.pd, c.addr, c.length, c.access), c.ret);
        EXPECT_EQ(errno, c.err);
        EXPECT_TRUE(snap(dst.mr) == before);
    }
    EXPECT_TRUE(write(dst.addr(), dst.rkey(), 11)) << "the MR as registered";
    EXPECT_EQ(dst.mismatch(11, 0, 256), -1);
}

// A window bound into the MR: reregistering is deregistering first, which a bound window
// forbids (ibv_dereg_mr's EINVAL); once the window is gone the same call succeeds.
TEST_F(MrRereg, RefusedWhileAWindowIsBound) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& dst = reg(B(), kLen, kRemoteWrite | IBV_ACCESS_MW_BIND);
    ibv_mw* mw = ibv_alloc_mw(B().pd, IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    ibv_mw_bind bind{};
    bind.wr_id = 50;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind_info = {dst.mr, dst.addr(), kLen, IBV_ACCESS_REMOTE_WRITE};
    ASSERT_EQ(ibv_bind_mw(p.b.qp, mw, &bind), 0);
    expect_wc(p.b.scq, WcWant{50, IBV_WC_SUCCESS, IBV_WC_BIND_MW, 0, p.b.qpn()});
    const Snapshot before = snap(dst.mr);
    errno = 0;
    EXPECT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                           IBV_ACCESS_LOCAL_WRITE),
              IBV_REREG_MR_ERR_CMD);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_TRUE(snap(dst.mr) == before);
    EXPECT_TRUE(write(dst.addr(), dst.rkey(), 12)) << "the MR's rights are unchanged";
    ASSERT_EQ(ibv_dealloc_mw(mw), 0);  // unbinds it
    EXPECT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                           IBV_ACCESS_LOCAL_WRITE),
              0);
    EXPECT_FALSE(write(dst.addr(), dst.rkey(), 13));
    EXPECT_EQ(dst.mismatch(12, 0, 256), -1);
}

}  // namespace
}  // namespace uroce::transport_test
