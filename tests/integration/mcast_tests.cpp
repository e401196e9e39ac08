// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD multicast through the public APIs (docs/multicast.md), built against the system's
// <infiniband/verbs.h> and <rdma/rdma_cma.h> and run over the drop-in libraries, with two
// devices that mcast_test.sh starts: uroce0 on 127.0.0.6 and uroce1 on 127.0.0.7.
//   Verbs.*   ibv_attach_mcast/ibv_detach_mcast as the kernel answers them; a datagram sent
//             to a group reaches every attached QP on both devices (bytes, every wc field,
//             the GRH with the group as destination), and no QP that is detached, attached
//             to another group, or on another Q_Key; destroying a QP detaches it.
//   Rdmacm.*  rdma_join_multicast(_ex)/rdma_leave_multicast: the kernel's and rdma-core's
//             errno values, the MULTICAST_JOIN event's fields, send-only joins, leave.
// It runs against devices of its own by design (mcast_test.sh): the script checks after the
// run that no membership is left in the devices or in the kernel, and the Rdmacm tests bind
// those devices' addresses. Set-up helpers are tests/transport/verbs_util.h's.
// Environment: UROCE_BUILD (for the uroce CLI), UROCE_RUNTIME_DIR, UROCE_UDP_PORT.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/verbs_objects.h"
#include "tests/transport/verbs_util.h"

namespace {

constexpr uint32_t kMcastQpn = 0xffffff;
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kMsg = 256;  // payload bytes per datagram
constexpr int kSlots = 16;      // receive slots per QP

uint32_t ip_of(const char* s) {
    in_addr a{};
    inet_pton(AF_INET, s, &a);
    return a.s_addr;
}

// Groups of this test run's own (each ctest has its own UDP port).
uint32_t group(int n) {
    const char* p = std::getenv("UROCE_UDP_PORT");
    unsigned port = p ? unsigned(std::atoi(p)) : 4791;
    char s[32];
    std::snprintf(s, sizeof s, "239.%d.%u.%u", 80 + n, (port >> 8) & 255, port & 255);
    return ip_of(s);
}

ibv_gid mapped_gid(uint32_t ip_be) { return uroce::verbs_util::ipv4_gid(ip_be); }

std::string cli(const std::string& args) {
    const char* build = std::getenv("UROCE_BUILD");
    return uroce::verbs_util::command_output(std::string(build ? build : ".") + "/bin/uroce " +
                                             args + " 2>&1");
}

// The QPs the device lists as attached to `mgid` ("mcast GID ipv4 A qps 0x.. 0x.."), or -1
// if the device has no such group.
int attached(const char* dev, const ibv_gid& mgid) {
    char gid[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, mgid.raw, gid, sizeof gid);
    std::string res = cli(std::string("res ") + dev), prefix = std::string("mcast ") + gid + " ";
    size_t at = res.find(prefix);
    if (at == std::string::npos) return -1;
    std::string line = res.substr(at, res.find('\n', at) - at);
    int n = 0;
    for (size_t k = line.find(" 0x"); k != std::string::npos; k = line.find(" 0x", k + 1)) ++n;
    return n;
}

// The number after `key` on the first line of `uroce counters DEV` that starts with `prefix`
// and has `key` (-1 if none), e.g. ("counters_mcast", "deliveries"), ("drop", "bad_qp").
long counter(const char* dev, const char* prefix, const char* key) {
    std::string out = cli(std::string("counters ") + dev);
    std::string k = std::string(" ") + key + " ";
    for (size_t at = 0; at < out.size();) {
        size_t end = out.find('\n', at);
        if (end == std::string::npos) end = out.size();
        std::string line = out.substr(at, end - at);
        at = end + 1;
        size_t f = line.find(k);
        if (line.rfind(std::string(prefix) + " ", 0) == 0 && f != std::string::npos)
            return std::atol(line.c_str() + f + k.size());
    }
    return -1;
}

struct Dev {
    const char* name;
    uint32_t ip;
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
};

// A UD QP in RTS with one CQ and a registered buffer of kSlots receive slots (GRH + kMsg)
// followed by one send slot.
struct Ud {
    Dev* dev = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<uint8_t> buf;
    uint32_t qpn() const { return qp->qp_num; }
    uint8_t* slot(int i) { return buf.data() + size_t(i) * (kGrh + kMsg); }
    uint8_t* send_buf() { return slot(kSlots); }
};

class Mcast : public ::testing::Test {
protected:
    Dev a_{"uroce0", ip_of("127.0.0.6")}, b_{"uroce1", ip_of("127.0.0.7")};
    std::vector<std::unique_ptr<Ud>> uds_;
    std::vector<ibv_ah*> ahs_;

