// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Sends RoCEv2 packets whose GRH has a given traffic class and hop limit, through the public
// verbs API (built against the system's <infiniband/verbs.h>, run over the drop-in
// libibverbs), for a capture on the wire to look at (ip_marks_test.sh).
//
// usage: ip_marks_send PEER_IPV4 TCLASS HOP_LIMIT
//   On the first device: a UD QP sends kUdSends 64-byte SENDs through an AH with that GRH to
//   QP kNoQpn at PEER (which has no such QP: the peer device drops them, the sends complete
//   here as UD sends do); then an RC QP whose address vector (ibv_modify_qp, IBV_QP_AV) has
//   that GRH sends one SEND to QP kNoQpn at PEER, which nobody acknowledges: it is sent
//   1 + retry_cnt times and completes with IBV_WC_RETRY_EXC_ERR.
// Exits 0 when both completed so; prints each mismatch and exits 1 otherwise.
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "verbs_checks.h"
#include "verbs_objects.h"

namespace {

constexpr int kUdSends = 8;
constexpr uint32_t kNoQpn = 0x123456, kQkey = 0x11111111;
constexpr uint8_t kRetryCnt = 2;

ibv_wc wait_one(ibv_cq* cq) {
    ibv_wc wc{};
    const time_t end = time(nullptr) + 10;
    int n;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
        REQUIRE(time(nullptr) < end, "no completion in 10 s");
    REQUIRE(n == 1, "ibv_poll_cq: %d", n);
    return wc;
}

ibv_ah_attr av(const ibv_gid& dgid, uint8_t tclass, uint8_t hop_limit) {
    ibv_ah_attr a{};
    a.is_global = 1;
    a.port_num = 1;
    a.grh.dgid = dgid;
    a.grh.sgid_index = 0;
    a.grh.traffic_class = tclass;
    a.grh.hop_limit = hop_limit;
    return a;
}

}  // namespace

int main(int argc, char** argv) {
    REQUIRE(argc == 4, "usage: ip_marks_send PEER_IPV4 TCLASS HOP_LIMIT");
    in_addr peer{};
    REQUIRE(inet_pton(AF_INET, argv[1], &peer) == 1, "bad address %s", argv[1]);
    const auto tclass = uint8_t(std::strtoul(argv[2], nullptr, 0));
    const auto hop_limit = uint8_t(std::strtoul(argv[3], nullptr, 0));
    ibv_gid dgid{};
    dgid.raw[10] = dgid.raw[11] = 0xff;
    std::memcpy(dgid.raw + 12, &peer, 4);

    int num = 0;
    ibv_device** list = ibv_get_device_list(&num);
    REQUIRE(list && num > 0, "no device");
    ibv_context* ctx = ibv_open_device(list[0]);
    REQUIRE(ctx, "ibv_open_device: %s", std::strerror(errno));
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    REQUIRE(pd && cq, "PD/CQ: %s", std::strerror(errno));
    static char buf[64];
    ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr, "ibv_reg_mr: %s", std::strerror(errno));
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof buf, mr->lkey};

    // UD: the AH's GRH.
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.cap = {16, 1, 1, 1, 0};
    ia.qp_type = IBV_QPT_UD;
    ibv_qp* ud = ibv_create_qp(pd, &ia);
    REQUIRE(ud, "ibv_create_qp UD: %s", std::strerror(errno));
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kQkey;
    REQUIRE(!ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
            "UD INIT");
    a = {};
    a.qp_state = IBV_QPS_RTR;
    REQUIRE(!ibv_modify_qp(ud, &a, IBV_QP_STATE), "UD RTR");
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    REQUIRE(!ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "UD RTS");
    ibv_ah_attr aa = av(dgid, tclass, hop_limit);
    ibv_ah* ah = ibv_create_ah(pd, &aa);
    REQUIRE(ah, "ibv_create_ah: %s", std::strerror(errno));
    for (int i = 0; i < kUdSends; ++i) {
        ibv_send_wr wr = verbs_objects::send_wr(0, IBV_WR_SEND, &sge), *bad = nullptr;
        wr.wr.ud = {ah, kNoQpn, kQkey};
        REQUIRE(!ibv_post_send(ud, &wr, &bad), "ibv_post_send UD");
        ibv_wc wc = wait_one(cq);
        CHECK(wc.status == IBV_WC_SUCCESS, "UD send %d: %s", i, ibv_wc_status_str(wc.status));
    }
    std::printf("ud: %d sends through an AH with traffic class 0x%02x, hop limit %u\n", kUdSends,
                tclass, hop_limit);

    // RC: the QP's address vector.
    ia.qp_type = IBV_QPT_RC;
    ibv_qp* rc = ibv_create_qp(pd, &ia);
    REQUIRE(rc, "ibv_create_qp RC: %s", std::strerror(errno));
    a = {};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    REQUIRE(!ibv_modify_qp(rc, &a,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            "RC INIT");
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.ah_attr = av(dgid, tclass, hop_limit);
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = kNoQpn;
    a.rq_psn = 1;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    REQUIRE(!ibv_modify_qp(rc, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            "RC RTR: %s", std::strerror(errno));
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    a.timeout = 12;  // 16 ms
    a.retry_cnt = kRetryCnt;
    a.rnr_retry = 0;
    a.max_rd_atomic = 1;
    REQUIRE(!ibv_modify_qp(rc, &a,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
            "RC RTS: %s", std::strerror(errno));
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    REQUIRE(!ibv_post_send(rc, &wr, &bad), "ibv_post_send RC");
    ibv_wc wc = wait_one(cq);
    CHECK(wc.status == IBV_WC_RETRY_EXC_ERR, "RC send: %s, not retry exceeded",
          ibv_wc_status_str(wc.status));
    std::printf(
        "rc: one send, %u retries, through an address vector with traffic class 0x%02x, "
        "hop limit %u\n",
        kRetryCnt, tclass, hop_limit);

    ibv_destroy_qp(rc);
    ibv_destroy_qp(ud);
    ibv_destroy_ah(ah);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return g_failures ? 1 : 0;
}
