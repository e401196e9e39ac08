// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Tests of the RC and UC requester stage (emu/transport/rc_requester.h) on its own: the send
// queue is a real ring in the test's memory, laid out as the library lays it out; a fake
// environment stands for the device (transmit buffers, DMA reads, key checks, completions,
// timers) and records what the requester asks of it. Sent packets are decoded again.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "emu/transport/rc_requester_impl.h"
#include "fake_receive_env.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {

struct FakeEnv {
    static constexpr uint32_t kSlots = 256;
    static constexpr size_t kSlotBytes = net::kMaxHdrLen + 4096 + 4;
    struct Sent {
        net::Packet p;
        std::vector<uint8_t> bytes;  // BTH through pad, the ICRC room after
        std::string payload() const {
            return std::string(reinterpret_cast<const char*>(p.payload), p.payload_len);
        }
    };
    std::vector<Sent> sent;
    std::vector<std::pair<uint32_t, ibv_wc_status>> done_sends;  // (index, status)
    std::vector<ibv_event_type> qp_events;
    int readvs = 0, ready = 0, to_error = 0, sq_errors = 0, flushes = 0;
    std::vector<uint64_t> timers;
    static constexpr uint32_t kBadKey = 0xbad;  // an lkey the checks refuse
    size_t fail_reads_at = SIZE_MAX;  // a payload read that reaches this source address fails
    uint32_t free_slots = kSlots;
    uint64_t now = 1'000'000'000;
    uint32_t port_mtu_bytes = 4096;
    struct Config {
        uint16_t port = 4791;
        uint32_t ipv6_scope = 0;
    } config;
    std::vector<std::vector<uint8_t>> bufs = std::vector<std::vector<uint8_t>>(kSlots);

    struct WirePart {
        FakeEnv& e;
        uint8_t* tx_begin(uint32_t* slot) {
            for (uint32_t i = 0; i < kSlots; ++i)
                if (e.bufs[i].empty() && e.free_slots) {
                    --e.free_slots;
                    e.bufs[i].resize(kSlotBytes);
                    *slot = i;
                    return e.bufs[i].data();
                }
            return nullptr;
        }
        void transmit(uint32_t slot, size_t len, const net::Endpoint&, Qp*) {
            Sent s;
            s.bytes.assign(e.bufs[slot].begin(), e.bufs[slot].begin() + long(len));
            s.bytes.resize(len + net::kIcrcLen);
            EXPECT_EQ(net::decode(s.bytes.data(), s.bytes.size(), s.p), net::DropReason::kNone);
            e.sent.push_back(std::move(s));
            tx_free(slot);
        }
        void tx_free(uint32_t slot) {
            e.bufs[slot].clear();
            ++e.free_slots;
        }
        uint16_t local_of_gid(uint32_t) const { return 0; }
    };
    struct DmaPart {
        FakeEnv& e;
        bool readv(Session*, const iovec* local, int nlocal, const iovec* remote, int nremote,
                   size_t) {
            ++e.readvs;
            std::string all;
            for (int i = 0; i < nremote; ++i) {
                uintptr_t a = reinterpret_cast<uintptr_t>(remote[i].iov_base);
                if (e.fail_reads_at >= a && e.fail_reads_at < a + remote[i].iov_len) return false;
                all.append(static_cast<const char*>(remote[i].iov_base), remote[i].iov_len);
            }
            size_t at = 0;
            for (int i = 0; i < nlocal; ++i) {
                std::memcpy(local[i].iov_base, all.data() + at, local[i].iov_len);
                at += local[i].iov_len;
            }
            return true;
        }
    };
    struct VerbsPart {
        FakeEnv& e;
        bool check_local_sges(const Session*, uint32_t, abi::Sge* sge, uint32_t n, bool,
                              uint64_t* total) const {
            *total = 0;
            bool ok = true;
            for (uint32_t i = 0; i < n; ++i) {
                *total += sge[i].length;
                ok = ok && sge[i].lkey != kBadKey;
            }
            return ok;
        }
    };
    struct WindowsPart {
        ibv_wc_status bind_mw(Qp&, uint32_t) { return IBV_WC_SUCCESS; }
        ibv_wc_status local_invalidate(Qp&, uint32_t) { return IBV_WC_SUCCESS; }
    };
    struct DonePart {
        FakeEnv& e;
        void complete_send(Qp& qp, uint32_t index, ibv_wc_status st) {
            e.done_sends.emplace_back(index, st);
            qp.sq_done = index + 1;
        }
        void send_queue_error(Qp& qp) {
            ++e.sq_errors;
            qp.state = IBV_QPS_ERR;
        }
        void qp_to_error(Qp& qp) {
            ++e.to_error;
            qp.state = IBV_QPS_ERR;
        }
        void flush_queues(Qp&) { ++e.flushes; }
        void flush_send_queue(Qp&) { ++e.flushes; }
    };
    struct XrcPart {
        FakeEnv& e;
        void post_qp_async(Qp&, ibv_event_type t) { e.qp_events.push_back(t); }
    };
    struct SchedPart {
        FakeEnv& e;
        void mark_ready(Qp&) { ++e.ready; }
        void arm_timer(Qp& qp, uint64_t deadline) {
            e.timers.push_back(deadline);
            qp.deadline_ns = deadline;
        }
    };
    struct UdPart {
        void requester_progress(Qp&) { ADD_FAILURE() << "an RC QP was handed to the UD stage"; }
    };
    uint64_t now_ns() const { return now; }

