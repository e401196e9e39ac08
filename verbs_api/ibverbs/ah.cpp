// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Address handles for UD: a RoCEv2 AH names the peer by a GID (IPv4-mapped for IPv4).
#include <cerrno>
#include <cstring>

#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {
const uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
constexpr size_t kGrhIpv4Offset = 20;  // RoCEv2/IPv4: the IPv4 header ends the GRH area

// The GID table's entry of an address of the device (a received packet's destination), 0 if
// it has none (the reply then leaves from the first address, as before tables had more).
uint8_t gid_index_of(ibv_context* context, const uint8_t* gid) {
    const Context* c = ctx_of(context);
    for (uint32_t i = 0; i < c->open.gid_count && i < abi::kGidTblLen; ++i)
        if (std::memcmp(c->open.gids[i], gid, 16) == 0) return uint8_t(i);
    return 0;
}
}  // namespace

extern "C" {

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    // RoCE needs a GRH whose source GID is in the table (one of the device's addresses).
    const Context* c = ctx_of(pd->context);
    if (!attr || !attr->is_global || attr->grh.sgid_index >= c->open.gid_count ||
        (attr->port_num && attr->port_num != 1)) {
        errno = EINVAL;
        return nullptr;
    }
    // The destination is of the source GID's IP version (RoCEv2 has no path between
    // versions): IPv4-mapped from an IPv4 address, IPv6 from an IPv6 one.
    const bool v4_dgid = std::memcmp(attr->grh.dgid.raw, kV4Prefix, sizeof kV4Prefix) == 0;
    const bool v6_device =
        std::memcmp(c->open.gids[attr->grh.sgid_index], kV4Prefix, sizeof kV4Prefix) != 0;
    if (v4_dgid == v6_device) {
        errno = EINVAL;
        return nullptr;
    }
    auto* ah = new Ah();
    ah->ah.context = pd->context;
    ah->ah.pd = pd;
    std::memcpy(&ah->ipv4_be, attr->grh.dgid.raw + 12, 4);
    ah->ah.handle = ah->ipv4_be;
    ah->ipv6 = v6_device;
    ah->sgid_index = attr->grh.sgid_index;
    std::memcpy(ah->gid, attr->grh.dgid.raw, 16);
    ah->traffic_class = attr->grh.traffic_class;
    ah->hop_limit = attr->grh.hop_limit;
    return &ah->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
    delete reinterpret_cast<Ah*>(ah);
    return 0;
}

// Builds the reply AH of a UD receive: the source address comes from the IPv4 header
// in the GRH area (see docs/behaviour.md).
int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
    (void)context;
    if (!(wc->wc_flags & IBV_WC_GRH) || port_num != 1) {
        errno = EINVAL;
        return -1;
    }
    // RoCEv2 over IPv6: the GRH area is the IPv6 header itself (the device writes it there).
    const auto* ip6 = reinterpret_cast<const uint8_t*>(grh);
    const auto* ip = ip6 + kGrhIpv4Offset;
    const bool v6 = (ip6[0] >> 4) == 6;
    if (!v6 && (ip[0] >> 4) != 4) {
        errno = EINVAL;
        return -1;
    }
    std::memset(ah_attr, 0, sizeof *ah_attr);
    if (v6) {
        ah_attr->is_global = 1;
        ah_attr->port_num = port_num;
        ah_attr->sl = wc->sl;
        ah_attr->grh.hop_limit = 0xff;
        ah_attr->grh.traffic_class = uint8_t(ip6[0] << 4 | ip6[1] >> 4);
        ah_attr->grh.flow_label = uint32_t(ip6[1] & 0xf) << 16 | uint32_t(ip6[2]) << 8 | ip6[3];
        ah_attr->grh.sgid_index = gid_index_of(context, ip6 + 24);  // the address it came to
        std::memcpy(ah_attr->grh.dgid.raw, ip6 + 8, 16);            // the sender's address
        return 0;
    }
    ah_attr->is_global = 1;
    ah_attr->port_num = port_num;
    ah_attr->dlid = wc->slid;
    ah_attr->sl = wc->sl;
    uint8_t dst[16];
    std::memcpy(dst, kV4Prefix, sizeof kV4Prefix);
    std::memcpy(dst + 12, ip + 16, 4);  // the address it came to
    ah_attr->grh.sgid_index = gid_index_of(context, dst);
    ah_attr->grh.hop_limit = 0xff;
    std::memcpy(ah_attr->grh.dgid.raw, kV4Prefix, sizeof kV4Prefix);
    std::memcpy(ah_attr->grh.dgid.raw + 12, ip + 12, 4);  // the sender's address
    return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
    ibv_ah_attr attr;
    if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) return nullptr;
    return ibv_create_ah(pd, &attr);
}

}  // extern "C"
