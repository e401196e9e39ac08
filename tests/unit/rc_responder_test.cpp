// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The RC responder stage (emu/transport/rc_responder.h) driven through its own interface with
// crafted request packets, without a device, a socket or a thread: FakeEnv
// (fake_receive_env.h) is its environment. Packets it sends are decoded with net's decoder.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "emu/transport/rc_responder_impl.h"
#include "fake_receive_env.h"
#include "net/headers.h"
#include "net/opcodes.h"
#include "net/psn.h"

namespace uroce::emu {
namespace {

using fake::FakeEnv;
using fake::PostedRecv;
using fake::RecvCompletion;

constexpr uint32_t kQpn = 0x11, kPeerQpn = 0x22, kPd = 3, kMtu = 1024;
constexpr uint32_t kRkey = 0x1234, kBadRkey = 0x4321;
constexpr uint64_t kIova = 0x100000;  // the address the requester names

class RcResponderTest : public ::testing::Test {
protected:
    void SetUp() override {
        mem_.assign(4 * kMtu, 0);
        for (size_t i = 0; i < mem_.size(); ++i) mem_[i] = uint8_t(i * 7 + 1);
        env_.mrs.push_back(fake::mr_over(session_, kPd,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
                                         mem_, kIova, kRkey));
        fake::connected_qp(
            qp_, session_, kQpn, IBV_QPT_RC, kPd, kMtu,
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
        qp_.attr.dest_qp_num = kPeerQpn;
        qp_.attr.max_dest_rd_atomic = 4;
        qp_.attr.min_rnr_timer = 12;
        qp_.atomic_replay.resize(4);
        qp_.epsn = 100;
    }

    void TearDown() override { EXPECT_EQ(env_.slots_in_use, 0u); }  // every slot sent or freed

    // A request as it comes off the wire: headers encoded, payload behind them, decoded.
    net::Packet request(uint8_t opcode, uint32_t psn, bool ackreq,
                        const std::vector<uint8_t>& payload = {}, net::Packet h = {}) {
        h.bth.opcode = opcode;
        h.bth.pkey = net::kDefaultPkey;
        h.bth.dqpn = kQpn;
        h.bth.psn = psn;
        h.bth.ackreq = ackreq;
        h.bth.pad = net::pad_for(uint32_t(payload.size()));
        auto& wire = wire_.emplace_back(net::kMaxHdrLen + payload.size() + 3 + net::kIcrcLen, 0);
        size_t hdr = net::encode_headers(h, wire.data());
        if (!payload.empty()) std::memcpy(wire.data() + hdr, payload.data(), payload.size());
        wire.resize(hdr + payload.size() + h.bth.pad + net::kIcrcLen);
        net::Packet p{};
        EXPECT_EQ(net::decode(wire.data(), wire.size(), p), net::DropReason::kNone);
        return p;
    }
    net::Packet write_request(uint8_t opcode, uint32_t psn, uint32_t rkey, uint64_t va,
                              const std::vector<uint8_t>& payload) {
        net::Packet h{};
        h.reth = {va, rkey, uint32_t(payload.size())};
        return request(opcode, psn, true, payload, h);
    }
    net::Packet sent(size_t i) {
        net::Packet p{};
        EXPECT_EQ(net::decode(env_.sent.at(i).data(), env_.sent.at(i).size(), p),
                  net::DropReason::kNone);
        return p;
    }
    // The first three packets sent: the responses to a READ at PSN 200 of 3 MTUs from
    // kIova + 4.
    void expect_three_read_responses() {
        const uint8_t ops[3] = {net::kRcReadRespFirst, net::kRcReadRespMiddle,
                                net::kRcReadRespLast};
        for (uint32_t i = 0; i < 3; ++i) {
            net::Packet r = sent(i);
            EXPECT_EQ(r.bth.opcode, ops[i]) << i;
            EXPECT_EQ(r.bth.psn, 200u + i) << i;
            EXPECT_EQ(r.bth.dqpn, kPeerQpn);
            ASSERT_EQ(r.payload_len, kMtu) << i;
            EXPECT_EQ(std::memcmp(r.payload, mem_.data() + 4 + i * kMtu, kMtu), 0) << i;
        }
    }
    void post_recv(uint64_t wr_id) {
        recv_bufs_.emplace_back(256, 0);
        env_.posted.push_back({wr_id, recv_bufs_.back().data(), 256});
    }

    Session session_;
    Qp qp_;
    FakeEnv env_;
    RcResponder<FakeEnv> responder_{env_};
    std::vector<uint8_t> mem_;
    std::deque<std::vector<uint8_t>> wire_, recv_bufs_;  // stable addresses
};

// AETH syndromes (IBTA 9.7.5.2) the responder must send.
constexpr uint8_t kAck = net::aeth::ack(net::aeth::kCreditInvalid);
constexpr uint8_t kNakSeq = net::aeth::nak(net::aeth::kNakPsnSeqError);
constexpr uint8_t kNakRemAccess = net::aeth::nak(net::aeth::kNakRemoteAccessError);

TEST_F(RcResponderTest, InOrderSendIsDeliveredAndAcknowledged) {
    post_recv(0xabc);
    std::vector<uint8_t> msg = {'h', 'e', 'l', 'l', 'o'};
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, msg));

    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 0xabcu);
    EXPECT_EQ(env_.completions[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(env_.completions[0].byte_len, 5u);
    EXPECT_EQ(std::memcmp(recv_bufs_[0].data(), "hello", 5), 0);
    ASSERT_EQ(env_.sent.size(), 1u);
    net::Packet ack = sent(0);
    EXPECT_EQ(ack.bth.opcode, net::kRcAck);
    EXPECT_EQ(ack.bth.dqpn, kPeerQpn);
    EXPECT_EQ(ack.bth.psn, 100u);
    EXPECT_EQ(ack.aeth.syndrome, kAck);
    EXPECT_EQ(ack.aeth.msn, 1u);  // the first message completed
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);
    EXPECT_EQ(env_.to_error, 0u);
}

// With every transmit buffer in flight the ACK is owed, not lost: the QP goes on the ready
// list and the ACK leaves once a buffer is back (not after the requester's timeout).
TEST_F(RcResponderTest, AckWithoutTransmitBufferIsOwedAndSentLater) {
    post_recv(1);
    post_recv(2);
    env_.fill_slots(true);
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {1}));
    EXPECT_TRUE(env_.sent.empty());
    EXPECT_TRUE(qp_.ack_owed);
    EXPECT_EQ(env_.marked_ready, std::vector<uint32_t>{qp_.qpn});
    ASSERT_EQ(env_.completions.size(), 1u);  // the message itself was delivered
    responder_.send_owed(qp_);               // still no buffer: still owed, marked again
    EXPECT_TRUE(env_.sent.empty());
    EXPECT_EQ(env_.marked_ready.size(), 2u);

    env_.fill_slots(false);
    responder_.send_owed(qp_);
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).bth.opcode, net::kRcAck);
    EXPECT_EQ(sent(0).bth.psn, 100u);
    EXPECT_EQ(sent(0).aeth.syndrome, kAck);
    EXPECT_EQ(sent(0).aeth.msn, 1u);
    EXPECT_FALSE(qp_.ack_owed);
    responder_.send_owed(qp_);  // nothing owed: nothing sent
    EXPECT_EQ(env_.sent.size(), 1u);

    // Owed, then a later ACK that found a buffer: it covers the owed one, which is dropped.
    env_.fill_slots(true);
    responder_.receive(qp_, request(net::kRcSendOnly, 101, true, {2}));
    EXPECT_TRUE(qp_.ack_owed);
    env_.fill_slots(false);
    post_recv(3);
    responder_.receive(qp_, request(net::kRcSendOnly, 102, true, {3}));
    EXPECT_FALSE(qp_.ack_owed);
    ASSERT_EQ(env_.sent.size(), 2u);
    EXPECT_EQ(sent(1).bth.psn, 102u);
    EXPECT_EQ(sent(1).aeth.msn, 3u);
}

