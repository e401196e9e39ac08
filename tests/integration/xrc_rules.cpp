// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// xrc_verbs' `rules` mode (xrc_verbs.h): one check per sentence of ibv_open_xrcd(3) and the
// XRC parts of the other verbs' man pages, with the Linux kernel's errno values.
#include "tests/integration/xrc_verbs.h"

namespace xrc_test {

namespace {

// ---------------------------------------------------------------- the `rules` mode

struct Loop {  // one INI -> TGT pair inside one context, its buffers and CQs
    ibv_context* ctx;
    ibv_pd* pd;
    ibv_cq* scq;
    ibv_cq* rcq;
    ibv_mr* mr;
    char* buf;
    ibv_qp* ini;
    ibv_qp* tgt;
    ibv_gid gid;
};

// Sends one message to `srqn` and returns the initiator's completion status.
ibv_wc_status send_status(Loop& l, uint32_t srqn, uint32_t len, uint64_t wr_id) {
    char* src = l.buf + 60 * kSlot;
    std::snprintf(src, kSlot, "message %llu", static_cast<unsigned long long>(wr_id));
    int e = post_xrc_send(l.ini, l.mr, src, len, srqn, wr_id);
    CHECK(e == 0, "ibv_post_send on the INI QP returned %d", e);
    if (e) return IBV_WC_GENERAL_ERR;
    ibv_wc wc{};
    bool got = poll_one(l.scq, &wc);
    CHECK(got, "no send completion for wr_id %llu", static_cast<unsigned long long>(wr_id));
    if (!got) return IBV_WC_GENERAL_ERR;
    CHECK(wc.wr_id == wr_id, "send completion wr_id %llu, want %llu",
          static_cast<unsigned long long>(wc.wr_id), static_cast<unsigned long long>(wr_id));
    return wc.status;
}

// One message through the TGT QP into the SRQ: it must complete on the SRQ's CQ, name the
// TGT QP, and land byte for byte in the receive buffer.
void expect_delivery(Loop& l, uint32_t srqn, uint64_t wr_id, const char* what) {
    ibv_wc_status st = send_status(l, srqn, 200, wr_id);
    CHECK(st == IBV_WC_SUCCESS, "%s: send status %s", what, ibv_wc_status_str(st));
    ibv_wc wc{};
    bool got = poll_one(l.rcq, &wc);
    CHECK(got, "%s: no receive completion", what);
    if (!got) return;
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 200 &&
              wc.qp_num == l.tgt->qp_num,
          "%s: receive status %s opcode %d byte_len %u qp_num 0x%x (want RECV 200 on 0x%x)", what,
          ibv_wc_status_str(wc.status), int(wc.opcode), wc.byte_len, wc.qp_num, l.tgt->qp_num);
    char want[64];
    std::snprintf(want, sizeof want, "message %llu", static_cast<unsigned long long>(wr_id));
    CHECK(wc.wr_id < 60 && std::strcmp(l.buf + wc.wr_id * kSlot, want) == 0,
          "%s: receive buffer %llu holds '%.20s', want '%s'", what,
          static_cast<unsigned long long>(wc.wr_id), l.buf + (wc.wr_id % 60) * kSlot, want);
}

// A message naming an SRQ the TGT QP may not use: the initiator's WR completes with
// IBV_WC_REM_INV_REQ_ERR, the TGT QP raises IBV_EVENT_QP_REQ_ERR and enters ERR, and
// nothing reaches any receive queue. Then both QPs are reset and reconnected.
// True if `uroce trace DEVICE` has a line containing every one of `words`.
bool trace_has(const std::vector<std::string>& words) {
    for (const auto& line : cli_lines("trace")) {
        bool all = true;
        for (const auto& w : words) all = all && line.find(w) != std::string::npos;
        if (all) return true;
    }
    return false;
}

// `why`: how the device's trace explains the refusal ("which does not exist", ...).
void expect_rejected(Loop& l, uint32_t srqn, const char* what, const char* why) {
    static uint64_t id = 1000;
    ibv_wc_status st = send_status(l, srqn, 64, ++id);
    CHECK(st == IBV_WC_REM_INV_REQ_ERR, "%s: initiator status %s, want REM_INV_REQ_ERR", what,
          ibv_wc_status_str(st));
    expect_event(l.ctx, IBV_EVENT_QP_REQ_ERR, l.tgt, what);
    CHECK(state_of(l.tgt) == IBV_QPS_ERR, "%s: TGT QP not in ERR", what);
    ibv_wc wc{};
    CHECK(ibv_poll_cq(l.rcq, 1, &wc) == 0, "%s: a receive completed (status %s)", what,
          ibv_wc_status_str(wc.status));
    char tgt[64], named[64];
    std::snprintf(tgt, sizeof tgt, "qp 0x%x (XRC_TGT, xrcd ", l.tgt->qp_num);
    std::snprintf(named, sizeof named, "): request names srq %u, %s", srqn, why);
    CHECK(trace_has({tgt, named}), "%s: no trace line '%s...%s'", what, tgt, named);
    // Reset and reconnect both halves for the next case (PSNs start over).
    EXPECT_RET(to_reset(l.tgt), 0);
    EXPECT_RET(to_reset(l.ini), 0);
    while (ibv_poll_cq(l.scq, 1, &wc) == 1) {
    }
    EXPECT_RET(to_init(l.tgt, true), 0);
    EXPECT_RET(to_init(l.ini, false), 0);
    connect_tgt(l.tgt, l.ini->qp_num, l.gid, 0x100);
    connect_ini(l.ini, l.tgt->qp_num, l.gid, 0x100);
}

}  // namespace

