// net/: opcode table, BTH/extension-header codec, PSN arithmetic, ICRC and the pcap tap.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "net/crc32.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/opcodes.h"
#include "net/pcap_tap.h"

using namespace uroce::net;

namespace {

std::vector<uint8_t> all_opcodes() {
    std::vector<uint8_t> v;
    for (int op = 0; op < 256; ++op)
        if (op_info(static_cast<uint8_t>(op))) v.push_back(static_cast<uint8_t>(op));
    return v;
}

// A packet with every field set to a distinct, full-width value.
Packet full_packet(uint8_t opcode, uint32_t seed) {
    Packet p{};
    p.bth = Bth{opcode,
                true,
                true,
                0,
                0,
                uint16_t(0x8000 | seed),
                true,
                true,
                (0xabcd00 + seed) & kQpnMask,
                true,
                (0xfffff0 + seed) & kPsnMask};
    p.reth = Reth{0x0123456789abcdefull + seed, 0xdeadbeef ^ seed, 0x80000000u + seed};
    p.aeth = Aeth{uint8_t(0x60 | (seed & 0x1f)), (0x654321 + seed) & kPsnMask};
    p.deth = Deth{0x80010000u + seed, (0x123456 + seed) & kQpnMask};
    p.xrc = Xrceth{(0xfedcba + seed) & kQpnMask};
    p.atomic = AtomicEth{0x1111222233334444ull + seed, 0x55667788u + seed,
                         0x99aabbccddeeff00ull + seed, 0x0fedcba987654321ull + seed};
    p.atomic_ack = AtomicAckEth{0xa5a5a5a55a5a5a5aull + seed};
    p.imm = 0xc0ffee00u + seed;
    p.ieth = 0x12345678u + seed;
    return p;
}

// Headers + payload + pad + room for the ICRC, as a UDP payload.
std::vector<uint8_t> build(const Packet& p, uint32_t payload_len, uint8_t fill = 0x5a) {
    const OpInfo* op = op_info(p.bth.opcode);
    std::vector<uint8_t> b(op->hdr_len + payload_len + p.bth.pad + kIcrcLen, 0);
    EXPECT_EQ(encode_headers(p, b.data()), op->hdr_len);
    for (uint32_t i = 0; i < payload_len; ++i) b[op->hdr_len + i] = uint8_t(fill + i);
    return b;
}

void expect_same_fields(const Packet& want, const Packet& got) {
    const OpInfo* op = op_info(want.bth.opcode);
    ASSERT_NE(op, nullptr);
    SCOPED_TRACE(op->name);
    EXPECT_EQ(got.bth.opcode, want.bth.opcode);
    EXPECT_EQ(got.bth.se, want.bth.se);
    EXPECT_EQ(got.bth.mig, want.bth.mig);
    EXPECT_EQ(got.bth.pad, want.bth.pad);
    EXPECT_EQ(got.bth.tver, want.bth.tver);
    EXPECT_EQ(got.bth.pkey, want.bth.pkey);
    EXPECT_EQ(got.bth.fecn, want.bth.fecn);
    EXPECT_EQ(got.bth.becn, want.bth.becn);
    EXPECT_EQ(got.bth.dqpn, want.bth.dqpn);
    EXPECT_EQ(got.bth.ackreq, want.bth.ackreq);
    EXPECT_EQ(got.bth.psn, want.bth.psn);
    const uint32_t h = op->hdrs;
    // Present headers round-trip; absent ones decode as zero.
    auto pick = [](bool present, auto v) { return present ? v : decltype(v){}; };
    EXPECT_EQ(got.reth.va, pick(h & kRETH, want.reth.va));
    EXPECT_EQ(got.reth.rkey, pick(h & kRETH, want.reth.rkey));
    EXPECT_EQ(got.reth.dma_len, pick(h & kRETH, want.reth.dma_len));
    EXPECT_EQ(got.aeth.syndrome, pick(h & kAETH, want.aeth.syndrome));
    EXPECT_EQ(got.aeth.msn, pick(h & kAETH, want.aeth.msn));
    EXPECT_EQ(got.deth.qkey, pick(h & kDETH, want.deth.qkey));
    EXPECT_EQ(got.deth.src_qpn, pick(h & kDETH, want.deth.src_qpn));
    EXPECT_EQ(got.xrc.srqn, pick(h & kXRCETH, want.xrc.srqn));
    EXPECT_EQ(got.atomic.va, pick(h & kAtomicETH, want.atomic.va));
    EXPECT_EQ(got.atomic.rkey, pick(h & kAtomicETH, want.atomic.rkey));
    EXPECT_EQ(got.atomic.swap_add, pick(h & kAtomicETH, want.atomic.swap_add));
    EXPECT_EQ(got.atomic.compare, pick(h & kAtomicETH, want.atomic.compare));
    EXPECT_EQ(got.atomic_ack.orig, pick(h & kAtomicAckETH, want.atomic_ack.orig));
    EXPECT_EQ(got.imm, pick(h & kImmDt, want.imm));
    EXPECT_EQ(got.ieth, pick(h & kIETH, want.ieth));
}

uint32_t ip(const char* s) { return inet_addr(s); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Opcode table

TEST(NetOpcodes, TableIsConsistent) {
    const auto ops = all_opcodes();
    EXPECT_EQ(ops.size(), 24u + 12u + 2u + 1u + 23u);  // RC, UC, UD, CNP, XRC
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

// ---------------------------------------------------------------------------------------------
// CRC-32 and ICRC

TEST(NetIcrc, Crc32MatchesReference) {
    const char* check = "123456789";
    EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(check), 9), 0xcbf43926u);  // CRC-32 check
    // Slice-by-8 against a bitwise reference, all lengths and alignments around the 8-byte step.
    std::vector<uint8_t> data(200);
    std::mt19937 rng(1);
    for (auto& x : data) x = uint8_t(rng());
    auto slow = [](const uint8_t* p, size_t n) {
        uint32_t c = ~0u;
        while (n--) {
            c ^= *p++;
            for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
        }
        return ~c;
    };
    for (size_t off = 0; off < 8; ++off)
        for (size_t n = 0; n < 80; ++n)
            ASSERT_EQ(crc32(data.data() + off, n), slow(data.data() + off, n)) << off << " " << n;
    // Piecewise updates compose.
    uint32_t s = crc32_update(~0u, data.data(), 13);
    s = crc32_update(s, data.data() + 13, 100);
    EXPECT_EQ(~s, crc32(data.data(), 113));
}

// The carry-less multiplication path (when this CPU has it) gives the table path's result bit
// for bit: every length from 0 to 600 (the fold-by-4 loop, the 16-byte loop and every tail),
// 16 alignments, random and edge-case states, and whole packets up to 4 KiB + headers.
TEST(NetIcrc, Crc32AcceleratedMatchesTables) {
    if (!crc32_accelerated()) GTEST_SKIP() << "no PCLMULQDQ on this CPU: only the tables run";
    std::vector<uint8_t> data(4096 + 64 + 16);
    std::mt19937 rng(7);
    for (auto& x : data) x = uint8_t(rng());
    const uint32_t states[] = {0, ~0u, 0xdebb20e3u, 0x80000001u};
    for (size_t off = 0; off < 16; ++off)
        for (size_t n = 0; n <= 600; ++n) {
            uint32_t st = n % 5 == 4 ? uint32_t(rng()) : states[n % 4];
            ASSERT_EQ(crc32_update(st, data.data() + off, n),
                      crc32_update_tables(st, data.data() + off, n))
                << "offset " << off << " length " << n << " state " << st;
        }
    for (size_t n : {1024u, 1024u + 28u, 2048u + 40u, 4096u, 4096u + 28u, 4096u + 64u})
        for (size_t off : {0u, 3u, 13u}) {
            uint32_t st = uint32_t(rng());
            ASSERT_EQ(crc32_update(st, data.data() + off, n),
                      crc32_update_tables(st, data.data() + off, n))
                << "offset " << off << " length " << n;
        }
    // All-ones and all-zero buffers (no cancellation hides in the fold constants).
    std::vector<uint8_t> ones(1000, 0xff), zeros(1000, 0);
    EXPECT_EQ(crc32_update(~0u, ones.data(), ones.size()),
              crc32_update_tables(~0u, ones.data(), ones.size()));
    EXPECT_EQ(crc32_update(~0u, zeros.data(), zeros.size()),
              crc32_update_tables(~0u, zeros.data(), zeros.size()));
}

// Known vectors, obtained once with scapy 2.5.0 (contrib/roce.py) and hard-coded:
//   p = IP(src="192.168.1.10", dst="192.168.1.20", id=0, flags="DF", ttl=64, tos=0) /
//       UDP(sport=49152, dport=4791, chksum=0) /
//       BTH(opcode=0x04, migreq=1, pkey=0xffff, dqpn=0x11, ackreq=1, psn=0x123456) /
//       Raw(bytes(range(16)))
//   bytes(p)[-4:].hex() == "70b3c3ae"
// and
//   IP(src="10.0.0.1", dst="10.0.0.2", id=0, flags="DF", ttl=64) /
//   UDP(sport=50000, dport=4791, chksum=0) /
//   BTH(opcode=0x0a, padcount=1, pkey=0xffff, dqpn=0xabcdef, psn=0xffffff) /
//   Raw(RETH(va=0x00007f0012345678, rkey=0xcafebabe, len=3) + b"abc" + pad)
//   -> ICRC bytes "7f4e1f81"
TEST(NetIcrc, KnownVectorsFromScapy) {
    {
        Packet p{};
        p.bth.opcode = kRcSendOnly;
        p.bth.mig = true;
        p.bth.pkey = 0xffff;
        p.bth.dqpn = 0x11;
        p.bth.ackreq = true;
        p.bth.psn = 0x123456;
        std::vector<uint8_t> b(12 + 16 + 4);
        encode_headers(p, b.data());
        for (int i = 0; i < 16; ++i) b[12 + i] = uint8_t(i);
        const uint32_t s = ip("192.168.1.10"), d = ip("192.168.1.20");
        icrc_store(s, d, 49152, kRoceUdpPort, b.data(), b.size());
        const uint8_t want[4] = {0x70, 0xb3, 0xc3, 0xae};
        EXPECT_EQ(0, std::memcmp(b.data() + 28, want, 4));
        EXPECT_EQ(icrc_compute(s, d, 49152, kRoceUdpPort, b.data(), b.size()), 0xaec3b370u);
        EXPECT_EQ(icrc_load(b.data() + 28), 0xaec3b370u);
        EXPECT_TRUE(icrc_check(s, d, 49152, kRoceUdpPort, b.data(), b.size()));
        // The complete UDP payload as scapy built it.
        const uint8_t wire[] = {0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x12, 0x34,
                                0x56, 0,    1,    2,    3,    4,    5,    6,    7,    8,    9,
                                10,   11,   12,   13,   14,   15,   0x70, 0xb3, 0xc3, 0xae};
        ASSERT_EQ(b.size(), sizeof wire);
        EXPECT_EQ(0, std::memcmp(b.data(), wire, sizeof wire));
    }
    {
        Packet p{};
        p.bth.opcode = kRcWriteOnly;
        p.bth.pad = 1;
        p.bth.pkey = 0xffff;
        p.bth.dqpn = 0xabcdef;
        p.bth.psn = 0xffffff;
        p.reth = Reth{0x00007f0012345678ull, 0xcafebabe, 3};
        std::vector<uint8_t> b(28 + 3 + 1 + 4, 0);
        encode_headers(p, b.data());
        std::memcpy(b.data() + 28, "abc", 3);
        icrc_store(ip("10.0.0.1"), ip("10.0.0.2"), 50000, kRoceUdpPort, b.data(), b.size());
        const uint8_t want[4] = {0x7f, 0x4e, 0x1f, 0x81};
        EXPECT_EQ(0, std::memcmp(b.data() + 32, want, 4));
    }
}

// Build an IPv4 datagram the way PcapTap frames it, for the *_ipv4 entry points.
static std::vector<uint8_t> ipv4_datagram(uint32_t s, uint32_t d, uint16_t sp, uint16_t dp,
                                          const std::vector<uint8_t>& udp_payload) {
    std::vector<uint8_t> v(28 + udp_payload.size());
    v[0] = 0x45;
    const size_t tot = v.size();
    v[2] = uint8_t(tot >> 8);
    v[3] = uint8_t(tot);
    v[6] = 0x40;
    v[8] = 64;
    v[9] = 17;
    std::memcpy(&v[12], &s, 4);
    std::memcpy(&v[16], &d, 4);
    v[20] = uint8_t(sp >> 8);
    v[21] = uint8_t(sp);
    v[22] = uint8_t(dp >> 8);
    v[23] = uint8_t(dp);
    v[24] = uint8_t((tot - 20) >> 8);
    v[25] = uint8_t(tot - 20);
    std::memcpy(&v[28], udp_payload.data(), udp_payload.size());
    return v;
}

TEST(NetIcrc, CoversInvariantFieldsOnly) {
    const uint32_t s = ip("10.1.2.3"), d = ip("10.4.5.6");
    Packet p = full_packet(kXrcWriteOnlyImm, 3);
    p.bth.pad = pad_for(21);
    auto b = build(p, 21);
    icrc_store(s, d, 51000, kRoceUdpPort, b.data(), b.size());
    const uint32_t base = icrc_compute(s, d, 51000, kRoceUdpPort, b.data(), b.size());
    ASSERT_TRUE(icrc_check(s, d, 51000, kRoceUdpPort, b.data(), b.size()));

    // Every bit of every covered byte matters, except BTH byte 4 (FECN, BECN, resv6), which
    // switches may rewrite. The ICRC bytes themselves are not covered.
    for (size_t i = 0; i + kIcrcLen < b.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            b[i] ^= uint8_t(1 << bit);
            const uint32_t c = icrc_compute(s, d, 51000, kRoceUdpPort, b.data(), b.size());
            if (i == 4) {
                EXPECT_EQ(c, base) << "BTH byte 4 bit " << bit;
            } else {
                EXPECT_NE(c, base) << "byte " << i << " bit " << bit;
            }
            b[i] ^= uint8_t(1 << bit);
        }
    }
    for (size_t i = b.size() - kIcrcLen; i < b.size(); ++i) {
        b[i] ^= 0xff;
        EXPECT_EQ(icrc_compute(s, d, 51000, kRoceUdpPort, b.data(), b.size()), base);
        EXPECT_FALSE(icrc_check(s, d, 51000, kRoceUdpPort, b.data(), b.size()));
        b[i] ^= 0xff;
    }
    // Addresses, ports and length are covered.
    EXPECT_NE(icrc_compute(ip("10.1.2.4"), d, 51000, kRoceUdpPort, b.data(), b.size()), base);
    EXPECT_NE(icrc_compute(s, ip("10.4.5.7"), 51000, kRoceUdpPort, b.data(), b.size()), base);
    EXPECT_NE(icrc_compute(s, d, 51001, kRoceUdpPort, b.data(), b.size()), base);
    EXPECT_NE(icrc_compute(s, d, 51000, 4792, b.data(), b.size()), base);

