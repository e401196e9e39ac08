// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// XRC through the public verbs API, built against the system's <infiniband/verbs.h> and
// run over the drop-in libibverbs (docs/xrc.md). Two modes:
//
//   rules: one check per sentence of ibv_open_xrcd(3) (the seed page; every sentence
//          has its check, marked with the sentence quoted) and the XRC parts of
//          ibv_create_srq_ex(3), ibv_get_srq_num(3), ibv_create_qp_ex(3), ibv_open_qp(3),
//          ibv_post_send(3), ibv_modify_srq(3), with the Linux kernel's errno values;
//          a second ibv_context stands in for a second process where one is needed.
//   share: three real processes (this program re-executed as role-a and role-b, talking
//          over socketpairs): A creates TGT QPs in the domain of a file, B joins the
//          domain, opens the QPs, moves them to RTS and owns the XRC SRQ, the parent sends
//          through INI QPs. Messages land in B's memory and CQ; a bad SRQ number raises
//          IBV_EVENT_QP_REQ_ERR in A and in B; A exits for real and the domain and QPs
//          keep working for B; a different file's domain cannot open the QPs.
//
// usage: xrc_verbs DEVICE UROCE_CLI rules|share WORKDIR
// Exits 0 when every check holds; otherwise prints each mismatch and exits 1.
//
// This header holds what both modes use: the checks, the device and `uroce res`, the XRC
// verbs with their masks; xrc_rules.cpp and xrc_share.cpp hold the modes, xrc_verbs.cpp main.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/verbs_checks.h"
#include "tests/integration/verbs_objects.h"
#include "tests/transport/verbs_util.h"

// A call that must fail: NULL (or non-zero) and exactly this errno.
#define EXPECT_NULL_ERRNO(expr, want)                                                        \
    do {                                                                                     \
        errno = 0;                                                                           \
        auto* p_ = (expr);                                                                   \
        int e_ = errno;                                                                      \
        CHECK(p_ == nullptr && e_ == (want), "%s: got %p errno %d (%s), want NULL errno %s", \
              #expr, static_cast<void*>(p_), e_, std::strerror(e_), #want);                  \
    } while (0)

#define EXPECT_RET(expr, want)                                         \
    do {                                                               \
        int r_ = (expr);                                               \
        CHECK(r_ == (want), "%s returned %d (%s), want %s", #expr, r_, \
              r_ > 0 ? std::strerror(r_) : "", #want);                 \
    } while (0)

namespace xrc_test {

using namespace verbs_objects;

inline std::string g_dev, g_cli;
constexpr uint32_t kSlot = 1024;  // bytes per message slot of a receive buffer

// ---------------------------------------------------------------- device and `uroce res`

inline ibv_context* open_ctx() {
    ibv_context* ctx = uroce::verbs_util::open_device(g_dev.c_str());
    REQUIRE(ctx, "cannot open device %s: %s", g_dev.c_str(), std::strerror(errno));
    // Async events are read with a timeout: poll() the fd, as rdma-core documents.
    int fl = fcntl(ctx->async_fd, F_GETFL);
    REQUIRE(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "async fd O_NONBLOCK");
    return ctx;
}

// The output lines of `uroce ARGS DEVICE`; the command must succeed.
inline std::vector<std::string> cli_lines(const std::string& args) {
    std::string cmd = g_cli + " " + args + " " + g_dev;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p, "popen %s", cmd.c_str());
    std::vector<std::string> out;
    char line[4096];
    while (std::fgets(line, sizeof line, p)) out.push_back(line);
    int st = pclose(p);
    CHECK(st == 0, "%s exited with status %d", cmd.c_str(), st);
    return out;
}

// The lines of `uroce res DEVICE KIND`, split into words.
inline std::vector<std::vector<std::string>> res(const char* kind) {
    std::vector<std::vector<std::string>> out;
    for (const auto& line : cli_lines(std::string("res ") + kind)) {
        std::istringstream in(line);
        std::vector<std::string> w;
        std::string s;
        while (in >> s) w.push_back(s);
        if (!w.empty()) out.push_back(w);
    }
    for (const auto& w : out)
        CHECK(w[0] == kind, "`uroce res %s` printed a %s line", kind, w[0].c_str());
    return out;
}

// The value after `key` in a dump line, or "" (for "holders": every word after it).
inline std::string field(const std::vector<std::string>& w, const std::string& key) {
    for (size_t i = 0; i + 1 < w.size(); ++i)
        if (w[i] == key) {
            if (key != "holders") return w[i + 1];
            std::string all;
            for (size_t k = i + 1; k < w.size(); ++k) all += (all.empty() ? "" : " ") + w[k];
            return all;
        }
    return "";
}

inline std::string inode_of(const std::string& path) {
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0, "stat %s: %s", path.c_str(), std::strerror(errno));
    return std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) + ":" +
           std::to_string(st.st_ino);
}

// The xrcd lines for one inode ("-": the private domains).
inline std::vector<std::vector<std::string>> xrcd_lines(const std::string& inode) {
    std::vector<std::vector<std::string>> out;
    for (auto& w : res("xrcd"))
        if (field(w, "inode") == inode) out.push_back(w);
    return out;
}

// The qp line of one QP number, or an empty vector.
inline std::vector<std::string> qp_line(uint32_t qpn) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%x", qpn);
    for (auto& w : res("qp"))
        if (w.size() > 1 && w[1] == hex) return w;
    return {};
}

inline std::string pid_str(pid_t p) { return std::to_string(p); }

// ---------------------------------------------------------------- verbs helpers

