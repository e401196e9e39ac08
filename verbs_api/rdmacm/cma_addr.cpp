// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "verbs_api/rdmacm/cma_addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace uroce::rdmacm {

int parse_addr(const sockaddr* sa, IpAddr* out) {
    if (!sa) return EINVAL;
    *out = IpAddr{};
    out->family = sa->sa_family;
    if (sa->sa_family == AF_INET) {
        out->ep = *reinterpret_cast<const sockaddr_in*>(sa);
        out->any = out->ep.v4_be() == INADDR_ANY;
        return 0;
    }
    if (sa->sa_family != AF_INET6) return EAFNOSUPPORT;
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    const in6_addr& a = s6->sin6_addr;
    // from_gid makes an IPv4-mapped address the IPv4 one.
    out->ep = net::Endpoint::from_gid(a.s6_addr, ntohs(s6->sin6_port), s6->sin6_scope_id);
    if (out->ep.is_v6() && !link_local(out->ep)) out->ep.v6.sin6_scope_id = 0;
    out->any = IN6_IS_ADDR_UNSPECIFIED(&a);
    return 0;
}

net::Endpoint v4_loopback_for(const net::Endpoint& e) {
    if (!e.is_v6() || !IN6_IS_ADDR_LOOPBACK(&e.v6.sin6_addr)) return e;
    return net::Endpoint::ipv4(htonl(INADDR_LOOPBACK), e.port());
}

bool link_local(const net::Endpoint& e) {
    return e.is_v6() && IN6_IS_ADDR_LINKLOCAL(&e.v6.sin6_addr);
}

bool device_has(const net::Endpoint& dev, const net::Endpoint& want) {
    if (!dev.same_addr(want)) return false;
    return !link_local(want) || want.v6.sin6_scope_id == dev.v6.sin6_scope_id;
}

bool listens_on(int family, bool afonly, const net::Endpoint& dev) {
    if (family == AF_INET) return !dev.is_v6();
    return !afonly || dev.is_v6();
}

void to_sockaddr(const net::Endpoint& ep, uint16_t port_be, sockaddr_storage* ss) {
    std::memset(ss, 0, sizeof *ss);
    net::Endpoint e = ep;
    std::memcpy(ss, &e.sa, e.len());
    if (e.is_v6())
        reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = port_be;
    else
        reinterpret_cast<sockaddr_in*>(ss)->sin_port = port_be;
}

net::Endpoint from_addr16(const uint8_t* a, uint32_t scope) {
    net::Endpoint e = net::Endpoint::from_gid(a, 0, scope);
    if (e.is_v6() && !link_local(e)) e.v6.sin6_scope_id = 0;
    return e;
}

}  // namespace uroce::rdmacm
