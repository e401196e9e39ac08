// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// net/: the opcode table, the BTH/extension-header codec and PSN arithmetic.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "net/headers.h"
#include "net/opcodes.h"
#include "net/pcap_tap.h"
#include "net_test_packets.h"

using namespace uroce::net;

// ---------------------------------------------------------------------------------------------
// Opcode table

TEST(NetOpcodes, TableIsConsistent) {
    const auto ops = all_opcodes();
    EXPECT_EQ(ops.size(), 25u + 12u + 2u + 1u + 23u);  // RC, UC, UD, CNP, XRC
    for (uint8_t opc : ops) {
        const OpInfo* o = op_info(opc);
        SCOPED_TRACE(o->name);
        unsigned len = 12;
        if (o->hdrs & kRETH) len += 16;
        if (o->hdrs & kAETH) len += 4;
        if (o->hdrs & kDETH) len += 8;
        if (o->hdrs & kXRCETH) len += 4;
        if (o->hdrs & kAtomicETH) len += 28;
        if (o->hdrs & kAtomicAckETH) len += 8;
        if (o->hdrs & kImmDt) len += 4;
        if (o->hdrs & kIETH) len += 4;
        if (o->hdrs & kFETH) len += 4;
        if (o->flags & kCnp) len += 16;
        EXPECT_EQ(o->hdr_len, len);
        EXPECT_LE(o->hdr_len, kMaxHdrLen);
        if (o->flags & kOnly) {
            EXPECT_EQ(o->flags & (kFirst | kLast), kFirst | kLast);
        }
        EXPECT_EQ(bool(o->flags & kImmOp), bool(o->hdrs & kImmDt));
        EXPECT_EQ(bool(o->flags & kInvOp), bool(o->hdrs & kIETH));
        EXPECT_NE(bool(o->flags & kRequest), bool(o->flags & (kResponse | kCnp)));
        // Every XRC request carries an XRCETH; nothing else does.
        EXPECT_EQ(bool(o->hdrs & kXRCETH), o->cls == QpClass::XRC && (o->flags & kRequest));
        const QpClass by_bits[] = {QpClass::RC, QpClass::UC,  QpClass::RD,
                                   QpClass::UD, QpClass::CNP, QpClass::XRC};
        EXPECT_EQ(o->cls, by_bits[opc >> 5]);
    }
    EXPECT_STREQ(op_info(kRcSendFirst)->name, "RC_SEND_FIRST");
    EXPECT_EQ(kRcSendOnlyInv, 0x17);
    // IBTA 1.5 (the kernel's IB_OPCODE_RC_ATOMIC_WRITE): BTH, RETH, 8 bytes of payload.
    EXPECT_EQ(kRcAtomicWrite, 0x1d);
    EXPECT_STREQ(op_info(kRcAtomicWrite)->name, "RC_ATOMIC_WRITE");
    EXPECT_EQ(op_info(kRcAtomicWrite)->hdrs, uint32_t(kRETH));
    EXPECT_TRUE(op_info(kRcAtomicWrite)->flags & kPayload);
    EXPECT_EQ(op_info(op_on(kTransportXrc, kRcAtomicWrite)), nullptr) << "RC only, as rxe";
    // IBTA 1.5 (the kernel's IB_OPCODE_RC_FLUSH): BTH, FETH, RETH, no payload.
    EXPECT_EQ(kRcFlush, 0x1c);
    EXPECT_STREQ(op_info(kRcFlush)->name, "RC_FLUSH");
    EXPECT_EQ(op_info(kRcFlush)->hdrs, uint32_t(kFETH | kRETH));
    EXPECT_EQ(op_info(kRcFlush)->hdr_len, 32u);
    EXPECT_FALSE(op_info(kRcFlush)->flags & kPayload);
    EXPECT_TRUE(op_info(kRcFlush)->flags & kFlushOp);
    EXPECT_EQ(op_info(op_on(kTransportXrc, kRcFlush)), nullptr) << "RC only, as rxe";
    EXPECT_EQ(kUcSendFirst, 0x20);
    EXPECT_EQ(kUdSendOnly, 0x64);
    EXPECT_EQ(kUdSendOnlyImm, 0x65);
    EXPECT_EQ(kCnpOpcode, 0x81);
    EXPECT_EQ(kXrcSendFirst, 0xa0);
    EXPECT_EQ(kXrcSendOnlyInv, 0xb7);
    EXPECT_EQ(op_on(kTransportXrc, kRcFetchAdd), kXrcFetchAdd);
    for (uint8_t undef :
         {0x15, 0x18, 0x1f, 0x2c, 0x40, 0x55, 0x60, 0x63, 0x66, 0x80, 0x82, 0xb5, 0xc0, 0xff}) {
        EXPECT_EQ(op_info(undef), nullptr) << int(undef);
    }
}

