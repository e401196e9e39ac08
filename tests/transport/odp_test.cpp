// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// On-demand paging MRs (IBV_ACCESS_ON_DEMAND): RDMA into memory never touched, an MR over
// a hole (bad until something is mapped there), implicit ODP (the whole address space),
// ibv_advise_mr and its errors, and the ODP caps ibv_query_device_ex reports.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emu/abi/caps.h"
#include "emu/abi/flush.h"
#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr int kOdpAccess = kAllAccess | IBV_ACCESS_ON_DEMAND;
const size_t kPage = size_t(sysconf(_SC_PAGESIZE));

// A fresh anonymous mapping, never touched by this process; unmapped when done.
struct Mapping {
    uint8_t* p = nullptr;
    size_t len = 0;
    explicit Mapping(size_t n) : len(n) {
        void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        p = m == MAP_FAILED ? nullptr : static_cast<uint8_t*>(m);
    }
    ~Mapping() {
        if (p) munmap(p, len);
    }
    uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(p + off); }
    // Pages of [0, len) the kernel has present.
    size_t resident() const {
        std::vector<unsigned char> v(len / kPage);
        if (mincore(p, len, v.data()) != 0) return SIZE_MAX;
        size_t n = 0;
        for (unsigned char c : v) n += c & 1;
        return n;
    }
};

// An address range that was just unmapped: a hole (until someone maps there).
uint8_t* make_hole(size_t len) {
    Mapping m(len);
    return m.p;
}

// An MR the test deregisters itself (the fixture's reg() registers its own buffers).
struct MrRef {
    ibv_mr* mr = nullptr;
    explicit MrRef(ibv_mr* m) : mr(m) {}
    ~MrRef() {
        if (mr) ibv_dereg_mr(mr);
    }
};

// A fresh mapping registered as an ODP MR.
struct OdpMem {
    Mapping m;
    MrRef mr;
    OdpMem(ibv_pd* pd, size_t len)
        : m(len), mr(m.p ? ibv_reg_mr(pd, m.p, len, kOdpAccess) : nullptr) {}
    bool ok() const { return m.p && mr.mr; }
};

class Odp : public TransportTest {
protected:
    int advise(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge sge) {
        return ibv_advise_mr(pd, advice, flags, &sge, 1);
    }
};

