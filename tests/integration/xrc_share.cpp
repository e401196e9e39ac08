// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// xrc_verbs' `share` mode (xrc_verbs.h): three real processes share an XRC domain, its TGT
// QPs and an XRC SRQ.
#include "tests/integration/xrc_verbs.h"

namespace xrc_test {

namespace {

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

}  // namespace

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
            release_basics(mr, {cq}, pd, ctx);
            close(fd);
            free(buf);
            say(sock, "bye %d", g_failures);
            return g_failures ? 1 : 0;
        }
    }
}

namespace {

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

}  // namespace

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
    release_basics(mr, {cq, gcq}, pd, ctx);
    CHECK(res("xrcd").empty() && res("qp").empty() && res("srq").empty(),
          "XRC objects remain after every process let go");
    close(gfd);
    free(buf);
    return g_failures;
}

}  // namespace xrc_test