TEST_F(RcResponderTest, MultiPacketSendAcknowledgedOnlyWhereAsked) {
    post_recv(7);
    responder_.receive(qp_, request(net::kRcSendFirst, 100, false, std::vector<uint8_t>(8, 1)));
    responder_.receive(qp_, request(net::kRcSendLast, 101, true, std::vector<uint8_t>(4, 2)));

    EXPECT_EQ(env_.sent.size(), 1u);  // coalesced: the LAST asked, the FIRST did not
    EXPECT_EQ(sent(0).bth.psn, 101u);
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].byte_len, 12u);
    EXPECT_EQ(recv_bufs_[0][7], 1);
    EXPECT_EQ(recv_bufs_[0][8], 2);
}

TEST_F(RcResponderTest, PsnAheadIsNakedOncePerGap) {
    post_recv(1);
    responder_.receive(qp_, request(net::kRcSendOnly, 102, true, {1, 2, 3, 4}));
    responder_.receive(qp_, request(net::kRcSendOnly, 103, true, {1, 2, 3, 4}));
    responder_.receive(qp_, request(net::kRcSendOnly, 104, true, {1, 2, 3, 4}));

    ASSERT_EQ(env_.sent.size(), 1u);  // one sequence NAK, not one per packet past the gap
    net::Packet nak = sent(0);
    EXPECT_EQ(nak.bth.opcode, net::kRcAck);
    EXPECT_EQ(nak.aeth.syndrome, kNakSeq);
    EXPECT_EQ(nak.bth.psn, 100u);  // the PSN the responder expects
    EXPECT_EQ(nak.aeth.msn, 0u);
    EXPECT_TRUE(env_.completions.empty());
    EXPECT_EQ(env_.posted.size(), 1u);  // no receive consumed
    EXPECT_EQ(qp_.epsn, 100u);

    // The retransmission from the expected PSN is taken, and a new gap is NAKed again.
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {9, 9, 9, 9}));
    EXPECT_EQ(env_.completions.size(), 1u);
    ASSERT_EQ(env_.sent.size(), 2u);
    EXPECT_EQ(sent(1).aeth.syndrome, kAck);
    responder_.receive(qp_, request(net::kRcSendOnly, 105, true, {1, 2, 3, 4}));
    ASSERT_EQ(env_.sent.size(), 3u);
    EXPECT_EQ(sent(2).aeth.syndrome, kNakSeq);
    EXPECT_EQ(sent(2).bth.psn, 101u);
}

