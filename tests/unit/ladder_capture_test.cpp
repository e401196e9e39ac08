// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Reading captures for the ladder (emu/ladder/ladder_capture.h): IPv4 and IPv6 frames as
// net::PcapTap writes them, decoded, their ICRC checked, their addresses numbered.
#include "emu/ladder/ladder_capture.h"

#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <vector>

#include "net/endpoint.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/pcap_tap.h"

using namespace uroce;
using namespace uroce::ladder;

namespace {

// An RC SEND ONLY of 64 bytes to QP 0x12, PSN 7, with the ICRC for src -> dst.
std::vector<uint8_t> send_only(const net::Endpoint& src, const net::Endpoint& dst) {
    net::Packet p{};
    p.bth.opcode = net::kRcSendOnly;
    p.bth.pkey = net::kDefaultPkey;
    p.bth.dqpn = 0x12;
    p.bth.psn = 7;
    std::vector<uint8_t> b(net::op_info(p.bth.opcode)->hdr_len + 64 + net::kIcrcLen);
    net::encode_headers(p, b.data());
    if (src.is_v6()) {
        uint8_t s6[16], d6[16];
        src.gid(s6);
        dst.gid(d6);
        net::icrc_store6(s6, d6, src.port(), dst.port(), b.data(), b.size());
    } else {
        net::icrc_store(src.v4_be(), dst.v4_be(), src.port(), dst.port(), b.data(), b.size());
    }
    return b;
}

}  // namespace

TEST(LadderCapture, ReadsIpv4AndIpv6FramesAndChecksTheirIcrc) {
    char path[] = "/tmp/ladder_capture_test.XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    net::Endpoint a4, b4, a6, b6;
    ASSERT_TRUE(net::parse_address("127.0.0.2", 49152, &a4));
    ASSERT_TRUE(net::parse_address("127.0.0.3", net::kRoceUdpPort, &b4));
    ASSERT_TRUE(net::parse_address("fd77::1", 49152, &a6));
    ASSERT_TRUE(net::parse_address("fd77::2", net::kRoceUdpPort, &b6));
    {
        net::PcapTap tap;
        std::string err;
        ASSERT_TRUE(tap.open(path, 0, &err)) << err;
        timeval t{100, 5};
        std::vector<uint8_t> p4 = send_only(a4, b4), p6 = send_only(a6, b6);
        tap.record(a4, b4, p4.data(), p4.size(), t);
        tap.record(a6, b6, p6.data(), p6.size(), t);
        p6[20] ^= 0x10;  // a bit of the payload: the receiver's ICRC check fails
        tap.record(a6, b6, p6.data(), p6.size(), t);
        tap.close();
    }
    AddressBook book;
    std::vector<Sighting> out;
    CaptureStats st;
    std::string err;
    ASSERT_TRUE(read_capture(path, 3, net::kRoceUdpPort, &book, &out, &st, &err)) << err;
    unlink(path);
    EXPECT_EQ(st.records, 3u);
    EXPECT_EQ(st.roce, 3u);
    ASSERT_EQ(out.size(), 3u);
    ASSERT_EQ(book.names.size(), 5u);  // and 0, no address
    EXPECT_NE(out[0].src, 0u);
    EXPECT_EQ(book.names[out[0].src], "127.0.0.2");
    EXPECT_EQ(book.names[out[0].dst], "127.0.0.3");
    EXPECT_EQ(book.names[out[1].src], "fd77::1");
    EXPECT_EQ(book.names[out[1].dst], "fd77::2");
    EXPECT_EQ(out[2].src, out[1].src);  // one address, one number
    for (const Sighting& s : out) {
        EXPECT_EQ(s.opcode, net::kRcSendOnly);
        EXPECT_EQ(s.dqpn, 0x12u);
        EXPECT_EQ(s.psn, 7u);
        EXPECT_EQ(s.sport, 49152);
        EXPECT_EQ(s.file, 3);
        EXPECT_EQ(s.t_us, 100000005);
        EXPECT_EQ(s.payload_len, 64u);
    }
    EXPECT_TRUE(out[0].icrc_ok);
    EXPECT_TRUE(out[1].icrc_ok);
    EXPECT_FALSE(out[2].icrc_ok);
    // The IPv4-mapped form orders IPv4 before IPv6 lanes.
    EXPECT_LT(book.keys[out[0].src], book.keys[out[1].src]);
}