int run_rules(const std::string& dir) {
    ibv_context* ctx = open_ctx();
    ibv_context* ctx2 = open_ctx();  // a second session: what another process would be
    const std::string F = dir + "/domain_F", H = dir + "/domain_H", M = dir + "/domain_M";
    int fd = open(F.c_str(), O_RDONLY | O_CREAT, 0600);
    int mfd = open(M.c_str(), O_RDONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0 && mfd >= 0, "cannot create files in %s", dir.c_str());
    const std::string f_ino = inode_of(F);

    // --- ibv_open_xrcd: comp_mask. "fd and oflags" are both needed (rdma-core's
    // ibv_cmd_open_xrcd): either missing is EINVAL, an unknown bit EOPNOTSUPP.
    EXPECT_NULL_ERRNO(open_xrcd(ctx, fd, O_CREAT, 0), EINVAL);
    EXPECT_NULL_ERRNO(open_xrcd(ctx, fd, O_CREAT, IBV_XRCD_INIT_ATTR_FD), EINVAL);
    EXPECT_NULL_ERRNO(open_xrcd(ctx, fd, O_CREAT, IBV_XRCD_INIT_ATTR_OFLAGS), EINVAL);
    EXPECT_NULL_ERRNO(
        open_xrcd(ctx, fd, O_CREAT,
                  IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED),
        EOPNOTSUPP);
    // "a bad fd": a closed descriptor and a negative one other than -1.
    int closed = dup(fd);
    close(closed);
    EXPECT_NULL_ERRNO(open_xrcd(ctx, closed, O_CREAT), EBADF);
    EXPECT_NULL_ERRNO(open_xrcd(ctx, -2, O_CREAT), EBADF);
    // Without O_CREAT a domain that does not exist yet is EAGAIN (the kernel's value).
    EXPECT_NULL_ERRNO(open_xrcd(ctx, fd, 0), EAGAIN);
    EXPECT_NULL_ERRNO(open_xrcd(ctx, mfd, O_RDONLY), EAGAIN);
    CHECK(res("xrcd").empty(), "a failed ibv_open_xrcd left a domain behind");

    // --- "If fd equals -1, no inode is associated with the XRCD. To indicate that XRCD
    // should be created, use oflag = O_CREAT." Each such open is a domain of its own.
    ibv_xrcd* d1 = open_xrcd(ctx, -1, O_CREAT);
    ibv_xrcd* d2 = open_xrcd(ctx2, -1, O_CREAT);
    REQUIRE(d1 && d2, "ibv_open_xrcd(fd -1, O_CREAT): %s", std::strerror(errno));
    // "open an XRC domain for the RDMA device context context".
    CHECK(d1->context == ctx && d2->context == ctx2, "xrcd->context is not the context opened on");
    auto priv = xrcd_lines("-");
    CHECK(priv.size() == 2, "%zu xrcd lines without inode, want 2 (two private domains)",
          priv.size());
    for (auto& w : priv)
        CHECK(field(w, "handles") == "1", "private domain %s has %s handles", w[1].c_str(),
              field(w, "handles").c_str());
    // As the kernel: with fd -1 a domain is created whatever oflag says.
    ibv_xrcd* d0 = open_xrcd(ctx, -1, 0);
    CHECK(d0, "ibv_open_xrcd(fd -1, 0): %s", std::strerror(errno));
    if (d0) EXPECT_RET(ibv_close_xrcd(d0), 0);

    // --- O_CREAT: "an XRCD should be created and associated with the inode referenced by
    // the given fd. If the XRCD exists, this flag has no effect".
    ibv_xrcd* xf1 = open_xrcd(ctx, fd, O_CREAT);
    REQUIRE(xf1, "ibv_open_xrcd(F, O_CREAT): %s", std::strerror(errno));
    auto fl = xrcd_lines(f_ino);
    CHECK(fl.size() == 1 && field(fl[0], "handles") == "1",
          "after creating F's domain: %zu lines for inode %s", fl.size(), f_ino.c_str());
    ibv_xrcd* xf2 = open_xrcd(ctx2, fd, O_CREAT);  // joins
    REQUIRE(xf2, "ibv_open_xrcd(F, O_CREAT) again: %s", std::strerror(errno));
    // Another descriptor of the same file, and a hard link: the same inode, the same domain,
    // found without O_CREAT.
    const std::string L = dir + "/domain_F_link";
    unlink(L.c_str());
    REQUIRE(link(F.c_str(), L.c_str()) == 0, "link: %s", std::strerror(errno));
    int lfd = open(L.c_str(), O_RDONLY);
    ibv_xrcd* xf3 = open_xrcd(ctx, lfd, 0);
    CHECK(xf3, "ibv_open_xrcd(hard link of F, 0): %s", std::strerror(errno));
    fl = xrcd_lines(f_ino);
    CHECK(fl.size() == 1 && field(fl[0], "handles") == (xf3 ? "3" : "2"),
          "after three opens of F: %zu lines, handles %s", fl.size(),
          fl.empty() ? "-" : field(fl[0], "handles").c_str());
    // O_EXCL: "If O_EXCL and O_CREAT are set, open will fail if an XRCD associated with
    // the inode exists" (EINVAL, the kernel's value; O_EXCL alone too, as the kernel).
    EXPECT_NULL_ERRNO(open_xrcd(ctx, fd, O_CREAT | O_EXCL), EINVAL);
    EXPECT_NULL_ERRNO(open_xrcd(ctx2, fd, O_EXCL), EINVAL);
    int hfd = open(H.c_str(), O_RDONLY | O_CREAT, 0600);
    ibv_xrcd* xh = open_xrcd(ctx, hfd, O_CREAT | O_EXCL);  // a new one: created
    CHECK(xh, "ibv_open_xrcd(H, O_CREAT|O_EXCL) on a new domain: %s", std::strerror(errno));
    CHECK(xrcd_lines(inode_of(H)).size() == 1, "no xrcd line for H's inode");
    fl = xrcd_lines(f_ino);
    CHECK(fl.size() == 1, "the failed O_EXCL opens changed F's domain");

    // --- ibv_close_xrcd "returns 0 on success".
    if (xf3) EXPECT_RET(ibv_close_xrcd(xf3), 0);
    close(lfd);

    // --- ibv_open_qp: only a TGT QP "within the xrcd with the specified qp_num and qp_type".
    ibv_qp* tf = create_tgt(ctx, xf1);
    ibv_qp* tp = create_tgt(ctx, d1);
    REQUIRE(tf && tp, "ibv_create_qp_ex(XRC_RECV): %s", std::strerror(errno));
    CHECK(tf->qp_type == IBV_QPT_XRC_RECV && tf->qp_num, "TGT QP type %d qp_num %u",
          int(tf->qp_type), tf->qp_num);
    ibv_qp* of = open_qp(ctx2, xf2, tf->qp_num);  // same file's domain: works
    CHECK(of && of->qp_num == tf->qp_num && of->qp_type == IBV_QPT_XRC_RECV,
          "ibv_open_qp through the same file's domain: %s", of ? "wrong qp" : std::strerror(errno));
    EXPECT_NULL_ERRNO(open_qp(ctx2, d2, tf->qp_num), EINVAL);   // a private domain
    EXPECT_NULL_ERRNO(open_qp(ctx2, d2, tp->qp_num), EINVAL);   // another private domain
    EXPECT_NULL_ERRNO(open_qp(ctx2, xf2, tp->qp_num), EINVAL);  // d1's QP through F's domain
    EXPECT_NULL_ERRNO(open_qp(ctx, xh, tf->qp_num), EINVAL);    // another file's domain
    EXPECT_NULL_ERRNO(open_qp(ctx2, xf2, 0xfffff0), EINVAL);    // no such QP
    EXPECT_NULL_ERRNO(
        open_qp(ctx2, xf2, tf->qp_num,
                IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE, IBV_QPT_RC),
        EINVAL);  // the wrong qp_type
    EXPECT_NULL_ERRNO(open_qp(ctx2, xf2, tf->qp_num, IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE),
                      EINVAL);
    EXPECT_NULL_ERRNO(open_qp(ctx2, xf2, tf->qp_num, IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_TYPE),
                      EINVAL);
    EXPECT_NULL_ERRNO(open_qp(ctx2, xf2, tf->qp_num, IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD),
                      EINVAL);

    // --- ibv_create_qp_ex: a TGT QP needs its XRCD, an INI QP its PD and send CQ.
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* scq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ibv_cq* rcq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    REQUIRE(pd && scq && rcq, "pd/cq: %s", std::strerror(errno));
    EXPECT_NULL_ERRNO(create_tgt(ctx, xf1, 0), EINVAL);
    EXPECT_NULL_ERRNO(create_tgt(ctx, nullptr, IBV_QP_INIT_ATTR_XRCD), EINVAL);
    {
        ibv_qp_init_attr_ex a{};  // a PD but no XRCD (verbs.h routes this to ibv_create_qp)
        a.qp_type = IBV_QPT_XRC_RECV;
        a.comp_mask = IBV_QP_INIT_ATTR_PD;
        a.pd = pd;
        EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &a), EINVAL);
    }
    EXPECT_NULL_ERRNO(create_ini(ctx, pd, nullptr), EINVAL);      // no send CQ
    EXPECT_NULL_ERRNO(create_ini(ctx, nullptr, scq, 0), EINVAL);  // no PD
    // The INI QP goes through the state machine with the pingpong's masks; a mask missing
    // a required attribute is EINVAL and leaves the state alone.
    ibv_qp* ini = create_ini(ctx, pd, scq);
    REQUIRE(ini, "ibv_create_qp_ex(XRC_SEND): %s", std::strerror(errno));
    CHECK(ini->qp_type == IBV_QPT_XRC_SEND, "INI QP type %d", int(ini->qp_type));
    CHECK(res("qp").size() == 3, "uroce res qp does not list the three QPs");

    // --- ibv_create_srq_ex(IBV_SRQT_XRC): XRCD, CQ and PD are all needed.
    const uint32_t all = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                         IBV_SRQ_INIT_ATTR_CQ;
    EXPECT_NULL_ERRNO(create_xrc_srq(ctx, pd, d1, rcq, 16, all & ~IBV_SRQ_INIT_ATTR_XRCD), EINVAL);
    EXPECT_NULL_ERRNO(create_xrc_srq(ctx, pd, nullptr, rcq, 16), EINVAL);
    EXPECT_NULL_ERRNO(create_xrc_srq(ctx, pd, d1, rcq, 16, all & ~IBV_SRQ_INIT_ATTR_CQ), EINVAL);
    EXPECT_NULL_ERRNO(create_xrc_srq(ctx, pd, d1, nullptr, 16), EINVAL);
    EXPECT_NULL_ERRNO(create_xrc_srq(ctx, pd, d1, rcq, 16, all & ~IBV_SRQ_INIT_ATTR_PD), EINVAL);
    EXPECT_NULL_ERRNO(create_xrc_srq(ctx, nullptr, d1, rcq, 16), EINVAL);
    CHECK(res("srq").empty(), "a failed ibv_create_srq_ex left an SRQ behind");
    ibv_srq* s1 = create_xrc_srq(ctx, pd, d1, rcq, 16);
    ibv_srq* sb = create_basic_srq(ctx, pd);
    ibv_srq* sh = create_xrc_srq(ctx, pd, xh, rcq, 4);  // an XRC SRQ of another domain
    REQUIRE(s1 && sb && sh, "ibv_create_srq_ex: %s", std::strerror(errno));
    uint32_t n1 = 0, nb = 0, nh = 0;
    EXPECT_RET(ibv_get_srq_num(s1, &n1), 0);
    EXPECT_RET(ibv_get_srq_num(sb, &nb), 0);
    EXPECT_RET(ibv_get_srq_num(sh, &nh), 0);
    CHECK(n1 && n1 != nb && n1 != nh && nb != nh, "SRQ numbers %u %u %u are not distinct", n1, nb,
          nh);
    {
        auto srqs = res("srq");
        int xrc = 0;
        for (auto& w : srqs) xrc += field(w, "type") == "XRC";
        CHECK(srqs.size() == 3 && xrc == 2, "uroce res srq: %zu lines, %d XRC", srqs.size(), xrc);
    }

    // --- ibv_close_xrcd "may fail if any other resource is still associated with the XRCD":
    // EBUSY while an XRC SRQ or a TGT QP created (or opened) through that handle exists.
    errno = 0;
    EXPECT_RET(ibv_close_xrcd(d1), EBUSY);  // tp and s1
    // "returns ... the value of errno on failure": errno says the same.
    CHECK(errno == EBUSY, "errno %d after a failed ibv_close_xrcd, want EBUSY", errno);
    EXPECT_RET(ibv_close_xrcd(xf1), EBUSY);  // tf
    EXPECT_RET(ibv_close_xrcd(xf2), EBUSY);  // of, opened through it (as the kernel)
    EXPECT_RET(ibv_close_xrcd(xh), EBUSY);   // sh

    // --- The data path: INI -> TGT (tp, domain d1) -> XRC SRQ s1, all in this process.
    Loop l{ctx, pd, scq, rcq, nullptr, nullptr, ini, tp, {}};
    l.buf = static_cast<char*>(aligned_alloc(4096, 64 * kSlot));
    std::memset(l.buf, 0, 64 * kSlot);
    l.mr = ibv_reg_mr(pd, l.buf, 64 * kSlot, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(l.mr, "ibv_reg_mr: %s", std::strerror(errno));
    EXPECT_RET(ibv_query_gid(ctx, 1, 0, &l.gid), 0);
    EXPECT_RET(to_init(tp, true, kInitMask & ~IBV_QP_PORT), EINVAL);
    CHECK(state_of(tp) == IBV_QPS_RESET, "a failed modify moved the TGT QP");
    EXPECT_RET(to_init(tp, true), 0);
    EXPECT_RET(to_init(ini, false), 0);
    EXPECT_RET(to_rtr(tp, ini->qp_num, l.gid, 0x100, kTgtRtrMask & ~IBV_QP_MIN_RNR_TIMER), EINVAL);
    EXPECT_RET(to_rtr(ini, tp->qp_num, l.gid, 0x100, kIniRtrMask & ~IBV_QP_AV), EINVAL);
    CHECK(state_of(ini) == IBV_QPS_INIT && state_of(tp) == IBV_QPS_INIT,
          "a failed RTR modify moved a QP");
    EXPECT_RET(to_rtr(ini, tp->qp_num, l.gid, 0x100, kIniRtrMask), 0);
    EXPECT_RET(to_rts(ini, 0x100, kIniRtsMask & ~IBV_QP_RETRY_CNT), EINVAL);
    CHECK(state_of(ini) == IBV_QPS_RTR, "a failed RTS modify moved the INI QP");
    EXPECT_RET(to_reset(ini), 0);
    EXPECT_RET(to_init(ini, false), 0);
    connect_tgt(tp, ini->qp_num, l.gid, 0x100);
    connect_ini(ini, tp->qp_num, l.gid, 0x100);

    // ibv_post_recv on either XRC QP and ibv_post_send on a TGT QP: EINVAL, *bad_wr = wr.
    {
        ibv_sge sge{reinterpret_cast<uintptr_t>(l.buf), 64, l.mr->lkey};
        ibv_recv_wr rwr{};
        rwr.sg_list = &sge;
        rwr.num_sge = 1;
        auto refuses_recv = [&](ibv_qp* qp, const char* which) {
            ibv_recv_wr* rbad = nullptr;
            EXPECT_RET(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
            CHECK(rbad == &rwr, "post_recv on %s: bad_wr not set", which);
        };
        refuses_recv(ini, "INI");
        refuses_recv(tp, "TGT");
        if (of) refuses_recv(of, "an opened TGT");
        ibv_send_wr swr{};
        swr.sg_list = &sge;
        swr.num_sge = 1;
        swr.opcode = IBV_WR_SEND;
        swr.qp_type.xrc.remote_srqn = n1;
        auto refuses_send = [&](ibv_qp* qp, const char* which) {
            ibv_send_wr* sbad = nullptr;
            EXPECT_RET(ibv_post_send(qp, &swr, &sbad), EINVAL);
            CHECK(sbad == &swr, "post_send on %s: bad_wr not set", which);
        };
        refuses_send(tp, "TGT");
        if (of) refuses_send(of, "an opened TGT");
    }

    // ibv_get_srq_num's number is the remote_srqn that reaches the SRQ.
    EXPECT_RET(post_srq_recvs(s1, l.mr, l.buf, kSlot, 0, 3), 0);
    for (uint64_t i = 1; i <= 3; ++i) expect_delivery(l, n1, i, "SEND to the XRC SRQ");

    // srq_limit (ibv_modify_srq(3)): "arms the SRQ to produce an IBV_EVENT_SRQ_LIMIT_REACHED
    // 'low watermark' asynchronous event once the number of WRs in the SRQ drops below
    // srq_limit" -- once per arming.
    {
        ibv_srq_attr a{};
        a.srq_limit = 17;
        EXPECT_RET(ibv_modify_srq(s1, &a, IBV_SRQ_LIMIT), EINVAL);  // above max_wr
        EXPECT_RET(post_srq_recvs(s1, l.mr, l.buf, kSlot, 10, 8), 0);
        a.srq_limit = 4;
        EXPECT_RET(ibv_modify_srq(s1, &a, IBV_SRQ_LIMIT), 0);
        ibv_srq_attr q{};
        EXPECT_RET(ibv_query_srq(s1, &q), 0);
        CHECK(q.srq_limit == 4, "query_srq srq_limit %u after arming 4", q.srq_limit);
        for (uint64_t i = 11; i <= 14; ++i) expect_delivery(l, n1, i, "SEND down to the limit");
        expect_no_event(ctx, 200, "4 WRs left of 8, limit 4");
        expect_delivery(l, n1, 15, "SEND below the limit");
        expect_event(ctx, IBV_EVENT_SRQ_LIMIT_REACHED, s1, "3 WRs left, limit 4");
        EXPECT_RET(ibv_query_srq(s1, &q), 0);
        CHECK(q.srq_limit == 0, "srq_limit %u after the event, want 0 (disarmed)", q.srq_limit);
        for (uint64_t i = 16; i <= 18; ++i) expect_delivery(l, n1, i, "SEND after the event");
        expect_no_event(ctx, 200, "the limit fired once already");
    }

    // A message naming an SRQ outside the TGT QP's domain is rejected.
    EXPECT_RET(post_srq_recvs(s1, l.mr, l.buf, kSlot, 20, 8), 0);
    expect_rejected(l, nb, "remote_srqn of a basic SRQ", "which is not an XRC SRQ");
    expect_delivery(l, n1, 21, "SEND after reconnecting");
    expect_rejected(l, nh, "remote_srqn of an XRC SRQ of another domain",
                    "which belongs to another XRC domain");
    expect_delivery(l, n1, 22, "SEND after reconnecting");
    expect_rejected(l, 0xabcde, "remote_srqn of no SRQ", "which does not exist");
    expect_delivery(l, n1, 23, "SEND after reconnecting");
    expect_no_event(ctx2, 100, "the opener of the other TGT QP");

    // --- A TGT QP and its handles: the opener's destroy closes only its handle, the
    // creator's destroy too while another process holds the QP (as the kernel).
    if (of) {
        EXPECT_RET(ibv_destroy_qp(of), 0);
        auto w = qp_line(tf->qp_num);
        CHECK(!w.empty(), "the TGT QP died with its opener's handle");
        EXPECT_RET(ibv_close_xrcd(xf2), 0);  // nothing left through it
    }
    xf2 = open_xrcd(ctx2, fd, 0);
    REQUIRE(xf2, "ibv_open_xrcd(F, 0) of an existing domain: %s", std::strerror(errno));
    of = open_qp(ctx2, xf2, tf->qp_num);
    CHECK(of, "ibv_open_qp again: %s", std::strerror(errno));
    EXPECT_RET(ibv_destroy_qp(tf), 0);  // the creator lets go; ctx2 still holds it
    {
        auto w = qp_line(of ? of->qp_num : 0);
        CHECK(!w.empty() && field(w, "holders") == pid_str(getpid()),
              "after the creator's destroy: qp line '%s'",
              w.empty() ? "" : field(w, "holders").c_str());
    }
    EXPECT_RET(ibv_close_xrcd(xf1), 0);  // the creator's handle is free again
    fl = xrcd_lines(f_ino);
    CHECK(fl.size() == 1 && field(fl[0], "handles") == "1" && field(fl[0], "objects") == "1",
          "F's domain after the creator left: %s",
          fl.empty()
              ? "gone"
              : (field(fl[0], "handles") + " handles " + field(fl[0], "objects") + " objects")
                    .c_str());
    EXPECT_RET(ibv_close_xrcd(xf2), EBUSY);
    if (of) {
        // The opener may modify it (RESET -> INIT works for a process that only opened it).
        EXPECT_RET(to_init(of, true), 0);
        CHECK(state_of(of) == IBV_QPS_INIT, "opened TGT QP not in INIT");
        uint32_t qpn = of->qp_num;
        EXPECT_RET(ibv_destroy_qp(of), 0);  // the last holder: the QP goes
        CHECK(qp_line(qpn).empty(), "the TGT QP outlived its last holder");
    }
    // "If this is the last reference, the XRCD will be destroyed."
    EXPECT_RET(ibv_close_xrcd(xf2), 0);
    CHECK(xrcd_lines(f_ino).empty(), "F's domain outlived its last handle");
    EXPECT_NULL_ERRNO(open_xrcd(ctx, fd, 0), EAGAIN);

    // --- Destroy in order: EBUSY until the objects are gone, then 0.
    EXPECT_RET(ibv_destroy_qp(ini), 0);
    EXPECT_RET(ibv_close_xrcd(d1), EBUSY);
    EXPECT_RET(ibv_destroy_qp(tp), 0);
    EXPECT_RET(ibv_close_xrcd(d1), EBUSY);  // s1 still
    EXPECT_RET(ibv_destroy_srq(s1), 0);
    EXPECT_RET(ibv_close_xrcd(d1), 0);
    EXPECT_RET(ibv_destroy_srq(sh), 0);
    EXPECT_RET(ibv_close_xrcd(xh), 0);
    EXPECT_RET(ibv_destroy_srq(sb), 0);
    EXPECT_RET(ibv_close_xrcd(d2), 0);
    CHECK(res("xrcd").empty() && res("srq").empty() && res("qp").empty(),
          "XRC objects remain after everything was closed");
    EXPECT_RET(ibv_close_device(ctx2), 0);
    release_basics(l.mr, {scq, rcq}, pd, ctx);
    free(l.buf);
    close(fd);
    close(hfd);
    close(mfd);
    return g_failures;
}

}  // namespace xrc_test
