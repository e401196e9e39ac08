// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// net/icrc_id.h, IcrcIdSolver and icrc_check_any_id: the receiver recovers any IPv4 ID (DF set,
// or clear when asked) from a packet's ICRC in constant time, and still rejects corruptions.
// Packets are made with the real IPv4 header (random ID, flags, TOS, TTL) and their ICRC
// computed over it by icrc_compute_ipv4, the path that does not know about IDs; fixed seeds
// make every run check the same packets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "net/byteorder.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/icrc_id.h"

using namespace uroce::net;

namespace {

uint32_t ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    const uint8_t v[4] = {a, b, c, d};
    uint32_t r;
    std::memcpy(&r, v, 4);
    return r;
}

struct Datagram {
    std::vector<uint8_t> bytes;  // IPv4 header (20) + UDP header (8) + BTH ... ICRC
    uint32_t src = 0, dst = 0;
    uint16_t sport = 0, dport = 0;
    uint16_t id = 0;
    bool df = true;

    uint8_t* udp_payload() { return bytes.data() + 28; }
    size_t udp_len() const { return bytes.size() - 28; }
};

// A datagram with a random payload of udp_len bytes (its first byte a valid-looking opcode: the
// ICRC does not care), the header fields as given and the rest random, the ICRC right for it.
Datagram make(std::mt19937& rng, size_t udp_len, uint16_t id, bool df) {
    Datagram g;
    g.src = uint32_t(rng());
    g.dst = uint32_t(rng());
    g.sport = uint16_t(0xc000 | (rng() & 0x3fff));  // as rxe chooses them
    g.dport = kRoceUdpPort;
    g.id = id;
    g.df = df;
    g.bytes.resize(28 + udp_len);
    uint8_t* h = g.bytes.data();
    h[0] = 0x45;
    h[1] = uint8_t(rng());  // TOS, TTL, checksums: masked, any value
    store_be16(h + 2, uint16_t(g.bytes.size()));
    store_be16(h + 4, id);
    store_be16(h + 6, df ? 0x4000 : 0);
    h[8] = uint8_t(rng());
    h[9] = 17;
    store_be16(h + 10, uint16_t(rng()));
    std::memcpy(h + 12, &g.src, 4);
    std::memcpy(h + 16, &g.dst, 4);
    store_be16(h + 20, g.sport);
    store_be16(h + 22, g.dport);
    store_be16(h + 24, uint16_t(8 + udp_len));
    store_be16(h + 26, uint16_t(rng()));
    for (size_t i = 28; i < g.bytes.size(); ++i) g.bytes[i] = uint8_t(rng());
    uint32_t c = 0;
    EXPECT_TRUE(icrc_compute_ipv4(g.bytes.data(), g.bytes.size(), &c));
    icrc_put(g.bytes.data() + g.bytes.size() - kIcrcLen, c);
    return g;
}

struct Checked {
    IcrcWay way;
    uint16_t id = 0xdead;
    bool df = false;
};

Checked check(Datagram& g, bool nodf, const IcrcIdSolver& s, uint16_t hint = 0) {
    static IcrcIdDelta d;
    Checked r{};
    r.way = icrc_check_any_id(g.src, g.dst, g.sport, g.dport, g.udp_payload(), g.udp_len(), hint,
                              nodf, d, s, &r.id, &r.df);
    return r;
}

const IcrcIdSolver& solver() {
    static const IcrcIdSolver s;  // 256 KiB of constants, made once for the whole test
    return s;
}

const size_t kLens[] = {16, 17, 20, 28, 60, 1040, 1044, 4124, 4136, 9000};

}  // namespace

// Random IDs with DF: the solver finds exactly the ID the header had; ID 0 is the fast path.
TEST(NetIcrcSolver, RecoversRandomIdsWithDf) {
    std::mt19937 rng(26);
    for (size_t len : kLens) {
        for (int i = 0; i < 200; ++i) {
            const uint16_t id = i == 0 ? 0 : i == 1 ? 0xffff : uint16_t(rng());
            Datagram g = make(rng, len, id, true);
            const Checked c = check(g, false, solver());
            ASSERT_EQ(c.way, id == 0 ? IcrcWay::kId0 : IcrcWay::kSolved) << len << " " << id;
            EXPECT_EQ(c.id, id);
            EXPECT_TRUE(c.df);
        }
    }
}

