// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_create_cq_ex (ibv_create_cq_ex(3)) between two devices: the ibv_start_poll /
// ibv_next_poll / ibv_end_poll iterator and the ibv_wc_read_* accessors give what
// ibv_poll_cq gives for the same completions; the CQ works with completion channels, as the
// CQ of QPs and SRQs and through ibv_poll_cq; completion timestamps follow the device clock;
// the attributes uroce lacks fail with rdma-core's errno (docs/verbs-support.md).
#include <arpa/inet.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr uint64_t kAllWcFlags = uint64_t(IBV_WC_STANDARD_FLAGS) |
                                 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

// The CQ ibv_cq_ex_to_cq made from `cq` (a cast in verbs.h), as the fixture keeps it.
ibv_cq_ex* ex(ibv_cq* cq) { return reinterpret_cast<ibv_cq_ex*>(cq); }

// The current completion of an iterator, read with every accessor.
ibv_wc read_wc(ibv_cq_ex* x) {
    ibv_wc wc{};
    wc.wr_id = x->wr_id;
    wc.status = x->status;
    wc.opcode = ibv_wc_read_opcode(x);
    wc.vendor_err = ibv_wc_read_vendor_err(x);
    wc.byte_len = ibv_wc_read_byte_len(x);
    wc.imm_data = ibv_wc_read_imm_data(x);
    wc.qp_num = ibv_wc_read_qp_num(x);
    wc.src_qp = ibv_wc_read_src_qp(x);
    wc.wc_flags = ibv_wc_read_wc_flags(x);
    wc.slid = uint16_t(ibv_wc_read_slid(x));
    wc.sl = ibv_wc_read_sl(x);
    wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(x);
    return wc;
}

// Every completion of `x` within `timeout` until `n` were read, through the iterator.
std::vector<ibv_wc> drain(ibv_cq_ex* x, size_t n, double timeout = kWaitSeconds) {
    std::vector<ibv_wc> out;
    timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (out.size() < n) {
        ibv_poll_cq_attr attr{};
        int e = ibv_start_poll(x, &attr);
        if (e == 0) {
            do out.push_back(read_wc(x));
            while (out.size() < n && (e = ibv_next_poll(x)) == 0);
            EXPECT_TRUE(e == 0 || e == ENOENT) << "ibv_next_poll: " << e;
            ibv_end_poll(x);
            continue;
        }
        EXPECT_EQ(e, ENOENT) << "ibv_start_poll";
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > timeout) break;
        usleep(50);
    }
    EXPECT_EQ(out.size(), n) << "completions that came through ibv_start_poll";
    return out;
}

class CqEx : public TransportTest {
protected:
    std::vector<ibv_wc> poll_classic(ibv_cq* cq, size_t n) {
        std::vector<ibv_wc> out;
        for (size_t i = 0; i < n; ++i) out.push_back(poll1(cq));
        return out;
    }

