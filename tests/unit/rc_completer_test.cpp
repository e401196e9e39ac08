// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Tests of the RC completer stage (emu/transport/rc_completer.h) on its own: a fake
// environment stands for the device and records what the completer asks of it (completions,
// rewinds, timers), so each case checks the completer's decisions, not the device's.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "emu/abi/wc_opcode.h"
#include "emu/transport/rc_completer_impl.h"
#include "emu/transport/rc_timers.h"
#include "fake_receive_env.h"
#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {

struct FakeEnv {
    struct Counters {
        uint64_t retransmits = 0;
        uint64_t retx_seq_nak = 0, retx_timeout = 0, retx_read_gap = 0, rnr_naks = 0;
    };
    struct Completion {
        uint32_t index;
        ibv_wc_status status;
        bool operator==(const Completion&) const = default;
    };

    uint64_t now = 5'000'000'000;
    Counters counts;
    std::vector<Completion> completions;
    std::vector<uint32_t> go_backs;  // the PSNs the requester was sent back to
    std::vector<uint64_t> deadlines;
    std::vector<net::DropReason> drops;
    int ready = 0, to_error = 0;

    // As the device: completing a WQE frees its slot (sq_done moves past it).
    void complete_send(Qp& qp, uint32_t index, ibv_wc_status s) {
        completions.push_back({index, s});
        qp.sq_done = index + 1;
    }
    void complete_blocked(Qp&) {}
    void complete_local_ops(Qp&) {}
    void go_back(Qp& qp, uint32_t psn) {
        go_backs.push_back(psn);
        qp.next_psn = psn;
        qp.sq_send = qp.sq_done;
    }
    void qp_to_error(Qp& qp) {
        ++to_error;
        qp.state = IBV_QPS_ERR;
    }
    void mark_ready(Qp&) { ++ready; }
    void arm_timer(Qp& qp, uint64_t deadline) {
        deadlines.push_back(deadline);
        qp.deadline_ns = deadline;
    }
    uint64_t now_ns() const { return now; }
    void count_drop(net::DropReason r, Qp&) { drops.push_back(r); }
    // No READ or ATOMIC responses in these cases: nothing is written.
    bool dma_write(Session*, const void*, const iovec*, int, size_t) { return false; }
    void dma_write_later(Session*, const void*, const iovec*, int, size_t, uint32_t, uint32_t,
                         DmaWriteBatch::Path) {}
    bool dma_settle(Qp&) { return true; }

    // The parts RcCompleter<Env> reaches them through, named as in the device's
    // TransportEnv (emu/engine/transport_env.h).
    struct DonePart {
        FakeEnv& e;
        void complete_send(Qp& qp, uint32_t index, ibv_wc_status s) {
            e.complete_send(qp, index, s);
        }
        void qp_to_error(Qp& qp) { e.qp_to_error(qp); }
    };
    struct RequesterPart {
        FakeEnv& e;
        void complete_blocked(Qp& qp) { e.complete_blocked(qp); }
        void complete_local_ops(Qp& qp) { e.complete_local_ops(qp); }
        void go_back(Qp& qp, uint32_t psn) { e.go_back(qp, psn); }
    };
    struct SchedPart {
        FakeEnv& e;
        void mark_ready(Qp& qp) { e.mark_ready(qp); }
        void arm_timer(Qp& qp, uint64_t deadline) { e.arm_timer(qp, deadline); }
    };
    struct CountersPart {
        FakeEnv& e;
        uint64_t& retransmits = e.counts.retransmits;
        uint64_t& retx_seq_nak = e.counts.retx_seq_nak;
        uint64_t& retx_timeout = e.counts.retx_timeout;
        uint64_t& retx_read_gap = e.counts.retx_read_gap;
        uint64_t& rnr_naks = e.counts.rnr_naks;
        void drop(net::DropReason r, Qp& qp) { e.count_drop(r, qp); }
    };
    struct DmaPart {
        FakeEnv& e;
        bool write(Session* s, const void* src, const iovec* remote, int n, size_t total) {
            return e.dma_write(s, src, remote, n, total);
        }
        void write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                         uint32_t qpn, uint32_t psn, DmaWriteBatch::Path path) {
            e.dma_write_later(s, src, remote, n, total, qpn, psn, path);
        }
        bool settle(Qp& qp) { return e.dma_settle(qp); }
    };
    DonePart done{*this};
    RequesterPart requester{*this};
    SchedPart sched{*this};
    CountersPart counters{*this};
    DmaPart dma{*this};
};