// DF clear: found (with df false) only when asked for; otherwise rejected.
TEST(NetIcrcSolver, DfClearOnlyWhenAsked) {
    std::mt19937 rng(27);
    for (size_t len : kLens) {
        for (int i = 0; i < 100; ++i) {
            const uint16_t id = uint16_t(rng());
            Datagram g = make(rng, len, id, false);
            const Checked yes = check(g, true, solver());
            ASSERT_EQ(yes.way, IcrcWay::kSolvedNoDf) << len << " " << id;
            EXPECT_EQ(yes.id, id);
            EXPECT_FALSE(yes.df);
            EXPECT_EQ(check(g, false, solver()).way, IcrcWay::kBad) << len << " " << id;
            // And a DF packet is still found as DF when DF clear is allowed.
            Datagram f = make(rng, len, id, true);
            const Checked df = check(f, true, solver());
            EXPECT_EQ(df.way, id ? IcrcWay::kSolved : IcrcWay::kId0);
            EXPECT_EQ(df.id, id);
            EXPECT_TRUE(df.df);
        }
    }
}

// The GRO hint (uroce's own train index) is tried before the solver and gives the same answer.
TEST(NetIcrcSolver, HintIsTheFastPathForOwnTrains) {
    std::mt19937 rng(28);
    for (uint16_t k = 1; k < 128; ++k) {
        Datagram g = make(rng, 1040, k, true);
        const Checked hinted = check(g, false, solver(), k);
        EXPECT_EQ(hinted.way, IcrcWay::kHint);
        EXPECT_EQ(hinted.id, k);
        const Checked wrong = check(g, false, solver(), uint16_t(k + 1));
        EXPECT_EQ(wrong.way, IcrcWay::kSolved);
        EXPECT_EQ(wrong.id, k);
    }
}

// Every single-bit error in the UDP payload (BTH, payload, the ICRC itself) and in the covered
// fields the receiver rebuilds from the socket (addresses, ports) is rejected with DF required:
// for packets below about 26 KB no single flipped bit leaves q of the solvable form (x^-j mod P
// has a non-zero low half for every j up to 214134), so the 2^-16 residue only concerns errors
// of several bits. With DF clear allowed too, a flip j bits after the ID that makes q ^ kDfQ
// solvable passes as a DF-clear packet: j = 1564 and 14855 below 26 KB (a flip of DF itself,
// j = 7, is not a corruption but the other header). Those few are counted, and only those.
TEST(NetIcrcSolver, RejectsEverySingleBitError) {
    std::mt19937 rng(29);
    size_t nodf_passed = 0, tried = 0;
    for (size_t len : kLens) {
        Datagram g = make(rng, len, uint16_t(rng()), true);
        ASSERT_EQ(check(g, false, solver()).way, IcrcWay::kSolved);
        const size_t bits = 8 * g.udp_len();
        // All bits of the shorter packets; a fixed sample of the 9000-byte one.
        const size_t step = len > 4200 ? 7 : 1;
        for (size_t b = 0; b < bits; b += step) {
            g.udp_payload()[b / 8] ^= uint8_t(1u << (b % 8));
            const bool masked = b / 8 == 4;  // BTH byte 4: FECN/BECN, masked to 1s
            const IcrcWay w = check(g, false, solver()).way;
            const IcrcWay w_nodf = check(g, true, solver()).way;
            if (masked) {
                EXPECT_EQ(w, IcrcWay::kSolved) << len << " bit " << b;
            } else {
                ++tried;
                ASSERT_EQ(w, IcrcWay::kBad) << len << " bit " << b;
                if (w_nodf != IcrcWay::kBad) {
                    EXPECT_EQ(w_nodf, IcrcWay::kSolvedNoDf) << len << " bit " << b;
                    ++nodf_passed;
                }
            }
            g.udp_payload()[b / 8] ^= uint8_t(1u << (b % 8));
        }
        // Addresses and ports, as the socket reports them.
        for (int b = 0; b < 32; ++b) {
            uint32_t s = g.src;
            g.src ^= 1u << b;
            EXPECT_EQ(check(g, false, solver()).way, IcrcWay::kBad) << len << " src bit " << b;
            g.src = s;
            s = g.dst;
            g.dst ^= 1u << b;
            EXPECT_EQ(check(g, false, solver()).way, IcrcWay::kBad) << len << " dst bit " << b;
            g.dst = s;
        }
        for (int b = 0; b < 16; ++b) {
            g.sport ^= uint16_t(1u << b);
            EXPECT_EQ(check(g, false, solver()).way, IcrcWay::kBad) << len << " sport bit " << b;
            g.sport ^= uint16_t(1u << b);
        }
    }
    RecordProperty("single_bit_errors_tried", std::to_string(tried));
    RecordProperty("passed_as_df_clear", std::to_string(nodf_passed));
    // At most the two positions per packet (all packets here are below 26 KB).
    EXPECT_LE(nodf_passed, 2 * std::size(kLens));
}

