// Ordering on RC: many RDMA READs outstanding against small max_rd_atomic /
// max_dest_rd_atomic limits all complete, in order, with their data; IBV_SEND_FENCE holds a
// WR back until the READs and ATOMICs before it have completed (ibv_post_send(3)), so a SEND
// of what a READ brought in carries the read data.
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
