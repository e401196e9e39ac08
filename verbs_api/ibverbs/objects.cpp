// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Protection domains, memory regions, completion channels, CQs and events.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace {

// The kernel pins an MR's pages when it is registered, so an unmapped range fails
// with EFAULT then rather than later; mincore gives the same answer without pinning.
bool range_mapped(const void* addr, size_t length) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~uintptr_t(page - 1);
    uintptr_t end = reinterpret_cast<uintptr_t>(addr) + length;
    unsigned char vec[4096];
    while (start < end) {
        size_t chunk = size_t(end - start);
        size_t max = sizeof vec * size_t(page);
        if (chunk > max) chunk = max;
        if (mincore(reinterpret_cast<void*>(start), chunk, vec) != 0 && errno == ENOMEM)
            return false;
        start += chunk;
    }
    return true;
}

// Access bits IBV_ACCESS_OPTIONAL_RANGE may be ignored by a provider (verbs.h).
constexpr unsigned kOptionalAccess = IBV_ACCESS_OPTIONAL_RANGE;

// The object (Cq, Qp or Srq) an event's cookie names, its count of events handed out
// (`reported`, a member of it) raised: its destroy waits for their acks. nullptr when it was
// destroyed after the device queued the event: the event is dropped, as the kernel drops a
// destroyed object's pending events.
pthread_mutex_t* public_mutex(Cq* c) { return &c->cq.mutex; }
pthread_mutex_t* public_mutex(Qp* q) { return &q->qpx.qp_base.mutex; }
pthread_mutex_t* public_mutex(Srq* s) { return &s->srq.mutex; }

// Which member of ibv_async_event.element an event names.
enum class Element { kCq, kQp, kSrq, kPort };
Element element_of(ibv_event_type t) {
    switch (t) {
    case IBV_EVENT_CQ_ERR: return Element::kCq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: return Element::kQp;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: return Element::kSrq;
    default: return Element::kPort;
    }
}

// The next event the device sent on `fd` (a pipe): read(2), again when a signal interrupts it.
template <typename Event>
ssize_t read_event(int fd, Event* ev) {
    ssize_t n;
    do {
        n = read(fd, ev, sizeof *ev);
    } while (n < 0 && errno == EINTR);
    return n;
}

// A public object's count of events reported or acknowledged.
template <typename Obj>
using EventCount = uint32_t Obj::*;

// One event of the public object `o` acknowledged: its destroy may be waiting for it.
template <typename Pub>
void acked(Pub* o, EventCount<Pub> completed) {
    pthread_mutex_lock(&o->mutex);
    ++(o->*completed);
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->mutex);
}

template <typename Obj>
Obj* hand_out(Context* ctx, uint64_t cookie, EventCount<Obj> reported) {
    std::lock_guard<std::mutex> live(ctx->conn->targets_mu);
    auto it = ctx->conn->event_targets.find(cookie);
    if (it == ctx->conn->event_targets.end()) return nullptr;
    auto* obj = static_cast<Obj*>(it->second);
    pthread_mutex_t* mu = public_mutex(obj);
    pthread_mutex_lock(mu);
    ++(obj->*reported);
    pthread_mutex_unlock(mu);
    return obj;
}

}  // namespace

namespace uroce::verbs {

ibv_pd* pd_for(ibv_context* context, abi::Request& req) {
    abi::Response resp{};
    if (int e = request(ctx_of(context), req, resp)) {
        errno = e;
        return nullptr;
    }
    auto* pd = new Pd();
    pd->pd.context = context;
    pd->pd.handle = resp.u.pd.pd;
    return &pd->pd;
}

Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector) {
    if (cqe < 1 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
        errno = EINVAL;
        return nullptr;
    }
    auto* cq = new Cq();
    abi::Request req{};
    req.op = abi::Op::kCreateCq;
    req.u.create_cq.cqe = uint32_t(cqe);
    req.u.create_cq.channel = channel ? int32_t(reinterpret_cast<Channel*>(channel)->handle) : -1;
    cq->cookie = new_cookie(ctx_of(context));
    req.u.create_cq.cookie = cq->cookie;
    abi::Response resp{};
    int fds[abi::kMaxFds], nfds = 0;
    int e = request(ctx_of(context), req, resp, fds, &nfds);
    const bool created = !e;
    const auto& r = resp.u.create_cq;
    e = take_ring(e, fds, nfds, r.slots, sizeof(abi::Cqe), &cq->ring);
    if (e) {
        if (created) give_back(ctx_of(context), abi::Op::kDestroyCq, r.handle);
        delete cq;
        errno = e;
        return nullptr;
    }
    cq->cq.context = context;
    cq->cq.channel = channel;
    cq->cq.cq_context = cq_context;
    cq->cq.handle = r.handle;
    cq->cq.cqe = int(r.cqe);
    pthread_mutex_init(&cq->cq.mutex, nullptr);
    pthread_cond_init(&cq->cq.cond, nullptr);
    if (channel) ++channel->refcnt;
    track(ctx_of(context), cq);
    return cq;
}

}  // namespace uroce::verbs

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
    abi::Request req{};
    req.op = abi::Op::kAllocPd;
    return pd_for(context, req);
}

