// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/endpoint.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace uroce::net {

std::string Endpoint::addr_str() const {
    char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "";
    if (!is_v6()) {
        inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof buf);
        return buf;
    }
    inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof buf);
    std::string s = buf;
    if (v6.sin6_scope_id) {
        char name[IF_NAMESIZE] = "";
        s += '%';
        s += if_indextoname(v6.sin6_scope_id, name) ? name : std::to_string(v6.sin6_scope_id);
    }
    return s;
}

uint32_t interface_of(const Endpoint& e) {
    if (e.is_v6() && e.v6.sin6_scope_id) return e.v6.sin6_scope_id;
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return 0;
    uint32_t idx = 0;
    for (ifaddrs* i = all; i && !idx; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != e.family()) continue;
        const bool same =
            e.is_v6()
                ? std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                              e.addr6(), 16) == 0
                : reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == e.v4_be();
        if (same) idx = if_nametoindex(i->ifa_name);
    }
    freeifaddrs(all);
    return idx;
}

bool parse_address(const std::string& s, uint16_t port, Endpoint* out) {
    in_addr a4{};
    if (inet_pton(AF_INET, s.c_str(), &a4) == 1) {
        *out = Endpoint::ipv4(a4.s_addr, port);
        return true;
    }
    std::string addr = s, scope;
    size_t pct = s.find('%');
    if (pct != std::string::npos) {
        addr = s.substr(0, pct);
        scope = s.substr(pct + 1);
        if (scope.empty()) return false;
    }
    in6_addr a6{};
    if (inet_pton(AF_INET6, addr.c_str(), &a6) != 1) return false;
    uint32_t idx = 0;
    if (!scope.empty()) {
        idx = if_nametoindex(scope.c_str());
        if (!idx) {
            char* end = nullptr;
            unsigned long v = std::strtoul(scope.c_str(), &end, 10);
            if (*end || !v || v > UINT32_MAX) return false;
            idx = uint32_t(v);
        }
    }
    uint8_t g[16];
    std::memcpy(g, &a6, 16);
    *out = Endpoint::from_gid(g, port, idx);
    // An IPv4-mapped IPv6 address is the IPv4 one (from_gid made it so).
    return true;
}

namespace {

// IPv6 addresses nothing can bind yet or ever: still in duplicate address detection
// (IFA_F_TENTATIVE, a link just up) or failed it (IFA_F_DADFAILED); /proc/net/if_inet6 has
// their flags, getifaddrs does not.
std::vector<std::string> unusable_ipv6() {
    std::vector<std::string> v;
    FILE* f = std::fopen("/proc/net/if_inet6", "r");
    if (!f) return v;
    char hex[33], ifname[64];
    unsigned idx, plen, scope, flags;
    while (std::fscanf(f, "%32s %x %x %x %x %63s", hex, &idx, &plen, &scope, &flags, ifname) == 6)
        if (flags & (0x40 | 0x08)) v.push_back(hex);
    std::fclose(f);
    return v;
}

std::string hex_of(const uint8_t* a) {
    char h[33];
    for (int i = 0; i < 16; ++i) std::snprintf(h + 2 * i, 3, "%02x", a[i]);
    return h;
}

}  // namespace

// Every IPv4 and IPv6 address interface `name` has now, as getifaddrs lists them (link-local
// ones with the interface as their scope), but IPv6 ones that cannot be bound (tentative).
std::vector<Endpoint> interface_addresses(const std::string& name, uint16_t port) {
    std::vector<Endpoint> v;
    const std::vector<std::string> unusable = unusable_ipv6();
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return v;
    for (ifaddrs* i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || name != i->ifa_name) continue;
        Endpoint e;
        if (i->ifa_addr->sa_family == AF_INET) {
            e = Endpoint(*reinterpret_cast<const sockaddr_in*>(i->ifa_addr));
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            e = Endpoint(*reinterpret_cast<const sockaddr_in6*>(i->ifa_addr));
            const uint8_t* b = e.addr6();
            if (!(b[0] == 0xfe && (b[1] & 0xc0) == 0x80)) e.v6.sin6_scope_id = 0;
            if (std::find(unusable.begin(), unusable.end(), hex_of(b)) != unusable.end()) continue;
        } else {
            continue;
        }
        e.set_port(port);
        v.push_back(e);
    }
    freeifaddrs(all);
    return v;
}

std::vector<std::string> split_list(const std::string& list) {
    std::vector<std::string> parts;
    size_t at = 0;
    while (at <= list.size()) {
        size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        parts.push_back(list.substr(at, comma - at));
        at = comma + 1;
    }
    return parts;
}

std::vector<Endpoint> address_list(const std::string& list, uint16_t port) {
    std::vector<Endpoint> v;
    for (const std::string& a : split_list(list)) {
        Endpoint ep;
        if (parse_address(a, port, &ep)) {
            v.push_back(ep);
        } else {
            std::vector<Endpoint> i = interface_addresses(a, port);
            v.insert(v.end(), i.begin(), i.end());
        }
    }
    return v;
}

}  // namespace uroce::net
