// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The drop-in libibverbs' own view of the objects it hands to applications. Each
// public struct (ibv_context, ibv_cq, ...) is the first member of ours, so the
// pointer an application holds converts back with a static cast.
#pragma once

#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "emu/abi/caps.h"
#include "emu/abi/doorbell.h"
#include "emu/abi/flush.h"
#include "emu/abi/protocol.h"
#include "emu/abi/rings.h"
#include "emu/abi/runtime.h"

namespace uroce::verbs {

struct Device {
    ibv_device dev;  // first: applications hold &dev
    abi::DeviceInfo info;
    int index = 0;
};

struct Qp;
struct Cq;
struct Srq;

// Called once when a context's device is gone (device_gone.cpp), after the flush
// completions are in the CQ rings; see uroce_on_device_gone (uroce_private.h).
using GoneHook = void (*)(ibv_context* context, void* arg);

// A control connection to the device: one session there, one "uverbs file". The context
// ibv_open_device made and those ibv_import_device made from a dup of its cmd_fd share it
// (import.cpp), as contexts imported in the kernel share their file and its objects.
struct Conn {
    std::mutex mu;  // one request at a time on the socket, whichever context sends it
    int doorbell = -1;
    abi::DoorbellPage* db = nullptr;  // which QPs and CQs rang (emu/abi/doorbell.h)
    Device* device = nullptr;
    abi::OpenResp open{};
    pid_t pid = 0;  // the process that opened it: the one whose memory the device reaches
    // The QPs (opened XRC TGT handles too), CQs and SRQs of all its contexts whose events
    // may still be handed out, by cookie: the async events come on one pipe, which any of
    // them may read. An event the device queued for an object destroyed since is dropped,
    // as the kernel drops a destroyed object's pending events. The device echoes the cookie
    // an object was created with: a serial of the connection rather than the object's
    // address, so that an object allocated where a destroyed one was never receives the
    // dead one's events.
    std::mutex targets_mu;
    std::unordered_map<uint64_t, void*> event_targets;  // guarded by targets_mu
    std::atomic<uint64_t> next_cookie{1};
    ~Conn();
};

struct Context {
    verbs_context vctx;  // ends with the ibv_context applications hold
    int sock = -1;
    // The connection's, copied for the data path (the Conn keeps them while it lives).
    int doorbell = -1;
    abi::DoorbellPage* db = nullptr;
    // The device is gone (docs/behaviour.md, "When the device goes away"): every verb that
    // needs it fails with EIO. Read by the posting verbs under their ring's lock.
    std::atomic<bool> gone{false};
    std::shared_ptr<Conn> conn;
    Device* device = nullptr;
    abi::OpenResp open{};

    // What device_gone must flush, added by the create verbs and removed by the destroy
    // verbs. Lock order: gone_mu, then objs_mu, then a ring's SpinLock.
    std::mutex objs_mu;
    std::unordered_set<Qp*> qps;
    std::unordered_set<Cq*> cqs;
    std::unordered_set<Srq*> srqs;

    std::mutex gone_mu;    // device_gone runs once; a second caller waits until it has run
    bool flushed = false;  // guarded by gone_mu
    std::atomic<bool> fatal_reported{false};  // IBV_EVENT_DEVICE_FATAL was handed out
    std::mutex hooks_mu;
    bool hooks_fired = false;                       // guarded by hooks_mu
    std::vector<std::pair<GoneHook, void*>> hooks;  // guarded by hooks_mu

