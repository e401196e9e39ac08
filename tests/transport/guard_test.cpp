// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Remote access that misses its MR never reads or writes a byte outside it (acceptance 5):
// RDMA WRITE, RDMA READ and both ATOMICs with a guessed R_Key, the R_Key of an MR in another
// PD, the R_Key of a deregistered (expired) MR, and addresses just before, just after and
// straddling the end of the MR. Each completes with IBV_WC_REM_ACCESS_ERR, both QPs end in
// ERR, the responder's owner gets IBV_EVENT_QP_ACCESS_ERR, and not one byte changes: not in
// the target MR, not in its neighbours, not in the requester's buffer, not in any guard
// area (the fixture checks those after every test).
#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

// The target MR is 4092 bytes: not a multiple of 8, so an aligned atomic can straddle its end.
constexpr uint32_t kMrLen = 4092;
constexpr uint32_t kLen = 3000;  // RDMA length: three packets at MTU 1024

enum class Miss {
    kWrongGeneration,  // the MR's slot with another generation byte
    kNoSuchKey,        // a key no MR has
    kOtherPd,          // a real MR of the responder, in another PD
    kExpired,          // the key of an MR deregistered before the access
    kExpiredReused,    // the same, after a new MR took the slot
    kJustBefore,       // ends one byte before the MR... (ATOMIC: the word before)
    kStartsBefore,     // starts one byte (ATOMIC: one word) before the MR
    kJustAfter,        // starts at the MR's end (ATOMIC: the first aligned word past it)
    kStraddlesEnd,     // starts inside, ends past the end
    kOneTooLong,       // starts at the MR's start, one byte longer than it (not ATOMIC)
};
constexpr Miss kAllMisses[] = {Miss::kWrongGeneration, Miss::kNoSuchKey,     Miss::kOtherPd,
                               Miss::kExpired,         Miss::kExpiredReused, Miss::kJustBefore,
                               Miss::kStartsBefore,    Miss::kJustAfter,     Miss::kStraddlesEnd,
                               Miss::kOneTooLong};

const char* miss_name(Miss m) {
    static const char* kNames[] = {"wrong generation", "no such key",     "other PD",
                                   "expired",          "expired, reused", "just before",
                                   "starts before",    "just after",      "straddles the end",
                                   "one byte too long"};
    return kNames[int(m)];
}

class Guard : public TransportTest {
protected:
    void attack(ibv_wr_opcode op, Miss m) {
        SCOPED_TRACE(miss_name(m));
        bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
        if (atomic && m == Miss::kOneTooLong) return;  // an atomic is always 8 bytes
        Pair p = connect_pair();
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Buffer& local = reg(A(), 4096);
        Buffer& target = reg(B(), kMrLen);
        ibv_pd* other_pd = alloc_pd(B());
        Buffer& other = reg(B(), 4096, kAllAccess, other_pd);
        Buffer& old = reg(B(), 4096);
        uint32_t expired = old.rkey();
        bool reads = op != IBV_WR_RDMA_WRITE;
        // What a leak would show: the READ/ATOMIC destination starts poisoned, the WRITE source
        // and every responder buffer hold patterns.
        if (!reads) local.fill(1);
        target.fill(2);
        other.fill(3);
        old.fill(4);
        if (m == Miss::kExpired || m == Miss::kExpiredReused) dereg(old);
        Buffer* reused = m == Miss::kExpiredReused ? &reg(B(), 4096) : nullptr;
        if (reused) reused->fill(5);

        uint32_t len = atomic ? 8 : kLen;
        uint64_t va = target.addr(0), end = target.addr(kMrLen);
        uint32_t rkey = target.rkey();
        switch (m) {
        case Miss::kWrongGeneration: rkey ^= 0x80; break;
        case Miss::kNoSuchKey: rkey = 0xfffff000 | (rkey & 0xff); break;
        case Miss::kOtherPd: rkey = other.rkey(), va = other.addr(0); break;
        case Miss::kExpired:
        case Miss::kExpiredReused: rkey = expired, va = old.addr(0); break;
        case Miss::kJustBefore: va -= len; break;
        case Miss::kStartsBefore: va -= atomic ? 8 : 1; break;
        case Miss::kJustAfter: va = atomic ? (end + 7) & ~uint64_t(7) : end; break;
        case Miss::kStraddlesEnd: va = atomic ? end - 4 : end - len / 2; break;
        case Miss::kOneTooLong: len = kMrLen + 1; break;
        }
        std::vector<ibv_sge> sg{local.sge(0, len)};
        ibv_send_wr w = atomic ? atomic_wr(1, op, sg, va, rkey, 0, 0x5a5a5a5a5a5a5a5aull)
                               : rdma_wr(1, op, sg, va, rkey);
        std::vector<ibv_sge> sg2{local.sge(0, 16)};
        ibv_send_wr behind = wr(2, IBV_WR_RDMA_WRITE, sg2);
        behind.wr.rdma.remote_addr = target.addr(0);
        behind.wr.rdma.rkey = target.rkey();
        w.next = &behind;
        ASSERT_EQ(post(p.a.qp, w), 0);

        expect_remote_error(p, 1, IBV_WC_REM_ACCESS_ERR, 2, IBV_EVENT_QP_ACCESS_ERR);

        if (reads) {
            EXPECT_EQ(local.not_poison(0, 4096), -1) << "the requester received bytes";
        } else {
            EXPECT_EQ(local.mismatch(1, 0, 4096), -1);
        }
        EXPECT_EQ(target.mismatch(2, 0, kMrLen), -1) << "the target MR changed";
        EXPECT_EQ(other.mismatch(3, 0, 4096), -1) << "the other PD's MR changed";
        EXPECT_EQ(old.mismatch(4, 0, 4096), -1) << "the deregistered MR's memory changed";
        if (reused) {
            EXPECT_EQ(reused->mismatch(5, 0, 4096), -1) << "the new MR changed";
        }
        expect_empty(p.b.rcq, 0);
    }
};

