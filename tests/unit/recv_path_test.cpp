// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Tests of the receive side every transport shares (emu/transport/recv_path.h) on its own: a
// fake environment stands for the device (the SRQ table, the SGE checks, deferred DMA,
// completions, asynchronous events, the trace) and records what RecvPath asks of it. The
// receive queue is a real ring in the test's memory, laid out as the library lays it out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "emu/transport/recv_path_impl.h"
#include "net/opcodes.h"
#include "tests/unit/fake_receive_env.h"

namespace uroce::emu {
namespace {

struct FakeEnv {
    struct Async {
        Session* s;
        ibv_event_type type;
        uint64_t cookie;
    };
    struct Cqe {
        uint32_t cq;
        abi::Cqe c;
        bool solicited;
    };
    struct Write {
        Session* s;
        std::vector<iovec> iov;
        std::string bytes;
        uint32_t qpn, psn;
    };
    std::vector<Srq*> srq_table;  // handle h is srq_table[h - 1]
    bool sges_ok = true;
    std::vector<std::pair<const Session*, uint32_t>> checked;  // (owner, pd) of each check
    std::vector<Write> writes;
    std::vector<Cqe> cqes;
    std::vector<Async> asyncs;
    std::vector<ibv_event_type> qp_events;

    struct SrqsPart {
        FakeEnv& e;
        Srq* get(uint32_t h) const {
            return h && h <= e.srq_table.size() ? e.srq_table[h - 1] : nullptr;
        }
    };
    struct VerbsPart {
        FakeEnv& e;
        bool check_local_sges(const Session* owner, uint32_t pd, abi::Sge* sge, uint32_t n, bool,
                              uint64_t* total) const {
            e.checked.emplace_back(owner, pd);
            *total = 0;
            for (uint32_t i = 0; i < n; ++i) *total += sge[i].length;
            return e.sges_ok;
        }
    };
    struct DmaPart {
        FakeEnv& e;
        void write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                         uint32_t qpn, uint32_t psn, DmaWriteBatch::Path) {
            e.writes.push_back({s, std::vector<iovec>(remote, remote + n),
                                std::string(static_cast<const char*>(src), total), qpn, psn});
        }
    };
    struct DonePart {
        FakeEnv& e;
        void push_cqe(uint32_t cq, const abi::Cqe& c, bool solicited) {
            e.cqes.push_back({cq, c, solicited});
        }
        void post_async(Session* s, ibv_event_type type, uint64_t cookie, const char* = nullptr,
                        uint32_t = 0) {
            e.asyncs.push_back({s, type, cookie});
        }
    };
    struct XrcPart {
        FakeEnv& e;
        void post_qp_async(Qp&, ibv_event_type type) { e.qp_events.push_back(type); }
    };
    SrqsPart srqs{*this};
    VerbsPart verbs{*this};
    DmaPart dma{*this};
    DonePart done{*this};
    XrcPart xrc{*this};
    fake::FakeTrace trace;  // what RecvPath traced
};

// A receive ring of `slots` entries of up to `max_sge` SGEs, in the library's layout.
struct Ring {
    uint32_t slots, max_sge, stride;
    std::vector<uint8_t> mem;
    Ring(uint32_t n, uint32_t sges)
        : slots(n),
          max_sge(sges),
          stride(uint32_t(abi::recv_stride(sges))),
          mem(abi::ring_bytes(n, stride) + abi::kCacheLine) {}
    abi::RingHeader* hdr() {
        // The header is cache-line aligned, as in the mapped memfd.
        uintptr_t p = reinterpret_cast<uintptr_t>(mem.data());
        return reinterpret_cast<abi::RingHeader*>((p + abi::kCacheLine - 1) &
                                                  ~(abi::kCacheLine - 1));
    }
    // Posts a receive (as ibv_post_recv): `num_sge` as written, whatever the SGEs hold.
    void post(uint64_t wr_id, std::vector<abi::Sge> sges, uint32_t num_sge = ~0u) {
        uint32_t prod = hdr()->prod.load();
        uint8_t* slot = abi::ring_slot(hdr(), stride, slots - 1, prod);
        abi::RecvWqe w{};
        w.wr_id = wr_id;
        w.num_sge = num_sge == ~0u ? uint32_t(sges.size()) : num_sge;
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, sges.data(),
                    sizeof(abi::Sge) * std::min<size_t>(sges.size(), max_sge));
        hdr()->prod.store(prod + 1);
    }
};