    // The watcher thread (device_gone.cpp): blocked in poll() on the control socket, so
    // that the device's end closing is noticed with no cost to the data path.
    pthread_t watcher{};
    pid_t watcher_pid = 0;  // the process it runs in
    bool watching = false;
    int watcher_wake = -1;  // an eventfd: ibv_close_device stops the watcher with it
};

// A thread domain (ibv_alloc_td): accepted, and a hint only. uroce's posting locks are
// spin locks that an uncontended post takes at the cost of one atomic; nothing to shed.
struct Td {
    ibv_td td;
    std::atomic<uint32_t> parents{0};  // parent domains naming it: ibv_dealloc_td is EBUSY
};

// A protection domain, or a parent domain (ibv_alloc_parent_domain, parent_domain.cpp):
// then `contained` is the PD it wraps, whose handle it carries, so that every verb that
// sends pd->handle to the device works on it unchanged.
struct Pd {
    ibv_pd pd;
    std::atomic<uint32_t> parents{0};  // parent domains over this PD: ibv_dealloc_pd is EBUSY
    // A parent domain's.
    Pd* contained = nullptr;
    Td* td = nullptr;
    void* pd_context = nullptr;
    void* (*alloc)(ibv_pd*, void*, size_t, size_t, uint64_t) = nullptr;
    void (*free)(ibv_pd*, void*, void*, uint64_t) = nullptr;
    std::atomic<uint32_t> users{0};  // QPs, CQs and SRQs made on it: ibv_dealloc_pd is EBUSY
};
inline Pd* pd_of(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }

struct Mr {
    ibv_mr mr;
};

// An address handle. On RoCEv2 over IPv4 all it resolves to is the peer's address;
// the device needs no state for it (the IPv4 address, TOS and TTL travel in each UD WQE).
struct Ah {
    ibv_ah ah;
    uint32_t ipv4_be = 0;
    bool ipv6 = false;  // the destination is gid, an IPv6 address (an IPv6 device's peer)
    uint8_t sgid_index = 0;
    uint8_t gid[16] = {};
    uint8_t traffic_class = 0, hop_limit = 0;  // the GRH's: the packets' IPv4 TOS and TTL
};

struct Channel {
    ibv_comp_channel ch;
    uint32_t handle = 0;
};

// A spin lock for the data path: uncontended in the common case, never a syscall then. A
// waiter that keeps finding it taken gives the CPU away: ibv_resize_cq holds a CQ's lock
// over a round trip to the device, which may need the CPU the waiter spins on.
struct SpinLock {
    std::atomic_flag f = ATOMIC_FLAG_INIT;
    void lock() {
        for (uint32_t spins = 1; f.test_and_set(std::memory_order_acquire); ++spins)
            if (spins % 256 == 0) sched_yield();
    }
    void unlock() { f.clear(std::memory_order_release); }
};

using Ring = abi::RingMap;

struct Cq {
    // ibv_cq is the prefix of ibv_cq_ex: a CQ from ibv_create_cq_ex is used through
    // both (ibv_cq_ex_to_cq is a cast), as in rdma-core's verbs_cq.
    union {
        ibv_cq cq;
        ibv_cq_ex cqx{};
    };
    Ring ring;
    SpinLock lock;
    bool single_threaded = false;  // IBV_CREATE_CQ_ATTR_SINGLE_THREADED: no locking
    uint32_t empty_polls = 0;
    uint32_t poll_idx = 0;               // ibv_start_poll..ibv_end_poll: the current CQE
    const abi::Cqe* poll_cqe = nullptr;  // and where it is
    uint64_t cookie = 0;                 // names the CQ in the device's events
    uint32_t comp_events_reported = 0;   // guarded by cq.mutex
    uint32_t async_events_reported = 0;  // guarded by cq.mutex
    // The device is gone and the CQ was armed when device_gone wrote its flush completions:
    // ibv_get_cq_event hands out this event in the device's stead. Guarded by objs_mu.
    bool gone_event = false;
    Pd* parent = nullptr;  // IBV_CQ_INIT_ATTR_MASK_PD: the parent domain it was made on (hold_pd)
};

struct Srq {
    ibv_srq srq;  // first: applications hold &srq
    Ring ring;
    uint32_t max_sge = 0;
    SpinLock lock;
    uint64_t cookie = 0;           // names the SRQ in the device's events
    Pd* parent = nullptr;          // the parent domain it was made on (hold_pd)
    uint32_t events_reported = 0;  // guarded by srq.mutex
    ibv_cq* xrc_cq = nullptr;      // an XRC SRQ's receives complete here
};
inline struct Srq* srq_of(ibv_srq* s) { return reinterpret_cast<struct Srq*>(s); }

// The work request an ibv_wr_* builder started (qp_ex.cpp). It goes into the SQ ring when
// the next builder or ibv_wr_complete comes; the setters copy into it, so the caller may
// reuse its SGE lists and inline buffers at once, as ibv_wr_post(3) allows.
struct WrStage {
    ibv_send_wr wr{};
    ibv_sge sge[abi::kMaxSge]{};
    uint8_t inline_data[abi::kMaxInline]{};
    uint32_t prod = 0;  // the next SQ slot of this batch; published by ibv_wr_complete
    int err = 0;        // the batch's first error: ibv_wr_complete returns it, posts nothing
    bool open = false;  // wr holds a work request not yet in the ring
};

struct Qp {
    abi::QpEx qpx;  // qpx.qp_base is the ibv_qp applications hold (ibv_qp_ex, flush.h)
    Ring sq, rq;
    ibv_qp_cap cap{};
    SpinLock sq_lock, rq_lock;
    uint64_t cookie = 0;           // names this QP handle in the device's events and requests
    Pd* parent = nullptr;          // the parent domain it was made on (hold_pd)
    uint32_t events_reported = 0;  // guarded by qp.mutex
    int doorbell = -1;
    // Only QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; from take_mem (custom: from
    // the parent domain's allocator).
    WrStage* stage = nullptr;
    bool stage_custom = false;
};

inline Context* ctx_of(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) -
                                      offsetof(verbs_context, context));
}
inline Cq* cq_of(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }
inline Cq* cq_of(ibv_cq_ex* c) { return reinterpret_cast<Cq*>(c); }
inline Qp* qp_of(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }
inline Qp* qp_of(ibv_qp_ex* q) { return reinterpret_cast<Qp*>(q); }

