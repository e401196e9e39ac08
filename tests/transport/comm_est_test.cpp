// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// IBTA 11.6.3.1: the first packet an RC or UC QP receives while it is in RTR raises
// IBV_EVENT_COMM_EST for that QP, once; the message itself is received as usual. (A QP
// brought to RTS before its peer sends, as the fixture's pairs are, never sees it.)
#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class CommEst : public TransportTest {};

TEST_F(CommEst, FirstPacketInRtr) {
    for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC}) {
        SCOPED_TRACE(type == IBV_QPT_RC ? "RC" : "UC");
        QpOpts o;
        o.type = type;
        Endpoint a = make_qp(A(), o, true);
        Endpoint b = make_qp(B(), o, false);
        ASSERT_TRUE(a.qp && b.qp);
        ASSERT_NO_FATAL_FAILURE(connect_qp(a, B(), b.qpn(), o, o.psn_a, o.psn_b));
        ASSERT_NO_FATAL_FAILURE(connect_qp(b, A(), a.qpn(), o, o.psn_b, o.psn_a, false));
        EXPECT_EQ(qp_state(b.qp), IBV_QPS_RTR);
        Buffer& src = reg(A(), 256);
        Buffer& dst = reg(B(), 512);
        src.fill(91);
        for (uint64_t k = 0; k < 2; ++k) ASSERT_EQ(post_recv(b.qp, k, {dst.sge(k * 256, 256)}), 0);
        for (uint64_t k = 0; k < 2; ++k) {
            std::vector<ibv_sge> sg{src.sge(0, 100)};
            ibv_send_wr w = wr(k, IBV_WR_SEND, sg);
            ASSERT_EQ(post(a.qp, w), 0);
            expect_send_ok(a, k, IBV_WC_SEND, 100);
            expect_recv_ok(b, k, IBV_WC_RECV, 100, a.qpn());
            EXPECT_EQ(dst.mismatch(91, k * 256, 100, 0), -1);
            if (k == 0) {
                ibv_async_event ev = next_async(B());
                EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST) << ibv_event_type_str(ev.event_type);
                EXPECT_EQ(ev.element.qp, b.qp);
            }
        }
        expect_no_async(B(), 20);  // once, not per packet
        expect_no_async(A(), 0);
        EXPECT_EQ(qp_state(b.qp), IBV_QPS_RTR);
    }
}

}  // namespace
}  // namespace uroce::transport_test
