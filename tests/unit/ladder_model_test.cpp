// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The ladder's model on synthetic packets (emu/ladder/ladder_model.h): copies of one packet
// in two captures drawn once, a lost packet and its retransmission linked, bands adding up,
// bad ICRCs, a device talking to itself, the trace placed on the right device.
#include "emu/ladder/ladder_model.h"

#include <gtest/gtest.h>

#include "emu/ladder/ladder_svg.h"
#include "emu/ladder/ladder_trace.h"
#include "net/headers.h"
#include "net/opcodes.h"
#include "net/udp_sport.h"

using namespace uroce;
using namespace uroce::ladder;

namespace {

constexpr uint32_t kA = 0x7f000002, kB = 0x7f000003;
constexpr uint32_t kQpA = 0x11, kQpB = 0x12;
const uint16_t kPort = net::sport_for_path(0, kQpA, kQpB);

Sighting pkt(int64_t t, uint32_t src, uint32_t dst, uint32_t dqpn, uint8_t op, uint32_t psn,
             uint16_t file) {
    Sighting s;
    s.t_us = t;
    s.src = src;
    s.dst = dst;
    s.sport = kPort;
    s.dqpn = dqpn;
    s.opcode = op;
    s.psn = psn;
    s.file = file;
    s.len = 1040;
    s.payload_len = 1024;
    if (op == net::kRcAck) {
        s.has_aeth = true;
        s.len = 20;
        s.payload_len = 0;
    }
    return s;
}

// A -> B request seen by both captures (A's file 0, B's file 1), 3 us on the way.
void both(std::vector<Sighting>& v, int64_t t, uint8_t op, uint32_t psn) {
    v.push_back(pkt(t, kA, kB, kQpB, op, psn, 0));
    v.push_back(pkt(t + 3, kA, kB, kQpB, op, psn, 1));
}
// B -> A response seen by both.
void back(std::vector<Sighting>& v, int64_t t, uint8_t syn, uint32_t psn) {
    Sighting s = pkt(t, kB, kA, kQpA, net::kRcAck, psn, 1);
    s.syndrome = syn;
    v.push_back(s);
    s.file = 0;
    s.t_us += 3;
    v.push_back(s);
}

Ladder build(std::vector<Sighting> v, size_t files, Options opt = {}) {
    Ladder lad;
    build_packets(v, files, opt, &lad);
    build_rows(opt, &lad);
    return lad;
}

size_t drawn_packets(const Ladder& lad) {
    size_t n = 0;
    for (const Row& r : lad.rows)
        if (r.kind != RowKind::kEvent) n += r.count;
    return n;
}

}  // namespace

TEST(LadderModel, CopiesInTwoCapturesAreOnePacket) {
    std::vector<Sighting> v;
    both(v, 1000, net::kRcSendOnly, 5);
    both(v, 1010, net::kRcSendOnly, 6);
    back(v, 1020, net::aeth::ack(0x1f), 6);
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 3u);
    EXPECT_EQ(lad.sightings, 6u);
    ASSERT_EQ(lad.lanes.size(), 2u);  // the sender resolved through the port both ways use
    for (const Packet& p : lad.packets) {
        EXPECT_EQ(p.fate, Fate::kDelivered);
        EXPECT_EQ(p.retx_of, -1);
        EXPECT_GE(p.rx_t_us, p.s.t_us);
    }
    EXPECT_EQ(lad.lanes[lad.packets[0].from].qpn, kQpA);
    EXPECT_EQ(lad.lanes[lad.packets[0].to].qpn, kQpB);
    EXPECT_EQ(lad.packets[0].from, lad.packets[2].to);
    EXPECT_EQ(lad.rows.size(), 3u);
}

