// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD: SEND and SEND_WITH_IMM arrive with the 40-byte GRH area at the head of the receive
// buffer (RoCEv2 over IPv4: 20 zero bytes, then the packet's IPv4 header), wc_flags
// IBV_WC_GRH, src_qp the sender's QP; the reply path goes through ibv_init_ah_from_wc /
// ibv_create_ah_from_wc; a wrong Q_Key or a missing receive drops the datagram; a message
// longer than the MTU is a local length error at the sender.
#include <arpa/inet.h>
#include <sys/mman.h>

#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

constexpr uint32_t kGrh = 40;
constexpr uint32_t kQkey = QpOpts{}.qkey;  // what make_ud() gives the QPs

class Ud : public TransportTest {
protected:
    void set_up() override {
        a_ep_ = make_ud(A());
        b_ep_ = make_ud(B());
        ASSERT_TRUE(a_ep_.qp && b_ep_.qp);
        ah_ab_ = make_ah(A(), B());
        ASSERT_NE(ah_ab_, nullptr);
    }
    ibv_send_wr ud_wr(uint64_t id, ibv_wr_opcode op, std::vector<ibv_sge>& sg, ibv_ah* ah,
                      uint32_t qpn, uint32_t qkey = kQkey) {
        ibv_send_wr w = wr(id, op, sg);
        w.wr.ud.ah = ah;
        w.wr.ud.remote_qpn = qpn;
        w.wr.ud.remote_qkey = qkey;
        return w;
    }
    // A's SEND `send_id` of `len` bytes of pattern `seed` completed, and B's receive `recv_id`
    // into `dst` holds it after the GRH.
    void expect_delivered(uint64_t send_id, uint64_t recv_id, uint32_t len, const Buffer& dst,
                          uint32_t seed) {
        expect_send_ok(a_ep_, send_id, IBV_WC_SEND, len);
        expect_recv_ok(b_ep_, recv_id, IBV_WC_RECV, kGrh + len, a_ep_.qpn(), IBV_WC_GRH);
        EXPECT_EQ(dst.mismatch(seed, kGrh, len), -1);
    }
    // A SEND of `sg` from A's QP to B's (through ah_ab_): post()'s answer.
    int send_to_b(uint64_t id, std::vector<ibv_sge> sg) {
        ibv_send_wr w = ud_wr(id, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn());
        return post(a_ep_.qp, w);
    }
    // The GRH area as RoCEv2 over IPv4 fills it: 20 zero bytes, then the IPv4 header of a
    // packet carrying `len` payload bytes (BTH, DETH, ImmDt if `imm`, payload, pad, ICRC)
    // from `from` to `to`, with the TTL it arrived with (the sender's AH's hop limit; 64
    // for make_ah's 0).
    static void expect_grh(const uint8_t* g, uint32_t len, bool imm, const Side& from,
                           const Side& to, uint8_t ttl = 64) {
        for (int i = 0; i < 20; ++i) EXPECT_EQ(g[i], 0) << "GRH byte " << i;
        const uint8_t* ip = g + 20;
        uint32_t udp_payload = 12 + 8 + (imm ? 4 : 0) + len + (4 - len % 4) % 4 + 4;
        EXPECT_EQ(ip[0], 0x45) << "version 4, 20-byte header";
        EXPECT_EQ(ip[1], 0) << "DSCP/ECN";
        EXPECT_EQ(ip[2] << 8 | ip[3], int(20 + 8 + udp_payload)) << "total length";
        EXPECT_EQ(ip[4] << 8 | ip[5], 0) << "identification";
        EXPECT_EQ(ip[6] << 8 | ip[7], 0x4000) << "DF, no fragment offset";
        EXPECT_EQ(ip[8], ttl) << "TTL";
        EXPECT_EQ(ip[9], 17) << "UDP";
        uint32_t sum = 0;
        for (int i = 0; i < 20; i += 2) sum += uint32_t(ip[i] << 8 | ip[i + 1]);
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        EXPECT_EQ(sum, 0xffffu) << "header checksum";
        EXPECT_EQ(std::memcmp(ip + 12, &from.ipv4_be, 4), 0) << "source address";
        EXPECT_EQ(std::memcmp(ip + 16, &to.ipv4_be, 4), 0) << "destination address";
    }
    // After a receive failed: `w` (wr_id 1, `len` bytes of pattern `seed`) sent again lands
    // in a good receive (wr_id 2).
    void expect_next_receive_works(ibv_send_wr& w, uint32_t len, uint32_t seed) {
        Buffer& good = reg(B(), kGrh + len);
        ASSERT_EQ(post_recv(b_ep_.qp, 2, {good.sge(0, kGrh + len)}), 0);
        ASSERT_EQ(post(a_ep_.qp, w), 0);
        expect_delivered(1, 2, len, good, seed);
    }
    Endpoint a_ep_, b_ep_;
    ibv_ah* ah_ab_ = nullptr;
};

