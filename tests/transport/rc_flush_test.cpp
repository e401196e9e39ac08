// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA FLUSH (IBTA 1.5; rdma-core 56's ibv_wr_flush, IBV_WC_FLUSH) between two devices. The
// builder is reached as a program built against rdma-core 56's headers reaches it: the
// wr_flush member of ibv_qp_ex (abi::QpEx, which appends it where the system's headers lack
// it), so these tests run on Debian 12 too. The responder checks what rxe checks: the
// placement type's flag in the QP's access flags (else NAK invalid request) and in the key's
// MR (else NAK remote access error), the range for a range flush. Where the headers have
// ibv_wr_flush (UROCE_HAVE_WR_FLUSH) the last test calls it by its public name.
#include <cstring>

#include "emu/abi/flush.h"
#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr int kWriteFlush = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            int(abi::kAccessFlushGlobal | abi::kAccessFlushPersistent);
constexpr ibv_wc_opcode kWcFlush = static_cast<ibv_wc_opcode>(abi::kWcFlush);

class RcFlush : public PairTest {
protected:
    void set_up() override {
        QpOpts o;
        o.access |= int(abi::kAccessFlush);  // rxe checks the responder QP's flags too
        o.send_ops_flags = abi::kQpExWithFlush | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
        ASSERT_NO_FATAL_FAILURE(connect(o));
        qa_ = qp_ex(p_.a.qp);
        ASSERT_TRUE(qa_ && qa_->wr_flush) << "no wr_flush on an RC QP with IBV_QP_EX_WITH_FLUSH";
        remote_ = &reg(B(), 256, kWriteFlush);
    }
    static abi::QpEx* qp_ex(ibv_qp* qp) {
        ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
        return x ? static_cast<abi::QpEx*>(x) : nullptr;
    }
    // One signaled FLUSH through ibv_qp_ex's wr_flush.
    static int flush(abi::QpEx* x, uint64_t id, const Buffer& b, uint64_t raddr, size_t len,
                     uint8_t type, uint8_t level) {
        ibv_wr_start(x);
        x->wr_id = id;
        x->wr_flags = IBV_SEND_SIGNALED;
        x->wr_flush(x, b.rkey(), raddr, len, type, level);
        return ibv_wr_complete(x);
    }
    abi::QpEx* qa_ = nullptr;
    Buffer* remote_ = nullptr;
};

// WRITE then FLUSH in one batch: the FLUSH completes after the WRITE, with IBV_WC_FLUSH and
// the length it named, and the bytes are there when it does.
TEST_F(RcFlush, FlushAfterWriteCompletesWithIbvWcFlush) {
    Buffer& local = reg(A(), 128);
    local.fill(7);
    ibv_wr_start(qa_);
    qa_->wr_id = 1;
    qa_->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qa_, remote_->rkey(), remote_->addr(64));
    ibv_wr_set_sge(qa_, local.lkey(), local.addr(), 128);
    qa_->wr_id = 2;
    qa_->wr_flush(qa_, remote_->rkey(), remote_->addr(64), 128, abi::kFlushGlobal,
                  abi::kFlushRange);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_send_ok(p_.a, 1, IBV_WC_RDMA_WRITE, 128);
    expect_send_ok(p_.a, 2, kWcFlush, 128);
    EXPECT_EQ(remote_->mismatch(7, 64, 128), -1);
    EXPECT_EQ(remote_->not_poison(0, 64), -1);
    expect_rts();
    expect_empty(p_.b.rcq);  // a FLUSH consumes no receive
}

// Both placement types, the whole MR (its range is not looked at), and more FLUSHes than
// max_rd_atomic lets out at once: each completes, in order.
TEST_F(RcFlush, PlacementTypesSelectivityLevelsAndManyOutstanding) {
    ASSERT_EQ(
        flush(qa_, 3, *remote_, 0, 0, abi::kFlushGlobal | abi::kFlushPersistent, abi::kFlushMr), 0);
    expect_send_ok(p_.a, 3, kWcFlush, 0);
    ibv_wr_start(qa_);
    for (uint64_t i = 0; i < 40; ++i) {
        qa_->wr_id = 100 + i;
        qa_->wr_flags = IBV_SEND_SIGNALED;
        qa_->wr_flush(qa_, remote_->rkey(), remote_->addr(i), 8,
                      i % 2 ? abi::kFlushPersistent : abi::kFlushGlobal, abi::kFlushRange);
    }
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    for (uint64_t i = 0; i < 40; ++i) expect_send_ok(p_.a, 100 + i, kWcFlush, 8);
    EXPECT_EQ(qp_state(p_.a.qp), IBV_QPS_RTS);
}

