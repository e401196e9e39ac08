// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A device's addresses (uroce start --addr, more than once) and its GID table: rxe's order
// (issue 27), whatever order they were given in.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "emu/engine/device.h"
#include "net/endpoint.h"

using namespace uroce;

namespace {

emu::DeviceConfig config(const std::vector<std::string>& addrs) {
    emu::DeviceConfig cfg;
    cfg.port = 4791;
    for (size_t i = 0; i < addrs.size(); ++i) {
        net::Endpoint e;
        EXPECT_TRUE(net::parse_address(addrs[i], cfg.port, &e)) << addrs[i];
        if (i) {
            cfg.more.push_back(e);
        } else if (e.is_v6()) {
            std::memcpy(cfg.ipv6, e.addr6(), 16);
            cfg.ipv6_scope = e.v6.sin6_scope_id;
        } else {
            cfg.ipv4_be = e.v4_be();
        }
    }
    return cfg;
}

std::vector<std::string> strings(const std::vector<net::Endpoint>& v) {
    std::vector<std::string> out;
    for (const net::Endpoint& e : v) out.push_back(e.addr_str());
    return out;
}

}  // namespace

// rxe's table: the default GID (its netdev's link-local address) first, then the IPv4
// addresses, then the other IPv6 ones, each in the order it was given; the wire's sockets in
// the order given (the first address first).
TEST(DeviceAddresses, GidTableIsInRxesOrder) {
    emu::DeviceConfig cfg = config({"fd00::1", "10.0.0.1", "fe80::5%lo", "10.0.0.2", "fd00::2"});
    EXPECT_EQ(
        strings(cfg.gid_table()),
        (std::vector<std::string>{"fe80::5%lo", "10.0.0.1", "10.0.0.2", "fd00::1", "fd00::2"}));
    EXPECT_EQ(
        strings(cfg.addresses()),
        (std::vector<std::string>{"fd00::1", "10.0.0.1", "fe80::5%lo", "10.0.0.2", "fd00::2"}));
    for (const net::Endpoint& e : cfg.addresses()) EXPECT_EQ(e.port(), 4791);
    EXPECT_TRUE(cfg.is_ipv6());  // its first address
}

// One address: as before, the one GID; sixteen at most.
TEST(DeviceAddresses, OneAddressAndAtMostSixteen) {
    EXPECT_EQ(strings(config({"127.0.0.2"}).gid_table()), (std::vector<std::string>{"127.0.0.2"}));
    std::vector<std::string> many;
    for (int i = 1; i <= 20; ++i) many.push_back("10.0.0." + std::to_string(i));
    EXPECT_EQ(config(many).gid_table().size(), 16u);
}