    // On the full IPv4 datagram: ToS, TTL, IP checksum, UDP checksum are masked; ID, flags,
    // protocol-level fields are not.
    auto dg = ipv4_datagram(s, d, 51000, kRoceUdpPort, b);
    uint32_t c = 0;
    ASSERT_TRUE(icrc_compute_ipv4(dg.data(), dg.size(), &c));
    EXPECT_EQ(c, base);
    EXPECT_TRUE(icrc_check_ipv4(dg.data(), dg.size()));
    for (size_t masked : {1, 8, 10, 11, 26, 27, 28 + 4}) {  // ToS TTL csum csum udpcsum BTH[4]
        auto m = dg;
        m[masked] ^= 0xa5;
        ASSERT_TRUE(icrc_compute_ipv4(m.data(), m.size(), &c));
        EXPECT_EQ(c, base) << masked;
    }
    for (size_t covered : {0, 4, 5, 6, 7, 12, 19, 20, 23, 28, 28 + 5}) {
        auto m = dg;
        m[covered] ^= 0x01;
        if (icrc_compute_ipv4(m.data(), m.size(), &c)) {
            EXPECT_NE(c, base) << covered;
        }
    }
}

TEST(NetIcrc, RejectsShortOrInconsistentInput) {
    uint8_t b[16] = {};
    EXPECT_EQ(icrc_compute(1, 2, 3, 4, b, 15), 0u);
    EXPECT_FALSE(icrc_check(1, 2, 3, 4, b, 15));
    EXPECT_FALSE(icrc_check(1, 2, 3, 4, nullptr, 16));
    icrc_store(1, 2, 3, 4, b, 15);  // no-op, no crash
    std::vector<uint8_t> payload(16, 0);
    auto dg = ipv4_datagram(1, 2, 3, 4, payload);
    uint32_t c;
    EXPECT_TRUE(icrc_compute_ipv4(dg.data(), dg.size(), &c));
    EXPECT_FALSE(icrc_compute_ipv4(dg.data(), dg.size() - 1, &c));  // total length > buffer
    dg[9] = 6;                                                      // not UDP
    EXPECT_FALSE(icrc_compute_ipv4(dg.data(), dg.size(), &c));
}

