// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device engine's data path between two QPs: exact bytes, MR bounds and access checks,
// length, RNR and retry errors (device_test_support.h has the client and the fixture).
#include <gtest/gtest.h>

#include "device_test_support.h"

namespace uroce::emu::device_test {
namespace {

TEST_F(DataPathTest, SendMovesExactBytesBetweenDevices) {
    ASSERT_NO_FATAL_FAILURE(start_connected(2));
    GuardedBuf src(1000, 0), dst(1000);
    auto data = pattern(1000, 1);
    std::memcpy(src.data(), data.data(), data.size());
    uint32_t skey;
    ASSERT_NO_FATAL_FAILURE(reg_and_recv(src, &skey, dst, 0xabc));
    s_.c->post_send(*s_.qp, 0x123, {{addr_of(src.data()), 1000, skey}});

    abi::Cqe rc{}, sc{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &rc));
    EXPECT_EQ(rc.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(rc.opcode, uint32_t(IBV_WC_RECV));
    EXPECT_EQ(rc.wr_id, 0xabcu);
    EXPECT_EQ(rc.byte_len, 1000u);
    EXPECT_EQ(rc.qp_num, r_.qp->qpn);
    EXPECT_EQ(rc.src_qp, s_.qp->qpn);
    EXPECT_EQ(rc.wc_flags & IBV_WC_WITH_IMM, 0u);
    ASSERT_TRUE(poll_cq(*s_.scq, &sc));
    EXPECT_EQ(sc.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(sc.opcode, uint32_t(IBV_WC_SEND));
    EXPECT_EQ(sc.wr_id, 0x123u);
    EXPECT_EQ(sc.qp_num, s_.qp->qpn);

    EXPECT_EQ(std::memcmp(dst.data(), data.data(), 1000), 0);
    EXPECT_TRUE(dst.guards_intact());
    // Both rings were consumed: the library sizes its free space from these.
    EXPECT_EQ(s_.qp->sq.hdr()->cons.load(), 1u);
    EXPECT_EQ(r_.qp->rq.hdr()->cons.load(), 1u);
}

TEST_F(DataPathTest, SendWithImmAndUnsignaledWqes) {
    // Both QPs on one device: loopback through its own UDP socket.
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    GuardedBuf src(64, 0x11), dst(128);
    uint32_t skey, rkey;
    ASSERT_NO_FATAL_FAILURE(reg_bufs(src, &skey, dst, &rkey));
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 64, rkey}});
    r_.c->post_recv(*r_.qp, 2, {{addr_of(dst.data() + 64), 64, rkey}});
    // An unsignaled SEND produces no send CQE but still consumes its SQ slot.
    s_.c->post_send(*s_.qp, 10, {{addr_of(src.data()), 32, skey}}, IBV_WR_SEND, 0);
    s_.c->post_send(*s_.qp, 11, {{addr_of(src.data()), 64, skey}}, IBV_WR_SEND_WITH_IMM,
                    IBV_SEND_SIGNALED, htobe32(0xfeedbeef));

    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*r_.rcq, 1, IBV_WC_SUCCESS, &c));
    EXPECT_EQ(c.byte_len, 32u);
    EXPECT_EQ(c.wc_flags & IBV_WC_WITH_IMM, 0u);
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*r_.rcq, 2, IBV_WC_SUCCESS, &c));
    EXPECT_EQ(c.opcode, uint32_t(IBV_WC_RECV));
    EXPECT_EQ(c.byte_len, 64u);
    EXPECT_NE(c.wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(c.imm_data, htobe32(0xfeedbeef));  // network order, as in ibv_wc
    EXPECT_EQ(c.src_qp, s_.qp->qpn);
    EXPECT_EQ(c.qp_num, r_.qp->qpn);

    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 11u);  // not 10: that one was unsignaled
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(s_.qp->sq.hdr()->cons.load(), 2u);
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 50)) << "unexpected CQE wr_id " << c.wr_id;

    for (int i = 0; i < 32; ++i) ASSERT_EQ(dst.data()[i], 0x11) << i;
    for (int i = 32; i < 64; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;  // past byte_len
    for (int i = 64; i < 128; ++i) ASSERT_EQ(dst.data()[i], 0x11) << i;
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, MultiPacketMessageAcrossSges) {
    ASSERT_NO_FATAL_FAILURE(start_connected(2));
    // 10000 bytes at MTU 1024 is 10 packets; the SGE boundaries on neither side line up
    // with the packet boundaries, and the receiver's MR has an iova unlike its address,
    // so the device has to translate every receive SGE.
    constexpr size_t kLen = 10000;
    auto data = pattern(kLen, 7);
    GuardedBuf a(3000, 0), b(7000, 0);
    std::memcpy(a.data(), data.data(), 3000);
    std::memcpy(b.data(), data.data() + 3000, 7000);
    uint32_t ka, kb;
    ASSERT_NO_FATAL_FAILURE(reg_src(a, &ka));
    ASSERT_NO_FATAL_FAILURE(reg_src(b, &kb));

    // Receive segments: 1500 | gap 100 | 2500 | gap 100 | 5000 | gap 100 | 1000.
    const size_t seg[] = {1500, 2500, 5000, 1000};
    constexpr size_t kGap = 100;
    GuardedBuf dst(kLen + 3 * kGap);
    constexpr uint64_t kIova = 0x7000000000;
    uint32_t kd;
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &kd, kIova), 0);
    std::vector<abi::Sge> rs;
    size_t off = 0;
    for (size_t n : seg) {
        rs.push_back({kIova + GuardedBuf::kPad + off, uint32_t(n), kd});
        off += n + kGap;
    }
    r_.c->post_recv(*r_.qp, 77, rs);
    s_.c->post_send(*s_.qp, 78,
                    {{addr_of(a.data()), 1000, ka},
                     {addr_of(a.data() + 1000), 2000, ka},
                     {addr_of(b.data()), 7000, kb}});

    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*r_.rcq, 77, IBV_WC_SUCCESS, &c));
    EXPECT_EQ(c.byte_len, kLen);
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 78, IBV_WC_SUCCESS));

    off = 0;
    size_t src_off = 0;
    for (size_t n : seg) {
        EXPECT_EQ(std::memcmp(dst.data() + off, data.data() + src_off, n), 0)
            << "segment at " << off;
        if (off + n < dst.len) {
            for (size_t g = 0; g < kGap; ++g)
                ASSERT_EQ(dst.data()[off + n + g], kGuard) << "gap byte " << off + n + g;
        }
        off += n + kGap;
        src_off += n;
    }
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, InlineSendNeedsNoMr) {
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    GuardedBuf dst(64);
    ASSERT_NO_FATAL_FAILURE(recv_into(dst, 1));
    // Inline data travels in the SQ slot itself, after the header (datapath.cpp), so it
    // needs no lkey: the device must take the bytes from the ring, not from memory.
    auto data = pattern(48, 3);
    abi::SendWqe w = send_wqe(2, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    w.inline_len = 48;
    write_send_slot(*s_.qp, 0, w, data.data(), 48);
    s_.c->publish_sq(*s_.qp, 1);
    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_status(*r_.rcq, IBV_WC_SUCCESS, &c));
    EXPECT_EQ(c.byte_len, 48u);
    ASSERT_NO_FATAL_FAILURE(expect_status(*s_.scq, IBV_WC_SUCCESS));
    EXPECT_EQ(std::memcmp(dst.data(), data.data(), 48), 0);
    for (size_t i = 48; i < 64; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, ZeroLengthSendWithImm) {
    ASSERT_NO_FATAL_FAILURE(start_connected(2));
    GuardedBuf dst(16);
    ASSERT_NO_FATAL_FAILURE(recv_into(dst, 1));
    // No SGE at all: a message of zero bytes is still a message (one packet, one CQE).
    s_.c->post_send(*s_.qp, 2, {}, IBV_WR_SEND_WITH_IMM, IBV_SEND_SIGNALED, htobe32(42));
    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_status(*r_.rcq, IBV_WC_SUCCESS, &c));
    EXPECT_EQ(c.byte_len, 0u);
    EXPECT_NE(c.wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(c.imm_data, htobe32(42));
    ASSERT_NO_FATAL_FAILURE(expect_status(*s_.scq, IBV_WC_SUCCESS));
    for (size_t i = 0; i < 16; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;
}

TEST_F(DataPathTest, MessageOverMaxMsgSizeIsLengthError) {
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    // An MR may be far larger than memory actually mapped; the device must refuse a
    // message over max_msg_sz (2 GiB) before touching any of it.
    std::vector<uint8_t> mem(64);
    uint32_t key;
    constexpr uint64_t kIova = 0x10000000000;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, mem.data(), uint64_t(1) << 33, 0, &key, kIova), 0);
    s_.c->post_send(*s_.qp, 6,
                    {{kIova, 0x80000000u, key}, {kIova + 0x80000000u, 0x80000000u, key}});
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 6, IBV_WC_LOC_LEN_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
}

