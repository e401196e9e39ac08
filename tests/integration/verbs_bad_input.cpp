// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Bad input through the public verbs API: built against the system's
// <infiniband/verbs.h>, as any application is, and run over the drop-in libibverbs.
// Each wrong call must fail the way the man pages and rdma-core/hardware say, leave the
// object as it was, and disturb nothing: at the end a loopback RC SEND between two QPs of
// this process must still work, and every object must be destroyable.
// It runs against a device of its own by design (verbs_bad_input_test.sh): the script checks
// afterwards that the device process survived and holds no object. Set-up helpers are
// tests/transport/verbs_util.h's.
//
// usage: verbs_bad_input DEVICE UROCE_CLI
// Exits 0 when every check holds; otherwise prints each mismatch and exits 1.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/transport/verbs_util.h"
#include "verbs_checks.h"
#include "verbs_objects.h"

namespace {

using uroce::verbs_util::qp_state_name;

// The QP's state as the device reports it.
int device_state(ibv_qp* qp) {
    int e = 0;
    int s = uroce::verbs_util::query_qp_state(qp, &e);
    CHECK(e == 0, "ibv_query_qp: %s", std::strerror(e));
    return s;
}

constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

ibv_qp_attr init_attr() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    return a;
}

ibv_qp_attr rtr_attr(uint32_t dest_qpn, const ibv_gid& dgid) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = 0x1234;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = dgid;
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    return a;
}

ibv_qp_attr rts_attr() {
    return {.qp_state = IBV_QPS_RTS,
            .sq_psn = 0x1234,
            .max_rd_atomic = 1,
            .timeout = 14,
            .retry_cnt = 7,
            .rnr_retry = 7};
}

bool poll_one(ibv_cq* cq, ibv_wc* wc) { return uroce::verbs_util::poll_one(cq, wc, 5.0) == 1; }