class RecvPathTest : public ::testing::Test {
protected:
    RecvPathTest() : rq(8, 2) {
        qp.owner = &session;
        qp.qpn = 0x21;
        qp.pd = 3;
        qp.recv_cq = 7;
        qp.attr.dest_qp_num = 0x99;
        qp.rq = rq.hdr();
        qp.rq_mask = rq.slots - 1;
        qp.rq_stride = rq.stride;
        qp.cap.max_recv_sge = rq.max_sge;
    }
    // A packet of `op` carrying `payload`.
    net::Packet packet(uint8_t op, const std::string& payload, uint32_t psn = 5) {
        net::Packet p{};
        p.bth.opcode = op;
        p.bth.psn = psn;
        p.payload = reinterpret_cast<const uint8_t*>(payload.data());
        p.payload_len = uint32_t(payload.size());
        return p;
    }
    Session session;
    Ring rq;
    Qp qp;
    FakeEnv env;
    RecvPath<FakeEnv> path{env};
};

TEST_F(RecvPathTest, TakesPostedReceivesInOrderAndConsumesThem) {
    EXPECT_FALSE(path.take(qp)) << "nothing posted";
    rq.post(11, {{0x1000, 100, 0x10}, {0x3000, 28, 0x11}});
    rq.post(12, {{0x5000, 64, 0x12}});
    ASSERT_TRUE(path.take(qp));
    EXPECT_TRUE(qp.have_rwr);
    EXPECT_TRUE(qp.rwr_ok);
    EXPECT_EQ(qp.rwr.wr_id, 11u);
    EXPECT_EQ(qp.rwr.num_sge, 2u);
    EXPECT_EQ(qp.rwr.sge[1].addr, 0x3000u);
    EXPECT_EQ(qp.rwr.length, 128u);
    EXPECT_EQ(qp.rwr_off, 0u);
    EXPECT_EQ(qp.rx_owner, &session);
    EXPECT_EQ(qp.rx_cq, 7u);
    EXPECT_EQ(rq.hdr()->cons.load(), 1u) << "the slot is the application's again";
    ASSERT_EQ(env.checked.size(), 1u);
    EXPECT_EQ(env.checked[0].first, &session);
    EXPECT_EQ(env.checked[0].second, 3u);
    ASSERT_TRUE(path.take(qp));
    EXPECT_EQ(qp.rwr.wr_id, 12u);
    EXPECT_EQ(rq.hdr()->cons.load(), 2u);
    EXPECT_FALSE(path.take(qp));
}

// The application's ring is not trusted: an SGE count above the QP's max_recv_sge takes the
// receive (it is consumed) but marks it bad, with no SGE copied; so does a key check failing.
TEST_F(RecvPathTest, BadSgeCountOrKeysMarkTheReceiveBad) {
    rq.post(21, {{0x1000, 16, 1}}, 200);
    ASSERT_TRUE(path.take(qp));
    EXPECT_FALSE(qp.rwr_ok);
    EXPECT_EQ(qp.rwr.num_sge, 0u);
    EXPECT_EQ(rq.hdr()->cons.load(), 1u);
    env.sges_ok = false;
    rq.post(22, {{0x1000, 16, 1}});
    ASSERT_TRUE(path.take(qp));
    EXPECT_FALSE(qp.rwr_ok);
    EXPECT_EQ(qp.rwr.wr_id, 22u);
}

