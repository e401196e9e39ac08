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
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "verbs_checks.h"

namespace {

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

std::string g_dev, g_cli;

// ---------------------------------------------------------------- device and `uroce res`

ibv_context* open_ctx() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    REQUIRE(list, "ibv_get_device_list: %s", std::strerror(errno));
    ibv_device* dev = nullptr;
    for (int i = 0; i < n; ++i)
        if (g_dev == ibv_get_device_name(list[i])) dev = list[i];
    REQUIRE(dev, "device %s not listed", g_dev.c_str());
    ibv_context* ctx = ibv_open_device(dev);
    REQUIRE(ctx, "ibv_open_device: %s", std::strerror(errno));
    ibv_free_device_list(list);
    // Async events are read with a timeout: poll() the fd, as rdma-core documents.
    int fl = fcntl(ctx->async_fd, F_GETFL);
    REQUIRE(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "async fd O_NONBLOCK");
    return ctx;
}

// The output lines of `uroce ARGS DEVICE`; the command must succeed.
std::vector<std::string> cli_lines(const std::string& args) {
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
std::vector<std::vector<std::string>> res(const char* kind) {
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
std::string field(const std::vector<std::string>& w, const std::string& key) {
    for (size_t i = 0; i + 1 < w.size(); ++i)
        if (w[i] == key) {
            if (key != "holders") return w[i + 1];
            std::string all;
            for (size_t k = i + 1; k < w.size(); ++k) all += (all.empty() ? "" : " ") + w[k];
            return all;
        }
    return "";
}

std::string inode_of(const std::string& path) {
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0, "stat %s: %s", path.c_str(), std::strerror(errno));
    return std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) + ":" +
           std::to_string(st.st_ino);
}

// The xrcd lines for one inode ("-": the private domains).
std::vector<std::vector<std::string>> xrcd_lines(const std::string& inode) {
    std::vector<std::vector<std::string>> out;
    for (auto& w : res("xrcd"))
        if (field(w, "inode") == inode) out.push_back(w);
    return out;
}

// The qp line of one QP number, or an empty vector.
std::vector<std::string> qp_line(uint32_t qpn) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%x", qpn);
    for (auto& w : res("qp"))
        if (w.size() > 1 && w[1] == hex) return w;
    return {};
}

std::string pid_str(pid_t p) { return std::to_string(p); }

// ---------------------------------------------------------------- verbs helpers

ibv_xrcd* open_xrcd(ibv_context* ctx, int fd, int oflags,
                    uint32_t mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS) {
    ibv_xrcd_init_attr a{};
    a.comp_mask = mask;
    a.fd = fd;
    a.oflags = oflags;
    return ibv_open_xrcd(ctx, &a);
}

ibv_srq* create_xrc_srq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq,
                        uint32_t max_wr = 64,
                        uint32_t mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                                        IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ) {
    ibv_srq_init_attr_ex a{};
    a.attr.max_wr = max_wr;
    a.attr.max_sge = 1;
    a.comp_mask = mask;
    a.srq_type = IBV_SRQT_XRC;
    a.pd = pd;
    a.xrcd = xrcd;
    a.cq = cq;
    return ibv_create_srq_ex(ctx, &a);
}

ibv_srq* create_basic_srq(ibv_context* ctx, ibv_pd* pd) {
    ibv_srq_init_attr_ex a{};
    a.attr.max_wr = 4;
    a.attr.max_sge = 1;
    a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    a.srq_type = IBV_SRQT_BASIC;
    a.pd = pd;
    return ibv_create_srq_ex(ctx, &a);
}

// As ibv_xsrq_pingpong creates them.
ibv_qp* create_tgt(ibv_context* ctx, ibv_xrcd* xrcd, uint32_t mask = IBV_QP_INIT_ATTR_XRCD) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_RECV;
    a.comp_mask = mask;
    a.xrcd = xrcd;
    return ibv_create_qp_ex(ctx, &a);
}

ibv_qp* create_ini(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, uint32_t mask = IBV_QP_INIT_ATTR_PD) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.send_cq = cq;
    a.cap.max_send_wr = 32;
    a.cap.max_send_sge = 1;
    a.comp_mask = mask;
    a.pd = pd;
    return ibv_create_qp_ex(ctx, &a);
}