    void SetUp() override {
        for (Dev* d : {&a_, &b_}) {
            d->ctx = uroce::verbs_util::open_device(d->name);
            ASSERT_NE(d->ctx, nullptr) << d->name << " is not running";
            d->pd = ibv_alloc_pd(d->ctx);
            ASSERT_NE(d->pd, nullptr);
        }
    }

    void TearDown() override {
        for (ibv_ah* ah : ahs_) {
            EXPECT_EQ(ibv_destroy_ah(ah), 0);
        }
        for (auto& u : uds_) destroy(*u);
        for (Dev* d : {&a_, &b_}) {
            EXPECT_EQ(verbs_objects::destroy_if(d->pd, ibv_dealloc_pd), 0);
            EXPECT_EQ(verbs_objects::destroy_if(d->ctx, ibv_close_device), 0);
        }
    }

    static void destroy(Ud& u) {
        EXPECT_EQ(verbs_objects::destroy_if(u.qp, ibv_destroy_qp), 0);
        EXPECT_EQ(verbs_objects::destroy_if(u.mr, ibv_dereg_mr), 0);
        EXPECT_EQ(verbs_objects::destroy_if(u.cq, ibv_destroy_cq), 0);
    }

    Ud& make_ud(Dev& d, uint32_t qkey = kQkey, ibv_qp_type type = IBV_QPT_UD) {
        auto u = std::make_unique<Ud>();
        u->dev = &d;
        u->buf.assign(size_t(kSlots + 1) * (kGrh + kMsg), 0);
        u->cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
        EXPECT_NE(u->cq, nullptr);
        u->mr = ibv_reg_mr(d.pd, u->buf.data(), u->buf.size(), IBV_ACCESS_LOCAL_WRITE);
        EXPECT_NE(u->mr, nullptr);
        ibv_qp_init_attr ia{};
        ia.send_cq = ia.recv_cq = u->cq;
        ia.qp_type = type;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = kSlots;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        u->qp = ibv_create_qp(d.pd, &ia);
        EXPECT_NE(u->qp, nullptr) << std::strerror(errno);
        if (type == IBV_QPT_UD && u->qp) {
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 1;
            a.qkey = qkey;
            EXPECT_EQ(ibv_modify_qp(u->qp, &a,
                                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
                      0);
            a = {};
            a.qp_state = IBV_QPS_RTR;
            EXPECT_EQ(ibv_modify_qp(u->qp, &a, IBV_QP_STATE), 0);
            a.qp_state = IBV_QPS_RTS;
            a.sq_psn = 0;
            EXPECT_EQ(ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
        }
        uds_.push_back(std::move(u));
        return *uds_.back();
    }

    void post_recvs(Ud& u) {
        for (int i = 0; i < kSlots; ++i) {
            ibv_sge sge{reinterpret_cast<uintptr_t>(u.slot(i)), kGrh + kMsg, u.mr->lkey};
            ibv_recv_wr wr{}, *bad = nullptr;
            wr.wr_id = uint64_t(i);
            wr.sg_list = &sge;
            wr.num_sge = 1;
            ASSERT_EQ(ibv_post_recv(u.qp, &wr, &bad), 0);
        }
    }

    // An AH as the RDMA CM hands one out for a group: GRH with the group's GID; the LID is a
    // multicast LID that RoCE ignores.
    ibv_ah* group_ah(Dev& d, uint32_t group_be) {
        ibv_ah_attr a{};
        a.is_global = 1;
        a.grh.dgid = mapped_gid(group_be);
        a.grh.hop_limit = 64;
        a.dlid = 0xc001;
        a.port_num = 1;
        ibv_ah* ah = ibv_create_ah(d.pd, &a);
        EXPECT_NE(ah, nullptr) << std::strerror(errno);
        ahs_.push_back(ah);
        return ah;
    }

    // Sends datagram `seq` (kMsg bytes, SEND_WITH_IMM imm = seq) and waits for its
    // completion.
    void send(Ud& u, ibv_ah* ah, uint32_t seq, uint32_t qpn = kMcastQpn, uint32_t qkey = kQkey) {
        for (uint32_t i = 0; i < kMsg; ++i) u.send_buf()[i] = uint8_t(seq * 7 + i);
        ibv_sge sge{reinterpret_cast<uintptr_t>(u.send_buf()), kMsg, u.mr->lkey};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = 1000 + seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.imm_data = htonl(seq);
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = qpn;
        wr.wr.ud.remote_qkey = qkey;
        ASSERT_EQ(ibv_post_send(u.qp, &wr, &bad), 0);
        ibv_wc wc{};
        ASSERT_TRUE(poll(u, &wc, 5000)) << "no send completion";
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc.opcode, IBV_WC_SEND);
        EXPECT_EQ(wc.wr_id, 1000 + seq);
    }

    static bool poll(Ud& u, ibv_wc* wc, int ms) {
        return uroce::verbs_util::poll_one(u.cq, wc, ms / 1000.0) == 1;
    }

    // The receive of datagram `seq` from `from`: every wc field, the GRH, the bytes.
    void expect_received(Ud& u, const Ud& from, uint32_t seq, uint32_t group_be) {
        ibv_wc wc{};
        ASSERT_TRUE(poll(u, &wc, 5000)) << "QP 0x" << std::hex << u.qpn() << " got nothing";
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
        EXPECT_EQ(wc.opcode, IBV_WC_RECV);
        EXPECT_EQ(wc.byte_len, kGrh + kMsg);
        EXPECT_EQ(wc.qp_num, u.qpn());
        EXPECT_EQ(wc.src_qp, from.qpn());
        EXPECT_EQ(wc.wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM),
                  unsigned(IBV_WC_GRH | IBV_WC_WITH_IMM));
        EXPECT_EQ(ntohl(wc.imm_data), seq);
        ASSERT_LT(wc.wr_id, uint64_t(kSlots));
        const uint8_t* g = u.slot(int(wc.wr_id));
        // RoCEv2 over IPv4: 20 zero bytes, then the packet's IPv4 header.
        for (int i = 0; i < 20; ++i) EXPECT_EQ(g[i], 0) << "GRH byte " << i;
        const uint8_t* ip = g + 20;
        EXPECT_EQ(ip[0], 0x45);
        EXPECT_EQ(ip[9], 17);  // UDP
        uint32_t src, dst;
        std::memcpy(&src, ip + 12, 4);
        std::memcpy(&dst, ip + 16, 4);
        EXPECT_EQ(src, from.dev->ip);
        EXPECT_EQ(dst, group_be) << "the GRH's destination is not the group";
        for (uint32_t i = 0; i < kMsg; ++i)
            if (g[kGrh + i] != uint8_t(seq * 7 + i)) {
                ADD_FAILURE() << "payload byte " << i << " of datagram " << seq;
                break;
            }
        // A reply goes to the sender's own address, not to the group.
        ibv_ah_attr ah{};
        ASSERT_EQ(ibv_init_ah_from_wc(u.dev->ctx, 1, &wc,
                                      reinterpret_cast<ibv_grh*>(u.slot(int(wc.wr_id))), &ah),
                  0);
        uint32_t back;
        std::memcpy(&back, &ah.grh.dgid.raw[12], 4);
        EXPECT_EQ(back, from.dev->ip);
    }