// Payload lands at the receive's running offset, split across its SGEs, in the owner's
// memory, with the packet's QPN and PSN (for the deferred write's error accounting).
TEST_F(RecvPathTest, PlacesPayloadAcrossSgesAtTheRunningOffset) {
    rq.post(31, {{0x1000, 10, 1}, {0x2000, 20, 2}});
    ASSERT_TRUE(path.take(qp));
    std::string first = "0123456", second = "abcdefghijklm";
    path.place_payload(qp, packet(net::kRcSendFirst, first, 8), DmaWriteBatch::Path::kRcSend);
    path.place_payload(qp, packet(net::kRcSendLast, second, 9), DmaWriteBatch::Path::kRcSend);
    path.place_payload(qp, packet(net::kRcSendLast, "", 10), DmaWriteBatch::Path::kRcSend);
    EXPECT_EQ(qp.rwr_off, 20u);
    ASSERT_EQ(env.writes.size(), 2u) << "an empty payload writes nothing";
    EXPECT_EQ(env.writes[0].iov.size(), 1u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(env.writes[0].iov[0].iov_base), 0x1000u);
    EXPECT_EQ(env.writes[0].bytes, first);
    EXPECT_EQ(env.writes[0].psn, 8u);
    EXPECT_EQ(env.writes[0].qpn, 0x21u);
    ASSERT_EQ(env.writes[1].iov.size(), 2u) << "the second packet straddles the two SGEs";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(env.writes[1].iov[0].iov_base), 0x1007u);
    EXPECT_EQ(env.writes[1].iov[0].iov_len, 3u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(env.writes[1].iov[1].iov_base), 0x2000u);
    EXPECT_EQ(env.writes[1].iov[1].iov_len, 10u);
    EXPECT_EQ(env.writes[1].s, &session);
}

// The completion of each kind of message: its opcode, flags, immediate or invalidated key,
// the byte count placed, the QP numbers, and the solicited bit passed on.
TEST_F(RecvPathTest, CompletesEachKindOfMessage) {
    struct Case {
        uint8_t op;
        bool se;
        uint32_t opcode, wc_flags, imm;
    };
    const Case cases[] = {
        {net::kRcSendOnly, false, IBV_WC_RECV, 0, 0},
        {net::kRcSendOnlyImm, true, IBV_WC_RECV, IBV_WC_WITH_IMM, htobe32(0x01020304)},
        {net::kRcWriteOnlyImm, false, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_WITH_IMM,
         htobe32(0x01020304)},
        {net::kRcSendOnlyInv, false, IBV_WC_RECV, IBV_WC_WITH_INV, 0x4400},
    };
    uint64_t id = 40;
    for (const Case& c : cases) {
        rq.post(id, {{0x1000, 64, 1}});
        ASSERT_TRUE(path.take(qp));
        std::string data(12, 'x');
        net::Packet p = packet(c.op, data);
        p.bth.se = c.se;
        p.imm = 0x01020304;
        p.ieth = 0x4400;
        path.place_payload(qp, p, DmaWriteBatch::Path::kRcSend);
        path.complete(qp, p, IBV_WC_SUCCESS);
        EXPECT_FALSE(qp.have_rwr);
        ASSERT_EQ(env.cqes.size(), id - 39);
        const FakeEnv::Cqe& got = env.cqes.back();
        EXPECT_EQ(got.cq, 7u);
        EXPECT_EQ(got.solicited, c.se);
        EXPECT_EQ(got.c.wr_id, id);
        EXPECT_EQ(got.c.status, uint32_t(IBV_WC_SUCCESS));
        EXPECT_EQ(got.c.opcode, c.opcode) << net::op_info(c.op)->name;
        EXPECT_EQ(got.c.wc_flags, c.wc_flags) << net::op_info(c.op)->name;
        EXPECT_EQ(got.c.imm_data, c.imm) << net::op_info(c.op)->name;
        EXPECT_EQ(got.c.byte_len, 12u);
        EXPECT_EQ(got.c.qp_num, 0x21u);
        EXPECT_EQ(got.c.src_qp, 0x99u);
        ++id;
    }
    EXPECT_TRUE(env.trace.lines.empty()) << "successes are not traced";
}