ibv_qp* open_qp(ibv_context* ctx, ibv_xrcd* xrcd, uint32_t qpn,
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

// The attribute masks of ibv_xsrq_pingpong (create_qps, connect_qps).
constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kTgtRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kTgtRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
constexpr int kIniRtrMask =
    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
constexpr int kIniRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

int to_init(ibv_qp* qp, bool tgt, int mask = kInitMask) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = tgt ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
    return ibv_modify_qp(qp, &a, mask);
}

int to_rtr(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& gid, uint32_t psn, int mask) {
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

int to_rts(ibv_qp* qp, uint32_t psn, int mask) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = psn;
    return ibv_modify_qp(qp, &a, mask);
}

int to_reset(ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int state_of(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    int e = ibv_query_qp(qp, &a, IBV_QP_STATE, &init);
    CHECK(e == 0, "ibv_query_qp: %d", e);
    return e ? -1 : int(a.qp_state);
}

// Connects a TGT QP (as its creator or an opener) and an INI QP with the pingpong masks.
void connect_tgt(ibv_qp* tgt, uint32_t ini_qpn, const ibv_gid& gid, uint32_t psn) {
    EXPECT_RET(to_rtr(tgt, ini_qpn, gid, psn, kTgtRtrMask), 0);
    EXPECT_RET(to_rts(tgt, psn ^ 0x5555, kTgtRtsMask), 0);
    CHECK(state_of(tgt) == IBV_QPS_RTS, "TGT QP 0x%x is not in RTS", tgt->qp_num);
}

void connect_ini(ibv_qp* ini, uint32_t tgt_qpn, const ibv_gid& gid, uint32_t psn) {
    EXPECT_RET(to_rtr(ini, tgt_qpn, gid, psn ^ 0x5555, kIniRtrMask), 0);
    EXPECT_RET(to_rts(ini, psn, kIniRtsMask), 0);
    CHECK(state_of(ini) == IBV_QPS_RTS, "INI QP 0x%x is not in RTS", ini->qp_num);
}

int post_xrc_send(ibv_qp* ini, ibv_mr* mr, void* buf, uint32_t len, uint32_t srqn, uint64_t wr_id) {
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

int post_srq_recvs(ibv_srq* srq, ibv_mr* mr, char* buf, uint32_t slot, int first, int n) {
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

bool poll_one(ibv_cq* cq, ibv_wc* wc, int ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n < 0) return false;
        if (n == 1) return true;
        std::this_thread::yield();
    }
    return false;
}

// The next async event within `ms`, acknowledged; false if none came.
bool next_event(ibv_context* ctx, int ms, ibv_event_type* type, void** element) {
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

void expect_event(ibv_context* ctx, ibv_event_type want, void* element, const char* what) {
    ibv_event_type t{};
    void* el = nullptr;
    bool got = next_event(ctx, 3000, &t, &el);
    CHECK(got, "%s: no async event within 3 s", what);
    if (got)
        CHECK(t == want && el == element, "%s: event %s on %p, want %s on %p", what,
              ibv_event_type_str(t), el, ibv_event_type_str(want), element);
}

void expect_no_event(ibv_context* ctx, int ms, const char* what) {
    ibv_event_type t{};
    void* el = nullptr;
    bool got = next_event(ctx, ms, &t, &el);
    CHECK(!got, "%s: unexpected async event %s on %p", what, got ? ibv_event_type_str(t) : "", el);
}

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

constexpr uint32_t kSlot = 1024;

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
        ibv_recv_wr rwr{}, *rbad = nullptr;
        rwr.sg_list = &sge;
        rwr.num_sge = 1;
        EXPECT_RET(ibv_post_recv(ini, &rwr, &rbad), EINVAL);
        CHECK(rbad == &rwr, "post_recv on INI: bad_wr not set");
        rbad = nullptr;
        EXPECT_RET(ibv_post_recv(tp, &rwr, &rbad), EINVAL);
        CHECK(rbad == &rwr, "post_recv on TGT: bad_wr not set");
        rbad = nullptr;
        if (of) {
            EXPECT_RET(ibv_post_recv(of, &rwr, &rbad), EINVAL);
            CHECK(rbad == &rwr, "post_recv on an opened TGT: bad_wr not set");
        }
        ibv_send_wr swr{}, *sbad = nullptr;
        swr.sg_list = &sge;
        swr.num_sge = 1;
        swr.opcode = IBV_WR_SEND;
        swr.qp_type.xrc.remote_srqn = n1;
        EXPECT_RET(ibv_post_send(tp, &swr, &sbad), EINVAL);
        CHECK(sbad == &swr, "post_send on TGT: bad_wr not set");
        sbad = nullptr;
        if (of) {
            EXPECT_RET(ibv_post_send(of, &swr, &sbad), EINVAL);
            CHECK(sbad == &swr, "post_send on an opened TGT: bad_wr not set");
        }
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
    EXPECT_RET(ibv_dereg_mr(l.mr), 0);
    EXPECT_RET(ibv_destroy_cq(scq), 0);
    EXPECT_RET(ibv_destroy_cq(rcq), 0);
    EXPECT_RET(ibv_dealloc_pd(pd), 0);
    EXPECT_RET(ibv_close_device(ctx2), 0);
    EXPECT_RET(ibv_close_device(ctx), 0);
    free(l.buf);
    close(fd);
    close(hfd);
    close(mfd);
    return g_failures;
}

// ---------------------------------------------------------------- the `share` mode

// Line messages between the processes, each read with a timeout.
void say(int fd, const char* fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    line[n++] = '\n';
    REQUIRE(write(fd, line, size_t(n)) == n, "write to peer: %s", std::strerror(errno));
}

std::string hear(int fd, int ms = 20000) {
    std::string s;
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        REQUIRE(poll(&p, 1, ms) == 1, "no message from the peer within %d ms", ms);
        char c;
        ssize_t n = read(fd, &c, 1);
        REQUIRE(n == 1, "peer hung up (read %zd)", n);
        if (c == '\n') return s;
        s += c;
    }
}

