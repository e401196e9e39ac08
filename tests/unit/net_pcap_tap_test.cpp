// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// net/: the pcap tap (frames tshark and scapy accept, rotation, failures).
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "net/headers.h"
#include "net/icrc.h"
#include "net/icrc_id.h"
#include "net/opcodes.h"
#include "net/pcap_tap.h"
#include "net_test_packets.h"

using namespace uroce::net;

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

// The command that checks a pcap's ICRCs against an independent implementation
// (tests/unit/icrc_scapy_check.py, scapy.contrib.roce); empty if scapy is not installed.
std::string scapy_check_command() {
    const std::filesystem::path script =
        std::filesystem::path(__FILE__).parent_path() / "icrc_scapy_check.py";
    if (!std::filesystem::exists(script) || !std::filesystem::exists("/usr/bin/python3") ||
        run("/usr/bin/python3 -c 'import scapy.contrib.roce' 2>&1 && echo ok") != "ok\n")
        return "";
    return "/usr/bin/python3 " + script.string();
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

// A capture at `path` of one packet of each of `ops`, from 10.0.0.1 to 10.0.0.2, for tshark.
void write_capture(const std::string& path, const std::vector<uint8_t>& ops) {
    const uint32_t s = ip("10.0.0.1"), d = ip("10.0.0.2");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    for (auto& t : make_packets(ops, s, d))
        tap.record(s, t.sport, d, kRoceUdpPort, t.bytes.data(), t.bytes.size(), timeval{1, 0});
    tap.close();
}

TEST(NetPcapTap, TsharkDissectsRoce) {
    if (!have("tshark")) GTEST_SKIP() << "tshark not installed";
    const std::string path = tmp_path("tshark");
    ASSERT_NO_FATAL_FAILURE(write_capture(path, {kRcSendOnly, kRcWriteOnlyImm, kRcAck}));

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
    const std::vector<uint8_t> ops = all_opcodes();
    ASSERT_NO_FATAL_FAILURE(write_capture(path, ops));
    // Wireshark 4.0 does not name CNP or XRC opcodes ("Unknown"), but nothing may be malformed.
    const std::string out = run("tshark -r " + path + " -V 2>/dev/null");
    EXPECT_EQ(out.find("Malformed"), std::string::npos);
    EXPECT_EQ(run("tshark -r " + path + " 2>/dev/null | wc -l"), std::to_string(ops.size()) + "\n");
    std::filesystem::remove(path);
}

TEST(NetPcapTap, IcrcAgreesWithScapy) {
    const std::string script = scapy_check_command();
    if (script.empty()) GTEST_SKIP() << "python3-scapy not available";
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
    const std::string out = run(script + " " + path + " 2>&1; echo rc=$?");
    EXPECT_NE(out.find("checked " + std::to_string(n) + " packets, 0 mismatches"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
    std::filesystem::remove(path);
}

// Packets as UDP GSO segments leave: IPv4 ID k, the ICRC moved to ID k by icrc_set_id. Recorded
// with that ID, scapy (computing over the captured header) agrees with every one; recorded
// with the ICRC left at ID 0 it disagrees with every one, so the ID is really checked.
TEST(NetPcapTap, IcrcWithSegmentIdsAgreesWithScapy) {
    const std::string script = scapy_check_command();
    if (script.empty()) GTEST_SKIP() << "python3-scapy not available";
    const std::string good = tmp_path("scapy_ids"), stale = tmp_path("scapy_ids_stale");
    const uint32_t s = ip("192.168.7.1"), d = ip("192.168.7.2");
    PcapTap tap_good, tap_stale;
    std::string err;
    ASSERT_TRUE(tap_good.open(good, 0, &err)) << err;
    ASSERT_TRUE(tap_stale.open(stale, 0, &err)) << err;
    IcrcIdDelta delta;
    uint16_t id = 1;
    for (uint32_t plen : {0u, 1u, 1024u, 4096u}) {
        auto pk = make_packets(all_opcodes(), s, d, plen);
        for (auto& t : pk) {
            tap_stale.record(s, t.sport, d, kRoceUdpPort, t.bytes.data(), t.bytes.size(), timeval{},
                             id);
            icrc_set_id(t.bytes.data(), t.bytes.size(), 0, id, delta);
            tap_good.record(s, t.sport, d, kRoceUdpPort, t.bytes.data(), t.bytes.size(), timeval{},
                            id);
            id = uint16_t(id * 5 + 3);  // small and large IDs, never 0 (odd)
        }
    }
    const uint64_t n = tap_good.packets();
    tap_good.close();
    tap_stale.close();
    const std::string n_str = std::to_string(n);
    std::string out = run(script + " " + good + " 2>&1; echo rc=$?");
    EXPECT_NE(out.find("checked " + n_str + " packets, 0 mismatches"), std::string::npos) << out;
    EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
    out = run(script + " " + stale + " 2>/dev/null; echo rc=$?");
    EXPECT_NE(out.find("checked " + n_str + " packets, " + n_str + " mismatches"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("rc=1"), std::string::npos) << out;
    std::filesystem::remove(good);
    std::filesystem::remove(stale);
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

// RoCEv2 over IPv6 (issue 27): frames with an IPv6 header, each ICRC made over the IPv6
// pseudo header by icrc_store6; the independent check (icrc_scapy_check.py: scapy's parse,
// the annex's masks) agrees with every one, icrc_check_ipv6 accepts each recorded frame, and
// one flipped bit of an address (covered) is caught while the traffic class and hop limit
// (masked) change nothing.
TEST(NetPcapTap, Ipv6FramesAndIcrcAgreeWithTheIndependentCheck) {
    const std::string script = scapy_check_command();
    if (script.empty()) GTEST_SKIP() << "python3-scapy not available";
    Endpoint s, d;
    ASSERT_TRUE(parse_address("fd77::1", 49153, &s));
    ASSERT_TRUE(parse_address("2001:db8::1:2", kRoceUdpPort, &d));
    const std::string path = tmp_path("scapy6");
    PcapTap tap;
    std::string err;
    ASSERT_TRUE(tap.open(path, 0, &err)) << err;
    uint32_t n = 0;
    for (uint32_t plen : {40u, 255u, 4096u}) {  // (as TsharkHasNoMalformedForAnyOpcode: no 0)
        uint32_t seed = 0;
        for (uint8_t opc : all_opcodes()) {
            Packet p = full_packet(opc, ++seed);
            const uint32_t len = (op_info(opc)->flags & kPayload) ? plen + seed % 4 : 0;
            p.bth.pad = (op_info(opc)->flags & kPayload) ? pad_for(len) : 0;
            std::vector<uint8_t> b = build(p, len);
            icrc_store6(s.addr6(), d.addr6(), s.port(), d.port(), b.data(), b.size());
            EXPECT_TRUE(icrc_check6(s.addr6(), d.addr6(), s.port(), d.port(), b.data(), b.size()));
            uint8_t other[16];
            std::memcpy(other, d.addr6(), 16);
            other[15] ^= 1;
            EXPECT_FALSE(icrc_check6(s.addr6(), other, s.port(), d.port(), b.data(), b.size()));
            tap.record(s, d, b.data(), b.size(), timeval{}, 0, true, IpMarks{uint8_t(seed), 3});
            ++n;
        }
    }
    tap.close();
    const std::string out = run(script + " " + path + " 2>&1; echo rc=$?");
    EXPECT_NE(out.find("checked " + std::to_string(n) + " packets, 0 mismatches, " +
                       std::to_string(n) + " over IPv6"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
    if (have("tshark")) {
        const std::string t = run("tshark -n -r " + path +
                                  " -Y 'ipv6 && infiniband && !_ws.malformed' -T fields "
                                  "-e frame.number 2>/dev/null | wc -l");
        EXPECT_EQ(std::stoul(t), n)
            << "tshark did not dissect every IPv6 frame as RoCEv2: "
            << run("tshark -n -r " + path +
                   " -Y '!(ipv6 && infiniband) || _ws.malformed' -T fields -e frame.number "
                   "-e infiniband.bth.opcode -e frame.len 2>/dev/null");
    }
    // icrc_check_ipv6 over the frames as recorded (Ethernet header skipped).
    char ebuf[PCAP_ERRBUF_SIZE];
    pcap_t* pc = pcap_open_offline(path.c_str(), ebuf);
    ASSERT_NE(pc, nullptr) << ebuf;
    pcap_pkthdr* h;
    const u_char* f;
    uint32_t ok = 0, whole = 0;
    while (pcap_next_ex(pc, &h, &f) == 1)
        if (h->caplen == h->len) {
            ++whole;
            ok += icrc_check_ipv6(f + 14, h->caplen - 14);
        }
    pcap_close(pc);
    EXPECT_EQ(whole, n) << "a frame was cut (kMaxFrame leaves room for IPv6's header)";
    EXPECT_EQ(ok, whole);
    std::filesystem::remove(path);
}