    WirePart wire{*this};
    DmaPart dma{*this};
    VerbsPart verbs{*this};
    WindowsPart windows;
    DonePart done{*this};
    XrcPart xrc{*this};
    SchedPart sched{*this};
    UdPart ud;
};

// A send ring of 64 entries of up to 2 SGEs, in the library's layout.
struct SendRing {
    static constexpr uint32_t kSlots = 64, kMaxSge = 2, kMaxInline = 64;
    uint32_t stride = uint32_t(abi::send_stride(kMaxSge, kMaxInline));
    std::vector<uint8_t> mem = std::vector<uint8_t>(abi::ring_bytes(kSlots, stride) + 64);
    abi::RingHeader* hdr() {
        uintptr_t p = reinterpret_cast<uintptr_t>(mem.data());
        return reinterpret_cast<abi::RingHeader*>((p + 63) & ~uintptr_t(63));
    }
    // Posts `w` with `sges` (as ibv_post_send).
    void post(abi::SendWqe w, std::vector<abi::Sge> sges = {}) {
        uint32_t prod = hdr()->prod.load();
        uint8_t* slot = abi::ring_slot(hdr(), stride, kSlots - 1, prod);
        if (!w.num_sge) w.num_sge = uint32_t(sges.size());
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, sges.data(), sizeof(abi::Sge) * sges.size());
        hdr()->prod.store(prod + 1);
    }
};

class RcRequesterTest : public ::testing::Test {
protected:
    RcRequesterTest() {
        fake::rts_qp(qp, session, 0x12, IBV_QPT_RC);
        qp.mtu = 1024;
        qp.attr.dest_qp_num = 0x34;
        qp.attr.timeout = 14;
        qp.attr.max_rd_atomic = 4;
        qp.cap.max_send_sge = SendRing::kMaxSge;
        qp.cap.max_inline_data = SendRing::kMaxInline;
        qp.sq = ring.hdr();
        qp.sq_mask = SendRing::kSlots - 1;
        qp.sq_stride = ring.stride;
        qp.swr.resize(SendRing::kSlots);
        qp.swr_sge.resize(SendRing::kSlots * SendRing::kMaxSge);
        for (uint32_t i = 0; i < SendRing::kSlots; ++i)
            qp.swr[i].sge = &qp.swr_sge[i * SendRing::kMaxSge];
        qp.wqe_psn = qp.next_psn = qp.una_psn = 0xfffffe;  // wraps within a few packets
        data.resize(8192);
        for (size_t i = 0; i < data.size(); ++i) data[i] = char('a' + i % 23);
    }
    abi::SendWqe wqe(uint64_t id, uint32_t op, uint32_t flags = IBV_SEND_SIGNALED) {
        abi::SendWqe w{};
        w.wr_id = id;
        w.opcode = op;
        w.send_flags = flags;
        return w;
    }
    abi::Sge sge(size_t off, uint32_t len) {
        return {reinterpret_cast<uint64_t>(data.data() + off), len, 0x100};
    }
    // The QP as a UC QP instead.
    void as_uc() {
        qp.type = IBV_QPT_UC;
        qp.transport = net::kTransportUc;
    }
    // The one WQE posted completed with `status` at once, and nothing was sent.
    void expect_failed_unsent(ibv_wc_status status) {
        EXPECT_TRUE(env.sent.empty());
        ASSERT_EQ(env.done_sends.size(), 1u);
        EXPECT_EQ(env.done_sends[0], std::make_pair(0u, status));
    }
    Session session;
    SendRing ring;
    Qp qp;
    std::string data;
    FakeEnv env;
    RcRequester<FakeEnv> req{env};
};