TEST_F(Guard, RdmaWrite) {
    for (Miss m : kAllMisses) attack(IBV_WR_RDMA_WRITE, m);
}
TEST_F(Guard, RdmaRead) {
    for (Miss m : kAllMisses) attack(IBV_WR_RDMA_READ, m);
}
TEST_F(Guard, CompareAndSwap) {
    for (Miss m : kAllMisses) attack(IBV_WR_ATOMIC_CMP_AND_SWP, m);
}
TEST_F(Guard, FetchAndAdd) {
    for (Miss m : kAllMisses) attack(IBV_WR_ATOMIC_FETCH_AND_ADD, m);
}

// A WRITE_WITH_IMM that misses its MR consumes no receive: the receive is flushed when the
// responder's QP enters ERR, with nothing written into it or the target.
TEST_F(Guard, WriteWithImmConsumesNoReceive) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& local = reg(A(), 4096);
    Buffer& target = reg(B(), kMrLen);
    Buffer& rbuf = reg(B(), 64);
    local.fill(6);
    target.fill(7);
    ASSERT_EQ(post_recv(p.b.qp, 40, {rbuf.sge(0, 64)}), 0);
    std::vector<ibv_sge> sg{local.sge(0, 100)};
    ibv_send_wr w =
        rdma_wr(1, IBV_WR_RDMA_WRITE_WITH_IMM, sg, target.addr(kMrLen - 50), target.rkey());
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_error(p.a.scq, p.a.qpn(), 1, IBV_WC_REM_ACCESS_ERR, "WRITE_WITH_IMM past the end");
    expect_error(p.b.rcq, p.b.qpn(), 40, IBV_WC_WR_FLUSH_ERR, "the receive");
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_ERR);
    EXPECT_EQ(target.mismatch(7, 0, kMrLen), -1);
    EXPECT_EQ(rbuf.not_poison(0, 64), -1);
}

// IBTA 9.4.3.1/9.4.4: an RDMA WRITE or READ of length zero does not validate its R_Key or
// address. It succeeds with any key, and touches nothing.
TEST_F(Guard, ZeroLengthChecksNoKey) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& local = reg(A(), 64);
    Buffer& target = reg(B(), 64).fill(8);
    std::vector<ibv_sge> none;
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, none, 0x1000, 0xdeadbe00);
    ibv_send_wr r = rdma_wr(2, IBV_WR_RDMA_READ, none, 0x1000, 0xdeadbe00);
    w.next = &r;
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, 0);
    expect_send_ok(p.a, 2, IBV_WC_RDMA_READ, 0);
    EXPECT_EQ(local.not_poison(0, 64), -1);
    EXPECT_EQ(target.mismatch(8, 0, 64), -1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    expect_no_async(B());
}

}  // namespace
}  // namespace uroce::transport_test
