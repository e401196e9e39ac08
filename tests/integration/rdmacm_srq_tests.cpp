// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rdma_create_srq(3) sentence by sentence (docs/cm.md, "SRQs"), built against the system's
// <rdma/rdma_cma.h> and <rdma/rdma_verbs.h> and run over the drop-in libraries, with two
// devices that rdmacm_test.sh starts: uroce0 on 127.0.0.10 (A) and uroce1 on 127.0.0.11
// (B). Each TEST is one sentence of the page; it checks the return value, errno, the
// rdma_cm_id's fields and what the device holds (`uroce res`).
// Environment: UROCE_BUILD (for the uroce CLI), UROCE_RUNTIME_DIR.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "tests/integration/cm_events.h"
#include "tests/integration/verbs_objects.h"

namespace {

constexpr const char* kA = "127.0.0.10";
constexpr const char* kB = "127.0.0.11";

sockaddr_in addr(const char* ip, uint16_t port = 0) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

// What device `dev` holds, from the counts line of `uroce res` (one call for all kinds).
struct Held {
    int pds = -1, cqs = -1, srqs = -1;
};
Held held(const char* dev) {
    const char* build = std::getenv("UROCE_BUILD");
    std::string cmd = std::string(build ? build : ".") + "/bin/uroce res " + dev;
    Held h;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char line[1024];
        while (std::fgets(line, sizeof line, p)) {
            if (std::strncmp(line, "counts ", 7) != 0) continue;
            std::istringstream in(line + 7);
            std::string k;
            int v;
            while (in >> k >> v) {
                if (k == "pds") h.pds = v;
                if (k == "cqs") h.cqs = v;
                if (k == "srqs") h.srqs = v;
            }
        }
        pclose(p);
    }
    return h;
}

// `dev` holds exactly `srqs` SRQs and `cqs` CQs.
void expect_srqs_cqs(const char* dev, int srqs, int cqs) {
    Held h = held(dev);
    EXPECT_EQ(h.srqs, srqs) << dev;
    EXPECT_EQ(h.cqs, cqs) << dev;
}

ibv_srq_init_attr srq_attr(uint32_t max_wr = 8, uint32_t max_sge = 1, void* ctx = nullptr) {
    ibv_srq_init_attr a{};
    a.srq_context = ctx;
    a.attr.max_wr = max_wr;
    a.attr.max_sge = max_sge;
    return a;
}

rdma_cm_event* wait_event(rdma_event_channel* ch, rdma_cm_event_type type) {
    return uroce::cmtest::next_event(ch, type);
}

class CreateSrq : public ::testing::Test {
protected:
    void SetUp() override {
        ch_ = rdma_create_event_channel();
        ASSERT_NE(ch_, nullptr);
    }
    void TearDown() override {
        for (rdma_cm_id* id : ids_) {
            if (id->qp) rdma_destroy_qp(id);
            if (id->srq) rdma_destroy_srq(id);
            rdma_destroy_id(id);
        }
        rdma_destroy_event_channel(ch_);
    }
    // A new id on the test's channel (not bound).
    rdma_cm_id* fresh() {
        rdma_cm_id* id = nullptr;
        EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
        if (id) ids_.push_back(id);
        return id;
    }
    // A new id bound to `ip` (a free port).
    rdma_cm_id* on(const char* ip) {
        rdma_cm_id* id = fresh();
        sockaddr_in a = addr(ip);
        EXPECT_EQ(rdma_bind_addr(id, sa(a)), 0) << std::strerror(errno);
        return id;
    }
    // An XRC receive id (as rdma_xserver's listener makes with rdma_create_ep), bound to ip.
    rdma_cm_id* xrc_recv_on(const char* ip) {
        rdma_addrinfo hints{}, *res = nullptr;
        hints.ai_flags = RAI_PASSIVE;
        hints.ai_port_space = RDMA_PS_IB;
        hints.ai_qp_type = IBV_QPT_XRC_RECV;
        EXPECT_EQ(rdma_getaddrinfo(ip, "0", &hints, &res), 0);
        rdma_cm_id* id = nullptr;
        EXPECT_EQ(rdma_create_ep(&id, res, nullptr, nullptr), 0) << std::strerror(errno);
        rdma_freeaddrinfo(res);
        if (id) {
            EXPECT_EQ(id->qp_type, IBV_QPT_XRC_RECV);
            ids_.push_back(id);
        }
        return id;
    }
    rdma_event_channel* ch_ = nullptr;
    std::vector<rdma_cm_id*> ids_;
};