    // Same completions, two CQs: every field equal, except each QP's own number, and the
    // source QP, which is each QP's own peer (RC) or sender (UD).
    static void expect_same(const std::vector<ibv_wc>& got, const std::vector<ibv_wc>& want,
                            uint32_t got_qpn, uint32_t want_qpn, uint32_t got_src,
                            uint32_t want_src) {
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
            const ibv_wc &g = got[i], &w = want[i];
            SCOPED_TRACE("completion " + std::to_string(i) + ": cq_ex " + wc_str(g) +
                         " / ibv_poll_cq " + wc_str(w));
            EXPECT_EQ(g.wr_id, w.wr_id);
            EXPECT_EQ(g.status, w.status);
            EXPECT_EQ(g.vendor_err, w.vendor_err);
            EXPECT_EQ(g.qp_num, got_qpn);
            EXPECT_EQ(w.qp_num, want_qpn);
            if (w.status != IBV_WC_SUCCESS) continue;  // the rest is undefined (ibv_poll_cq(3))
            EXPECT_EQ(g.opcode, w.opcode);
            EXPECT_EQ(g.byte_len, w.byte_len);
            EXPECT_EQ(g.wc_flags, w.wc_flags);
            if (w.wc_flags & IBV_WC_WITH_IMM) {
                EXPECT_EQ(g.imm_data, w.imm_data);
            }
            if (w.opcode & IBV_WC_RECV) {
                EXPECT_EQ(g.src_qp == got_src, w.src_qp == want_src);
                EXPECT_EQ(g.slid, w.slid);
                EXPECT_EQ(g.sl, w.sl);
                EXPECT_EQ(g.dlid_path_bits, w.dlid_path_bits);
            }
        }
    }

    // A runs the same work on two RC pairs, one whose CQs (on both sides) come from
    // ibv_create_cq_ex, one with ibv_create_cq: SENDs, SEND_WITH_IMM, WRITE_WITH_IMM, a
    // READ, atomics, then a WRITE with a bad rkey (REM_ACCESS_ERR); then B's QP is moved to
    // the error state, which flushes its receives. Returns each pair's completions, in
    // order, send side and receive side.
    void run_rc_mix(bool cq_ex, std::vector<ibv_wc>* send, std::vector<ibv_wc>* recv,
                    uint32_t* a_qpn, uint32_t* b_qpn) {
        QpOpts o;
        o.cq_ex = cq_ex;
        o.cq_wc_flags = kAllWcFlags;
        Pair p = connect_pair(o);
        ASSERT_TRUE(p.a.qp && p.b.qp);
        *a_qpn = p.a.qpn();
        *b_qpn = p.b.qpn();
        Buffer& src = reg(A(), 4096);
        Buffer& local = reg(A(), 64);
        Buffer& remote = reg(B(), 4096);
        src.fill(21);
        post_recvs(p.b, 500, 6, 512);
        std::vector<ibv_sge> s1{src.sge(0, 300)}, s2{src.sge(300, 0)}, s3{src.sge(1000, 200)};
        std::vector<ibv_sge> rd{local.sge(0, 32)}, at{local.sge(32, 8)};
        ibv_send_wr w[] = {
            wr(1, IBV_WR_SEND, s1),
            wr(2, IBV_WR_SEND_WITH_IMM, s2),
            rdma_wr(3, IBV_WR_RDMA_WRITE_WITH_IMM, s3, remote.addr(8), remote.rkey()),
            rdma_wr(4, IBV_WR_RDMA_READ, rd, remote.addr(64), remote.rkey()),
            atomic_wr(5, IBV_WR_ATOMIC_FETCH_AND_ADD, at, remote.addr(1024), remote.rkey(), 3),
            rdma_wr(6, IBV_WR_RDMA_WRITE, s1, remote.addr(0), remote.rkey() ^ 0x5a5a00),
        };
        w[1].imm_data = htonl(0x10203040);
        w[2].imm_data = htonl(0x50607080);
        for (ibv_send_wr& x : w) ASSERT_EQ(post(p.a.qp, x), 0);
        // Sends 1..5, then the bad WRITE's error.
        *send = cq_ex ? drain(ex(p.a.scq), 6) : poll_classic(p.a.scq, 6);
        ibv_qp_attr err{};
        err.qp_state = IBV_QPS_ERR;
        ASSERT_EQ(ibv_modify_qp(p.b.qp, &err, IBV_QP_STATE), 0);
        // Three receives used, three flushed.
        *recv = cq_ex ? drain(ex(p.b.rcq), 6) : poll_classic(p.b.rcq, 6);
        expect_empty(p.a.scq);
        expect_empty(p.b.rcq);
    }
};