TEST_F(Ud, SendCarriesGrh) {
    for (uint32_t len : {0u, 1u, 333u, 4096u}) {
        SCOPED_TRACE(len);
        Buffer& src = reg(A(), 4096);
        Buffer& dst = reg(B(), kGrh + 4096 + 100);
        src.fill(51);
        ASSERT_EQ(post_recv(b_ep_.qp, 7, {dst.sge(0, kGrh + 4096 + 100)}), 0);
        std::vector<ibv_sge> sg;
        if (len) sg.push_back(src.sge(0, len));
        ibv_send_wr w = ud_wr(1, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn());
        ASSERT_EQ(post(a_ep_.qp, w), 0);
        expect_send_ok(a_ep_, 1, IBV_WC_SEND, len);
        expect_recv_ok(b_ep_, 7, IBV_WC_RECV, kGrh + len, a_ep_.qpn(), IBV_WC_GRH);
        expect_grh(dst.data(), len, false, A(), B());
        EXPECT_EQ(dst.mismatch(51, kGrh, len), -1);
        EXPECT_EQ(dst.not_poison(kGrh + len, 4096 + 100 - len), -1);
    }
    EXPECT_EQ(qp_state(a_ep_.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(b_ep_.qp), IBV_QPS_RTS);
}

// SEND_WITH_IMM into a receive whose first SGE is exactly the GRH area.
TEST_F(Ud, SendWithImmIntoSeparateGrhBuffer) {
    Buffer& src = reg(A(), 1000);
    Buffer& grh = reg(B(), kGrh);
    Buffer& data = reg(B(), 2000);
    src.fill(52);
    ASSERT_EQ(post_recv(b_ep_.qp, 8, {grh.sge(0, kGrh), data.sge(0, 2000)}), 0);
    std::vector<ibv_sge> sg{src.sge(0, 1000)};
    ibv_send_wr w = ud_wr(2, IBV_WR_SEND_WITH_IMM, sg, ah_ab_, b_ep_.qpn());
    w.imm_data = htonl(0x77665544);
    ASSERT_EQ(post(a_ep_.qp, w), 0);
    expect_send_ok(a_ep_, 2, IBV_WC_SEND, 1000);
    expect_recv_ok(b_ep_, 8, IBV_WC_RECV, kGrh + 1000, a_ep_.qpn(), IBV_WC_GRH | IBV_WC_WITH_IMM,
                   htonl(0x77665544));
    expect_grh(grh.data(), 1000, true, A(), B());
    EXPECT_EQ(data.mismatch(52, 0, 1000), -1);
    EXPECT_EQ(data.not_poison(1000, 1000), -1);
}

// The receiver answers through an AH built from the completion and the GRH, to wc.src_qp.
TEST_F(Ud, ReplyThroughAhFromWc) {
    Buffer& src = reg(A(), 64);
    Buffer& bbuf = reg(B(), kGrh + 64);
    Buffer& abuf = reg(A(), kGrh + 64);
    src.fill(53);
    ASSERT_EQ(post_recv(b_ep_.qp, 1, {bbuf.sge(0, kGrh + 64)}), 0);
    ASSERT_EQ(post_recv(a_ep_.qp, 2, {abuf.sge(0, kGrh + 64)}), 0);
    ASSERT_EQ(send_to_b(3, {src.sge(0, 64)}), 0);
    expect_send_ok(a_ep_, 3, IBV_WC_SEND, 64);
    ibv_wc wc = poll1(b_ep_.rcq);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    auto* grh = reinterpret_cast<ibv_grh*>(bbuf.data());

    ibv_ah_attr attr{};
    ASSERT_EQ(ibv_init_ah_from_wc(B().ctx, 1, &wc, grh, &attr), 0);
    EXPECT_EQ(attr.is_global, 1);
    EXPECT_EQ(attr.port_num, 1);
    EXPECT_EQ(attr.grh.sgid_index, 0);
    EXPECT_EQ(std::memcmp(attr.grh.dgid.raw, A().gid.raw, 16), 0) << "dgid is not A's GID";
    ibv_ah* reply = ibv_create_ah_from_wc(B().pd, &wc, grh, 1);
    ASSERT_NE(reply, nullptr) << std::strerror(errno);

    // Echo the payload back (B's buffer after the GRH) to the sender's QP.
    std::vector<ibv_sge> back{bbuf.sge(kGrh, 64)};
    ibv_send_wr r = ud_wr(4, IBV_WR_SEND, back, reply, wc.src_qp);
    EXPECT_EQ(post(b_ep_.qp, r), 0);
    expect_send_ok(b_ep_, 4, IBV_WC_SEND, 64);
    expect_recv_ok(a_ep_, 2, IBV_WC_RECV, kGrh + 64, b_ep_.qpn(), IBV_WC_GRH);
    // The reply AH has ibv_init_ah_from_wc's hop limit 0xff (the kernel's): TTL 255.
    expect_grh(abuf.data(), 64, false, B(), A(), 255);
    EXPECT_EQ(abuf.mismatch(53, kGrh, 64), -1);
    EXPECT_EQ(ibv_destroy_ah(reply), 0);

    // A completion without IBV_WC_GRH has no source address: EINVAL.
    wc.wc_flags = 0;
    EXPECT_NE(ibv_init_ah_from_wc(B().ctx, 1, &wc, grh, &attr), 0);
}

// A datagram with another Q_Key is dropped (counted as bad_qkey) and consumes no receive; a
// WR Q_Key with the high bit set means the sender QP's own Q_Key (IBTA 10.2.5).
TEST_F(Ud, QkeyMismatchIsDropped) {
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), kGrh + 64);
    src.fill(54);
    ASSERT_EQ(post_recv(b_ep_.qp, 9, {dst.sge(0, kGrh + 64)}), 0);
    std::vector<ibv_sge> sg{src.sge(0, 64)};
    ibv_send_wr bad = ud_wr(1, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn(), 0x22222222);
    ASSERT_EQ(post(a_ep_.qp, bad), 0);
    expect_send_ok(a_ep_, 1, IBV_WC_SEND, 64);
    EXPECT_EQ(wait_qp_drops(B(), b_ep_.qpn(), "bad_qkey", 1), 1);
    expect_empty(b_ep_.rcq, 0);
    EXPECT_EQ(dst.not_poison(0, kGrh + 64), -1);

    ibv_send_wr own = ud_wr(2, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn(), 0x80000000);
    ASSERT_EQ(post(a_ep_.qp, own), 0);
    expect_delivered(2, 9, 64, dst, 54);
    EXPECT_EQ(qp_state(b_ep_.qp), IBV_QPS_RTS);
}

