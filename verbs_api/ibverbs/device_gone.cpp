// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// When the device goes away (docs/behaviour.md, "When the device goes away"): the watcher
// thread that notices it, and what the library then does in the device's stead, as the
// kernel does for a disassociated device: flush completions for every outstanding work
// request, the completion events of armed CQs, IBV_EVENT_DEVICE_FATAL (objects.cpp hands
// those two out) and EIO from every verb that needs the device.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emu/abi/clock.h"
#include "emu/abi/wc_opcode.h"
#include "verbs_api/ibverbs/internal.h"
#include "verbs_api/ibverbs/uroce_private.h"

namespace uroce::verbs {

namespace {

// The watcher's stack: it only polls and flushes, and runs librdmacm's hooks.
constexpr size_t kWatcherStack = 256 * 1024;

// Writes one flush completion into a CQ ring, as the device's push_cqe would have. Only
// device_gone calls it, under gone_mu, once the device is dead: the library is then the
// ring's one producer (the device stopped writing before its end of the control socket
// closed: a killed process loses its memory before its files, and uroced closes a session's
// socket after the engine has let go of it). poll_cq, the consumer, runs meanwhile: the
// slot is written before the producer index that publishes it. A full ring loses the
// completion, as an overrun CQ does.
void push_flush(Cq* cq, uint64_t wr_id, ibv_wc_opcode opcode, uint32_t qpn) {
    abi::RingHeader* h = cq->ring.hdr();
    uint32_t prod = h->prod.load(std::memory_order_relaxed);
    if (uint32_t(prod - h->cons.load(std::memory_order_acquire)) > cq->ring.mask) return;
    abi::Cqe c{};
    c.wr_id = wr_id;
    c.status = IBV_WC_WR_FLUSH_ERR;
    c.opcode = opcode;
    c.qp_num = qpn;
    c.timestamp = abi::device_clock_ns();
    std::memcpy(cq->ring.slot(prod), &c, sizeof c);
    h->prod.store(prod + 1, std::memory_order_release);
    // The completion event, as push_cqe raises it: a flush is an error completion, so an arm
    // of either kind takes it; the exchange consumes the arm, so one arm gives one event.
    // Completions the CQ held before raise none (an arm is for the next one). objs_mu held.
    if (cq->cq.channel && h->arm.exchange(abi::kCqArmNone) != abi::kCqArmNone)
        cq->gone_event = true;
}

// The CQ a flush goes to, if the application has not destroyed it (after the device is gone
// ibv_destroy_cq succeeds even while QPs still name the CQ).
Cq* live_cq(Context* ctx, ibv_cq* cq) {
    if (!cq) return nullptr;
    Cq* c = cq_of(cq);
    return ctx->cqs.count(c) ? c : nullptr;
}

// The entries [cons, prod) of a ring, oldest first; afterwards the ring is empty. The
// device publishes as `cons` the oldest send WQE it has not completed (complete_send) and
// the next receive WQE it would take (take_recv), so these are the work requests still
// outstanding, short of a receive the device had taken for a message still arriving. The
// device is gone, so the library is the consumer now. Ring lock held.
template <typename Fn>
void drain(Ring& ring, Fn&& fn) {
    abi::RingHeader* h = ring.hdr();
    uint32_t prod = h->prod.load(std::memory_order_relaxed);
    uint32_t cons = h->cons.load(std::memory_order_acquire);
    if (uint32_t(prod - cons) > ring.mask + 1) cons = prod - (ring.mask + 1);  // trust nothing
    for (; cons != prod; ++cons) fn(ring.slot(cons));
    h->cons.store(prod, std::memory_order_release);
}

void flush_qp(Context* ctx, Qp* qp) {
    ibv_qp& q = qp->qpx.qp_base;
    if (qp->sq.base) {
        Cq* cq = live_cq(ctx, q.send_cq);
        qp->sq_lock.lock();  // a post_send in progress ends first; later ones see `gone`
        drain(qp->sq, [&](const uint8_t* slot) {
            abi::SendWqe w;
            std::memcpy(&w, slot, sizeof w);
            if (cq) push_flush(cq, w.wr_id, abi::wc_opcode_for(w.opcode), q.qp_num);
        });
        qp->sq_lock.unlock();
    }
    if (qp->rq.base && !q.srq && q.qp_type != IBV_QPT_XRC_SEND && q.qp_type != IBV_QPT_XRC_RECV) {
        Cq* cq = live_cq(ctx, q.recv_cq);
        qp->rq_lock.lock();
        drain(qp->rq, [&](const uint8_t* slot) {
            abi::RecvWqe r;
            std::memcpy(&r, slot, sizeof r);
            if (cq) push_flush(cq, r.wr_id, IBV_WC_RECV, q.qp_num);
        });
        qp->rq_lock.unlock();
    }
}

// An SRQ's receives belong to no QP until one takes them; they complete on an XRC SRQ's CQ,
// else on the receive CQ of a QP attached to it (with that QP's number), else nowhere.
void flush_srq(Context* ctx, Srq* srq) {
    Cq* cq = live_cq(ctx, srq->xrc_cq);
    uint32_t qpn = 0;
    if (!srq->xrc_cq) {
        for (Qp* qp : ctx->qps) {
            if (qp->qpx.qp_base.srq != &srq->srq) continue;
            if ((cq = live_cq(ctx, qp->qpx.qp_base.recv_cq))) {
                qpn = qp->qpx.qp_base.qp_num;
                break;
            }
        }
    }
    srq->lock.lock();
    drain(srq->ring, [&](const uint8_t* slot) {
        abi::RecvWqe r;
        std::memcpy(&r, slot, sizeof r);
        if (cq) push_flush(cq, r.wr_id, IBV_WC_RECV, qpn);
    });
    srq->lock.unlock();
}

void run_hooks(Context* ctx) {
    std::vector<std::pair<GoneHook, void*>> hooks;
    {
        std::lock_guard<std::mutex> g(ctx->hooks_mu);
        ctx->hooks_fired = true;
        hooks.swap(ctx->hooks);
    }
    for (auto& [fn, arg] : hooks) fn(&ctx->vctx.context, arg);
}

void* watch(void* arg) {
    auto* ctx = static_cast<Context*>(arg);
    // POLLRDHUP only: the device's replies to requests do not wake us. Its end closing
    // raises POLLHUP, which poll reports whatever was asked.
    pollfd p[2] = {{ctx->sock, POLLRDHUP, 0}, {ctx->watcher_wake, POLLIN, 0}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR || errno == ENOMEM) continue;
            return nullptr;
        }
        if (p[1].revents) return nullptr;  // ibv_close_device
        if (p[0].revents) {
            device_gone(ctx);
            return nullptr;
        }
    }
}

}  // namespace