TEST_F(CqEx, RcFieldsEqualPollCq) {
    std::vector<ibv_wc> xs, xr, cs, cr;
    uint32_t xa, xb, ca, cb;
    run_rc_mix(true, &xs, &xr, &xa, &xb);
    run_rc_mix(false, &cs, &cr, &ca, &cb);
    expect_same(xs, cs, xa, ca, 0, 0);
    expect_same(xr, cr, xb, cb, xa, ca);
    ASSERT_EQ(xs.size(), 6u);
    EXPECT_EQ(xs[5].status, IBV_WC_REM_ACCESS_ERR);
    ASSERT_EQ(xr.size(), 6u);
    EXPECT_EQ(xr[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(xr[2].imm_data, htonl(0x50607080));
    EXPECT_EQ(xr[3].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(CqEx, UdFieldsEqualPollCq) {
    QpOpts ox{IBV_QPT_UD}, oc{IBV_QPT_UD};
    ox.cq_ex = true;
    ox.cq_wc_flags = kAllWcFlags;
    Endpoint a = make_ud(A(), oc);
    Endpoint bx = make_ud(B(), ox);
    Endpoint bc = make_ud(B(), oc);
    ASSERT_TRUE(a.qp && bx.qp && bc.qp);
    ibv_ah* ah = make_ah(A(), B());
    Buffer& src = reg(A(), 1024);
    src.fill(22);
    Buffer& rbuf = post_recvs(bx, 10, 2, 1024);
    post_recvs(bc, 10, 2, 1024);
    for (Endpoint* b : {&bx, &bc}) {
        std::vector<ibv_sge> sg{src.sge(0, 200)};
        ibv_send_wr w = wr(1, IBV_WR_SEND, sg);
        w.wr.ud = {ah, b->qpn(), oc.qkey};
        ASSERT_EQ(post(a.qp, w), 0);
        ibv_send_wr wi = wr(2, IBV_WR_SEND_WITH_IMM, sg);
        wi.wr.ud = {ah, b->qpn(), oc.qkey};
        wi.imm_data = htonl(99);
        ASSERT_EQ(post(a.qp, wi), 0);
    }
    std::vector<ibv_wc> got = drain(ex(bx.rcq), 2), want = poll_classic(bc.rcq, 2);
    expect_same(got, want, bx.qpn(), bc.qpn(), a.qpn(), a.qpn());
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].src_qp, a.qpn());
    EXPECT_EQ(got[0].byte_len, 240u) << "GRH + data";
    EXPECT_EQ(got[1].wc_flags, unsigned(IBV_WC_GRH | IBV_WC_WITH_IMM));
    EXPECT_EQ(rbuf.mismatch(22, 40, 200, 0), -1);
}

TEST_F(CqEx, IteratorConsumesWhatItRead) {
    QpOpts o;
    o.cq_ex = true;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    ibv_cq_ex* x = ex(p.b.rcq);
    ibv_poll_cq_attr attr{};
    EXPECT_EQ(ibv_start_poll(x, &attr), ENOENT) << "empty CQ";
    attr.comp_mask = 1;
    EXPECT_EQ(ibv_start_poll(x, &attr), EINVAL) << "as mlx5";
    attr.comp_mask = 0;

    Buffer& src = reg(A(), 64);
    post_recvs(p.b, 0, 6, 64);
    std::vector<ibv_sge> sg{src.sge(0, 8)};
    // Three SENDs, and their completions: those come with B's ACKs, which B sends after it
    // wrote its CQEs.
    auto send3 = [&](uint64_t first) {
        for (uint64_t i = first; i < first + 3; ++i) {
            ibv_send_wr w = wr(i, IBV_WR_SEND, sg);
            ASSERT_EQ(post(p.a.qp, w), 0);
        }
        for (uint64_t i = first; i < first + 3; ++i) expect_send_ok(p.a, i, IBV_WC_SEND, 8);
    };
    send3(0);

    ASSERT_EQ(ibv_start_poll(x, &attr), 0);
    EXPECT_EQ(x->wr_id, 0u);
    EXPECT_EQ(x->status, IBV_WC_SUCCESS);
    ASSERT_EQ(ibv_next_poll(x), 0);
    EXPECT_EQ(x->wr_id, 1u);
    ibv_end_poll(x);
    // ibv_end_poll gave back the two that were read, no more: ibv_poll_cq gets the third.
    ibv_wc wc[4];
    ASSERT_EQ(ibv_poll_cq(p.b.rcq, 4, wc), 1);
    EXPECT_EQ(wc[0].wr_id, 2u);
    EXPECT_EQ(ibv_start_poll(x, &attr), ENOENT);

    send3(3);
    ASSERT_EQ(ibv_start_poll(x, &attr), 0);
    EXPECT_EQ(x->wr_id, 3u);
    ASSERT_EQ(ibv_next_poll(x), 0);
    ASSERT_EQ(ibv_next_poll(x), 0);
    EXPECT_EQ(x->wr_id, 5u);
    EXPECT_EQ(ibv_next_poll(x), ENOENT);
    EXPECT_EQ(x->wr_id, 5u) << "after ENOENT the last completion stays current";
    ibv_end_poll(x);
    EXPECT_EQ(ibv_start_poll(x, &attr), ENOENT);
    EXPECT_EQ(ibv_poll_cq(p.b.rcq, 4, wc), 0);
}

TEST_F(CqEx, CompletionChannelEvents) {
    ibv_comp_channel* ch = make_channel(B());
    int tag = 0;
    ibv_cq_ex* x = make_cq_ex(B(), IBV_WC_STANDARD_FLAGS, 16, ch, 0, &tag);
    ASSERT_TRUE(x);
    ibv_cq* cq = ibv_cq_ex_to_cq(x);
    EXPECT_EQ(cq->channel, ch);
    EXPECT_EQ(cq->cq_context, &tag);
    EXPECT_GE(cq->cqe, 16);
    QpOpts o;
    Endpoint a = make_qp(A(), o, true);
    Endpoint b = make_qp_with_cqs(B(), o, cq, cq);
    ASSERT_TRUE(a.qp && b.qp);
    connect_qp(a, B(), b.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(b, A(), a.qpn(), o, o.psn_b, o.psn_a);
    Buffer& src = reg(A(), 64);
    Buffer& rbuf = reg(B(), 64);
    ASSERT_EQ(post_recv(b.qp, 7, {rbuf.sge(0, 64)}), 0);
    ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
    std::vector<ibv_sge> sg{src.sge(0, 16)};
    ibv_send_wr w = wr(1, IBV_WR_SEND, sg);
    ASSERT_EQ(post(a.qp, w), 0);
    pollfd pfd{ch->fd, POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, int(kWaitSeconds * 1000)), 1) << "no completion event";
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, cq);
    EXPECT_EQ(ev_ctx, &tag);
    ibv_ack_cq_events(ev_cq, 1);
    std::vector<ibv_wc> got = drain(x, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 7u);
    EXPECT_EQ(got[0].byte_len, 16u);
    EXPECT_EQ(got[0].qp_num, b.qpn());
    // Armed again with a completion already waiting: the arm is for the next one (as rxe and
    // the verbs specification), so the waiting one raises nothing; a new one does.
    ASSERT_EQ(post_recv(b.qp, 8, {rbuf.sge(0, 64)}), 0);
    ASSERT_EQ(post_recv(b.qp, 9, {rbuf.sge(0, 64)}), 0);
    ibv_send_wr w2 = wr(2, IBV_WR_SEND, sg);
    ASSERT_EQ(post(a.qp, w2), 0);
    expect_send_ok(a, 1, IBV_WC_SEND, 16);
    expect_send_ok(a, 2, IBV_WC_SEND, 16);
    ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
    EXPECT_EQ(poll(&pfd, 1, 100), 0) << "an event for a completion that came before the arm";
    ibv_send_wr w3 = wr(3, IBV_WR_SEND, sg);
    ASSERT_EQ(post(a.qp, w3), 0);
    expect_send_ok(a, 3, IBV_WC_SEND, 16);
    ASSERT_EQ(poll(&pfd, 1, int(kWaitSeconds * 1000)), 1) << "no event for a new completion";
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    ibv_ack_cq_events(ev_cq, 1);
    std::vector<ibv_wc> both = drain(x, 2);
    ASSERT_EQ(both.size(), 2u);
    EXPECT_EQ(both[0].wr_id, 8u);
    EXPECT_EQ(both[1].wr_id, 9u);
}

// Receives of an SRQ complete on the CQ of the QP that took them: here an extended one.
TEST_F(CqEx, SrqReceivesOnCqEx) {
    QpOpts o;
    o.cq_ex = true;
    o.srq_b = make_srq(B(), 16);
    ASSERT_TRUE(o.srq_b);
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& src = reg(A(), 256);
    src.fill(23);
    Buffer& rbuf = post_recvs(p.b, 60, 4, 256, o.srq_b);
    std::vector<ibv_sge> sg{src.sge(0, 100)};
    for (uint64_t i = 0; i < 4; ++i) {
        ibv_send_wr w = wr(i, IBV_WR_SEND, sg);
        ASSERT_EQ(post(p.a.qp, w), 0);
    }
    std::vector<ibv_wc> got = drain(ex(p.b.rcq), 4);
    ASSERT_EQ(got.size(), 4u);
    for (uint64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(got[i].wr_id, 60 + i);
        EXPECT_EQ(got[i].qp_num, p.b.qpn());
        EXPECT_EQ(got[i].byte_len, 100u);
        EXPECT_EQ(rbuf.mismatch(23, i * 256, 100, 0), -1);
    }
    std::vector<ibv_wc> sent = drain(ex(p.a.scq), 4);
    ASSERT_EQ(sent.size(), 4u);
    EXPECT_EQ(sent[3].opcode, IBV_WC_SEND);
}

// Completion timestamps are the device clock (ibv_query_rt_values_ex), in nanoseconds.
TEST_F(CqEx, Timestamps) {
    ibv_device_attr_ex da{};
    ASSERT_EQ(ibv_query_device_ex(B().ctx, nullptr, &da), 0);
    EXPECT_EQ(da.hca_core_clock, 1000000u) << "kHz: one tick per nanosecond";
    EXPECT_EQ(da.completion_timestamp_mask, ~uint64_t(0));
    QpOpts o;
    o.cq_ex = true;
    o.cq_wc_flags =
        IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    ibv_cq_ex* x = ex(p.b.rcq);
    ASSERT_TRUE(x->read_completion_ts && x->read_completion_wallclock_ns);
    EXPECT_EQ(x->read_byte_len, nullptr) << "not asked for in wc_flags";
    Buffer& src = reg(A(), 64);
    post_recvs(p.b, 1, 2, 64);
    std::vector<ibv_sge> sg{src.sge(0, 8)};

    auto raw = [&] {
        ibv_values_ex v{};
        v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
        EXPECT_EQ(ibv_query_rt_values_ex(B().ctx, &v), 0);
        EXPECT_EQ(v.comp_mask, uint32_t(IBV_VALUES_MASK_RAW_CLOCK));
        return uint64_t(v.raw_clock.tv_sec) * 1000000000u + uint64_t(v.raw_clock.tv_nsec);
    };
    auto wall = [] {
        timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
    };
    uint64_t t0 = raw(), w0 = wall();
    ibv_send_wr w1 = wr(1, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p.a.qp, w1), 0);
    expect_send_ok(p.a, 1, IBV_WC_SEND, 8);
    usleep(20000);
    ibv_send_wr w2 = wr(2, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p.a.qp, w2), 0);
    expect_send_ok(p.a, 2, IBV_WC_SEND, 8);
    uint64_t t1 = raw(), w1t = wall();

    uint64_t ts[2] = {}, wc_wall[2] = {};
    ibv_poll_cq_attr attr{};
    ASSERT_EQ(ibv_start_poll(x, &attr), 0);
    ts[0] = ibv_wc_read_completion_ts(x);
    wc_wall[0] = ibv_wc_read_completion_wallclock_ns(x);
    ASSERT_EQ(ibv_next_poll(x), 0);
    ts[1] = ibv_wc_read_completion_ts(x);
    wc_wall[1] = ibv_wc_read_completion_wallclock_ns(x);
    ibv_end_poll(x);
    EXPECT_LE(t0, ts[0]);
    EXPECT_LE(ts[1], t1);
    EXPECT_GE(ts[1] - ts[0], 20000000u) << "the second came 20 ms after the first";
    EXPECT_LT(ts[1] - ts[0], t1 - t0);
    // Converted to CLOCK_REALTIME: within the wall-clock window of the test (1 ms of slack
    // for the conversion's two clock reads).
    EXPECT_LE(w0, wc_wall[0] + 1000000);
    EXPECT_LE(wc_wall[1], w1t + 1000000);
    EXPECT_GE(wc_wall[1] - wc_wall[0], 19000000u);

    ibv_values_ex bad{};
    bad.comp_mask = IBV_VALUES_MASK_RESERVED;
    EXPECT_EQ(ibv_query_rt_values_ex(B().ctx, &bad), EINVAL) << "as mlx5";
}

