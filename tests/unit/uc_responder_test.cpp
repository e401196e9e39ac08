// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UC responder stage (emu/transport/uc_responder.h) driven through its own interface with
// crafted packets, without a device, a socket or a thread: FakeEnv (fake_receive_env.h) is its
// environment. UC answers nothing: each case checks what reached memory and the receive
// queue, and what was dropped.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "emu/transport/uc_responder_impl.h"
#include "fake_receive_env.h"
#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {

using fake::FakeEnv;

constexpr uint32_t kQpn = 0x31, kPd = 5, kMtu = 256;
constexpr uint32_t kRkey = 0x2211, kBadRkey = 0x1122;
constexpr uint64_t kIova = 0x200000;

class UcResponderTest : public ::testing::Test {
protected:
    void SetUp() override {
        mem_.assign(4 * kMtu, 0);
        env_.mrs.push_back(fake::mr_over(
            session_, kPd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, mem_, kIova, kRkey));
        fake::connected_qp(qp_, session_, kQpn, IBV_QPT_UC, kPd, kMtu, IBV_ACCESS_REMOTE_WRITE);
        qp_.epsn = 10;
    }

    // A packet as it comes off the wire: headers encoded, `len` payload bytes of `fill`.
    net::Packet packet(uint8_t opcode, uint32_t psn, uint32_t len, uint8_t fill,
                       net::Packet h = {}) {
        h.bth.opcode = opcode;
        h.bth.pkey = net::kDefaultPkey;
        h.bth.dqpn = kQpn;
        h.bth.psn = psn;
        h.bth.pad = net::pad_for(len);
        auto& wire = wire_.emplace_back(net::kMaxHdrLen + len + 3 + net::kIcrcLen, 0);
        size_t hdr = net::encode_headers(h, wire.data());
        std::memset(wire.data() + hdr, fill, len);
        wire.resize(hdr + len + h.bth.pad + net::kIcrcLen);
        net::Packet p{};
        EXPECT_EQ(net::decode(wire.data(), wire.size(), p), net::DropReason::kNone);
        return p;
    }
    net::Packet write_first(uint8_t opcode, uint32_t psn, uint32_t len, uint8_t fill, uint32_t rkey,
                            uint64_t va, uint32_t total) {
        net::Packet h{};
        h.reth.rkey = rkey;
        h.reth.va = va;
        h.reth.dma_len = total;
        return packet(opcode, psn, len, fill, h);
    }
    void post_recv(uint64_t wr_id) {
        bufs_.emplace_back(4 * kMtu, 0);
        env_.posted.push_back({wr_id, bufs_.back().data(), uint32_t(bufs_.back().size())});
    }

    FakeEnv env_;
    UcResponder<FakeEnv> uc_{env_};
    Session session_;
    Qp qp_;
    std::vector<uint8_t> mem_;
    std::vector<std::vector<uint8_t>> bufs_;
    std::vector<std::vector<uint8_t>> wire_;
};

TEST_F(UcResponderTest, MultiPacketSendCompletesOnceAndAnswersNothing) {
    post_recv(7);
    uc_.receive(qp_, packet(net::kUcSendFirst, 10, kMtu, 0xa1));
    uc_.receive(qp_, packet(net::kUcSendMiddle, 11, kMtu, 0xa2));
    EXPECT_TRUE(env_.completions.empty());
    uc_.receive(qp_, packet(net::kUcSendLast, 12, 10, 0xa3));
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 7u);
    EXPECT_EQ(env_.completions[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(env_.completions[0].byte_len, 2 * kMtu + 10);
    EXPECT_EQ(bufs_[0][0], 0xa1);
    EXPECT_EQ(bufs_[0][kMtu], 0xa2);
    EXPECT_EQ(bufs_[0][2 * kMtu + 9], 0xa3);
    EXPECT_TRUE(env_.sent.empty());  // no ACK on UC
    EXPECT_EQ(qp_.epsn, 13u);
}

// IBTA 9.7.6: a PSN gap loses the message in progress; its receive is reused for the next
// message, which starts with a FIRST or ONLY.
TEST_F(UcResponderTest, PsnGapLosesTheMessageAndReusesItsReceive) {
    post_recv(1);
    uc_.receive(qp_, packet(net::kUcSendFirst, 10, kMtu, 0xb1));
    uc_.receive(qp_, packet(net::kUcSendLast, 12, 10, 0xb2));  // 11 was lost
    EXPECT_TRUE(env_.completions.empty());
    uc_.receive(qp_, packet(net::kUcSendOnly, 13, 20, 0xb3));
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 1u);
    EXPECT_EQ(env_.completions[0].byte_len, 20u);
    EXPECT_EQ(bufs_[0][0], 0xb3);  // the new message overwrote the lost one's start
    EXPECT_TRUE(env_.posted.empty());
}

