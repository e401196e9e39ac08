// The drop-in libibverbs' own view of the objects it hands to applications. Each
// public struct (ibv_context, ibv_cq, ...) is the first member of ours, so the
// pointer an application holds converts back with a static cast.
#pragma once

#include <infiniband/verbs.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "emu/abi/caps.h"
#include "emu/abi/doorbell.h"
#include "emu/abi/protocol.h"
#include "emu/abi/rings.h"
#include "emu/abi/runtime.h"

namespace uroce::verbs {

struct Device {
    ibv_device dev;  // first: applications hold &dev
    abi::DeviceInfo info;
    int index = 0;
};

struct Context {
    verbs_context vctx;  // ends with the ibv_context applications hold
    int sock = -1;
    int doorbell = -1;
    abi::DoorbellPage* db = nullptr;  // which QPs and CQs rang (emu/abi/doorbell.h)
    std::mutex mu;                    // one request at a time on the control socket
    Device* device = nullptr;
    abi::OpenResp open{};
};

struct Pd {
    ibv_pd pd;
};

struct Mr {
    ibv_mr mr;
};

// An address handle. On RoCEv2 over IPv4 all it resolves to is the peer's address;
// the device needs no state for it (the IPv4 address travels in each UD WQE).
struct Ah {
    ibv_ah ah;
    uint32_t ipv4_be = 0;
};

struct Channel {
    ibv_comp_channel ch;
    uint32_t handle = 0;
};

// A spin lock for the data path: uncontended in the common case, never a syscall.
struct SpinLock {
    std::atomic_flag f = ATOMIC_FLAG_INIT;
    void lock() {
        while (f.test_and_set(std::memory_order_acquire)) {
        }
    }
    void unlock() { f.clear(std::memory_order_release); }
};

struct Ring {
    void* base = nullptr;
    size_t bytes = 0;
    uint32_t mask = 0;
    uint32_t stride = 0;
    abi::RingHeader* hdr() const { return static_cast<abi::RingHeader*>(base); }
    uint8_t* slot(uint32_t i) const { return abi::ring_slot(base, stride, mask, i); }
};

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
    uint32_t comp_events_reported = 0;   // guarded by cq.mutex
    uint32_t async_events_reported = 0;  // guarded by cq.mutex
};

struct Srq {
    ibv_srq srq;  // first: applications hold &srq
    Ring ring;
    uint32_t max_sge = 0;
    SpinLock lock;
    uint32_t events_reported = 0;  // guarded by srq.mutex
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
    ibv_qp_ex qpx;  // qpx.qp_base is the ibv_qp applications hold
    Ring sq, rq;
    ibv_qp_cap cap{};
    SpinLock sq_lock, rq_lock;
    uint32_t events_reported = 0;  // guarded by qp.mutex
    int doorbell = -1;
    std::unique_ptr<WrStage> stage;  // only QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
};

inline Context* ctx_of(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) -
                                      offsetof(verbs_context, context));
}
inline Cq* cq_of(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }
inline Cq* cq_of(ibv_cq_ex* c) { return reinterpret_cast<Cq*>(c); }
inline Qp* qp_of(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }
inline Qp* qp_of(ibv_qp_ex* q) { return reinterpret_cast<Qp*>(q); }

// Runs one control request on the context's socket. Returns 0 or a positive errno
// (transport failure or the device's verdict).
int request(Context* ctx, abi::Request& req, abi::Response& resp, int* fds = nullptr,
            int* nfds = nullptr, int send_fd = -1);

// Maps a ring memfd received from the device (and closes the fd).
bool map_ring(int fd, size_t bytes, uint32_t slots, uint32_t stride, Ring* out);
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
// Doorbells: the QP's send queue (or, in ERR, its receive queue) has work; a CQ armed with
// completions already in it must raise its event.
void ring_qp(Qp* qp);
void ring_cq(ibv_cq* cq);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
// The CQ lock (none for a single-threaded CQ), and what an empty poll does: poll_cq and
// ibv_start_poll share them.
void lock_cq(Cq* cq);
void unlock_cq(Cq* cq);
void empty_poll(Cq* cq);
int req_notify_cq(ibv_cq* cq, int solicited_only);

// Device queries (device.cpp), installed in verbs_context.
int query_port(ibv_context* c, uint8_t port, ibv_port_attr* attr, size_t len);
int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr,
                    size_t len);
int query_rt_values(ibv_context* c, ibv_values_ex* values);

}  // namespace uroce::verbs
