// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device engine and rings written by a buggy or hostile application: the device must
// not crash, must not touch memory it should not, and must keep serving everyone else.
#include <gtest/gtest.h>

#include "device_test_support.h"

namespace uroce::emu::device_test {
namespace {

class RingAbuseTest : public DataPathTest {
protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(start_connected(1));
        src_ = std::make_unique<GuardedBuf>(512, 0x5a);
        dst_ = std::make_unique<GuardedBuf>(512);
        ASSERT_NO_FATAL_FAILURE(reg_bufs(*src_, &skey_, *dst_, &rkey_));
    }

    // A second, well-behaved QP pair on the same device still works.
    void expect_device_healthy() {
        Side a, b;
        ASSERT_NO_FATAL_FAILURE(connected_sides(a, b));
        GuardedBuf src(300, 0x3c), dst(300);
        uint32_t sk, rk;
        ASSERT_EQ(a.c->reg_mr(a.pd, src.base(), src.total(), 0, &sk), 0);
        ASSERT_EQ(b.c->reg_mr(b.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rk), 0);
        b.c->post_recv(*b.qp, 1, {{addr_of(dst.data()), 300, rk}});
        a.c->post_send(*a.qp, 2, {{addr_of(src.data()), 300, sk}});
        abi::Cqe c{};
        ASSERT_NO_FATAL_FAILURE(expect_status(*b.rcq, IBV_WC_SUCCESS, &c));
        EXPECT_EQ(c.byte_len, 300u);
        ASSERT_NO_FATAL_FAILURE(expect_status(*a.scq, IBV_WC_SUCCESS));
        for (size_t i = 0; i < 300; ++i) ASSERT_EQ(dst.data()[i], 0x3c);
        EXPECT_TRUE(dst.guards_intact());
    }

    void expect_receiver_untouched() {
        abi::Cqe c{};
        EXPECT_FALSE(poll_cq(*r_.rcq, &c, 20)) << "receiver got wr_id " << c.wr_id;
        expect_untouched(*dst_);
    }

    std::unique_ptr<GuardedBuf> src_, dst_;
    uint32_t skey_ = 0, rkey_ = 0;
};

// An application that truncates a ring's memfd cannot make the device fault on it: the size is
// sealed, and the device's mapping stays whole.
TEST(SharedRegionTest, ApplicationCannotShrinkARing) {
    emu::SharedRegion r;
    ASSERT_EQ(r.create("uroce-test", 8192), 0);
    int fd = r.take_fd();
    ASSERT_GE(fd, 0);
    errno = 0;
    EXPECT_EQ(ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1) << "seals can be changed";
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 8192);
    static_cast<volatile uint8_t*>(r.data())[8191] = 1;  // still mapped to the end
    close(fd);
}

TEST_F(RingAbuseTest, RandomBytesInSendSlot) {
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst_->data()), 512, rkey_}});
    std::mt19937 rng(12345);
    uint8_t* slot = s_.qp->sq.slot(0);
    for (size_t i = 0; i < s_.qp->sq.stride(); ++i) slot[i] = uint8_t(rng());
    auto* w = reinterpret_cast<abi::SendWqe*>(slot);
    w->num_sge = 0xfffffff0u;
    w->opcode = 0xdeadbeefu;
    w->send_flags &= ~uint32_t(IBV_SEND_INLINE);
    uint64_t garbage_id = w->wr_id;
    s_.c->publish_sq(*s_.qp, 1);

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, garbage_id);
    // Both the opcode and num_sge (over the QP's max_send_sge) are invalid; which one the
    // device reports first is its choice, but it must be one of those local errors.
    EXPECT_TRUE(c.status == IBV_WC_LOC_LEN_ERR || c.status == IBV_WC_LOC_QP_OP_ERR)
        << "status " << c.status;
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, DoorbellPageNamingOtherSessionsObjectsOrGarbage) {
    // The receiver's session queues a zero-length RDMA WRITE but never rings. The sender's
    // doorbell page names the receiver's QP and CQs, QPNs and handles nobody has, and random
    // numbers: the device must act on none of them (emu/abi/doorbell.h).
    // First let the connection settle: a packet arriving for the QP (an ACK of the
    // connection's traffic) makes the device look at its send queue, which hardware may do too.
    std::this_thread::sleep_for(milliseconds(50));
    write_send_slot(*r_.qp, 0, send_wqe(81, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED));
    r_.qp->sq.hdr()->prod.store(1, std::memory_order_release);
    abi::DoorbellPage* p = s_.c->doorbell_page();
    std::mt19937 rng(4242);
    abi::doorbell_push(p, r_.qp->qpn);
    // CQ handles, bare and as an older library rang a CQ (the top bit set).
    abi::doorbell_push(p, r_.scq->handle);
    abi::doorbell_push(p, r_.rcq->handle | 0x80000000u);
    abi::doorbell_push(p, 0xffffffu);
    abi::doorbell_push(p, 0xffffffffu);
    for (int i = 0; i < 100; ++i) abi::doorbell_push(p, rng() | 1);
    // A tail far ahead of the device: it reads at most one page of entries per wake-up.
    p->tail.store(p->tail.load() + 3 * abi::kDoorbellSlots);
    s_.c->wake();
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*r_.scq, &c, 200)) << "the receiver's WRITE ran: wr_id " << c.wr_id;
    // The receiver's own doorbell still works.
    r_.c->ring_doorbell();
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*r_.scq, 81, IBV_WC_SUCCESS));
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, GarbageOpcodeAndHugeInlineLength) {
    // A plausible SGE count but an opcode no verbs.h defines.
    abi::SendWqe w = send_wqe(71, 0xdeadbeefu, IBV_SEND_SIGNALED);
    w.num_sge = 1;
    abi::Sge sge{addr_of(src_->data()), 16, skey_};
    write_send_slot(*s_.qp, 0, w, &sge, sizeof sge);
    // Then an inline WQE claiming more bytes than the slot can hold.
    w.wr_id = 72;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    w.inline_len = 0x7fffffffu;
    write_send_slot(*s_.qp, 1, w);
    s_.c->publish_sq(*s_.qp, 2);

    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 71, IBV_WC_LOC_QP_OP_ERR));
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 72, IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    expect_receiver_untouched();
    expect_device_healthy();
}

