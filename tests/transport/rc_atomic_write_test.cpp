// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA ATOMIC WRITE (IBTA 1.5; rdma-core's ibv_wr_atomic_write, IBV_WR_ATOMIC_WRITE): the 8
// bytes land in the remote word and nowhere else, the requester's completion is
// IBV_WC_ATOMIC_WRITE of 8 bytes, and the responder checks what rxe checks: REMOTE_WRITE (of
// the QP and of the key), an 8-byte aligned address (else NAK invalid request).
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr size_t kWordOff = 16;  // the remote word sits mid-buffer, poison around it
constexpr int kWriteOnly = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

class RcAtomicWrite : public PairTest {
protected:
    void set_up() override {
        QpOpts o;
        o.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_SEND;
        ASSERT_NO_FATAL_FAILURE(connect(o));
        qa_ = ibv_qp_to_qp_ex(p_.a.qp);
        ASSERT_TRUE(qa_ && qa_->wr_atomic_write);
        // REMOTE_WRITE is what it needs (rxe), not REMOTE_ATOMIC.
        remote_ = &reg(B(), 64, kWriteOnly);
    }
    uint64_t word(const Buffer& b, size_t off = kWordOff) {
        uint64_t v;
        std::memcpy(&v, b.data() + off, 8);
        return v;
    }
    // One ATOMIC WRITE of `value` through the ibv_wr_* interface; the value is overwritten
    // right after ibv_wr_atomic_write, which must have copied it.
    int wr_atomic_write(uint64_t id, uint64_t raddr, uint32_t rkey, uint64_t value) {
        ibv_wr_start(qa_);
        qa_->wr_id = id;
        qa_->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_atomic_write(qa_, rkey, raddr, &value);
        value = ~value;
        return ibv_wr_complete(qa_);
    }
    // Only the word changed, nothing was received, both QPs are still in RTS.
    void expect_only_word_changed() {
        EXPECT_EQ(remote_->not_poison(0, kWordOff), -1);
        EXPECT_EQ(remote_->not_poison(kWordOff + 8, 64 - kWordOff - 8), -1);
        expect_quiet_rts();
    }
    ibv_qp_ex* qa_ = nullptr;
    Buffer* remote_ = nullptr;
};

TEST_F(RcAtomicWrite, WrApiValueLandsAndIsCopiedAtPost) {
    ASSERT_EQ(wr_atomic_write(1, remote_->addr(kWordOff), remote_->rkey(), 0x0123456789abcdefull),
              0);
    expect_send_ok(p_.a, 1, IBV_WC_ATOMIC_WRITE, 8);
    EXPECT_EQ(word(*remote_), 0x0123456789abcdefull);
    expect_only_word_changed();
}