TEST(LadderModel, LostPacketEndsShortAndItsRetransmissionLinksToIt) {
    std::vector<Sighting> v;
    both(v, 1000, net::kRcSendOnly, 5);
    v.push_back(pkt(1010, kA, kB, kQpB, net::kRcSendOnly, 6, 0));  // lost: B never saw it
    both(v, 1020, net::kRcSendOnly, 7);
    back(v, 1030, net::aeth::nak(net::aeth::kNakPsnSeqError), 6);
    both(v, 1040, net::kRcSendOnly, 6);  // go-back-N
    both(v, 1050, net::kRcSendOnly, 7);
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 6u);
    EXPECT_EQ(lad.packets[1].fate, Fate::kLost);
    EXPECT_EQ(lad.packets[4].retx_of, 1);
    EXPECT_EQ(lad.packets[5].retx_of, 2);
    EXPECT_EQ(lad.packets[4].fate, Fate::kDelivered);
    EXPECT_EQ(lad.retransmissions, 2u);
    EXPECT_EQ(lad.short_arrows, 1u);
    // An ACK of the same PSN twice is no retransmission.
    EXPECT_EQ(lad.packets[3].retx_of, -1);
    std::string svg = render_svg(lad);
    EXPECT_NE(svg.find("id=\"p1\""), std::string::npos);
    EXPECT_NE(svg.find("data-orig=\"p1\""), std::string::npos);
    EXPECT_NE(svg.find("data-fate=\"lost\""), std::string::npos);
}

TEST(LadderModel, BadIcrcAtTheReceiverEndsShort) {
    std::vector<Sighting> v;
    v.push_back(pkt(1000, kA, kB, kQpB, net::kRcSendOnly, 5, 0));
    Sighting bad = pkt(1003, kA, kB, kQpB, net::kRcSendOnly, 5, 1);
    bad.icrc_ok = false;
    v.push_back(bad);
    back(v, 1020, net::aeth::ack(0), 4);
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 2u);
    EXPECT_EQ(lad.packets[0].fate, Fate::kBadIcrc);
    EXPECT_TRUE(lad.packets[0].s.icrc_ok);  // the sender's copy is what is drawn
}

TEST(LadderModel, LongRunsBecomeBandsThatAddUp) {
    std::vector<Sighting> v;
    uint32_t psn = 100;
    for (int k = 0; k < 40; ++k) {
        both(v, 1000 + k * 10, net::kRcWriteMiddle - (k % 3 == 0), psn++);
        if (k % 10 == 9) back(v, 1005 + k * 10, net::aeth::ack(0x1f), psn - 1);
    }
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 44u);
    EXPECT_EQ(drawn_packets(lad), 44u);
    // WRITE FIRST and MIDDLE are one kind; the ACKs in between (another lane pair) do not
    // break the run: one band of 40 and 4 ACK arrows.
    ASSERT_EQ(lad.rows.size(), 5u);
    EXPECT_EQ(lad.rows[0].kind, RowKind::kBand);
    EXPECT_EQ(lad.rows[0].count, 40u);
    EXPECT_EQ(lad.rows[0].bytes, 40u * 1040);
    EXPECT_EQ(lad.packets[lad.rows[0].last].s.psn, 139u);
    // A retransmission in the middle splits the band.
    v.clear();
    for (uint32_t k = 0; k < 20; ++k) both(v, 1000 + k * 10, net::kRcWriteMiddle, k);
    both(v, 1500, net::kRcWriteMiddle, 7);
    for (uint32_t k = 20; k < 30; ++k) both(v, 1600 + k * 10, net::kRcWriteMiddle, k);
    lad = build(v, 2);
    ASSERT_EQ(lad.rows.size(), 3u);
    EXPECT_EQ(lad.rows[0].count, 20u);
    EXPECT_EQ(lad.rows[1].kind, RowKind::kArrow);
    EXPECT_EQ(lad.packets[lad.rows[1].first].retx_of, 7);
    EXPECT_EQ(lad.rows[2].count, 10u);
    EXPECT_EQ(drawn_packets(lad), 31u);
}