TEST_F(RcResponderTest, DuplicateSendIsAcknowledgedNotDeliveredTwice) {
    post_recv(1);
    post_recv(2);
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {5, 6, 7, 8}));
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {5, 6, 7, 8}));

    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 1u);
    EXPECT_EQ(env_.posted.size(), 1u);  // the second receive is still posted
    ASSERT_EQ(env_.sent.size(), 2u);
    net::Packet reack = sent(1);
    EXPECT_EQ(reack.aeth.syndrome, kAck);
    EXPECT_EQ(reack.bth.psn, 100u);  // the last PSN it took
    EXPECT_EQ(reack.aeth.msn, 1u);
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);
}

TEST_F(RcResponderTest, WriteWithGoodRkeyLandsTheBytes) {
    std::vector<uint8_t> data(64);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(0xa0 + i);
    std::vector<uint8_t> before = mem_;
    responder_.receive(qp_, write_request(net::kRcWriteOnly, 100, kRkey, kIova + 16, data));

    EXPECT_EQ(std::memcmp(mem_.data() + 16, data.data(), data.size()), 0);
    EXPECT_EQ(std::memcmp(mem_.data(), before.data(), 16), 0);  // nothing before it
    EXPECT_EQ(mem_[16 + 64], before[16 + 64]);                  // nor after it
    EXPECT_TRUE(env_.completions.empty());  // a WRITE without immediate consumes no receive
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kAck);
    EXPECT_EQ(sent(0).bth.psn, 100u);
    EXPECT_EQ(sent(0).aeth.msn, 1u);
    EXPECT_EQ(qp_.epsn, 101u);
}