// ---------------------------------------------------------------------------------------------
// Codec

TEST(NetCodec, RoundTripEveryOpcode) {
    uint32_t seed = 0;
    for (uint8_t opc : all_opcodes()) {
        const OpInfo* op = op_info(opc);
        for (uint32_t plen : {0u, 1u, 7u, 64u}) {
            if (!(op->flags & kPayload) && plen) continue;
            Packet want = full_packet(opc, ++seed);
            want.bth.pad = (op->flags & kPayload) ? pad_for(plen) : 0;
            auto buf = build(want, plen);
            Packet got;
            ASSERT_EQ(decode(buf.data(), buf.size(), got), DropReason::kNone) << op->name;
            expect_same_fields(want, got);
            EXPECT_EQ(got.payload, buf.data() + op->hdr_len);
            EXPECT_EQ(got.payload_len, plen);
            for (uint32_t i = 0; i < plen; ++i) ASSERT_EQ(got.payload[i], uint8_t(0x5a + i));
        }
    }
}

TEST(NetCodec, WireLayoutOfKnownHeaders) {
    // RC RDMA WRITE ONLY with immediate, checked byte by byte against IBTA's layout.
    Packet p{};
    p.bth = Bth{kRcWriteOnlyImm, true, false, 2, 0, 0xffff, false, true, 0x000102, true, 0x0a0b0c};
    p.reth = Reth{0x1122334455667788ull, 0x99aabbcc, 0x00001000};
    p.imm = 0xdeadbeef;
    uint8_t out[kMaxHdrLen];
    ASSERT_EQ(encode_headers(p, out), 32u);
    const uint8_t want[32] = {0x0b, 0xa0, 0xff, 0xff, 0x40, 0x00, 0x01, 0x02,  // BTH
                              0x80, 0x0a, 0x0b, 0x0c,                          //
                              0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // RETH va
                              0x99, 0xaa, 0xbb, 0xcc, 0x00, 0x00, 0x10, 0x00,  // rkey, len
                              0xde, 0xad, 0xbe, 0xef};                         // ImmDt
    EXPECT_EQ(0, std::memcmp(out, want, sizeof want));

    // RC FLUSH: the FETH (placement type bits 3..0, selectivity level bits 5..4, as rxe's
    // rxe_feth) before the RETH.
    Packet f{};
    f.bth.opcode = kRcFlush;
    f.feth = Feth{feth::kFlushGlobal | feth::kFlushPersistent, feth::kFlushMr};
    f.reth = Reth{0x1122334455667788ull, 0x99aabbcc, 0x00000040};
    ASSERT_EQ(encode_headers(f, out), 32u);
    const uint8_t flush[20] = {0x00, 0x00, 0x00, 0x13,                          // FETH
                               0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // RETH va
                               0x99, 0xaa, 0xbb, 0xcc, 0x00, 0x00, 0x00, 0x40};
    EXPECT_EQ(0, std::memcmp(out + 12, flush, sizeof flush));
    // Reserved FETH bits are written as 0 and not read back.
    f.feth = Feth{0xff, 0xff};
    encode_headers(f, out);
    EXPECT_EQ(0, std::memcmp(out + 12, "\x00\x00\x00\x3f", 4));
    out[12] = 0xff;
    out[13] = 0xff;
    out[14] = 0xff;
    out[15] = 0xd6;  // reserved bits 31..6 set; level 1, type 6
    std::vector<uint8_t> wire(out, out + 32);
    wire.resize(32 + kIcrcLen);
    Packet g;
    ASSERT_EQ(decode(wire.data(), wire.size(), g), DropReason::kNone);
    EXPECT_EQ(g.feth.placement, 6u);
    EXPECT_EQ(g.feth.selectivity, 1u);
    // No payload: bytes between the headers and the ICRC are a bad length.
    wire.insert(wire.begin() + 32, 4, 0);
    EXPECT_EQ(decode(wire.data(), wire.size(), g), DropReason::kBadLength);

    // UD SEND ONLY: DETH has a reserved byte before the source QPN.
    Packet u{};
    u.bth.opcode = kUdSendOnly;
    u.deth = Deth{0x11111111, 0xffffff};
    ASSERT_EQ(encode_headers(u, out), 20u);
    const uint8_t deth[8] = {0x11, 0x11, 0x11, 0x11, 0x00, 0xff, 0xff, 0xff};
    EXPECT_EQ(0, std::memcmp(out + 12, deth, 8));

    // XRC: XRCETH (reserved byte + SRQN) precedes the RETH.
    Packet x{};
    x.bth.opcode = kXrcWriteFirst;
    x.xrc.srqn = 0x123456;
    x.reth.va = 1;
    ASSERT_EQ(encode_headers(x, out), 32u);
    const uint8_t xrc[5] = {0x00, 0x12, 0x34, 0x56, 0x00};
    EXPECT_EQ(0, std::memcmp(out + 12, xrc, 5));
    EXPECT_EQ(out[12 + 4 + 7], 1);

    // Atomic ACK: AETH then AtomicAckETH.
    Packet a{};
    a.bth.opcode = kRcAtomicAck;
    a.aeth = Aeth{aeth::ack(aeth::kCreditInvalid), 0xabcdef};
    a.atomic_ack.orig = 0x0102030405060708ull;
    ASSERT_EQ(encode_headers(a, out), 24u);
    const uint8_t ack[12] = {0x1f, 0xab, 0xcd, 0xef, 1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_EQ(0, std::memcmp(out + 12, ack, 12));
}

TEST(NetCodec, BthBoundaryValues) {
    for (uint32_t psn : {0u, 1u, 0x7fffffu, 0x800000u, 0xfffffeu, 0xffffffu}) {
        for (uint16_t pkey : {uint16_t(0), uint16_t(0x7fff), kDefaultPkey}) {
            Packet p{};
            p.bth.opcode = kRcAck;
            p.bth.psn = psn;
            p.bth.dqpn = kQpnMask - psn;
            p.bth.pkey = pkey;
            p.aeth.msn = psn;
            auto buf = build(p, 0);
            Packet got;
            ASSERT_EQ(decode(buf.data(), buf.size(), got), DropReason::kNone);
            EXPECT_EQ(got.bth.psn, psn);
            EXPECT_EQ(got.bth.dqpn, kQpnMask - psn);
            EXPECT_EQ(got.bth.pkey, pkey);
            EXPECT_EQ(got.aeth.msn, psn);
        }
    }
    // Out-of-range values are truncated to their wire width, not spilled into neighbours.
    Packet p{};
    p.bth.opcode = kUdSendOnly;
    p.bth.psn = 0x1000001;
    p.bth.dqpn = 0xff000002;
    p.deth.src_qpn = 0xff000003;
    auto buf = build(p, 0);
    EXPECT_EQ(buf[8], 0);   // ackreq + reserved untouched by the PSN overflow
    EXPECT_EQ(buf[4], 0);   // FECN/BECN/resv6 untouched by the QPN overflow
    EXPECT_EQ(buf[16], 0);  // DETH reserved byte
    Packet got;
    ASSERT_EQ(decode(buf.data(), buf.size(), got), DropReason::kNone);
    EXPECT_EQ(got.bth.psn, 1u);
    EXPECT_EQ(got.bth.dqpn, 2u);
    EXPECT_EQ(got.deth.src_qpn, 3u);
}

TEST(NetCodec, PadCounts) {
    for (uint32_t len = 0; len < 16; ++len) EXPECT_EQ((len + pad_for(len)) % 4, 0u) << len;
    EXPECT_EQ(pad_for(0), 0);
    EXPECT_EQ(pad_for(1), 3);
    EXPECT_EQ(pad_for(2), 2);
    EXPECT_EQ(pad_for(3), 1);
    for (uint32_t len = 0; len < 8; ++len) {
        Packet p = full_packet(kRcSendOnly, len);
        p.bth.pad = pad_for(len);
        auto buf = build(p, len);
        Packet got;
        ASSERT_EQ(decode(buf.data(), buf.size(), got), DropReason::kNone);
        EXPECT_EQ(got.bth.pad, pad_for(len));
        EXPECT_EQ(got.payload_len, len);
    }
}

TEST(NetCodec, MaxPayloadForEveryMtu) {
    for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
        for (uint8_t opc : {kRcSendOnly, kRcWriteOnlyImm, kRcReadRespMiddle, kUcWriteFirst,
                            kUdSendOnlyImm, kXrcWriteOnlyImm, kXrcSendLastInv}) {
            Packet p = full_packet(opc, mtu);
            auto buf = build(p, mtu, 0x11);
            Packet got;
            ASSERT_EQ(decode(buf.data(), buf.size(), got), DropReason::kNone);
            expect_same_fields(p, got);
            EXPECT_EQ(got.payload_len, mtu);
            EXPECT_EQ(got.payload + got.payload_len + kIcrcLen, buf.data() + buf.size());
            EXPECT_LE(buf.size(), PcapTap::kMaxFrame - 14 - 20 - 8);
        }
    }
}

