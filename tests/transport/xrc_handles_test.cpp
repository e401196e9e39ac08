// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// XRC TGT QP handles (docs/xrc.md, "TGT QPs and their handles"): as in the kernel, each
// ibv_open_qp returns a handle of its own, even through the same context and even for the
// QP's creator; each handle pins the XRCD handle it came through, works for modify, query
// and events, and the QP lives until its last handle is destroyed. B (uroce1) holds the
// domain three times over one file, A (uroce0) sends through an XRC INI QP.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/transport/fixture.h"
#include "tests/transport/verbs_util.h"

namespace uroce::transport_test {
namespace {

class XrcHandles : public TransportTest {
protected:
    void TearDown() override {
        // Newest first, before the fixture frees the CQs, MRs and PDs they use.
        for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) {
            if (*it) {
                EXPECT_EQ(ibv_destroy_qp(*it), 0);
            }
        }
        if (srq_) {
            EXPECT_EQ(ibv_destroy_srq(srq_), 0);
        }
        for (auto it = xrcds_.rbegin(); it != xrcds_.rend(); ++it) {
            if (*it) {
                EXPECT_EQ(ibv_close_xrcd(*it), 0);
            }
        }
        if (fd_ >= 0) close(fd_);
        if (!path_.empty()) unlink(path_.c_str());
        TransportTest::TearDown();
    }

    // `h` from a verb that just returned it, kept in `held` for TearDown; a test failure
    // (not fatal) when the verb failed.
    template <typename T>
    static T* kept(T* h, std::vector<T*>& held) {
        EXPECT_NE(h, nullptr) << std::strerror(errno);
        held.push_back(h);
        return h;
    }
    ibv_xrcd* open_xrcd(int oflags) {
        ibv_xrcd_init_attr a{};
        a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        a.fd = fd_;
        a.oflags = oflags;
        return kept(ibv_open_xrcd(B().ctx, &a), xrcds_);
    }
    ibv_qp* open_qp(ibv_xrcd* x, uint32_t qpn) {
        ibv_qp_open_attr a{};
        a.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
        a.qp_num = qpn;
        a.xrcd = x;
        a.qp_type = IBV_QPT_XRC_RECV;
        return kept(ibv_open_qp(B().ctx, &a), qps_);
    }
    // ibv_destroy_qp of a handle this test keeps.
    int destroy(ibv_qp*& q) {
        for (auto& k : qps_)
            if (k == q) k = nullptr;
        int e = ibv_destroy_qp(q);
        q = nullptr;
        return e;
    }
    int close_xrcd(ibv_xrcd*& x) {
        int e = ibv_close_xrcd(x);
        if (e == 0) {
            for (auto& k : xrcds_)
                if (k == x) k = nullptr;
            x = nullptr;
        }
        return e;
    }

    // The words of B's `uroce res` line of QP `qpn`, or none.
    static std::vector<std::string> qp_line(uint32_t qpn) {
        char head[32];
        std::snprintf(head, sizeof head, "qp 0x%x ", qpn);
        std::istringstream in(cli(std::string("res ") + kDeviceNames[1] + " qp"));
        std::string line;
        while (std::getline(in, line))
            if (line.rfind(head, 0) == 0) {
                std::istringstream ws(line);
                std::vector<std::string> w;
                for (std::string s; ws >> s;) w.push_back(s);
                return w;
            }
        return {};
    }
    // The pids after "holders" on that line: one per handle.
    static std::vector<std::string> holders(uint32_t qpn) {
        auto w = qp_line(qpn);
        std::vector<std::string> out;
        for (size_t i = 0; i < w.size(); ++i)
            if (w[i] == "holders") out.assign(w.begin() + long(i) + 1, w.end());
        return out;
    }
    // "handles N objects M" of the domain of our file, or "" if it has none; its id in *id.
    std::string domain(std::string* id = nullptr) const {
        struct stat st;
        if (fstat(fd_, &st) != 0) return "";
        std::string ino = std::to_string(major(st.st_dev)) + ":" +
                          std::to_string(minor(st.st_dev)) + ":" + std::to_string(st.st_ino);
        std::istringstream in(cli(std::string("res ") + kDeviceNames[1] + " xrcd"));
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream ws(line);
            std::vector<std::string> w;
            for (std::string s; ws >> s;) w.push_back(s);
            if (w.size() < 8 || w[3] != ino) continue;
            if (id) *id = w[1];
            return w[4] + " " + w[5] + " " + w[6] + " " + w[7];
        }
        return "";
    }