// As rxe reports them (FLUSH and ATOMIC WRITE on RC since Linux 6.16), with XRC (which rxe
// lacks) and implicit ODP as ConnectX.
TEST_F(Odp, CapsReported) {
    ibv_device_attr_ex a{};
    ASSERT_EQ(ibv_query_device_ex(A().ctx, nullptr, &a), 0);
    EXPECT_EQ(a.odp_caps.general_caps, uint64_t(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
    EXPECT_EQ(a.odp_caps.per_transport_caps.rc_odp_caps,
              uint32_t(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                       IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV |
                       abi::kOdpSupportFlush | abi::kOdpSupportAtomicWrite));
    EXPECT_EQ(a.odp_caps.per_transport_caps.uc_odp_caps, 0u);
    EXPECT_EQ(a.odp_caps.per_transport_caps.ud_odp_caps,
              uint32_t(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV));
    EXPECT_EQ(a.xrc_odp_caps,
              uint32_t(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                       IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV));
}

// WRITE into, and READ into, ODP MRs over pages nobody touched: they are faulted in.
TEST_F(Odp, RdmaIntoUntouchedMemory) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    const size_t len = 4 * kPage;
    Mapping dst(len), back(len);
    ASSERT_TRUE(dst.p && back.p);
    MrRef dmr(ibv_reg_mr(B().pd, dst.p, len, kOdpAccess));
    MrRef bmr(ibv_reg_mr(A().pd, back.p, len, kOdpAccess));
    ASSERT_TRUE(dmr.mr && bmr.mr) << strerror(errno);
    EXPECT_EQ(dst.resident(), 0u) << "registration faulted pages in";
    Buffer& src = reg(A(), len);
    src.fill(7);

    // Across page boundaries, starting mid-page.
    const size_t off = 100, n = 3 * kPage + 17;
    std::vector<ibv_sge> sg{src.sge(0, uint32_t(n))};
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, sg, dst.addr(off), dmr.mr->rkey);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, uint32_t(n));
    for (size_t i = 0; i < len; ++i) {
        uint8_t want = i >= off && i < off + n ? pattern_byte(7, i - off) : 0;
        ASSERT_EQ(dst.p[i], want) << "byte " << i;
    }

    std::vector<ibv_sge> rsg{{back.addr(off), uint32_t(n), bmr.mr->lkey}};
    ibv_send_wr r = rdma_wr(2, IBV_WR_RDMA_READ, rsg, dst.addr(off), dmr.mr->rkey);
    ASSERT_EQ(post(p.a.qp, r), 0);
    expect_send_ok(p.a, 2, IBV_WC_RDMA_READ, uint32_t(n));
    EXPECT_EQ(memcmp(back.p + off, dst.p + off, n), 0) << "READ brought other bytes";
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// What rc_odp_caps' FLUSH and ATOMIC WRITE promise: both into an ODP MR whose pages nobody
// touched (the ATOMIC WRITE faults its page in; the FLUSH of a range never written completes).
TEST_F(Odp, AtomicWriteAndFlushIntoUntouchedMemory) {
    QpOpts o;
    o.access |= int(abi::kAccessFlush);
    o.send_ops_flags = abi::kQpExWithFlush | IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_SEND;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    const size_t len = 2 * kPage;
    Mapping dst(len);
    ASSERT_TRUE(dst.p);
    MrRef dmr(ibv_reg_mr(B().pd, dst.p, len, kOdpAccess | int(abi::kAccessFlushGlobal)));
    ASSERT_TRUE(dmr.mr) << strerror(errno);
    auto* x = static_cast<abi::QpEx*>(ibv_qp_to_qp_ex(p.a.qp));
    ASSERT_TRUE(x && x->wr_atomic_write && x->wr_flush);

    uint64_t v = 0x0123456789abcdefull;
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, dmr.mr->rkey, dst.addr(kPage + 8), &v);
    x->wr_id = 2;
    x->wr_flush(x, dmr.mr->rkey, dst.addr(0), 64, abi::kFlushGlobal, abi::kFlushRange);
    ASSERT_EQ(ibv_wr_complete(x), 0);
    expect_send_ok(p.a, 1, IBV_WC_ATOMIC_WRITE, 8);
    expect_send_ok(p.a, 2, static_cast<ibv_wc_opcode>(abi::kWcFlush), 64);
    uint64_t got;
    std::memcpy(&got, dst.p + kPage + 8, 8);
    EXPECT_EQ(got, v);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// An ODP MR may cover a hole (rxe registers it; only access fails): a WRITE there is a
// remote access error, as any bad access.
TEST_F(Odp, HoleIsRemoteAccessError) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    uint8_t* hole = make_hole(2 * kPage);
    ASSERT_TRUE(hole);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(B().pd, hole, 2 * kPage, kAllAccess), nullptr) << "pinned MR over a hole";
    EXPECT_EQ(errno, EFAULT);
    MrRef mr(ibv_reg_mr(B().pd, hole, 2 * kPage, kOdpAccess));
    ASSERT_TRUE(mr.mr) << strerror(errno);
    Buffer& src = reg(A(), 64);
    src.fill(1);
    std::vector<ibv_sge> sg{src.sge(0, 64)};
    ibv_send_wr w =
        rdma_wr(1, IBV_WR_RDMA_WRITE, sg, reinterpret_cast<uintptr_t>(hole), mr.mr->rkey);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_remote_error(p, 1, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
}