    void expect_nothing(Ud& u, int ms = 300) {
        ibv_wc wc{};
        EXPECT_FALSE(poll(u, &wc, ms))
            << "QP 0x" << std::hex << u.qpn() << " received a datagram (wr_id " << wc.wr_id << ")";
    }
};

TEST_F(Mcast, AttachRulesAsTheKernel) {
    ibv_device_attr da{};
    ASSERT_EQ(ibv_query_device(a_.ctx, &da), 0);
    EXPECT_GT(da.max_mcast_grp, 0);
    EXPECT_GT(da.max_mcast_qp_attach, 0);
    EXPECT_GE(da.max_total_mcast_qp_attach, da.max_mcast_grp);

    Ud& ud = make_ud(a_);
    Ud& rc = make_ud(a_, kQkey, IBV_QPT_RC);
    ibv_gid g1 = mapped_gid(group(1));
    // UD QPs only; multicast GIDs only (IPv6 ff::/8 or IPv4-mapped 224.0.0.0/4).
    EXPECT_EQ(ibv_attach_mcast(rc.qp, &g1, 0), EINVAL);
    ibv_gid unicast = mapped_gid(a_.ip), zero{};
    EXPECT_EQ(ibv_attach_mcast(ud.qp, &unicast, 0), EINVAL);
    EXPECT_EQ(ibv_attach_mcast(ud.qp, &zero, 0), EINVAL);
    EXPECT_EQ(attached("uroce0", g1), -1);
    // Twice is fine and attaches once; the LID is ignored on RoCE.
    EXPECT_EQ(ibv_attach_mcast(ud.qp, &g1, 0xc001), 0);
    EXPECT_EQ(ibv_attach_mcast(ud.qp, &g1, 0xc001), 0);
    EXPECT_EQ(attached("uroce0", g1), 1);
    // Detach names the attachment by GID and LID (uverbs); a second detach finds nothing.
    EXPECT_EQ(ibv_detach_mcast(ud.qp, &g1, 0), EINVAL);
    EXPECT_EQ(ibv_detach_mcast(rc.qp, &g1, 0xc001), EINVAL);
    EXPECT_EQ(ibv_detach_mcast(ud.qp, &g1, 0xc001), 0);
    EXPECT_EQ(ibv_detach_mcast(ud.qp, &g1, 0xc001), EINVAL);
    EXPECT_EQ(attached("uroce0", g1), -1);
    // An IPv6 multicast GID is a multicast GID: accepted (no IPv4 group to join behind it).
    ibv_gid v6{};
    v6.raw[0] = 0xff;
    v6.raw[1] = 0x0e;
    v6.raw[15] = 1;
    EXPECT_EQ(ibv_attach_mcast(ud.qp, &v6, 0), 0);
    EXPECT_EQ(attached("uroce0", v6), 1);
    EXPECT_EQ(ibv_detach_mcast(ud.qp, &v6, 0), 0);
    // An AH can only name IPv4 (mapped) destinations: an IPv6 group is EINVAL.
    ibv_ah_attr aa{};
    aa.is_global = 1;
    aa.grh.dgid = v6;
    aa.port_num = 1;
    errno = 0;
    EXPECT_EQ(ibv_create_ah(a_.pd, &aa), nullptr);
    EXPECT_EQ(errno, EINVAL);
}

TEST_F(Mcast, EveryAttachedQpOnEveryDeviceGetsEachDatagram) {
    uint32_t g1 = group(1), g2 = group(2);
    ibv_gid m1 = mapped_gid(g1), m2 = mapped_gid(g2);
    Ud& sender = make_ud(a_);
    Ud& a1 = make_ud(a_);
    Ud& a2 = make_ud(a_);
    Ud& b1 = make_ud(b_);
    Ud& other_group = make_ud(b_);
    Ud& not_attached = make_ud(b_);
    Ud& other_qkey = make_ud(b_, 0x22222222);
    for (Ud* u : {&a1, &a2, &b1, &other_group, &not_attached, &other_qkey}) post_recvs(*u);
    for (Ud* u : {&a1, &a2, &b1, &other_qkey}) ASSERT_EQ(ibv_attach_mcast(u->qp, &m1, 0), 0);
    ASSERT_EQ(ibv_attach_mcast(other_group.qp, &m2, 0), 0);
    EXPECT_EQ(attached("uroce0", m1), 2);
    EXPECT_EQ(attached("uroce1", m1), 2);
    EXPECT_EQ(attached("uroce1", m2), 1);
    long qkey_drops = counter("uroce1", "drop", "bad_qkey");
    long deliveries_b = counter("uroce1", "counters_mcast", "deliveries");

    ibv_ah* ah = group_ah(a_, g1);
    for (uint32_t seq = 0; seq < 4; ++seq) send(sender, ah, seq);
    for (uint32_t seq = 0; seq < 4; ++seq)
        for (Ud* u : {&a1, &a2, &b1}) expect_received(*u, sender, seq, g1);
    for (Ud* u : {&other_group, &not_attached, &other_qkey}) expect_nothing(*u);
    // uroce1 handed each datagram to its two attached QPs; the wrong Q_Key dropped its copy.
    EXPECT_EQ(counter("uroce1", "counters_mcast", "deliveries") - deliveries_b, 8);
    EXPECT_EQ(counter("uroce1", "drop", "bad_qkey") - qkey_drops, 4);

    // Detached: no more copies for a2; the others still get them.
    ASSERT_EQ(ibv_detach_mcast(a2.qp, &m1, 0), 0);
    send(sender, ah, 4);
    expect_received(a1, sender, 4, g1);
    expect_received(b1, sender, 4, g1);
    expect_nothing(a2);

    // A datagram to the group that does not name the multicast QP is dropped (IBTA 9.6.1.1).
    long bad_qp = counter("uroce1", "drop", "bad_qp");
    long deliveries = counter("uroce1", "counters_mcast", "deliveries");
    send(sender, ah, 5, b1.qpn());
    expect_nothing(b1);
    expect_nothing(a1, 50);
    EXPECT_EQ(counter("uroce1", "drop", "bad_qp") - bad_qp, 1);
    EXPECT_EQ(counter("uroce1", "counters_mcast", "deliveries"), deliveries);
}

TEST_F(Mcast, DestroyingTheQpDetachesIt) {
    uint32_t g3 = group(3);
    ibv_gid m3 = mapped_gid(g3);
    Ud& keep = make_ud(b_);
    Ud& gone = make_ud(b_);
    post_recvs(keep);
    ASSERT_EQ(ibv_attach_mcast(keep.qp, &m3, 0), 0);
    ASSERT_EQ(ibv_attach_mcast(gone.qp, &m3, 0), 0);
    EXPECT_EQ(attached("uroce1", m3), 2);
    destroy(gone);
    EXPECT_EQ(attached("uroce1", m3), 1);
    Ud& sender = make_ud(a_);
    send(sender, group_ah(a_, g3), 9);
    expect_received(keep, sender, 9, g3);
    destroy(keep);
    EXPECT_EQ(attached("uroce1", m3), -1) << "the device still has the group";
}

// ---- librdmacm ---------------------------------------------------------------------------

sockaddr_in sin_of(uint32_t ip_be, uint16_t port = 0) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    s.sin_addr.s_addr = ip_be;
    s.sin_port = htons(port);
    return s;
}

