// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC SEND and SEND_WITH_IMM: the bytes land in the posted receive and nowhere else, both
// completions carry the right fields, and both QPs stay in RTS.
#include <arpa/inet.h>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class RcSend : public TransportTest {
protected:
    void send_and_check(uint32_t len, bool imm, ibv_mtu mtu) {
        Pair p = connect_pair({.mtu = mtu});
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Buffer& src = reg(A(), 16384);
        Buffer& dst = reg(B(), 16384);
        src.fill(7);
        ASSERT_EQ(post_recv(p.b.qp, 100, {dst.sge(0, 16384)}), 0);
        std::vector<ibv_sge> sg;  // a zero-length message has no SGE at all
        if (len) sg.push_back(src.sge(0, len));
        ibv_send_wr w = wr(1, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, sg);
        w.imm_data = htonl(0x12345678);
        ASSERT_EQ(post(p.a.qp, w), 0);

        expect_send_ok(p.a, 1, IBV_WC_SEND, len);
        expect_recv_ok(p.b, 100, IBV_WC_RECV, len, p.a.qpn(), imm ? IBV_WC_WITH_IMM : 0,
                       htonl(0x12345678));
        EXPECT_EQ(dst.mismatch(7, 0, len), -1) << "received bytes differ from the sent ones";
        EXPECT_EQ(dst.not_poison(len, dst.len - len), -1)
            << "bytes past the message in the receive buffer were written";
        EXPECT_EQ(src.mismatch(7, 0, src.len), -1) << "the source buffer changed";
        expect_empty(p.a.scq);
        expect_empty(p.b.rcq);
        EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
        EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    }
};

TEST_F(RcSend, OnePacket) { send_and_check(1000, false, IBV_MTU_1024); }
TEST_F(RcSend, ManyPackets) { send_and_check(10000, false, IBV_MTU_1024); }
TEST_F(RcSend, ExactlyOneMtu) { send_and_check(4096, false, IBV_MTU_4096); }
TEST_F(RcSend, WithImmOnePacket) { send_and_check(1, true, IBV_MTU_1024); }
TEST_F(RcSend, WithImmManyPackets) { send_and_check(9000, true, IBV_MTU_256); }
TEST_F(RcSend, ZeroLength) { send_and_check(0, false, IBV_MTU_1024); }
TEST_F(RcSend, ZeroLengthWithImm) { send_and_check(0, true, IBV_MTU_1024); }

}  // namespace
}  // namespace uroce::transport_test