    // One message of `len` bytes from the INI QP through SRQ `srqn` (B's SRQ or another
    // number): the sender's status, and on success the receive on rcq_.
    ibv_wc_status send(uint64_t id, uint32_t len, uint32_t srqn) {
        Buffer& src = reg(A(), len);
        src.fill(uint32_t(id));
        Buffer& dst = reg(B(), len);
        std::vector<ibv_sge> rs{dst.sge(0, len)};
        if (srqn == srqn_) {
            EXPECT_EQ(post_srq_recv(srq_, id, rs), 0);
        }
        std::vector<ibv_sge> ss{src.sge(0, len)};
        ibv_send_wr w = wr(id, IBV_WR_SEND, ss);
        w.qp_type.xrc.remote_srqn = srqn;
        EXPECT_EQ(post(ini_, w), 0);
        ibv_wc wc = poll1(scq_);
        EXPECT_EQ(wc.wr_id, id);
        if (wc.status != IBV_WC_SUCCESS) return wc.status;
        // An XRC receive completes on the SRQ's CQ, with the TGT QP's number.
        expect_wc(rcq_, {.wr_id = id,
                         .opcode = IBV_WC_RECV,
                         .byte_len = len,
                         .qp_num = tgt_qpn_,
                         .src_qp = ini_->qp_num});
        EXPECT_EQ(dst.mismatch(uint32_t(id), 0, len), -1);
        return wc.status;
    }

    // The INI QP back to RTS after an error, towards the TGT QP (which `via` resets).
    void reconnect(ibv_qp* via) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RESET;
        ASSERT_EQ(ibv_modify_qp(via, &a, IBV_QP_STATE), 0);
        ASSERT_EQ(ibv_modify_qp(ini_, &a, IBV_QP_STATE), 0);
        connect(via);
    }
    void connect(ibv_qp* via) {
        QpOpts o;
        o.type = IBV_QPT_XRC_RECV;
        Endpoint te{&B(), via, nullptr, rcq_};
        connect_qp(te, A(), ini_->qp_num, o, o.psn_b, o.psn_a);
        o.type = IBV_QPT_XRC_SEND;
        Endpoint ie{&A(), ini_, scq_, nullptr};
        connect_qp(ie, B(), tgt_qpn_, o, o.psn_a, o.psn_b);
    }

    std::string path_;
    int fd_ = -1;
    std::vector<ibv_xrcd*> xrcds_;
    std::vector<ibv_qp*> qps_;
    ibv_srq* srq_ = nullptr;
    uint32_t srqn_ = 0, tgt_qpn_ = 0;
    ibv_qp* ini_ = nullptr;
    ibv_cq *scq_ = nullptr, *rcq_ = nullptr;
};