// Random multi-byte corruption: what passes is what the 16 consistency bits allow, about 1 in
// 65,536 per try (1 in 32,768 with DF clear allowed). 2^20 tries on short packets, counted:
// the expected 16 (32) with a wide margin, and none would be a broken check (it accepts all or
// most).
TEST(NetIcrcSolver, RandomCorruptionPassesAboutOneIn65536) {
    std::mt19937 rng(30);
    Datagram g = make(rng, 60, 0x718c, true);
    const std::vector<uint8_t> orig = g.bytes;
    constexpr int kTries = 1 << 20;
    int passed_df = 0, passed_any = 0;
    for (int t = 0; t < kTries; ++t) {
        // Four random bytes of the BTH ... payload XORed with random non-zero values.
        for (int k = 0; k < 4; ++k) {
            size_t at;
            do at = rng() % (g.udp_len() - kIcrcLen);
            while (at == 4);
            g.udp_payload()[at] ^= uint8_t(1 + rng() % 255);
        }
        passed_df += check(g, false, solver()).way != IcrcWay::kBad;
        passed_any += check(g, true, solver()).way != IcrcWay::kBad;
        std::memcpy(g.bytes.data(), orig.data(), orig.size());
    }
    RecordProperty("passed_df", passed_df);
    RecordProperty("passed_df_or_not", passed_any);
    EXPECT_GE(passed_df, 2);
    EXPECT_LE(passed_df, 48);
    EXPECT_GE(passed_any, passed_df);
    EXPECT_LE(passed_any, 80);
}

// The solver refuses what it has no constant for, and the per-length constants agree with
// IcrcIdDelta (the sender's path) at every length: delta(len, id) solves back to id.
TEST(NetIcrcSolver, AgreesWithTheSenderAtEveryLength) {
    IcrcIdSolver::Solution s;
    EXPECT_FALSE(solver().solve(15, 0, true, &s));
    EXPECT_FALSE(solver().solve(IcrcIdSolver::kMaxUdpLen + 1, 0, true, &s));
    IcrcIdDelta d;
    std::mt19937 rng(31);
    for (size_t len = 16; len <= IcrcIdSolver::kMaxUdpLen; ++len) {
        const uint16_t id = uint16_t(rng());
        ASSERT_TRUE(solver().solve(len, d.delta(len, id), false, &s)) << len;
        ASSERT_EQ(s.id, id) << len;
        ASSERT_TRUE(s.df);
    }
}

// Constant time: a solve is one table read and a 32-step product, the same for a 16-byte and a
// 64 KiB packet, no pass over the packet and no search. Bound loose enough for sanitizer builds
// and a busy machine (the release build measures about 100 ns on a busy 2-core host).
TEST(NetIcrcSolver, SolveCostsTheSameAtEveryLength) {
    constexpr int kSolves = 200000;
    IcrcIdSolver::Solution out;
    auto ns_per_solve = [&](size_t len) {
        uint32_t ok = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (uint32_t i = 0; i < kSolves; ++i)
            ok += solver().solve(len, i * 2654435761u, true, &out);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        volatile uint32_t sink = ok;
        (void)sink;
        return ns / kSolves;
    };
    const auto short_ns = ns_per_solve(16), long_ns = ns_per_solve(65000);
    RecordProperty("ns_per_solve_16", std::to_string(short_ns));
    RecordProperty("ns_per_solve_65000", std::to_string(long_ns));
    EXPECT_LT(short_ns, 5000);
    EXPECT_LT(long_ns, 5000);
}

