// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rdma_getaddrinfo / rdma_freeaddrinfo: getaddrinfo(3) with RDMA hints. RoCE addresses are
// IP addresses, so no route (ibacm) and no AF_IB connect data are ever produced.
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "verbs_api/rdmacm/internal.h"

namespace {

sockaddr* copy_addr(const sockaddr* src, socklen_t len) {
    auto* p = static_cast<sockaddr*>(malloc(len));
    if (p) std::memcpy(p, src, len);
    return p;
}

}  // namespace

extern "C" {

void rdma_freeaddrinfo(rdma_addrinfo* res) {
    while (res) {
        rdma_addrinfo* next = res->ai_next;
        free(res->ai_connect);
        free(res->ai_route);
        free(res->ai_src_canonname);
        free(res->ai_dst_canonname);
        free(res->ai_src_addr);
        free(res->ai_dst_addr);
        free(res);
        res = next;
    }
}

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
    if (!res || (!node && !service && !hints)) {
        errno = EINVAL;
        return -1;
    }
    uroce::rdmacm::sync_devices();  // as rdma-core's ucma_init: finds (or starts) devices
    static const rdma_addrinfo kNoHints{};
    const rdma_addrinfo* h = hints ? hints : &kNoHints;
    auto* rai = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
    if (!rai) {
        errno = ENOMEM;
        return -1;
    }
    int ret = 0;
    if (node || service) {
        addrinfo ah{};
        if (h->ai_flags & RAI_PASSIVE) ah.ai_flags |= AI_PASSIVE;
        if (h->ai_flags & RAI_NUMERICHOST) ah.ai_flags |= AI_NUMERICHOST;
        if (h->ai_family != AF_IB) ah.ai_family = h->ai_family;
        switch (h->ai_qp_type) {
        case IBV_QPT_RC:
        case IBV_QPT_UC:
        case IBV_QPT_XRC_SEND:
        case IBV_QPT_XRC_RECV: ah.ai_socktype = SOCK_STREAM; break;
        case IBV_QPT_UD: ah.ai_socktype = SOCK_DGRAM; break;
        default: break;
        }
        switch (h->ai_port_space) {
        case RDMA_PS_TCP: ah.ai_protocol = IPPROTO_TCP; break;
        case RDMA_PS_UDP:
        case RDMA_PS_IPOIB: ah.ai_protocol = IPPROTO_UDP; break;
        case RDMA_PS_IB:
            ah.ai_protocol = ah.ai_socktype == SOCK_STREAM  ? IPPROTO_TCP
                             : ah.ai_socktype == SOCK_DGRAM ? IPPROTO_UDP
                                                            : 0;
            break;
        default: break;
        }
        addrinfo* ai = nullptr;
        ret = getaddrinfo(node, service, hints ? &ah : nullptr, &ai);
        if (ret) {
            // -1 with the getaddrinfo code (EAI_*, negative) in errno, as rdma-core does.
            free(rai);
            errno = ret;
            return -1;
        }
        if (h->ai_qp_type)
            rai->ai_qp_type = h->ai_qp_type;
        else
            rai->ai_qp_type = ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
        if (h->ai_port_space)
            rai->ai_port_space = h->ai_port_space;
        else
            rai->ai_port_space = ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP : RDMA_PS_TCP;
        rai->ai_family = ai->ai_family;
        if (ai->ai_flags & AI_PASSIVE) {
            rai->ai_flags = RAI_PASSIVE;
            if (ai->ai_canonname) rai->ai_src_canonname = strdup(ai->ai_canonname);
            rai->ai_src_addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
            rai->ai_src_len = ai->ai_addrlen;
        } else {
            if (ai->ai_canonname) rai->ai_dst_canonname = strdup(ai->ai_canonname);
            rai->ai_dst_addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
            rai->ai_dst_len = ai->ai_addrlen;
        }
        freeaddrinfo(ai);
        if (!rai->ai_src_addr && !rai->ai_dst_addr) ret = ENOMEM;
    } else {
        rai->ai_flags = h->ai_flags;
        rai->ai_family = h->ai_family;
        rai->ai_qp_type = h->ai_qp_type;
        rai->ai_port_space = h->ai_port_space;
        if (h->ai_dst_len) {
            rai->ai_dst_addr = copy_addr(h->ai_dst_addr, h->ai_dst_len);
            rai->ai_dst_len = h->ai_dst_len;
            if (!rai->ai_dst_addr) ret = ENOMEM;
        }
    }
    if (!ret && !rai->ai_src_len && h->ai_src_len) {
        rai->ai_src_addr = copy_addr(h->ai_src_addr, h->ai_src_len);
        rai->ai_src_len = h->ai_src_len;
        if (!rai->ai_src_addr) ret = ENOMEM;
    }
    if (ret) {
        rdma_freeaddrinfo(rai);
        errno = ret;
        return -1;
    }
    *res = rai;
    return 0;
}

}  // extern "C"