std::vector<std::string> words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> w;
    std::string x;
    while (in >> x) w.push_back(x);
    return w;
}

constexpr int kQps = 3;  // T1, T2 carry messages; T3 gets the bad SRQ numbers
constexpr uint32_t kPsn[kQps] = {0x10, 0x2000, 0x300000};

// Role A: creates the domain of file F and the TGT QPs, moves them to INIT, opens T1
// (its own) through a second handle of the domain, then waits for the events the parent
// provokes, drops T3 and finally exits without cleaning up.
int role_a(int sock, const std::string& dir) {
    g_role = "A";
    ibv_context* ctx = open_ctx();
    int fd = open((dir + "/domain_F").c_str(), O_RDONLY | O_CREAT, 0600);
    ibv_xrcd* x = open_xrcd(ctx, fd, O_CREAT);
    REQUIRE(x, "ibv_open_xrcd(F, O_CREAT): %s", std::strerror(errno));
    ibv_qp* t[kQps];
    for (auto& q : t) {
        q = create_tgt(ctx, x);
        REQUIRE(q, "ibv_create_qp_ex(XRC_RECV): %s", std::strerror(errno));
        EXPECT_RET(to_init(q, true), 0);
    }
    // A second handle of T1 in this process, through a second handle of the domain (as the
    // kernel allows): it pins x2, and the device must release both when A dies.
    ibv_xrcd* x2 = open_xrcd(ctx, fd, 0);
    REQUIRE(x2, "ibv_open_xrcd(F) again: %s", std::strerror(errno));
    ibv_qp* t1b = open_qp(ctx, x2, t[0]->qp_num);
    CHECK(t1b && t1b != t[0] && t1b->qp_num == t[0]->qp_num, "A: ibv_open_qp of its own T1: %s",
          t1b ? "wrong qp" : std::strerror(errno));
    EXPECT_RET(ibv_close_xrcd(x2), EBUSY);
    say(sock, "tgt %u %u %u %d", t[0]->qp_num, t[1]->qp_num, t[2]->qp_num, int(getpid()));
    for (;;) {
        auto w = words(hear(sock));
        if (w.empty()) continue;
        if (w[0] == "event") {  // the parent made T3 fail: this holder hears of it too
            expect_event(ctx, IBV_EVENT_QP_REQ_ERR, t[2], "A: QP_REQ_ERR on T3");
            expect_no_event(ctx, 50, "A: only one event per error");
            say(sock, "ok");
        } else if (w[0] == "drop") {
            EXPECT_RET(ibv_destroy_qp(t[2]), 0);   // B still holds it
            EXPECT_RET(ibv_close_xrcd(x), EBUSY);  // T1, T2 were created through x
            say(sock, "ok");
        } else if (w[0] == "exit") {
            // Really exit, with everything still open: the device cleans up after us.
            std::fflush(nullptr);
            std::_Exit(g_failures ? 1 : 0);
        }
    }
}