TEST(NetCodec, DecodeRejects) {
    Packet got;
    std::vector<uint8_t> b(64, 0);
    EXPECT_EQ(decode(nullptr, 64, got), DropReason::kTooShort);
    for (size_t len : {0, 1, 11, 12, 15}) {
        b.assign(len, 0);
        EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kTooShort) << len;
    }

    // Unknown opcodes: reserved RC, RD (not supported), reserved UD, vendor range.
    for (uint8_t opc : {0x15, 0x40, 0x60, 0xc0, 0xff}) {
        b.assign(16, 0);
        b[0] = opc;
        EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kUnknownOpcode) << int(opc);
    }

    // Bad transport version.
    Packet p{};
    p.bth.opcode = kRcSendOnly;
    p.bth.tver = 1;
    b = build(p, 4);
    EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kBadVersion);

    // Payload on a non-payload opcode: ACK, read request, atomic, atomic ACK, CNP.
    for (uint8_t opc : {kRcAck, kRcReadReq, kRcCmpSwap, kRcAtomicAck, kXrcReadReq, kCnpOpcode}) {
        Packet q{};
        q.bth.opcode = opc;
        b = build(q, 0);
        EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kNone) << int(opc);
        b.insert(b.begin() + op_info(opc)->hdr_len, 4, 0xee);
        EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kBadLength) << int(opc);
        // A pad count on a packet that can't have payload is just as wrong.
        b = build(q, 0);
        b[1] |= 0x10;
        EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kBadPad) << int(opc);
    }

    // Pad larger than what follows the headers.
    Packet s{};
    s.bth.opcode = kRcSendOnly;
    s.bth.pad = 3;
    b = build(s, 0);  // 0 payload bytes but 3 pad bytes: fine
    EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kNone);
    EXPECT_EQ(got.payload_len, 0u);
    b.erase(b.begin() + 12);  // now only 2 bytes for 3 pad bytes
    EXPECT_EQ(decode(b.data(), b.size(), got), DropReason::kBadPad);

    // Truncated extension headers: every length from a bare BTH + ICRC up to one short of the
    // full header set.
    for (uint8_t opc : all_opcodes()) {
        const OpInfo* op = op_info(opc);
        Packet q = full_packet(opc, 1);
        auto full = build(q, 0);
        for (size_t len = kBthLen + kIcrcLen; len < op->hdr_len + kIcrcLen; ++len) {
            std::vector<uint8_t> t(full.begin(), full.begin() + len);
            EXPECT_EQ(decode(t.data(), t.size(), got), DropReason::kTooShort) << op->name << len;
        }
    }
}