// A group of this run (group(n)) as a socket address.
struct GroupAddr {
    uint32_t ip;
    sockaddr_in sin;
    sockaddr* sa() { return reinterpret_cast<sockaddr*>(&sin); }
};
GroupAddr group_addr(int n) { return GroupAddr{group(n), sin_of(group(n))}; }

rdma_cm_event* next_event(rdma_event_channel* ch, int ms = 5000) {
    pollfd p{ch->fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return nullptr;
    rdma_cm_event* ev = nullptr;
    return rdma_get_cm_event(ch, &ev) == 0 ? ev : nullptr;
}

class Rdmacm : public ::testing::Test {
protected:
    rdma_event_channel* ch_ = nullptr;
    void SetUp() override {
        ch_ = rdma_create_event_channel();
        ASSERT_NE(ch_, nullptr);
    }
    void TearDown() override { rdma_destroy_event_channel(ch_); }

    // A UDP id bound to `ip` with a UD QP (the CM's default PD and CQs).
    rdma_cm_id* bound_id(uint32_t ip_be, bool with_qp = true) {
        rdma_cm_id* id = nullptr;
        EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0);
        sockaddr_in a = sin_of(ip_be);
        EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), 0);
        if (with_qp) {
            ibv_qp_init_attr ia{};
            ia.qp_type = IBV_QPT_UD;
            ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
            ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
            EXPECT_EQ(rdma_create_qp(id, nullptr, &ia), 0) << std::strerror(errno);
        }
        return id;
    }
    void destroy(rdma_cm_id* id) {
        if (id->qp) rdma_destroy_qp(id);
        EXPECT_EQ(rdma_destroy_id(id), 0);
    }
};

