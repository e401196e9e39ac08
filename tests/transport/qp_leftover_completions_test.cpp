// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A QP moved to RESET or destroyed takes its completions out of its CQs, as mlx5's (and
// mlx4's, mthca's) provider does; the completions of other QPs sharing the CQs stay, in order.
// A QP reset and connected again does not find its old work's completions (rdma-core's
// test_mr_rereg_pd and test_mr_rereg_addr rely on it); after ibv_destroy_qp libfabric's verbs
// provider polls the CQ for the QP's leftovers, and rxm 1.17 reposts the buffer of a receive
// it finds there onto the endpoint it has just closed (docs/verbs-support.md, "Destroyed QPs").
#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class QpLeftovers : public TransportTest {
protected:
    // a1-b1 and a2-b2 connected, b1 and b2 on B's CQs `scq` and `rcq`.
    void make_pairs(ibv_cq* scq, ibv_cq* rcq) {
        a1 = make_qp(A(), o, true);
        a2 = make_qp(A(), o, true);
        b1 = make_qp_with_cqs(B(), o, scq, rcq);
        b2 = make_qp_with_cqs(B(), o, scq, rcq);
        ASSERT_TRUE(a1.qp && a2.qp && b1.qp && b2.qp);
        connect_qp(a1, B(), b1.qpn(), o, o.psn_a, o.psn_b);
        connect_qp(b1, A(), a1.qpn(), o, o.psn_b, o.psn_a);
        connect_qp(a2, B(), b2.qpn(), o, o.psn_a, o.psn_b);
        connect_qp(b2, A(), a2.qpn(), o, o.psn_b, o.psn_a);
        src = &reg(A(), 64);
        dst = &reg(B(), 6 * 64);
    }
    // A SEND of 64 bytes from `a`, complete (so its receive's completion was written).
    void send(const Endpoint& a, uint64_t id) {
        std::vector<ibv_sge> sg{src->sge(0, 64)};
        ibv_send_wr w = wr(id, IBV_WR_SEND, sg);
        ASSERT_EQ(post(a.qp, w), 0);
        expect_send_ok(a, id, IBV_WC_SEND, 64);
    }

    QpOpts o;
    Endpoint a1, a2, b1, b2;
    Buffer* src = nullptr;
    Buffer* dst = nullptr;  // six 64-byte receive slots
};

TEST_F(QpLeftovers, ResetRemovesItsCompletionsAndKeepsOthers) {
    ibv_cq* shared = make_cq(B(), 64);
    ibv_cq* scq = make_cq(B(), 64);
    ASSERT_TRUE(shared && scq);
    make_pairs(scq, shared);
    for (uint64_t id : {10, 11, 12, 13})
        ASSERT_EQ(post_recv(b1.qp, id, {dst->sge((id - 10) * 64, 64)}), 0);
    for (uint64_t id : {20, 21}) ASSERT_EQ(post_recv(b2.qp, id, {dst->sge((id - 16) * 64, 64)}), 0);
    // One at a time, so the shared CQ's order is known: b1 10, b2 20, b1 11.
    send(a1, 1);
    send(a2, 2);
    send(a1, 3);
    // b1 to ERR: its receives 12 and 13 are flushed into the shared CQ behind the others.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(b1.qp, &attr, IBV_QP_STATE), 0);
    send(a2, 4);  // b2 21, after the flushes
    attr.qp_state = IBV_QPS_RESET;
    ASSERT_EQ(ibv_modify_qp(b1.qp, &attr, IBV_QP_STATE), 0);
    expect_recv_ok(b2, 20, IBV_WC_RECV, 64, a2.qpn());
    expect_recv_ok(b2, 21, IBV_WC_RECV, 64, a2.qpn());
    expect_empty(shared);
    expect_empty(scq);
    // The CQ goes on for the QP that stayed.
    ASSERT_EQ(post_recv(b2.qp, 22, {dst->sge(0, 64)}), 0);
    send(a2, 5);
    expect_recv_ok(b2, 22, IBV_WC_RECV, 64, a2.qpn());
}

TEST_F(QpLeftovers, DestroyRemovesItsCompletionsAndKeepsOthers) {
    ibv_comp_channel* ch = make_channel(B());
    ibv_cq* scq = make_cq(B(), 64, ch);
    ibv_cq* rcq = make_cq(B(), 64);
    ASSERT_TRUE(ch && scq && rcq);
    make_pairs(scq, rcq);
    for (uint64_t id : {10, 11, 12})
        ASSERT_EQ(post_recv(b1.qp, id, {dst->sge((id - 10) * 64, 64)}), 0);
    for (uint64_t id : {20, 21}) ASSERT_EQ(post_recv(b2.qp, id, {dst->sge((id - 17) * 64, 64)}), 0);
    // Successful receives in the shared CQ: b1 10, b2 20, b1 11.
    send(a1, 1);
    send(a2, 2);
    send(a1, 3);
    // And a successful send of b1's in the shared send CQ: the channel's event says it is
    // there, without taking it out.
    ASSERT_EQ(post_recv(a1.qp, 30, {src->sge(0, 64)}), 0);
    ASSERT_EQ(ibv_req_notify_cq(scq, 0), 0);
    std::vector<ibv_sge> bsg{dst->sge(5 * 64, 64)};
    ibv_send_wr bw = wr(40, IBV_WR_SEND, bsg);
    ASSERT_EQ(post(b1.qp, bw), 0);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    ASSERT_EQ(ev_cq, scq);
    ibv_ack_cq_events(scq, 1);
    expect_recv_ok(a1, 30, IBV_WC_RECV, 64, b1.qpn());

    const uint32_t gone = b1.qpn();
    destroy_qp(b1);
    // Receive 12, posted and never used, has no completion either (none for a destroyed QP's
    // outstanding work, as uverbs): b2's receive is all the receive CQ holds.
    ibv_wc wc = poll1(rcq);
    EXPECT_NE(wc.qp_num, gone);
    EXPECT_EQ(wc.wr_id, 20u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    expect_empty(rcq);
    expect_empty(scq);
    // The CQs go on for the QP that stayed.
    send(a2, 4);
    expect_recv_ok(b2, 21, IBV_WC_RECV, 64, a2.qpn());
    ASSERT_EQ(post_recv(a2.qp, 31, {src->sge(0, 64)}), 0);
    ibv_send_wr bw2 = wr(41, IBV_WR_SEND, bsg);
    ASSERT_EQ(post(b2.qp, bw2), 0);
    expect_send_ok(b2, 41, IBV_WC_SEND, 64);
    expect_recv_ok(a2, 31, IBV_WC_RECV, 64, b2.qpn());
}

}  // namespace
}  // namespace uroce::transport_test