TEST_F(DataPathTest, BadLkeyIsLocalProtectionErrorThenFlush) {
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    GuardedBuf src(256, 0x22), dst(256);
    uint32_t skey;
    ASSERT_NO_FATAL_FAILURE(reg_and_recv(src, &skey, dst, 1));
    // A receive on the sender's own RQ: the error state must flush it too.
    s_.c->post_recv(*s_.qp, 500, {{addr_of(src.data()), 16, skey}});

    s_.c->post_send(*s_.qp, 1, {{addr_of(src.data()), 256, skey ^ 0x80}});
    s_.c->post_send(*s_.qp, 2, {{addr_of(src.data()), 256, skey}});
    s_.c->post_send(*s_.qp, 3, {{addr_of(src.data()), 256, skey}});

    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 1, IBV_WC_LOC_PROT_ERR));
    for (uint64_t id : {2u, 3u}) {
        ASSERT_TRUE(poll_cq(*s_.scq, &c));
        EXPECT_EQ(c.wr_id, id);
        EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    }
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.rcq, 500, IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));

    // Work posted in ERR is flushed too, as soon as the doorbell rings.
    s_.c->post_send(*s_.qp, 4, {{addr_of(src.data()), 8, skey}});
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 4, IBV_WC_WR_FLUSH_ERR));

    // Nothing reached the receiver.
    EXPECT_FALSE(poll_cq(*r_.rcq, &c, 50));
    expect_untouched(dst);
}