// A context on `conn` whose cmd_fd is `sock` (device.cpp): the verbs installed, the watcher
// started. NULL with errno set (sock and async_fd are closed then). ibv_open_device and
// ibv_import_device make theirs with it.
ibv_context* make_context(const std::shared_ptr<Conn>& conn, int sock, int async_fd);
// ibv_import_device (import.cpp) finds the connection of a dup of `sock` in this process.
void share_conn(const std::shared_ptr<Conn>& conn, int sock);

// Runs one control request on the context's socket. Returns 0, the device's verdict (a
// positive errno), or EIO when the device is gone (its end of the socket closed; the
// watcher runs device_gone), as the kernel's verbs after a device is disassociated.
int request(Context* ctx, abi::Request& req, abi::Response& resp, int* fds = nullptr,
            int* nfds = nullptr, int send_fd = -1);
// The destroy verbs' request: as request, but 0 when the device is gone, for the object
// went with it; the application can still free what it holds, as after disassociation.
int destroy_request(Context* ctx, abi::Request& req, abi::Response& resp);
// destroy_request for an object the device names by its handle alone (Request::u.handle).
int destroy_handle(Context* ctx, abi::Op op, uint32_t handle);

// When the device goes away (device_gone.cpp; docs/behaviour.md). start_watcher and
// stop_watcher bracket a context's life (0 or an errno). device_gone runs once per context
// whoever notices first (the watcher, an ibv_get_*_event that read the end of the device's
// pipe): it marks the context gone, writes IBV_WC_WR_FLUSH_ERR completions
// for every outstanding work request into the CQ rings (the device, the rings' producer
// until then, is dead: exactly one producer at a time), notes the completion events of armed
// CQs and runs the hooks. A later caller returns once it has run.
int start_watcher(Context* ctx);
void stop_watcher(Context* ctx);
void device_gone(Context* ctx);
// ibv_get_cq_event after the device is gone: a CQ of the channel with an event noted by
// device_gone, counted as handed out, or nullptr.
Cq* take_gone_event(Context* ctx, ibv_comp_channel* channel);
// The objects device_gone looks at.
void track(Context* ctx, Qp* qp);
void track(Context* ctx, Cq* cq);
void track(Context* ctx, Srq* srq);
void untrack(Context* ctx, Qp* qp);
void untrack(Context* ctx, Cq* cq);
void untrack(Context* ctx, Srq* srq);
// An opened XRC TGT QP handle: no rings to flush, but its events are handed out.
void track_events(Context* ctx, Qp* qp);
// A destroy waits, as in rdma-core, until every async event of `pub` handed out (`reported`,
// guarded by pub->mutex) is acknowledged (an ibv_qp or ibv_srq).
template <typename Pub>
void await_acks(Pub* pub, const uint32_t* reported) {
    pthread_mutex_lock(&pub->mutex);
    while (pub->events_completed != *reported) pthread_cond_wait(&pub->cond, &pub->mutex);
    pthread_mutex_unlock(&pub->mutex);
}
// A cookie no other object of the connection had (Conn::event_targets).
inline uint64_t new_cookie(Context* ctx) { return ctx->conn->next_cookie.fetch_add(1); }

