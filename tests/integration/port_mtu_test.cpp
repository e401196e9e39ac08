// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The port's active MTU through the public verbs API (docs/behaviour.md, "Port MTU"): a
// device on loopback reports 4096 and sends UD messages up to 4096 bytes; a device on a
// 1500-byte veth reports 1024, a 2 KiB UD send completes with IBV_WC_LOC_LEN_ERR and sends
// nothing, an RC QP still takes a larger path MTU (as rxe), and librdmacm's path record says
// 1024; when the interface's MTU changes, the next ibv_query_port and UD send follow it.
//
// Each test starts its own device (uroced) in one runtime directory of the binary's, on the
// UDP port in UROCE_UDP_PORT (or the next free one). The veth tests need root: they run in a
// network namespace of their own (unshare on the test's thread, whose children inherit it),
// and skip without root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/uroced_process.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string g_dir;  // the runtime directory (main)

// Runs a shell command (in the test thread's network namespace); true if it exited 0.
bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

ibv_mtu active_mtu(ibv_context* ctx) {
    ibv_port_attr pa{};
    EXPECT_EQ(ibv_query_port(ctx, 1, &pa), 0);
    EXPECT_EQ(pa.max_mtu, IBV_MTU_4096);
    return pa.active_mtu;
}

// One UD QP in RTS with a receive buffer and an address handle to itself, so a send goes
// out of the device and (through the device's own address) comes back.
struct UdLoop {
    static constexpr size_t kGrh = 40, kMax = 8192;
    ibv_context* ctx;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_ah* ah = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<char> buf = std::vector<char>(2 * (kGrh + kMax));

    explicit UdLoop(ibv_context* c) : ctx(c) {
        pd = ibv_alloc_pd(ctx);
        cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
        mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        if (!pd || !cq || !mr) return;
        ibv_qp_init_attr ia{};
        ia.send_cq = ia.recv_cq = cq;
        ia.qp_type = IBV_QPT_UD;
        ia.sq_sig_all = 1;
        ia.cap = {4, 4, 1, 1, 0};
        qp = ibv_create_qp(pd, &ia);
        if (!qp) return;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qkey = 0x11111111;
        if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
            return;
        a.qp_state = IBV_QPS_RTR;
        if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return;
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 1;
        if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return;
        ibv_ah_attr ah_attr{};
        ah_attr.is_global = 1;
        ah_attr.port_num = 1;
        ibv_query_gid(ctx, 1, 0, &ah_attr.grh.dgid);
        ah = ibv_create_ah(pd, &ah_attr);
    }
    ~UdLoop() {
        if (ah) ibv_destroy_ah(ah);
        if (qp) ibv_destroy_qp(qp);
        if (mr) ibv_dereg_mr(mr);
        if (cq) ibv_destroy_cq(cq);
        if (pd) ibv_dealloc_pd(pd);
    }
    bool ready() const { return ah != nullptr; }

