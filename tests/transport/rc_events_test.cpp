// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Completion events (ibv_req_notify_cq(3)): armed with solicited_only, a CQ raises an event
// only for a receive of a message sent with IBV_SEND_SOLICITED or for an unsuccessful
// completion; armed with 0, for any completion; an event is raised once per arming, and only
// for a completion added after the arm.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class RcEvents : public PairTest {
protected:
    void set_up() override {
        ch_ = make_channel(B());
        ASSERT_NE(ch_, nullptr);
        QpOpts o;
        o.channel_b = ch_;
        ASSERT_NO_FATAL_FAILURE(connect(o));
        buffers(4096, 4096, 71);
        for (uint64_t k = 0; k < 8; ++k)
            ASSERT_EQ(post_recv(p_.b.qp, k, {dst_->sge(k * 512, 512)}), 0);
    }
    // The CQ of the next event on B's channel within `ms`, or nullptr.
    ibv_cq* event(int ms) {
        pollfd p{ch_->fd, POLLIN, 0};
        if (poll(&p, 1, ms) != 1) return nullptr;
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        EXPECT_EQ(ibv_get_cq_event(ch_, &cq, &ctx), 0);
        if (cq) ibv_ack_cq_events(cq, 1);
        return cq;
    }
    void send(uint64_t id, ibv_wr_opcode op, unsigned flags) {
        std::vector<ibv_sge> sg{src_->sge(0, 100)};
        ibv_send_wr w = wr(id, op, sg, IBV_SEND_SIGNALED | flags);
        w.imm_data = htonl(uint32_t(id));
        if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
            w.wr.rdma.remote_addr = dst_->addr(3900);
            w.wr.rdma.rkey = dst_->rkey();
        }
        ASSERT_EQ(post(p_.a.qp, w), 0);
        expect_send_ok(p_.a, id, op == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, 100);
    }
    ibv_comp_channel* ch_ = nullptr;
};

TEST_F(RcEvents, SolicitedOnly) {
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 1), 0);
    send(1, IBV_WR_SEND, 0);  // unsolicited: completes without an event
    expect_recv_ok(p_.b, 0, IBV_WC_RECV, 100, p_.a.qpn());
    EXPECT_EQ(event(50), nullptr) << "an unsolicited receive raised an event";
    send(2, IBV_WR_SEND, IBV_SEND_SOLICITED);
    EXPECT_EQ(event(int(kWaitSeconds * 1000)), p_.b.rcq) << "no event for a solicited SEND";
    expect_recv_ok(p_.b, 1, IBV_WC_RECV, 100, p_.a.qpn());
    // Disarmed by the event: the next solicited message raises none until armed again.
    send(3, IBV_WR_SEND, IBV_SEND_SOLICITED);
    expect_recv_ok(p_.b, 2, IBV_WC_RECV, 100, p_.a.qpn());
    EXPECT_EQ(event(50), nullptr) << "an event without arming";
    // WRITE_WITH_IMM with IBV_SEND_SOLICITED is solicited too.
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 1), 0);
    send(4, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SOLICITED);
    EXPECT_EQ(event(int(kWaitSeconds * 1000)), p_.b.rcq);
    expect_recv_ok(p_.b, 3, IBV_WC_RECV_RDMA_WITH_IMM, 100, p_.a.qpn(), IBV_WC_WITH_IMM, htonl(4));
    // A successful send completion is never solicited.
    ASSERT_EQ(ibv_req_notify_cq(p_.b.scq, 1), 0);
    std::vector<ibv_sge> sg{dst_->sge(0, 8)};
    ibv_send_wr w = wr(5, IBV_WR_SEND, sg, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
    Buffer& arx = reg(A(), 64);
    ASSERT_EQ(post_recv(p_.a.qp, 9, {arx.sge(0, 64)}), 0);
    ASSERT_EQ(post(p_.b.qp, w), 0);
    expect_send_ok(p_.b, 5, IBV_WC_SEND, 8);
    EXPECT_EQ(event(50), nullptr) << "a send completion raised a solicited-only event";
}

TEST_F(RcEvents, AnyCompletion) {
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 0), 0);
    send(1, IBV_WR_SEND, 0);
    EXPECT_EQ(event(int(kWaitSeconds * 1000)), p_.b.rcq);
    expect_recv_ok(p_.b, 0, IBV_WC_RECV, 100, p_.a.qpn());
    // An arm is for the next completion (IBTA's Request Completion Notification, rxe): one
    // already waiting raises nothing, the next one does.
    send(2, IBV_WR_SEND, 0);
    EXPECT_EQ(event(50), nullptr);
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 0), 0);
    EXPECT_EQ(event(100), nullptr) << "an event for a completion that came before the arm";
    send(3, IBV_WR_SEND, 0);
    EXPECT_EQ(event(int(kWaitSeconds * 1000)), p_.b.rcq);
    expect_recv_ok(p_.b, 1, IBV_WC_RECV, 100, p_.a.qpn());
    expect_recv_ok(p_.b, 2, IBV_WC_RECV, 100, p_.a.qpn());
}

