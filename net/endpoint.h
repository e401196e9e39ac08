// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A UDP endpoint of either IP version: what the wire, the fault injector and the capture
// name a peer or a device by. RoCEv2 runs over IPv4 and IPv6 (IBTA annex A17), and a GID is
// an IPv6 address in which an IPv4 one is written IPv4-mapped (::ffff:a.b.c.d), so one
// 16-byte form (gid()) serves both. The socket address is kept as the kernel takes it, so
// a sendmsg names it without a conversion on the packet path.
// A sockaddr_in converts implicitly: IPv4 code reads as it did.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace uroce::net {

inline constexpr uint8_t kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// Whether a 16-byte address (a GID) is an IPv4 address written IPv4-mapped.
inline bool gid_is_v4(const uint8_t* gid) {
    return std::memcmp(gid, kV4MappedPrefix, sizeof kV4MappedPrefix) == 0;
}

struct Endpoint {
    union {
        sockaddr sa;
        sockaddr_in v4;
        sockaddr_in6 v6;
    };

    Endpoint() : v6{} {}
    Endpoint(const sockaddr_in& a) : v6{} { v4 = a; }  // NOLINT: implicit on purpose
    Endpoint(const sockaddr_in6& a) : v6(a) {}         // NOLINT
    // An endpoint from a GID: IPv4 for an IPv4-mapped one, else IPv6 with `scope` (the
    // interface of a link-local address). `port` in host order.
    static Endpoint from_gid(const uint8_t* gid, uint16_t port, uint32_t scope = 0) {
        Endpoint e;
        if (gid_is_v4(gid)) {
            e.v4.sin_family = AF_INET;
            std::memcpy(&e.v4.sin_addr, gid + 12, 4);
            e.v4.sin_port = htons(port);
        } else {
            e.v6.sin6_family = AF_INET6;
            std::memcpy(&e.v6.sin6_addr, gid, 16);
            e.v6.sin6_port = htons(port);
            e.v6.sin6_scope_id = scope;
        }
        return e;
    }
    static Endpoint ipv4(uint32_t addr_be, uint16_t port) {
        Endpoint e;
        e.v4.sin_family = AF_INET;
        e.v4.sin_addr.s_addr = addr_be;
        e.v4.sin_port = htons(port);
        return e;
    }

    bool is_v6() const { return sa.sa_family == AF_INET6; }
    int family() const { return sa.sa_family; }
    socklen_t len() const { return is_v6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }
    uint16_t port() const { return ntohs(is_v6() ? v6.sin6_port : v4.sin_port); }
    void set_port(uint16_t p) {
        if (is_v6())
            v6.sin6_port = htons(p);
        else
            v4.sin_port = htons(p);
    }
    // The IPv4 address (network order); 0 for an IPv6 endpoint.
    uint32_t v4_be() const { return is_v6() ? 0 : v4.sin_addr.s_addr; }
    // The address's 16 bytes: the IPv6 address, or the IPv4 one IPv4-mapped.
    void gid(uint8_t* out) const {
        if (is_v6()) {
            std::memcpy(out, &v6.sin6_addr, 16);
        } else {
            std::memcpy(out, kV4MappedPrefix, 12);
            std::memcpy(out + 12, &v4.sin_addr, 4);
        }
    }
    // The IPv6 address bytes (an IPv6 endpoint only).
    const uint8_t* addr6() const { return v6.sin6_addr.s6_addr; }
    bool same_addr(const Endpoint& o) const {
        if (family() != o.family()) return false;
        return is_v6() ? std::memcmp(&v6.sin6_addr, &o.v6.sin6_addr, 16) == 0
                       : v4.sin_addr.s_addr == o.v4.sin_addr.s_addr;
    }
    // Same address and port (a train's peer, a device's own address).
    bool same(const Endpoint& o) const { return same_addr(o) && port() == o.port(); }
    bool multicast() const {
        return is_v6() ? v6.sin6_addr.s6_addr[0] == 0xff
                       : (ntohl(v4.sin_addr.s_addr) & 0xf0000000u) == 0xe0000000u;
    }
    // "10.0.0.1" / "fd00::1" (with "%scope" for a scoped one), without the port.
    std::string addr_str() const;
};

// The interface that holds the address (an IPv6 link-local one: its scope), 0 if none does.
uint32_t interface_of(const Endpoint& e);

// Parses an IPv4 or IPv6 address (an IPv6 one may end in %IFNAME or %INDEX). False if it is
// neither.
bool parse_address(const std::string& s, uint16_t port, Endpoint* out);

// Every IPv4 and IPv6 address interface `name` has now, as getifaddrs lists them (link-local
// ones with the interface as their scope).
std::vector<Endpoint> interface_addresses(const std::string& name, uint16_t port);

// The parts of a comma-separated list, in order (an empty list: one empty part).
std::vector<std::string> split_list(const std::string& list);

// The addresses of a device's address list as `uroce start --addr` takes it (addresses and
// interfaces' names, comma-separated), in order; a part that is neither is left out.
std::vector<Endpoint> address_list(const std::string& list, uint16_t port);

}  // namespace uroce::net
