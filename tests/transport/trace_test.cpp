// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce trace` (docs/trace.md) as an engineer reads it after a run: each device says which
// process made which QP, every state transition with the peer and PSNs it was given, a
// refused ibv_modify_qp with the attribute-mask reason, and a remote access error on both
// sides (NAK, async event, error completion, QP to ERR). Lines are matched by this test's
// pid and QP numbers, since other tests share the devices.
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class Trace : public TransportTest {
protected:
    // The trace lines of `s`'s device that contain every one of `words`, after the last line
    // that contains every one of `anchor` (this test's create_qp of the QP in question: QP
    // numbers are reused, so lines that name no pid only count after it). Each line is
    // matched with a space appended, so "pid 12 " does not match "pid 123".
    std::vector<std::string> lines_with(const Side& s, const std::vector<std::string>& words,
                                        const std::vector<std::string>& anchor = {}) {
        std::istringstream in(cli(std::string("trace ") + s.name));
        std::vector<std::string> lines, out;
        for (std::string line; std::getline(in, line);) lines.push_back(line + " ");
        auto has_all = [](const std::string& line, const std::vector<std::string>& ws) {
            for (const auto& w : ws)
                if (line.find(w) == std::string::npos) return false;
            return true;
        };
        size_t from = 0;
        if (!anchor.empty()) {
            from = lines.size();
            for (size_t i = 0; i < lines.size(); ++i)
                if (has_all(lines[i], anchor)) from = i + 1;
        }
        for (size_t i = from; i < lines.size(); ++i)
            if (has_all(lines[i], words)) out.push_back(lines[i]);
        return out;
    }
    // Fails unless exactly one line (after `anchor`) of `s`'s trace has every one of `words`.
    void expect_line(const Side& s, const std::vector<std::string>& words,
                     const std::vector<std::string>& anchor = {}) {
        auto found = lines_with(s, words, anchor);
        std::string want;
        for (const auto& w : words) want += "[" + w + "] ";
        EXPECT_EQ(found.size(), 1u) << s.name << ": lines with " << want << "\n"
                                    << cli(std::string("trace ") + s.name);
    }
    // The anchor for lines about this test's QP `qpn`: its create_qp line.
    std::vector<std::string> created(uint32_t qpn) const {
        return {me(), "create_qp qp " + hex(qpn) + " "};
    }
    static std::string hex(uint32_t v) {
        char b[16];
        std::snprintf(b, sizeof b, "0x%x", v);
        return b;
    }
    static std::string me() { return "pid " + std::to_string(getpid()) + " "; }
};

TEST_F(Trace, QpLifecycleShowsPeersAndPsns) {
    QpOpts o;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    const std::string qa = "qp " + hex(p.a.qpn()) + " ", qb = "qp " + hex(p.b.qpn()) + " ";
    expect_line(A(), {me(), "create_qp " + qa, "type RC"});
    expect_line(A(), {me(), "modify_qp " + qa, "RESET -> INIT"});
    expect_line(A(), {me(), "modify_qp " + qa, "INIT -> RTR", "dest_qp " + hex(p.b.qpn()),
                      "rq_psn " + hex(o.psn_b), "mtu 1024"});
    expect_line(A(), {me(), "modify_qp " + qa, "RTR -> RTS", "sq_psn " + hex(o.psn_a), "timeout 14",
                      "retry_cnt 7", "rnr_retry 7"});
    expect_line(B(), {me(), "create_qp " + qb, "type RC"});
    expect_line(B(), {me(), "modify_qp " + qb, "INIT -> RTR", "dest_qp " + hex(p.a.qpn())});
    expect_line(B(), {me(), "modify_qp " + qb, "RTR -> RTS", "sq_psn " + hex(o.psn_b)});

    const auto ca = created(p.a.qpn());
    destroy_qp(p.a);
    expect_line(A(), {qa + "(RC) destroyed, was RTS, " + me()}, ca);
}

TEST_F(Trace, RefusedModifySaysWhichMaskBitsAreWrong) {
    Endpoint e = make_qp(A(), QpOpts{}, true);
    ASSERT_TRUE(e.qp);
    const std::string q = "modify_qp qp " + hex(e.qpn()) + " failed: EINVAL: ";

    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX), EINVAL);
    expect_line(A(), {me(), q + "RESET -> INIT of an RC QP needs ACCESS_FLAGS"});

    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE), EINVAL);
    expect_line(A(), {me(), q + "RESET -> RTS is not a legal transition"});

    a.qp_state = IBV_QPS_INIT;
    a.qp_access_flags = 0;
    ASSERT_EQ(ibv_modify_qp(e.qp, &a,
                            IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
              0);
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
    expect_line(A(), {me(), q + "INIT -> RTR of an RC QP needs AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|"
                                "MAX_DEST_RD_ATOMIC|DEST_QPN, does not take SQ_PSN"});
}

TEST_F(Trace, RemoteAccessErrorOnBothSides) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), 64, IBV_ACCESS_LOCAL_WRITE);  // no remote write
    std::vector<ibv_sge> sg{src.sge(0, 64)};
    ibv_send_wr w = rdma_wr(0x77, IBV_WR_RDMA_WRITE, sg, dst.addr(), dst.rkey());
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_error(p.a.scq, p.a.qpn(), 0x77, IBV_WC_REM_ACCESS_ERR);
    ASSERT_TRUE(wait_state(p.b.qp, IBV_QPS_ERR));
    ibv_async_event ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);

    const std::string qa = "qp " + hex(p.a.qpn()) + " ", qb = "qp " + hex(p.b.qpn()) + " ";
    const auto ca = created(p.a.qpn()), cb = created(p.b.qpn());
    expect_line(B(), {qb + "responder: request psn", "refused (REM_ACCESS_ERR)", "NAK"}, cb);
    expect_line(B(), {"async QP_ACCESS_ERR " + qb + "-> " + me()}, cb);
    expect_line(B(), {qb + "RTS -> ERR"}, cb);
    expect_line(A(), {qa + "send wr_id 0x77 completed with REM_ACCESS_ERR"}, ca);
    expect_line(A(), {qa + "RTS -> ERR"}, ca);
}

}  // namespace
}  // namespace uroce::transport_test
