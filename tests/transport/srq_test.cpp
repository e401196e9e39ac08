// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Shared receive queues: one SRQ feeds the receives of several RC QPs, in posting order,
// each completion naming the QP that received; the limit event fires once per arming; a QP
// attached to an SRQ that enters ERR reports IBV_EVENT_QP_LAST_WQE_REACHED and leaves the
// SRQ's receives to the other QPs.
#include <cerrno>
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr int kQps = 3;

class Srq : public TransportTest {
protected:
    void set_up() override {
        srq_ = make_srq(B(), 32, 2);
        ASSERT_NE(srq_, nullptr);
        QpOpts o;
        o.srq_b = srq_;
        for (int i = 0; i < kQps; ++i) {
            p_[i] = connect_pair(o);
            ASSERT_TRUE(p_[i].a.qp && p_[i].b.qp);
        }
        src_ = &reg(A(), 4096);
        dst_ = &reg(B(), 32 * 128);
        src_->fill(61);
    }
    // A SEND of `len` bytes (pattern 61 from offset `off`) from pair i.
    void send(int i, uint64_t id, size_t off, uint32_t len) {
        std::vector<ibv_sge> sg{src_->sge(off, len)};
        ibv_send_wr w = wr(id, IBV_WR_SEND, sg);
        ASSERT_EQ(post(p_[i].a.qp, w), 0);
        expect_send_ok(p_[i].a, id, IBV_WC_SEND, len);
    }
    ibv_srq* srq_ = nullptr;
    Pair p_[kQps];
    Buffer* src_ = nullptr;
    Buffer* dst_ = nullptr;
};

// Receives are taken in the order they were posted, whichever QP the message came to;
// qp_num says which QP received, src_qp who sent.
TEST_F(Srq, SharedByThreeQps) {
    for (uint64_t k = 0; k < 6; ++k)
        ASSERT_EQ(post_srq_recv(srq_, 100 + k, {dst_->sge(k * 128, 128)}), 0);
    int order[6] = {2, 0, 1, 1, 2, 0};
    for (int k = 0; k < 6; ++k) {
        send(order[k], k, size_t(k) * 100, 100);
        // Each QP's receives complete on its own receive CQ.
        expect_recv_ok(p_[order[k]].b, 100 + k, IBV_WC_RECV, 100, p_[order[k]].a.qpn());
        EXPECT_EQ(dst_->mismatch(61, k * 128, 100, k * 100), -1) << "receive " << k;
        EXPECT_EQ(dst_->not_poison(k * 128 + 100, 28), -1);
    }
    for (auto& p : p_) {
        expect_empty(p.b.rcq, 0);
        EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    }
    ibv_srq_attr attr{};
    ASSERT_EQ(ibv_query_srq(srq_, &attr), 0);
    EXPECT_EQ(attr.srq_limit, 0u);
    EXPECT_GE(attr.max_wr, 32u);
}

// ibv_modify_srq(3): the limit event fires when the number of receives in the SRQ drops
// below srq_limit; it fires once, and the SRQ is then disarmed (srq_limit reads 0) until it
// is armed again.
TEST_F(Srq, LimitEventFiresOnce) {
    for (uint64_t k = 0; k < 10; ++k)
        ASSERT_EQ(post_srq_recv(srq_, k, {dst_->sge(k * 128, 128)}), 0);
    ibv_srq_attr attr{};
    attr.srq_limit = 5;
    ASSERT_EQ(ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT), 0);
    for (int k = 0; k < 5; ++k) {  // 10 -> 5 receives left: not below the limit yet
        send(k % kQps, k, 0, 8);
        expect_recv_ok(p_[k % kQps].b, k, IBV_WC_RECV, 8, p_[k % kQps].a.qpn());
    }
    expect_no_async(B(), 50);
    send(0, 5, 0, 8);  // 4 left: below
    expect_recv_ok(p_[0].b, 5, IBV_WC_RECV, 8, p_[0].a.qpn());
    ibv_async_event ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED) << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(ev.element.srq, srq_);
    ASSERT_EQ(ibv_query_srq(srq_, &attr), 0);
    EXPECT_EQ(attr.srq_limit, 0u) << "the SRQ is still armed after its event";
    for (int k = 6; k < 9; ++k) {
        send(1, k, 0, 8);
        expect_recv_ok(p_[1].b, k, IBV_WC_RECV, 8, p_[1].a.qpn());
    }
    expect_no_async(B(), 50);
    // Armed again at 3 with 1 receive left... and 1 < 3 at the next take: one more event.
    attr.srq_limit = 3;
    ASSERT_EQ(ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT), 0);
    ASSERT_EQ(post_srq_recv(srq_, 10, {dst_->sge(10 * 128, 128)}), 0);
    send(2, 9, 0, 8);
    expect_recv_ok(p_[2].b, 9, IBV_WC_RECV, 8, p_[2].a.qpn());
    ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
    expect_no_async(B(), 20);
}