int ibv_dealloc_pd(ibv_pd* pd) {
    // A parent domain goes alone; its PD stays, and is busy while one names it (mlx5).
    if (pd_of(pd)->contained) return dealloc_parent_domain(pd_of(pd));
    if (pd_of(pd)->parents.load()) return EBUSY;
    abi::Request req{};
    req.op = abi::Op::kDeallocPd;
    req.u.pd.pd = pd->handle;
    abi::Response resp{};
    if (int e = destroy_request(ctx_of(pd->context), req, resp)) return e;
    delete reinterpret_cast<Pd*>(pd);
    return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
    access &= ~kOptionalAccess;
    // An ODP MR needs no pages at registration (rxe only snapshots what is mapped): its
    // range may be mapped later, and the implicit one (NULL, SIZE_MAX) is everything.
    if (!(access & IBV_ACCESS_ON_DEMAND) && length && !range_mapped(addr, length)) {
        errno = EFAULT;
        return nullptr;
    }
    abi::Request req{};
    req.op = abi::Op::kRegMr;
    req.u.reg_mr.pd = pd->handle;
    req.u.reg_mr.access = access;
    req.u.reg_mr.addr = reinterpret_cast<uint64_t>(addr);
    req.u.reg_mr.length = length;
    req.u.reg_mr.iova = iova;
    abi::Response resp{};
    if (int e = request(ctx_of(pd->context), req, resp)) {
        errno = e;
        return nullptr;
    }
    auto* mr = new Mr();
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.handle = resp.u.reg_mr.handle;
    mr->mr.lkey = resp.u.reg_mr.lkey;
    mr->mr.rkey = resp.u.reg_mr.rkey;
    return &mr->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
    return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uint64_t>(addr), unsigned(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    return ibv_reg_mr_iova2(pd, addr, length, iova, unsigned(access));
}

// rdma-core's own checks first (IBV_REREG_MR_ERR_INPUT, the MR untouched), then the
// device's (IBV_REREG_MR_ERR_CMD with its errno, as the kernel's; the MR is untouched then
// too). The keys stay (rxe, mlx5); the struct is brought up to date as rdma-core does.
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
    constexpr int kFlags =
        IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    const bool trans = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    // A missing PD, or one of another context (whose handle would name an unrelated PD of
    // this one), is uroce's own check: rdma-core would dereference it.
    if ((flags & ~kFlags) || (trans && (!length || !addr)) ||
        (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
        ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != mr->context))) {
        errno = EINVAL;
        return IBV_REREG_MR_ERR_INPUT;
    }
    int e = trans && !range_mapped(addr, length) ? EFAULT : 0;  // as ibv_reg_mr
    abi::Request req{};
    req.op = abi::Op::kReregMr;
    auto& r = req.u.rereg_mr;
    r.handle = mr->handle;
    r.flags = uint32_t(flags);
    r.pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd->handle : 0;
    r.access = unsigned(access) & ~kOptionalAccess;
    r.addr = reinterpret_cast<uint64_t>(addr);
    r.length = length;
    abi::Response resp{};
    if (!e) e = request(ctx_of(mr->context), req, resp);
    if (e) {
        errno = e;
        return IBV_REREG_MR_ERR_CMD;
    }
    if (flags & IBV_REREG_MR_CHANGE_PD) mr->pd = pd;
    if (trans) {
        mr->addr = addr;
        mr->length = length;
    }
    mr->lkey = resp.u.reg_mr.lkey;
    mr->rkey = resp.u.reg_mr.rkey;
    return 0;
}

