// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_create_cq_ex and the polling interface of struct ibv_cq_ex (ibv_create_cq_ex(3)):
// ibv_start_poll/ibv_next_poll/ibv_end_poll walk the same CQ ring ibv_poll_cq reads, and
// the ibv_wc_read_* accessors read the current CQE where it lies.
#include <cerrno>
#include <climits>
#include <ctime>

#include "emu/abi/clock.h"
#include "verbs_api/ibverbs/internal.h"

namespace uroce::verbs {

namespace {

// The work completion fields uroce can give: those of struct ibv_wc and the device's
// timestamp; the others (VLAN, flow tag, tag matching) are EOPNOTSUPP, as rxe.
constexpr uint64_t kWcFlags = uint64_t(IBV_WC_STANDARD_FLAGS) |
                              IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                              IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

// Makes CQE `idx` the current one.
void load(Cq* cq, uint32_t idx) {
    cq->poll_idx = idx;
    cq->poll_cqe = reinterpret_cast<const abi::Cqe*>(cq->ring.slot(idx));
    cq->cqx.wr_id = cq->poll_cqe->wr_id;
    cq->cqx.status = ibv_wc_status(cq->poll_cqe->status);
}

int start_poll(ibv_cq_ex* x, ibv_poll_cq_attr* attr) {
    if (attr->comp_mask) return EINVAL;  // as mlx5
    Cq* cq = cq_of(x);
    for (bool again = true;; again = false) {
        lock_cq(cq);  // held until end_poll
        abi::RingHeader* h = cq->ring.hdr();
        uint32_t cons = h->cons.load(std::memory_order_relaxed);
        if (cons != h->prod.load(std::memory_order_acquire)) {
            load(cq, cons);
            return 0;
        }
        unlock_cq(cq);  // the caller does not call end_poll after an error
        // Having given the CPU away, look again, as ibv_poll_cq does.
        if (!again || !empty_poll(cq)) return ENOENT;
    }
}

int next_poll(ibv_cq_ex* x) {
    Cq* cq = cq_of(x);
    uint32_t next = cq->poll_idx + 1;
    if (next == cq->ring.hdr()->prod.load(std::memory_order_acquire)) return ENOENT;
    load(cq, next);
    return 0;
}

void end_poll(ibv_cq_ex* x) {
    Cq* cq = cq_of(x);
    // Everything up to the current CQE was read: the device may reuse those slots.
    cq->ring.hdr()->cons.store(cq->poll_idx + 1, std::memory_order_release);
    unlock_cq(cq);
}

// The accessors: field M of the current CQE as the ibv_cq_ex member's type R. The
// invalidated rkey of a SEND_WITH_INV is read through read_imm_data, as in verbs.h.
template <typename R, auto M>
R field(ibv_cq_ex* x) {
    return R(cq_of(x)->poll_cqe->*M);
}

// The completion time as CLOCK_REALTIME: the device clock is CLOCK_MONOTONIC.
uint64_t read_wallclock_ns(ibv_cq_ex* x) {
    timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t now = uint64_t(rt.tv_sec) * 1000000000ull + uint64_t(rt.tv_nsec);
    return cq_of(x)->poll_cqe->timestamp + (now - abi::device_clock_ns());
}

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* attr) {
    // The checks and errno values of mlx5's create_cq. IBV_CQ_INIT_ATTR_MASK_PD wants a
    // parent domain of this context (mlx5: EINVAL for a plain PD); the CQ holds it.
    const bool with_pd = attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD;
    int err = 0;
    if (!attr->cqe || attr->cqe > INT_MAX || attr->comp_vector > INT_MAX)
        err = EINVAL;
    else if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
        err = EINVAL;
    else if (with_pd && (!attr->parent_domain || !pd_of(attr->parent_domain)->contained ||
                         attr->parent_domain->context != c))
        err = EINVAL;
    else if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
             (attr->flags &
              ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)))
        err = EINVAL;  // flags rdma-core does not define
    else if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
             (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))
        err = EOPNOTSUPP;  // an overrun CQ always goes to error here (rxe answers the same)
    else if (attr->wc_flags & ~kWcFlags)
        err = EOPNOTSUPP;
    if (err) {
        errno = err;
        return nullptr;
    }
    Cq* cq = create_cq(c, int(attr->cqe), attr->cq_context, attr->channel, int(attr->comp_vector));
    if (!cq) return nullptr;
    if (with_pd) cq->parent = hold_pd(attr->parent_domain);
    cq->single_threaded = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
                          (attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
    ibv_cq_ex& x = cq->cqx;
    x.start_poll = start_poll;
    x.next_poll = next_poll;
    x.end_poll = end_poll;
    x.read_opcode = field<ibv_wc_opcode, &abi::Cqe::opcode>;
    x.read_vendor_err = field<uint32_t, &abi::Cqe::vendor_err>;
    x.read_wc_flags = field<unsigned int, &abi::Cqe::wc_flags>;
    // As rxe and mlx5: an accessor exists only for the fields asked for in wc_flags.
    uint64_t f = attr->wc_flags;
    if (f & IBV_WC_EX_WITH_BYTE_LEN) x.read_byte_len = field<uint32_t, &abi::Cqe::byte_len>;
    if (f & IBV_WC_EX_WITH_IMM) x.read_imm_data = field<__be32, &abi::Cqe::imm_data>;
    if (f & IBV_WC_EX_WITH_QP_NUM) x.read_qp_num = field<uint32_t, &abi::Cqe::qp_num>;
    if (f & IBV_WC_EX_WITH_SRC_QP) x.read_src_qp = field<uint32_t, &abi::Cqe::src_qp>;
    if (f & IBV_WC_EX_WITH_SLID) x.read_slid = field<uint32_t, &abi::Cqe::slid>;
    if (f & IBV_WC_EX_WITH_SL) x.read_sl = field<uint8_t, &abi::Cqe::sl>;
    if (f & IBV_WC_EX_WITH_DLID_PATH_BITS)
        x.read_dlid_path_bits = field<uint8_t, &abi::Cqe::dlid_path_bits>;
    if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
        x.read_completion_ts = field<uint64_t, &abi::Cqe::timestamp>;
    if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
        x.read_completion_wallclock_ns = read_wallclock_ns;
    return &x;
}

}  // namespace uroce::verbs