TEST_F(CqEx, CreateAttributes) {
    struct Case {
        const char* what;
        uint64_t wc_flags;
        uint32_t comp_mask, flags, cqe, comp_vector;
        int err;
    } cases[] = {
        {"CVLAN", IBV_WC_EX_WITH_CVLAN, 0, 0, 8, 0, EOPNOTSUPP},
        {"FLOW_TAG", IBV_WC_EX_WITH_FLOW_TAG, 0, 0, 8, 0, EOPNOTSUPP},
        {"TM_INFO", IBV_WC_EX_WITH_TM_INFO, 0, 0, 8, 0, EOPNOTSUPP},
        {"unknown wc_flags bit", uint64_t(1) << 20, 0, 0, 8, 0, EOPNOTSUPP},
        {"parent domain", 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, 8, 0, EINVAL},
        {"unknown comp_mask bit", 0, 1u << 5, 0, 8, 0, EINVAL},
        // Not implemented, as rxe says (rdma-core's test suite takes EOPNOTSUPP as "unsupported").
        {"IGNORE_OVERRUN", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, 8, 0,
         EOPNOTSUPP},
        {"unknown flags bit", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 7, 8, 0, EINVAL},
        {"no entries", 0, 0, 0, 0, 0, EINVAL},
        {"above max_cqe", 0, 0, 0, 1u << 20, 0, EINVAL},
        {"no such completion vector", 0, 0, 0, 8, 1, EINVAL},
    };
    for (const Case& c : cases) {
        ibv_cq_init_attr_ex a{};
        a.cqe = c.cqe;
        a.wc_flags = c.wc_flags;
        a.comp_mask = c.comp_mask;
        a.flags = c.flags;
        a.comp_vector = c.comp_vector;
        a.parent_domain = A().pd;
        errno = 0;
        ibv_cq_ex* x = ibv_create_cq_ex(A().ctx, &a);
        EXPECT_EQ(x, nullptr) << c.what;
        EXPECT_EQ(errno, c.err) << c.what;
        if (x) ibv_destroy_cq(ibv_cq_ex_to_cq(x));
    }
    // As rxe and mlx5, an accessor exists only for what wc_flags asked for.
    ibv_cq_ex* x = make_cq_ex(A(), 0);
    ASSERT_TRUE(x);
    EXPECT_TRUE(x->start_poll && x->next_poll && x->end_poll);
    EXPECT_TRUE(x->read_opcode && x->read_vendor_err && x->read_wc_flags);
    EXPECT_FALSE(x->read_byte_len || x->read_imm_data || x->read_qp_num || x->read_src_qp ||
                 x->read_slid || x->read_sl || x->read_dlid_path_bits || x->read_completion_ts ||
                 x->read_completion_wallclock_ns);
    EXPECT_FALSE(x->read_cvlan || x->read_flow_tag || x->read_tm_info);
}