// ---------------------------------------------------------------------------------------------
// Pcap tap

namespace {

std::string run(const std::string& cmd) {
    std::string out;
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
    return out;
}

bool have(const char* tool) {
    return run(std::string("command -v ") + tool + " 2>/dev/null") != "";
}

std::string tmp_path(const char* tag) {
    return "/tmp/uroce_net_test_" + std::to_string(getpid()) + "_" + tag + ".pcap";
}

struct TestPacket {
    std::vector<uint8_t> bytes;
    uint16_t sport;
};

// One packet per opcode in `ops`, each with a valid ICRC.
std::vector<TestPacket> make_packets(const std::vector<uint8_t>& ops, uint32_t s, uint32_t d,
                                     uint32_t plen = 40) {
    std::vector<TestPacket> v;
    uint32_t seed = 0;
    for (uint8_t opc : ops) {
        Packet p = full_packet(opc, ++seed);
        p.aeth.syndrome = aeth::ack(5);
        const uint32_t n = (op_info(opc)->flags & kPayload) ? plen + seed % 4 : 0;
        p.bth.pad = (op_info(opc)->flags & kPayload) ? pad_for(n) : 0;
        TestPacket t{build(p, n), uint16_t(49152 + seed)};
        icrc_store(s, d, t.sport, kRoceUdpPort, t.bytes.data(), t.bytes.size());
        v.push_back(std::move(t));
    }
    return v;
}

}  // namespace

