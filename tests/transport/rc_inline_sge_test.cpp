// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Inline data and scatter/gather lists on RC. Inline data is copied at ibv_post_send, needs
// no memory registration and may be as long as the granted max_inline_data; longer is an
// error at post time (EINVAL, bad_wr names it, nothing is sent). Gather lists of up to
// max_send_sge entries and scatter lists of up to max_recv_sge entries are taken in order;
// one entry more is EINVAL at post time.
#include <arpa/inet.h>

#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class RcInlineSge : public TransportTest {
protected:
    // The capabilities the QP was granted, as ibv_query_qp reports them.
    static ibv_qp_cap granted(ibv_qp* qp) {
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), 0);
        return init.cap;
    }
};

// SEND and RDMA WRITE of exactly max_inline_data bytes from unregistered memory that is
// overwritten right after the post: the peer gets what was there at post time.
TEST_F(RcInlineSge, InlineUpToMaxInlineData) {
    QpOpts o;
    o.max_inline_data = 200;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    uint32_t cap = granted(p.a.qp).max_inline_data;
    ASSERT_GE(cap, 200u) << "granted less inline data than asked for";
    std::vector<uint8_t> plain(cap);  // not registered
    for (uint32_t i = 0; i < cap; ++i) plain[i] = pattern_byte(11, i);
    Buffer& rbuf = reg(B(), cap + 100);
    Buffer& target = reg(B(), cap + 100);
    ASSERT_EQ(post_recv(p.b.qp, 1, {rbuf.sge(0, cap + 100)}), 0);

    std::vector<ibv_sge> sg{{reinterpret_cast<uintptr_t>(plain.data()), cap, 0}};
    ibv_send_wr send = wr(10, IBV_WR_SEND, sg, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    ASSERT_EQ(post(p.a.qp, send), 0);
    ibv_send_wr write = rdma_wr(11, IBV_WR_RDMA_WRITE, sg, target.addr(50), target.rkey(),
                                IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    ASSERT_EQ(post(p.a.qp, write), 0);
    std::memset(plain.data(), 0, cap);  // the WRs hold their own copies by now

    expect_send_ok(p.a, 10, IBV_WC_SEND, cap);
    expect_send_ok(p.a, 11, IBV_WC_RDMA_WRITE, cap);
    expect_recv_ok(p.b, 1, IBV_WC_RECV, cap, p.a.qpn());
    EXPECT_EQ(rbuf.mismatch(11, 0, cap), -1);
    EXPECT_EQ(rbuf.not_poison(cap, 100), -1);
    EXPECT_EQ(target.not_poison(0, 50), -1);
    EXPECT_EQ(target.mismatch(11, 50, cap), -1);
    EXPECT_EQ(target.not_poison(50 + cap, 50), -1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
}

// One byte more than max_inline_data: EINVAL, *bad_wr is that WR, the WRs before it in the
// list are posted and the QP goes on working.
TEST_F(RcInlineSge, InlineAboveMaxIsPostError) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    uint32_t cap = granted(p.a.qp).max_inline_data;
    std::vector<uint8_t> plain(cap + 1, 0x42);
    Buffer& rbuf = reg(B(), cap + 1);
    ASSERT_EQ(post_recv(p.b.qp, 1, {rbuf.sge(0, cap + 1)}), 0);
    std::vector<ibv_sge> ok{{reinterpret_cast<uintptr_t>(plain.data()), 5, 0}};
    std::vector<ibv_sge> big{{reinterpret_cast<uintptr_t>(plain.data()), cap + 1, 0}};
    ibv_send_wr first = wr(1, IBV_WR_SEND, ok, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    ibv_send_wr second = wr(2, IBV_WR_SEND, big, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    first.next = &second;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(post(p.a.qp, first, &bad), EINVAL);
    EXPECT_EQ(bad, &second);
    expect_send_ok(p.a, 1, IBV_WC_SEND, 5);
    expect_recv_ok(p.b, 1, IBV_WC_RECV, 5, p.a.qpn());
    expect_empty(p.a.scq);
    EXPECT_EQ(rbuf.not_poison(5, cap - 4), -1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// A SEND gathered from max_send_sge pieces of two MRs lands, over several packets, in a
// receive scattered over max_recv_sge pieces of odd sizes, in order.
TEST_F(RcInlineSge, GatherAndScatterAcrossPackets) {
    QpOpts o;
    o.max_send_sge = o.max_recv_sge = 4;
    o.mtu = IBV_MTU_256;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    ASSERT_EQ(granted(p.a.qp).max_send_sge, 4u);
    ASSERT_EQ(granted(p.b.qp).max_recv_sge, 4u);
    Buffer& s1 = reg(A(), 4096);
    Buffer& s2 = reg(A(), 4096);
    // The message: s1[10..310) s2[0..1) s1[1000..2700) s2[4000..4096): 2097 bytes.
    std::vector<std::pair<Buffer*, std::pair<size_t, uint32_t>>> pieces{
        {&s1, {10, 300}}, {&s2, {0, 1}}, {&s1, {1000, 1700}}, {&s2, {4000, 96}}};
    std::vector<ibv_sge> sg;
    size_t at = 0;
    for (auto& [b, r] : pieces) {
        // The pieces together hold one continuous pattern-21 stream.
        for (uint32_t i = 0; i < r.second; ++i) b->data()[r.first + i] = pattern_byte(21, at + i);
        sg.push_back(b->sge(r.first, r.second));
        at += r.second;
    }
    const uint32_t total = uint32_t(at);
    Buffer& d = reg(B(), 8192);
    // Receive pieces: d[0..7) d[100..101) d[1000..2000) d[3000..6000): 4008 bytes.
    ASSERT_EQ(
        post_recv(p.b.qp, 3, {d.sge(0, 7), d.sge(100, 1), d.sge(1000, 1000), d.sge(3000, 3000)}),
        0);
    ibv_send_wr w = wr(4, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 4, IBV_WC_SEND, total);
    expect_recv_ok(p.b, 3, IBV_WC_RECV, total, p.a.qpn());
    EXPECT_EQ(d.mismatch(21, 0, 7, 0), -1);
    EXPECT_EQ(d.not_poison(7, 93), -1);
    EXPECT_EQ(d.mismatch(21, 100, 1, 7), -1);
    EXPECT_EQ(d.not_poison(101, 899), -1);
    EXPECT_EQ(d.mismatch(21, 1000, 1000, 8), -1);
    EXPECT_EQ(d.not_poison(2000, 1000), -1);
    EXPECT_EQ(d.mismatch(21, 3000, total - 1008, 1008), -1);
    EXPECT_EQ(d.not_poison(3000 + total - 1008, 8192 - 3000 - (total - 1008)), -1);
}

// RDMA WRITE gathers and RDMA READ scatters the same way.
TEST_F(RcInlineSge, WriteGatherReadScatter) {
    Pair p = connect_pair({.mtu = IBV_MTU_512});
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& l = reg(A(), 4096);
    Buffer& r = reg(B(), 4096);
    for (uint32_t i = 0; i < 1500; ++i) l.data()[i < 700 ? i : i + 1000] = pattern_byte(31, i);
    std::vector<ibv_sge> g{l.sge(0, 700), l.sge(1700, 800)};
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, g, r.addr(300), r.rkey());
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, 1500);
    EXPECT_EQ(r.mismatch(31, 300, 1500), -1);
    EXPECT_EQ(r.not_poison(0, 300), -1);
    EXPECT_EQ(r.not_poison(1800, 4096 - 1800), -1);
    // Back into three pieces of a poisoned local buffer.
    l.poison();
    std::vector<ibv_sge> s{l.sge(4000, 96), l.sge(0, 4), l.sge(2000, 1400)};
    ibv_send_wr rd = rdma_wr(2, IBV_WR_RDMA_READ, s, r.addr(300), r.rkey());
    ASSERT_EQ(post(p.a.qp, rd), 0);
    expect_send_ok(p.a, 2, IBV_WC_RDMA_READ, 1500);
    EXPECT_EQ(l.mismatch(31, 4000, 96, 0), -1);
    EXPECT_EQ(l.mismatch(31, 0, 4, 96), -1);
    EXPECT_EQ(l.mismatch(31, 2000, 1400, 100), -1);
    EXPECT_EQ(l.not_poison(4, 1996), -1);
    EXPECT_EQ(l.not_poison(3400, 600), -1);
}

// One SGE more than the QP was granted, on either queue: EINVAL with bad_wr at post time.
TEST_F(RcInlineSge, TooManySgesArePostErrors) {
    QpOpts o;
    o.max_send_sge = o.max_recv_sge = 2;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    ibv_qp_cap ca = granted(p.a.qp);
    Buffer& b = reg(A(), 4096);
    std::vector<ibv_sge> sg;
    for (uint32_t i = 0; i <= ca.max_send_sge; ++i) sg.push_back(b.sge(i * 8, 8));
    ibv_send_wr w = wr(1, IBV_WR_SEND, sg);
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(post(p.a.qp, w, &bad), EINVAL);
    EXPECT_EQ(bad, &w);
    std::vector<ibv_sge> rs;
    for (uint32_t i = 0; i <= ca.max_recv_sge; ++i) rs.push_back(b.sge(i * 8, 8));
    ibv_recv_wr r{};
    r.wr_id = 2;
    r.sg_list = rs.data();
    r.num_sge = int(rs.size());
    ibv_recv_wr* rbad = nullptr;
    EXPECT_EQ(ibv_post_recv(p.a.qp, &r, &rbad), EINVAL);
    EXPECT_EQ(rbad, &r);
    expect_empty(p.a.scq);
    expect_empty(p.a.rcq);
    expect_empty(p.b.rcq);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
}

}  // namespace
}  // namespace uroce::transport_test