// The key's MR lacks the flush flag: NAK remote access error (rxe's check_rkey), the
// requester's WR completes with IBV_WC_REM_ACCESS_ERR, the responder's owner is told.
TEST_F(RcFlush, MrWithoutFlushAccessIsRemoteAccessError) {
    Buffer& plain = reg(B(), 64, kAllAccess);
    ASSERT_EQ(flush(qa_, 4, plain, plain.addr(0), 64, abi::kFlushGlobal, abi::kFlushRange), 0);
    expect_remote_error(p_, 4, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
}

// Each type needs its own flag: an MR with FLUSH_GLOBAL only refuses a persistent FLUSH.
TEST_F(RcFlush, PersistentNeedsFlushPersistent) {
    Buffer& global = reg(B(), 64, IBV_ACCESS_LOCAL_WRITE | int(abi::kAccessFlushGlobal));
    ASSERT_EQ(flush(qa_, 5, global, global.addr(0), 64, abi::kFlushPersistent, abi::kFlushRange),
              0);
    expect_remote_error(p_, 5, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
}

// A range beyond the MR is a remote access error too.
TEST_F(RcFlush, RangeBeyondTheMrIsRemoteAccessError) {
    ASSERT_EQ(flush(qa_, 6, *remote_, remote_->addr(200), 64, abi::kFlushGlobal, abi::kFlushRange),
              0);
    expect_remote_error(p_, 6, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
}

// The responder QP's access flags lack the type (rxe's check_qp_attr_access): NAK invalid
// request, IBV_WC_REM_INV_REQ_ERR.
TEST_F(RcFlush, QpWithoutFlushAccessIsInvalidRequest) {
    QpOpts o;
    o.send_ops_flags = abi::kQpExWithFlush;
    Pair p = connect_pair(o);  // REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC only
    abi::QpEx* x = qp_ex(p.a.qp);
    ASSERT_TRUE(x && x->wr_flush);
    ASSERT_EQ(flush(x, 7, *remote_, remote_->addr(0), 8, abi::kFlushGlobal, abi::kFlushRange), 0);
    expect_remote_error(p, 7, IBV_WC_REM_INV_REQ_ERR, 0, IBV_EVENT_QP_REQ_ERR);
}

// ibv_send_wr cannot carry a FLUSH's type and level: ibv_post_send refuses IBV_WR_FLUSH.
TEST_F(RcFlush, PostSendRefusesIt) {
    std::vector<ibv_sge> none;
    ibv_send_wr w = rdma_wr(8, static_cast<ibv_wr_opcode>(abi::kWrFlush), none, remote_->addr(0),
                            remote_->rkey());
    EXPECT_EQ(post(p_.a.qp, w), EINVAL);
    expect_empty(p_.a.scq);
}

// RC only, as rxe: other QP types refuse IBV_QP_EX_WITH_FLUSH and have no wr_flush.
TEST_F(RcFlush, RcOnly) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_UC;
    a.send_cq = a.recv_cq = p_.a.scq;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = A().pd;
    a.send_ops_flags = abi::kQpExWithFlush;
    errno = 0;
    EXPECT_EQ(ibv_create_qp_ex(A().ctx, &a), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    a.send_ops_flags = IBV_QP_EX_WITH_SEND;
    ibv_qp* uc = ibv_create_qp_ex(A().ctx, &a);
    ASSERT_TRUE(uc);
    EXPECT_EQ(qp_ex(uc)->wr_flush, nullptr);
    EXPECT_EQ(ibv_destroy_qp(uc), 0);
}

// ibv_query_device_ex: bits 38 and 39 of device_cap_flags_ex (IB_UVERBS_DEVICE_FLUSH_GLOBAL,
// _PERSISTENT), as rxe reports them; ibv_reg_mr takes the two access flags.
TEST_F(RcFlush, DeviceReportsBothPlacementTypes) {
    ibv_device_attr_ex attr{};
    ASSERT_EQ(ibv_query_device_ex(A().ctx, nullptr, &attr), 0);
    EXPECT_TRUE(attr.device_cap_flags_ex & (uint64_t(1) << 38));
    EXPECT_TRUE(attr.device_cap_flags_ex & (uint64_t(1) << 39));
    EXPECT_TRUE(attr.device_cap_flags_ex & (uint64_t(1) << 40));  // ATOMIC WRITE still
    EXPECT_EQ(uint32_t(attr.device_cap_flags_ex), attr.orig_attr.device_cap_flags);
    std::vector<uint8_t> mem(64);
    ibv_mr* mr =
        ibv_reg_mr(A().pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | (1 << 8) | (1 << 9));
    ASSERT_TRUE(mr) << std::strerror(errno);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

#ifdef UROCE_HAVE_WR_FLUSH
// rdma-core 56's own names: what a program built on Debian 13 writes.
static_assert(IBV_WR_FLUSH == abi::kWrFlush && IBV_WC_FLUSH == abi::kWcFlush);
static_assert(IBV_ACCESS_FLUSH_GLOBAL == abi::kAccessFlushGlobal &&
              IBV_ACCESS_FLUSH_PERSISTENT == abi::kAccessFlushPersistent);
static_assert(IBV_FLUSH_GLOBAL == abi::kFlushGlobal &&
              IBV_FLUSH_PERSISTENT == abi::kFlushPersistent &&
              IBV_FLUSH_RANGE == abi::kFlushRange && IBV_FLUSH_MR == abi::kFlushMr &&
              IBV_QP_EX_WITH_FLUSH == abi::kQpExWithFlush);
static_assert(IB_UVERBS_DEVICE_FLUSH_GLOBAL == abi::kDeviceFlushGlobal &&
              IB_UVERBS_DEVICE_FLUSH_PERSISTENT == abi::kDeviceFlushPersistent);

TEST_F(RcFlush, IbvWrFlushByItsPublicName) {
    Buffer& local = reg(A(), 32);
    local.fill(9);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(p_.a.qp);
    ibv_wr_start(x);
    x->wr_id = 10;
    x->wr_flags = 0;
    ibv_wr_rdma_write(x, remote_->rkey(), remote_->addr(0));
    ibv_wr_set_sge(x, local.lkey(), local.addr(), 32);
    x->wr_id = 11;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_flush(x, remote_->rkey(), remote_->addr(0), 32, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
    ASSERT_EQ(ibv_wr_complete(x), 0);
    expect_send_ok(p_.a, 11, IBV_WC_FLUSH, 32);
    EXPECT_EQ(remote_->mismatch(9, 0, 32), -1);
}
#endif

}  // namespace
}  // namespace uroce::transport_test