// ibv_post_send with IBV_WR_ATOMIC_WRITE: the 8 bytes come from the gather list, or inline
// (the QP has max_inline_data 0: an ATOMIC WRITE's 8 bytes always fit in the WQE).
TEST_F(RcAtomicWrite, PostSendFromSgeAndInline) {
    Buffer& local = reg(A(), 16);
    uint64_t v = 0x1111222233334444ull;
    std::memcpy(local.data(), &v, 8);
    std::vector<ibv_sge> sg{local.sge(0, 8)};
    ibv_send_wr w = rdma_wr(2, IBV_WR_ATOMIC_WRITE, sg, remote_->addr(kWordOff), remote_->rkey());
    ASSERT_EQ(post(p_.a.qp, w), 0);
    expect_send_ok(p_.a, 2, IBV_WC_ATOMIC_WRITE, 8);
    EXPECT_EQ(word(*remote_), v);

    uint64_t inl = 0x5555666677778888ull;
    std::vector<ibv_sge> isg{{reinterpret_cast<uintptr_t>(&inl), 8, 0}};
    ibv_send_wr wi = rdma_wr(3, IBV_WR_ATOMIC_WRITE, isg, remote_->addr(kWordOff), remote_->rkey(),
                             IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    ASSERT_EQ(post(p_.a.qp, wi), 0);
    inl = 0;  // copied at post time
    expect_send_ok(p_.a, 3, IBV_WC_ATOMIC_WRITE, 8);
    EXPECT_EQ(word(*remote_), 0x5555666677778888ull);
    expect_only_word_changed();
}

// More ATOMIC WRITEs than max_rd_atomic (4) may have outstanding, each a new value: they
// complete in order and the last one is what stays.
TEST_F(RcAtomicWrite, ManyOutstandingInOrder) {
    QpOpts o;
    o.max_rd_atomic = o.max_dest_rd_atomic = 4;
    o.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    Pair p = connect_pair(o);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(p.a.qp);
    ASSERT_TRUE(x);
    ibv_wr_start(x);
    for (uint64_t i = 0; i < 40; ++i) {
        x->wr_id = i;
        x->wr_flags = IBV_SEND_SIGNALED;
        uint64_t v = 0xa000 + i;
        ibv_wr_atomic_write(x, remote_->rkey(), remote_->addr(kWordOff), &v);
    }
    ASSERT_EQ(ibv_wr_complete(x), 0);
    for (uint64_t i = 0; i < 40; ++i) expect_send_ok(p.a, i, IBV_WC_ATOMIC_WRITE, 8);
    EXPECT_EQ(word(*remote_), 0xa000u + 39);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
}

// IBTA 1.5 / rxe: the remote address must be 8-byte aligned; the responder answers NAK
// invalid request: IBV_WC_REM_INV_REQ_ERR, both QPs in ERR, the WR behind flushed, the
// responder's owner told IBV_EVENT_QP_REQ_ERR, nothing written.
TEST_F(RcAtomicWrite, MisalignedRemoteIsInvalidRequest) {
    uint64_t v = 0x0102030405060708ull;
    ibv_wr_start(qa_);
    qa_->wr_id = 5;
    qa_->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(qa_, remote_->rkey(), remote_->addr(kWordOff + 4), &v);
    Buffer& local = reg(A(), 8);
    qa_->wr_id = 6;
    ibv_wr_send(qa_);
    ibv_wr_set_sge(qa_, local.lkey(), local.addr(), 8);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_remote_error(p_, 5, IBV_WC_REM_INV_REQ_ERR, 6, IBV_EVENT_QP_REQ_ERR);
    EXPECT_EQ(remote_->not_poison(0, 64), -1) << "written although misaligned";
}

// The key must allow REMOTE_WRITE: REMOTE_READ and REMOTE_ATOMIC are not enough (rxe's
// check_rkey). NAK remote access error: IBV_WC_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR.
TEST_F(RcAtomicWrite, KeyWithoutRemoteWriteIsAccessError) {
    Buffer& ro =
        reg(B(), 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    ASSERT_EQ(wr_atomic_write(7, ro.addr(kWordOff), ro.rkey(), 42), 0);
    expect_remote_error(p_, 7, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
    EXPECT_EQ(ro.not_poison(0, 64), -1) << "written through a key without REMOTE_WRITE";
}

// ... and so must the responder QP (rxe's check_op_valid): one with only REMOTE_READ and
// REMOTE_ATOMIC refuses it too.
TEST_F(RcAtomicWrite, QpWithoutRemoteWriteIsAccessError) {
    QpOpts o;
    o.access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    o.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    Pair p = connect_pair(o);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(p.a.qp);
    ASSERT_TRUE(x);
    uint64_t v = 9;
    ibv_wr_start(x);
    x->wr_id = 8;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, remote_->rkey(), remote_->addr(kWordOff), &v);
    ASSERT_EQ(ibv_wr_complete(x), 0);
    expect_remote_error(p, 8, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
    EXPECT_EQ(remote_->not_poison(0, 64), -1);
}

// An ATOMIC WRITE is 8 bytes: a gather list of 4 is a local length error, as for the other
// atomics (ibv_poll_cq(3)); nothing reaches the responder.
TEST_F(RcAtomicWrite, NotEightBytesIsLocalLengthError) {
    Buffer& local = reg(A(), 16);
    std::vector<ibv_sge> sg{local.sge(0, 4)};
    ibv_send_wr w = rdma_wr(9, IBV_WR_ATOMIC_WRITE, sg, remote_->addr(kWordOff), remote_->rkey());
    ASSERT_EQ(post(p_.a.qp, w), 0);
    expect_error(p_.a.scq, p_.a.qpn(), 9, IBV_WC_LOC_LEN_ERR, "4-byte ATOMIC WRITE");
    EXPECT_EQ(qp_state(p_.a.qp), IBV_QPS_ERR);
    EXPECT_EQ(qp_state(p_.b.qp), IBV_QPS_RTS);
    EXPECT_EQ(remote_->not_poison(0, 64), -1);
    expect_no_async(B());
}

// RC only, as rxe: on UC it is a local QP operation error (and ibv_create_qp_ex refuses
// IBV_QP_EX_WITH_ATOMIC_WRITE for every other QP type: WrApi.SendOpsByQpType).
TEST_F(RcAtomicWrite, UcIsLocalQpOperationError) {
    QpOpts o;
    o.type = IBV_QPT_UC;
    Pair p = connect_pair(o);
    Buffer& local = reg(A(), 16);
    std::vector<ibv_sge> sg{local.sge(0, 8)};
    ibv_send_wr w = rdma_wr(10, IBV_WR_ATOMIC_WRITE, sg, remote_->addr(kWordOff), remote_->rkey());
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_error(p.a.scq, p.a.qpn(), 10, IBV_WC_LOC_QP_OP_ERR, "ATOMIC WRITE on UC");
    EXPECT_EQ(remote_->not_poison(0, 64), -1);
}

// ibv_query_device_ex reports it as the kernel does for rxe: bit 40 of device_cap_flags_ex
// (IB_UVERBS_DEVICE_ATOMIC_WRITE), which also holds the 32 bits of device_cap_flags.
TEST_F(RcAtomicWrite, DeviceReportsAtomicWrite) {
    ibv_device_attr_ex attr{};
    ASSERT_EQ(ibv_query_device_ex(A().ctx, nullptr, &attr), 0);
    EXPECT_TRUE(attr.device_cap_flags_ex & (uint64_t(1) << 40));
    EXPECT_EQ(uint32_t(attr.device_cap_flags_ex), attr.orig_attr.device_cap_flags);
}

}  // namespace
}  // namespace uroce::transport_test