TEST(LadderModel, RowLimitCountsWhatIsNotDrawn) {
    std::vector<Sighting> v;
    for (uint32_t k = 0; k < 50; ++k) {
        both(v, 1000 + k * 20, net::kRcSendOnly, k);
        back(v, 1010 + k * 20, net::aeth::ack(0), k);
    }
    Options opt;
    opt.min_band = 1000;
    opt.max_rows = 30;
    Ladder lad = build(v, 2, opt);
    EXPECT_EQ(lad.rows.size(), 30u);
    EXPECT_EQ(lad.packets_not_drawn, 70u);
}

TEST(LadderModel, DeviceTalkingToItself) {
    std::vector<Sighting> v;
    for (uint32_t k = 0; k < 3; ++k) {
        v.push_back(pkt(1000 + k * 100, kA, kA, kQpB, net::kRcSendOnly, k, 0));
        v.push_back(pkt(1002 + k * 100, kA, kA, kQpB, net::kRcSendOnly, k, 0));
    }
    // psn 3 sent and not received (lost at the receiver), sent again after a timeout.
    v.push_back(pkt(2000, kA, kA, kQpB, net::kRcSendOnly, 3, 0));
    v.push_back(pkt(200000, kA, kA, kQpB, net::kRcSendOnly, 3, 0));
    v.push_back(pkt(200003, kA, kA, kQpB, net::kRcSendOnly, 3, 0));
    Ladder lad = build(v, 1);
    ASSERT_EQ(lad.packets.size(), 5u);
    EXPECT_EQ(lad.packets[3].fate, Fate::kLost);
    EXPECT_EQ(lad.packets[4].retx_of, 3);
    EXPECT_EQ(lad.packets[4].rx_t_us, 200003);
}

TEST(LadderModel, CaptureOwnerFromWhichCopyComesFirst) {
    // Both captures hold only A <-> B traffic; B's capture is given first.
    std::vector<Sighting> v;
    both(v, 1000, net::kRcSendOnly, 5);
    back(v, 1020, net::aeth::ack(0), 5);
    for (Sighting& s : v) s.file ^= 1;
    v.push_back(pkt(1100, kA, kB, kQpB, net::kRcSendOnly, 6, 1));  // lost on the way to B
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 3u);
    EXPECT_EQ(lad.packets[2].fate, Fate::kLost);
}

TEST(LadderModel, CmMadsOnTheCmLanes) {
    std::vector<Sighting> v;
    Sighting req = pkt(1000, kA, kB, 1, net::kUdSendOnly, 0, 0);
    req.src_qpn = 1;
    req.mad_attr = 0x10;
    v.push_back(req);
    req.file = 1;
    req.t_us += 5;
    v.push_back(req);
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 1u);
    EXPECT_EQ(packet_name(lad.packets[0].s), "CM REQ");
    EXPECT_EQ(lane_name(lad, lad.lanes[lad.packets[0].from]), "127.0.0.2 CM");
    EXPECT_EQ(lane_name(lad, lad.lanes[lad.packets[0].to]), "127.0.0.3 CM");
}

TEST(LadderModel, TraceGoesOnTheLanesOfTheDeviceWhosePsnsTheyAre) {
    // Both devices have a QP 0x11 (numbers are per device): the PSNs tell them apart.
    std::vector<Sighting> v;
    Sighting a =
        pkt(86400ll * 1000000 * 20000 + 3600ll * 1000000, kA, kB, 0x11, net::kRcSendOnly, 0xabc, 0);
    a.sport = net::sport_for_path(0, 0x11, 0x11);
    v.push_back(a);
    Sighting b = a;
    b.src = kB;
    b.dst = kA;
    b.psn = 0x123;
    v.push_back(b);
    Ladder lad;
    build_packets(v, 1, Options{}, &lad);
    TraceStats st;
    apply_trace_lines({"00:59:59.000000 dev1 pid 7 create_qp qp 0x11 type RC pd 1",
                       "00:59:59.500000 dev1 pid 7 modify_qp qp 0x11 INIT -> RTR mask 0x1 "
                       "dest_qp 0x11 rq_psn 0xabc mtu 1024",
                       "00:59:59.600000 dev0 pid 9 modify_qp qp 0x11 RTR -> RTS mask 0x1 "
                       "sq_psn 0xabc timeout 14",
                       "01:00:00.000100 dev1 qp 0x11 RTS -> ERR (outstanding work requests "
                       "complete with WR_FLUSH_ERR)"},
                      &lad, &st);
    ASSERT_EQ(st.devices.size(), 2u);
    EXPECT_EQ(st.devices[0], "dev0=127.0.0.2");
    EXPECT_EQ(st.devices[1], "dev1=127.0.0.3");
    uint32_t lane_b = lad.packets[0].to;
    EXPECT_EQ(lad.lanes[lane_b].pid, 7);
    ASSERT_EQ(st.events, 4u);  // create, RTR, RTS, ERR
    build_rows(Options{}, &lad);
    const LaneEvent* err = nullptr;
    for (const LaneEvent& e : lad.events)
        if (e.error) err = &e;
    ASSERT_NE(err, nullptr);
    EXPECT_EQ(err->lane, lane_b);
    EXPECT_EQ(err->t_us - lad.t_first_us, 100);
}

