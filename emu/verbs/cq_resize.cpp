// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_resize_cq on the device: the CQ's completions move into a new ring the application
// made. The engine thread is the ring's only producer and runs this between two of its
// turns, so no completion is written meanwhile; from the answer on it writes only into the
// new ring, and the old one is unmapped here (the library unmaps its own mapping once it
// has swapped rings).
#include <cerrno>

#include "emu/engine/transport_env.h"
#include "emu/transport/rc_requester.h"
#include "emu/verbs/control_verbs.h"

namespace uroce::emu {

int ControlVerbs::resize_cq(Session& s, const abi::ResizeCqReq& r, int fd, abi::ResizeCqResp* out) {
    Cq* cq = env_.cqs.get(r.handle);
    if (!owned(s, cq)) return EINVAL;
    // rxe's checks: a size the device could not create, or below what the CQ holds.
    if (r.cqe < 1 || r.cqe > abi::kMaxCqe) return EINVAL;
    if (r.slots != abi::cq_slots(r.cqe)) return EINVAL;
    if (fd < 0) return EBADF;
    // UD sends posted before the call complete first (as in destroy_qp): their doorbell may
    // still be unread when this command runs, and on an HCA they would have been sent, and
    // their completions be in the CQ, by the time the command comes (rdma-core's
    // test_resize_cq posts sends, then shrinks the CQ below them and expects EINVAL).
    for (uint32_t qpn : s.qps)
        if (Qp* qp = env_.qps.get(qpn);
            qp && qp->type == IBV_QPT_UD && qp->state == IBV_QPS_RTS && qp->send_cq == r.handle)
            env_.requester.progress(*qp);
    // The CQEs not yet polled: the application's consumer index up to the device's own
    // producer index. An index that claims more than the ring holds is garbage.
    const uint32_t cons = cq->hdr->cons.load(std::memory_order_acquire);
    const uint32_t held = cq->prod - cons;
    if (held > cq->mask + 1 || held > r.cqe) return EINVAL;
    SharedRegion ring;
    if (int err = ring.adopt(fd, abi::ring_bytes(r.slots, sizeof(abi::Cqe)))) return err;
    auto* hdr = static_cast<abi::RingHeader*>(ring.data());
    auto* slots =
        reinterpret_cast<abi::Cqe*>(static_cast<uint8_t*>(ring.data()) + sizeof(abi::RingHeader));
    // The same free-running indices in the new ring: the library's consumer index, taken
    // under its CQ lock, stays right, and so does an arm (it travels with the CQEs).
    const uint32_t mask = r.slots - 1;
    for (uint32_t i = cons; i != cq->prod; ++i) slots[i & mask] = cq->slots[i & cq->mask];
    hdr->cons.store(cons, std::memory_order_relaxed);
    hdr->arm.store(cq->hdr->arm.load(std::memory_order_relaxed), std::memory_order_relaxed);
    hdr->prod.store(cq->prod, std::memory_order_release);
    cq->ring.swap(ring);  // `ring` now holds the old one, unmapped on return
    cq->hdr = hdr;
    cq->slots = slots;
    cq->mask = mask;
    cq->cqe = mask;
    out->cqe = cq->cqe;
    return 0;
}

}  // namespace uroce::emu