TEST_F(Rdmacm, JoinRules) {
    GroupAddr ga = group_addr(4);
    sockaddr* gsa = ga.sa();
    // Not bound to a device: EINVAL (the kernel's "ULP is calling this wrong").
    rdma_cm_id* idle = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &idle, nullptr, RDMA_PS_UDP), 0);
    errno = 0;
    EXPECT_EQ(rdma_join_multicast(idle, gsa, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(rdma_destroy_id(idle), 0);
    // Not UD: EINVAL.
    rdma_cm_id* tcp = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &tcp, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in local = sin_of(ip_of("127.0.0.6"));
    ASSERT_EQ(rdma_bind_addr(tcp, reinterpret_cast<sockaddr*>(&local)), 0);
    errno = 0;
    EXPECT_EQ(rdma_join_multicast(tcp, gsa, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(rdma_destroy_id(tcp), 0);

    rdma_cm_id* id = bound_id(ip_of("127.0.0.6"));
    // The zero address (an SA-assigned group on InfiniBand) does not exist on RoCE.
    sockaddr_in any = sin_of(0);
    errno = 0;
    EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&any), nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    // An IPv6 group from an id on an IPv4 address: RoCEv2 has no path between versions.
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "ff0e::1", &v6.sin6_addr);
    errno = 0;
    EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&v6), nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    // rdma_join_multicast_ex: rdma-core's checks of comp_mask and join_flags.
    rdma_cm_join_mc_attr_ex x{};
    x.addr = gsa;
    x.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
    errno = 0;
    EXPECT_EQ(rdma_join_multicast_ex(id, &x, nullptr), -1);
    EXPECT_EQ(errno, ENOTSUP);
    x.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    x.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
    errno = 0;
    EXPECT_EQ(rdma_join_multicast_ex(id, &x, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    x.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    x.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
    errno = 0;
    EXPECT_EQ(rdma_join_multicast_ex(id, &x, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
    // Leaving a group the id never joined.
    errno = 0;
    EXPECT_EQ(rdma_leave_multicast(id, gsa), -1);
    EXPECT_EQ(errno, EADDRNOTAVAIL);
    // A unicast address maps to a GID that is no multicast GID: the join is reported, and
    // attaching the QP fails when the event is read (rdma-core): MULTICAST_ERROR.
    sockaddr_in uni = sin_of(ip_of("10.1.2.3"));
    ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&uni), nullptr), 0);
    rdma_cm_event* ev = next_event(ch_);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->event, RDMA_CM_EVENT_MULTICAST_ERROR);
    EXPECT_NE(ev->status, 0);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
    EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&uni)), 0);
    destroy(id);
}

