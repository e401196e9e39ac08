// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// net/fault_injector.h: the spec language, seeded reproducibility, the rates, and the
// holding pool (delay keeps order, reorder lets later packets overtake, a full pool passes
// packets through, corruption breaks the ICRC and nothing else).
#include "net/fault_injector.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "net/headers.h"
#include "net/icrc.h"
#include "net/icrc_id.h"

namespace uroce::net {
namespace {

using Verdict = FaultInjector::Verdict;

FaultSpec parse_ok(const std::string& text) {
    FaultSpec s;
    std::string err;
    EXPECT_TRUE(parse_fault_spec(text, &s, &err)) << text << ": " << err;
    return s;
}

std::string parse_err(const std::string& text) {
    FaultSpec s;
    s.loss = 0.5;  // must be left alone on error
    std::string err;
    EXPECT_FALSE(parse_fault_spec(text, &s, &err)) << text;
    EXPECT_EQ(s.loss, 0.5) << text;
    EXPECT_FALSE(err.empty()) << text;
    return err;
}

TEST(FaultSpec, ParsesEveryKey) {
    FaultSpec s = parse_ok("loss=0.02,dup=0.03,reorder=0.04,delay=100,corrupt=0.01,seed=42,dir=rx");
    EXPECT_DOUBLE_EQ(s.loss, 0.02);
    EXPECT_DOUBLE_EQ(s.dup, 0.03);
    EXPECT_DOUBLE_EQ(s.reorder, 0.04);
    EXPECT_DOUBLE_EQ(s.corrupt, 0.01);
    EXPECT_EQ(s.delay_us, 100u);
    EXPECT_TRUE(s.has_seed);
    EXPECT_EQ(s.seed, 42u);
    EXPECT_EQ(s.dir, kFaultRx);
    EXPECT_TRUE(s.any());
    EXPECT_EQ(parse_ok("dir=tx,loss=1").dir, kFaultTx);
    EXPECT_EQ(parse_ok("loss=0").dir, kFaultBoth);
    EXPECT_FALSE(parse_ok("off").any());
    EXPECT_FALSE(parse_ok("").any());
    EXPECT_FALSE(parse_ok("seed=3").any());  // a seed alone injects nothing
}

TEST(FaultSpec, RejectsWithAReason) {
    EXPECT_NE(parse_err("loss=2").find("probability"), std::string::npos);
    EXPECT_NE(parse_err("loss=-0.1").find("loss"), std::string::npos);
    EXPECT_NE(parse_err("loss=abc").find("'abc'"), std::string::npos);
    EXPECT_NE(parse_err("loss=").find("loss"), std::string::npos);
    EXPECT_NE(parse_err("loss=nan").find("loss"), std::string::npos);
    EXPECT_NE(parse_err("drop=0.1").find("unknown key 'drop'"), std::string::npos);
    EXPECT_NE(parse_err("loss").find("key=value"), std::string::npos);
    EXPECT_NE(parse_err("loss=0.1,,dup=0.1").find("empty"), std::string::npos);
    EXPECT_NE(parse_err("loss=0.1,").find("empty"), std::string::npos);
    EXPECT_NE(parse_err("loss=0.1,loss=0.2").find("twice"), std::string::npos);
    EXPECT_NE(parse_err("delay=1.5").find("delay"), std::string::npos);
    EXPECT_NE(parse_err("delay=-1").find("delay"), std::string::npos);
    EXPECT_NE(parse_err("delay=2000000").find("1000000"), std::string::npos);
    EXPECT_NE(parse_err("seed=x").find("seed"), std::string::npos);
    EXPECT_NE(parse_err("dir=up").find("rx, tx or both"), std::string::npos);
    EXPECT_NE(parse_err("peer=10.0.0").find("IPv4 address"), std::string::npos);
    EXPECT_NE(parse_err("peer=0.0.0.0").find("IPv4 address"), std::string::npos);
    EXPECT_NE(parse_err("drop=1").find("peer"), std::string::npos) << "the keys are listed";
}

TEST(FaultSpec, FormatParsesBack) {
    FaultSpec s = parse_ok("corrupt=0.01,loss=0.25,delay=7,seed=9,dir=tx");
    std::string text = format_fault_spec(s);
    EXPECT_EQ(text, "loss=0.25,delay=7,corrupt=0.01,seed=9,dir=tx");
    FaultSpec t = parse_ok(text);
    EXPECT_EQ(format_fault_spec(t), text);
    EXPECT_EQ(format_fault_spec(FaultSpec{}), "off");
    EXPECT_EQ(format_fault_spec(parse_ok("peer=10.79.0.3,loss=0.5")),
              "loss=0.5,dir=both,peer=10.79.0.3");
}

sockaddr_in peer() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = inet_addr("127.0.0.9");
    a.sin_port = htons(4791);
    return a;
}

// A packet that carries its number in the first payload bytes.
std::vector<uint8_t> packet(uint32_t n, size_t len = 64) {
    std::vector<uint8_t> p(len, 0);
    std::memcpy(p.data() + kBthLen, &n, sizeof n);
    return p;
}
uint32_t number_of(const uint8_t* p) {
    uint32_t n;
    std::memcpy(&n, p + kBthLen, sizeof n);
    return n;
}

std::vector<Verdict> run(const std::string& spec, FaultDir d, int n) {
    FaultInjector f;
    f.configure(parse_ok(spec));
    std::vector<Verdict> out;
    for (int i = 0; i < n; ++i) {
        auto p = packet(uint32_t(i));
        out.push_back(f.decide(d, p.data(), p.size(), peer(), 0));
        f.release(~uint64_t(0),
                  [](FaultDir, const uint8_t*, size_t, const Endpoint&) { return true; });
    }
    return out;
}

TEST(FaultInjector, SameSeedSameDecisions) {
    const std::string a = "loss=0.1,dup=0.1,reorder=0.1,corrupt=0.1,seed=7";
    EXPECT_EQ(run(a, kFaultRx, 5000), run(a, kFaultRx, 5000));
    EXPECT_EQ(run(a, kFaultTx, 5000), run(a, kFaultTx, 5000));
    EXPECT_NE(run(a, kFaultRx, 5000),
              run("loss=0.1,dup=0.1,reorder=0.1,corrupt=0.1,seed=8", kFaultRx, 5000));
    // A spec without a seed gets one, reported so the run can be replayed.
    FaultInjector f;
    uint64_t seed = f.configure(parse_ok("loss=0.1"));
    EXPECT_TRUE(f.spec().has_seed);
    EXPECT_EQ(f.spec().seed, seed);
    EXPECT_EQ(run("loss=0.1,seed=" + std::to_string(seed), kFaultRx, 2000),
              run(format_fault_spec(f.spec()), kFaultRx, 2000));
}

// With a peer, only packets to or from that address are looked at (a link of a cluster).
TEST(FaultInjector, PeerLimitsTheFaultsToOneAddress) {
    FaultInjector f;
    f.configure(parse_ok("loss=1,peer=127.0.0.9,seed=1"));
    sockaddr_in other = peer();
    other.sin_addr.s_addr = inet_addr("127.0.0.10");
    for (uint32_t i = 0; i < 100; ++i) {
        auto p = packet(i);
        EXPECT_EQ(f.decide(kFaultTx, p.data(), p.size(), peer(), 0), Verdict::kDrop);
        EXPECT_EQ(f.decide(kFaultRx, p.data(), p.size(), peer(), 0), Verdict::kDrop);
        EXPECT_EQ(f.decide(kFaultTx, p.data(), p.size(), other, 0), Verdict::kPass);
        EXPECT_EQ(f.decide(kFaultRx, p.data(), p.size(), other, 0), Verdict::kPass);
    }
    EXPECT_EQ(f.stats(kFaultTx).seen, 100u);
    EXPECT_EQ(f.stats(kFaultTx).dropped, 100u);
    EXPECT_EQ(f.stats(kFaultRx).seen, 100u);
}

// held_copies counts what release() will still hand out: a held duplicate twice (the wire
// keeps a sent packet's port open per copy, emu/engine/wire_faults.cpp).
TEST(FaultInjector, HeldCopiesCountsEachCopy) {
    FaultInjector f;
    f.configure(parse_ok("dup=1,delay=10,seed=1"));
    auto p = packet(1);
    EXPECT_EQ(f.decide(kFaultTx, p.data(), p.size(), peer(), 0), Verdict::kHeld);
    EXPECT_EQ(f.held_copies(), 2u);
    int got = 0;
    f.release(~uint64_t(0), [&](FaultDir, const uint8_t*, size_t, const Endpoint&) {
        ++got;
        return got == 1;  // the second copy cannot go yet
    });
    EXPECT_EQ(got, 2);
    EXPECT_EQ(f.held_copies(), 1u);
    f.release(~uint64_t(0), [](FaultDir, const uint8_t*, size_t, const Endpoint&) { return true; });
    EXPECT_EQ(f.held_copies(), 0u);
    EXPECT_FALSE(f.holding());
}

TEST(FaultInjector, RatesAndCounters) {
    FaultInjector f;
    f.configure(parse_ok("loss=0.02,dup=0.03,reorder=0.04,corrupt=0.05,seed=1"));
    const int n = 200000;
    uint64_t drop = 0, dup = 0, held = 0, released = 0;
    for (int i = 0; i < n; ++i) {
        auto p = packet(uint32_t(i));
        Verdict v = f.decide(kFaultTx, p.data(), p.size(), peer(), uint64_t(i) * 1000);
        drop += v == Verdict::kDrop;
        dup += v == Verdict::kDup;
        held += v == Verdict::kHeld;
        f.release(uint64_t(i) * 1000, [&](FaultDir d, const uint8_t*, size_t, const Endpoint&) {
            EXPECT_EQ(d, kFaultTx);
            ++released;
            return true;
        });
    }
    const FaultStats& s = f.stats(kFaultTx);
    EXPECT_EQ(s.seen, uint64_t(n));
    EXPECT_EQ(s.dropped, drop);
    EXPECT_EQ(s.reordered, held);
    EXPECT_EQ(f.stats(kFaultRx).seen, 0u);
    auto near = [](uint64_t got, double want) { return got > want * 0.9 && got < want * 1.1; };
    EXPECT_TRUE(near(s.dropped, n * 0.02)) << s.dropped;
    EXPECT_TRUE(near(s.corrupted, n * 0.98 * 0.05)) << s.corrupted;
    EXPECT_TRUE(near(s.duplicated, n * 0.98 * 0.03)) << s.duplicated;
    EXPECT_TRUE(near(s.reordered, n * 0.98 * 0.04)) << s.reordered;
    EXPECT_EQ(s.overflow, 0u);
    // Everything held came back (a held duplicate twice) once its time was up.
    f.release(~uint64_t(0), [&](FaultDir, const uint8_t*, size_t, const Endpoint&) {
        ++released;
        return true;
    });
    EXPECT_FALSE(f.holding());
    EXPECT_EQ(s.released, released);
    EXPECT_GE(released, held);
    EXPECT_LE(released, held * 2);
}

TEST(FaultInjector, OffIsUnarmed) {
    FaultInjector f;
    EXPECT_FALSE(f.armed(kFaultRx));
    EXPECT_FALSE(f.armed(kFaultTx));
    f.configure(parse_ok("loss=0.5,dir=rx"));
    EXPECT_TRUE(f.armed(kFaultRx));
    EXPECT_FALSE(f.armed(kFaultTx));
    f.configure(parse_ok("off"));
    EXPECT_FALSE(f.armed(kFaultRx));
    EXPECT_FALSE(f.armed(kFaultTx));
}

TEST(FaultInjector, DelayKeepsOrderAndTime) {
    FaultInjector f;
    f.configure(parse_ok("delay=100,seed=1"));
    std::vector<uint32_t> out;
    auto take = [&](FaultDir, const uint8_t* d, size_t len, const Endpoint& a) {
        EXPECT_EQ(len, 64u);
        EXPECT_EQ(a.v4_be(), peer().sin_addr.s_addr);
        out.push_back(number_of(d));
        return true;
    };
    for (uint32_t i = 0; i < 10; ++i) {
        auto p = packet(i);
        EXPECT_EQ(f.decide(kFaultRx, p.data(), p.size(), peer(), i * 1000), Verdict::kHeld);
    }
    EXPECT_TRUE(f.holding());
    EXPECT_EQ(f.next_release_in(0), 100000u);
    f.release(99999, take);
    EXPECT_TRUE(out.empty());
    f.release(104000, take);  // packets 0..4 are due
    EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(f.next_release_in(104000), 1000u);
    f.release(200000, take);
    EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_FALSE(f.holding());
    EXPECT_EQ(f.stats(kFaultRx).delayed, 10u);
}

// A held packet comes back with what the caller gave with it: the address it was sent to
// (received packets), the UDP port it leaves from (sent ones: a QP's own, net/udp_sport.h)
// and its IPv4 TOS and TTL (both ways), so a delayed packet is the packet that was sent.
TEST(FaultInjector, HeldPacketKeepsItsAddressAndMarks) {
    FaultInjector f;
    f.configure(parse_ok("delay=10,seed=1"));
    struct Out {
        FaultDir d;
        uint32_t n, local_be;
        IpMarks marks;
        uint16_t local_port;
    };
    std::vector<Out> out;
    auto p0 = packet(0), p1 = packet(1);
    EXPECT_EQ(f.decide(kFaultRx, p0.data(), p0.size(), peer(), 0, Endpoint::ipv4(0x0400007f, 4791),
                       IpMarks{0x68, 17}),
              Verdict::kHeld);
    EXPECT_EQ(f.decide(kFaultTx, p1.data(), p1.size(), peer(), 0, {}, IpMarks{0xb8, 3}, 0xd872),
              Verdict::kHeld);
    f.release(~uint64_t(0), [&](FaultDir d, const uint8_t* data, size_t, const Endpoint&,
                                const Endpoint& local, IpMarks marks, uint16_t local_port) {
        out.push_back({d, number_of(data), local.v4_be(), marks, local_port});
        return true;
    });
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].d, kFaultRx);
    EXPECT_EQ(out[0].n, 0u);
    EXPECT_EQ(out[0].local_be, 0x0400007fu);
    EXPECT_EQ(out[0].marks, (IpMarks{0x68, 17}));
    EXPECT_EQ(out[1].d, kFaultTx);
    EXPECT_EQ(out[1].n, 1u);
    EXPECT_EQ(out[1].marks, (IpMarks{0xb8, 3}));
    EXPECT_EQ(out[1].local_port, 0xd872);
}