    // Posts a receive for up to kMax bytes and sends `len` bytes to itself; returns the send's
    // completion status, and in *received the length of what arrived (0: nothing).
    ibv_wc_status send(uint32_t len, uint32_t* received) {
        *received = 0;
        char* rx = buf.data() + kGrh + kMax;
        ibv_sge rs{reinterpret_cast<uintptr_t>(rx), uint32_t(kGrh + kMax), mr->lkey};
        ibv_recv_wr rwr{}, *bad_r = nullptr;
        rwr.wr_id = 2;
        rwr.sg_list = &rs;
        rwr.num_sge = 1;
        EXPECT_EQ(ibv_post_recv(qp, &rwr, &bad_r), 0);
        ibv_sge ss{reinterpret_cast<uintptr_t>(buf.data()), len, mr->lkey};
        ibv_send_wr swr{}, *bad_s = nullptr;
        swr.wr_id = 1;
        swr.sg_list = &ss;
        swr.num_sge = 1;
        swr.opcode = IBV_WR_SEND;
        swr.wr.ud.ah = ah;
        swr.wr.ud.remote_qpn = qp->qp_num;
        swr.wr.ud.remote_qkey = 0x11111111;
        EXPECT_EQ(ibv_post_send(qp, &swr, &bad_s), 0);
        ibv_wc_status sent = IBV_WC_GENERAL_ERR;
        bool have_send = false;
        // The receive: within a second if the datagram arrives (it is the device's own).
        for (auto t0 = Clock::now(); Clock::now() - t0 < 1s;) {
            ibv_wc wc{};
            if (ibv_poll_cq(cq, 1, &wc) != 1) {
                usleep(1000);
                continue;
            }
            if (wc.wr_id == 1) {
                have_send = true;
                sent = wc.status;
                if (sent != IBV_WC_SUCCESS) break;  // nothing was sent
            } else if (wc.status == IBV_WC_SUCCESS) {
                *received = wc.byte_len - uint32_t(kGrh);
                if (have_send) break;
            }
        }
        EXPECT_TRUE(have_send) << "no send completion";
        return sent;
    }
};

// A fresh UD QP sends `len` bytes to itself: the send completes with `want`, and `arrives`
// bytes arrive (0: nothing).
void expect_ud_send(ibv_context* ctx, uint32_t len, ibv_wc_status want, uint32_t arrives) {
    UdLoop ud(ctx);
    ASSERT_TRUE(ud.ready());
    uint32_t got = 0;
    EXPECT_EQ(ud.send(len, &got), want) << len << " bytes";
    EXPECT_EQ(got, arrives) << len << " bytes";
}

TEST(PortMtu, LoopbackReports4096AndSendsUdUpTo4096) {
    uroce::test::UrocedProcess d;
    ASSERT_TRUE(d.start(g_dir, "mtu_lo0", "127.0.0.1", 4))
        << "uroced did not come up; see " << g_dir;
    ibv_context* ctx = uroce::test::open_named("mtu_lo0");
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(active_mtu(ctx), IBV_MTU_4096);
    expect_ud_send(ctx, 4096, IBV_WC_SUCCESS, 4096);
    expect_ud_send(ctx, 4097, IBV_WC_LOC_LEN_ERR, 0);
    ibv_close_device(ctx);
}

// A network namespace of the test thread's own with a veth pair (MTU 1500) whose end `va`
// holds 10.77.9.1/24. The namespace goes when the thread leaves it and uroced has exited.
class VethTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace with a veth pair)";
        orig_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        ASSERT_GE(orig_, 0);
        if (unshare(CLONE_NEWNET) != 0) {
            int e = errno;
            close(orig_);
            orig_ = -1;
            GTEST_SKIP() << "unshare(CLONE_NEWNET): " << std::strerror(e);
        }
        ASSERT_TRUE(
            sh("ip link set lo up && ip link add va type veth peer name vb && "
               "ip link set va mtu 1500 up && ip link set vb up && "
               "ip addr add 10.77.9.1/24 dev va"))
            << "cannot make the veth pair";
        ASSERT_TRUE(dev_.start(g_dir, "mtu_veth0", "10.77.9.1", 4))
            << "uroced did not come up; see " << g_dir;
        ctx_ = uroce::test::open_named("mtu_veth0");
        ASSERT_NE(ctx_, nullptr);
    }
    void TearDown() override {
        if (ctx_) ibv_close_device(ctx_);
        dev_.stop(SIGTERM);
        if (orig_ >= 0) {
            EXPECT_EQ(setns(orig_, CLONE_NEWNET), 0);
            close(orig_);
        }
    }
    int orig_ = -1;
    uroce::test::UrocedProcess dev_;
    ibv_context* ctx_ = nullptr;
};

