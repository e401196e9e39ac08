// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Thread domains and parent domains (ibv_alloc_td(3), ibv_alloc_parent_domain(3)). A parent
// domain carries its PD's handle, so the device sees the PD itself; what the parent domain
// adds lives here: its pd_context and its allocators, which give the memory of the library
// buffers uroce makes for objects created on it (see take_mem).
#include <cerrno>
#include <new>

#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

namespace {
constexpr size_t kAlign = 64;  // a cache line: what the data path touches per WQE
}

Pd* hold_pd(ibv_pd* pd) {
    if (!pd || !pd_of(pd)->contained) return nullptr;
    pd_of(pd)->users.fetch_add(1, std::memory_order_relaxed);
    return pd_of(pd);
}

void release_pd(Pd* parent) {
    if (parent) parent->users.fetch_sub(1, std::memory_order_relaxed);
}

void* take_mem(ibv_pd* pd, size_t size, uint64_t type, bool* custom) {
    *custom = false;
    Pd* p = pd ? pd_of(pd) : nullptr;
    if (p && p->alloc && p->free) {
        void* m = p->alloc(pd, p->pd_context, size, kAlign, type);
        if (m != IBV_ALLOCATOR_USE_DEFAULT) {
            *custom = m != nullptr;
            return m;  // NULL: the allocator failed, and so does the call
        }
    }
    return ::operator new(size, std::align_val_t(kAlign), std::nothrow);
}

void give_mem(ibv_pd* pd, void* m, bool custom, uint64_t type) {
    if (!m) return;
    if (custom)
        pd_of(pd)->free(pd, pd_of(pd)->pd_context, m, type);
    else
        ::operator delete(m, std::align_val_t(kAlign));
}

ibv_td* alloc_td(ibv_context* c, ibv_td_init_attr* attr) {
    if (attr->comp_mask) {  // none is defined (mlx5's answer)
        errno = EINVAL;
        return nullptr;
    }
    auto* td = new Td();
    td->td.context = c;
    return &td->td;
}

int dealloc_td(ibv_td* td) {
    auto* t = reinterpret_cast<Td*>(td);
    if (t->parents.load()) return EBUSY;  // as mlx5: a parent domain still names it
    delete t;
    return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* c, ibv_parent_domain_init_attr* attr) {
    constexpr uint32_t kKnown =
        IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    // rdma-core's checks (a PD, known comp_mask bits), then uroce's own: the PD and the TD
    // of this context, and a PD rather than another parent domain.
    if (!attr->pd || (attr->comp_mask & ~kKnown) || attr->pd->context != c ||
        pd_of(attr->pd)->contained || (attr->td && attr->td->context != c)) {
        errno = EINVAL;
        return nullptr;
    }
    auto* p = new Pd();
    Pd* inner = pd_of(attr->pd);
    p->pd.context = c;
    p->pd.handle = inner->pd.handle;
    p->contained = inner;
    inner->parents.fetch_add(1);
    if (attr->td) {
        p->td = reinterpret_cast<Td*>(attr->td);
        p->td->parents.fetch_add(1);
    }
    if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
        p->alloc = attr->alloc;
        p->free = attr->free;
    }
    if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) p->pd_context = attr->pd_context;
    return &p->pd;
}

int dealloc_parent_domain(Pd* p) {
    // Its objects may still give memory back through its allocator.
    if (p->users.load()) return EBUSY;
    p->contained->parents.fetch_sub(1);
    if (p->td) p->td->parents.fetch_sub(1);
    delete p;
    return 0;
}

}  // namespace uroce::verbs