TEST_F(Rdmacm, JoinEventAttachesAndLeaveDetaches) {
    GroupAddr ga = group_addr(5);
    uint32_t g = ga.ip;
    sockaddr* gsa = ga.sa();
    ibv_gid mgid = mapped_gid(g);
    rdma_cm_id* id = bound_id(ip_of("127.0.0.7"));
    int ctx_tag = 0;
    ASSERT_EQ(rdma_join_multicast(id, gsa, &ctx_tag), 0);
    rdma_cm_event* ev = next_event(ch_);
    ASSERT_NE(ev, nullptr);
    ASSERT_EQ(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN) << rdma_event_str(ev->event);
    EXPECT_EQ(ev->status, 0);
    EXPECT_EQ(ev->id, id);
    const rdma_ud_param& ud = ev->param.ud;
    EXPECT_EQ(ud.private_data, &ctx_tag);  // the join's context
    EXPECT_EQ(ud.qp_num, kMcastQpn);
    EXPECT_EQ(ud.qkey, uint32_t(RDMA_UDP_QKEY));
    EXPECT_EQ(ud.ah_attr.is_global, 1);
    EXPECT_EQ(std::memcmp(ud.ah_attr.grh.dgid.raw, mgid.raw, 16), 0);
    EXPECT_EQ(ud.ah_attr.port_num, 1);
    EXPECT_EQ(ud.ah_attr.grh.sgid_index, 0);
    // The QP is attached now that the event was read.
    EXPECT_EQ(attached("uroce1", mgid), 1);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);

    // A send-only member on the other device: joined, not attached; it can send to the group.
    rdma_cm_id* tx = bound_id(ip_of("127.0.0.6"));
    rdma_cm_join_mc_attr_ex x{};
    x.addr = gsa;
    x.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    x.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    ASSERT_EQ(rdma_join_multicast_ex(tx, &x, nullptr), 0);
    ev = next_event(ch_);
    ASSERT_NE(ev, nullptr);
    ASSERT_EQ(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
    ibv_ah* ah = ibv_create_ah(tx->pd, &ev->param.ud.ah_attr);
    ASSERT_NE(ah, nullptr);
    uint32_t remote_qpn = ev->param.ud.qp_num, remote_qkey = ev->param.ud.qkey;
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
    EXPECT_EQ(attached("uroce0", mgid), -1) << "a send-only member's QP was attached";

    // One datagram from tx through the group to id's QP.
    std::vector<uint8_t> rbuf(kGrh + 64), sbuf(64, 0x5a);
    ibv_mr* rmr = ibv_reg_mr(id->pd, rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* smr = ibv_reg_mr(tx->pd, sbuf.data(), sbuf.size(), 0);
    ASSERT_TRUE(rmr && smr);
    ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf.data()), uint32_t(rbuf.size()), rmr->lkey};
    ibv_recv_wr rw{}, *rbad = nullptr;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(id->qp, &rw, &rbad), 0);
    ibv_sge ss{reinterpret_cast<uintptr_t>(sbuf.data()), 64, smr->lkey};
    ibv_send_wr sw = verbs_objects::send_wr(0, IBV_WR_SEND, &ss), *sbad = nullptr;
    sw.wr.ud = {ah, remote_qpn, remote_qkey};
    ASSERT_EQ(ibv_post_send(tx->qp, &sw, &sbad), 0);
    ibv_wc wc{};
    auto wait = [&](ibv_cq* cq) { return uroce::verbs_util::poll_one(cq, &wc, 5.0) == 1; };
    ASSERT_TRUE(wait(tx->send_cq));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    ASSERT_TRUE(wait(id->recv_cq)) << "the joined id's QP received nothing";
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.byte_len, kGrh + 64);
    EXPECT_EQ(wc.src_qp, tx->qp->qp_num);
    EXPECT_EQ(rbuf[kGrh], 0x5a);

    // Leave: detached (the device leaves the group); leaving again finds nothing.
    EXPECT_EQ(rdma_leave_multicast(id, gsa), 0);
    EXPECT_EQ(attached("uroce1", mgid), -1);
    errno = 0;
    EXPECT_EQ(rdma_leave_multicast(id, gsa), -1);
    EXPECT_EQ(errno, EADDRNOTAVAIL);
    EXPECT_EQ(rdma_leave_multicast(tx, gsa), 0);
    EXPECT_EQ(ibv_destroy_ah(ah), 0);
    EXPECT_EQ(ibv_dereg_mr(rmr), 0);
    EXPECT_EQ(ibv_dereg_mr(smr), 0);
    destroy(tx);
    destroy(id);
}