int ibv_dereg_mr(ibv_mr* mr) {
    if (int e = destroy_handle(ctx_of(mr->context), abi::Op::kDeregMr, mr->handle)) return e;
    delete reinterpret_cast<Mr*>(mr);
    return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
    abi::Request req{};
    req.op = abi::Op::kCreateCompChannel;
    abi::Response resp{};
    int fds[abi::kMaxFds], nfds = 0;
    int e = request(ctx_of(context), req, resp, fds, &nfds);
    if (!e && nfds != 1) e = EPROTO;
    if (e) {
        for (int i = 0; i < nfds; ++i) close(fds[i]);
        errno = e;
        return nullptr;
    }
    auto* ch = new Channel();
    ch->ch.context = context;
    ch->ch.fd = fds[0];
    ch->ch.refcnt = 0;
    ch->handle = resp.u.channel.handle;
    return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
    if (channel->refcnt) return EBUSY;
    auto* ch = reinterpret_cast<Channel*>(channel);
    if (int e = destroy_handle(ctx_of(channel->context), abi::Op::kDestroyCompChannel, ch->handle))
        return e;
    close(channel->fd);
    delete ch;
    return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
    Cq* cq = create_cq(context, cqe, cq_context, channel, comp_vector);
    return cq ? &cq->cq : nullptr;
}

int ibv_destroy_cq(ibv_cq* cq_pub) {
    Cq* cq = cq_of(cq_pub);
    if (int e = destroy_handle(ctx_of(cq_pub->context), abi::Op::kDestroyCq, cq_pub->handle))
        return e;
    untrack(ctx_of(cq_pub->context), cq);
    // As in rdma-core: every event handed out must be acknowledged first.
    pthread_mutex_lock(&cq_pub->mutex);
    while (cq_pub->comp_events_completed != cq->comp_events_reported ||
           cq_pub->async_events_completed != cq->async_events_reported)
        pthread_cond_wait(&cq_pub->cond, &cq_pub->mutex);
    pthread_mutex_unlock(&cq_pub->mutex);
    if (cq_pub->channel) --cq_pub->channel->refcnt;
    release_pd(cq->parent);
    unmap_ring(cq->ring);
    delete cq;
    return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    Context* ctx = ctx_of(channel->context);
    for (;;) {
        abi::CompEvent ev;
        ssize_t n = read_event(channel->fd, &ev);
        Cq* c = nullptr;
        if (n == 0) {
            // The device closed its end of the pipe: it is gone. The events it can no longer
            // send are device_gone's (one per CQ that was armed), then EIO, as the kernel's
            // completion channel after disassociation.
            device_gone(ctx);
            c = take_gone_event(ctx, channel);
        } else if (n == ssize_t(sizeof ev)) {
            // An event of a CQ destroyed since it was queued is dropped: the kernel takes a
            // CQ's events off its channel when the CQ is destroyed.
            c = hand_out(ctx, ev.cq_cookie, &Cq::comp_events_reported);
            if (!c) continue;
        }
        if (!c) {
            if (n >= 0) errno = EIO;
            return -1;
        }
        *cq = &c->cq;
        *cq_context = c->cq.cq_context;
        return 0;
    }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_signal(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    for (;;) {
        abi::AsyncEvent ev;
        ssize_t n = read_event(context->async_fd, &ev);
        if (n == 0) {
            // The device closed its end of the pipe, after every event it had sent: it is gone.
            // IBV_EVENT_DEVICE_FATAL once, after the flush completions are written, then EIO,
            // as the kernel's async event file after disassociation.
            Context* ctx = ctx_of(context);
            device_gone(ctx);
            if (!ctx->fatal_reported.exchange(true)) {
                event->event_type = IBV_EVENT_DEVICE_FATAL;
                event->element.port_num = 0;
                return 0;
            }
        }
        if (n != ssize_t(sizeof ev)) {
            if (n >= 0) errno = EIO;
            return -1;
        }
        event->event_type = ibv_event_type(ev.event_type);
        switch (element_of(event->event_type)) {
        case Element::kCq: {
            Cq* c = hand_out(ctx_of(context), ev.cookie, &Cq::async_events_reported);
            if (!c) continue;
            event->element.cq = &c->cq;
            break;
        }
        case Element::kQp: {
            Qp* q = hand_out(ctx_of(context), ev.cookie, &Qp::events_reported);
            if (!q) continue;
            event->element.qp = &q->qpx.qp_base;
            break;
        }
        case Element::kSrq: {
            Srq* q = hand_out(ctx_of(context), ev.cookie, &Srq::events_reported);
            if (!q) continue;
            event->element.srq = &q->srq;
            break;
        }
        case Element::kPort: event->element.port_num = int(ev.cookie); break;
        }
        return 0;
    }
}

void ibv_ack_async_event(ibv_async_event* event) {
    switch (element_of(event->event_type)) {
    case Element::kCq: acked(event->element.cq, &ibv_cq::async_events_completed); break;
    case Element::kQp: acked(event->element.qp, &ibv_qp::events_completed); break;
    case Element::kSrq: acked(event->element.srq, &ibv_srq::events_completed); break;
    case Element::kPort: break;
    }
}

}  // extern "C"