// "Allocate a SRQ associated with the specified rdma_cm_id."
TEST_F(CreateSrq, AllocatesAnSrqOfTheId) {
    rdma_cm_id* id = on(kA);
    int before = held("uroce0").srqs;
    ibv_srq_init_attr a = srq_attr(8, 1, id);
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0) << std::strerror(errno);
    ASSERT_NE(id->srq, nullptr);
    EXPECT_EQ(id->srq->context, id->verbs);
    EXPECT_EQ(id->srq->srq_context, id);
    EXPECT_EQ(held("uroce0").srqs, before + 1);
}

// "Returns 0 on success, or -1 on error. If an error occurs, errno will be set to indicate
// the failure reason."
TEST_F(CreateSrq, ReturnsZeroOrMinusOneWithErrno) {
    rdma_cm_id* id = on(kA);
    ibv_device_attr dev{};
    ASSERT_EQ(ibv_query_device(id->verbs, &dev), 0);
    ibv_srq_init_attr a = srq_attr(uint32_t(dev.max_srq_wr) + 1);
    errno = 0;
    EXPECT_EQ(rdma_create_srq(id, nullptr, &a), -1);
    EXPECT_EQ(errno, EINVAL);  // more WRs than the device allows (ibv_create_srq's errno)
    EXPECT_EQ(id->srq, nullptr);
    EXPECT_EQ(held("uroce0").srqs, 0);
    a = srq_attr(uint32_t(dev.max_srq_wr));
    EXPECT_EQ(rdma_create_srq(id, nullptr, &a), 0) << std::strerror(errno);
}