// No receive posted: the datagram is dropped (no_recv), the QP goes on.
TEST_F(Ud, NoReceiveIsDropped) {
    Buffer& src = reg(A(), 64);
    std::vector<ibv_sge> sg{src.sge(0, 64)};
    ibv_send_wr w = ud_wr(1, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn());
    ASSERT_EQ(post(a_ep_.qp, w), 0);
    expect_send_ok(a_ep_, 1, IBV_WC_SEND, 64);
    // The next receive gets the next datagram, not the dropped one.
    Buffer& dst = reg(B(), kGrh + 64);
    EXPECT_EQ(wait_qp_drops(B(), b_ep_.qpn(), "no_recv", 1), 1);
    ASSERT_EQ(post_recv(b_ep_.qp, 2, {dst.sge(0, kGrh + 64)}), 0);
    src.fill(55);
    ASSERT_EQ(post(a_ep_.qp, w), 0);
    expect_delivered(1, 2, 64, dst, 55);
    EXPECT_EQ(qp_state(b_ep_.qp), IBV_QPS_RTS);
}

// A UD message is one packet: longer than the port MTU (4096) is IBV_WC_LOC_LEN_ERR at the
// sender and nothing is sent. The QP enters SQE (IBTA 10.3.1): what is posted next is
// flushed, receives go on, and ibv_modify_qp to RTS resumes sending.
TEST_F(Ud, LongerThanMtuIsLocalLengthErrorAndSqe) {
    Buffer& src = reg(A(), 4097);
    Buffer& dst = reg(B(), kGrh + 8192);
    Buffer& back = reg(A(), kGrh + 64);
    src.fill(57);
    ASSERT_EQ(post_recv(b_ep_.qp, 1, {dst.sge(0, kGrh + 8192)}), 0);
    ASSERT_EQ(post_recv(a_ep_.qp, 2, {back.sge(0, kGrh + 64)}), 0);
    ASSERT_EQ(send_to_b(1, {src.sge(0, 4097)}), 0);
    expect_error(a_ep_.scq, a_ep_.qpn(), 1, IBV_WC_LOC_LEN_ERR, "4097-byte datagram");
    EXPECT_EQ(qp_state(a_ep_.qp), IBV_QPS_SQE);
    std::vector<ibv_sge> small{src.sge(0, 64)};
    ibv_send_wr next = ud_wr(2, IBV_WR_SEND, small, ah_ab_, b_ep_.qpn());
    ASSERT_EQ(post(a_ep_.qp, next), 0) << "a QP in SQE accepts WRs (to flush them)";
    expect_error(a_ep_.scq, a_ep_.qpn(), 2, IBV_WC_WR_FLUSH_ERR, "posted in SQE");
    expect_empty(b_ep_.rcq, 50);
    EXPECT_EQ(dst.not_poison(0, kGrh + 8192), -1);

    // The receive side of the QP in SQE still works.
    ibv_ah* ah_ba = make_ah(B(), A());
    ibv_send_wr reply = ud_wr(3, IBV_WR_SEND, small, ah_ba, a_ep_.qpn());
    std::vector<ibv_sge> bsg{dst.sge(kGrh + 4096, 64)};
    reply.sg_list = bsg.data();
    ASSERT_EQ(post(b_ep_.qp, reply), 0);
    expect_send_ok(b_ep_, 3, IBV_WC_SEND, 64);
    expect_recv_ok(a_ep_, 2, IBV_WC_RECV, kGrh + 64, b_ep_.qpn(), IBV_WC_GRH);

    // SQE -> RTS: sending resumes.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ibv_modify_qp(a_ep_.qp, &attr, IBV_QP_STATE), 0);
    ASSERT_EQ(post(a_ep_.qp, next), 0);
    expect_delivered(2, 1, 64, dst, 57);
    EXPECT_EQ(qp_state(a_ep_.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(b_ep_.qp), IBV_QPS_RTS);
}

// A receive too small for GRH + message completes with IBV_WC_LOC_LEN_ERR; none of the
// datagram is written, and the QP stays in RTS (docs/behaviour.md).
TEST_F(Ud, ReceiveTooSmallIsLocalLengthError) {
    Buffer& src = reg(A(), 100);
    Buffer& dst = reg(B(), kGrh + 99);
    src.fill(56);
    ASSERT_EQ(post_recv(b_ep_.qp, 1, {dst.sge(0, kGrh + 99)}), 0);
    std::vector<ibv_sge> sg{src.sge(0, 100)};
    ibv_send_wr w = ud_wr(1, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn());
    ASSERT_EQ(post(a_ep_.qp, w), 0);
    expect_send_ok(a_ep_, 1, IBV_WC_SEND, 100);
    expect_error(b_ep_.rcq, b_ep_.qpn(), 1, IBV_WC_LOC_LEN_ERR, "receive of 139 bytes");
    EXPECT_EQ(dst.not_poison(kGrh, 99), -1) << "part of the datagram was written";
    // One datagram too long for its receive does not take down a QP that serves many peers.
    EXPECT_EQ(qp_state(b_ep_.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(a_ep_.qp), IBV_QPS_RTS);
    expect_next_receive_works(w, 100, 56);
}

// A receive in memory the application unmapped after registering it completes with
// IBV_WC_LOC_PROT_ERR; the QP stays in RTS and its next receive works.
TEST_F(Ud, ReceiveIntoUnmappedMemoryIsLocalProtectionError) {
    Buffer& src = reg(A(), 1000);
    src.fill(57);
    Buffer& holey = reg(B(), 2 * 4096);
    const size_t hole = 4096 - holey.lead;  // the data offset where the missing page starts
    ASSERT_EQ(munmap(holey.alloc + 4096, 4096), 0);
    ASSERT_EQ(post_recv(b_ep_.qp, 1, {holey.sge(hole - 500, kGrh + 1000)}), 0);
    std::vector<ibv_sge> sg{src.sge(0, 1000)};
    ibv_send_wr w = ud_wr(1, IBV_WR_SEND, sg, ah_ab_, b_ep_.qpn());
    ASSERT_EQ(post(a_ep_.qp, w), 0);
    expect_send_ok(a_ep_, 1, IBV_WC_SEND, 1000);
    expect_error(b_ep_.rcq, b_ep_.qpn(), 1, IBV_WC_LOC_PROT_ERR, "the receive across the hole");
    EXPECT_EQ(qp_state(b_ep_.qp), IBV_QPS_RTS);
    expect_next_receive_works(w, 1000, 57);
}

}  // namespace
}  // namespace uroce::transport_test