TEST(LadderModel, RepeatedIdenticalAcksMatchFirstComeFirstServed) {
    // A responder answers each duplicate request with the same ACK: three identical copies
    // leave B, the first lost, two arrive. Two delivered, one lost, none a duplicate.
    std::vector<Sighting> v;
    for (int k = 0; k < 3; ++k) {
        Sighting s = pkt(1000 + k, kB, kA, kQpA, net::kRcAck, 9, 1);
        v.push_back(s);
    }
    for (int k = 0; k < 2; ++k) v.push_back(pkt(1060 + k, kB, kA, kQpA, net::kRcAck, 9, 0));
    both(v, 900, net::kRcSendOnly, 9);
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.packets.size(), 4u);
    size_t lost = 0;
    for (const Packet& p : lad.packets) {
        EXPECT_FALSE(p.duplicate);
        EXPECT_EQ(p.retx_of, -1);
        lost += p.fate == Fate::kLost;
    }
    EXPECT_EQ(lost, 1u);
}

TEST(LadderModel, BandsEndAtEachTimeSlice) {
    // 30 WRITEs over 300 ms: with 100 ms slices, three bands of 10; without, one of 30.
    std::vector<Sighting> v;
    for (uint32_t k = 0; k < 30; ++k) both(v, 1000 + k * 10000, net::kRcWriteMiddle, k);
    Ladder lad = build(v, 2);
    ASSERT_EQ(lad.rows.size(), 3u);
    for (const Row& r : lad.rows) EXPECT_EQ(r.count, 10u);
    Options whole;
    whole.slice_us = 0;
    lad = build(v, 2, whole);
    ASSERT_EQ(lad.rows.size(), 1u);
    EXPECT_EQ(lad.rows[0].count, 30u);
}

TEST(LadderModel, QpAndTimeFiltersKeepTheirPackets) {
    std::vector<Sighting> v;
    for (uint32_t k = 0; k < 10; ++k) {
        both(v, 1000 + k * 100, net::kRcSendOnly, k);  // to QP 0x12
        Sighting other = pkt(1050 + k * 100, kA, kB, 0x30, net::kUcSendOnly, k, 0);
        v.push_back(other);  // to QP 0x30, B's capture does not hold it
    }
    Options qp;
    qp.qpns = {0x30};
    qp.min_band = 100;
    Ladder lad = build(v, 2, qp);
    ASSERT_EQ(lad.rows.size(), 10u);
    for (const Row& r : lad.rows) EXPECT_EQ(lad.lanes[lad.packets[r.first].to].qpn, 0x30u);
    Options t;
    t.t0_us = 200;
    t.t1_us = 399;
    t.min_band = 100;
    lad = build(v, 2, t);
    ASSERT_EQ(lad.rows.size(), 4u);  // sent at +200, +250, +300, +350
    EXPECT_EQ(lad.packets[lad.rows[0].first].s.t_us, 1200);
    EXPECT_EQ(lad.packets[lad.rows[3].first].s.t_us, 1350);
}