void device_gone(Context* ctx) {
    {
        std::lock_guard<std::mutex> g(ctx->gone_mu);
        if (ctx->flushed) return;
        // Before any ring lock is taken: a post that takes one after us sees it and fails.
        ctx->gone.store(true, std::memory_order_seq_cst);
        std::lock_guard<std::mutex> o(ctx->objs_mu);
        for (Qp* qp : ctx->qps) flush_qp(ctx, qp);
        for (Srq* srq : ctx->srqs) flush_srq(ctx, srq);
        ctx->flushed = true;
    }
    run_hooks(ctx);
}

Cq* take_gone_event(Context* ctx, ibv_comp_channel* channel) {
    std::lock_guard<std::mutex> g(ctx->objs_mu);  // the CQ cannot be destroyed meanwhile
    for (Cq* cq : ctx->cqs) {
        if (cq->cq.channel != channel || !cq->gone_event) continue;
        cq->gone_event = false;
        pthread_mutex_lock(&cq->cq.mutex);
        ++cq->comp_events_reported;  // its destroy waits for the ack
        pthread_mutex_unlock(&cq->cq.mutex);
        return cq;
    }
    return nullptr;
}

int start_watcher(Context* ctx) {
    ctx->watcher_wake = eventfd(0, EFD_CLOEXEC);
    if (ctx->watcher_wake < 0) return errno;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kWatcherStack);
    // The watcher takes none of the application's signals (perftest's SIGALRM, a SIGINT
    // handler): it starts with all of them blocked.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&ctx->watcher, &attr, watch, ctx);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&attr);
    if (e) {
        close(ctx->watcher_wake);
        ctx->watcher_wake = -1;
        return e;
    }
    pthread_setname_np(ctx->watcher, "uroce-watch");
    ctx->watcher_pid = getpid();
    ctx->watching = true;
    return 0;
}

void stop_watcher(Context* ctx) {
    if (!ctx->watching) return;
    // A child forked after ibv_open_device has the context but not the thread (fork copies
    // only the calling thread), and shares the eventfd: waking it would stop the parent's
    // watcher. There is nothing to stop and nothing to join.
    if (ctx->watcher_pid == getpid()) {
        uint64_t one = 1;
        ssize_t r = write(ctx->watcher_wake, &one, sizeof one);
        (void)r;  // cannot fail: one +1 on a fresh eventfd
        pthread_join(ctx->watcher, nullptr);
    }
    close(ctx->watcher_wake);
    ctx->watching = false;
}

namespace {
// Whether the events of obj may be handed out: by whichever context of the connection
// reads them (Conn::event_targets, by the cookie the device echoes).
template <typename T>
void set_target(Context* ctx, T* obj, bool live) {
    std::lock_guard<std::mutex> g(ctx->conn->targets_mu);
    if (live)
        ctx->conn->event_targets.emplace(obj->cookie, obj);
    else
        ctx->conn->event_targets.erase(obj->cookie);
}

template <typename T>
void set_tracked(Context* ctx, std::unordered_set<T*>& set, T* obj, bool live) {
    {
        std::lock_guard<std::mutex> g(ctx->objs_mu);
        if (live)
            set.insert(obj);
        else
            set.erase(obj);
    }
    set_target(ctx, obj, live);
}
}  // namespace

void track(Context* ctx, Qp* qp) { set_tracked(ctx, ctx->qps, qp, true); }
void track(Context* ctx, Cq* cq) { set_tracked(ctx, ctx->cqs, cq, true); }
void track(Context* ctx, Srq* srq) { set_tracked(ctx, ctx->srqs, srq, true); }
void untrack(Context* ctx, Qp* qp) { set_tracked(ctx, ctx->qps, qp, false); }
void untrack(Context* ctx, Cq* cq) { set_tracked(ctx, ctx->cqs, cq, false); }
void untrack(Context* ctx, Srq* srq) { set_tracked(ctx, ctx->srqs, srq, false); }

void track_events(Context* ctx, Qp* qp) { set_target(ctx, qp, true); }

}  // namespace uroce::verbs

// librdmacm's hook (uroce_private.h): run with the other hooks by device_gone's run_hooks.
extern "C" void uroce_on_device_gone(ibv_context* c, void (*fn)(ibv_context*, void*), void* arg) {
    using namespace uroce::verbs;
    Context* ctx = ctx_of(c);
    {
        std::lock_guard<std::mutex> g(ctx->hooks_mu);
        if (!ctx->hooks_fired) {
            ctx->hooks.emplace_back(fn, arg);
            return;
        }
    }
    fn(c, arg);
}
