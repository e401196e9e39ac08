// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC ATOMIC_CMP_AND_SWP and ATOMIC_FETCH_AND_ADD: the original value comes back into the
// local 8 bytes, the remote word changes (or not) as the operation says, and no byte around
// either changes. A misaligned remote address is an invalid request; a local SGE other than
// 8 bytes a local length error (ibv_poll_cq(3)).
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr size_t kWordOff = 16;  // the remote word and the local result sit mid-buffer

class RcAtomic : public PairTest {
protected:
    void set_up() override {
        ASSERT_NO_FATAL_FAILURE(connect());
        local_ = &reg(A(), 64);
        remote_ = &reg(B(), 64);
    }
    void set_remote(uint64_t v) { std::memcpy(remote_->data() + kWordOff, &v, 8); }
    uint64_t word(const Buffer& b, size_t off = kWordOff) {
        uint64_t v;
        std::memcpy(&v, b.data() + off, 8);
        return v;
    }
    // Posts one atomic on the word and expects it to succeed.
    void run(ibv_wr_opcode op, uint64_t compare_add, uint64_t swap, uint64_t id) {
        std::vector<ibv_sge> sg{local_->sge(kWordOff, 8)};
        ibv_send_wr w =
            atomic_wr(id, op, sg, remote_->addr(kWordOff), remote_->rkey(), compare_add, swap);
        ASSERT_EQ(post(p_.a.qp, w), 0);
        expect_send_ok(p_.a, id,
                       op == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, 8);
    }
    // Nothing but the two words may have changed, and both QPs are still in RTS.
    void expect_only_words_changed() {
        for (Buffer* b : {local_, remote_}) {
            EXPECT_EQ(b->not_poison(0, kWordOff), -1) << b->what;
            EXPECT_EQ(b->not_poison(kWordOff + 8, 64 - kWordOff - 8), -1) << b->what;
        }
        expect_quiet_rts();
    }
    Buffer* local_ = nullptr;
    Buffer* remote_ = nullptr;
};

TEST_F(RcAtomic, CompareAndSwapEqualSwaps) {
    set_remote(0x1111222233334444ull);
    run(IBV_WR_ATOMIC_CMP_AND_SWP, 0x1111222233334444ull, 0xaaaabbbbccccddddull, 1);
    EXPECT_EQ(word(*local_), 0x1111222233334444ull) << "the original value comes back";
    EXPECT_EQ(word(*remote_), 0xaaaabbbbccccddddull);
    expect_only_words_changed();
}

TEST_F(RcAtomic, CompareAndSwapDifferentLeavesIt) {
    set_remote(0x5555ull);
    run(IBV_WR_ATOMIC_CMP_AND_SWP, 0x1111ull, 0x9999ull, 2);
    EXPECT_EQ(word(*local_), 0x5555ull);
    EXPECT_EQ(word(*remote_), 0x5555ull) << "swapped although the compare failed";
    expect_only_words_changed();
}

TEST_F(RcAtomic, FetchAndAddWraps) {
    set_remote(0xffffffffffffff00ull);
    run(IBV_WR_ATOMIC_FETCH_AND_ADD, 0x234, 0, 3);
    EXPECT_EQ(word(*local_), 0xffffffffffffff00ull);
    EXPECT_EQ(word(*remote_), 0x134ull) << "a 64-bit add wraps";
    expect_only_words_changed();
}

// Many FETCH_AND_ADDs posted at once, more than max_rd_atomic (4) may be in flight: each
// fetches its predecessors' sum, in order, exactly once.
TEST_F(RcAtomic, ManyOutstandingInOrder) {
    QpOpts o;
    o.max_rd_atomic = o.max_dest_rd_atomic = 4;
    Pair p = connect_pair(o);
    Buffer& results = reg(A(), 40 * 8);
    set_remote(1000);
    std::vector<std::vector<ibv_sge>> sgs;
    for (uint64_t i = 0; i < 40; ++i) sgs.push_back({results.sge(i * 8, 8)});
    for (uint64_t i = 0; i < 40; ++i) {
        ibv_send_wr w = atomic_wr(i, IBV_WR_ATOMIC_FETCH_AND_ADD, sgs[i], remote_->addr(kWordOff),
                                  remote_->rkey(), 1);
        ASSERT_EQ(post(p.a.qp, w), 0);
    }
    for (uint64_t i = 0; i < 40; ++i) {
        expect_send_ok(p.a, i, IBV_WC_FETCH_ADD, 8);
        EXPECT_EQ(word(results, i * 8), 1000 + i);
    }
    EXPECT_EQ(word(*remote_), 1040u);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
}

// IBTA 9.4.5: the remote address of an atomic must be 8-byte aligned. The responder answers
// NAK invalid request: IBV_WC_REM_INV_REQ_ERR at the requester, both QPs in ERR, what was
// queued behind flushed, the responder's owner told IBV_EVENT_QP_REQ_ERR, nothing written.
TEST_F(RcAtomic, MisalignedRemoteIsInvalidRequest) {
    set_remote(77);
    for (uint64_t mis : {4, 1}) {
        if (mis == 1) {
            p_ = connect_pair();
            ASSERT_TRUE(p_.a.qp && p_.b.qp);
        }
        std::vector<ibv_sge> sg{local_->sge(kWordOff, 8)};
        ibv_send_wr w = atomic_wr(5, IBV_WR_ATOMIC_FETCH_AND_ADD, sg,
                                  remote_->addr(kWordOff - 8 + mis), remote_->rkey(), 1);
        std::vector<ibv_sge> sg2{local_->sge(0, 8)};
        ibv_send_wr behind = wr(6, IBV_WR_SEND, sg2);
        w.next = &behind;
        ASSERT_EQ(post(p_.a.qp, w), 0);
        expect_remote_error(p_, 5, IBV_WC_REM_INV_REQ_ERR, 6, IBV_EVENT_QP_REQ_ERR);
        EXPECT_EQ(word(*remote_), 77u);
        EXPECT_EQ(local_->not_poison(0, 64), -1) << "the result buffer was written";
    }
}

// ibv_poll_cq(3): "an Atomic operation whose size is different than 8 bytes" is a local
// length error; nothing reaches the responder.
TEST_F(RcAtomic, LocalSgeNotEightBytesIsLocalLengthError) {
    set_remote(5);
    std::vector<ibv_sge> sg{local_->sge(kWordOff, 4)};
    ibv_send_wr w =
        atomic_wr(8, IBV_WR_ATOMIC_CMP_AND_SWP, sg, remote_->addr(kWordOff), remote_->rkey(), 5, 6);
    ASSERT_EQ(post(p_.a.qp, w), 0);
    expect_error(p_.a.scq, p_.a.qpn(), 8, IBV_WC_LOC_LEN_ERR, "4-byte atomic");
    EXPECT_EQ(qp_state(p_.a.qp), IBV_QPS_ERR);
    EXPECT_EQ(qp_state(p_.b.qp), IBV_QPS_RTS);
    EXPECT_EQ(word(*remote_), 5u);
    EXPECT_EQ(local_->not_poison(0, 64), -1);
    expect_no_async(B());
}

}  // namespace
}  // namespace uroce::transport_test
