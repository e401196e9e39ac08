// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An empty ibv_poll_cq gives the CPU away every 16th time (docs/behaviour.md, "Scheduling on
// small hosts") and then looks at the CQ again, so "empty" is never older than the pause: a
// program acts on it at once (libfabric's rxm reads its connection events next, and closed a
// connection whose last message had landed during the pause). This file's sched_yield stands
// in for libc's, the library's included: armed, it makes a completion land during the yield.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <functional>

#include "tests/transport/fixture.h"

namespace {
std::atomic<bool> g_armed{false};
std::function<void()> g_during_yield;
}  // namespace

extern "C" int sched_yield() noexcept {
    if (g_armed.exchange(false)) g_during_yield();
    return int(syscall(SYS_sched_yield));
}

namespace uroce::transport_test {
namespace {

class CqPollYield : public TransportTest {
protected:
    // p.b gets one receive; arming makes p.a's SEND to it complete during the next yield.
    void arm(const Pair& p) {
        Buffer& src = reg(A(), 64);
        Buffer& dst = reg(B(), 64);
        ASSERT_EQ(post_recv(p.b.qp, 7, {dst.sge(0, 64)}), 0);
        sg_ = {src.sge(0, 64)};
        g_during_yield = [this, &p] {
            ibv_send_wr w = wr(1, IBV_WR_SEND, sg_);
            ASSERT_EQ(post(p.a.qp, w), 0);
            // A's completion follows the ACK, which B sends after writing its completion.
            expect_send_ok(p.a, 1, IBV_WC_SEND, 64);
        };
        g_armed = true;
    }
    void TearDown() override {
        g_armed = false;
        TransportTest::TearDown();
    }
    std::vector<ibv_sge> sg_;
};

TEST_F(CqPollYield, PollLooksAgainAfterYielding) {
    Pair p = connect_pair();
    arm(p);
    ibv_wc wc{};
    int polls = 0, got = 0;
    while (got == 0 && polls < 16) {
        got = ibv_poll_cq(p.b.rcq, 1, &wc);
        ++polls;
    }
    EXPECT_FALSE(g_armed) << "no yield in 16 empty polls";
    EXPECT_EQ(polls, 16);
    ASSERT_EQ(got, 1) << "the 16th poll answered from before its yield";
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

TEST_F(CqPollYield, StartPollLooksAgainAfterYielding) {
    QpOpts o;
    o.cq_ex = true;
    Pair p = connect_pair(o);
    arm(p);
    ibv_cq_ex* x = reinterpret_cast<ibv_cq_ex*>(p.b.rcq);  // ibv_cq_ex_to_cq is a cast
    ibv_poll_cq_attr attr{};
    int polls = 0, e = ENOENT;
    while (e == ENOENT && polls < 16) {
        e = ibv_start_poll(x, &attr);
        ++polls;
    }
    EXPECT_FALSE(g_armed) << "no yield in 16 empty polls";
    EXPECT_EQ(polls, 16);
    ASSERT_EQ(e, 0) << "the 16th ibv_start_poll answered from before its yield";
    EXPECT_EQ(x->wr_id, 7u);
    EXPECT_EQ(x->status, IBV_WC_SUCCESS);
    ibv_end_poll(x);
}

}  // namespace
}  // namespace uroce::transport_test