// device_is_gone: the context's device is gone (a load; no system call). (librdmacm learns
// of it through uroce_on_device_gone, uroce_private.h, not through this layout.)
inline bool device_is_gone(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context))
        ->gone.load(std::memory_order_acquire);
}
// ibv_alloc_pd and ibv_import_pd (objects.cpp): a Pd for the handle the device answers
// `req` (kAllocPd, kQueryPd) with; NULL with errno set.
ibv_pd* pd_for(ibv_context* context, abi::Request& req);

// Parent domains (parent_domain.cpp). A QP, CQ or SRQ made on one counts as its user
// until destroyed. hold_pd returns the parent domain it counted the object on (nullptr for
// a plain PD or NULL); the object keeps it for release_pd, which never reads the PD the
// object was made with: a plain PD may be gone by then (ibv_unimport_pd frees the library's
// object while QPs made on the PD live on, as in rdma-core).
Pd* hold_pd(ibv_pd* pd);
void release_pd(Pd* parent);
// Library memory for `pd`'s objects, 64-byte aligned: from the parent domain's allocator
// when it has one that does not answer IBV_ALLOCATOR_USE_DEFAULT (*custom), else operator
// new; NULL when the allocator fails. give_mem returns it the same way. uroce's rings are
// the device's memory (memfds it maps too), so only the library's own buffers come from
// here: the ibv_wr_* staging buffer of a QP (kResQpStage).
void* take_mem(ibv_pd* pd, size_t size, uint64_t type, bool* custom);
void give_mem(ibv_pd* pd, void* m, bool custom, uint64_t type);
// The allocator's resource_type for it: the number mlx5dv gives a QP's buffers
// (MLX5DV_RES_TYPE_QP), so that an allocator written for mlx5 sees a QP buffer.
constexpr uint64_t kResQpStage = 1;
// ibv_alloc_td, ibv_dealloc_td, ibv_alloc_parent_domain: installed in verbs_context.
ibv_td* alloc_td(ibv_context* c, ibv_td_init_attr* attr);
int dealloc_td(ibv_td* td);
ibv_pd* alloc_parent_domain(ibv_context* c, ibv_parent_domain_init_attr* attr);
// ibv_dealloc_pd of a parent domain (0 or EBUSY).
int dealloc_parent_domain(Pd* pd);

// Maps a ring memfd received from the device (and closes the fd).
bool map_ring(int fd, size_t bytes, uint32_t slots, uint32_t stride, Ring* out);
// The ring a create request's answer brings: `e` is the request's verdict, fds and nfds
// what it received. 0 with the one fd mapped into `out` (map_ring), or an errno (EPROTO: not
// one fd; ENOMEM: no mapping) with every fd closed.
int take_ring(int e, const int* fds, int nfds, uint32_t slots, uint32_t stride, Ring* out);
void unmap_ring(Ring& r);
// Destroys an object the device created for a call that then failed in the library (its
// rings could not be mapped), so that nothing is left behind on the device.
void give_back(Context* ctx, abi::Op destroy_op, uint32_t handle);