TEST_F(RcResponderTest, WriteWithBadRkeyIsNakedAndTheQpFails) {
    std::vector<uint8_t> before = mem_;
    responder_.receive(qp_, write_request(net::kRcWriteOnly, 100, kBadRkey, kIova, {1, 2, 3, 4}));

    EXPECT_EQ(mem_, before);
    ASSERT_EQ(env_.sent.size(), 1u);
    net::Packet nak = sent(0);
    EXPECT_EQ(nak.aeth.syndrome, kNakRemAccess);
    EXPECT_EQ(nak.bth.psn, 100u);
    EXPECT_EQ(env_.to_error, 1u);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
    ASSERT_EQ(env_.events.size(), 1u);
    EXPECT_EQ(env_.events[0], IBV_EVENT_QP_ACCESS_ERR);
    ASSERT_EQ(env_.trace_log.lines.size(), 1u);
    EXPECT_NE(env_.trace_log.lines[0].find("refused (REM_ACCESS_ERR)"), std::string::npos)
        << env_.trace_log.lines[0];
}

TEST_F(RcResponderTest, WritePastTheEndOfTheMrIsNaked) {
    std::vector<uint8_t> before = mem_;
    responder_.receive(
        qp_, write_request(net::kRcWriteOnly, 100, kRkey, kIova + mem_.size() - 2, {1, 2, 3, 4}));
    EXPECT_EQ(mem_, before);
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kNakRemAccess);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
}

TEST_F(RcResponderTest, ReadOfThreeMtusIsThreeResponses) {
    qp_.epsn = 200;
    net::Packet h{};
    h.reth = {kIova + 4, kRkey, 3 * kMtu};
    responder_.receive(qp_, request(net::kRcReadReq, 200, false, {}, h));

    ASSERT_EQ(env_.sent.size(), 3u);
    expect_three_read_responses();
    EXPECT_EQ(sent(0).aeth.msn, 1u);  // FIRST and LAST carry an AETH
    EXPECT_EQ(sent(2).aeth.syndrome, kAck);
    EXPECT_EQ(qp_.epsn, 203u);  // a READ takes one PSN per response
    EXPECT_EQ(qp_.msn, 1u);
}

// A READ whose responses run out of transmit buffers owes the rest, sent in order when
// buffers come back; the ACK of a SEND behind it waits for them.
TEST_F(RcResponderTest, ReadOutOfTransmitBuffersOwesTheRestInOrder) {
    qp_.epsn = 200;
    env_.fill_slots(true, 1);  // one buffer left
    net::Packet h{};
    h.reth = {kIova + 4, kRkey, 3 * kMtu};
    responder_.receive(qp_, request(net::kRcReadReq, 200, false, {}, h));
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_TRUE(qp_.read_owed.active);
    EXPECT_EQ(qp_.read_owed.next, 1u);
    EXPECT_EQ(env_.marked_ready, std::vector<uint32_t>{qp_.qpn});
    EXPECT_EQ(qp_.epsn, 203u);

    env_.fill_slots(true);  // (the fake's transmit gave its buffer straight back)
    post_recv(5);
    responder_.receive(qp_, request(net::kRcSendOnly, 203, true, {9}));
    EXPECT_EQ(env_.sent.size(), 1u) << "the ACK does not pass the READ's responses";
    EXPECT_TRUE(qp_.ack_owed);

    env_.fill_slots(false);
    responder_.send_owed(qp_);
    ASSERT_EQ(env_.sent.size(), 4u);
    expect_three_read_responses();
    EXPECT_EQ(sent(3).bth.opcode, net::kRcAck);
    EXPECT_EQ(sent(3).bth.psn, 203u);
    EXPECT_FALSE(qp_.read_owed.active);
    EXPECT_FALSE(qp_.ack_owed);
}