TEST_F(DataPathTest, SgeOneByteOutsideMrIsLocalProtectionError) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    // Each bad SGE puts its QP in error, so every case gets a fresh sender QP.
    std::vector<uint8_t> mem(8192, 0x33);
    uint8_t* mr_start = mem.data() + 1024;
    constexpr uint32_t kMrLen = 4096;
    struct Case {
        const char* what;
        uint64_t addr;
        uint32_t len;
    };
    const Case cases[] = {
        {"one past the end", addr_of(mr_start) + 1, kMrLen},
        {"one before the start", addr_of(mr_start) - 1, 16},
        {"last byte plus one", addr_of(mr_start) + kMrLen, 1},
        {"length far past the end", addr_of(mr_start) + 16, 0xfffffff0u},
    };
    ASSERT_NO_FATAL_FAILURE(make_side(r_, *devs_[0], ip("127.0.0.2")));
    for (const Case& k : cases) {
        s_ = Side{};
        ASSERT_NO_FATAL_FAILURE(make_side(s_, *devs_[0], ip("127.0.0.2")));
        uint32_t key;
        ASSERT_EQ(s_.c->reg_mr(s_.pd, mr_start, kMrLen, 0, &key), 0);
        ASSERT_EQ(s_.c->connect(*s_.qp, r_.qp->qpn, r_.ip, Path{}), 0);
        s_.c->post_send(*s_.qp, 9, {{k.addr, k.len, key}});
        abi::Cqe c{};
        ASSERT_TRUE(poll_cq(*s_.scq, &c)) << k.what;
        EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_PROT_ERR)) << k.what;
        EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR)) << k.what;
    }
    // The exact MR, first to last byte, is fine.
    s_ = Side{};
    ASSERT_NO_FATAL_FAILURE(make_side(s_, *devs_[0], ip("127.0.0.2")));
    uint32_t key;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, mr_start, kMrLen, 0, &key), 0);
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf dst(kMrLen);
    ASSERT_NO_FATAL_FAILURE(recv_into(dst, 1));
    s_.c->post_send(*s_.qp, 10, {{addr_of(mr_start), kMrLen, key}});
    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_status(*s_.scq, IBV_WC_SUCCESS));
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.byte_len, kMrLen);
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, SgeOfAnotherPdIsLocalProtectionError) {
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    GuardedBuf src(64, 0x44);
    uint32_t pd2, key;
    ASSERT_EQ(s_.c->alloc_pd(&pd2), 0);
    ASSERT_EQ(s_.c->reg_mr(pd2, src.base(), src.total(), 0, &key), 0);
    s_.c->post_send(*s_.qp, 5, {{addr_of(src.data()), 64, key}});
    ASSERT_NO_FATAL_FAILURE(expect_status(*s_.scq, IBV_WC_LOC_PROT_ERR));
}

