// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// When the device goes away (docs/behaviour.md, "When the device goes away"), through the
// public verbs API: a process whose device is killed (SIGKILL) or stopped (SIGTERM, as
// `uroce stop`) gets, within a second, IBV_EVENT_DEVICE_FATAL, its blocked
// ibv_get_cq_event/ibv_get_async_event back, an IBV_WC_WR_FLUSH_ERR completion for every
// outstanding work request (send queue, receive queue, SRQ), EIO from the verbs that need
// the device, and success from the destroy verbs; a device started again under the same
// name then serves a new ibv_open_device.
//
// The test starts its own device (uroced) in a runtime directory of its own, on 127.0.0.1
// and the UDP port in UROCE_UDP_PORT (or the next free one after it).
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/uroced_process.h"
#include "tests/integration/verbs_objects.h"
#include "verbs_api/ibverbs/internal.h"       // cq_of, device_is_gone
#include "verbs_api/ibverbs/uroce_private.h"  // uroce_on_device_gone: librdmacm's hook

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kName = "ddeath0";
constexpr auto kDeadline = 1s;  // the promise of docs/behaviour.md

// The verbs objects of one test: a context on the device, two RC QPs connected to each
// other through it, a third QP on an SRQ, one CQ with a completion channel for all.
struct Verbs {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_comp_channel* ch = nullptr;
    ibv_cq* cq = nullptr;
    ibv_srq* srq = nullptr;
    ibv_qp* a = nullptr;  // sends to b, which has no receive: its sends wait (RNR) for ever
    ibv_qp* b = nullptr;
    ibv_qp* c = nullptr;  // on the SRQ
    ibv_mr* mr = nullptr;
    std::vector<char> buf = std::vector<char>(1 << 16);
};

ibv_qp* make_qp(Verbs& v, ibv_srq* srq) {
    ibv_qp_init_attr ia{};
    ia.send_cq = v.cq;
    ia.recv_cq = v.cq;
    ia.srq = srq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 1;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    return ibv_create_qp(v.pd, &ia);
}