TEST(NetPcapTap, FramesAreValidAndIcrcVerifies) {
    const std::string path = tmp_path("frames");
    const uint32_t s = ip("127.0.0.2"), d = ip("127.0.0.3");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    EXPECT_TRUE(tap.is_open());
    auto pk = make_packets(all_opcodes(), s, d);
    for (size_t i = 0; i < pk.size(); ++i)
        tap.record(s, pk[i].sport, d, kRoceUdpPort, pk[i].bytes.data(), pk[i].bytes.size(),
                   timeval{1700000000, long(i)});
    EXPECT_EQ(tap.packets(), pk.size());
    tap.close();
    EXPECT_FALSE(tap.is_open());

    char eb[PCAP_ERRBUF_SIZE];
    pcap_t* rd = pcap_open_offline(path.c_str(), eb);
    ASSERT_NE(rd, nullptr) << eb;
    EXPECT_EQ(pcap_datalink(rd), DLT_EN10MB);
    pcap_pkthdr* h;
    const u_char* f;
    size_t i = 0;
    while (pcap_next_ex(rd, &h, &f) == 1) {
        ASSERT_LT(i, pk.size());
        const auto& b = pk[i].bytes;
        ASSERT_EQ(h->caplen, 42 + b.size());
        EXPECT_EQ(h->ts.tv_usec, long(i));
        const uint8_t mac_d[6] = {0x02, 0x00, 127, 0, 0, 3}, mac_s[6] = {0x02, 0x00, 127, 0, 0, 2};
        EXPECT_EQ(0, std::memcmp(f, mac_d, 6));
        EXPECT_EQ(0, std::memcmp(f + 6, mac_s, 6));
        EXPECT_EQ(f[12], 0x08);
        EXPECT_EQ(f[13], 0x00);
        // IPv4 header checksum verifies (sums to 0xffff).
        uint32_t sum = 0;
        for (int k = 0; k < 20; k += 2) sum += uint32_t(f[14 + k]) << 8 | f[15 + k];
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        EXPECT_EQ(sum, 0xffffu);
        EXPECT_EQ(0, std::memcmp(f + 42, b.data(), b.size()));
        EXPECT_TRUE(icrc_check_ipv4(f + 14, h->caplen - 14)) << i;
        ++i;
    }
    EXPECT_EQ(i, pk.size());
    pcap_close(rd);
    std::filesystem::remove(path);
}

