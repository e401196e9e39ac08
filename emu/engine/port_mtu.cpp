// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/engine/port_mtu.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "net/headers.h"

namespace uroce::emu {

namespace {
constexpr int kIpv4HdrLen = 20, kUdpHdrLen = 8;
constexpr int kEthernetMtu = 1500;
}  // namespace

ibv_mtu ib_mtu_for_interface(int if_mtu, int ip_hdr) {
    int room = if_mtu - (ip_hdr + kUdpHdrLen + int(net::kMaxHdrLen) + int(net::kIcrcLen));
    for (ibv_mtu m : {IBV_MTU_4096, IBV_MTU_2048, IBV_MTU_1024, IBV_MTU_512})
        if (room >= int(mtu_bytes(m))) return m;
    return IBV_MTU_256;
}

namespace {
int mtu_of(const std::string& name) {
    if (name.empty()) return 0;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name.c_str());
    int mtu = ioctl(s, SIOCGIFMTU, &ifr) == 0 ? ifr.ifr_mtu : 0;
    close(s);
    return mtu;
}
}  // namespace

ibv_mtu port_mtu_for6(const uint8_t* ipv6) {
    ifaddrs* all = nullptr;
    std::string name;
    if (getifaddrs(&all) == 0) {
        for (ifaddrs* i = all; i && name.empty(); i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
                std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, ipv6,
                            16) == 0)
                name = i->ifa_name;
        freeifaddrs(all);
    }
    int mtu = mtu_of(name);
    return ib_mtu_for_interface(mtu > 0 ? mtu : kEthernetMtu, 40);
}

ibv_mtu port_mtu_for(const net::Endpoint& addr) {
    return addr.is_v6() ? port_mtu_for6(addr.addr6()) : port_mtu_for(addr.v4_be());
}

int interface_mtu(uint32_t ipv4_be) {
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return 0;
    // The interface with the address itself, else one whose subnet holds it.
    std::string exact, subnet;
    for (ifaddrs* i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        uint32_t a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
        uint32_t m = i->ifa_netmask
                         ? reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr
                         : ~0u;
        if (a == ipv4_be && exact.empty()) exact = i->ifa_name;
        if (m && (a & m) == (ipv4_be & m) && subnet.empty()) subnet = i->ifa_name;
    }
    freeifaddrs(all);
    return mtu_of(exact.empty() ? subnet : exact);
}

ibv_mtu port_mtu_for(uint32_t ipv4_be) {
    int mtu = interface_mtu(ipv4_be);
    return ib_mtu_for_interface(mtu > 0 ? mtu : kEthernetMtu);
}

}  // namespace uroce::emu