struct Xrcd {
    ibv_xrcd xrcd;
    uint32_t handle = 0;
};

ibv_qp* create_qp(ibv_context* context, ibv_pd* pd, ibv_qp_init_attr* attr, uint32_t xrcd);
// The one creation path behind ibv_create_cq and ibv_create_cq_ex; NULL with errno set.
Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector);

// The ibv_wr_* interface (qp_ex.cpp): whether a QP of this type can have these send ops
// (0 or EOPNOTSUPP), and giving a just created QP the interface (0 or ENOMEM).
int check_send_ops(ibv_qp_type type, uint64_t send_ops_flags);
int enable_wr_api(Qp* qp);
// ibv_create_cq_ex (cq_ex.cpp), installed in verbs_context.
ibv_cq_ex* create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* attr);

// Extended verbs (xrc.cpp), installed in verbs_context.
ibv_xrcd* open_xrcd(ibv_context* c, ibv_xrcd_init_attr* attr);
int close_xrcd(ibv_xrcd* x);
ibv_srq* create_srq_ex(ibv_context* c, ibv_srq_init_attr_ex* attr);
int get_srq_num(ibv_srq* srq, uint32_t* num);
ibv_qp* create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* attr);
ibv_qp* open_qp(ibv_context* c, ibv_qp_open_attr* attr);
ibv_srq* create_srq(ibv_context* c, ibv_pd* pd, ibv_srq_type type, uint32_t xrcd, ibv_cq* cq,
                    ibv_srq_attr* attr, void* srq_context);

// Fills the data area of an IBV_WR_BIND_MW send slot (abi::MwBind, emu/abi/rings.h) from
// ibv_send_wr.bind_mw or ibv_wr_bind_mw's arguments. False (the post fails with EINVAL, as
// on mlx5) when there is no window, or a non-empty range with no MR.
inline bool mw_bind_wqe(const ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info& bind,
                        abi::MwBind* out) {
    if (!mw || (!bind.mr && (bind.addr || bind.length))) return false;
    *out = abi::MwBind{mw->handle,           rkey,      bind.mr ? bind.mr->lkey : 0,
                       bind.mw_access_flags, bind.addr, bind.length};
    return true;
}

// ibv_advise_mr (advise_mr.cpp), installed in verbs_context.
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge);

// Memory windows (mw.cpp), installed in ibv_context.ops.
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);

// Data path (datapath.cpp), installed in ibv_context.ops.
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
// The pieces of post_send the ibv_wr_* interface shares: whether the QP's send queue
// takes work now; writing one WQE into SQ slot `prod` without publishing it (0, or
// ENOMEM when the ring is full, EINVAL for a WR the QP cannot take; SQ lock held);
// making the slots before `prod` visible to the device (SQ lock held); waking it.
bool sq_accepts(const ibv_qp* qp);
int write_send_wqe(Qp* qp, const ibv_send_wr* wr, uint32_t prod);
void publish_send(Qp* qp, uint32_t prod);
// The doorbell: the QP's send queue (or, in ERR, its receive queue) has work.
void ring_qp(Qp* qp);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
// The CQ lock (none for a single-threaded CQ), and what an empty poll does: poll_cq and
// ibv_start_poll share them.
void lock_cq(Cq* cq);
void unlock_cq(Cq* cq);
bool empty_poll(Cq* cq);  // true when it gave the CPU away: the caller looks again
int req_notify_cq(ibv_cq* cq, int solicited_only);
// Removes the completions of QP `qpn` that `cq` holds, keeping the others in order: a QP
// moved to RESET or destroyed leaves none behind (mlx5's, mlx4's and mthca's providers do the
// same).
void clean_cq(ibv_cq* cq, uint32_t qpn);

// Device queries (device.cpp), installed in verbs_context.
int query_port(ibv_context* c, uint8_t port, ibv_port_attr* attr, size_t len);
int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr,
                    size_t len);
int query_rt_values(ibv_context* c, ibv_values_ex* values);

}  // namespace uroce::verbs