// Role B: joins F's domain, opens the TGT QPs, connects them (a process that only
// opened them), owns the XRC SRQ the messages land in, and checks each one.
int role_b(int sock, const std::string& dir) {
    g_role = "B";
    auto w = words(hear(sock));  // go T1 T2 T3 I1 I2 I3
    REQUIRE(w.size() == 7 && w[0] == "go", "bad go message");
    uint32_t tq[kQps], iq[kQps];
    for (int i = 0; i < kQps; ++i) {
        tq[i] = uint32_t(std::stoul(w[1 + i]));
        iq[i] = uint32_t(std::stoul(w[4 + i]));
    }
    ibv_context* ctx = open_ctx();
    int fd = open((dir + "/domain_F").c_str(), O_RDONLY);
    REQUIRE(fd >= 0, "open F: %s", std::strerror(errno));
    ibv_xrcd* x = open_xrcd(ctx, fd, O_CREAT);  // exists: O_CREAT has no effect, we join
    REQUIRE(x, "ibv_open_xrcd(F, O_CREAT) of A's domain: %s", std::strerror(errno));
    ibv_qp* t[kQps];
    for (int i = 0; i < kQps; ++i) {
        t[i] = open_qp(ctx, x, tq[i]);
        REQUIRE(t[i], "ibv_open_qp(0x%x): %s", tq[i], std::strerror(errno));
        CHECK(t[i]->qp_num == tq[i] && t[i]->qp_type == IBV_QPT_XRC_RECV,
              "opened qp_num 0x%x type %d", t[i]->qp_num, int(t[i]->qp_type));
        CHECK(state_of(t[i]) == IBV_QPS_INIT, "opened QP 0x%x not in A's INIT", tq[i]);
    }
    ibv_gid gid{};
    EXPECT_RET(ibv_query_gid(ctx, 1, 0, &gid), 0);
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* cq = ibv_create_cq(ctx, 128, nullptr, nullptr, 0);
    const size_t bytes = 64 * kSlot;
    char* buf = static_cast<char*>(aligned_alloc(4096, bytes));
    std::memset(buf, 0, bytes);
    ibv_mr* mr = pd ? ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE) : nullptr;
    REQUIRE(pd && cq && mr, "pd/cq/mr: %s", std::strerror(errno));
    ibv_srq* srq = create_xrc_srq(ctx, pd, x, cq, 64);
    ibv_srq* basic = create_basic_srq(ctx, pd);
    REQUIRE(srq && basic, "ibv_create_srq_ex: %s", std::strerror(errno));
    uint32_t srqn = 0, basicn = 0;
    EXPECT_RET(ibv_get_srq_num(srq, &srqn), 0);
    EXPECT_RET(ibv_get_srq_num(basic, &basicn), 0);
    EXPECT_RET(post_srq_recvs(srq, mr, buf, kSlot, 0, 64), 0);
    // Modify of a TGT QP by a process that only opened it.
    for (int i = 0; i < kQps; ++i) connect_tgt(t[i], iq[i], gid, kPsn[i]);
    say(sock, "ready %u %u %d", srqn, basicn, int(getpid()));

    for (;;) {
        w = words(hear(sock));
        if (w.empty()) continue;
        if (w[0] == "expect") {  // expect N: N messages "I<k> <j>" from INI QP k
            int n = std::stoi(w[1]);
            std::map<uint32_t, int> per_qp;
            for (int m = 0; m < n; ++m) {
                ibv_wc wc{};
                bool got = poll_one(cq, &wc);
                CHECK(got, "message %d of %d did not arrive", m + 1, n);
                if (!got) break;
                char* data = buf + (wc.wr_id % 64) * kSlot;
                int k = -1, j = -1;
                std::sscanf(data, "I%d %d", &k, &j);
                CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV,
                      "receive status %s opcode %d", ibv_wc_status_str(wc.status), int(wc.opcode));
                CHECK(k >= 1 && k <= kQps && wc.qp_num == tq[k - 1],
                      "message '%.16s' completed with qp_num 0x%x, want the TGT QPN of I%d", data,
                      wc.qp_num, k);
                CHECK(wc.byte_len == uint32_t(100 + j), "message '%.16s': byte_len %u, want %d",
                      data, wc.byte_len, 100 + j);
                ++per_qp[wc.qp_num];
                std::memset(data, 0, kSlot);
                // Give the receive back (slots are reused round robin).
                EXPECT_RET(post_srq_recvs(srq, mr, buf, kSlot, int(wc.wr_id), 1), 0);
            }
            ibv_wc extra{};
            CHECK(ibv_poll_cq(cq, 1, &extra) == 0, "more receive completions than messages");
            std::string counts;
            for (auto& [q, c] : per_qp) counts += " " + std::to_string(q) + ":" + std::to_string(c);
            say(sock, "got%s", counts.c_str());
        } else if (w[0] == "event") {
            expect_event(ctx, IBV_EVENT_QP_REQ_ERR, t[2], "B: QP_REQ_ERR on T3");
            expect_no_event(ctx, 50, "B: only one event per error");
            CHECK(state_of(t[2]) == IBV_QPS_ERR, "T3 not in ERR after the bad message");
            ibv_wc wc{};
            CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "the rejected message completed a receive");
            say(sock, "ok");
        } else if (w[0] == "reconnect") {  // reset T3 and bring it back to RTS
            EXPECT_RET(to_reset(t[2]), 0);
            EXPECT_RET(to_init(t[2], true), 0);
            connect_tgt(t[2], iq[2], gid, kPsn[2]);
            say(sock, "ok");
        } else if (w[0] == "drop") {
            EXPECT_RET(ibv_destroy_qp(t[2]), 0);  // the last holder: T3 goes
            say(sock, "ok");
        } else if (w[0] == "finish") {
            EXPECT_RET(ibv_close_xrcd(x), EBUSY);  // T1, T2 (opened) and the SRQ
            EXPECT_RET(ibv_destroy_qp(t[0]), 0);
            EXPECT_RET(ibv_destroy_qp(t[1]), 0);
            EXPECT_RET(ibv_close_xrcd(x), EBUSY);  // the SRQ
            EXPECT_RET(ibv_destroy_srq(srq), 0);
            EXPECT_RET(ibv_destroy_srq(basic), 0);
            EXPECT_RET(ibv_close_xrcd(x), 0);
            EXPECT_RET(ibv_dereg_mr(mr), 0);
            EXPECT_RET(ibv_destroy_cq(cq), 0);
            EXPECT_RET(ibv_dealloc_pd(pd), 0);
            EXPECT_RET(ibv_close_device(ctx), 0);
            close(fd);
            free(buf);
            say(sock, "bye %d", g_failures);
            return g_failures ? 1 : 0;
        }
    }
}