TEST(NetCodec, DecodeSurvivesGarbage) {
    // Exact-size heap buffers so that ASan flags any read past len.
    std::mt19937 rng(12345);
    const auto ops = all_opcodes();
    int accepted = 0;
    for (int i = 0; i < 200000; ++i) {
        const size_t len = rng() % 96;
        std::unique_ptr<uint8_t[]> buf(new uint8_t[len ? len : 1]);
        for (size_t j = 0; j < len; ++j) buf[j] = uint8_t(rng());
        if (len && (i & 1)) buf[0] = ops[rng() % ops.size()];
        if (len > 1 && (i & 2)) buf[1] &= 0xf0;  // tver 0 so the deeper checks run
        Packet got;
        const DropReason r = decode(buf.get(), len, got);
        ASSERT_LT(r, DropReason::kCount);
        if (r == DropReason::kNone) {
            ++accepted;
            const OpInfo* op = op_info(got.bth.opcode);
            ASSERT_NE(op, nullptr);
            ASSERT_EQ(got.payload, buf.get() + op->hdr_len);
            ASSERT_EQ(op->hdr_len + got.payload_len + got.bth.pad + kIcrcLen, len);
        }
    }
    EXPECT_GT(accepted, 1000);
}

TEST(NetCodec, DropReasonNames) {
    EXPECT_STREQ(drop_reason_name(DropReason::kNone), "none");
    EXPECT_STREQ(drop_reason_name(DropReason::kBadIcrc), "bad_icrc");
    EXPECT_STREQ(drop_reason_name(DropReason::kOpNotForQp), "op_not_for_qp");
    EXPECT_STREQ(drop_reason_name(DropReason::kCount), "unknown");
    for (int i = 0; i < int(DropReason::kCount); ++i)
        EXPECT_NE(drop_reason_name(DropReason(i)), nullptr);
}

