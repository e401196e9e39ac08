// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMACM_1.4 (rdma-core 60): rdma_resolve_addrinfo, rdma_query_addrinfo and
// rdma_write_cm_event. rdma-core does the DNS resolution itself (rdma_getaddrinfo) and has
// the kernel queue the event (RDMA_USER_CM_CMD_WRITE_CM_EVENT); here the library writes the
// event into the id's channel as it does for the address and route events it makes itself.
// The SA mode asks the InfiniBand subnet administrator, which a RoCE port has none of: the
// kernel refuses it (rdma_resolve_ib_service: EOPNOTSUPP), and so does uroce.
// docs/verbs-support.md, "librdmacm".

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>

#include "verbs_api/rdmacm/cma_internal.h"

using namespace uroce::rdmacm;

namespace {

// rdma_addrinfo's ai_flags, newer than rdma-core 44's header.
constexpr int kRaiSa = 0x10;
constexpr int kRaiDns = 0x20;

// The hints' mode before anything is started: 0, or the errno the call fails with.
int check_mode(Id* id, const char* node, const char* service, const rdma_addrinfo* hints) {
    if (!hints) return 0;
    bool sa = hints->ai_flags & kRaiSa, dns = hints->ai_flags & kRaiDns;
    if (sa && dns) return EOPNOTSUPP;
    if (!sa) return 0;
    if (node) return EOPNOTSUPP;  // rdma-core: a node name is not supported with RAI_SA
    if (!service) return EINVAL;
    // The kernel: an id not bound to a device is EINVAL; a port without an SA EOPNOTSUPP.
    return id->dev ? EOPNOTSUPP : EINVAL;
}

void end_resolving(Id* id) {
    std::lock_guard<std::mutex> l(id->mu);
    id->resolving_ai = false;
}

}  // namespace

extern "C" {

int rdma_resolve_addrinfo(rdma_cm_id* idp, const char* node, const char* service,
                          const rdma_addrinfo* hints) {
    if (!idp) return fail(EINVAL);
    Id* id = id_of(idp);
    {
        std::lock_guard<std::mutex> l(id->mu);
        if (id->resolving_ai) return fail(EBUSY);
        id->resolving_ai = true;
    }
    if (int e = check_mode(id, node, service, hints)) {
        end_resolving(id);
        return fail(e);
    }
    rdma_addrinfo* res = nullptr;
    if (rdma_getaddrinfo(node, service, hints, &res)) {
        // Nothing started, no event: errno is rdma_getaddrinfo's (EAI_* for a name that
        // does not resolve).
        int e = errno;
        end_resolving(id);
        return fail(e);
    }
    {
        std::lock_guard<std::mutex> l(id->mu);
        id->resolved_ai = res;
    }
    post_local(id, rdma_cm_event_type(kEventAddrinfoResolved), 0);
    return complete(id);
}

int rdma_query_addrinfo(rdma_cm_id* idp, rdma_addrinfo** info) {
    if (!idp || !info) return fail(EINVAL);
    Id* id = id_of(idp);
    std::lock_guard<std::mutex> l(id->mu);
    if (!id->resolving_ai || !id->resolved_ai) return fail(ENOENT);
    *info = id->resolved_ai;
    id->resolved_ai = nullptr;
    id->resolving_ai = false;
    return 0;
}

int rdma_write_cm_event(rdma_cm_id* idp, rdma_cm_event_type event, int status, uint64_t arg) {
    if (!idp || int(event) != kEventUser) return fail(EINVAL);
    post_local(id_of(idp), event, status, arg);
    return 0;
}

}  // extern "C"