TEST(NetPcapTap, TsharkDissectsRoce) {
    if (!have("tshark")) GTEST_SKIP() << "tshark not installed";
    const std::string path = tmp_path("tshark");
    const uint32_t s = ip("10.0.0.1"), d = ip("10.0.0.2");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    auto pk = make_packets({kRcSendOnly, kRcWriteOnlyImm, kRcAck}, s, d);
    for (auto& t : pk)
        tap.record(s, t.sport, d, kRoceUdpPort, t.bytes.data(), t.bytes.size(), timeval{1, 0});
    tap.close();

    // Wireshark 4.x dissects UDP port 4791 as RoCEv2 ("RRoCE") by default; no -d needed.
    const std::string fields =
        run("tshark -r " + path +
            " -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn "
            "2>/dev/null");
    char want[256];
    std::snprintf(want, sizeof want, "4\t0x%06x\t%u\n11\t0x%06x\t%u\n17\t0x%06x\t%u\n",
                  full_packet(0, 1).bth.dqpn, full_packet(0, 1).bth.psn, full_packet(0, 2).bth.dqpn,
                  full_packet(0, 2).bth.psn, full_packet(0, 3).bth.dqpn, full_packet(0, 3).bth.psn);
    EXPECT_EQ(fields, want);
    const std::string verbose = run("tshark -r " + path + " -V 2>/dev/null");
    EXPECT_NE(verbose.find("RDMA WRITE Only with Immediate"), std::string::npos);
    EXPECT_NE(verbose.find("Invariant CRC"), std::string::npos);
    EXPECT_EQ(verbose.find("Malformed"), std::string::npos) << verbose;
    std::filesystem::remove(path);
}

