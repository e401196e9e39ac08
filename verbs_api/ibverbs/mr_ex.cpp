// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Memory registration through the newer entry points: ibv_reg_mr_ex (IBVERBS_1.15,
// rdma-core 59) and ibv_alloc_buf / ibv_free_buf / ibv_reg_buf_mr (IBVERBS_1.17, 64).
//
// uroce's device has no reg_mr_ex operation of its own, so these answer as rdma-core
// does for such a provider: ibv_reg_mr_ex turns the request into ibv_reg_mr_iova2 (an
// address) or ibv_reg_dmabuf_mr (a dma-buf fd; not supported here) and rejects what
// those cannot express (a DMA handle: EOPNOTSUPP); ibv_alloc_buf hands out page-aligned
// heap memory, which ibv_reg_buf_mr registers by address.
//
// The system's <infiniband/verbs.h> may be older than these verbs (Debian 12's rdma-core
// 44 has none of them), so their argument types are only declared here, and the layout
// of struct ibv_mr_init_attr is read through a copy of it (the ABI of the releases that
// have it: comp_mask says which fields the caller's header has and set).

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

struct ibv_mr_init_attr;  // verbs.h from rdma-core 59 on
struct ibv_dmah;

// What ibv_alloc_buf returns: opaque to applications (rdma-core keeps its definition in
// the provider-only driver.h), so the layout is uroce's own.
struct ibv_buf {
    void* addr;
    size_t size;
    ibv_pd* pd;
};

namespace {

// enum ibv_mr_init_attr_mask
constexpr uint64_t kMaskIova = 1 << 0;
constexpr uint64_t kMaskAddr = 1 << 1;
constexpr uint64_t kMaskFd = 1 << 2;
constexpr uint64_t kMaskFdOffset = 1 << 3;
constexpr uint64_t kMaskDmah = 1 << 4;  // needs a DMA handle, which ibv_alloc_dmah never gives
constexpr uint64_t kMaskBuf = 1 << 5;   // rdma-core 64

// struct ibv_mr_init_attr. buf is the field rdma-core 64 appended; a caller built
// against 59-63 never sets kMaskBuf, so it is never read past its structure.
struct MrInitAttr {
    size_t length;
    int access;
    uint64_t comp_mask;
    uint64_t iova;
    void* addr;
    int fd;
    uint64_t fd_offset;
    ibv_dmah* dmah;
    ibv_buf* buf;
};
static_assert(offsetof(MrInitAttr, comp_mask) == 16 && offsetof(MrInitAttr, fd_offset) == 48 &&
                  offsetof(MrInitAttr, buf) == 64,
              "struct ibv_mr_init_attr layout (rdma-core verbs.h)");

ibv_mr* fail(int err) {
    errno = err;
    return nullptr;
}

}  // namespace

extern "C" {

ibv_mr* ibv_reg_mr_ex(ibv_pd* pd, ibv_mr_init_attr* mr_init_attr) {
    const auto* in = reinterpret_cast<const MrInitAttr*>(mr_init_attr);
    if (!pd || !in) return fail(EINVAL);
    const uint64_t mask = in->comp_mask;
    // Unknown bits and DMA handles: rdma-core's generic path cannot express them either.
    if (mask & ~(kMaskIova | kMaskAddr | kMaskFd | kMaskFdOffset | kMaskDmah | kMaskBuf) ||
        mask & kMaskDmah)
        return fail(EOPNOTSUPP);

    void* addr = (mask & kMaskAddr) ? in->addr : nullptr;
    if (mask & kMaskBuf) {
        // Registers (part of) a buffer from ibv_alloc_buf: the range must lie in it.
        const ibv_buf* buf = in->buf;
        if (!buf || buf->pd != pd || !(mask & kMaskAddr) || (mask & (kMaskFd | kMaskFdOffset)))
            return fail(EINVAL);
        const auto base = reinterpret_cast<uintptr_t>(buf->addr);
        const auto start = reinterpret_cast<uintptr_t>(addr);
        if (start < base || start - base > buf->size || in->length > buf->size - (start - base))
            return fail(EINVAL);
    }
    if (mask & kMaskFd) {
        if ((mask & kMaskAddr) || !(mask & kMaskFdOffset) || !(mask & kMaskIova))
            return fail(EINVAL);
        return ibv_reg_dmabuf_mr(pd, in->fd_offset, in->length, in->iova, in->fd, in->access);
    }
    if (!(mask & kMaskAddr) || (mask & kMaskFdOffset)) return fail(EINVAL);
    const uint64_t iova = (mask & kMaskIova) ? in->iova : reinterpret_cast<uintptr_t>(addr);
    return ibv_reg_mr_iova2(pd, addr, in->length, iova, unsigned(in->access));
}

void* ibv_alloc_buf(ibv_pd* pd, size_t size, ibv_buf** buf) {
    if (!pd || !buf) {
        errno = EINVAL;
        return nullptr;
    }
    auto* b = new (std::nothrow) ibv_buf{nullptr, size, pd};
    if (!b) {
        errno = ENOMEM;
        return nullptr;
    }
    if (int err = posix_memalign(&b->addr, size_t(sysconf(_SC_PAGESIZE)), size)) {
        delete b;
        errno = err;
        return nullptr;
    }
    *buf = b;
    return b->addr;
}

void ibv_free_buf(ibv_buf* buf) {
    if (!buf) return;
    free(buf->addr);
    delete buf;
}

ibv_mr* ibv_reg_buf_mr(ibv_pd* pd, ibv_buf* buf, void* addr, size_t length, int access) {
    MrInitAttr attr{};
    attr.length = length;
    attr.access = access;
    attr.comp_mask = kMaskBuf | kMaskAddr;
    attr.addr = addr;
    attr.buf = buf;
    return ibv_reg_mr_ex(pd, reinterpret_cast<ibv_mr_init_attr*>(&attr));
}

}  // extern "C"
