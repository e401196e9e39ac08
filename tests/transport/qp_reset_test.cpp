// A QP moved to RESET takes its completions out of its CQs, as mlx5's (and mlx4's, mthca's)
// provider does, so a QP reset and connected again does not find its old work's completions
// (rdma-core's test_mr_rereg_pd and test_mr_rereg_addr rely on it); the completions of other
// QPs sharing the CQ stay, in order.
#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class QpReset : public TransportTest {};

TEST_F(QpReset, RemovesItsCompletionsAndKeepsOthers) {
    QpOpts o;
    ibv_cq* shared = make_cq(B(), 64);
    ibv_cq* scq = make_cq(B(), 64);
    ASSERT_TRUE(shared && scq);
    Endpoint a1 = make_qp(A(), o, true), a2 = make_qp(A(), o, true);
    Endpoint b1 = make_qp_with_cqs(B(), o, scq, shared);
    Endpoint b2 = make_qp_with_cqs(B(), o, scq, shared);
    ASSERT_TRUE(a1.qp && a2.qp && b1.qp && b2.qp);
    connect_qp(a1, B(), b1.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(b1, A(), a1.qpn(), o, o.psn_b, o.psn_a);
    connect_qp(a2, B(), b2.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(b2, A(), a2.qpn(), o, o.psn_b, o.psn_a);
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), 6 * 64);
    for (uint64_t id : {10, 11, 12, 13})
        ASSERT_EQ(post_recv(b1.qp, id, {dst.sge((id - 10) * 64, 64)}), 0);
    for (uint64_t id : {20, 21}) ASSERT_EQ(post_recv(b2.qp, id, {dst.sge((id - 16) * 64, 64)}), 0);
    // One at a time, so the shared CQ's order is known: b1 10, b2 20, b1 11.
    auto send = [&](const Endpoint& a, uint64_t id) {
        std::vector<ibv_sge> sg{src.sge(0, 64)};
        ibv_send_wr w = wr(id, IBV_WR_SEND, sg);
        ASSERT_EQ(post(a.qp, w), 0);
        expect_send_ok(a, id, IBV_WC_SEND, 64);
    };
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
    ASSERT_EQ(post_recv(b2.qp, 22, {dst.sge(0, 64)}), 0);
    send(a2, 5);
    expect_recv_ok(b2, 22, IBV_WC_RECV, 64, a2.qpn());
}

}  // namespace
}  // namespace uroce::transport_test
