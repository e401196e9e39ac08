// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/cm/cm_addr.h"

#include <sys/socket.h>

#include "net/endpoint.h"

namespace uroce::emu {

bool cm_addr_any(const CmAddr& a) {
    for (uint8_t b : a)
        if (b) return false;
    return true;
}

bool cm_addr_v4(const CmAddr& a) { return net::gid_is_v4(a.data()); }

std::string cm_addr_str(const CmAddr& a, uint32_t scope) {
    const bool link_local = a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
    return net::Endpoint::from_gid(a.data(), 0, link_local ? scope : 0).addr_str();
}

std::string cm_addr_port(const CmAddr& a, uint16_t port_be, bool wildcard_v6, uint32_t scope) {
    std::string p = std::to_string(ntohs(port_be));
    if (cm_addr_any(a)) return wildcard_v6 ? "[::]:" + p : "0.0.0.0:" + p;
    if (cm_addr_v4(a)) return cm_addr_str(a) + ":" + p;
    return "[" + cm_addr_str(a, scope) + "]:" + p;
}

bool listener_takes(const CmAddr& bound, uint8_t family, bool afonly, int version,
                    const CmAddr& dst) {
    if (version != 4 && version != 6) return false;
    if (cm_addr_any(bound)) {
        if (!afonly || !family) return true;
        return (family == AF_INET6) == (version == 6);
    }
    return (cm_addr_v4(bound) == (version == 4)) && bound == dst;
}

}  // namespace uroce::emu