// Object counts from `uroce res`: every "counts" pair, e.g. {"sessions", 1}, {"qps", 0}.
std::vector<std::pair<std::string, long>> device_counts(const std::string& cli) {
    std::vector<std::pair<std::string, long>> out;
    std::istringstream lines(uroce::verbs_util::command_output(cli + " res"));
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("counts ", 0) != 0) continue;
        std::istringstream in(line.substr(7));
        std::string name;
        long n;
        while (in >> name >> n) out.emplace_back(name, n);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DEVICE UROCE_CLI\n", argv[0]);
        return 2;
    }
    const std::string want = argv[1], cli = argv[2];

    int ndev = 0;
    ibv_device** list = ibv_get_device_list(&ndev);
    REQUIRE(list, "ibv_get_device_list: %s", std::strerror(errno));
    ibv_device* dev = nullptr;
    for (int i = 0; i < ndev; ++i)
        if (want == ibv_get_device_name(list[i])) dev = list[i];
    REQUIRE(dev, "device %s not listed (%d devices)", want.c_str(), ndev);
    ibv_context* ctx = ibv_open_device(dev);
    REQUIRE(ctx, "ibv_open_device: %s", std::strerror(errno));
    ibv_free_device_list(list);

    // GID 0 is the device's IPv4-mapped GID (the empty entries after it: below).
    ibv_gid gid{};
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "query_gid index 0 failed");
    CHECK(gid.raw[10] == 0xff && gid.raw[11] == 0xff, "GID 0 is not IPv4-mapped");

    ibv_pd* pd = ibv_alloc_pd(ctx);
    REQUIRE(pd, "ibv_alloc_pd: %s", std::strerror(errno));
    ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    REQUIRE(cq, "ibv_create_cq: %s", std::strerror(errno));

    // A CQ of zero entries cannot exist (the kernel's rxe_cq_chk_attr says the same).
    errno = 0;
    ibv_cq* zero = ibv_create_cq(ctx, 0, nullptr, nullptr, 0);
    CHECK(zero == nullptr, "ibv_create_cq(cqe=0) succeeded");
    CHECK(errno == EINVAL, "ibv_create_cq(cqe=0): errno %d (%s), want EINVAL", errno,
          std::strerror(errno));
    if (zero) ibv_destroy_cq(zero);
    // max_cqe is the largest CQ there is: one more is EINVAL (rdma-core's test_create_cq_bad_flow).
    ibv_device_attr da{};
    REQUIRE(ibv_query_device(ctx, &da) == 0, "ibv_query_device: %s", std::strerror(errno));
    ibv_cq* biggest = ibv_create_cq(ctx, da.max_cqe, nullptr, nullptr, 0);
    CHECK(biggest != nullptr, "ibv_create_cq(max_cqe %d): %s", da.max_cqe, std::strerror(errno));
    if (biggest) ibv_destroy_cq(biggest);
    errno = 0;
    ibv_cq* over = ibv_create_cq(ctx, da.max_cqe + 1, nullptr, nullptr, 0);
    CHECK(over == nullptr, "ibv_create_cq(max_cqe + 1) succeeded");
    CHECK(errno == EINVAL, "ibv_create_cq(max_cqe + 1): errno %d (%s), want EINVAL", errno,
          std::strerror(errno));
    if (over) ibv_destroy_cq(over);
    // rdma-core fills phys_port_cnt_ex for every device (test_phys_port_cnt_ex).
    ibv_device_attr_ex dax{};
    REQUIRE(ibv_query_device_ex(ctx, nullptr, &dax) == 0, "ibv_query_device_ex: %s",
            std::strerror(errno));
    CHECK(dax.phys_port_cnt_ex == dax.orig_attr.phys_port_cnt, "phys_port_cnt_ex %u, want %u",
          dax.phys_port_cnt_ex, unsigned(dax.orig_attr.phys_port_cnt));
    // A GID table with room beyond the one GID: empty entries read as zero through
    // ibv_query_gid, and ibv_query_gid_ex says ENODATA (rdma-core's test_query_gid_ex_bad_flow).
    ibv_port_attr pa{};
    REQUIRE(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port: %s", std::strerror(errno));
    CHECK(pa.gid_tbl_len > 1, "gid_tbl_len %d: no empty entry", pa.gid_tbl_len);
    ibv_gid g0{}, g1{};
    std::memset(&g1, 0xa5, sizeof g1);
    CHECK(ibv_query_gid(ctx, 1, 0, &g0) == 0 && std::memcmp(&g0, &gid, sizeof g0) == 0,
          "GID 0 changed");
    CHECK(ibv_query_gid(ctx, 1, 1, &g1) == 0, "ibv_query_gid(1): %s", std::strerror(errno));
    static const ibv_gid kEmptyGid{};
    CHECK(std::memcmp(&g1, &kEmptyGid, sizeof g1) == 0, "the empty GID 1 is not zero");
    errno = 0;
    CHECK(ibv_query_gid(ctx, 1, pa.gid_tbl_len, &g1) == -1 && errno == EINVAL,
          "ibv_query_gid(gid_tbl_len): errno %d, want EINVAL", errno);
    ibv_gid_entry ge{};
    int r = ibv_query_gid_ex(ctx, 1, 1, &ge, 0);
    CHECK(r == ENODATA, "ibv_query_gid_ex(empty index 1): %d, want ENODATA", r);
    CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_ROCE_V2,
          "ibv_query_gid_ex(0) is not the RoCE v2 GID");
    std::vector<ibv_gid_entry> table(size_t(pa.gid_tbl_len));
    ssize_t got = ibv_query_gid_table(ctx, table.data(), table.size(), 0);
    CHECK(got == 1, "ibv_query_gid_table: %zd entries, want the one GID", got);

    ibv_qp_init_attr qia = verbs_objects::qp_init_attr(cq, IBV_QPT_RC, 4, 1);
    ibv_qp_init_attr qia2 = qia;
    ibv_qp* qp = ibv_create_qp(pd, &qia);
    REQUIRE(qp, "ibv_create_qp: %s", std::strerror(errno));
    CHECK(device_state(qp) == IBV_QPS_RESET, "a new QP is %s", qp_state_name(device_state(qp)));

    // Source (first page) and destination (second page) of the final SEND.
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    auto* buf = static_cast<char*>(std::aligned_alloc(page, 2 * page));
    REQUIRE(buf, "aligned_alloc");
    std::memset(buf, 0, 2 * page);
    ibv_mr* mr = ibv_reg_mr(pd, buf, 2 * page, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr, "ibv_reg_mr: %s", std::strerror(errno));

    // Posting to a RESET QP: rejected with the first WR as bad_wr (rxe and mlx5 agree).
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 16, mr->lkey};
    ibv_send_wr swr2{};
    swr2.wr_id = 2;
    swr2.sg_list = &sge;
    swr2.num_sge = 1;
    swr2.opcode = IBV_WR_SEND;
    ibv_send_wr swr1 = swr2;
    swr1.wr_id = 1;
    swr1.next = &swr2;
    ibv_send_wr* bad_s = nullptr;
    int e = ibv_post_send(qp, &swr1, &bad_s);
    CHECK(e == EINVAL, "post_send in RESET returned %d, want EINVAL", e);
    CHECK(bad_s == &swr1, "post_send in RESET: bad_wr %p, want the first WR %p",
          static_cast<void*>(bad_s), static_cast<void*>(&swr1));
    ibv_recv_wr rwr{};
    rwr.wr_id = 3;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    e = ibv_post_recv(qp, &rwr, &bad_r);
    CHECK(e == EINVAL, "post_recv in RESET returned %d, want EINVAL", e);
    CHECK(bad_r == &rwr, "post_recv in RESET: bad_wr not set to the WR");

    // RESET -> INIT with a wrong mask, RESET -> RTR: EINVAL, and the QP stays RESET.
    ibv_qp_attr a = init_attr();
    e = ibv_modify_qp(qp, &a, kInitMask & ~IBV_QP_PORT);
    CHECK(e == EINVAL, "RESET->INIT without IBV_QP_PORT returned %d, want EINVAL", e);
    // The library's cached state must not have moved either (before query_qp refreshes it).
    CHECK(qp->state == IBV_QPS_RESET, "ibv_qp.state is %s", qp_state_name(qp->state));
    CHECK(device_state(qp) == IBV_QPS_RESET, "after a failed modify the QP is %s",
          qp_state_name(device_state(qp)));
    a = init_attr();
    a.sq_psn = 7;
    e = ibv_modify_qp(qp, &a, kInitMask | IBV_QP_SQ_PSN);
    CHECK(e == EINVAL, "RESET->INIT with an extra IBV_QP_SQ_PSN returned %d, want EINVAL", e);
    CHECK(device_state(qp) == IBV_QPS_RESET, "after a failed modify the QP is %s",
          qp_state_name(device_state(qp)));
    a = init_attr();
    a.port_num = 2;  // the device has one port
    e = ibv_modify_qp(qp, &a, kInitMask);
    CHECK(e == EINVAL, "RESET->INIT to port 2 returned %d, want EINVAL", e);
    CHECK(device_state(qp) == IBV_QPS_RESET, "after a failed modify the QP is %s",
          qp_state_name(device_state(qp)));
    a = rtr_attr(qp->qp_num, gid);
    e = ibv_modify_qp(qp, &a, kRtrMask);
    CHECK(e == EINVAL, "RESET->RTR returned %d, want EINVAL", e);
    CHECK(device_state(qp) == IBV_QPS_RESET, "after RESET->RTR the QP is %s",
          qp_state_name(device_state(qp)));

    // INIT, then RTR with an address that has no GRH: RoCE cannot route it.
    a = init_attr();
    e = ibv_modify_qp(qp, &a, kInitMask);
    REQUIRE(e == 0, "RESET->INIT: %s", std::strerror(e));
    a = rtr_attr(qp->qp_num, gid);
    a.ah_attr.is_global = 0;
    a.ah_attr.dlid = 1;
    e = ibv_modify_qp(qp, &a, kRtrMask);
    CHECK(e == EINVAL, "RTR with is_global=0 returned %d, want EINVAL", e);
    CHECK(device_state(qp) == IBV_QPS_INIT, "after a failed RTR the QP is %s",
          qp_state_name(device_state(qp)));
    a = rtr_attr(qp->qp_num, gid);
    a.ah_attr.grh.sgid_index = 1;  // no such GID
    e = ibv_modify_qp(qp, &a, kRtrMask);
    CHECK(e == EINVAL, "RTR with sgid_index 1 returned %d, want EINVAL", e);
    CHECK(device_state(qp) == IBV_QPS_INIT, "after a failed RTR the QP is %s",
          qp_state_name(device_state(qp)));

    // Registering memory that is not mapped fails at registration with EFAULT, as the
    // kernel's page pinning does: a fully unmapped range, and one with a hole.
    void* region =
        mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(region != MAP_FAILED, "mmap");
    REQUIRE(munmap(static_cast<char*>(region) + page, page) == 0, "munmap middle page");
    auto refused_efault = [&](const char* what) {
        errno = 0;
        ibv_mr* m = ibv_reg_mr(pd, region, 3 * page, IBV_ACCESS_LOCAL_WRITE);
        CHECK(m == nullptr, "reg_mr %s succeeded", what);
        CHECK(errno == EFAULT, "reg_mr %s: errno %d (%s), want EFAULT", what, errno,
              std::strerror(errno));
        if (m) ibv_dereg_mr(m);
    };
    refused_efault("over a hole");
    munmap(region, 3 * page);
    refused_efault("of an unmapped range");

    // Destroying what is still in use: EBUSY, and the object stays usable (below).
    e = ibv_dealloc_pd(pd);
    CHECK(e == EBUSY, "dealloc_pd with a live MR returned %d, want EBUSY", e);
    e = ibv_destroy_cq(cq);
    CHECK(e == EBUSY, "destroy_cq with a live QP returned %d, want EBUSY", e);

    // Everything still works: a loopback RC SEND from qp to a second QP.
    ibv_qp* qp2 = ibv_create_qp(pd, &qia2);
    REQUIRE(qp2, "ibv_create_qp: %s", std::strerror(errno));
    a = init_attr();
    REQUIRE(ibv_modify_qp(qp2, &a, kInitMask) == 0, "qp2 RESET->INIT");
    a = rtr_attr(qp2->qp_num, gid);
    REQUIRE((e = ibv_modify_qp(qp, &a, kRtrMask)) == 0, "qp INIT->RTR: %s", std::strerror(e));
    a = rtr_attr(qp->qp_num, gid);
    REQUIRE((e = ibv_modify_qp(qp2, &a, kRtrMask)) == 0, "qp2 INIT->RTR: %s", std::strerror(e));
    a = rts_attr();
    REQUIRE((e = ibv_modify_qp(qp, &a, kRtsMask)) == 0, "qp RTR->RTS: %s", std::strerror(e));
    a = rts_attr();
    REQUIRE((e = ibv_modify_qp(qp2, &a, kRtsMask)) == 0, "qp2 RTR->RTS: %s", std::strerror(e));

    char* src = buf;
    char* dst = buf + page;
    const char msg[] = "bad input disturbed nothing";
    std::memcpy(src, msg, sizeof msg);
    std::memset(dst, 0x7e, 64);
    ibv_sge rsge{reinterpret_cast<uintptr_t>(dst), 64, mr->lkey};
    rwr.wr_id = 20;
    rwr.sg_list = &rsge;
    bad_r = nullptr;
    REQUIRE((e = ibv_post_recv(qp2, &rwr, &bad_r)) == 0, "post_recv: %s", std::strerror(e));
    ibv_sge ssge{reinterpret_cast<uintptr_t>(src), sizeof msg, mr->lkey};
    ibv_send_wr swr = verbs_objects::send_wr(10, IBV_WR_SEND, &ssge);
    bad_s = nullptr;
    REQUIRE((e = ibv_post_send(qp, &swr, &bad_s)) == 0, "post_send: %s", std::strerror(e));
    bool got_send = false, got_recv = false;
    for (int i = 0; i < 2; ++i) {
        ibv_wc wc{};
        if (!poll_one(cq, &wc)) {
            CHECK(false, "completion %d did not arrive", i + 1);
            break;
        }
        CHECK(wc.status == IBV_WC_SUCCESS, "wr_id %llu: %s", (unsigned long long)wc.wr_id,
              ibv_wc_status_str(wc.status));
        if (wc.wr_id == 10) {
            got_send = true;
            CHECK(wc.opcode == IBV_WC_SEND, "send CQE opcode %d", int(wc.opcode));
            CHECK(wc.qp_num == qp->qp_num, "send CQE qp_num %u", wc.qp_num);
        } else if (wc.wr_id == 20) {
            got_recv = true;
            CHECK(wc.opcode == IBV_WC_RECV, "recv CQE opcode %d", int(wc.opcode));
            CHECK(wc.byte_len == sizeof msg, "recv byte_len %u, want %zu", wc.byte_len, sizeof msg);
            CHECK(wc.qp_num == qp2->qp_num, "recv CQE qp_num %u", wc.qp_num);
            CHECK(wc.src_qp == qp->qp_num, "recv CQE src_qp %u", wc.src_qp);
        } else {
            CHECK(false, "unexpected wr_id %llu", (unsigned long long)wc.wr_id);
        }
    }
    CHECK(got_send && got_recv, "missing completion (send %d recv %d)", got_send, got_recv);
    CHECK(std::memcmp(dst, msg, sizeof msg) == 0, "received bytes differ");
    CHECK(static_cast<unsigned char>(dst[sizeof msg]) == 0x7e,
          "byte after the message was written");

    // Memory unmapped after registration: the device reads the sender's memory as it
    // builds the packets (with one system call for a burst of them), so a SEND over 4 pages
    // whose third is gone completes with IBV_WC_LOC_PROT_ERR and the QP enters the error
    // state. The packets of the first two pages may have left; the receiver (no receive
    // posted) completes nothing.
    void* holey =
        mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(holey != MAP_FAILED, "mmap");
    std::memset(holey, 0x5a, 4 * page);
    ibv_mr* mr_holey = ibv_reg_mr(pd, holey, 4 * page, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr_holey, "reg_mr: %s", std::strerror(errno));
    REQUIRE(munmap(static_cast<char*>(holey) + 2 * page, page) == 0, "munmap third page");
    ibv_sge hsge{reinterpret_cast<uintptr_t>(holey), uint32_t(4 * page), mr_holey->lkey};
    swr.wr_id = 30;
    swr.sg_list = &hsge;
    bad_s = nullptr;
    REQUIRE((e = ibv_post_send(qp, &swr, &bad_s)) == 0, "post_send: %s", std::strerror(e));
    ibv_wc hwc{};
    if (poll_one(cq, &hwc)) {
        CHECK(hwc.wr_id == 30 && hwc.status == IBV_WC_LOC_PROT_ERR,
              "SEND from unmapped memory: wr_id %llu status %s, want 30 and %s",
              (unsigned long long)hwc.wr_id, ibv_wc_status_str(hwc.status),
              ibv_wc_status_str(IBV_WC_LOC_PROT_ERR));
    } else {
        CHECK(false, "no completion for a SEND from unmapped memory");
    }
    CHECK(device_state(qp) == IBV_QPS_ERR, "after LOC_PROT_ERR the QP is %s",
          qp_state_name(device_state(qp)));
    CHECK((e = ibv_dereg_mr(mr_holey)) == 0, "dereg_mr: %s", std::strerror(e));
    munmap(holey, 4 * page);

    // Tear down in order; every destroy must succeed now that nothing depends on it.
    CHECK((e = ibv_destroy_qp(qp)) == 0, "destroy qp: %s", std::strerror(e));
    CHECK((e = ibv_destroy_qp(qp2)) == 0, "destroy qp2: %s", std::strerror(e));
    CHECK((e = ibv_dereg_mr(mr)) == 0, "dereg_mr: %s", std::strerror(e));
    CHECK((e = ibv_destroy_cq(cq)) == 0, "destroy_cq: %s", std::strerror(e));
    CHECK((e = ibv_dealloc_pd(pd)) == 0, "dealloc_pd: %s", std::strerror(e));

    // The device agrees that nothing is left but our session: the destroys above really
    // destroyed (closing the device would clean up anyway and hide a leak).
    auto counts = device_counts(cli);
    CHECK(!counts.empty(), "no counts line from `%s res`", cli.c_str());
    for (const auto& [name, n] : counts) {
        long want_n = name == "sessions" ? 1 : 0;
        CHECK(n == want_n, "device holds %ld %s before close, want %ld", n, name.c_str(), want_n);
    }

    CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
    std::free(buf);
    if (g_failures) {
        std::fprintf(stderr, "%d check(s) failed\n", g_failures);
        return 1;
    }
    std::printf("all checks passed\n");
    return 0;
}
