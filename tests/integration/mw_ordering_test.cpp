// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Local operations and fences between two uroce devices (mw_test_fixture.h): order,
// loss, the resource dump, and windows that outlive their process or QP.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mw_test_fixture.h"

namespace mw_test {
namespace {

// Local operations complete in order behind the work requests posted before them.
TEST_F(MwTest, LocalOperationsCompleteInOrder) {
    Conn c = connect();
    Buf& target = buf(pd_a_, 4096, kMwMr, 10);
    Buf& remote =
        buf(pd_b_, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
            40);
    Buf& src = buf(pd_a_, 65536, IBV_ACCESS_LOCAL_WRITE, 99);
    ibv_mw* mw = alloc_mw(pd_a_, IBV_MW_TYPE_2);
    // A long WRITE, then a bind and an invalidation on the same QP, all signaled.
    rdma(c.a, IBV_WR_RDMA_WRITE, src, 0, 65536, remote.mr->rkey, remote.addr(0), 1);
    uint32_t key =
        bind2(c.a, mw, mw->rkey, target.mr, target.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 2);
    local_inv(c.a, key, 3);
    rdma(c.a, IBV_WR_RDMA_READ, src, 0, 16, remote.mr->rkey, remote.addr(0), 4);
    expect_wc(poll(cq_a_), 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    expect_wc(poll(cq_a_), 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    expect_wc(poll(cq_a_), 3, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
    expect_wc(poll(cq_a_), 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    remote.expect(0, src.data(), 65536);
    EXPECT_EQ(remote.first_diff(), -1);
}

// Under loss, duplication and reordering (the device's fault injector) the requester goes
// back and sends SENDs again; the invalidations and binds between them must take effect
// exactly once and complete in order.
TEST_F(MwTest, LocalOperationsRunOnceUnderLoss) {
    const char* cli = getenv("UROCE_CLI");
    if (!cli) GTEST_SKIP() << "UROCE_CLI is not set: cannot inject faults";
    Conn c = connect();
    Buf& src = buf(pd_a_, 2000, IBV_ACCESS_LOCAL_WRITE, 99);
    Buf& target = buf(pd_a_, 4096, kMwMr, 10);
    Buf& rbuf = buf(pd_b_, 4 * 2000, IBV_ACCESS_LOCAL_WRITE, 20);
    ibv_mw* mw = alloc_mw(pd_a_, IBV_MW_TYPE_2);
    const char* dev = getenv("UROCE_MW_DEV_A") ? getenv("UROCE_MW_DEV_A") : "mwa";
    std::string on = std::string(cli) + " faults loss=0.05,dup=0.05,reorder=0.05,seed=11 " + dev;
    ASSERT_EQ(std::system((on + " >/dev/null").c_str()), 0) << on;
    // Each step invalidates the key the previous one bound and binds the next: running
    // either operation twice fails (a stale key, or a bind of a bound type 2 window).
    uint32_t key =
        bind2(c.a, mw, mw->rkey, target.mr, target.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 9);
    expect_wc(poll(cq_a_), 9, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    for (int round = 0; round < 30; ++round) {
        for (uint64_t j = 0; j < 4; ++j) recv(c.b, rbuf, j * 2000, 2000, 100 + j);
        for (uint64_t j = 0; j < 4; ++j) {
            ibv_sge sge{src.addr(0), 2000, src.mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = 10 * j;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            ASSERT_EQ(post(c.a, wr), 0);
            local_inv(c.a, key, 10 * j + 1);
            key = bind2(c.a, mw, key, target.mr, target.addr(0), 4096, IBV_ACCESS_REMOTE_READ,
                        10 * j + 2);
        }
        const ibv_wc_opcode ops[] = {IBV_WC_SEND, IBV_WC_LOCAL_INV, IBV_WC_BIND_MW};
        for (uint64_t j = 0; j < 12; ++j)
            expect_wc(poll(cq_a_), 10 * (j / 3) + j % 3, IBV_WC_SUCCESS, ops[j % 3]);
        for (uint64_t j = 0; j < 4; ++j) {
            expect_wc(poll(cq_b_), 100 + j, IBV_WC_SUCCESS, IBV_WC_RECV);
            rbuf.expect(j * 2000, src.data(), 2000);
        }
        ASSERT_EQ(rbuf.first_diff(), -1);
        if (HasFailure()) break;
    }
    std::string off = std::string(cli) + " faults off " + dev + " >/dev/null";
    EXPECT_EQ(std::system(off.c_str()), 0);
    EXPECT_EQ(state(c.a), IBV_QPS_RTS);
}

// `uroce res NAME mw` lists the windows: a bound one with its range, rights and QP.
TEST_F(MwTest, ResourceDumpShowsWindows) {
    const char* cli = getenv("UROCE_CLI");
    if (!cli) GTEST_SKIP() << "UROCE_CLI is not set";
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    uint32_t key = bound_type2(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_2), target, 256, 1024,
                               IBV_ACCESS_REMOTE_WRITE);
    uint32_t key1 = alloc_mw(pd_b_, IBV_MW_TYPE_1)->rkey;
    const char* dev = getenv("UROCE_MW_DEV_B") ? getenv("UROCE_MW_DEV_B") : "mwb";
    std::string cmd = std::string(cli) + " res " + dev + " mw";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::vector<std::string> lines;
    char line[512];
    while (std::fgets(line, sizeof line, p)) lines.emplace_back(line);
    EXPECT_EQ(pclose(p), 0);
    auto find = [&](uint32_t rkey) {
        char want[32];
        std::snprintf(want, sizeof want, " rkey 0x%x ", rkey);
        for (const auto& l : lines)
            if (l.find(want) != std::string::npos) return l;
        return std::string();
    };
    for (const auto& l : lines) EXPECT_EQ(l.rfind("mw ", 0), 0u) << l;
    char want[160];
    std::snprintf(want, sizeof want, " addr 0x%llx length 1024 access 0x%x qpn 0x%x",
                  static_cast<unsigned long long>(target.addr(256)), IBV_ACCESS_REMOTE_WRITE,
                  c.b->qp_num);
    std::string bound = find(key);
    EXPECT_NE(bound.find(" type 2 "), std::string::npos) << bound;
    EXPECT_NE(bound.find(want), std::string::npos) << bound << " lacks" << want;
    std::string unbound = find(key1);
    EXPECT_NE(unbound.find(" type 1 "), std::string::npos) << unbound;
    EXPECT_NE(unbound.find(" unbound"), std::string::npos) << unbound;
}

// Run by mw_inv_test.sh on its own (UROCE_MW_KILL=1): the process dies by SIGKILL holding
// bound windows of both types, and the script checks that the devices freed everything.
TEST_F(MwTest, KilledWithBoundWindows) {
    if (!getenv("UROCE_MW_KILL")) GTEST_SKIP() << "only with UROCE_MW_KILL=1";
    Conn c = connect();
    Buf& target = buf(pd_b_, 4096, kMwMr, 10);
    bind1(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_1), &target, 0, 64, IBV_ACCESS_REMOTE_READ);
    bound_type2(c.b, alloc_mw(pd_b_, IBV_MW_TYPE_2), target, 64, 64, IBV_ACCESS_REMOTE_READ);
    alloc_mw(pd_a_, IBV_MW_TYPE_2);
    kill(getpid(), SIGKILL);
}

// IBV_SEND_FENCE: a fenced SEND of the buffer a READ is filling goes out only after the
// READ's data has landed, so the peer receives what the READ brought.
TEST_F(MwTest, FencedSendWaitsForEarlierRead) {
    Conn c = connect();
    constexpr uint32_t kLen = 32768;  // 32 response packets: the SEND would overtake them
    Buf& remote = buf(pd_b_, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 50);
    Buf& local = buf(pd_a_, kLen, IBV_ACCESS_LOCAL_WRITE, 60);
    Buf& rbuf = buf(pd_b_, kLen, IBV_ACCESS_LOCAL_WRITE, 70);
    recv(c.b, rbuf, 0, kLen, 12);
    rdma(c.a, IBV_WR_RDMA_READ, local, 0, kLen, remote.mr->rkey, remote.addr(0), 1);
    ibv_sge sge{local.addr(0), kLen, local.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 2;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ASSERT_EQ(post(c.a, wr), 0);
    expect_wc(poll(cq_a_), 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    expect_wc(poll(cq_a_), 2, IBV_WC_SUCCESS, IBV_WC_SEND);
    expect_wc(poll(cq_b_), 12, IBV_WC_SUCCESS, IBV_WC_RECV);
    local.expect(0, remote.data(), kLen);
    rbuf.expect(0, remote.data(), kLen);
    EXPECT_EQ(local.first_diff(), -1);
    EXPECT_EQ(rbuf.first_diff(), -1) << "the fenced SEND did not wait for the READ";
}

TEST_F(MwTest, WindowsOfAClosedQpAreGone) {
    auto [c, target, src, mw] = scene(IBV_MW_TYPE_2, 64);
    uint32_t key = bound_type2(c.b, mw, target, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(ibv_destroy_qp(c.b), 0);
    std::erase(qps_, c.b);
    EXPECT_EQ(ibv_dereg_mr(target.mr), 0) << "the QP's windows were unbound with it";
    target.mr = ibv_reg_mr(pd_b_, target.data(), 4096, kMwMr);
    Conn d = connect();
    expect_denied(d, IBV_WR_RDMA_WRITE, src, 64, key, target, target.addr(0));
}

}  // namespace
}  // namespace mw_test