constexpr uint8_t kTimeout = 14;  // 4.096 us * 2^14: 67 ms

class RcCompleterTest : public ::testing::Test {
protected:
    RcCompleterTest() {
        fake::rts_qp(qp, session, 0x12, IBV_QPT_RC);
        qp.mtu = 1024;
        qp.sq_mask = 7;
        qp.swr.resize(8);
        qp.attr.timeout = kTimeout;
        qp.attr.retry_cnt = 7;
        qp.attr.rnr_retry = 3;
        qp.retry_left = 7;
        qp.rnr_left = 3;
    }

    // A SEND of `len` bytes sent in full: its packets take the next PSNs.
    void sent_send(uint32_t len) {
        SendWr& w = qp.swr[qp.sq_fetch & qp.sq_mask];
        w.opcode = IBV_WR_SEND;
        w.length = len;
        uint32_t npkts = len ? (len + qp.mtu - 1) / qp.mtu : 1;
        w.first_psn = qp.wqe_psn;
        w.last_psn = net::psn_add(qp.wqe_psn, npkts - 1);
        qp.wqe_psn = qp.next_psn = net::psn_add(qp.wqe_psn, npkts);
        qp.sq_send = ++qp.sq_fetch;
    }

    void start_at(uint32_t psn) { qp.wqe_psn = qp.next_psn = qp.una_psn = psn; }

    static net::Packet ack_packet(uint32_t psn, uint8_t syndrome) {
        net::Packet p{};
        p.bth.opcode = net::kRcAck;
        p.bth.psn = psn;
        p.aeth.syndrome = syndrome;
        return p;
    }

    Session session;
    Qp qp;
    FakeEnv env;
    RcCompleter<FakeEnv> completer{env};
};

TEST_F(RcCompleterTest, AckCompletesTheSendItCovers) {
    start_at(100);
    sent_send(64);
    completer.receive(qp, ack_packet(100, net::aeth::ack(net::aeth::kCreditInvalid)));
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_SUCCESS}}));
    EXPECT_EQ(qp.sq_done, 1u);
    EXPECT_EQ(qp.una_psn, 101u);
    EXPECT_TRUE(env.go_backs.empty());
    // Nothing outstanding: the retransmit timer is stopped.
    ASSERT_FALSE(env.deadlines.empty());
    EXPECT_EQ(env.deadlines.back(), 0u);
    EXPECT_EQ(qp.resp_rx, 1u);
}

TEST_F(RcCompleterTest, AckOfPartOfAMessageCompletesNothing) {
    start_at(200);
    sent_send(3000);  // PSNs 200..202
    completer.receive(qp, ack_packet(201, net::aeth::ack(net::aeth::kCreditInvalid)));
    EXPECT_TRUE(env.completions.empty());
    EXPECT_EQ(qp.una_psn, 202u);
    ASSERT_FALSE(env.deadlines.empty());
    EXPECT_EQ(env.deadlines.back(), env.now + ack_timeout_ns(kTimeout));
}