// Golden datagrams kept in tests/data/golden/NAME: '#' lines are comments; with per_line each
// other line is one datagram, otherwise all of them together are one.
std::vector<Datagram> golden(const std::string& name, bool per_line) {
    std::ifstream f(std::string(UROCE_SOURCE_DIR) + "/tests/data/golden/" + name);
    EXPECT_TRUE(f) << "tests/data/golden/" << name;
    std::vector<std::string> hexes(1);
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        for (char ch : line)
            if (ch != ' ') hexes.back() += ch;
        if (per_line) hexes.emplace_back();
    }
    std::vector<Datagram> out;
    for (const std::string& hex : hexes) {
        if (hex.empty()) continue;
        Datagram g;
        for (size_t i = 0; i + 1 < hex.size(); i += 2)
            g.bytes.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
        EXPECT_GE(g.bytes.size(), 28u + 16u);
        std::memcpy(&g.src, &g.bytes[12], 4);
        std::memcpy(&g.dst, &g.bytes[16], 4);
        g.sport = load_be16(&g.bytes[20]);
        g.dport = load_be16(&g.bytes[22]);
        g.id = load_be16(&g.bytes[4]);
        g.df = load_be16(&g.bytes[6]) == 0x4000;
        out.push_back(std::move(g));
    }
    return out;
}

// A golden datagram: its ICRC verifies over its real header; the receiver, which sees only the
// addresses, ports and UDP payload, finds the ID it had and DF; uroce's own numbering (IDs
// 0 - 127, all the receiver accepted before the solver) does not; with any bit of the UDP
// payload flipped (but the masked BTH byte 4), nothing accepts it.
void check_golden(Datagram& g) {
    EXPECT_TRUE(icrc_check_ipv4(g.bytes.data(), g.bytes.size()));
    EXPECT_TRUE(g.df);
    IcrcIdDelta d;
    if (g.id >= 128) {
        EXPECT_FALSE(icrc_check_ids(g.src, g.dst, g.sport, g.dport, g.udp_payload(), g.udp_len(), 0,
                                    128, d, nullptr));
    }
    const Checked c = check(g, false, solver());
    EXPECT_EQ(c.way, g.id ? IcrcWay::kSolved : IcrcWay::kId0);
    EXPECT_EQ(c.id, g.id);
    EXPECT_TRUE(c.df);
    for (size_t b = 0; b < 8 * g.udp_len(); ++b) {
        if (b / 8 == 4) continue;
        g.udp_payload()[b / 8] ^= uint8_t(1u << (b % 8));
        ASSERT_EQ(check(g, false, solver()).way, IcrcWay::kBad) << "bit " << b;
        g.udp_payload()[b / 8] ^= uint8_t(1u << (b % 8));
    }
}

// The ConnectX-4 Lx CNP (tests/data/golden/connectx4lx_cnp.txt): made by a NIC, ID 0x718c.
TEST(NetIcrcSolver, ConnectX4LxCnp) {
    std::vector<Datagram> v = golden("connectx4lx_cnp.txt", false);
    ASSERT_EQ(v.size(), 1u);
    Datagram& g = v[0];
    ASSERT_EQ(g.bytes.size(), 60u);
    EXPECT_EQ(g.src, ip(10, 0, 17, 1));
    EXPECT_EQ(g.dst, ip(10, 0, 18, 1));
    EXPECT_EQ(g.id, 0x718c);
    EXPECT_EQ(g.udp_payload()[0], 0x81);  // CNP
    check_golden(g);
}

// The packets scapy built as rxe sends them (tests/data/golden/scapy_rxe_like.txt): SEND,
// WRITE, READ request, ACK, FETCH_ADD, CMP_SWAP, CNP, each with a random ID.
TEST(NetIcrcSolver, ScapyRxeLikePackets) {
    std::vector<Datagram> v = golden("scapy_rxe_like.txt", true);
    ASSERT_EQ(v.size(), 7u);
    const uint8_t ops[] = {0x04, 0x0a, 0x0c, 0x11, 0x14, 0x13, 0x81};
    for (size_t i = 0; i < v.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(v[i].udp_payload()[0], ops[i]);
        EXPECT_EQ(load_be16(&v[i].bytes[20]) & 0xc000, 0xc000);  // rxe's source ports
        EXPECT_EQ(load_be16(&v[i].bytes[26]), 0);                // no UDP checksum
        check_golden(v[i]);
    }
}
