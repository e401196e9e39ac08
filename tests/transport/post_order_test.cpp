// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Program order between a process's data path and its control path (docs/behaviour.md,
// "Program order"): a work request posted (its doorbell rung) before a control call of the
// same process is taken by the device before the call acts, as hardware fetches it within a
// microsecond of the doorbell and rxe runs it in ibv_post_send itself. The doorbell and the
// control request travel apart (the doorbell page, the control socket), so each case repeats
// many times: before the device served doorbells ahead of control requests, the SEND was
// flushed instead of sent in most of them.
#include <infiniband/verbs.h>

#include <vector>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr int kRounds = 100;
constexpr uint32_t kMsg = 100;

class PostOrder : public TransportTest {
protected:
    void set_up() override {
        src_ = &reg(A(), kMsg);
        dst_ = &reg(B(), kMsg);
        src_->fill(33);
    }
    // A fresh connected pair with one receive posted at B; A posts an unsignaled SEND and
    // then `control` acts on A's QP at once. B must receive the SEND, whole; A's WQE is
    // sent and then flushed by the move to ERR (or acknowledged first): never lost.
    template <typename Control>
    void send_then(Control control, const char* what) {
        for (int r = 0; r < kRounds; ++r) {
            Pair p = connect_pair();
            ASSERT_TRUE(p.a.qp && p.b.qp);
            ASSERT_EQ(post_recv(p.b.qp, 1, {dst_->sge(0, kMsg)}), 0);
            std::vector<ibv_sge> sg{src_->sge(0, kMsg)};
            ibv_send_wr w = wr(2, IBV_WR_SEND, sg, 0);
            ASSERT_EQ(post(p.a.qp, w), 0);
            control(p.a);
            ibv_wc wc{};
            ASSERT_TRUE(try_poll(p.b.rcq, &wc, kWaitSeconds))
                << what << ", round " << r << ": the SEND posted before it never arrived";
            ASSERT_EQ(wc.status, IBV_WC_SUCCESS)
                << what << ", round " << r << ": " << ibv_wc_status_str(wc.status);
            EXPECT_EQ(wc.byte_len, kMsg);
            EXPECT_EQ(wc.wr_id, 1u);
            destroy_qp(p.b);
            if (p.a.qp) destroy_qp(p.a);
        }
    }
    Buffer* src_ = nullptr;
    Buffer* dst_ = nullptr;
};

// librpma's last message: an unsignaled SEND, then the QP to ERR (rdma_disconnect's first
// step in rdma-core's librdmacm).
TEST_F(PostOrder, SendBeforeModifyToErrIsSent) {
    send_then(
        [&](Endpoint& a) {
            ibv_qp_attr at{};
            at.qp_state = IBV_QPS_ERR;
            ASSERT_EQ(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), 0);
            // The WQE went out before the move. Unacknowledged then, it completes as a flush
            // (written before ibv_modify_qp returns), as on rxe; acknowledged first, it
            // completed unsignaled, without a completion.
            ibv_wc wc{};
            if (ibv_poll_cq(a.scq, 1, &wc) == 1) {
                EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc.status);
            }
        },
        "ibv_modify_qp(ERR)");
}

// A process that posts its last SEND and destroys the QP at once.
TEST_F(PostOrder, SendBeforeDestroyQpIsSent) {
    send_then([&](Endpoint& a) { destroy_qp(a); }, "ibv_destroy_qp");
}

}  // namespace
}  // namespace uroce::transport_test