// A SEND longer than the MTU leaves as FIRST, MIDDLE, LAST with consecutive PSNs (across the
// 24-bit wrap), its payload read in one system call across two SGEs; only the last packet
// asks for an ACK; the ACK timer runs; an RC WQE completes only when acknowledged.
TEST_F(RcRequesterTest, SegmentsASendByTheMtu) {
    ring.post(wqe(1, IBV_WR_SEND), {sge(0, 1500), sge(4000, 1000)});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 3u);
    const uint8_t ops[] = {net::kRcSendFirst, net::kRcSendMiddle, net::kRcSendLast};
    const uint32_t psns[] = {0xfffffe, 0xffffff, 0};
    std::string got;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(env.sent[i].p.bth.opcode, ops[i]) << i;
        EXPECT_EQ(env.sent[i].p.bth.psn, psns[i]) << i;
        EXPECT_EQ(env.sent[i].p.bth.dqpn, 0x34u);
        EXPECT_EQ(env.sent[i].p.bth.ackreq, i == 2) << i;
        got += env.sent[i].payload();
    }
    EXPECT_EQ(got, data.substr(0, 1500) + data.substr(4000, 1000));
    EXPECT_EQ(env.sent[2].p.payload_len, 2500u - 2048u);
    EXPECT_EQ(env.readvs, 1) << "one read for the whole batch";
    EXPECT_EQ(qp.next_psn, 1u);
    EXPECT_FALSE(env.timers.empty());
    EXPECT_TRUE(env.done_sends.empty()) << "RC completes on the ACK";
    EXPECT_EQ(qp.sq_send, 1u);
}

// An RDMA WRITE with immediate: the RETH (address, key, whole length) on the first packet,
// the immediate on the last; a short one is WRITE_ONLY_WITH_IMMEDIATE.
TEST_F(RcRequesterTest, WriteCarriesTheRethFirstAndTheImmediateLast) {
    abi::SendWqe w = wqe(2, IBV_WR_RDMA_WRITE_WITH_IMM);
    w.remote_addr = 0x7000'0000;
    w.rkey = 0xabcd;
    w.imm_data = htobe32(0x5eed);
    ring.post(w, {sge(0, 2000)});
    abi::SendWqe s = w;
    s.wr_id = 3;
    ring.post(s, {sge(0, 10)});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 3u);
    EXPECT_EQ(env.sent[0].p.bth.opcode, net::kRcWriteFirst);
    EXPECT_EQ(env.sent[0].p.reth.va, 0x7000'0000u);
    EXPECT_EQ(env.sent[0].p.reth.rkey, 0xabcdu);
    EXPECT_EQ(env.sent[0].p.reth.dma_len, 2000u);
    EXPECT_EQ(env.sent[1].p.bth.opcode, net::kRcWriteLastImm);
    EXPECT_EQ(env.sent[1].p.imm, 0x5eedu);
    EXPECT_EQ(env.sent[2].p.bth.opcode, net::kRcWriteOnlyImm);
    EXPECT_EQ(env.sent[2].p.reth.dma_len, 10u);
    EXPECT_EQ(env.sent[2].payload(), data.substr(0, 10));
}