TEST_F(RcCompleterTest, SequenceNakGoesBackToTheNakedPsn) {
    start_at(10);
    sent_send(64);    // PSN 10
    sent_send(2048);  // PSNs 11..12
    completer.receive(qp, ack_packet(11, net::aeth::nak(net::aeth::kNakPsnSeqError)));
    // The NAK acknowledges what precedes it, and the rest is sent again from its PSN.
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_SUCCESS}}));
    EXPECT_EQ(qp.una_psn, 11u);
    EXPECT_EQ(env.go_backs, std::vector<uint32_t>{11});
    EXPECT_EQ(qp.retransmits, 1u);
    EXPECT_EQ(env.counts.retransmits, 1u);
    EXPECT_EQ(env.counts.retx_seq_nak, 1u);  // counters_retx: by cause
    EXPECT_EQ(env.counts.retx_timeout, 0u);
    EXPECT_EQ(qp.state, IBV_QPS_RTS);
}

TEST_F(RcCompleterTest, RnrNakArmsTheRnrTimerWithoutCompleting) {
    start_at(50);
    sent_send(64);
    constexpr uint8_t kRnrCode = 14;  // 1.28 ms
    completer.receive(qp, ack_packet(50, net::aeth::rnr_nak(kRnrCode)));
    EXPECT_TRUE(env.completions.empty());
    EXPECT_TRUE(qp.rnr_wait);
    EXPECT_EQ(qp.rnr_left, 2);
    EXPECT_EQ(env.go_backs, std::vector<uint32_t>{50});
    ASSERT_FALSE(env.deadlines.empty());
    EXPECT_EQ(env.deadlines.back(), env.now + 1'280'000u);
    EXPECT_EQ(env.deadlines.back(), env.now + rnr_timer_ns(kRnrCode));
    EXPECT_EQ(qp.retransmits, 0u);

    // The RNR timer expires: the requester resumes, nothing is counted as a retransmission.
    int ready = env.ready;
    completer.retransmit_timeout(qp);
    EXPECT_FALSE(qp.rnr_wait);
    EXPECT_EQ(env.ready, ready + 1);
    EXPECT_EQ(env.go_backs.size(), 1u);
    EXPECT_TRUE(env.completions.empty());
    EXPECT_EQ(env.counts.retransmits, 0u);
    EXPECT_EQ(env.counts.rnr_naks, 1u);
    EXPECT_EQ(env.counts.retx_timeout, 0u);
}

TEST_F(RcCompleterTest, RnrRetriesExhaustedFailTheOldestWqe) {
    start_at(7);
    sent_send(64);
    qp.rnr_left = 0;
    completer.receive(qp, ack_packet(7, net::aeth::rnr_nak(1)));
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_RNR_RETRY_EXC_ERR}}));
    EXPECT_EQ(env.to_error, 1);
    EXPECT_EQ(qp.state, IBV_QPS_ERR);
    EXPECT_FALSE(qp.rnr_wait);
}

TEST_F(RcCompleterTest, RemoteAccessNakFailsTheOldestWqe) {
    start_at(300);
    sent_send(64);
    completer.receive(qp, ack_packet(300, net::aeth::nak(net::aeth::kNakRemoteAccessError)));
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_REM_ACCESS_ERR}}));
    EXPECT_EQ(qp.state, IBV_QPS_ERR);
}

TEST_F(RcCompleterTest, TimeoutResendsFromUnaThenGivesUp) {
    start_at(1000);
    sent_send(64);
    qp.retry_left = 1;
    completer.retransmit_timeout(qp);
    EXPECT_EQ(env.go_backs, std::vector<uint32_t>{1000});
    EXPECT_EQ(qp.retry_left, 0);
    EXPECT_EQ(env.counts.retransmits, 1u);
    EXPECT_EQ(env.counts.retx_timeout, 1u);
    EXPECT_EQ(env.counts.retx_seq_nak, 0u);
    EXPECT_EQ(env.deadlines.back(), env.now + ack_timeout_ns(kTimeout));
    EXPECT_TRUE(env.completions.empty());

    qp.next_psn = 1001;  // the requester sent it again
    completer.retransmit_timeout(qp);
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_RETRY_EXC_ERR}}));
    EXPECT_EQ(qp.state, IBV_QPS_ERR);
}