// BIND_MW and LOCAL_INV WQEs naming windows, regions and ranges at random (the MwBind in
// the data area, emu/abi/rings.h, as garbage): the bind fails with IBV_WC_MW_BIND_ERR, the
// rest is flushed, and the device carries on.
TEST_F(RingAbuseTest, GarbageBindAndInvalidate) {
    std::mt19937_64 rng(777);
    // Inline means nothing to a bind, nor does the SGE count.
    abi::SendWqe w = send_wqe(81, IBV_WR_BIND_MW, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    w.num_sge = 0xfffffff0u;
    w.inline_len = 0x7fffffffu;
    abi::MwBind b{uint32_t(rng()), uint32_t(rng()), skey_, uint32_t(rng()), rng(), rng()};
    write_send_slot(*s_.qp, 0, w, &b, sizeof b);
    w = send_wqe(82, IBV_WR_LOCAL_INV, IBV_SEND_SIGNALED);
    w.imm_data = uint32_t(rng()) | 0x80000000u;  // an R_Key that looks like a window's
    write_send_slot(*s_.qp, 1, w);
    s_.c->publish_sq(*s_.qp, 2);

    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 81, IBV_WC_MW_BIND_ERR, &c));
    EXPECT_EQ(c.opcode, uint32_t(IBV_WC_BIND_MW));
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 82, IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_TRUE(src_->guards_intact());
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, HugeInlineLengthFirst) {
    abi::SendWqe w = send_wqe(73, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    w.inline_len = 0xffffffffu;
    write_send_slot(*s_.qp, 0, w);
    s_.c->publish_sq(*s_.qp, 1);
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 73, IBV_WC_LOC_LEN_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, ProducerFarBeyondConsumer) {
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst_->data()), 512, rkey_}});
    s_.c->publish_sq(*s_.qp, 0x80000000u);
    // More WQEs than the ring has slots cannot have been posted: the QP is broken, and the
    // application hears about it as a fatal QP error.
    abi::AsyncEvent ev{};
    ASSERT_TRUE(s_.c->async_event(&ev, 2000));
    EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_QP_FATAL));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    // No slot was executed: nothing went out, and no completion invented.
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 20)) << "send CQE wr_id " << c.wr_id;
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, ProducerMovedBackwards) {
    // Keep WQEs outstanding: the peer never answers (it is destroyed), and the ACK timeout
    // is long. Then the application moves prod back between the device's oldest
    // outstanding WQE and the next one it would fetch.
    ASSERT_EQ(r_.c->destroy_qp(r_.qp->qpn), 0);
    for (uint64_t id = 1; id <= 4; ++id)
        s_.c->post_send(*s_.qp, id, {{addr_of(src_->data()), 64, skey_}});
    // Wait until the device has fetched and transmitted all four (they stay
    // unacknowledged: the ACK timeout of 67 ms is far off).
    auto deadline = steady_clock::now() + milliseconds(2000);
    while (qp_tx_pkts(*devs_[0], s_.qp->qpn) < 4 && steady_clock::now() < deadline)
        std::this_thread::sleep_for(milliseconds(1));
    ASSERT_EQ(qp_tx_pkts(*devs_[0], s_.qp->qpn), 4u);
    ASSERT_EQ(s_.qp->sq.hdr()->cons.load(), 0u);
    s_.c->publish_sq(*s_.qp, 2);
    abi::AsyncEvent ev{};
    ASSERT_TRUE(s_.c->async_event(&ev, 2000));
    EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_QP_FATAL));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    // Only the four WQEs really posted complete (flushed); the device must not have run
    // ahead through slots that were never posted, wrapping around the ring.
    abi::Cqe c{};
    for (uint64_t id = 1; id <= 4; ++id) {
        ASSERT_TRUE(poll_cq(*s_.scq, &c)) << id;
        EXPECT_EQ(c.wr_id, id);
        EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    }
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 20)) << "extra CQE wr_id " << c.wr_id;
    expect_device_healthy();
}