// ... and memory mapped there after the registration is reachable through it.
TEST_F(Odp, HoleMappedLaterWorks) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    const size_t len = 2 * kPage;
    uint8_t* at = make_hole(len);
    ASSERT_TRUE(at);
    MrRef mr(ibv_reg_mr(B().pd, at, len, kOdpAccess));
    ASSERT_TRUE(mr.mr) << strerror(errno);
    void* again = mmap(at, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ASSERT_EQ(again, static_cast<void*>(at)) << "the hole was taken meanwhile";
    Buffer& src = reg(A(), 256);
    src.fill(4);
    std::vector<ibv_sge> sg{src.sge(0, 256)};
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, sg, reinterpret_cast<uintptr_t>(at) + kPage - 128,
                            mr.mr->rkey);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, 256);
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(at[kPage - 128 + i], pattern_byte(4, i));
    munmap(at, len);
}

// Implicit ODP: one MR over the whole address space, its keys good for any mapped memory.
TEST_F(Odp, ImplicitMr) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    MrRef imr(ibv_reg_mr(B().pd, nullptr, SIZE_MAX, kOdpAccess));
    ASSERT_TRUE(imr.mr) << strerror(errno);
    EXPECT_EQ(imr.mr->length, SIZE_MAX);
    // As the kernel: its iova must be 0; without ON_DEMAND it is no MR at all.
    errno = 0;
    EXPECT_EQ(ibv_reg_mr_iova(B().pd, nullptr, SIZE_MAX, 4096, kOdpAccess), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_reg_mr(B().pd, nullptr, SIZE_MAX, kAllAccess), nullptr);

    Mapping dst(2 * kPage);
    ASSERT_TRUE(dst.p);
    Buffer& src = reg(A(), 1000);
    src.fill(9);
    std::vector<ibv_sge> sg{src.sge(0, 1000)};
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, sg, dst.addr(kPage - 500), imr.mr->rkey);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, 1000);
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(dst.p[kPage - 500 + i], pattern_byte(9, i));

    // Its lkey serves a local SGE anywhere too: B sends from the mapping to A.
    Buffer& rbuf = post_recvs(p.a, 50, 1, 1000);
    std::vector<ibv_sge> ssg{{dst.addr(kPage - 500), 1000, imr.mr->lkey}};
    ibv_send_wr s = wr(3, IBV_WR_SEND, ssg);
    ASSERT_EQ(post(p.b.qp, s), 0);
    expect_send_ok(p.b, 3, IBV_WC_SEND, 1000);
    expect_recv_ok(p.a, 50, IBV_WC_RECV, 1000, p.b.qpn());
    EXPECT_EQ(rbuf.mismatch(9, 0, 1000), -1);
}

// ibv_advise_mr: a synchronous PREFETCH_WRITE faults the pages in, writable; the other
// advice and the asynchronous form succeed.
TEST_F(Odp, AdvisePrefetches) {
    const size_t len = 4 * kPage;
    OdpMem o(A().pd, len);
    ASSERT_TRUE(o.ok()) << strerror(errno);
    ASSERT_EQ(o.m.resident(), 0u);
    ibv_sge two{o.m.addr(kPage + 10), uint32_t(2 * kPage), o.mr.mr->lkey};
    EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH, two),
              0);
    EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, two), 0);
    EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, two),
              0);
    EXPECT_EQ(o.m.resident(), 3u) << "the pages [addr, addr+length) touches";
    EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH,
                     {o.m.addr(), uint32_t(len), o.mr.mr->lkey}),
              0);
    // Several SGEs, the implicit MR among them.
    MrRef imr(ibv_reg_mr(A().pd, nullptr, SIZE_MAX, kOdpAccess));
    ASSERT_TRUE(imr.mr) << strerror(errno);
    Mapping other(kPage);
    ASSERT_TRUE(other.p);
    ibv_sge sgl[2] = {{o.m.addr(), 8, o.mr.mr->lkey},
                      {other.addr(), uint32_t(kPage), imr.mr->lkey}};
    EXPECT_EQ(ibv_advise_mr(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
                            sgl, 2),
              0);
    EXPECT_EQ(other.resident(), 1u);
}

