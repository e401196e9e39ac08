// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_advise_mr: prefetch hints for on-demand paging MRs. The device checks each SGE
// against its MR table (lkey, PD, ODP, bounds); the prefetch itself is done here, in the
// process that owns the memory, since the device never maps it.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

namespace {

// Faults the range in as the kernel's synchronous prefetch does (hmm_range_fault): the
// pages become present, writable for PREFETCH_WRITE. A hole, or writing memory that is
// read-only, is EFAULT, as there (madvise says EINVAL for the latter; ENOMEM for a hole).
// A kernel without MADV_POPULATE_* (before 5.14; a zero-length call tells) only loses the
// hint.
int populate(uint64_t va, uint64_t length, bool write) {
    static const bool supported = madvise(nullptr, 0, MADV_POPULATE_READ) == 0;
    if (length == 0 || !supported) return 0;
    uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    uint64_t start = va & ~(page - 1);
    if (madvise(reinterpret_cast<void*>(start), size_t(va + length - start),
                write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
        return 0;
    return EFAULT;
}

}  // namespace

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge) {
    // The order of the kernel's checks: uverbs' attributes (flags, a non-empty SGE list)
    // first, then the driver's (the advice).
    if (flags & ~uint32_t(IBV_ADVISE_MR_FLAG_FLUSH)) return EINVAL;
    if (num_sge == 0 || !sg_list) return EINVAL;
    if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
        advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
        return EOPNOTSUPP;
    if (device_is_gone(pd->context)) return EIO;
    // Asynchronous advice is best effort: checked, then left to the first access, which
    // faults the pages in anyway. NO_FAULT maps only what is present, which is nothing to do.
    const bool fault =
        (flags & IBV_ADVISE_MR_FLAG_FLUSH) && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
    for (uint32_t i = 0; i < num_sge; ++i) {
        abi::Request req{};
        req.op = abi::Op::kAdviseMr;
        req.u.advise_mr.pd = pd->handle;
        req.u.advise_mr.lkey = sg_list[i].lkey;
        req.u.advise_mr.addr = sg_list[i].addr;
        req.u.advise_mr.length = sg_list[i].length;
        abi::Response resp{};
        if (int e = request(ctx_of(pd->context), req, resp)) return e;
        if (fault) {
            int e = populate(resp.u.advise_mr.va, sg_list[i].length,
                             advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE);
            if (e) return e;
        }
    }
    return 0;
}

}  // namespace uroce::verbs
