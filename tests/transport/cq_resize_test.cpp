// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_resize_cq between two devices: growing and shrinking keep the completions the CQ
// holds, in order; a size below what it holds, 0 or above max_cqe is EINVAL and changes
// nothing; cq->cqe is the new size (at least the one asked for); CQs from ibv_create_cq_ex
// keep their ibv_start_poll interface, completion channels and ibv_req_notify_cq keep
// working; and resizing while completions stream in loses and duplicates none
// (docs/verbs-support.md).
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr uint32_t kMsg = 64;

class CqResize : public TransportTest {
protected:
    // The receive completions first..first+n-1, in order, and then none.
    void expect_recvs(const Pair& p, uint64_t first, uint32_t n) {
        for (uint32_t i = 0; i < n; ++i)
            expect_recv_ok(p.b, first + i, IBV_WC_RECV, kMsg, p.a.qpn());
        expect_empty(p.b.rcq);
    }

    // A connected pair (o's CQ options), A's source and B's destination buffers of 64
    // messages, pattern 21 in the source; B's receive CQ holds `held` receive completions,
    // wr_ids 1..held.
    void start(uint32_t held, QpOpts o = {}) {
        o.max_recv_wr = 64;
        p_ = connect_pair(o);
        ASSERT_TRUE(p_.a.qp && p_.b.qp);
        src_ = &reg(A(), 64 * kMsg);
        dst_ = &reg(B(), 64 * kMsg);
        src_->fill(21);
        if (held) fill(1, held);
    }

    // A sends `n` signaled SENDs of kMsg bytes into receives B posted (wr_ids first.. on
    // both sides) and polls its own completions: once it has them all, B's receive CQ holds
    // every receive completion (the device writes it before the ACK) and nobody polled it.
    void fill(uint64_t first, uint32_t n) {
        for (uint32_t i = 0; i < n; ++i)
            ASSERT_EQ(post_recv(p_.b.qp, first + i, {dst_->sge(i * kMsg, kMsg)}), 0);
        for (uint32_t i = 0; i < n; ++i) {
            std::vector<ibv_sge> sg{src_->sge(i * kMsg, kMsg)};
            ibv_send_wr w = wr(first + i, IBV_WR_SEND, sg);
            ASSERT_EQ(post(p_.a.qp, w), 0);
        }
        for (uint32_t i = 0; i < n; ++i) expect_send_ok(p_.a, first + i, IBV_WC_SEND, kMsg);
    }

    Pair p_;
    Buffer* src_ = nullptr;
    Buffer* dst_ = nullptr;

    int max_cqe() {
        ibv_device_attr attr{};
        EXPECT_EQ(ibv_query_device(B().ctx, &attr), 0);
        return attr.max_cqe;
    }
};

TEST_F(CqResize, GrowKeepsHeldCompletionsInOrder) {
    ASSERT_NO_FATAL_FAILURE(start(40));
    ASSERT_EQ(ibv_resize_cq(p_.b.rcq, 1000), 0);
    EXPECT_GE(p_.b.rcq->cqe, 1000);
    expect_recvs(p_, 1, 40);
    EXPECT_EQ(dst_->mismatch(21, 0, 40 * kMsg), -1);
    // The CQ goes on: more than the old size (256) fits now without an overrun.
    for (int round = 0; round < 5; ++round) {
        ASSERT_NO_FATAL_FAILURE(fill(100 + round * 60, 60));
    }
    expect_recvs(p_, 100, 300);
    EXPECT_EQ(qp_state(p_.b.qp), IBV_QPS_RTS);
}

TEST_F(CqResize, ShrinkKeepsHeldCompletionsInOrder) {
    ASSERT_NO_FATAL_FAILURE(start(20));
    ASSERT_GE(p_.b.rcq->cqe, 256);
    ASSERT_EQ(ibv_resize_cq(p_.b.rcq, 20), 0);  // exactly what it holds
    EXPECT_GE(p_.b.rcq->cqe, 20);
    EXPECT_LT(p_.b.rcq->cqe, 256);
    expect_recvs(p_, 1, 20);
    // The smallest CQ, then a round of traffic through it.
    ASSERT_EQ(ibv_resize_cq(p_.b.rcq, 1), 0);
    EXPECT_GE(p_.b.rcq->cqe, 1);
    ASSERT_NO_FATAL_FAILURE(fill(30, 1));
    expect_recvs(p_, 30, 1);
}