// A READ is one request for the whole length; its responses take the PSNs up to the WQE's
// last, so the next request starts after them.
TEST_F(RcRequesterTest, ReadTakesThePsnsOfItsResponses) {
    abi::SendWqe r = wqe(4, IBV_WR_RDMA_READ);
    r.remote_addr = 0x1000;
    r.rkey = 7;
    ring.post(r, {sge(0, 3000)});
    ring.post(wqe(5, IBV_WR_SEND), {sge(0, 8)});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 2u);
    EXPECT_EQ(env.sent[0].p.bth.opcode, net::kRcReadReq);
    EXPECT_EQ(env.sent[0].p.reth.dma_len, 3000u);
    EXPECT_TRUE(env.sent[0].p.bth.ackreq);
    EXPECT_EQ(env.sent[0].p.payload_len, 0u);
    EXPECT_EQ(env.sent[1].p.bth.psn, net::psn_add(0xfffffe, 3)) << "3 responses of 1024";
}

// IBV_SEND_FENCE: a fenced WQE waits until every earlier READ has completed.
TEST_F(RcRequesterTest, AFencedWqeWaitsForTheReadBeforeIt) {
    ring.post(wqe(6, IBV_WR_RDMA_READ), {sge(0, 100)});
    ring.post(wqe(7, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_FENCE), {sge(0, 100)});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 1u);
    EXPECT_EQ(env.sent[0].p.bth.opcode, net::kRcReadReq);
    qp.sq_done = 1;  // the READ completed (the completer's doing)
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 2u);
    EXPECT_EQ(env.sent[1].p.bth.opcode, net::kRcSendOnly);
}

// At most 128 packets unacknowledged: a longer message waits for ACKs (una_psn) to go on.
TEST_F(RcRequesterTest, StopsAtTheOutstandingPacketWindow) {
    qp.mtu = 256;
    std::string big(200 * 256, 'w');
    ring.post(wqe(8, IBV_WR_SEND),
              {{reinterpret_cast<uint64_t>(big.data()), uint32_t(big.size()), 1}});
    req.progress(qp);
    EXPECT_EQ(env.sent.size(), 128u);
    qp.una_psn = net::psn_add(qp.una_psn, 100);  // ACKed up to there
    req.progress(qp);
    EXPECT_EQ(env.sent.size(), 200u);
    EXPECT_EQ(env.sent.back().p.bth.opcode, net::kRcSendLast);
}

// With no transmit buffer the QP goes on the ready list and resumes where it stopped.
TEST_F(RcRequesterTest, ResumesWhenTransmitBuffersComeBack) {
    env.free_slots = 1;
    ring.post(wqe(9, IBV_WR_SEND), {sge(0, 3000)});
    req.progress(qp);
    EXPECT_EQ(env.sent.size(), 1u);
    EXPECT_EQ(env.ready, 1);
    req.progress(qp);
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 3u);
    EXPECT_EQ(env.sent[1].p.bth.opcode, net::kRcSendMiddle);
    EXPECT_EQ(env.sent[2].payload(), data.substr(2048, 3000 - 2048));
}

// A WQE that cannot be executed completes in error once the WQEs before it have, and stops
// the send queue: here SGE checks that fail (LOC_PROT_ERR).
TEST_F(RcRequesterTest, BadWqesCompleteInErrorInOrder) {
    ring.post(wqe(10, IBV_WR_SEND), {sge(0, 10)});
    abi::Sge bad = sge(0, 10);
    bad.lkey = FakeEnv::kBadKey;
    ring.post(wqe(11, IBV_WR_SEND), {bad});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 1u);
    EXPECT_TRUE(env.done_sends.empty()) << "not before the SEND ahead of it";
    qp.sq_done = 1;  // the first SEND is acknowledged
    req.complete_blocked(qp);
    ASSERT_EQ(env.done_sends.size(), 1u);
    EXPECT_EQ(env.done_sends[0], std::make_pair(1u, IBV_WC_LOC_PROT_ERR));
    EXPECT_EQ(env.sq_errors, 1);
}

// More SGEs than max_send_sge: LOC_LEN_ERR, nothing sent.
TEST_F(RcRequesterTest, TooManySgesIsALocalLengthError) {
    abi::SendWqe w = wqe(12, IBV_WR_SEND);
    w.num_sge = SendRing::kMaxSge + 1;
    ring.post(w, {sge(0, 8)});
    req.progress(qp);
    expect_failed_unsent(IBV_WC_LOC_LEN_ERR);
}