// An error completion reports no bytes and no immediate, and is traced with its status.
TEST_F(RecvPathTest, ErrorCompletionHasNoBytesAndIsTraced) {
    rq.post(51, {{0x1000, 64, 1}});
    ASSERT_TRUE(path.take(qp));
    std::string data(30, 'y');
    net::Packet p = packet(net::kRcSendOnlyImm, data);
    path.place_payload(qp, p, DmaWriteBatch::Path::kRcSend);
    path.complete(qp, p, IBV_WC_LOC_PROT_ERR);
    ASSERT_EQ(env.cqes.size(), 1u);
    EXPECT_EQ(env.cqes[0].c.status, uint32_t(IBV_WC_LOC_PROT_ERR));
    EXPECT_EQ(env.cqes[0].c.byte_len, 0u);
    EXPECT_EQ(env.cqes[0].c.wc_flags, 0u);
    ASSERT_EQ(env.trace.lines.size(), 1u);
    EXPECT_NE(env.trace.lines[0].find("wr_id 0x33"), std::string::npos) << env.trace.lines[0];
    EXPECT_NE(env.trace.lines[0].find("LOC_PROT_ERR"), std::string::npos) << env.trace.lines[0];
}

// Through an SRQ: the receive is the SRQ's (its owner, its PD, and for XRC its CQ); the limit
// event fires once, when fewer than `limit` receives are left, and disarms.
TEST_F(RecvPathTest, SrqReceivesAndTheLimitEventOnce) {
    Session srq_owner;
    Ring sr(16, 1);
    Srq srq;
    srq.owner = &srq_owner;
    srq.pd = 9;
    srq.cq = 12;  // an XRC SRQ's own CQ
    srq.ring = sr.hdr();
    srq.mask = sr.slots - 1;
    srq.stride = sr.stride;
    srq.max_sge = sr.max_sge;
    srq.limit = 3;
    srq.cookie = 0xc00c1e;
    env.srq_table.push_back(&srq);
    qp.srq = 1;
    for (uint64_t i = 0; i < 5; ++i) sr.post(60 + i, {{0x1000 + i * 0x100, 32, 1}});
    ASSERT_TRUE(path.take(qp));  // 4 left
    EXPECT_EQ(qp.rwr.wr_id, 60u);
    EXPECT_EQ(qp.rx_owner, &srq_owner);
    EXPECT_EQ(qp.rx_cq, 12u);
    EXPECT_EQ(env.checked.back().second, 9u) << "the SRQ's PD";
    EXPECT_EQ(sr.hdr()->cons.load(), 1u);
    EXPECT_EQ(rq.hdr()->cons.load(), 0u) << "the QP's own queue untouched";
    EXPECT_TRUE(env.asyncs.empty());
    ASSERT_TRUE(path.take(qp));  // 3 left: not below the limit yet
    EXPECT_TRUE(env.asyncs.empty());
    ASSERT_TRUE(path.take(qp));  // 2 left
    ASSERT_EQ(env.asyncs.size(), 1u);
    EXPECT_EQ(env.asyncs[0].type, IBV_EVENT_SRQ_LIMIT_REACHED);
    EXPECT_EQ(env.asyncs[0].s, &srq_owner);
    EXPECT_EQ(env.asyncs[0].cookie, 0xc00c1eu);
    EXPECT_EQ(srq.limit, 0u) << "disarmed";
    ASSERT_TRUE(path.take(qp));
    EXPECT_EQ(env.asyncs.size(), 1u) << "once per arming";
}

// IBTA 11.6.3.1: the first packet in RTR raises IBV_EVENT_COMM_EST (the caller asks once).
TEST_F(RecvPathTest, CommEstablishedPostsTheEvent) {
    path.comm_established(qp);
    EXPECT_TRUE(qp.comm_est);
    ASSERT_EQ(env.qp_events.size(), 1u);
    EXPECT_EQ(env.qp_events[0], IBV_EVENT_COMM_EST);
}

}  // namespace
}  // namespace uroce::emu