TEST_F(UcResponderTest, SendWithoutReceiveIsDroppedAndCounted) {
    uc_.receive(qp_, packet(net::kUcSendFirst, 10, kMtu, 0xc1));
    uc_.receive(qp_, packet(net::kUcSendLast, 11, 8, 0xc2));
    EXPECT_EQ(env_.drops, 1u);  // the message once, not each packet
    EXPECT_TRUE(env_.completions.empty());
    EXPECT_NE(qp_.state, IBV_QPS_ERR);  // UC: no error state for it
    post_recv(2);
    uc_.receive(qp_, packet(net::kUcSendOnly, 12, 4, 0xc3));
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 2u);
}

TEST_F(UcResponderTest, WriteLandsAndWriteWithImmediateCompletesAReceive) {
    uc_.receive(qp_, write_first(net::kUcWriteFirst, 10, kMtu, 0xd1, kRkey, kIova + 8, kMtu + 16));
    uc_.receive(qp_, packet(net::kUcWriteLast, 11, 16, 0xd2));
    EXPECT_EQ(mem_[8], 0xd1);
    EXPECT_EQ(mem_[8 + kMtu + 15], 0xd2);
    EXPECT_EQ(mem_[8 + kMtu + 16], 0);      // nothing past the message
    EXPECT_TRUE(env_.completions.empty());  // a plain WRITE consumes no receive
    post_recv(3);
    net::Packet h{};
    h.reth.rkey = kRkey;
    h.reth.va = kIova;
    h.reth.dma_len = 4;
    h.imm = 0x01020304;
    uc_.receive(qp_, packet(net::kUcWriteOnlyImm, 12, 4, 0xd3, h));
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 3u);
    EXPECT_EQ(env_.completions[0].byte_len, 4u);
    EXPECT_EQ(mem_[0], 0xd3);
}

// UC has no NAK: a WRITE the R_Key does not allow is discarded, counted, and the responder
// waits for the next FIRST or ONLY; the QP stays usable.
TEST_F(UcResponderTest, WriteWithBadRkeyIsDiscardedSilently) {
    uc_.receive(qp_, write_first(net::kUcWriteFirst, 10, kMtu, 0xe1, kBadRkey, kIova, 2 * kMtu));
    uc_.receive(qp_, packet(net::kUcWriteLast, 11, kMtu, 0xe2));
    EXPECT_EQ(env_.drops, 1u);
    EXPECT_TRUE(env_.sent.empty());
    EXPECT_EQ(mem_[0], 0);
    EXPECT_EQ(mem_[kMtu], 0);
    EXPECT_EQ(env_.to_error, 0u);
    uc_.receive(qp_, write_first(net::kUcWriteOnly, 12, 4, 0xe3, kRkey, kIova, 4));
    EXPECT_EQ(mem_[0], 0xe3);
}

TEST_F(UcResponderTest, SendLongerThanTheReceiveIsALengthErrorAndErrorsTheQp) {
    bufs_.emplace_back(16, 0);
    env_.posted.push_back({9, bufs_.back().data(), 16});
    uc_.receive(qp_, packet(net::kUcSendOnly, 10, 32, 0xf1));
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].status, IBV_WC_LOC_LEN_ERR);
    ASSERT_EQ(env_.events.size(), 1u);
    EXPECT_EQ(env_.events[0], IBV_EVENT_QP_REQ_ERR);
    EXPECT_EQ(env_.to_error, 1u);
}

}  // namespace
}  // namespace uroce::emu