inline ibv_qp* open_qp(ibv_context* ctx, ibv_xrcd* xrcd, uint32_t qpn,
                       uint32_t mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
                                       IBV_QP_OPEN_ATTR_TYPE,
                       ibv_qp_type type = IBV_QPT_XRC_RECV) {
    ibv_qp_open_attr a{};
    a.comp_mask = mask;
    a.qp_num = qpn;
    a.xrcd = xrcd;
    a.qp_type = type;
    return ibv_open_qp(ctx, &a);
}

// The end of a mode: the MR, the CQs, the PD and the device go, each with 0.
inline void release_basics(ibv_mr* mr, std::initializer_list<ibv_cq*> cqs, ibv_pd* pd,
                           ibv_context* ctx) {
    EXPECT_RET(ibv_dereg_mr(mr), 0);
    for (ibv_cq* cq : cqs) EXPECT_RET(ibv_destroy_cq(cq), 0);
    EXPECT_RET(ibv_dealloc_pd(pd), 0);
    EXPECT_RET(ibv_close_device(ctx), 0);
}

// The attribute masks of ibv_xsrq_pingpong (create_qps, connect_qps).
constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kTgtRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kTgtRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
constexpr int kIniRtrMask =
    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
constexpr int kIniRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

inline int to_init(ibv_qp* qp, bool tgt, int mask = kInitMask) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = tgt ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
    return ibv_modify_qp(qp, &a, mask);
}

inline int to_rtr(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& gid, uint32_t psn, int mask) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.dest_qp_num = dest_qpn;
    a.path_mtu = IBV_MTU_1024;
    a.rq_psn = psn;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.hop_limit = 5;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = 0;
    return ibv_modify_qp(qp, &a, mask);
}

inline int to_rts(ibv_qp* qp, uint32_t psn, int mask) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = psn;
    return ibv_modify_qp(qp, &a, mask);
}

inline int to_reset(ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

inline int state_of(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    int e = ibv_query_qp(qp, &a, IBV_QP_STATE, &init);
    CHECK(e == 0, "ibv_query_qp: %d", e);
    return e ? -1 : int(a.qp_state);
}

// Connects a TGT QP (as its creator or an opener) and an INI QP with the pingpong masks.
inline void connect_tgt(ibv_qp* tgt, uint32_t ini_qpn, const ibv_gid& gid, uint32_t psn) {
    EXPECT_RET(to_rtr(tgt, ini_qpn, gid, psn, kTgtRtrMask), 0);
    EXPECT_RET(to_rts(tgt, psn ^ 0x5555, kTgtRtsMask), 0);
    CHECK(state_of(tgt) == IBV_QPS_RTS, "TGT QP 0x%x is not in RTS", tgt->qp_num);
}

inline void connect_ini(ibv_qp* ini, uint32_t tgt_qpn, const ibv_gid& gid, uint32_t psn) {
    EXPECT_RET(to_rtr(ini, tgt_qpn, gid, psn ^ 0x5555, kIniRtrMask), 0);
    EXPECT_RET(to_rts(ini, psn, kIniRtsMask), 0);
    CHECK(state_of(ini) == IBV_QPS_RTS, "INI QP 0x%x is not in RTS", ini->qp_num);
}

inline int post_xrc_send(ibv_qp* ini, ibv_mr* mr, void* buf, uint32_t len, uint32_t srqn,
                         uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), len, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.qp_type.xrc.remote_srqn = srqn;
    return ibv_post_send(ini, &wr, &bad);
}

inline int post_srq_recvs(ibv_srq* srq, ibv_mr* mr, char* buf, uint32_t slot, int first, int n) {
    for (int i = first; i < first + n; ++i) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(buf + size_t(i) * slot), slot, mr->lkey};
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = uint64_t(i);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if (int e = ibv_post_srq_recv(srq, &wr, &bad)) return e;
    }
    return 0;
}

inline bool poll_one(ibv_cq* cq, ibv_wc* wc, int ms = 5000) {
    return uroce::verbs_util::poll_one(cq, wc, ms / 1000.0) == 1;
}

// The next async event within `ms`, acknowledged; false if none came.
inline bool next_event(ibv_context* ctx, int ms, ibv_event_type* type, void** element) {
    pollfd p{ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) return false;
    ibv_async_event ev{};
    if (ibv_get_async_event(ctx, &ev) != 0) return false;
    *type = ev.event_type;
    switch (ev.event_type) {
    case IBV_EVENT_SRQ_LIMIT_REACHED:
    case IBV_EVENT_SRQ_ERR: *element = ev.element.srq; break;
    case IBV_EVENT_CQ_ERR: *element = ev.element.cq; break;
    default: *element = ev.element.qp;
    }
    ibv_ack_async_event(&ev);
    return true;
}

inline void expect_event(ibv_context* ctx, ibv_event_type want, void* element, const char* what) {
    ibv_event_type t{};
    void* el = nullptr;
    bool got = next_event(ctx, 3000, &t, &el);
    CHECK(got, "%s: no async event within 3 s", what);
    if (got)
        CHECK(t == want && el == element, "%s: event %s on %p, want %s on %p", what,
              ibv_event_type_str(t), el, ibv_event_type_str(want), element);
}

inline void expect_no_event(ibv_context* ctx, int ms, const char* what) {
    ibv_event_type t{};
    void* el = nullptr;
    bool got = next_event(ctx, ms, &t, &el);
    CHECK(!got, "%s: unexpected async event %s on %p", what, got ? ibv_event_type_str(t) : "", el);
}

int run_rules(const std::string& dir);
// The `share` mode's parent (it re-executes `self` as role-a and role-b) and roles.
int run_share(const char* self, const std::string& dir);
int role_a(int sock, const std::string& dir);
int role_b(int sock, const std::string& dir);

}  // namespace xrc_test