TEST(NetPcapTap, TsharkHasNoMalformedForAnyOpcode) {
    if (!have("tshark")) GTEST_SKIP() << "tshark not installed";
    const std::string path = tmp_path("allops");
    const uint32_t s = ip("10.0.0.1"), d = ip("10.0.0.2");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    auto pk = make_packets(all_opcodes(), s, d);
    for (auto& t : pk)
        tap.record(s, t.sport, d, kRoceUdpPort, t.bytes.data(), t.bytes.size(), timeval{1, 0});
    tap.close();
    // Wireshark 4.0 does not name CNP or XRC opcodes ("Unknown"), but nothing may be malformed.
    const std::string out = run("tshark -r " + path + " -V 2>/dev/null");
    EXPECT_EQ(out.find("Malformed"), std::string::npos);
    EXPECT_EQ(run("tshark -r " + path + " 2>/dev/null | wc -l"), std::to_string(pk.size()) + "\n");
    std::filesystem::remove(path);
}

TEST(NetPcapTap, IcrcAgreesWithScapy) {
    // Cross-check against an independent implementation: tests/unit/icrc_scapy_check.py.
    const std::filesystem::path script =
        std::filesystem::path(__FILE__).parent_path() / "icrc_scapy_check.py";
    if (!std::filesystem::exists(script) || !std::filesystem::exists("/usr/bin/python3") ||
        run("/usr/bin/python3 -c 'import scapy.contrib.roce' 2>&1 && echo ok") != "ok\n")
        GTEST_SKIP() << "python3-scapy not available";
    const std::string path = tmp_path("scapy");
    const uint32_t s = ip("192.168.7.1"), d = ip("192.168.7.2");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    for (uint32_t plen : {0u, 1u, 255u, 4096u}) {
        auto pk = make_packets(all_opcodes(), s, d, plen);
        for (auto& t : pk)
            tap.record(s, t.sport, d, kRoceUdpPort, t.bytes.data(), t.bytes.size(), timeval{});
    }
    const uint64_t n = tap.packets();
    tap.close();
    const std::string out =
        run("/usr/bin/python3 " + script.string() + " " + path + " 2>&1; echo rc=$?");
    EXPECT_NE(out.find("checked " + std::to_string(n) + " packets, 0 mismatches"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
    std::filesystem::remove(path);
}

TEST(NetPcapTap, RotatesAtMaxBytes) {
    const std::string path = tmp_path("rotate");
    const uint32_t s = ip("10.0.0.1"), d = ip("10.0.0.2");
    std::filesystem::remove(path + ".1");
    PcapTap tap;
    std::string err;
    const uint64_t max = 2000;
    ASSERT_TRUE(tap.open(path, max, &err)) << err;
    auto pk = make_packets({kRcSendOnly}, s, d, 200);  // ~ 16 + 42 + 200 + 16 bytes a record
    for (int i = 0; i < 50; ++i) {
        tap.record(s, pk[0].sport, d, kRoceUdpPort, pk[0].bytes.data(), pk[0].bytes.size(),
                   timeval{i, 0});
        ASSERT_LE(std::filesystem::file_size(path), max);
    }
    EXPECT_EQ(tap.packets(), 50u);
    tap.close();
    ASSERT_TRUE(std::filesystem::exists(path + ".1"));
    EXPECT_LE(std::filesystem::file_size(path + ".1"), max);
    // Both files are complete captures; the newest packets are in the current one.
    char eb[PCAP_ERRBUF_SIZE];
    for (const std::string& p : {path, path + ".1"}) {
        pcap_t* rd = pcap_open_offline(p.c_str(), eb);
        ASSERT_NE(rd, nullptr) << eb;
        pcap_pkthdr* h;
        const u_char* f;
        int n = 0;
        long last = -1;
        while (pcap_next_ex(rd, &h, &f) == 1) {
            ++n;
            last = h->ts.tv_sec;
        }
        EXPECT_GT(n, 0);
        if (p == path) {
            EXPECT_EQ(last, 49);
        }
        pcap_close(rd);
    }
    std::filesystem::remove(path);
    std::filesystem::remove(path + ".1");
}

TEST(NetPcapTap, OpenFailureReportsError) {
    PcapTap tap;
    std::string err;
    EXPECT_FALSE(tap.open("/nonexistent-dir/x.pcap", 0, &err));
    EXPECT_FALSE(err.empty());
    EXPECT_FALSE(tap.is_open());
    const uint8_t b[16] = {};
    tap.record(1, 2, 3, 4, b, sizeof b, timeval{});  // ignored while closed
    EXPECT_EQ(tap.packets(), 0u);
}

TEST(NetPcapTap, OversizePayloadIsTruncatedNotOverflowed) {
    const std::string path = tmp_path("big");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    std::vector<uint8_t> big(9000, 0xab);
    tap.record(1, 2, 3, 4, big.data(), big.size(), timeval{});
    tap.close();
    char eb[PCAP_ERRBUF_SIZE];
    pcap_t* rd = pcap_open_offline(path.c_str(), eb);
    ASSERT_NE(rd, nullptr) << eb;
    pcap_pkthdr* h;
    const u_char* f;
    ASSERT_EQ(pcap_next_ex(rd, &h, &f), 1);
    EXPECT_EQ(h->caplen, PcapTap::kMaxFrame);
    EXPECT_EQ(h->len, 42 + big.size());
    pcap_close(rd);
    std::filesystem::remove(path);
}