// "The rdma_cm_id must be bound to a local RDMA device before calling this function"
// (otherwise EINVAL, docs/cm.md).
TEST_F(CreateSrq, IdMustBeBoundToALocalDevice) {
    rdma_cm_id* unbound = fresh();
    ibv_srq_init_attr a = srq_attr();
    errno = 0;
    EXPECT_EQ(rdma_create_srq(unbound, nullptr, &a), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(unbound->srq, nullptr);

    rdma_cm_id* wildcard = fresh();  // bound, but to no device
    sockaddr_in any = addr("0.0.0.0");
    ASSERT_EQ(rdma_bind_addr(wildcard, sa(any)), 0);
    EXPECT_EQ(wildcard->verbs, nullptr);
    errno = 0;
    EXPECT_EQ(rdma_create_srq(wildcard, nullptr, &a), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(held("uroce0").srqs + held("uroce1").srqs, 0);

    rdma_cm_id* bound = on(kB);
    EXPECT_EQ(rdma_create_srq(bound, nullptr, &a), 0) << std::strerror(errno);
    EXPECT_EQ(held("uroce1").srqs, 1);

    // rdma_resolve_addr binds the id to the device that reaches the destination.
    rdma_cm_id* resolved = fresh();
    sockaddr_in dst = addr(kA, 7000);
    ASSERT_EQ(rdma_resolve_addr(resolved, nullptr, sa(dst), 2000), 0);
    rdma_ack_cm_event(wait_event(ch_, RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT_EQ(rdma_create_srq(resolved, nullptr, &a), 0) << std::strerror(errno);
    EXPECT_EQ(held("uroce0").srqs, 1);
}

// "... and the protection domain, if provided, must be for that same device."
TEST_F(CreateSrq, PdMustBeOfTheSameDevice) {
    rdma_cm_id* a_id = on(kA);
    rdma_cm_id* b_id = on(kB);
    ibv_pd* pd_b = ibv_alloc_pd(b_id->verbs);
    ibv_pd* pd_a = ibv_alloc_pd(a_id->verbs);
    ASSERT_TRUE(pd_a && pd_b);
    ibv_srq_init_attr a = srq_attr();
    errno = 0;
    EXPECT_EQ(rdma_create_srq(a_id, pd_b, &a), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(a_id->srq, nullptr);
    EXPECT_EQ(held("uroce0").srqs + held("uroce1").srqs, 0);
    a = srq_attr();
    ASSERT_EQ(rdma_create_srq(a_id, pd_a, &a), 0) << std::strerror(errno);
    EXPECT_EQ(a_id->srq->pd, pd_a);
    rdma_destroy_srq(a_id);
    EXPECT_EQ(ibv_dealloc_pd(pd_a), 0);
    EXPECT_EQ(ibv_dealloc_pd(pd_b), 0);
}

// "After being allocated, the SRQ will be ready to handle posting of receives." Receives
// posted at once take a SEND over an RC connection whose server QP uses the SRQ.
TEST_F(CreateSrq, ReadyForReceivesOnceAllocated) {
    rdma_cm_id* l = on(kA);
    ASSERT_EQ(rdma_listen(l, 1), 0);
    uint16_t port = ntohs(rdma_get_src_port(l));
    rdma_event_channel* cch = rdma_create_event_channel();
    rdma_cm_id* c = nullptr;
    ASSERT_EQ(rdma_create_id(cch, &c, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in src = addr(kB), dst = addr(kA, port);
    ASSERT_EQ(rdma_resolve_addr(c, sa(src), sa(dst), 2000), 0);
    rdma_ack_cm_event(wait_event(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
    ASSERT_EQ(rdma_resolve_route(c, 2000), 0);
    rdma_ack_cm_event(wait_event(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    ibv_qp_init_attr qa{};
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 1;
    ASSERT_EQ(rdma_create_qp(c, nullptr, &qa), 0);
    ASSERT_EQ(rdma_connect(c, nullptr), 0);

    rdma_cm_event* ev = wait_event(ch_, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NE(ev, nullptr);
    rdma_cm_id* child = ev->id;
    ids_.push_back(child);
    rdma_ack_cm_event(ev);
    ibv_srq_init_attr a = srq_attr(4);
    ASSERT_EQ(rdma_create_srq(child, nullptr, &a), 0);
    char rbuf[64] = {}, sbuf[64] = "to the SRQ";
    ibv_mr* rmr = rdma_reg_msgs(child, rbuf, sizeof rbuf);
    ASSERT_NE(rmr, nullptr);
    // rdma_post_recv posts to id->srq when the id has one; ibv_post_srq_recv works as well.
    EXPECT_EQ(rdma_post_recv(child, rbuf, rbuf, 32, rmr), 0);
    ibv_sge sge{reinterpret_cast<uintptr_t>(rbuf + 32), 32, rmr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    EXPECT_EQ(ibv_post_srq_recv(child->srq, &wr, &bad), 0);
    ibv_qp_init_attr sqa{};  // (qa now names c's CQs: rdma_create_qp writes them back)
    sqa.cap = qa.cap;
    sqa.qp_type = IBV_QPT_RC;
    ASSERT_EQ(rdma_create_qp(child, nullptr, &sqa), 0) << std::strerror(errno);
    EXPECT_EQ(child->qp->srq, child->srq);  // the QP takes id->srq
    ASSERT_EQ(rdma_accept(child, nullptr), 0);
    rdma_ack_cm_event(wait_event(cch, RDMA_CM_EVENT_ESTABLISHED));
    rdma_ack_cm_event(wait_event(ch_, RDMA_CM_EVENT_ESTABLISHED));

    ibv_mr* smr = rdma_reg_msgs(c, sbuf, sizeof sbuf);
    ASSERT_NE(smr, nullptr);
    ASSERT_EQ(rdma_post_send(c, nullptr, sbuf, 11, smr, 0), 0);
    ibv_wc wc{};
    EXPECT_EQ(rdma_get_send_comp(c, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(rdma_get_recv_comp(child, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, reinterpret_cast<uintptr_t>(rbuf));  // the first receive posted
    EXPECT_EQ(wc.byte_len, 11u);
    EXPECT_STREQ(rbuf, "to the SRQ");

    rdma_dereg_mr(smr);
    rdma_dereg_mr(rmr);
    rdma_destroy_qp(c);
    rdma_destroy_id(c);
    rdma_destroy_event_channel(cch);
}

// "If a protection domain is not given - pd parameter is NULL - then the rdma_cm_id will be
// created using a default protection domain."
TEST_F(CreateSrq, NullPdIsTheDefaultPd) {
    rdma_cm_id* id = on(kA);
    ASSERT_NE(id->pd, nullptr);  // the device's default PD, set when the id was bound
    EXPECT_EQ(id->pd->context, id->verbs);
    ibv_pd* dflt = id->pd;
    int pds = held("uroce0").pds;
    ibv_srq_init_attr a = srq_attr();
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0);
    EXPECT_EQ(id->srq->pd, dflt);
    EXPECT_EQ(id->pd, dflt);
    EXPECT_EQ(held("uroce0").pds, pds);  // no PD was allocated for it
}

// "One default protection domain is allocated per RDMA device."
TEST_F(CreateSrq, OneDefaultPdPerDevice) {
    rdma_cm_id* a1 = on(kA);
    int pds_a = held("uroce0").pds;
    rdma_cm_id* a2 = on(kA);
    rdma_cm_id* b1 = on(kB);
    rdma_cm_id* b2 = on(kB);
    EXPECT_EQ(a1->pd, a2->pd);
    EXPECT_EQ(b1->pd, b2->pd);
    EXPECT_NE(a1->pd, b1->pd);
    EXPECT_EQ(b1->pd->context, b1->verbs);
    for (rdma_cm_id* id : {a1, a2, b1, b2}) {
        ibv_srq_init_attr a = srq_attr();
        ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0);
        EXPECT_EQ(id->srq->pd, id->pd);
    }
    Held ha = held("uroce0");
    EXPECT_EQ(ha.pds, pds_a);  // more ids and SRQs, no more PDs
    EXPECT_EQ(ha.srqs, 2);
    EXPECT_EQ(held("uroce1").srqs, 2);
}

// "The initial SRQ attributes are specified by the attr parameter."
TEST_F(CreateSrq, InitialAttributesFromAttr) {
    rdma_cm_id* id = on(kA);
    int ctx_tag = 0;
    ibv_srq_init_attr a = srq_attr(10, 2, &ctx_tag);
    a.attr.srq_limit = 3;
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0);
    ibv_srq_attr q{};
    ASSERT_EQ(ibv_query_srq(id->srq, &q), 0);
    EXPECT_GE(q.max_wr, 10u);
    EXPECT_GE(q.max_sge, 2u);
    EXPECT_EQ(q.srq_limit, 3u);
    EXPECT_EQ(id->srq->srq_context, &ctx_tag);
    // Two SGEs per receive are allowed, more than max_sge are not.
    char buf[64];
    ibv_mr* mr = rdma_reg_msgs(id, buf, sizeof buf);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge[3];
    for (int i = 0; i < 3; ++i) sge[i] = {reinterpret_cast<uintptr_t>(buf + 16 * i), 16, mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.sg_list = sge;
    wr.num_sge = 2;
    EXPECT_EQ(ibv_post_srq_recv(id->srq, &wr, &bad), 0);
    wr.num_sge = int(q.max_sge) + 1;
    ibv_sge many[8];
    for (auto& s : many) s = sge[0];
    wr.sg_list = many;
    EXPECT_EQ(ibv_post_srq_recv(id->srq, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
    rdma_dereg_mr(mr);
}

// "The ext.xrc.cq fields in the ibv_srq_init_attr is optional." With a CQ of the caller's,
// the CM allocates none.
TEST_F(CreateSrq, XrcCqIsOptional) {
    rdma_cm_id* id = xrc_recv_on(kA);
    ASSERT_NE(id, nullptr);
    ibv_cq* mine = ibv_create_cq(id->verbs, 8, nullptr, nullptr, 0);
    ASSERT_NE(mine, nullptr);
    int cqs = held("uroce0").cqs;
    ibv_srq_init_attr_ex a = verbs_objects::xrc_srq_attr(
        nullptr, nullptr, mine, 8, IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ);
    ASSERT_EQ(rdma_create_srq_ex(id, &a), 0) << std::strerror(errno);
    EXPECT_EQ(a.cq, mine);
    EXPECT_EQ(id->recv_cq, nullptr);
    EXPECT_EQ(id->recv_cq_channel, nullptr);
    EXPECT_EQ(held("uroce0").cqs, cqs);
    rdma_destroy_srq(id);
    EXPECT_EQ(ibv_destroy_cq(mine), 0);  // still the caller's: rdma_destroy_srq left it
}

// "If a completion queue is not specified for an XRC SRQ, then a CQ will be allocated by the
// rdma_cm for the SRQ, along with corresponding completion channels."
TEST_F(CreateSrq, XrcSrqWithoutCqGetsACqAndChannelOfTheCm) {
    rdma_cm_id* id = xrc_recv_on(kA);
    ASSERT_NE(id, nullptr);
    int cqs = held("uroce0").cqs;
    ibv_srq_init_attr a = srq_attr(16);
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0) << std::strerror(errno);  // XRC: the id's type
    ASSERT_NE(id->recv_cq, nullptr);
    ASSERT_NE(id->recv_cq_channel, nullptr);
    EXPECT_EQ(id->recv_cq->channel, id->recv_cq_channel);
    EXPECT_EQ(id->recv_cq->context, id->verbs);
    EXPECT_GE(id->recv_cq->cqe, 16);
    EXPECT_EQ(held("uroce0").cqs, cqs + 1);
    uint32_t num = 0;
    EXPECT_EQ(ibv_get_srq_num(id->srq, &num), 0);
    EXPECT_NE(num, 0u);
    const char* build = std::getenv("UROCE_BUILD");
    std::string cmd = std::string(build ? build : ".") + "/bin/uroce res uroce0 srq";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char line[1024];
        while (std::fgets(line, sizeof line, p)) out += line;
        pclose(p);
    }
    EXPECT_NE(out.find("type XRC"), std::string::npos) << out;
}

// "Completion channels and CQ data created by the rdma_cm are exposed to the user through
// the rdma_cm_id structure." An XRC connection from B to A: the SEND lands in the SRQ and
// rdma_get_recv_comp finds it through id->recv_cq and id->recv_cq_channel.
TEST_F(CreateSrq, CmCqAndChannelAreTheIds) {
    rdma_addrinfo hints{}, *res = nullptr;
    hints.ai_flags = RAI_PASSIVE;
    hints.ai_port_space = RDMA_PS_IB;
    hints.ai_qp_type = IBV_QPT_XRC_RECV;
    ASSERT_EQ(rdma_getaddrinfo(kA, "0", &hints, &res), 0);
    ibv_qp_init_attr la{};
    la.cap.max_recv_wr = 1;
    la.cap.max_recv_sge = 1;
    rdma_cm_id* listen = nullptr;
    ASSERT_EQ(rdma_create_ep(&listen, res, nullptr, &la), 0);
    rdma_freeaddrinfo(res);
    ASSERT_EQ(rdma_listen(listen, 1), 0);
    std::string port = std::to_string(ntohs(rdma_get_src_port(listen)));

    char rbuf[16] = {};
    ibv_wc rwc{};
    int got = -1;
    bool srq_ok = false, cq_ok = false;
    std::thread server([&] {
        rdma_cm_id* id = nullptr;
        if (rdma_get_request(listen, &id)) return;
        ibv_srq_init_attr a = srq_attr(1);
        srq_ok = rdma_create_srq(id, nullptr, &a) == 0 && id->srq;
        cq_ok = id->recv_cq && id->recv_cq_channel && id->recv_cq->channel == id->recv_cq_channel;
        uint32_t n = 0;
        if (srq_ok) ibv_get_srq_num(id->srq, &n);
        uint32_t be = htonl(n);
        ibv_mr* mr = rdma_reg_msgs(id, rbuf, sizeof rbuf);
        if (mr && srq_ok) rdma_post_recv(id, nullptr, rbuf, sizeof rbuf, mr);
        rdma_conn_param p{};
        p.private_data = &be;
        p.private_data_len = sizeof be;
        if (rdma_accept(id, &p) == 0) got = rdma_get_recv_comp(id, &rwc);
        rdma_disconnect(id);
        if (mr) rdma_dereg_mr(mr);
        rdma_destroy_ep(id);
    });

    rdma_addrinfo ch{}, *cres = nullptr;
    ch.ai_port_space = RDMA_PS_IB;
    ch.ai_qp_type = IBV_QPT_XRC_SEND;
    sockaddr_in src = addr(kB);
    ch.ai_src_addr = sa(src);
    ch.ai_src_len = sizeof src;
    ASSERT_EQ(rdma_getaddrinfo(kA, port.c_str(), &ch, &cres), 0);
    ibv_qp_init_attr ca{};
    ca.cap.max_send_wr = 1;
    ca.cap.max_send_sge = 1;
    ca.sq_sig_all = 1;
    rdma_cm_id* c = nullptr;
    ASSERT_EQ(rdma_create_ep(&c, cres, nullptr, &ca), 0) << std::strerror(errno);
    rdma_freeaddrinfo(cres);
    EXPECT_EQ(c->qp->qp_type, IBV_QPT_XRC_SEND);
    char msg[16] = "xrc via the CM";
    ASSERT_EQ(rdma_connect(c, nullptr), 0) << std::strerror(errno);
    uint32_t srqn = ntohl(*static_cast<const uint32_t*>(c->event->param.conn.private_data));
    ibv_sge sge{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0};
    ibv_send_wr wr = verbs_objects::send_wr(0, IBV_WR_SEND, &sge), *bad = nullptr;
    wr.send_flags = IBV_SEND_INLINE;  // unsignaled
    wr.qp_type.xrc.remote_srqn = srqn;
    ASSERT_EQ(ibv_post_send(c->qp, &wr, &bad), 0);
    ibv_wc wc{};
    EXPECT_EQ(rdma_get_send_comp(c, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    rdma_disconnect(c);  // both sides at once, as rdma_xclient and rdma_xserver do
    server.join();
    EXPECT_TRUE(srq_ok);
    EXPECT_TRUE(cq_ok);
    EXPECT_EQ(got, 1);
    EXPECT_EQ(rwc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(rwc.byte_len, sizeof msg);
    EXPECT_STREQ(rbuf, "xrc via the CM");
    rdma_destroy_ep(c);
    rdma_destroy_ep(listen);
}

// "The actual capabilities and properties of the created SRQ will be returned to the user
// through the attr parameter."
TEST_F(CreateSrq, ActualCapabilitiesReturnedInAttr) {
    rdma_cm_id* id = on(kA);
    ibv_srq_init_attr a = srq_attr(5, 1);
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0);
    ibv_srq_attr q{};
    ASSERT_EQ(ibv_query_srq(id->srq, &q), 0);
    EXPECT_EQ(a.attr.max_wr, q.max_wr);
    EXPECT_EQ(a.attr.max_sge, q.max_sge);

    rdma_cm_id* x = xrc_recv_on(kA);
    ASSERT_NE(x, nullptr);
    ibv_srq_init_attr_ex e =
        verbs_objects::xrc_srq_attr(nullptr, nullptr, nullptr, 3, IBV_SRQ_INIT_ATTR_TYPE);
    ASSERT_EQ(rdma_create_srq_ex(x, &e), 0) << std::strerror(errno);
    ASSERT_EQ(ibv_query_srq(x->srq, &q), 0);
    EXPECT_EQ(e.attr.max_wr, q.max_wr);
    // The properties it was made with: the default PD, the device's XRC domain, the CQ the
    // CM allocated.
    uint32_t want = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                    IBV_SRQ_INIT_ATTR_CQ;
    EXPECT_EQ(e.comp_mask & want, want);
    EXPECT_EQ(e.pd, x->pd);
    EXPECT_NE(e.xrcd, nullptr);
    EXPECT_EQ(e.cq, x->recv_cq);
}

// "An rdma_cm_id may only be associated with a single SRQ." A second is EINVAL and changes
// nothing.
TEST_F(CreateSrq, OneSrqPerId) {
    rdma_cm_id* id = on(kA);
    ibv_srq_init_attr a = srq_attr();
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0);
    ibv_srq* first = id->srq;
    errno = 0;
    EXPECT_EQ(rdma_create_srq(id, nullptr, &a), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(id->srq, first);
    EXPECT_EQ(held("uroce0").srqs, 1);

    rdma_cm_id* x = xrc_recv_on(kA);
    ASSERT_NE(x, nullptr);
    ASSERT_EQ(rdma_create_srq(x, nullptr, &a), 0);
    ibv_srq* xfirst = x->srq;
    ibv_cq* cq = x->recv_cq;
    int cqs = held("uroce0").cqs;
    errno = 0;
    EXPECT_EQ(rdma_create_srq(x, nullptr, &a), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(x->srq, xfirst);
    EXPECT_EQ(x->recv_cq, cq);
    expect_srqs_cqs("uroce0", 2, cqs);
}

// rdma_destroy_srq(3): the SRQ goes, and with it what rdma_create_srq allocated (the XRC
// SRQ's CQ and channel); the QP's CQs and a CQ the caller passed stay. The id can have an
// SRQ again afterwards.
TEST_F(CreateSrq, DestroySrqFreesWhatTheCmAllocated) {
    rdma_cm_id* x = xrc_recv_on(kA);
    ASSERT_NE(x, nullptr);
    Held h0 = held("uroce0");
    int srqs = h0.srqs, cqs = h0.cqs;
    ibv_srq_init_attr a = srq_attr();
    ASSERT_EQ(rdma_create_srq(x, nullptr, &a), 0);
    EXPECT_EQ(held("uroce0").cqs, cqs + 1);
    rdma_destroy_srq(x);
    EXPECT_EQ(x->srq, nullptr);
    EXPECT_EQ(x->recv_cq, nullptr);
    EXPECT_EQ(x->recv_cq_channel, nullptr);
    expect_srqs_cqs("uroce0", srqs, cqs);
    ASSERT_EQ(rdma_create_srq(x, nullptr, &a), 0);  // one SRQ per id, not one per lifetime
    EXPECT_NE(x->recv_cq, nullptr);

    // A basic SRQ on an id whose QP has CQs of the CM's (the QP made first, so it does not
    // use the SRQ): destroying the SRQ keeps the QP's CQs.
    rdma_cm_id* id = fresh();
    sockaddr_in dst = addr(kB, 7000);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 2000), 0);
    rdma_ack_cm_event(wait_event(ch_, RDMA_CM_EVENT_ADDR_RESOLVED));
    ibv_qp_init_attr qa{};
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    qa.qp_type = IBV_QPT_RC;
    ASSERT_EQ(rdma_create_qp(id, nullptr, &qa), 0);
    ibv_cq *scq = id->send_cq, *rcq = id->recv_cq;
    ASSERT_TRUE(scq && rcq);
    int bcqs = held("uroce1").cqs;
    ASSERT_EQ(rdma_create_srq(id, nullptr, &a), 0);
    EXPECT_EQ(held("uroce1").cqs, bcqs);  // a basic SRQ needs no CQ
    rdma_destroy_srq(id);
    EXPECT_EQ(id->srq, nullptr);
    EXPECT_EQ(id->send_cq, scq);
    EXPECT_EQ(id->recv_cq, rcq);
    expect_srqs_cqs("uroce1", 0, bcqs);
}

}  // namespace