// librpma's rpma_conn_wait over one channel shared by a send CQ and a receive CQ: take the
// event, ack it, arm that CQ again, then poll it, while its completion is still unpolled at
// the arm. Each new completion raises exactly one event, and the re-arm over the completion
// it announced raises none (a stale event there made librpma's next wait find an empty CQ).
TEST_F(RcEvents, SharedChannelArmedAgainBeforePollingLibrpmaOrder) {
    ASSERT_EQ(ibv_req_notify_cq(p_.b.scq, 0), 0);
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 0), 0);
    Buffer& arx = reg(A(), 8 * 64);
    std::vector<ibv_sge> pong{dst_->sge(0, 8)};
    // The event, acked and re-armed as librpma does, then the one completion it announced.
    auto wait_then_poll = [&](ibv_cq* want, const char* what, int round) {
        pollfd pf{ch_->fd, POLLIN, 0};
        ASSERT_EQ(poll(&pf, 1, int(kWaitSeconds * 1000)), 1) << what << " " << round;
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        ASSERT_EQ(ibv_get_cq_event(ch_, &cq, &ctx), 0);
        ASSERT_EQ(cq, want) << what << " " << round << ": the event named the other CQ";
        ibv_ack_cq_events(cq, 1);
        ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
        ibv_wc wc{};
        ASSERT_EQ(ibv_poll_cq(cq, 1, &wc), 1)
            << what << " " << round << ": an event, no completion";
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        EXPECT_EQ(poll(&pf, 1, 30), 0) << what << " " << round << ": a second event";
    };
    for (int n = 0; n < 8; ++n) {
        ASSERT_EQ(post_recv(p_.a.qp, 100 + n, {arx.sge(n * 64, 64)}), 0);
        send(n, IBV_WR_SEND, 0);  // A's ping into B's receive n
        ASSERT_NO_FATAL_FAILURE(wait_then_poll(p_.b.rcq, "ping", n));
        ibv_send_wr w = wr(200 + n, IBV_WR_SEND, pong);  // B's pong, signaled
        ASSERT_EQ(post(p_.b.qp, w), 0);
        ASSERT_NO_FATAL_FAILURE(wait_then_poll(p_.b.scq, "pong", n));
        expect_recv_ok(p_.a, 100 + n, IBV_WC_RECV, 8, p_.b.qpn());
    }
}

// An unsuccessful completion raises a solicited-only event: here the receives flushed when
// B's QP is moved to ERR.
TEST_F(RcEvents, ErrorCompletionIsSolicited) {
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 1), 0);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(p_.b.qp, &a, IBV_QP_STATE), 0);
    EXPECT_EQ(event(int(kWaitSeconds * 1000)), p_.b.rcq) << "no event for a flushed receive";
    for (uint64_t k = 0; k < 8; ++k)
        expect_error(p_.b.rcq, p_.b.qpn(), k, IBV_WC_WR_FLUSH_ERR, "flushed receive");
    expect_empty(p_.b.rcq, 0);
}

// A completion event queued on a channel for a CQ destroyed before it was read is dropped,
// as the kernel takes a CQ's events off its channel at destroy: it is never handed out,
// neither naming freed memory nor a new CQ of the channel made where the old one was.
TEST_F(RcEvents, PendingEventOfADestroyedCqIsDropped) {
    QpOpts o;
    ibv_cq* old_cq = ibv_create_cq(B().ctx, 16, nullptr, ch_, 0);
    ASSERT_NE(old_cq, nullptr);
    Endpoint a = make_qp(A(), o, true);
    Endpoint b = make_qp_with_cqs(B(), o, old_cq, old_cq);
    ASSERT_TRUE(a.qp && b.qp);
    connect_qp(a, B(), b.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(b, A(), a.qpn(), o, o.psn_b, o.psn_a);
    ASSERT_EQ(post_recv(b.qp, 1, {dst_->sge(0, 512)}), 0);
    ASSERT_EQ(ibv_req_notify_cq(old_cq, 0), 0);
    std::vector<ibv_sge> sg{src_->sge(0, 100)};
    ibv_send_wr w = wr(2, IBV_WR_SEND, sg);
    ASSERT_EQ(post(a.qp, w), 0);
    expect_send_ok(a, 2, IBV_WC_SEND, 100);
    expect_recv_ok(b, 1, IBV_WC_RECV, 100, a.qpn());
    pollfd pf{ch_->fd, POLLIN, 0};
    ASSERT_EQ(poll(&pf, 1, 5000), 1) << "no event queued for the CQ";
    destroy_qp(b);
    ASSERT_EQ(ibv_destroy_cq(old_cq), 0);
    ibv_cq* new_cq = make_cq(B(), 16, ch_);  // often where the old one was
    ASSERT_NE(new_cq, nullptr);
    const int fl = fcntl(ch_->fd, F_GETFL);
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fl | O_NONBLOCK), 0);
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(ch_, &cq, &ctx), -1) << "the destroyed CQ's event was handed out";
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(cq, nullptr);
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fl), 0);
    // The channel goes on serving its live CQs.
    send(3, IBV_WR_SEND, 0);
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 0), 0);
    expect_recv_ok(p_.b, 0, IBV_WC_RECV, 100, p_.a.qpn());
    ASSERT_EQ(ibv_req_notify_cq(p_.b.rcq, 0), 0);
    send(4, IBV_WR_SEND, 0);
    EXPECT_EQ(event(5000), p_.b.rcq);
}

}  // namespace
}  // namespace uroce::transport_test