TEST_F(VethTest, Reports1024AndFailsLargerUdSends) {
    EXPECT_EQ(active_mtu(ctx_), IBV_MTU_1024);
    UdLoop big(ctx_);
    ASSERT_TRUE(big.ready());
    uint32_t got = 0;
    EXPECT_EQ(big.send(2048, &got), IBV_WC_LOC_LEN_ERR);
    EXPECT_EQ(got, 0u);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    ASSERT_EQ(ibv_query_qp(big.qp, &qa, IBV_QP_STATE, &qi), 0);
    EXPECT_EQ(qa.qp_state, IBV_QPS_SQE);  // a failed UD send stops the send queue
    expect_ud_send(ctx_, 1024, IBV_WC_SUCCESS, 1024);
}

// rxe and mlx5 check an RC path MTU against max_mtu only (the packets of a larger one are lost
// on the link); the CM's path takes the port's.
TEST_F(VethTest, RcPathMtuAndCmPath) {
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    ibv_cq* cq = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {4, 4, 1, 1, 0};
    ibv_qp* qp = ibv_create_qp(pd, &ia);
    ASSERT_NE(qp, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    ASSERT_EQ(
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        0);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = qp->qp_num;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid);
    EXPECT_EQ(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0);
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    ASSERT_EQ(ibv_query_qp(qp, &q, IBV_QP_PATH_MTU, &qi), 0);
    EXPECT_EQ(q.path_mtu, IBV_MTU_4096);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);

    rdma_event_channel* ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in src{}, dst{};
    src.sin_family = dst.sin_family = AF_INET;
    inet_pton(AF_INET, "10.77.9.1", &src.sin_addr);
    inet_pton(AF_INET, "10.77.9.1", &dst.sin_addr);
    dst.sin_port = htons(7471);
    auto next = [&](rdma_cm_event_type want) {
        rdma_cm_event* ev = nullptr;
        ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
        EXPECT_EQ(ev->event, want) << rdma_event_str(ev->event);
        rdma_ack_cm_event(ev);
    };
    ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src),
                                reinterpret_cast<sockaddr*>(&dst), 2000),
              0);
    next(RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
    next(RDMA_CM_EVENT_ROUTE_RESOLVED);
    ASSERT_NE(id->route.path_rec, nullptr);
    EXPECT_EQ(id->route.path_rec->mtu, IBV_MTU_1024);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
}

// The port follows the interface: the next query and UD send see a changed MTU.
TEST_F(VethTest, FollowsAnInterfaceMtuChange) {
    ASSERT_TRUE(sh("ip link set va mtu 9000"));
    EXPECT_EQ(active_mtu(ctx_), IBV_MTU_4096);
    expect_ud_send(ctx_, 4096, IBV_WC_SUCCESS, 4096);
    ASSERT_TRUE(sh("ip link set va mtu 600"));
    EXPECT_EQ(active_mtu(ctx_), IBV_MTU_512);
    expect_ud_send(ctx_, 1024, IBV_WC_LOC_LEN_ERR, 0);
}

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    // One runtime directory for the whole run: the library reads UROCE_RUNTIME_DIR once.
    char tmpl[] = "/tmp/uroce-port-mtu.XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    g_dir = tmpl;
    setenv("UROCE_RUNTIME_DIR", tmpl, 1);
    setenv("UROCE_NO_AUTOSTART", "1", 1);
    int rc = RUN_ALL_TESTS();
    // A device that hit a sanitizer report fails the run.
    for (const auto& e : std::filesystem::directory_iterator(g_dir)) {
        if (e.path().extension() != ".log") continue;
        std::ifstream in(e.path());
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (text.find("ERROR: AddressSanitizer") != std::string::npos ||
            text.find("ERROR: LeakSanitizer") != std::string::npos ||
            text.find("runtime error:") != std::string::npos) {
            std::fprintf(stderr, "sanitizer report in %s:\n%s\n", e.path().c_str(), text.c_str());
            rc = 1;
        }
    }
    std::filesystem::remove_all(g_dir);
    return rc;
}