TEST_F(RcResponderTest, DuplicateAtomicIsAnsweredFromTheReplayEntry) {
    uint64_t value = 10;
    std::memcpy(mem_.data() + 64, &value, 8);
    net::Packet h{};
    h.atomic = {kIova + 64, kRkey, 5, 0};
    responder_.receive(qp_, request(net::kRcFetchAdd, 100, true, {}, h));
    responder_.receive(qp_, request(net::kRcFetchAdd, 100, true, {}, h));  // its retry

    std::memcpy(&value, mem_.data() + 64, 8);
    EXPECT_EQ(value, 15u);  // added once
    EXPECT_EQ(env_.dma_writes, 1u);
    ASSERT_EQ(env_.sent.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        net::Packet r = sent(i);
        EXPECT_EQ(r.bth.opcode, net::kRcAtomicAck) << i;
        EXPECT_EQ(r.bth.psn, 100u) << i;
        EXPECT_EQ(r.atomic_ack.orig, 10u) << i;  // the original value, both times
        EXPECT_EQ(r.aeth.syndrome, kAck) << i;
    }
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);

    // A compare-and-swap after it executes on the new value.
    h.atomic = {kIova + 64, kRkey, 99, 15};
    responder_.receive(qp_, request(net::kRcCmpSwap, 101, true, {}, h));
    std::memcpy(&value, mem_.data() + 64, 8);
    EXPECT_EQ(value, 99u);
    ASSERT_EQ(env_.sent.size(), 3u);
    EXPECT_EQ(sent(2).atomic_ack.orig, 15u);
}

// RDMA FLUSH (IBTA 1.5, as rxe): a FETH and a RETH, answered with a zero-length READ
// response once everything before it has landed.
class RcResponderFlushTest : public RcResponderTest {
protected:
    static constexpr uint32_t kFlushRkey = 0x5678;
    static constexpr uint64_t kFlushIova = 0x200000;
    void SetUp() override {
        RcResponderTest::SetUp();
        flush_mem_.assign(kMtu, 0);
        env_.mrs.push_back(fake::mr_over(
            session_, kPd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | abi::kAccessFlush,
            flush_mem_, kFlushIova, kFlushRkey));
        qp_.attr.qp_access_flags |= abi::kAccessFlush;
    }
    net::Packet flush(uint32_t psn, uint8_t type, uint8_t level, uint32_t rkey, uint64_t va,
                      uint32_t len) {
        net::Packet h{};
        h.feth = {type, level};
        h.reth = {va, rkey, len};
        return request(net::kRcFlush, psn, true, {}, h);
    }
    void expect_flush_response(size_t i, uint32_t psn, uint32_t msn) {
        net::Packet r = sent(i);
        EXPECT_EQ(r.bth.opcode, net::kRcReadRespOnly) << i;
        EXPECT_EQ(r.bth.psn, psn) << i;
        EXPECT_EQ(r.payload_len, 0u) << i;
        EXPECT_EQ(r.aeth.syndrome, kAck) << i;
        EXPECT_EQ(r.aeth.msn, msn) << i;
    }
    std::vector<uint8_t> flush_mem_;
};

constexpr uint8_t kNakInvReq = net::aeth::nak(net::aeth::kNakInvalidRequest);

TEST_F(RcResponderFlushTest, FlushAfterWriteLandsTheWriteThenAnswersWithAnEmptyReadResponse) {
    std::vector<uint8_t> data(32, 0x5a);
    responder_.receive(qp_, write_request(net::kRcWriteOnly, 100, kFlushRkey, kFlushIova, data));
    uint32_t settles = env_.settles;
    responder_.receive(qp_,
                       flush(101, abi::kFlushGlobal, abi::kFlushRange, kFlushRkey, kFlushIova, 32));

    EXPECT_EQ(std::memcmp(flush_mem_.data(), data.data(), data.size()), 0);
    EXPECT_GT(env_.settles, settles);  // the WRITE's pending bytes were made to land first
    ASSERT_EQ(env_.sent.size(), 2u);
    expect_flush_response(1, 101, 2);
    EXPECT_EQ(qp_.epsn, 102u);
    EXPECT_EQ(qp_.msn, 2u);
    EXPECT_EQ(qp_.state, IBV_QPS_RTS);
}