TEST(NetCodec, AethSyndromes) {
    EXPECT_EQ(aeth::ack(0x1f), 0x1f);
    EXPECT_EQ(aeth::type(aeth::rnr_nak(12)), aeth::kRnrNak);
    EXPECT_EQ(aeth::value(aeth::rnr_nak(12)), 12);
    EXPECT_EQ(aeth::nak(aeth::kNakRemoteAccessError), 0x62);
}

// ---------------------------------------------------------------------------------------------
// PSN arithmetic

TEST(NetPsn, AddAndDiffAcrossWrap) {
    EXPECT_EQ(psn_add(0xffffff, 1), 0u);
    EXPECT_EQ(psn_add(0xfffffe, 5), 3u);
    EXPECT_EQ(psn_add(5, 0xffffff), 4u);  // adding 2^24 - 1 is subtracting 1
    EXPECT_EQ(psn_diff(0, 0xffffff), 1);
    EXPECT_EQ(psn_diff(0xffffff, 0), -1);
    EXPECT_EQ(psn_diff(3, 0xfffffe), 5);
    EXPECT_EQ(psn_diff(0xfffffe, 3), -5);
    EXPECT_EQ(psn_diff(0x7fffff, 0), 0x7fffff);
    EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);  // the half-window point counts as behind
    EXPECT_EQ(psn_diff(0, 0x800000), -0x800000);
    EXPECT_EQ(psn_diff(0x1000005, 5), 0);  // inputs beyond 24 bits are taken modulo 2^24
    EXPECT_TRUE(psn_lt(0xffffff, 0));
    EXPECT_FALSE(psn_lt(0, 0xffffff));
    EXPECT_TRUE(psn_le(7, 7));
    EXPECT_FALSE(psn_lt(7, 7));
    EXPECT_TRUE(psn_le(0xfffff0, 0x10));
    EXPECT_TRUE(psn_gt(0x10, 0xfffff0));
    std::mt19937 rng(7);
    for (int i = 0; i < 100000; ++i) {
        const uint32_t a = rng() & kPsnMask;
        const int32_t n = int32_t(rng() % 0x1000000) - 0x800000;
        const uint32_t b = psn_add(a, uint32_t(n));
        ASSERT_EQ(psn_diff(b, a), n);
    }
}
