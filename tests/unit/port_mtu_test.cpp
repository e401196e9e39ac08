// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The port MTU from the interface MTU (emu/engine/port_mtu.h): the IB MTU whose packets, with the
// largest headers, fit the interface; and the interface found from the device's address.
#include "emu/engine/port_mtu.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <fstream>

namespace uroce::emu {
namespace {

uint32_t ip(const char* s) {
    in_addr a{};
    inet_pton(AF_INET, s, &a);
    return a.s_addr;
}

// IPv4 20 + UDP 8 + BTH and the largest extension headers 44 + ICRC 4 = 76 bytes around a
// payload: an interface MTU of 4096 + 76 carries 4096-byte payloads, one byte less does not.
TEST(PortMtu, LargestIbMtuThatFitsTheInterface) {
    EXPECT_EQ(ib_mtu_for_interface(1500), IBV_MTU_1024);   // Ethernet, a veth
    EXPECT_EQ(ib_mtu_for_interface(9000), IBV_MTU_4096);   // jumbo frames
    EXPECT_EQ(ib_mtu_for_interface(65536), IBV_MTU_4096);  // loopback
    EXPECT_EQ(ib_mtu_for_interface(4096 + 76), IBV_MTU_4096);
    EXPECT_EQ(ib_mtu_for_interface(4096 + 75), IBV_MTU_2048);
    EXPECT_EQ(ib_mtu_for_interface(2048 + 76), IBV_MTU_2048);
    EXPECT_EQ(ib_mtu_for_interface(1024 + 76), IBV_MTU_1024);
    EXPECT_EQ(ib_mtu_for_interface(1024 + 75), IBV_MTU_512);
    EXPECT_EQ(ib_mtu_for_interface(576), IBV_MTU_256);  // 512 + 76 would be 588
    EXPECT_EQ(ib_mtu_for_interface(68), IBV_MTU_256);   // IPv4's least: 256, as rxe
    EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
    EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
}

TEST(PortMtu, InterfaceOfTheAddress) {
    int lo = 0;
    std::ifstream("/sys/class/net/lo/mtu") >> lo;
    ASSERT_GT(lo, 0) << "no /sys/class/net/lo/mtu";
    EXPECT_EQ(interface_mtu(ip("127.0.0.1")), lo);
    // 127.0.0.2 is no interface's address; lo's 127.0.0.0/8 holds it.
    EXPECT_EQ(interface_mtu(ip("127.0.0.2")), lo);
    EXPECT_EQ(port_mtu_for(ip("127.0.0.2")), ib_mtu_for_interface(lo));
    // TEST-NET-2, on no interface (CI hosts use TEST-NET-1 for their own links): the port
    // then assumes Ethernet's 1500.
    EXPECT_EQ(interface_mtu(ip("198.51.100.77")), 0);
    EXPECT_EQ(port_mtu_for(ip("198.51.100.77")), IBV_MTU_1024);
}

}  // namespace
}  // namespace uroce::emu