TEST_F(Rdmacm, SynchronousJoinAndUnreadEventAfterLeave) {
    GroupAddr ga = group_addr(6);
    uint32_t g = ga.ip;
    sockaddr* gsa = ga.sa();
    // A synchronous id (NULL channel): the call returns once the join is done.
    rdma_cm_id* sync = nullptr;
    ASSERT_EQ(rdma_create_id(nullptr, &sync, nullptr, RDMA_PS_UDP), 0);
    sockaddr_in a = sin_of(ip_of("127.0.0.6"));
    ASSERT_EQ(rdma_bind_addr(sync, reinterpret_cast<sockaddr*>(&a)), 0);
    ibv_qp_init_attr ia{};
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ASSERT_EQ(rdma_create_qp(sync, nullptr, &ia), 0);
    EXPECT_EQ(rdma_join_multicast(sync, gsa, nullptr), 0);
    EXPECT_EQ(attached("uroce0", mapped_gid(g)), 1);
    EXPECT_EQ(rdma_leave_multicast(sync, gsa), 0);
    EXPECT_EQ(attached("uroce0", mapped_gid(g)), -1);
    destroy(sync);
    // Left before the event was read: the event is gone, nothing was attached.
    rdma_cm_id* id = bound_id(ip_of("127.0.0.6"));
    ASSERT_EQ(rdma_join_multicast(id, gsa, nullptr), 0);
    EXPECT_EQ(rdma_leave_multicast(id, gsa), 0);
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
    rdma_cm_event* ev = nullptr;
    errno = 0;
    EXPECT_EQ(rdma_get_cm_event(ch_, &ev), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(attached("uroce0", mapped_gid(g)), -1);
    destroy(id);
}

}  // namespace