TEST(FaultInjector, ReorderedPacketIsOvertaken) {
    FaultInjector f;
    f.configure(parse_ok("reorder=1,seed=3"));  // every packet is held back...
    auto p0 = packet(0);
    EXPECT_EQ(f.decide(kFaultRx, p0.data(), p0.size(), peer(), 0), Verdict::kHeld);
    f.configure(parse_ok("dup=0.000001,seed=3"));  // ... then nothing more is
    std::vector<uint32_t> out;
    auto take = [&](FaultDir, const uint8_t* d, size_t, const Endpoint&) {
        out.push_back(number_of(d));
        return true;
    };
    uint32_t i = 1;
    for (; f.holding() && i < 10; ++i) {
        auto p = packet(i);
        EXPECT_EQ(f.decide(kFaultRx, p.data(), p.size(), peer(), 1000 * i), Verdict::kPass);
        out.push_back(i);
        f.release(1000 * i, take);
    }
    // Packet 0 went after 1 to 4 later ones, well before its 100 us deadline.
    ASSERT_FALSE(f.holding());
    ASSERT_GE(out.size(), 2u);
    EXPECT_EQ(out.back(), 0u);
    EXPECT_GE(i - 1, 1u);
    EXPECT_LE(i - 1, FaultInjector::kReorderMaxLater);
    // With nothing overtaking it, a reordered packet still goes at its deadline.
    f.configure(parse_ok("reorder=1,seed=3"));
    EXPECT_EQ(f.decide(kFaultTx, p0.data(), p0.size(), peer(), 0), Verdict::kHeld);
    EXPECT_EQ(f.next_release_in(0), FaultInjector::kReorderMaxNs);
    out.clear();
    f.release(FaultInjector::kReorderMaxNs, take);
    EXPECT_EQ(out, (std::vector<uint32_t>{0}));
}