TEST_F(RcResponderFlushTest, BothPlacementTypesAndTheWholeMrWhateverTheRange) {
    responder_.receive(qp_, flush(100, abi::kFlushGlobal | abi::kFlushPersistent, abi::kFlushMr,
                                  kFlushRkey, 0, 0));  // no range: the MR's key is enough
    responder_.receive(qp_, flush(101, abi::kFlushPersistent, abi::kFlushRange, kFlushRkey,
                                  kFlushIova + kMtu - 8, 8));
    ASSERT_EQ(env_.sent.size(), 2u);
    expect_flush_response(0, 100, 1);
    expect_flush_response(1, 101, 2);
    EXPECT_EQ(qp_.state, IBV_QPS_RTS);
}

TEST_F(RcResponderFlushTest, MrWithoutTheFlushAccessIsARemoteAccessError) {
    // kRkey's MR has REMOTE_WRITE/READ/ATOMIC, no flush flag.
    responder_.receive(qp_, flush(100, abi::kFlushGlobal, abi::kFlushRange, kRkey, kIova, 8));
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).bth.opcode, net::kRcAck);
    EXPECT_EQ(sent(0).aeth.syndrome, kNakRemAccess);
    EXPECT_EQ(sent(0).bth.psn, 100u);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
    ASSERT_EQ(env_.events.size(), 1u);
    EXPECT_EQ(env_.events[0], IBV_EVENT_QP_ACCESS_ERR);
}

TEST_F(RcResponderFlushTest, PersistentNeedsItsOwnFlag) {
    env_.mrs.back().access &= ~abi::kAccessFlushPersistent;
    responder_.receive(qp_, flush(100, abi::kFlushGlobal | abi::kFlushPersistent, abi::kFlushMr,
                                  kFlushRkey, kFlushIova, 8));
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kNakRemAccess);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
}

TEST_F(RcResponderFlushTest, RangeOutsideTheMrIsARemoteAccessError) {
    responder_.receive(
        qp_, flush(100, abi::kFlushGlobal, abi::kFlushRange, kFlushRkey, kFlushIova + kMtu - 4, 8));
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kNakRemAccess);
}

TEST_F(RcResponderFlushTest, TypeTheQpDoesNotAllowIsAnInvalidRequest) {
    qp_.attr.qp_access_flags &= ~abi::kAccessFlushGlobal;  // as rxe's check_qp_attr_access
    responder_.receive(qp_,
                       flush(100, abi::kFlushGlobal, abi::kFlushRange, kFlushRkey, kFlushIova, 8));
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kNakInvReq);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
    ASSERT_EQ(env_.events.size(), 1u);
    EXPECT_EQ(env_.events[0], IBV_EVENT_QP_REQ_ERR);
}

TEST_F(RcResponderFlushTest, ReservedPlacementOrLevelIsAnInvalidRequest) {
    for (auto [type, level] : {std::pair<uint8_t, uint8_t>{0, 0}, {4, 0}, {1, 2}}) {
        SetUp();
        env_.sent.clear();
        responder_.receive(qp_, flush(100, type, level, kFlushRkey, kFlushIova, 8));
        ASSERT_EQ(env_.sent.size(), 1u) << int(type) << "/" << int(level);
        EXPECT_EQ(sent(0).aeth.syndrome, kNakInvReq) << int(type) << "/" << int(level);
        EXPECT_EQ(qp_.state, IBV_QPS_ERR);
    }
}

TEST_F(RcResponderFlushTest, DuplicateFlushIsAnsweredAgainNotExecutedAgain) {
    net::Packet f = flush(100, abi::kFlushGlobal, abi::kFlushRange, kFlushRkey, kFlushIova, 8);
    responder_.receive(qp_, f);
    responder_.receive(qp_, f);  // its retry
    ASSERT_EQ(env_.sent.size(), 2u);
    expect_flush_response(0, 100, 1);
    expect_flush_response(1, 100, 1);
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);
}

}  // namespace
}  // namespace uroce::emu
