// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm's address rules (verbs_api/rdmacm/cma_addr.*): which addresses it takes and how,
// which device has an address (a link-local one on its interface only), which devices a
// wildcard listener listens on, and the sockaddrs ids report.
#include "verbs_api/rdmacm/cma_addr.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

using namespace uroce;
using namespace uroce::rdmacm;

namespace {

sockaddr_in6 sin6(const char* a, uint16_t port, uint32_t scope = 0) {
    sockaddr_in6 s{};
    s.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, a, &s.sin6_addr), 1) << a;
    s.sin6_port = htons(port);
    s.sin6_scope_id = scope;
    return s;
}

sockaddr_in sin4(const char* a, uint16_t port) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, a, &s.sin_addr), 1) << a;
    s.sin_port = htons(port);
    return s;
}

net::Endpoint ep(const char* a, uint32_t scope = 0) {
    net::Endpoint e;
    EXPECT_TRUE(net::parse_address(a, 0, &e)) << a;
    if (e.is_v6()) e.v6.sin6_scope_id = scope;
    return e;
}

}  // namespace

TEST(CmaAddr, ParsesEitherVersion) {
    IpAddr a;
    auto s6 = sin6("fd77::1", 7174);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s6), &a), 0);
    EXPECT_TRUE(a.ep.is_v6());
    EXPECT_EQ(a.family, AF_INET6);
    EXPECT_FALSE(a.any);
    EXPECT_EQ(a.ep.port(), 7174);
    EXPECT_EQ(a.ep.addr_str(), "fd77::1");
    // A scope id means nothing on a global address; it is kept on a link-local one.
    s6 = sin6("fd77::1", 1, 5);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s6), &a), 0);
    EXPECT_EQ(a.ep.v6.sin6_scope_id, 0u);
    s6 = sin6("fe80::1", 1, 5);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s6), &a), 0);
    EXPECT_TRUE(link_local(a.ep));
    EXPECT_EQ(a.ep.v6.sin6_scope_id, 5u);
    // The wildcard of each family, and IPv4-mapped and ::1 forms as IPv4.
    s6 = sin6("::", 9);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s6), &a), 0);
    EXPECT_TRUE(a.any);
    EXPECT_EQ(a.family, AF_INET6);
    auto s4 = sin4("0.0.0.0", 9);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s4), &a), 0);
    EXPECT_TRUE(a.any);
    EXPECT_EQ(a.family, AF_INET);
    s6 = sin6("::ffff:10.77.0.1", 9);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s6), &a), 0);
    EXPECT_FALSE(a.ep.is_v6());
    EXPECT_EQ(a.ep.addr_str(), "10.77.0.1");
    EXPECT_EQ(a.ep.port(), 9);
    // ::1 is itself (a device may be on it), and 127.0.0.1 where none is.
    s6 = sin6("::1", 9);
    ASSERT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&s6), &a), 0);
    EXPECT_EQ(a.ep.addr_str(), "::1");
    EXPECT_EQ(v4_loopback_for(a.ep).addr_str(), "127.0.0.1");
    EXPECT_EQ(v4_loopback_for(a.ep).port(), 9);
    EXPECT_EQ(v4_loopback_for(ep("fd77::1")).addr_str(), "fd77::1");
    // Neither version (AF_IB is 27).
    sockaddr_storage ib{};
    ib.ss_family = 27;
    EXPECT_EQ(parse_addr(reinterpret_cast<sockaddr*>(&ib), &a), EAFNOSUPPORT);
    EXPECT_EQ(parse_addr(nullptr, &a), EINVAL);
}

TEST(CmaAddr, DeviceHasItsAddressOnItsInterface) {
    EXPECT_TRUE(device_has(ep("fd77::1"), ep("fd77::1")));
    EXPECT_FALSE(device_has(ep("fd77::1"), ep("fd77::2")));
    EXPECT_FALSE(device_has(ep("10.77.0.1"), ep("::ffff:10.77.0.2")));
    EXPECT_TRUE(device_has(ep("10.77.0.1"), ep("::ffff:10.77.0.1")));
    EXPECT_FALSE(device_has(ep("fd77::1"), ep("10.77.0.1")));
    // A link-local address is the device's on the device's interface only.
    EXPECT_TRUE(device_has(ep("fe80::1", 3), ep("fe80::1", 3)));
    EXPECT_FALSE(device_has(ep("fe80::1", 3), ep("fe80::1", 4)));
    EXPECT_FALSE(device_has(ep("fe80::1", 3), ep("fe80::1")));
}

TEST(CmaAddr, WildcardListenersByFamily) {
    const net::Endpoint d4 = ep("10.77.0.1"), d6 = ep("fd77::1");
    EXPECT_TRUE(listens_on(AF_INET, true, d4));
    EXPECT_FALSE(listens_on(AF_INET, true, d6));
    EXPECT_TRUE(listens_on(AF_INET6, false, d4));  // IPV6_V6ONLY off: IPv4 devices too
    EXPECT_TRUE(listens_on(AF_INET6, false, d6));
    EXPECT_FALSE(listens_on(AF_INET6, true, d4));
    EXPECT_TRUE(listens_on(AF_INET6, true, d6));
}

TEST(CmaAddr, ReportedSockaddrs) {
    sockaddr_storage ss;
    to_sockaddr(ep("fe80::1", 3), htons(7174), &ss);
    ASSERT_EQ(ss.ss_family, AF_INET6);
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    EXPECT_EQ(ntohs(s6->sin6_port), 7174);
    EXPECT_EQ(s6->sin6_scope_id, 3u);
    to_sockaddr(ep("10.77.0.1"), htons(1), &ss);
    ASSERT_EQ(ss.ss_family, AF_INET);
    EXPECT_EQ(reinterpret_cast<sockaddr_in*>(&ss)->sin_addr.s_addr, inet_addr("10.77.0.1"));
    // From the CM's 16-byte form: IPv4-mapped is IPv4; only a link-local address gets the
    // scope (its device's interface).
    uint8_t a[16];
    ep("fe80::9").gid(a);
    EXPECT_EQ(from_addr16(a, 3).v6.sin6_scope_id, 3u);
    ep("fd77::9").gid(a);
    EXPECT_EQ(from_addr16(a, 3).v6.sin6_scope_id, 0u);
    ep("10.77.0.9").gid(a);
    EXPECT_FALSE(from_addr16(a, 3).is_v6());
}