// A QP with an SRQ that enters ERR gets IBV_EVENT_QP_LAST_WQE_REACHED (IBTA 11.6.3.3); the
// SRQ's receives are not flushed: the other QPs go on taking them.
TEST_F(Srq, LastWqeReachedOnError) {
    for (uint64_t k = 0; k < 4; ++k)
        ASSERT_EQ(post_srq_recv(srq_, k, {dst_->sge(k * 128, 128)}), 0);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(p_[1].b.qp, &a, IBV_QP_STATE), 0);
    ibv_async_event ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED) << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(ev.element.qp, p_[1].b.qp);
    expect_empty(p_[1].b.rcq, 20);  // nothing of the SRQ is flushed to it
    send(0, 0, 0, 16);
    send(2, 1, 16, 16);
    expect_recv_ok(p_[0].b, 0, IBV_WC_RECV, 16, p_[0].a.qpn());
    expect_recv_ok(p_[2].b, 1, IBV_WC_RECV, 16, p_[2].a.qpn());
    EXPECT_EQ(dst_->mismatch(61, 128, 16, 16), -1);

    // An error the transport raises (a receive too small) reports it too.
    Buffer& tiny = reg(B(), 4);
    ASSERT_EQ(post_srq_recv(srq_, 50, {tiny.sge(0, 4)}), 0);
    // Receives 2 and 3 (128 bytes) go first; the 4-byte one takes the third message.
    send(2, 2, 0, 8);
    send(2, 3, 0, 8);
    expect_recv_ok(p_[2].b, 2, IBV_WC_RECV, 8, p_[2].a.qpn());
    expect_recv_ok(p_[2].b, 3, IBV_WC_RECV, 8, p_[2].a.qpn());
    std::vector<ibv_sge> sg{src_->sge(0, 8)};
    ibv_send_wr w = wr(4, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p_[0].a.qp, w), 0);
    expect_error(p_[0].a.scq, p_[0].a.qpn(), 4, IBV_WC_REM_INV_REQ_ERR, "8 bytes into 4");
    expect_error(p_[0].b.rcq, p_[0].b.qpn(), 50, IBV_WC_LOC_LEN_ERR, "the small receive");
    EXPECT_TRUE(wait_state(p_[0].b.qp, IBV_QPS_ERR));
    bool last_wqe = false, req_err = false;
    for (int i = 0; i < 2; ++i) {
        ev = next_async(B());
        EXPECT_EQ(ev.element.qp, p_[0].b.qp);
        last_wqe |= ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED;
        req_err |= ev.event_type == IBV_EVENT_QP_REQ_ERR;
    }
    EXPECT_TRUE(last_wqe) << "no IBV_EVENT_QP_LAST_WQE_REACHED";
    EXPECT_TRUE(req_err) << "no IBV_EVENT_QP_REQ_ERR";
    EXPECT_EQ(tiny.not_poison(0, 4), -1);
}

// ibv_destroy_srq(3) fails with EBUSY while a QP uses the SRQ, which then keeps working; once
// the QP is destroyed the SRQ can be.
TEST_F(Srq, DestroyWhileInUseIsBusy) {
    ibv_srq_init_attr ia{};
    ia.attr.max_wr = 4;
    ia.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(B().pd, &ia);
    ASSERT_NE(srq, nullptr) << std::strerror(errno);
    QpOpts o;
    o.srq_b = srq;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    EXPECT_EQ(ibv_destroy_srq(srq), EBUSY);
    ASSERT_EQ(post_srq_recv(srq, 7, {dst_->sge(0, 128)}), 0);
    std::vector<ibv_sge> sg{src_->sge(0, 50)};
    ibv_send_wr w = wr(1, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 1, IBV_WC_SEND, 50);
    expect_recv_ok(p.b, 7, IBV_WC_RECV, 50, p.a.qpn());
    EXPECT_EQ(dst_->mismatch(61, 0, 50, 0), -1);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    destroy_qp(p.b);
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

}  // namespace
}  // namespace uroce::transport_test
