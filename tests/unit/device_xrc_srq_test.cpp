// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device engine when the SRQ serving an XRC message in progress goes away.
#include <gtest/gtest.h>

#include "device_test_support.h"

namespace uroce::emu::device_test {
namespace {

// ---------------------------------------------------------------------------------------------
// XRC: a TGT QP outlives the SRQ serving the message in progress on it. The message's
// receive, CQ and memory belong to the SRQ's owner, whose session may be freed next; the rest
// of the message must not reach them (nor a new SRQ that took the number), and fails as any
// packet naming an SRQ the QP does not have: the TGT QP enters ERR and its holders get
// IBV_EVENT_QP_REQ_ERR. The packets come from a plain UDP socket, so the test decides when
// each one arrives.
class XrcSrqGoneTest : public ::testing::Test {
protected:
    static constexpr uint32_t kPsn = 0x100;
    static constexpr uint64_t kTgtCookie = 0x7a7a;
    static constexpr uint32_t kMtu = 1024;

    void SetUp() override {
        devs_ = start_devices(1);
        ASSERT_EQ(devs_.size(), 1u);
        Device& d = *devs_[0];
        std::snprintf(path_, sizeof path_, "/tmp/uroce-xrc-unit-XXXXXX");
        fd_ = mkstemp(path_);
        ASSERT_GE(fd_, 0);
        // A holds the TGT QP; B owns the XRC SRQ, its CQ and the memory.
        a_ = std::make_unique<Client>(d);
        b_ = std::make_unique<Client>(d);
        ASSERT_TRUE(a_->ok() && b_->ok());
        uint32_t xa, xb;
        ASSERT_EQ(a_->open_xrcd(fd_, O_CREAT, &xa), 0);
        ASSERT_EQ(b_->open_xrcd(fd_, 0, &xb), 0);
        ASSERT_EQ(a_->create_tgt(xa, kTgtCookie, &tgt_), 0);
        ASSERT_EQ(b_->alloc_pd(&pd_), 0);
        ASSERT_EQ(b_->create_cq(16, &cq_), 0);
        ASSERT_EQ(b_->reg_mr(pd_, dst_.base(), dst_.total(), IBV_ACCESS_LOCAL_WRITE, &lkey_), 0);
        ASSERT_EQ(b_->create_xrc_srq(pd_, xb, cq_->handle, &srqn_, &ring_), 0);
        Client::post_srq_recv(ring_, 1, {addr_of(dst_.data()), uint32_t(dst_.len), lkey_});
        xb_ = xb;
        // The TGT QP to RTS, its peer "127.0.0.3" (nothing answers there; its ACKs are lost).
        ibv_qp_attr at{};
        at.qp_state = IBV_QPS_INIT;
        at.port_num = 1;
        ASSERT_EQ(
            a_->modify_qp(tgt_, at,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
        at = {};
        at.qp_state = IBV_QPS_RTR;
        at.path_mtu = IBV_MTU_1024;
        at.dest_qp_num = 0x77;
        at.rq_psn = kPsn;
        at.ah_attr.is_global = 1;
        at.ah_attr.port_num = 1;
        at.ah_attr.grh.dgid.raw[10] = at.ah_attr.grh.dgid.raw[11] = 0xff;
        uint32_t peer = ip("127.0.0.3");
        std::memcpy(&at.ah_attr.grh.dgid.raw[12], &peer, 4);
        ASSERT_EQ(
            a_->modify_qp(tgt_, at,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
        at = {};
        at.qp_state = IBV_QPS_RTS;
        at.timeout = 14;
        at.sq_psn = 0x500;
        ASSERT_EQ(a_->modify_qp(tgt_, at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), 0);

        sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(sock_, 0);
        sockaddr_in me{};
        me.sin_family = AF_INET;
        me.sin_addr.s_addr = peer;
        ASSERT_EQ(bind(sock_, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
        socklen_t len = sizeof me;
        ASSERT_EQ(getsockname(sock_, reinterpret_cast<sockaddr*>(&me), &len), 0);
        sport_ = ntohs(me.sin_port);

        // The message's first packet lands in B's receive.
        send_packet(net::kXrcSendFirst, kPsn, 1);
        ASSERT_TRUE(landed(0, kMtu, 1)) << "the FIRST packet's payload did not arrive";
        EXPECT_EQ(ring_.hdr()->cons.load(), 1u) << "the receive was not taken";
    }
    void TearDown() override {
        if (sock_ >= 0) close(sock_);
        a_.reset();
        b_.reset();
        devs_.clear();
        if (fd_ >= 0) close(fd_);
        unlink(path_);
    }

    // One XRC SEND packet of kMtu bytes of pattern `seed` to the TGT QP, naming srqn_.
    void send_packet(uint8_t opcode, uint32_t psn, uint32_t seed) {
        net::Packet p{};
        p.bth.opcode = opcode;
        p.bth.pkey = net::kDefaultPkey;
        p.bth.dqpn = tgt_;
        p.bth.psn = psn;
        p.xrc.srqn = srqn_;
        uint8_t buf[net::kMaxHdrLen + kMtu + 4] = {};
        size_t hdr = net::encode_headers(p, buf);
        ASSERT_GT(hdr, 0u);
        auto data = pattern(kMtu, seed);
        std::memcpy(buf + hdr, data.data(), kMtu);
        size_t len = hdr + kMtu + 4;
        const DeviceConfig& cfg = devs_[0]->config();
        net::icrc_store(ip("127.0.0.3"), cfg.ipv4_be, sport_, cfg.port, buf, len);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = cfg.ipv4_be;
        to.sin_port = htons(cfg.port);
        ASSERT_EQ(sendto(sock_, buf, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                  ssize_t(len));
    }
    // Waits (up to 2 s) until dst_[off, off + n) holds pattern `seed`.
    bool landed(size_t off, size_t n, uint32_t seed) {
        auto want = pattern(n, seed);
        for (int i = 0; i < 200; ++i) {
            if (std::memcmp(dst_.data() + off, want.data(), n) == 0) return true;
            std::this_thread::sleep_for(milliseconds(10));
        }
        return false;
    }
    // The rest of the message arrives: refused, and nothing of it written anywhere.
    void expect_rest_refused(GuardedBuf* also_untouched = nullptr) {
        send_packet(net::kXrcSendMiddle, kPsn + 1, 2);
        abi::AsyncEvent ev{};
        ASSERT_TRUE(a_->async_event(&ev, 2000)) << "no event for the TGT QP's holder";
        EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_QP_REQ_ERR));
        EXPECT_EQ(ev.cookie, kTgtCookie);
        EXPECT_EQ(a_->qp_state(tgt_), int(IBV_QPS_ERR));
        send_packet(net::kXrcSendLast, kPsn + 2, 3);  // an ERR QP drops it
        std::string dump;
        devs_[0]->call([&] { dump = devs_[0]->dump(); });
        EXPECT_NE(dump.find(" xrc_bad_srqn 1\n"), std::string::npos) << dump;
        for (size_t i = kMtu; i < dst_.len; ++i) ASSERT_EQ(dst_.data()[i], kGuard) << i;
        EXPECT_TRUE(dst_.guards_intact());
        if (also_untouched) {
            for (size_t i = 0; i < also_untouched->len; ++i)
                ASSERT_EQ(also_untouched->data()[i], kGuard) << i;
            EXPECT_TRUE(also_untouched->guards_intact());
        }
    }

    std::vector<std::unique_ptr<Device>> devs_;
    char path_[64] = {};
    int fd_ = -1, sock_ = -1;
    uint16_t sport_ = 0;
    std::unique_ptr<Client> a_, b_;
    uint32_t tgt_ = 0, pd_ = 0, lkey_ = 0, srqn_ = 0, xb_ = 0;
    std::unique_ptr<TestCq> cq_;
    MappedRing ring_;
    GuardedBuf dst_{3 * kMtu};
};

// B's process goes (its session closes) between the first and the middle packet: the SRQ,
// CQ and MR go with it, and so does the Session the TGT QP's message pointed at.
TEST_F(XrcSrqGoneTest, SrqOwnerClosesDuringAMessage) {
    b_.reset();
    expect_rest_refused();
}

// B destroys the SRQ and makes another, which takes the same number: the old message does
// not continue into the new SRQ's receive (nor the old one), and completes nothing.
TEST_F(XrcSrqGoneTest, SrqDestroyedAndItsNumberReusedDuringAMessage) {
    ASSERT_EQ(b_->destroy_srq(srqn_), 0);
    uint32_t again = 0;
    MappedRing ring2;
    ASSERT_EQ(b_->create_xrc_srq(pd_, xb_, cq_->handle, &again, &ring2), 0);
    EXPECT_EQ(again, srqn_) << "the number was not reused: the test checks less";
    GuardedBuf dst2(3 * kMtu);
    uint32_t lkey2 = 0;
    ASSERT_EQ(b_->reg_mr(pd_, dst2.base(), dst2.total(), IBV_ACCESS_LOCAL_WRITE, &lkey2), 0);
    Client::post_srq_recv(ring2, 2, {addr_of(dst2.data()), uint32_t(dst2.len), lkey2});
    expect_rest_refused(&dst2);
    EXPECT_EQ(ring2.hdr()->cons.load(), 0u) << "the new SRQ's receive was taken";
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*cq_, &c, 50)) << "a completion for wr_id " << c.wr_id;
}

}  // namespace
}  // namespace uroce::emu::device_test