TEST_F(DataPathTest, ReceiveBufferTooSmall) {
    ASSERT_NO_FATAL_FAILURE(start_connected(2));
    // Three packets; the receive takes two minus a little, so the first packet lands and
    // the second does not fit.
    GuardedBuf src(3000, 0x55), dst(2000);
    uint32_t skey, rkey;
    ASSERT_NO_FATAL_FAILURE(reg_bufs(src, &skey, dst, &rkey));
    for (uint64_t id : {31, 32}) r_.c->post_recv(*r_.qp, id, {{addr_of(dst.data()), 2000, rkey}});
    s_.c->post_send(*s_.qp, 41, {{addr_of(src.data()), 3000, skey}});

    ASSERT_NO_FATAL_FAILURE(expect_cqe(*r_.rcq, 31, IBV_WC_LOC_LEN_ERR));
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*r_.rcq, 32, IBV_WC_WR_FLUSH_ERR));
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 41, IBV_WC_REM_INV_REQ_ERR));
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, SinglePacketLargerThanReceive) {
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    GuardedBuf src(100, 0x56), dst(99);
    uint32_t skey;
    ASSERT_NO_FATAL_FAILURE(reg_and_recv(src, &skey, dst, 1));
    s_.c->post_send(*s_.qp, 2, {{addr_of(src.data()), 100, skey}});
    ASSERT_NO_FATAL_FAILURE(expect_status(*r_.rcq, IBV_WC_LOC_LEN_ERR));
    ASSERT_NO_FATAL_FAILURE(expect_status(*s_.scq, IBV_WC_REM_INV_REQ_ERR));
    expect_untouched(dst);
}

TEST_F(DataPathTest, ReceiveIntoMrWithoutLocalWrite) {
    ASSERT_NO_FATAL_FAILURE(start_connected(1));
    GuardedBuf src(128, 0x66), dst(128);
    uint32_t skey;
    // Remote read only: the device may not write here, not even for a receive.
    ASSERT_NO_FATAL_FAILURE(reg_and_recv(src, &skey, dst, 1, IBV_ACCESS_REMOTE_READ));
    s_.c->post_send(*s_.qp, 2, {{addr_of(src.data()), 128, skey}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 1u);
    // IBTA: a local protection error on the responder's receive WQE; the requester sees a
    // Remote Operational Error NAK.
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_PROT_ERR));
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 2, IBV_WC_REM_OP_ERR));
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_ERR));
    expect_untouched(dst);
}

TEST_F(DataPathTest, RnrRetryExceeded) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    Path ps;
    ps.rnr_retry = 1;
    Path pr;
    pr.min_rnr_timer = 1;  // 10 us between attempts
    ASSERT_NO_FATAL_FAILURE(connect(ps, pr));
    GuardedBuf src(64, 0x77);
    uint32_t skey;
    ASSERT_NO_FATAL_FAILURE(reg_src(src, &skey));
    auto t0 = steady_clock::now();
    s_.c->post_send(*s_.qp, 3, {{addr_of(src.data()), 64, skey}});
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 3, IBV_WC_RNR_RETRY_EXC_ERR, nullptr, 2000));
    EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    // An RNR NAK is not an error for the responder: it stays usable.
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_RTS));
}

TEST_F(DataPathTest, RnrRecoversWhenReceiveArrives) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    Path ps;
    ps.rnr_retry = 7;  // retry forever
    ASSERT_NO_FATAL_FAILURE(connect(ps, Path{}));
    GuardedBuf src(64, 0x78), dst(64);
    uint32_t skey, rkey;
    ASSERT_NO_FATAL_FAILURE(reg_bufs(src, &skey, dst, &rkey));
    s_.c->post_send(*s_.qp, 3, {{addr_of(src.data()), 64, skey}});
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 30));
    r_.c->post_recv(*r_.qp, 4, {{addr_of(dst.data()), 64, rkey}});
    ASSERT_NO_FATAL_FAILURE(expect_status(*r_.rcq, IBV_WC_SUCCESS));
    ASSERT_NO_FATAL_FAILURE(expect_status(*s_.scq, IBV_WC_SUCCESS));
    EXPECT_EQ(dst.data()[63], 0x78);
}

TEST_F(DataPathTest, RetryExceededWhenPeerIsGone) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    Path ps;
    ps.timeout = 10;  // 4.096 us * 2^10 = 4.2 ms
    ps.retry_cnt = 2;
    ASSERT_NO_FATAL_FAILURE(connect(ps, Path{}));
    ASSERT_EQ(r_.c->destroy_qp(r_.qp->qpn), 0);
    GuardedBuf src(64, 0x79);
    uint32_t skey;
    ASSERT_NO_FATAL_FAILURE(reg_src(src, &skey));
    auto t0 = steady_clock::now();
    s_.c->post_send(*s_.qp, 8, {{addr_of(src.data()), 64, skey}});
    s_.c->post_send(*s_.qp, 9, {{addr_of(src.data()), 64, skey}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c, 2000));
    auto took = steady_clock::now() - t0;
    EXPECT_EQ(c.wr_id, 8u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_RETRY_EXC_ERR));
    // Three timeouts of ~4 ms (the first try and two retries); far less than a second,
    // and not instantly either.
    EXPECT_GE(took, milliseconds(8));
    EXPECT_LT(took, milliseconds(1000));
    ASSERT_NO_FATAL_FAILURE(expect_cqe(*s_.scq, 9, IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
}

}  // namespace
}  // namespace uroce::emu::device_test
