// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC RDMA WRITE, RDMA WRITE_WITH_IMM and RDMA READ: exactly the addressed bytes change,
// WRITE_WITH_IMM consumes a receive (and writes nothing into it), READs of several MTUs
// arrive whole, both QPs stay in RTS.
#include <arpa/inet.h>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr size_t kBuf = 32768;

class RcRdma : public TransportTest {
protected:
    // A writes `len` bytes of pattern 3 from src[0] to dst[off] at B.
    void write_and_check(uint32_t len, size_t off, bool imm, ibv_mtu mtu) {
        Pair p = connect_pair({.mtu = mtu});
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Buffer& src = reg(A(), kBuf);
        Buffer& dst = reg(B(), kBuf);
        Buffer& rbuf = reg(B(), 64);
        src.fill(3);
        if (imm) {
            ASSERT_EQ(post_recv(p.b.qp, 200, {rbuf.sge(0, 64)}), 0);
        }
        std::vector<ibv_sge> sg;
        if (len) sg.push_back(src.sge(0, len));
        ibv_send_wr w = rdma_wr(1, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, sg,
                                dst.addr(off), dst.rkey());
        w.imm_data = htonl(0xa1b2c3d4);
        ASSERT_EQ(post(p.a.qp, w), 0);

        expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, len);
        if (imm) {
            // The immediate comes with the receive it consumed; byte_len is the WRITE's length.
            expect_recv_ok(p.b, 200, IBV_WC_RECV_RDMA_WITH_IMM, len, p.a.qpn(), IBV_WC_WITH_IMM,
                           htonl(0xa1b2c3d4));
            EXPECT_EQ(rbuf.not_poison(0, 64), -1) << "WRITE_WITH_IMM wrote into the receive buffer";
        }
        expect_empty(p.b.rcq);
        EXPECT_EQ(dst.not_poison(0, off), -1) << "bytes before the target were written";
        EXPECT_EQ(dst.mismatch(3, off, len), -1) << "written bytes differ";
        EXPECT_EQ(dst.not_poison(off + len, kBuf - off - len), -1)
            << "bytes after the target were written";
        EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
        EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    }

    // A reads `len` bytes of pattern 5 from B's buffer at `off` into its own at 100.
    void read_and_check(uint32_t len, size_t off, ibv_mtu mtu) {
        Pair p = connect_pair({.mtu = mtu});
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Buffer& local = reg(A(), kBuf);
        Buffer& remote = reg(B(), kBuf);
        remote.fill(5, off, len);
        std::vector<ibv_sge> sg;
        if (len) sg.push_back(local.sge(100, len));
        ibv_send_wr w = rdma_wr(9, IBV_WR_RDMA_READ, sg, remote.addr(off), remote.rkey());
        ASSERT_EQ(post(p.a.qp, w), 0);
        expect_send_ok(p.a, 9, IBV_WC_RDMA_READ, len);
        EXPECT_EQ(local.not_poison(0, 100), -1);
        EXPECT_EQ(local.mismatch(5, 100, len), -1) << "read bytes differ";
        EXPECT_EQ(local.not_poison(100 + len, kBuf - 100 - len), -1);
        EXPECT_EQ(remote.mismatch(5, off, len), -1) << "the READ changed its source";
        expect_empty(p.b.rcq);
        expect_empty(p.b.scq);
        EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
        EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    }
};

TEST_F(RcRdma, WriteOnePacket) { write_and_check(700, 13, false, IBV_MTU_1024); }
TEST_F(RcRdma, WriteManyPackets) { write_and_check(20000, 1000, false, IBV_MTU_1024); }
TEST_F(RcRdma, WriteZeroLength) { write_and_check(0, 0, false, IBV_MTU_1024); }
TEST_F(RcRdma, WriteWithImmOnePacket) { write_and_check(64, 8, true, IBV_MTU_1024); }
TEST_F(RcRdma, WriteWithImmManyPackets) { write_and_check(5000, 1, true, IBV_MTU_512); }
TEST_F(RcRdma, WriteWithImmZeroLength) { write_and_check(0, 0, true, IBV_MTU_1024); }
TEST_F(RcRdma, ReadOnePacket) { read_and_check(1024, 0, IBV_MTU_1024); }
// Several MTUs with a partial last packet, then many packets at the smallest MTU.
TEST_F(RcRdma, ReadSeveralMtus) { read_and_check(4 * 4096 + 123, 77, IBV_MTU_4096); }
TEST_F(RcRdma, ReadManyPackets) { read_and_check(30000, 5, IBV_MTU_256); }
TEST_F(RcRdma, ReadZeroLength) { read_and_check(0, 0, IBV_MTU_1024); }

}  // namespace
}  // namespace uroce::transport_test