TEST_F(RingAbuseTest, GarbageReceiveWqes) {
    // Receive WQEs with an absurd SGE count and with a bad key: each incoming message
    // completes in error at the receiver without any byte written.
    uint8_t* slot = r_.qp->rq.slot(0);
    abi::RecvWqe rw{91, 0xffffffffu, 0};
    std::memcpy(slot, &rw, sizeof rw);
    r_.qp->rq.hdr()->prod.store(1, std::memory_order_release);
    s_.c->post_send(*s_.qp, 92, {{addr_of(src_->data()), 64, skey_}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 91u);
    EXPECT_NE(c.status, uint32_t(IBV_WC_SUCCESS));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 92u);
    EXPECT_NE(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_ERR));
    expect_untouched(*dst_);
    expect_device_healthy();
}

TEST_F(RingAbuseTest, CqOverrunRaisesCqError) {
    // A CQ the application never polls: the device must stop at the ring's end (not
    // overwrite unread CQEs) and say so with IBV_EVENT_CQ_ERR.
    Side x, y;
    ASSERT_NO_FATAL_FAILURE(make_side(x, *devs_[0], ip("127.0.0.2")));
    ASSERT_NO_FATAL_FAILURE(make_side(y, *devs_[0], ip("127.0.0.2")));
    std::unique_ptr<TestCq> tiny;
    ASSERT_EQ(x.c->create_cq(1, &tiny), 0);
    std::unique_ptr<TestQp> qp;
    ASSERT_EQ(x.c->create_qp(x.pd, tiny->handle, x.rcq->handle, small_cap(), &qp), 0);
    ASSERT_EQ(x.c->connect(*qp, y.qp->qpn, y.ip, Path{}), 0);
    ASSERT_EQ(y.c->connect(*y.qp, qp->qpn, x.ip, Path{}), 0);
    GuardedBuf src(8, 1), dst(8 * 8);
    uint32_t sk, rk;
    ASSERT_EQ(x.c->reg_mr(x.pd, src.base(), src.total(), 0, &sk), 0);
    ASSERT_EQ(y.c->reg_mr(y.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rk), 0);
    uint32_t slots = tiny->ring.mask() + 1;
    for (uint32_t i = 0; i <= slots; ++i) {
        y.c->post_recv(*y.qp, i, {{addr_of(dst.data() + 8 * i), 8, rk}});
        x.c->post_send(*qp, 100 + i, {{addr_of(src.data()), 8, sk}});
    }
    abi::AsyncEvent ev{};
    ASSERT_TRUE(x.c->async_event(&ev, 2000));
    EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_CQ_ERR));
    // The CQEs that fit are intact and in order.
    abi::Cqe c{};
    for (uint32_t i = 0; i < slots; ++i) {
        ASSERT_TRUE(poll_cq(*tiny, &c, 100)) << i;
        EXPECT_EQ(c.wr_id, 100u + i);
    }
    EXPECT_TRUE(dst.guards_intact());
    expect_device_healthy();
}

// ibv_device.dev_name's uverbs<N> (docs/system-view.md): uroce<N> keeps N; other names
// take the lowest numbers left, in name order, so the library and `uroce run` agree.
TEST(UverbsIndex, DefaultNamesKeepTheirNumberOthersTakeWhatIsLeft) {
    auto dev = [](const char* n) {
        abi::DeviceInfo d;
        d.name = n;
        return d;
    };
    std::vector<abi::DeviceInfo> running = {dev("uroce0"), dev("uroce2"), dev("zeta"), dev("alpha"),
                                            dev("uroce01")};
    EXPECT_EQ(abi::uverbs_index("uroce0", running), 0);
    EXPECT_EQ(abi::uverbs_index("uroce2", running), 2);
    EXPECT_EQ(abi::uverbs_index("alpha", running), 1);
    EXPECT_EQ(abi::uverbs_index("uroce01", running), 3);  // not a uroce<N> name
    EXPECT_EQ(abi::uverbs_index("zeta", running), 4);
    EXPECT_EQ(abi::uverbs_index("uroce7", {}), 7);
    EXPECT_EQ(abi::uverbs_index("mine", {}), 0);
}

}  // namespace
}  // namespace uroce::emu::device_test