TEST_F(RcCompleterTest, AckOutsideTheOutstandingPsnsIsIgnored) {
    start_at(40);
    sent_send(64);                                                // PSN 40
    completer.receive(qp, ack_packet(41, net::aeth::ack(0x1f)));  // never sent
    completer.receive(qp, ack_packet(30, net::aeth::ack(0x1f)));  // long acknowledged
    EXPECT_TRUE(env.completions.empty());
    EXPECT_EQ(qp.una_psn, 40u);
    EXPECT_TRUE(env.deadlines.empty());
}

// RDMA FLUSH: one PSN, completed only by its zero-length READ response (as rxe), with
// IBV_WC_FLUSH (rdma-core 56: 8) whatever headers the device was built with.
class RcCompleterFlushTest : public RcCompleterTest {
protected:
    void sent_flush() {
        SendWr& w = qp.swr[qp.sq_fetch & qp.sq_mask];
        w.opcode = abi::kWrFlush;
        w.length = 0;
        w.first_psn = w.last_psn = qp.wqe_psn;
        qp.wqe_psn = qp.next_psn = net::psn_add(qp.wqe_psn, 1);
        qp.sq_send = ++qp.sq_fetch;
    }
    static net::Packet read_resp_only(uint32_t psn, uint32_t payload_len = 0) {
        static const uint8_t bytes[8] = {};
        net::Packet p{};
        p.bth.opcode = net::kRcReadRespOnly;
        p.bth.psn = psn;
        p.aeth.syndrome = net::aeth::ack(net::aeth::kCreditInvalid);
        p.payload = bytes;
        p.payload_len = payload_len;
        return p;
    }
};

TEST_F(RcCompleterFlushTest, TheWqeMapsToIbvWcFlush) {
    EXPECT_EQ(uint32_t(abi::wc_opcode_for(abi::kWrFlush)), 8u);
    EXPECT_TRUE(is_rd_atomic(abi::kWrFlush));  // takes a responder resource, waits for FENCE
}

TEST_F(RcCompleterFlushTest, EmptyReadResponseCompletesTheFlushAfterTheWrite) {
    start_at(100);
    sent_send(64);  // PSN 100
    sent_flush();   // PSN 101
    completer.receive(qp, ack_packet(100, net::aeth::ack(net::aeth::kCreditInvalid)));
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_SUCCESS}}));
    completer.receive(qp, read_resp_only(101));
    EXPECT_EQ(env.completions,
              (std::vector<FakeEnv::Completion>{{0, IBV_WC_SUCCESS}, {1, IBV_WC_SUCCESS}}));
    EXPECT_EQ(qp.una_psn, 102u);
    EXPECT_TRUE(env.drops.empty());
}

TEST_F(RcCompleterFlushTest, AnAckBeyondItMeansItsResponseWasLost) {
    start_at(100);
    sent_flush();  // PSN 100
    sent_send(64);
    completer.receive(qp, ack_packet(101, net::aeth::ack(net::aeth::kCreditInvalid)));
    EXPECT_TRUE(env.completions.empty());  // a FLUSH completes with its response only
    EXPECT_EQ(env.go_backs, std::vector<uint32_t>{100});
}

TEST_F(RcCompleterFlushTest, AResponseWithDataOrAnAtomicAckIsNotItsAnswer) {
    start_at(100);
    sent_flush();
    net::Packet atomic_ack = read_resp_only(100);
    atomic_ack.bth.opcode = net::kRcAtomicAck;
    completer.receive(qp, atomic_ack);
    EXPECT_EQ(env.drops, std::vector<net::DropReason>{net::DropReason::kOpNotForQp});
    EXPECT_TRUE(env.completions.empty());
    completer.receive(qp, read_resp_only(100, 8));  // data nobody asked for
    EXPECT_EQ(env.completions, (std::vector<FakeEnv::Completion>{{0, IBV_WC_REM_OP_ERR}}));
    EXPECT_EQ(qp.state, IBV_QPS_ERR);
}

}  // namespace
}  // namespace uroce::emu