TEST_F(CqResize, BadSizesAreEinvalAndChangeNothing) {
    ASSERT_NO_FATAL_FAILURE(start(20));
    const int before = p_.b.rcq->cqe;
    EXPECT_EQ(ibv_resize_cq(p_.b.rcq, 19), EINVAL);  // below the 20 it holds
    EXPECT_EQ(ibv_resize_cq(p_.b.rcq, 0), EINVAL);
    EXPECT_EQ(ibv_resize_cq(p_.b.rcq, -1), EINVAL);
    const int max = max_cqe();
    EXPECT_EQ(ibv_resize_cq(p_.b.rcq, max + 1), EINVAL);
    EXPECT_EQ(p_.b.rcq->cqe, before);
    // The largest size is allowed, and the CQ comes back from it.
    EXPECT_EQ(ibv_resize_cq(p_.b.rcq, max), 0);
    EXPECT_GE(p_.b.rcq->cqe, max);
    EXPECT_EQ(ibv_resize_cq(p_.b.rcq, 64), 0);
    expect_recvs(p_, 1, 20);
}

// Completions keep streaming into both CQs (A's send CQ, B's receive CQ) while another thread
// resizes them back and forth: each CQ yields every wr_id once, in order. The sends are paced
// by the resizes (kPerResize more after each), so at least kTotal / kPerResize resizes fall
// between completions however fast the traffic or slow the resizer (CI saw 8 resizes in a
// race of the two on a loaded machine).
TEST_F(CqResize, WhileTrafficFlows) {
    constexpr uint32_t kWindow = 32, kTotal = 1500, kPerResize = 50;
    QpOpts o;
    o.max_send_wr = kWindow;
    o.max_recv_wr = kWindow;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& src = reg(A(), kMsg);
    Buffer& dst = reg(B(), kWindow * kMsg);
    src.fill(9);
    std::atomic<bool> done{false};
    std::atomic<uint32_t> resizes{0}, failures{0};
    // Never below kWindow: neither CQ can hold more than that (the window below).
    std::thread resizer([&] {
        const int sizes[] = {kWindow, 100, 4096, 40, 33, 700};
        for (uint32_t i = 0; !done.load(); ++i) {
            ibv_cq* cq = i % 2 ? p.a.scq : p.b.rcq;
            int size = sizes[(i / 2) % 6];
            if (ibv_resize_cq(cq, size) != 0 || cq->cqe < size) ++failures;
            ++resizes;
            usleep(100);  // the traffic gets the CPU too (2 cores, an ASan build)
        }
    });
    uint32_t posted = 0, sent = 0, recvd = 0;
    uint64_t bad_send = 0, bad_recv = 0;
    for (; posted < kWindow; ++posted)
        ASSERT_EQ(post_recv(p.b.qp, posted, {dst.sge((posted % kWindow) * kMsg, kMsg)}), 0);
    uint32_t issued = 0;
    ibv_wc wc[16];
    auto start = std::chrono::steady_clock::now();
    while ((sent < kTotal || recvd < kTotal) &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(40)) {
        while (issued < kTotal && issued - sent < kWindow &&
               issued < (resizes.load() + 1) * kPerResize) {
            std::vector<ibv_sge> sg{src.sge(0, kMsg)};
            ibv_send_wr w = wr(issued, IBV_WR_SEND, sg);
            ASSERT_EQ(post(p.a.qp, w), 0);
            ++issued;
        }
        int n = ibv_poll_cq(p.a.scq, 16, wc);
        ASSERT_GE(n, 0);
        for (int i = 0; i < n; ++i, ++sent)
            if (wc[i].wr_id != sent || wc[i].status != IBV_WC_SUCCESS) bad_send = wc[i].wr_id + 1;
        ASSERT_EQ(bad_send, 0u) << "send completion " << sent << ": wr_id " << bad_send - 1;
        n = ibv_poll_cq(p.b.rcq, 16, wc);
        ASSERT_GE(n, 0);
        for (int i = 0; i < n; ++i, ++recvd) {
            if (wc[i].wr_id != recvd || wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != kMsg)
                bad_recv = wc[i].wr_id + 1;
            if (posted < kTotal) {
                ASSERT_EQ(post_recv(p.b.qp, posted, {dst.sge((posted % kWindow) * kMsg, kMsg)}), 0);
                ++posted;
            }
        }
        ASSERT_EQ(bad_recv, 0u) << "receive completion " << recvd << ": wr_id " << bad_recv - 1;
    }
    done = true;
    resizer.join();
    EXPECT_EQ(sent, kTotal);
    EXPECT_EQ(recvd, kTotal);
    EXPECT_EQ(failures.load(), 0u);
    EXPECT_GE(resizes.load(), kTotal / kPerResize - 1);
    expect_empty(p.a.scq);
    expect_empty(p.b.rcq);
    EXPECT_EQ(dst.mismatch(9, 0, kMsg), -1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// An ibv_create_cq_ex CQ: the iterator reads the moved completions and later ones, with
// their fields, after growing and after shrinking.
TEST_F(CqResize, CqExPollsAfterResize) {
    QpOpts o;
    o.cq_ex = true;
    o.cq_wc_flags = IBV_WC_STANDARD_FLAGS;
    ASSERT_NO_FATAL_FAILURE(start(0, o));
    const Pair& p = p_;
    ibv_cq_ex* x = reinterpret_cast<ibv_cq_ex*>(p.b.rcq);
    uint64_t next = 1;
    for (int size : {600, 12, 5000}) {
        SCOPED_TRACE("resized to " + std::to_string(size));
        ASSERT_NO_FATAL_FAILURE(fill(next, 10));
        ASSERT_EQ(ibv_resize_cq(p.b.rcq, size), 0);
        EXPECT_GE(p.b.rcq->cqe, size);
        ASSERT_NO_FATAL_FAILURE(fill(next + 10, 2));
        ibv_poll_cq_attr attr{};
        ASSERT_EQ(ibv_start_poll(x, &attr), 0);
        for (uint64_t i = 0; i < 12; ++i) {
            if (i) {
                ASSERT_EQ(ibv_next_poll(x), 0) << "completion " << i;
            }
            EXPECT_EQ(x->wr_id, next + i);
            EXPECT_EQ(x->status, IBV_WC_SUCCESS);
            EXPECT_EQ(ibv_wc_read_opcode(x), IBV_WC_RECV);
            EXPECT_EQ(ibv_wc_read_byte_len(x), kMsg);
            EXPECT_EQ(ibv_wc_read_qp_num(x), p.b.qpn());
            EXPECT_EQ(ibv_wc_read_src_qp(x), p.a.qpn());
        }
        EXPECT_EQ(ibv_next_poll(x), ENOENT);
        ibv_end_poll(x);
        EXPECT_EQ(ibv_start_poll(x, &attr), ENOENT);
        next += 12;
    }
}

// A CQ with a completion channel: an arm made before the resize raises its event for a
// completion that comes after it, and arming after a resize works as before.
TEST_F(CqResize, ChannelEventsAfterResize) {
    QpOpts o;
    o.channel_b = make_channel(B());
    ASSERT_NE(o.channel_b, nullptr);
    ASSERT_NO_FATAL_FAILURE(start(0, o));
    const Pair& p = p_;
    auto expect_event = [&](const char* what) {
        pollfd pf{o.channel_b->fd, POLLIN, 0};
        ASSERT_EQ(poll(&pf, 1, int(kWaitSeconds * 1000)), 1) << what << ": no event";
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        ASSERT_EQ(ibv_get_cq_event(o.channel_b, &cq, &ctx), 0) << what;
        EXPECT_EQ(cq, p.b.rcq) << what;
        ibv_ack_cq_events(cq, 1);
    };
    auto expect_no_event = [&](const char* what) {
        pollfd pf{o.channel_b->fd, POLLIN, 0};
        EXPECT_EQ(poll(&pf, 1, 50), 0) << what << ": an event nobody armed for";
    };
    // Armed, resized, then a completion.
    ASSERT_EQ(ibv_req_notify_cq(p.b.rcq, 0), 0);
    ASSERT_EQ(ibv_resize_cq(p.b.rcq, 1000), 0);
    expect_no_event("after the resize");
    ASSERT_NO_FATAL_FAILURE(fill(1, 1));
    expect_event("armed before growing");
    // Held completions, shrunk, armed: what it holds raises nothing (an arm is for the next
    // completion); the next one does, and all are there in order.
    ASSERT_NO_FATAL_FAILURE(fill(2, 3));
    ASSERT_EQ(ibv_resize_cq(p.b.rcq, 8), 0);
    ASSERT_EQ(ibv_req_notify_cq(p.b.rcq, 0), 0);
    expect_no_event("armed after shrinking, completions held");
    ASSERT_NO_FATAL_FAILURE(fill(5, 1));
    expect_event("armed after shrinking, a new completion");
    expect_recvs(p, 1, 5);
    // Armed after the resize, the next completion raises it; one arm, one event.
    ASSERT_EQ(ibv_req_notify_cq(p.b.rcq, 0), 0);
    ASSERT_NO_FATAL_FAILURE(fill(6, 2));
    expect_event("armed after the resize");
    expect_no_event("second completion of one arm");
    expect_recvs(p, 6, 2);
}

}  // namespace
}  // namespace uroce::transport_test
