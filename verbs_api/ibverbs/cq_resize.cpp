// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ibv_resize_cq: the library makes the new CQ ring and hands it to the device, which moves
// the completions not yet polled into it (emu/verbs/cq_resize.cpp) and from its answer on writes
// only there. Until the answer nothing may consume from the CQ or arm it (the device copies
// the consumer index and the arm), so the call holds the CQ's lock throughout, as
// ibv_poll_cq, ibv_start_poll..ibv_end_poll and ibv_req_notify_cq take it; and the
// context's objs_mu, under which device_gone writes flush completions into the ring. The
// ring is made before the request, so once the device has moved nothing can fail.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <utility>

#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

// A memfd of `slots` CQEs, sealed against shrinking (the device refuses it otherwise: a
// shrink under its mapping would crash it), mapped as map_ring maps the device's rings.
// 0 or an errno; *fd is the memfd to send.
int make_cq_ring(uint32_t slots, Ring* out, int* fd) {
    const size_t bytes = abi::ring_bytes(slots, sizeof(abi::Cqe));
    int f = memfd_create("uroce-cq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0) return errno;
    int e = 0;
    if (ftruncate(f, off_t(bytes)) != 0 || fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK) != 0) e = errno;
    void* p = e ? MAP_FAILED : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (!e && p == MAP_FAILED) e = errno;
    if (e) {
        close(f);
        return e;
    }
    out->base = static_cast<uint8_t*>(p);
    out->bytes = bytes;
    out->mask = slots - 1;
    out->stride = sizeof(abi::Cqe);
    *fd = f;
    return 0;
}

}  // namespace

extern "C" int ibv_resize_cq(ibv_cq* cq_pub, int cqe) {
    // The kernel's (rxe's) checks; the device makes them again, and the one against the
    // completions the CQ holds.
    if (cqe < 1 || uint32_t(cqe) > abi::kMaxCqe) return EINVAL;
    Cq* cq = cq_of(cq_pub);
    Context* ctx = ctx_of(cq_pub->context);
    const uint32_t slots = abi::cq_slots(uint32_t(cqe));
    Ring ring;
    int fd = -1;
    if (int e = make_cq_ring(slots, &ring, &fd)) return e;
    abi::Request req{};
    req.op = abi::Op::kResizeCq;
    req.u.resize_cq = abi::ResizeCqReq{cq_pub->handle, uint32_t(cqe), slots, 0};
    abi::Response resp{};
    int e;
    {
        std::lock_guard<std::mutex> g(ctx->objs_mu);  // lock order: objs_mu, then the CQ's
        lock_cq(cq);
        e = request(ctx, req, resp, nullptr, nullptr, fd);
        if (!e) {
            std::swap(cq->ring, ring);
            cq_pub->cqe = int(resp.u.resize_cq.cqe);
        }
        unlock_cq(cq);
    }
    close(fd);
    unmap_ring(ring);  // the old ring, or the new one the device refused
    return e;
}