TEST(FaultInjector, FullPoolPassesAndReleaseCanWait) {
    FaultInjector f;
    f.configure(parse_ok("delay=10,seed=1"));
    auto p = packet(1);
    for (uint32_t i = 0; i < FaultInjector::kSlots; ++i)
        ASSERT_EQ(f.decide(kFaultTx, p.data(), p.size(), peer(), 0), Verdict::kHeld);
    EXPECT_EQ(f.decide(kFaultTx, p.data(), p.size(), peer(), 0), Verdict::kPass);
    EXPECT_EQ(f.stats(kFaultTx).overflow, 1u);
    // The consumer takes 3 and then has no room: the rest stays held for the next pass.
    int taken = 0;
    f.release(10000, [&](FaultDir, const uint8_t*, size_t, const Endpoint&) {
        return taken < 3 ? (++taken, true) : false;
    });
    EXPECT_EQ(taken, 3);
    EXPECT_TRUE(f.holding());
    EXPECT_EQ(f.next_release_in(20000), 0u);
    f.release(10000, [&](FaultDir, const uint8_t*, size_t, const Endpoint&) {
        ++taken;
        return true;
    });
    EXPECT_EQ(taken, int(FaultInjector::kSlots));
    EXPECT_FALSE(f.holding());
}

TEST(FaultInjector, CorruptionFailsTheIcrcOnly) {
    FaultInjector f;
    f.configure(parse_ok("corrupt=1,seed=5"));
    const IcrcIdSolver solver;
    IcrcIdDelta ids;
    const uint32_t src = inet_addr("127.0.0.4"), dst = inet_addr("127.0.0.5");
    for (int i = 0; i < 1000; ++i) {
        std::vector<uint8_t> p(kBthLen + 16 + size_t(i % 300) + kIcrcLen, uint8_t(i));
        icrc_store(src, dst, 4791, 4791, p.data(), p.size());
        std::vector<uint8_t> before = p;
        ASSERT_EQ(f.decide(kFaultRx, p.data(), p.size(), peer(), 0), Verdict::kPass);
        EXPECT_FALSE(icrc_check(src, dst, 4791, 4791, p.data(), p.size())) << i;
        // Nor for any other IPv4 ID: one flipped bit is what the receiver's ID solver always
        // catches (net/icrc_id.h).
        EXPECT_EQ(icrc_check_any_id(src, dst, 4791, 4791, p.data(), p.size(), 0, false, ids, solver,
                                    nullptr, nullptr),
                  IcrcWay::kBad)
            << i;
        EXPECT_EQ(std::memcmp(p.data(), before.data(), kBthLen), 0) << "the BTH was touched";
        int diff = 0;
        for (size_t k = 0; k < p.size(); ++k) diff += __builtin_popcount(p[k] ^ before[k]);
        EXPECT_EQ(diff, 1);
    }
    EXPECT_EQ(f.stats(kFaultRx).corrupted, 1000u);
}

}  // namespace
}  // namespace uroce::net