TEST_F(XrcHandles, EveryOpenIsAHandleThatPinsItsXrcdAndKeepsTheQp) {
    char tmpl[] = "/tmp/uroce-xrc-handles-XXXXXX";
    fd_ = mkstemp(tmpl);
    ASSERT_GE(fd_, 0) << std::strerror(errno);
    path_ = tmpl;
    // Three handles of one domain in one context, all through the same fd: x0 for the SRQ,
    // x1 creates the TGT QP, x2 opens it twice.
    ibv_xrcd* x0 = open_xrcd(O_CREAT);
    ibv_xrcd* x1 = open_xrcd(0);
    ibv_xrcd* x2 = open_xrcd(0);
    ASSERT_TRUE(x0 && x1 && x2);
    EXPECT_EQ(domain(), "handles 3 objects 0");

    rcq_ = make_cq(B());
    ibv_srq_init_attr_ex sa = verbs_util::xrc_srq_attr(x0, rcq_, B().pd, 16);
    srq_ = ibv_create_srq_ex(B().ctx, &sa);
    ASSERT_TRUE(srq_) << std::strerror(errno);
    ASSERT_EQ(ibv_get_srq_num(srq_, &srqn_), 0);
    ibv_qp_init_attr_ex ta = verbs_util::xrc_tgt_attr(x1);
    ibv_qp* tgt = ibv_create_qp_ex(B().ctx, &ta);
    ASSERT_TRUE(tgt) << std::strerror(errno);
    qps_.push_back(tgt);
    tgt_qpn_ = tgt->qp_num;

    // The creator opens its own QP twice through another handle of the domain: two more
    // handles, each a struct ibv_qp of its own with the same number.
    ibv_qp* o1 = open_qp(x2, tgt_qpn_);
    ibv_qp* o2 = open_qp(x2, tgt_qpn_);
    ASSERT_TRUE(o1 && o2);
    EXPECT_TRUE(o1 != tgt && o2 != tgt && o1 != o2);
    for (ibv_qp* q : {o1, o2}) {
        EXPECT_EQ(q->qp_num, tgt_qpn_);
        EXPECT_EQ(q->qp_type, IBV_QPT_XRC_RECV);
        EXPECT_EQ(q->context, B().ctx);
    }
    const std::string me = std::to_string(getpid());
    EXPECT_EQ(holders(tgt_qpn_), std::vector<std::string>({me, me, me}));
    EXPECT_EQ(domain(), "handles 3 objects 2");  // the SRQ and the QP, once
    // Each handle pins the XRCD handle it came through.
    EXPECT_EQ(ibv_close_xrcd(x1), EBUSY);
    EXPECT_EQ(ibv_close_xrcd(x2), EBUSY);
    EXPECT_EQ(ibv_close_xrcd(x0), EBUSY);  // the SRQ

    scq_ = make_cq(A());
    ibv_qp_init_attr_ex ia = verbs_util::xrc_ini_attr(A().pd, scq_, 16, 1);
    ini_ = ibv_create_qp_ex(A().ctx, &ia);
    ASSERT_TRUE(ini_) << std::strerror(errno);
    qps_.insert(qps_.begin(), ini_);  // destroyed last, after every TGT handle

    // An opened handle takes the QP to RTS; every handle sees the same QP.
    connect(o1);
    for (ibv_qp* q : {tgt, o1, o2}) {
        ibv_qp_attr a{};
        ibv_qp_init_attr init{};
        ASSERT_EQ(ibv_query_qp(q, &a, IBV_QP_STATE | IBV_QP_DEST_QPN, &init), 0);
        EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
        EXPECT_EQ(a.dest_qp_num, ini_->qp_num);
    }
    EXPECT_EQ(send(1, 3000, srqn_), IBV_WC_SUCCESS);
    // Through an opened handle as through any: what a TGT QP has no use for is ignored, not
    // refused (uverbs' modify_qp_mask), and not applied; an RTS -> RTS that sets only that.
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.retry_cnt = 5;
    rts.rnr_retry = 6;
    rts.max_rd_atomic = 1;
    EXPECT_EQ(
        ibv_modify_qp(o2, &rts,
                      IBV_QP_STATE | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
        0);
    {
        ibv_qp_attr q{};
        ibv_qp_init_attr qi{};
        ASSERT_EQ(ibv_query_qp(tgt, &q, IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY, &qi), 0);
        EXPECT_EQ(q.retry_cnt, 0);
        EXPECT_EQ(q.rnr_retry, 0);
    }
    // Other attributes are still refused as for any handle: DEST_QPN is INIT -> RTR only.
    EXPECT_EQ(ibv_modify_qp(o2, &rts, IBV_QP_STATE | IBV_QP_DEST_QPN), EINVAL);
    // The INI QP likewise ignores the responder's attributes.
    rts.min_rnr_timer = 12;
    rts.max_dest_rd_atomic = 4;
    EXPECT_EQ(
        ibv_modify_qp(ini_, &rts, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC),
        0);

    // An error of the QP reaches every handle, each with its own ibv_qp.
    EXPECT_EQ(send(2, 64, 0xfffff0), IBV_WC_REM_INV_REQ_ERR);  // no such SRQ
    std::multiset<ibv_qp*> got;
    for (int i = 0; i < 3; ++i) {
        ibv_async_event ev = next_async(B());
        EXPECT_EQ(ev.event_type, IBV_EVENT_QP_REQ_ERR);
        got.insert(ev.element.qp);
    }
    EXPECT_EQ(got, std::multiset<ibv_qp*>({tgt, o1, o2}));
    expect_no_async(B());
    reconnect(o2);
    EXPECT_EQ(send(3, 100, srqn_), IBV_WC_SUCCESS);

    // The creator's handle goes: its XRCD handle is free, the QP lives on.
    ASSERT_EQ(destroy(tgt), 0);
    EXPECT_EQ(close_xrcd(x1), 0);
    EXPECT_EQ(holders(tgt_qpn_), std::vector<std::string>({me, me}));
    EXPECT_EQ(send(4, 2000, srqn_), IBV_WC_SUCCESS);

    // One opened handle goes: the other still pins x2 and keeps the QP.
    ASSERT_EQ(destroy(o1), 0);
    EXPECT_EQ(ibv_close_xrcd(x2), EBUSY);
    EXPECT_EQ(holders(tgt_qpn_), std::vector<std::string>({me}));
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(o2, &a, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(send(5, 1500, srqn_), IBV_WC_SUCCESS);  // only an opened handle remains

    // The last handle goes, and the QP with it: the domain no longer counts it, `uroce res`
    // has no TGT QP of that number in it (tests running beside this one may reuse the
    // number at once, so no packet is sent to it), and x2 closes.
    std::string id;
    EXPECT_EQ(domain(&id), "handles 2 objects 2");
    ASSERT_EQ(destroy(o2), 0);
    EXPECT_EQ(domain(), "handles 2 objects 1");  // x0's SRQ
    auto w = qp_line(tgt_qpn_);
    auto xrcd = std::find(w.begin(), w.end(), "xrcd");
    EXPECT_TRUE(xrcd == w.end() || xrcd + 1 == w.end() || xrcd[1] != id)
        << "the TGT QP outlived its last handle";
    EXPECT_EQ(close_xrcd(x2), 0);
    EXPECT_EQ(domain(), "handles 1 objects 1");
}

}  // namespace
}  // namespace uroce::transport_test