// RESET -> INIT -> RTR -> RTS towards `dest` on the same device.
int connect(ibv_context* ctx, ibv_qp* qp, uint32_t dest) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx, 1, 0, &gid)) return errno;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (int e = ibv_modify_qp(qp, &a,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return e;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 0;  // 655 ms between RNR retries: the stuck sends cost the device little
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    if (int e = ibv_modify_qp(qp, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return e;
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;  // infinite
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int post_recv(Verbs& v, ibv_qp* qp, uint64_t wr_id, size_t off) {
    ibv_sge s{reinterpret_cast<uint64_t>(v.buf.data() + off), 1024, v.mr->lkey};
    ibv_recv_wr wr = verbs_objects::recv_wr(wr_id, &s);
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
}

int post_srq_recv(Verbs& v, uint64_t wr_id, size_t off) {
    ibv_sge s{reinterpret_cast<uint64_t>(v.buf.data() + off), 1024, v.mr->lkey};
    ibv_recv_wr wr = verbs_objects::recv_wr(wr_id, &s);
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(v.srq, &wr, &bad);
}

int post_send(Verbs& v, ibv_qp* qp, uint64_t wr_id, size_t off, uint32_t len) {
    ibv_sge s{reinterpret_cast<uint64_t>(v.buf.data() + off), len, v.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

// Builds Verbs on the device; adds a test failure and returns false if anything fails.
bool build(Verbs& v) {
    v.ctx = uroce::test::open_named(kName);
    EXPECT_NE(v.ctx, nullptr) << std::strerror(errno);
    if (!v.ctx) return false;
    v.pd = ibv_alloc_pd(v.ctx);
    v.ch = ibv_create_comp_channel(v.ctx);
    v.cq = ibv_create_cq(v.ctx, 256, nullptr, v.ch, 0);
    if (!v.pd || !v.ch || !v.cq) {
        ADD_FAILURE() << "pd, channel or cq: " << std::strerror(errno);
        return false;
    }
    v.mr = ibv_reg_mr(v.pd, v.buf.data(), v.buf.size(),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    v.srq = ibv_create_srq(v.pd, &sa);
    v.a = make_qp(v, nullptr);
    v.b = make_qp(v, nullptr);
    v.c = make_qp(v, v.srq);
    if (!v.mr || !v.srq || !v.a || !v.b || !v.c) {
        ADD_FAILURE() << "mr, srq or qps: " << std::strerror(errno);
        return false;
    }
    EXPECT_EQ(connect(v.ctx, v.a, v.b->qp_num), 0);
    EXPECT_EQ(connect(v.ctx, v.b, v.a->qp_num), 0);
    return !::testing::Test::HasFailure();
}

// Destroys what `v` holds; every call must succeed (after the device is gone too).
void destroy(Verbs& v) {
    using verbs_objects::destroy_if;
    for (ibv_qp** q : {&v.a, &v.b, &v.c}) EXPECT_EQ(destroy_if(*q, ibv_destroy_qp), 0);
    EXPECT_EQ(destroy_if(v.srq, ibv_destroy_srq), 0);
    EXPECT_EQ(destroy_if(v.mr, ibv_dereg_mr), 0);
    EXPECT_EQ(destroy_if(v.cq, ibv_destroy_cq), 0);
    EXPECT_EQ(destroy_if(v.ch, ibv_destroy_comp_channel), 0);
    EXPECT_EQ(destroy_if(v.pd, ibv_dealloc_pd), 0);
    EXPECT_EQ(destroy_if(v.ctx, ibv_close_device), 0);
    v = Verbs{};
}

// Polls until `want` completions arrived or `until` passed.
std::vector<ibv_wc> poll_until(ibv_cq* cq, size_t want, Clock::time_point until) {
    std::vector<ibv_wc> out;
    while (out.size() < want && Clock::now() < until) {
        ibv_wc wc[16];
        int n = ibv_poll_cq(cq, 16, wc);
        if (n < 0) break;
        out.insert(out.end(), wc, wc + n);
    }
    return out;
}

// A loopback SEND a -> b of 512 bytes arrives intact.
void small_transfer(Verbs& v) {
    std::memset(v.buf.data(), 0, v.buf.size());
    for (size_t i = 0; i < 512; ++i) v.buf[i] = char(i * 7 + 1);
    ASSERT_EQ(post_recv(v, v.b, 1, 4096), 0);
    ASSERT_EQ(post_send(v, v.a, 2, 0, 512), 0);
    auto wcs = poll_until(v.cq, 2, Clock::now() + 10s);
    ASSERT_EQ(wcs.size(), 2u);
    for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
    EXPECT_EQ(std::memcmp(v.buf.data(), v.buf.data() + 4096, 512), 0);
}

class DeviceTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/uroce-devdeath.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        setenv("UROCE_RUNTIME_DIR", dir_.c_str(), 1);
        setenv("UROCE_NO_AUTOSTART", "1", 1);
        ASSERT_TRUE(dev_.start(dir_, kName, "127.0.0.1", 8))
            << "uroced did not come up; see " << dir_;
    }
    void TearDown() override {
        dev_.stop(SIGKILL);
        if (!HasFailure()) std::filesystem::remove_all(dir_);
    }

    // Outstanding on the device when it goes: 4 sends on a (b has no receive: RNR, retried
    // for ever), 8 receives on a, 6 on the SRQ. Nothing has completed.
    std::set<uint64_t> make_outstanding(Verbs& v) {
        std::set<uint64_t> ids;
        for (uint64_t i = 0; i < 8; ++i) {
            EXPECT_EQ(post_recv(v, v.a, 100 + i, 1024 * i), 0);
            ids.insert(100 + i);
        }
        for (uint64_t i = 0; i < 6; ++i) {
            EXPECT_EQ(post_srq_recv(v, 200 + i, 8192 + 1024 * i), 0);
            ids.insert(200 + i);
        }
        for (uint64_t i = 0; i < 4; ++i) {
            EXPECT_EQ(post_send(v, v.a, 300 + i, 16384, 64), 0);
            ids.insert(300 + i);
        }
        usleep(100000);  // the device has taken the sends and met the RNR NAK
        ibv_wc wc;
        EXPECT_EQ(ibv_poll_cq(v.cq, 1, &wc), 0) << "a work request completed: " << wc.wr_id;
        return ids;
    }

    // The device stopped (signal `sig`) with work of `v` outstanding on it (make_outstanding):
    // the outstanding ids, and the time of the stop.
    struct Stopped {
        std::set<uint64_t> ids;
        Clock::time_point t0;
    };
    Stopped stop_with_work_outstanding(Verbs& v, int sig) {
        std::set<uint64_t> ids = make_outstanding(v);
        auto t0 = Clock::now();
        dev_.stop(sig);
        return {ids, t0};
    }

    // The next async event of `ctx` is IBV_EVENT_DEVICE_FATAL (acknowledged).
    static void expect_fatal_event(ibv_context* ctx) {
        ibv_async_event ev{};
        ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0);
        EXPECT_EQ(ev.event_type, IBV_EVENT_DEVICE_FATAL);
        ibv_ack_async_event(&ev);
    }

    // After the device is gone: EIO from the verbs that need it.
    void expect_eio(Verbs& v) {
        errno = 0;
        EXPECT_EQ(ibv_create_cq(v.ctx, 16, nullptr, nullptr, 0), nullptr);
        EXPECT_EQ(errno, EIO);
        errno = 0;
        EXPECT_EQ(ibv_alloc_pd(v.ctx), nullptr);
        EXPECT_EQ(errno, EIO);
        errno = 0;
        EXPECT_EQ(ibv_reg_mr(v.pd, v.buf.data(), 4096, IBV_ACCESS_LOCAL_WRITE), nullptr);
        EXPECT_EQ(errno, EIO);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        EXPECT_EQ(ibv_modify_qp(v.a, &a, IBV_QP_STATE), EIO);
        ibv_qp_init_attr init{};
        EXPECT_EQ(ibv_query_qp(v.a, &a, IBV_QP_STATE, &init), EIO);
        ibv_device_attr da{};
        EXPECT_EQ(ibv_query_device(v.ctx, &da), EIO);
        EXPECT_EQ(post_send(v, v.a, 999, 0, 8), EIO);
        EXPECT_EQ(post_recv(v, v.b, 999, 0), EIO);
        EXPECT_EQ(post_srq_recv(v, 999, 0), EIO);
        ibv_wc wc;
        EXPECT_EQ(ibv_poll_cq(v.cq, 1, &wc), 0) << "a completion after the flush: " << wc.wr_id;
    }

    // The flush: exactly one IBV_WC_WR_FLUSH_ERR completion per outstanding work request.
    void expect_flushed(const std::vector<ibv_wc>& wcs, const std::set<uint64_t>& ids,
                        const Verbs& v) {
        std::set<uint64_t> got;
        for (const ibv_wc& wc : wcs) {
            EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << "wr_id " << wc.wr_id;
            EXPECT_TRUE(got.insert(wc.wr_id).second) << "wr_id " << wc.wr_id << " twice";
            uint32_t qpn = wc.wr_id >= 200 && wc.wr_id < 300 ? v.c->qp_num : v.a->qp_num;
            EXPECT_EQ(wc.qp_num, qpn) << "wr_id " << wc.wr_id;
        }
        EXPECT_EQ(got, ids);
    }

    std::string dir_;
    uroce::test::UrocedProcess dev_;
};

// The device is killed (SIGKILL) or stopped (SIGTERM, as `uroce stop`).
class DeviceDeath : public DeviceTest, public ::testing::WithParamInterface<int> {};

// Threads blocked in ibv_get_cq_event (CQ armed) and ibv_get_async_event when the device goes.
TEST_P(DeviceDeath, BlockedThreadsReturnAndEverythingFlushes) {
    Verbs v;
    ASSERT_TRUE(build(v));
    std::set<uint64_t> ids = make_outstanding(v);
    ASSERT_EQ(ibv_req_notify_cq(v.cq, 0), 0);
    auto cq_event = std::async(std::launch::async, [&] {
        ibv_cq* cq = nullptr;
        void* cq_ctx = nullptr;
        int r = ibv_get_cq_event(v.ch, &cq, &cq_ctx);
        return std::make_pair(r, cq);
    });
    auto async_event = std::async(std::launch::async, [&] {
        ibv_async_event ev{};
        // Events before the device goes (none are expected) are acknowledged and skipped.
        while (ibv_get_async_event(v.ctx, &ev) == 0) {
            ibv_event_type t = ev.event_type;
            ibv_ack_async_event(&ev);
            if (t == IBV_EVENT_DEVICE_FATAL) return 0;
        }
        return errno ? errno : -1;
    });
    usleep(50000);  // both threads are in read()
    ASSERT_EQ(cq_event.wait_for(0s), std::future_status::timeout);
    ASSERT_EQ(async_event.wait_for(0s), std::future_status::timeout);

    auto t0 = Clock::now();
    dev_.stop(GetParam());
    ASSERT_EQ(async_event.wait_until(t0 + kDeadline), std::future_status::ready)
        << "ibv_get_async_event still blocked";
    EXPECT_EQ(async_event.get(), 0) << "no IBV_EVENT_DEVICE_FATAL";
    ASSERT_EQ(cq_event.wait_until(t0 + kDeadline), std::future_status::ready)
        << "ibv_get_cq_event still blocked";
    auto [r, cq] = cq_event.get();
    EXPECT_EQ(r, 0);
    EXPECT_EQ(cq, v.cq);
    auto wcs = poll_until(v.cq, ids.size() + 1, t0 + kDeadline);
    expect_flushed(wcs, ids, v);
    if (r == 0) ibv_ack_cq_events(v.cq, 1);

    // Once handed out, the events end: EIO, as the kernel's files after disassociation.
    ibv_cq* ecq;
    void* ectx;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(v.ch, &ecq, &ectx), -1);
    EXPECT_EQ(errno, EIO);
    ibv_async_event ev;
    errno = 0;
    EXPECT_EQ(ibv_get_async_event(v.ctx, &ev), -1);
    EXPECT_EQ(errno, EIO);

    expect_eio(v);
    destroy(v);

    // The same name again: a new device list has it, and it works.
    ASSERT_TRUE(dev_.start(dir_, kName, "127.0.0.1", 8));
    ASSERT_TRUE(build(v));
    small_transfer(v);
    destroy(v);
}

// Nobody blocked, the application busy-polls its CQ: the library's watcher notices alone.
TEST_P(DeviceDeath, BusyPollerSeesFlushes) {
    Verbs v;
    ASSERT_TRUE(build(v));
    auto [ids, t0] = stop_with_work_outstanding(v, GetParam());
    expect_flushed(poll_until(v.cq, ids.size() + 1, t0 + kDeadline), ids, v);
    expect_eio(v);
    // The events are there too, for whoever asks later.
    ASSERT_NO_FATAL_FAILURE(expect_fatal_event(v.ctx));
    destroy(v);
}

// Armed after the device is gone, a CQ holding the flush completions gives no event (an arm
// is for the next completion, and none will come): ibv_get_cq_event returns EIO at once.
TEST_P(DeviceDeath, ArmingAfterwardsGivesEioNotAnEvent) {
    Verbs v;
    ASSERT_TRUE(build(v));
    auto [ids, t0] = stop_with_work_outstanding(v, GetParam());
    // ibv_get_async_event returns once the flush is written.
    ASSERT_NO_FATAL_FAILURE(expect_fatal_event(v.ctx));
    EXPECT_LT(Clock::now() - t0, kDeadline);
    // Armed after the flush: no completion can come any more, so no event; the channel
    // answers EIO at once, as the kernel's after disassociation, instead of blocking.
    ASSERT_EQ(ibv_req_notify_cq(v.cq, 0), 0);
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(v.ch, &cq, &cq_ctx), -1);
    EXPECT_EQ(errno, EIO);
    expect_flushed(poll_until(v.cq, ids.size() + 1, Clock::now() + 200ms), ids, v);
    destroy(v);
}

// librdmacm's hook, as libibverbs exports it (uroce_on_device_gone, uroce_private.h): called
// once, after the flush, when the device goes; at once when registered after.
TEST_P(DeviceDeath, GoneHookRunsOnceAfterTheFlush) {
    Verbs v;
    ASSERT_TRUE(build(v));
    std::set<uint64_t> ids = make_outstanding(v);
    struct Seen {
        std::atomic<int> calls{0};
        std::atomic<bool> flushed{false};  // the flush completions were in the CQ ring then
        ibv_context* ctx = nullptr;
        ibv_cq* cq = nullptr;
    } seen;
    seen.cq = v.cq;
    auto hook = [](ibv_context* c, void* arg) {
        auto* s = static_cast<Seen*>(arg);
        s->ctx = c;
        auto* h = uroce::verbs::cq_of(s->cq)->ring.hdr();
        s->flushed = h->prod.load() != h->cons.load();
        ++s->calls;
    };
    uroce_on_device_gone(v.ctx, hook, &seen);
    EXPECT_FALSE(uroce::verbs::device_is_gone(v.ctx));
    auto t0 = Clock::now();
    dev_.stop(GetParam());
    while (seen.calls == 0 && Clock::now() - t0 < kDeadline) usleep(1000);
    EXPECT_EQ(seen.calls, 1);
    EXPECT_TRUE(seen.flushed);
    EXPECT_EQ(seen.ctx, v.ctx);
    EXPECT_TRUE(uroce::verbs::device_is_gone(v.ctx));
    Seen late;
    late.cq = v.cq;
    uroce_on_device_gone(v.ctx, hook, &late);
    EXPECT_EQ(late.calls, 1);
    expect_flushed(poll_until(v.cq, ids.size() + 1, Clock::now() + 200ms), ids, v);
    usleep(100000);
    EXPECT_EQ(seen.calls, 1);
    destroy(v);
}

// A child forked after ibv_open_device has the context but not its watcher thread (fork
// copies only the calling thread), and shares the watcher's wake-up eventfd: its
// ibv_close_device must neither wait for a thread it lacks nor stop the parent's watcher.
TEST_F(DeviceTest, ForkedChildClosingItsCopyLeavesTheParentWatched) {
    Verbs v;
    ASSERT_TRUE(build(v));
    std::set<uint64_t> ids = make_outstanding(v);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);  // a hang ends as SIGALRM, a failure
        _exit(ibv_close_device(v.ctx) == 0 ? 0 : 1);
    }
    ASSERT_GT(pid, 0);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
    usleep(50000);  // time for a watcher the child stopped by mistake to leave
    auto t0 = Clock::now();
    dev_.stop(SIGKILL);
    expect_flushed(poll_until(v.cq, ids.size() + 1, t0 + kDeadline), ids, v);
    destroy(v);
}

INSTANTIATE_TEST_SUITE_P(Signals, DeviceDeath, ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& i) {
                             return std::string(i.param == SIGKILL ? "Killed" : "Stopped");
                         });

}  // namespace