pid_t spawn(const char* self, const char* role, int fd, const std::string& dir) {
    pid_t p = fork();
    REQUIRE(p >= 0, "fork: %s", std::strerror(errno));
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a parent that failed
        std::string fds = std::to_string(fd);
        execl(self, self, g_dev.c_str(), g_cli.c_str(), role, dir.c_str(), fds.c_str(),
              static_cast<char*>(nullptr));
        std::_Exit(127);
    }
    return p;
}

int exit_code(pid_t p) {
    int st = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (std::chrono::steady_clock::now() > deadline) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            return -1;
        }
        usleep(10000);
    }
}

// The parent: the initiator side (INI QPs), and the referee reading `uroce res`.
int run_share(const char* self, const std::string& dir) {
    int sa[2], sb[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sa) == 0 &&
                socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sb) == 0,
            "socketpair: %s", std::strerror(errno));
    // The children's ends must survive exec.
    fcntl(sa[1], F_SETFD, 0);
    fcntl(sb[1], F_SETFD, 0);
    const std::string F = dir + "/domain_F", G = dir + "/domain_G";
    unlink(F.c_str());
    pid_t pa = spawn(self, "role-a", sa[1], dir);
    pid_t pb = spawn(self, "role-b", sb[1], dir);
    close(sa[1]);
    close(sb[1]);
    const int A = sa[0], B = sb[0];

    ibv_context* ctx = open_ctx();
    ibv_gid gid{};
    EXPECT_RET(ibv_query_gid(ctx, 1, 0, &gid), 0);
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ibv_cq* gcq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
    char* buf = static_cast<char*>(aligned_alloc(4096, 64 * kSlot));
    std::memset(buf, 0, 64 * kSlot);
    ibv_mr* mr = pd ? ibv_reg_mr(pd, buf, 64 * kSlot, IBV_ACCESS_LOCAL_WRITE) : nullptr;
    REQUIRE(pd && cq && gcq && mr, "pd/cq/mr: %s", std::strerror(errno));
    ibv_qp* ini[kQps];
    for (auto& q : ini) {
        q = create_ini(ctx, pd, cq);
        REQUIRE(q, "ibv_create_qp_ex(XRC_SEND): %s", std::strerror(errno));
        EXPECT_RET(to_init(q, false), 0);
    }

    auto w = words(hear(A));
    REQUIRE(w.size() == 5 && w[0] == "tgt", "bad message from A");
    uint32_t tq[kQps] = {uint32_t(std::stoul(w[1])), uint32_t(std::stoul(w[2])),
                         uint32_t(std::stoul(w[3]))};
    CHECK(std::stoi(w[4]) == pa, "A reports pid %s, forked %d", w[4].c_str(), int(pa));
    say(B, "go %u %u %u %u %u %u", tq[0], tq[1], tq[2], ini[0]->qp_num, ini[1]->qp_num,
        ini[2]->qp_num);
    w = words(hear(B));
    REQUIRE(w.size() == 4 && w[0] == "ready", "bad message from B");
    const uint32_t srqn = uint32_t(std::stoul(w[1])), basicn = uint32_t(std::stoul(w[2]));
    const std::string sa_pid = pid_str(pa), sb_pid = pid_str(pb);

    // One domain, three handles (A's two and B's), the three TGT QPs and B's XRC SRQ in it.
    const std::string f_ino = inode_of(F);
    auto fl = xrcd_lines(f_ino);
    CHECK(fl.size() == 1, "%zu xrcd lines for F's inode, want 1", fl.size());
    if (fl.size() == 1)
        CHECK(field(fl[0], "handles") == "3" && field(fl[0], "objects") == "4",
              "F's domain: handles %s objects %s, want 3 and 4", field(fl[0], "handles").c_str(),
              field(fl[0], "objects").c_str());
    for (uint32_t q : tq) {
        // T1 has A's two handles (created, opened), then B's.
        std::string want = (q == tq[0] ? sa_pid + " " + sa_pid : sa_pid) + " " + sb_pid;
        auto l = qp_line(q);
        CHECK(!l.empty() && field(l, "type") == "XRC_TGT" && field(l, "state") == "RTS" &&
                  field(l, "pid") == sa_pid && field(l, "holders") == want,
              "TGT QP 0x%x: type %s state %s pid %s holders '%s' (want RTS, A's, '%s')", q,
              field(l, "type").c_str(), field(l, "state").c_str(), field(l, "pid").c_str(),
              field(l, "holders").c_str(), want.c_str());
    }

    // A different file's domain (and a private one) cannot open A's QPs.
    int gfd = open(G.c_str(), O_RDONLY | O_CREAT, 0600);
    ibv_xrcd* xg = open_xrcd(ctx, gfd, O_CREAT);
    ibv_xrcd* xp = open_xrcd(ctx, -1, O_CREAT);
    REQUIRE(xg && xp, "ibv_open_xrcd(G): %s", std::strerror(errno));
    for (uint32_t q : tq) {
        EXPECT_NULL_ERRNO(open_qp(ctx, xg, q), EINVAL);
        EXPECT_NULL_ERRNO(open_qp(ctx, xp, q), EINVAL);
    }
    ibv_srq* sg = create_xrc_srq(ctx, pd, xg, gcq, 4);  // an XRC SRQ of another domain
    REQUIRE(sg, "XRC SRQ in G: %s", std::strerror(errno));
    uint32_t sgn = 0;
    EXPECT_RET(ibv_get_srq_num(sg, &sgn), 0);

    for (int i = 0; i < kQps; ++i) connect_ini(ini[i], tq[i], gid, kPsn[i]);

    // Messages from I1 and I2 to B's SRQ: B's memory, B's CQ, wc.qp_num = the TGT QPN.
    uint64_t wr = 0;
    auto burst = [&](const char* what) {
        int sent = 0;
        for (int k = 0; k < 2; ++k)
            for (int j = 0; j < 4; ++j) {
                char* src = buf + size_t(sent) * kSlot;
                std::snprintf(src, kSlot, "I%d %d", k + 1, j);
                EXPECT_RET(post_xrc_send(ini[k], mr, src, uint32_t(100 + j), srqn, ++wr), 0);
                ++sent;
            }
        for (int m = 0; m < sent; ++m) {
            ibv_wc wc{};
            bool got = poll_one(cq, &wc);
            CHECK(got && wc.status == IBV_WC_SUCCESS, "%s: send %d: %s", what, m,
                  got ? ibv_wc_status_str(wc.status) : "no completion");
        }
        say(B, "expect %d", sent);
        std::string want = " " + std::to_string(std::min(tq[0], tq[1])) + ":4 " +
                           std::to_string(std::max(tq[0], tq[1])) + ":4";
        std::string got = hear(B);
        CHECK(got == "got" + want, "%s: B reports '%s', want 'got%s'", what, got.c_str(),
              want.c_str());
    };
    burst("A and B hold the QPs");

    // A message naming an SRQ outside T3's domain: REM_INV_REQ_ERR at the initiator and
    // IBV_EVENT_QP_REQ_ERR in every process holding T3.
    auto reject = [&](uint32_t bad, const char* what) {
        char* src = buf + 40 * kSlot;
        std::snprintf(src, kSlot, "I3 0");
        EXPECT_RET(post_xrc_send(ini[2], mr, src, 64, bad, ++wr), 0);
        ibv_wc wc{};
        bool got = poll_one(cq, &wc);
        CHECK(got && wc.status == IBV_WC_REM_INV_REQ_ERR, "%s: initiator status %s", what,
              got ? ibv_wc_status_str(wc.status) : "no completion");
        say(A, "event");
        say(B, "event");
        CHECK(hear(A) == "ok", "%s: A", what);
        CHECK(hear(B) == "ok", "%s: B", what);
        auto l = qp_line(tq[2]);
        CHECK(field(l, "state") == "ERR", "%s: T3 state %s", what, field(l, "state").c_str());
    };
    reject(basicn, "remote_srqn of B's basic SRQ");
    // Both halves start over: B (an opener) resets T3, we reset I3.
    say(B, "reconnect");
    CHECK(hear(B) == "ok", "B reconnect");
    EXPECT_RET(to_reset(ini[2]), 0);
    EXPECT_RET(to_init(ini[2], false), 0);
    connect_ini(ini[2], tq[2], gid, kPsn[2]);
    reject(sgn, "remote_srqn of an XRC SRQ of another domain");

    // A destroys its T3 handle: T3 lives on with B alone; then B's destroy ends it.
    say(A, "drop");
    CHECK(hear(A) == "ok", "A drop");
    {
        auto l = qp_line(tq[2]);
        CHECK(!l.empty() && field(l, "pid") == sb_pid && field(l, "holders") == sb_pid,
              "T3 after A's destroy: pid %s holders '%s', want B's", field(l, "pid").c_str(),
              field(l, "holders").c_str());
    }
    say(B, "drop");
    CHECK(hear(B) == "ok", "B drop");
    CHECK(qp_line(tq[2]).empty(), "T3 outlived its last holder");

    // The creator really exits, its objects still open.
    say(A, "exit");
    int rc = exit_code(pa);
    CHECK(rc == 0, "A exited with %d", rc);
    bool gone = false;
    for (int i = 0; i < 300 && !gone; ++i) {
        gone = true;
        for (auto& l : res("qp"))
            if (l.size() > 1 && field(l, "holders").find(sa_pid) != std::string::npos) gone = false;
        if (!gone) usleep(10000);
    }
    CHECK(gone, "A's session still holds the TGT QPs 3 s after it exited");
    for (int i = 0; i < 2; ++i) {
        auto l = qp_line(tq[i]);
        CHECK(!l.empty() && field(l, "pid") == sb_pid && field(l, "holders") == sb_pid &&
                  field(l, "state") == "RTS",
              "T%d after A exited: pid %s holders '%s' state %s (want B's, RTS)", i + 1,
              field(l, "pid").c_str(), field(l, "holders").c_str(), field(l, "state").c_str());
    }
    fl = xrcd_lines(f_ino);
    CHECK(fl.size() == 1 && field(fl[0], "handles") == "1" && field(fl[0], "objects") == "3" &&
              field(fl[0], "pids") == sb_pid,
          "F's domain after A exited: %s",
          fl.empty() ? "gone"
                     : ("handles " + field(fl[0], "handles") + " objects " +
                        field(fl[0], "objects") + " pids " + field(fl[0], "pids"))
                           .c_str());
    // ... and the domain and the QPs keep working for B.
    burst("after A exited");

    say(B, "finish");
    w = words(hear(B));
    CHECK(w.size() == 2 && w[0] == "bye" && w[1] == "0", "B finished with failures");
    rc = exit_code(pb);
    CHECK(rc == 0, "B exited with %d", rc);
    // B's close was the last reference: F's domain is gone, and can only be created anew.
    CHECK(xrcd_lines(f_ino).empty(), "F's domain outlived its last handle");
    int ffd = open(F.c_str(), O_RDONLY);
    EXPECT_NULL_ERRNO(open_xrcd(ctx, ffd, 0), EAGAIN);
    close(ffd);

    EXPECT_RET(ibv_destroy_srq(sg), 0);
    EXPECT_RET(ibv_close_xrcd(xg), 0);
    EXPECT_RET(ibv_close_xrcd(xp), 0);
    for (auto* q : ini) EXPECT_RET(ibv_destroy_qp(q), 0);
    EXPECT_RET(ibv_dereg_mr(mr), 0);
    EXPECT_RET(ibv_destroy_cq(cq), 0);
    EXPECT_RET(ibv_destroy_cq(gcq), 0);
    EXPECT_RET(ibv_dealloc_pd(pd), 0);
    EXPECT_RET(ibv_close_device(ctx), 0);
    CHECK(res("xrcd").empty() && res("qp").empty() && res("srq").empty(),
          "XRC objects remain after every process let go");
    close(gfd);
    free(buf);
    return g_failures;
}

}  // namespace

int main(int argc, char** argv) {
    g_role = "main";
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s DEVICE UROCE_CLI rules|share WORKDIR\n", argv[0]);
        return 2;
    }
    g_dev = argv[1];
    g_cli = argv[2];
    alarm(50);  // a hang (a lost event, a stuck destroy) kills us instead of the CI job
    const std::string mode = argv[3], dir = argv[4];
    int failures;
    if (mode == "role-a" && argc == 6) return role_a(std::atoi(argv[5]), dir);
    if (mode == "role-b" && argc == 6) return role_b(std::atoi(argv[5]), dir);
    if (mode == "rules")
        failures = run_rules(dir);
    else if (mode == "share")
        failures = run_share("/proc/self/exe", dir);
    else
        return 2;
    if (failures) {
        std::fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    std::printf("all checks passed\n");
    return 0;
}
