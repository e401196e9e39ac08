// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Ordering on RC: many RDMA READs outstanding against small max_rd_atomic /
// max_dest_rd_atomic limits all complete, in order, with their data; IBV_SEND_FENCE holds a
// WR back until the READs and ATOMICs before it have completed (ibv_post_send(3)), so a SEND
// of what a READ brought in carries the read data.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class RcOrder : public TransportTest {};

// 48 READs of 3000 bytes (3 packets each) posted at once with max_rd_atomic 2: all
// complete in posting order, each with its own bytes.
TEST_F(RcOrder, ManyReadsBeyondMaxRdAtomic) {
    QpOpts o;
    o.max_rd_atomic = o.max_dest_rd_atomic = 2;
    o.max_send_wr = 64;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    constexpr int kReads = 48;
    constexpr uint32_t kLen = 3000;
    Buffer& remote = reg(B(), kReads * kLen);
    Buffer& local = reg(A(), kReads * kLen);
    remote.fill(91);
    std::vector<std::vector<ibv_sge>> sgs;
    for (int i = 0; i < kReads; ++i) sgs.push_back({local.sge(size_t(i) * kLen, kLen)});
    for (int i = 0; i < kReads; ++i) {
        // Read i fetches remote block kReads-1-i: a mix-up of responses shows.
        ibv_send_wr w = rdma_wr(i, IBV_WR_RDMA_READ, sgs[i],
                                remote.addr(size_t(kReads - 1 - i) * kLen), remote.rkey());
        ASSERT_EQ(post(p.a.qp, w), 0);
    }
    for (int i = 0; i < kReads; ++i) {
        expect_send_ok(p.a, i, IBV_WC_RDMA_READ, kLen);
        EXPECT_EQ(local.mismatch(91, size_t(i) * kLen, kLen, size_t(kReads - 1 - i) * kLen), -1)
            << "READ " << i;
    }
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// ibv_modify_qp(3): max_rd_atomic is the number of RDMA READs and ATOMICs in flight. With
// nothing answering, 6 READs posted against max_rd_atomic 2 put exactly 2 READ requests on
// the wire before the retransmission timeout; moved to ERR, the QP flushes all 6, nothing
// written. A max_rd_atomic above the device's max_qp_init_rd_atom is EINVAL, as on mlx5.
TEST_F(RcOrder, MaxRdAtomicLimitsRequestsInFlight) {
    QpOpts o;
    o.max_rd_atomic = 2;
    o.timeout = 20;  // 4.3 s: no retransmission while the test counts, also under load
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& remote = reg(B(), 512);
    Buffer& local = reg(A(), 6 * 512);
    destroy_qp(p.b);
    std::vector<std::vector<ibv_sge>> sgs;
    for (int i = 0; i < 6; ++i) sgs.push_back({local.sge(size_t(i) * 512, 512)});
    for (int i = 0; i < 6; ++i) {
        ibv_send_wr w = rdma_wr(i, IBV_WR_RDMA_READ, sgs[i], remote.addr(0), remote.rkey());
        ASSERT_EQ(post(p.a.qp, w), 0);
    }
    char prefix[80];
    std::snprintf(prefix, sizeof prefix, "qp_counters 0x%x tx RC_RDMA_READ_REQUEST ", p.a.qpn());
    auto sent = [&] { return counter(cli(std::string("counters ") + A().name), prefix, "pkts"); };
    for (int i = 0; i < 100 && sent() < 2; ++i) usleep(10000);
    usleep(50000);  // time for more, were the limit not kept
    EXPECT_EQ(sent(), 2);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE), 0);
    for (int i = 0; i < 6; ++i) expect_error(p.a.scq, p.a.qpn(), i, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(local.not_poison(0, 6 * 512), -1);

    ibv_device_attr da{};
    ASSERT_EQ(ibv_query_device(A().ctx, &da), 0);
    ASSERT_LT(da.max_qp_init_rd_atom, 255);
    Endpoint e = make_qp(A(), o, true);
    ASSERT_TRUE(e.qp);
    ASSERT_NO_FATAL_FAILURE(connect_qp(e, B(), 0x123, o, o.psn_a, o.psn_b, false));
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = uint8_t(da.max_qp_init_rd_atom + 1);
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
               IBV_QP_MAX_QP_RD_ATOMIC;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, mask), EINVAL);
    EXPECT_EQ(qp_state(e.qp), IBV_QPS_RTR);
    a.max_rd_atomic = uint8_t(da.max_qp_init_rd_atom);
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, mask), 0);
    EXPECT_EQ(qp_state(e.qp), IBV_QPS_RTS);
}

// READ into L, then a fenced SEND from L: the SEND carries what the READ brought. Likewise
// a FETCH_AND_ADD's result sent on by a fenced WRITE.
TEST_F(RcOrder, FenceWaitsForReadsAndAtomics) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& remote = reg(B(), 16384);
    Buffer& rbuf = reg(B(), 16384);
    Buffer& l = reg(A(), 16384);
    remote.fill(92);
    ASSERT_EQ(post_recv(p.b.qp, 1, {rbuf.sge(0, 16384)}), 0);
    std::vector<ibv_sge> rd{l.sge(0, 12000)};
    ibv_send_wr read = rdma_wr(1, IBV_WR_RDMA_READ, rd, remote.addr(0), remote.rkey());
    std::vector<ibv_sge> sd{l.sge(0, 12000)};
    ibv_send_wr send = wr(2, IBV_WR_SEND, sd, IBV_SEND_SIGNALED | IBV_SEND_FENCE);
    read.next = &send;
    ASSERT_EQ(post(p.a.qp, read), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_READ, 12000);
    expect_send_ok(p.a, 2, IBV_WC_SEND, 12000);
    expect_recv_ok(p.b, 1, IBV_WC_RECV, 12000, p.a.qpn());
    EXPECT_EQ(rbuf.mismatch(92, 0, 12000), -1) << "the fenced SEND left before the READ's data";

    uint64_t v = 41;
    std::memcpy(remote.data() + 16000, &v, 8);
    std::vector<ibv_sge> at{l.sge(12000, 8)};
    ibv_send_wr fadd =
        atomic_wr(3, IBV_WR_ATOMIC_FETCH_AND_ADD, at, remote.addr(16000), remote.rkey(), 1);
    ibv_send_wr write = rdma_wr(4, IBV_WR_RDMA_WRITE, at, remote.addr(16008), remote.rkey(),
                                IBV_SEND_SIGNALED | IBV_SEND_FENCE);
    fadd.next = &write;
    ASSERT_EQ(post(p.a.qp, fadd), 0);
    expect_send_ok(p.a, 3, IBV_WC_FETCH_ADD, 8);
    expect_send_ok(p.a, 4, IBV_WC_RDMA_WRITE, 8);
    uint64_t fetched = 0, written = 0;
    std::memcpy(&fetched, l.data() + 12000, 8);
    std::memcpy(&written, remote.data() + 16008, 8);
    EXPECT_EQ(fetched, 41u);
    EXPECT_EQ(written, 41u) << "the fenced WRITE left before the atomic's result";
}

}  // namespace
}  // namespace uroce::transport_test