// Bad input gets what rxe's advise_mr (and uverbs before it) gives.
TEST_F(Odp, AdviseErrors) {
    const size_t len = 2 * kPage;
    OdpMem o(A().pd, len);
    ASSERT_TRUE(o.ok()) << strerror(errno);
    const auto kW = IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
    const uint32_t kF = IBV_ADVISE_MR_FLAG_FLUSH;
    ibv_sge good{o.m.addr(), 64, o.mr.mr->lkey};

    EXPECT_EQ(advise(A().pd, kW, 0x2, good), EINVAL) << "unknown flag";
    EXPECT_EQ(ibv_advise_mr(A().pd, kW, kF, &good, 0), EINVAL) << "no SGE";
    EXPECT_EQ(advise(A().pd, ibv_advise_mr_advice(7), kF, good), EOPNOTSUPP) << "unknown advice";
    EXPECT_EQ(advise(A().pd, kW, kF, {o.m.addr(), 64, o.mr.mr->lkey ^ 0x80}), EINVAL)
        << "stale lkey";
    EXPECT_EQ(advise(A().pd, kW, 0, {o.m.addr(), 64, 0xfffff000}), EINVAL) << "no such lkey, async";
    ibv_pd* other_pd = alloc_pd(A());
    ASSERT_TRUE(other_pd);
    EXPECT_EQ(advise(other_pd, kW, kF, good), EINVAL) << "the MR of another PD";
    Buffer& pinned = reg(A(), 64);
    EXPECT_EQ(advise(A().pd, kW, kF, pinned.sge(0, 64)), EINVAL) << "not an ODP MR";
    MrRef ro(ibv_reg_mr(A().pd, o.m.p, len, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ));
    ASSERT_TRUE(ro.mr) << strerror(errno);
    EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH, kF, {o.m.addr(), 64, ro.mr->lkey}),
              EINVAL)
        << "no local write";
    EXPECT_EQ(advise(A().pd, kW, kF, {o.m.addr(len - 8), 16, o.mr.mr->lkey}), EFAULT)
        << "past the end";
    EXPECT_EQ(advise(A().pd, kW, kF, {o.m.addr() - 8, 16, o.mr.mr->lkey}), EFAULT) << "before";

    // Over a hole: the synchronous prefetch cannot fault it in; the asynchronous one and
    // NO_FAULT only try.
    // Another thread's mmap may take the hole's addresses between its making and the
    // prefetch (ASan's allocator does): the answers then prove nothing, and a new hole is made.
    for (int tries = 0;; ++tries) {
        ASSERT_LT(tries, 20) << "the hole was always taken";
        uint8_t* hole = make_hole(len);
        ASSERT_TRUE(hole);
        MrRef hmr(ibv_reg_mr(A().pd, hole, len, kOdpAccess));
        ASSERT_TRUE(hmr.mr) << strerror(errno);
        ibv_sge hs{reinterpret_cast<uintptr_t>(hole), uint32_t(len), hmr.mr->lkey};
        int write = advise(A().pd, kW, kF, hs);
        int read = advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH, kF, hs);
        if (msync(hole, len, MS_ASYNC) == 0 || errno != ENOMEM) continue;  // mapped by now
        EXPECT_EQ(write, EFAULT);
        EXPECT_EQ(read, EFAULT);
        EXPECT_EQ(advise(A().pd, kW, 0, hs), 0);
        EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, kF, hs), 0);
        break;
    }
    // Read-only memory: PREFETCH reads it in, PREFETCH_WRITE cannot.
    ASSERT_EQ(mprotect(o.m.p, len, PROT_READ), 0);
    EXPECT_EQ(advise(A().pd, IBV_ADVISE_MR_ADVICE_PREFETCH, kF, good), 0);
    EXPECT_EQ(advise(A().pd, kW, kF, good), EFAULT);
}

}  // namespace
}  // namespace uroce::transport_test