// IBV_CREATE_CQ_ATTR_SINGLE_THREADED is taken, and such a CQ works like any other.
TEST_F(CqEx, SingleThreaded) {
    ibv_cq_ex* x =
        make_cq_ex(B(), IBV_WC_STANDARD_FLAGS, 64, nullptr, IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
    ASSERT_TRUE(x);
    QpOpts o;
    Endpoint a = make_qp(A(), o, true);
    Endpoint b = make_qp_with_cqs(B(), o, ibv_cq_ex_to_cq(x), ibv_cq_ex_to_cq(x));
    ASSERT_TRUE(a.qp && b.qp);
    connect_qp(a, B(), b.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(b, A(), a.qpn(), o, o.psn_b, o.psn_a);
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), 64);
    src.fill(24);
    std::vector<ibv_sge> sg{dst.sge(0, 32)};
    // B reads from A: the READ's completion lands on the single-threaded CQ.
    ibv_send_wr w = rdma_wr(5, IBV_WR_RDMA_READ, sg, src.addr(0), src.rkey());
    ASSERT_EQ(post(b.qp, w), 0);
    std::vector<ibv_wc> got = drain(x, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(got[0].byte_len, 32u);
    EXPECT_EQ(dst.mismatch(24, 0, 32, 0), -1);
}

}  // namespace
}  // namespace uroce::transport_test