// An opcode the QP type does not have (a READ on UC): LOC_QP_OP_ERR, nothing sent.
TEST_F(RcRequesterTest, AnOpcodeTheQpTypeLacksIsALocalQpOperationError) {
    as_uc();
    ring.post(wqe(13, IBV_WR_RDMA_READ), {sge(0, 8)});
    req.progress(qp);
    expect_failed_unsent(IBV_WC_LOC_QP_OP_ERR);
}

// UC: nothing is acknowledged, so a WQE completes once sent and the window moves with it.
TEST_F(RcRequesterTest, UcCompletesOnceSent) {
    as_uc();
    ring.post(wqe(18, IBV_WR_SEND), {sge(0, 1500)});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 2u);
    EXPECT_EQ(env.sent[0].p.bth.opcode, net::kUcSendFirst);
    EXPECT_FALSE(env.sent[1].p.bth.ackreq);
    ASSERT_EQ(env.done_sends.size(), 1u);
    EXPECT_EQ(env.done_sends[0], std::make_pair(0u, IBV_WC_SUCCESS));
    EXPECT_EQ(qp.una_psn, qp.next_psn);
    EXPECT_TRUE(env.timers.empty()) << "no ACK timer for UC";
}

// Go-back-N: a rewind to a PSN in the middle of a message resends from that packet's offset.
TEST_F(RcRequesterTest, GoBackResendsFromThePacketAsked) {
    ring.post(wqe(14, IBV_WR_SEND), {sge(0, 3000)});
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 3u);
    req.go_back(qp, 0xffffff);  // the second packet
    EXPECT_EQ(env.ready, 1);
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 5u);
    EXPECT_EQ(env.sent[3].p.bth.psn, 0xffffffu);
    EXPECT_EQ(env.sent[3].p.bth.opcode, net::kRcSendMiddle);
    EXPECT_EQ(env.sent[3].payload(), env.sent[1].payload());
    EXPECT_EQ(env.sent[4].payload(), env.sent[2].payload());
}

// Registered memory unmapped under the device: the packets before the one that cannot be
// read leave, and its WQE completes with LOC_PROT_ERR once the ones before it have.
TEST_F(RcRequesterTest, UnreadablePayloadSendsWhatPrecedesIt) {
    ring.post(wqe(15, IBV_WR_SEND), {sge(0, 8)});
    ring.post(wqe(16, IBV_WR_SEND), {sge(1024, 3000)});
    env.fail_reads_at = reinterpret_cast<uintptr_t>(data.data()) + 1024 + 2048 + 10;
    req.progress(qp);
    ASSERT_EQ(env.sent.size(), 3u) << "the first SEND and two packets of the second";
    EXPECT_EQ(env.sent[2].p.bth.opcode, net::kRcSendMiddle);
    qp.sq_done = 1;
    req.complete_blocked(qp);
    ASSERT_EQ(env.done_sends.size(), 1u);
    EXPECT_EQ(env.done_sends[0], std::make_pair(1u, IBV_WC_LOC_PROT_ERR));
}

// The ring's producer index is not trusted: one more than a ring ahead is QP_FATAL and ERR.
TEST_F(RcRequesterTest, AProducerIndexPastTheRingIsFatal) {
    ring.hdr()->prod.store(SendRing::kSlots + 5);
    req.progress(qp);
    EXPECT_TRUE(env.sent.empty());
    ASSERT_EQ(env.qp_events.size(), 1u);
    EXPECT_EQ(env.qp_events[0], IBV_EVENT_QP_FATAL);
    EXPECT_EQ(env.to_error, 1);
}

// A QP in ERR only flushes; one in SQE flushes its send queue.
TEST_F(RcRequesterTest, InErrorItOnlyFlushes) {
    ring.post(wqe(17, IBV_WR_SEND), {sge(0, 8)});
    qp.state = IBV_QPS_ERR;
    req.progress(qp);
    qp.state = IBV_QPS_SQE;
    req.progress(qp);
    EXPECT_TRUE(env.sent.empty());
    EXPECT_EQ(env.flushes, 2);
}

}  // namespace
}  // namespace uroce::emu
