// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device side of the control verbs: creating, modifying and destroying PDs, MRs,
// completion channels and CQs on behalf of one application session, and the dispatch of a
// control request. Every argument is validated here; the library is not trusted. QPs:
// qp_verbs.cpp; SRQs: srq.cpp; resizing a CQ: cq_resize.cpp.
#include "emu/verbs/control_verbs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "emu/abi/flush.h"
#include "emu/verbs/mcast_groups.h"
#include "emu/verbs/memory_windows.h"
#include "emu/verbs/xrc_domains.h"

namespace uroce::emu {

namespace {
constexpr uint32_t kMrAccessKnown =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |
    IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING | abi::kAccessFlush;

// The access flags reg_mr and rereg_mr accept: 0 or the errno the kernel gives.
int mr_access_error(uint32_t access) {
    if (access & ~kMrAccessKnown) return EINVAL;
    // The kernel refuses remote write/atomic without local write.
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE))
        return EINVAL;
    return 0;
}

// A range the device can register: 0 or EINVAL.
int mr_range_error(uint64_t addr, uint64_t length, uint64_t iova) {
    if (length == 0 || length > abi::kMaxMrSize) return EINVAL;
    if (addr + length < addr || iova + length < iova) return EINVAL;
    return 0;
}

constexpr uint32_t kReregFlags =
    IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
}  // namespace

int ControlVerbs::alloc_pd(Session& s, uint32_t* pd) {
    auto p = std::make_unique<Pd>();
    p->owner = &s;
    if (!env_.pds.add(std::move(p), pd)) return ENOMEM;
    s.pds.push_back(*pd);
    return 0;
}

int ControlVerbs::dealloc_pd(Session& s, uint32_t h) {
    Pd* pd = env_.pds.get(h);
    if (!owned(s, pd)) return EINVAL;
    if (pd->users) return EBUSY;
    env_.pds.remove(h);
    erase_handle(s.pds, h);
    return 0;
}

// The kernel's lookup of a handle the ufile does not hold: ENOENT.
int ControlVerbs::query_pd(Session& s, uint32_t h, abi::PdResp* out) {
    if (!owned(s, env_.pds.get(h))) return ENOENT;
    out->pd = h;
    return 0;
}

int ControlVerbs::query_mr(Session& s, uint32_t key, abi::QueryMrResp* out) {
    const Mr* mr = mr_for_key(key);
    if (!owned(s, mr)) return ENOENT;
    *out = abi::QueryMrResp{mr->lkey, mr->rkey, mr->length, mr->iova};
    return 0;
}

int ControlVerbs::reg_mr(Session& s, const abi::RegMrReq& r, abi::RegMrResp* out) {
    Pd* pd = env_.pds.get(r.pd);
    if (!owned(s, pd)) return EINVAL;
    if (int e = mr_access_error(r.access)) return e;
    // On-demand paging costs nothing here: the device never pins, it reaches the
    // application's memory through process_vm_readv/writev, which fault pages in. An
    // implicit ODP MR (addr 0, length SIZE_MAX) is then just the whole address space; it
    // must have iova 0, as the kernel wants (mlx5, rxe).
    const bool implicit =
        (r.access & IBV_ACCESS_ON_DEMAND) && r.addr == 0 && r.length == UINT64_MAX;
    if (implicit && r.iova != 0) return EINVAL;
    if (!implicit)
        if (int e = mr_range_error(r.addr, r.length, r.iova)) return e;
    auto mr = std::make_unique<Mr>();
    mr->owner = &s;
    mr->pd = r.pd;
    mr->access = r.access;
    mr->addr = r.addr;
    mr->iova = r.iova;
    mr->length = r.length;
    uint32_t h;
    Mr* m = env_.mrs.add(std::move(mr), &h);
    if (!m) return ENOMEM;
    // Keys are <table index, 8-bit generation>, so a stale key of a reused slot fails.
    m->lkey = m->rkey = (h << 8) | key_gen_++;
    ++pd->users;
    s.mrs.push_back(m->lkey);
    out->handle = m->lkey;
    out->lkey = m->lkey;
    out->rkey = m->rkey;
    return 0;
}

int ControlVerbs::dereg_mr(Session& s, uint32_t key) {
    Mr* mr = mr_for_key(key);
    if (!owned(s, mr)) return EINVAL;
    // IBTA 10.6.7.2.6: not while windows are bound into it; EINVAL as rxe (docs/verbs-support.md).
    if (mr->windows) return EINVAL;
    if (Pd* pd = env_.pds.get(mr->pd)) --pd->users;
    env_.mrs.remove(key >> 8);
    erase_handle(s.mrs, key);
    return 0;
}

// The MR keeps its keys, as on rxe and (when it can change the MR in place) mlx5. The
// checks come in the kernel's order (uverbs, then the driver); nothing changes on a failure.
// Work requests the device took before this keep what they were checked against (as after
// ibv_dereg_mr): an SGE already translated, an RDMA WRITE or a receive under way.
int ControlVerbs::rereg_mr(Session& s, const abi::ReregMrReq& r, abi::RegMrResp* out) {
    if (!r.flags) return EINVAL;
    if (r.flags & ~kReregFlags) return EOPNOTSUPP;
    Mr* mr = mr_for_key(r.handle);
    if (!owned(s, mr)) return EINVAL;
    const bool trans = r.flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    const bool change_pd = r.flags & IBV_REREG_MR_CHANGE_PD;
    const bool change_access = r.flags & IBV_REREG_MR_CHANGE_ACCESS;
    if (change_access) {
        if (int e = mr_access_error(r.access)) return e;
        // An MR does not become ODP (or stop being ODP) in place: the library checked its
        // range for what it was.
        if ((r.access ^ mr->access) & IBV_ACCESS_ON_DEMAND) return EOPNOTSUPP;
    }
    Pd* pd = change_pd ? env_.pds.get(r.pd) : nullptr;
    if (change_pd && !owned(s, pd)) return EINVAL;
    if (trans)
        if (int e = mr_range_error(r.addr, r.length, r.addr)) return e;
    // Reregistering is deregistering and registering again (ibv_rereg_mr(3)), and an MR with
    // windows bound into it cannot be deregistered (IBTA 10.6.7.2.6; dereg_mr's errno).
    if (mr->windows) return EINVAL;
    if (change_pd) {
        if (Pd* old = env_.pds.get(mr->pd)) --old->users;
        ++pd->users;
        mr->pd = r.pd;
    }
    if (change_access) mr->access = r.access;
    if (trans) {
        mr->addr = mr->iova = r.addr;
        mr->length = r.length;
    }
    out->handle = mr->lkey;
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    return 0;
}

int ControlVerbs::advise_mr(Session& s, const abi::AdviseMrReq& r, abi::AdviseMrResp* out) {
    // As rxe's prefetch: the lkey must name an ODP MR of this PD with local write, else
    // EINVAL; a range outside it is EFAULT, as ib_umem_odp_map_dma_and_lock gives.
    Pd* pd = env_.pds.get(r.pd);
    if (!owned(s, pd)) return EINVAL;
    Mr* mr = mr_for_key(r.lkey);
    if (!owned(s, mr) || mr->pd != r.pd) return EINVAL;
    if ((mr->access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE)) !=
        (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE))
        return EINVAL;
    uint64_t a = r.addr, len = r.length;
    if (a < mr->iova || a + len < a || a + len > mr->iova + mr->length) return EFAULT;
    out->va = mr->addr + (a - mr->iova);
    return 0;
}

Mr* ControlVerbs::mr_for_key(uint32_t key) const {
    Mr* mr = env_.mrs.get(key >> 8);
    return mr && mr->lkey == key ? mr : nullptr;
}

bool ControlVerbs::check_local_sges(const Session* owner, uint32_t pd, abi::Sge* sge, uint32_t n,
                                    bool write, uint64_t* total) const {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
        sum += sge[i].length;
        if (sge[i].length == 0) continue;
        Mr* mr = mr_for_key(sge[i].lkey);
        if (!mr || mr->pd != pd || mr->owner != owner) return false;
        if (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)) return false;
        uint64_t a = sge[i].addr, len = sge[i].length;
        if (a < mr->iova || a + len < a || a + len > mr->iova + mr->length) return false;
        // From here on the SGE holds the process address the device copies to/from.
        sge[i].addr = mr->addr + (a - mr->iova);
    }
    *total = sum;
    return true;
}

int ControlVerbs::create_channel(Session& s, uint32_t* handle, int* fd) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return errno;
    // The device must never block on a slow reader; the application's end stays
    // blocking, as a kernel completion channel's fd is.
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    auto ch = std::make_unique<CompChannel>();
    ch->owner = &s;
    ch->write_fd = p[1];
    if (!env_.channels.add(std::move(ch), handle)) {
        close(p[0]);
        close(p[1]);
        return EMFILE;
    }
    s.channels.push_back(*handle);
    *fd = p[0];
    return 0;
}

int ControlVerbs::destroy_channel(Session& s, uint32_t h) {
    CompChannel* ch = env_.channels.get(h);
    if (!owned(s, ch)) return EINVAL;
    if (ch->users) return EBUSY;
    env_.channels.remove(h);
    erase_handle(s.channels, h);
    return 0;
}

int ControlVerbs::create_cq(Session& s, const abi::CreateCqReq& r, abi::CreateCqResp* out,
                            int* fd) {
    if (r.cqe < 1 || r.cqe > abi::kMaxCqe) return EINVAL;
    CompChannel* ch = nullptr;
    if (r.channel >= 0) {
        ch = env_.channels.get(uint32_t(r.channel));
        if (!owned(s, ch)) return EINVAL;
    }
    auto cq = std::make_unique<Cq>();
    cq->owner = &s;
    uint32_t slots = abi::cq_slots(r.cqe);
    int err = cq->ring.create("uroce-cq", abi::ring_bytes(slots, sizeof(abi::Cqe)));
    if (err) return err;
    cq->hdr = static_cast<abi::RingHeader*>(cq->ring.data());
    cq->slots = reinterpret_cast<abi::Cqe*>(static_cast<uint8_t*>(cq->ring.data()) +
                                            sizeof(abi::RingHeader));
    cq->mask = slots - 1;
    cq->cqe = slots - 1;
    cq->channel = ch ? uint32_t(r.channel) : 0;
    cq->cookie = r.cookie;
    uint32_t h;
    Cq* c = env_.cqs.add(std::move(cq), &h);
    if (!c) return ENOMEM;
    if (ch) ++ch->users;
    s.cqs.push_back(h);
    out->handle = h;
    out->cqe = c->cqe;
    out->slots = slots;
    *fd = c->ring.take_fd();
    return 0;
}

int ControlVerbs::destroy_cq(Session& s, uint32_t h) {
    Cq* cq = env_.cqs.get(h);
    if (!owned(s, cq)) return EINVAL;
    if (cq->users) return EBUSY;
    if (CompChannel* ch = env_.channels.get(cq->channel)) --ch->users;
    env_.cqs.remove(h);
    erase_handle(s.cqs, h);
    return 0;
}

void ControlVerbs::handle(Session& s, const abi::Request& req, abi::Response& resp,
                          std::vector<int>& fds, int in_fd) {
    using abi::Op;
    int err = 0;
    const Qp* target = req.op == Op::kModifyQp ? env_.qps.get(req.u.modify_qp.qpn) : nullptr;
    const ibv_qp_state before = target ? target->state : IBV_QPS_RESET;
    switch (req.op) {
    case Op::kAllocPd: err = alloc_pd(s, &resp.u.pd.pd); break;
    case Op::kDeallocPd: err = dealloc_pd(s, req.u.pd.pd); break;
    case Op::kRegMr: err = reg_mr(s, req.u.reg_mr, &resp.u.reg_mr); break;
    case Op::kDeregMr: err = dereg_mr(s, req.u.handle.handle); break;
    case Op::kReregMr: err = rereg_mr(s, req.u.rereg_mr, &resp.u.reg_mr); break;
    case Op::kAdviseMr: err = advise_mr(s, req.u.advise_mr, &resp.u.advise_mr); break;
    case Op::kQueryPd: err = query_pd(s, req.u.pd.pd, &resp.u.pd); break;
    case Op::kQueryMr: err = query_mr(s, req.u.handle.handle, &resp.u.query_mr); break;
    case Op::kCreateCompChannel: {
        int fd = -1;
        err = create_channel(s, &resp.u.channel.handle, &fd);
        if (!err) fds.push_back(fd);
        break;
    }
    case Op::kDestroyCompChannel: err = destroy_channel(s, req.u.handle.handle); break;
    case Op::kCreateCq: {
        int fd = -1;
        err = create_cq(s, req.u.create_cq, &resp.u.create_cq, &fd);
        if (!err) fds.push_back(fd);
        break;
    }
    case Op::kDestroyCq: err = destroy_cq(s, req.u.handle.handle); break;
    case Op::kResizeCq: err = resize_cq(s, req.u.resize_cq, in_fd, &resp.u.resize_cq); break;
    case Op::kCreateQp: {
        int f[2] = {-1, -1};
        err = create_qp(s, req.u.create_qp, &resp.u.create_qp, f);
        if (!err) fds.insert(fds.end(), {f[0], f[1]});
        break;
    }
    case Op::kModifyQp: err = modify_qp(s, req.u.modify_qp); break;
    case Op::kQueryQp: err = query_qp(s, req.u.query_qp, &resp.u.query_qp); break;
    case Op::kDestroyQp: err = destroy_qp(s, req.u.destroy_qp.qpn, req.u.destroy_qp.cookie); break;
    case Op::kCreateSrq: {
        int fd = -1;
        err = create_srq(s, req.u.create_srq, &resp.u.create_srq, &fd);
        if (!err) fds.push_back(fd);
        break;
    }
    case Op::kModifySrq: err = modify_srq(s, req.u.modify_srq); break;
    case Op::kQuerySrq: err = query_srq(s, req.u.handle.handle, &resp.u.query_srq); break;
    case Op::kDestroySrq: err = destroy_srq(s, req.u.handle.handle); break;
    case Op::kOpenXrcd:
        if (req.u.open_xrcd.has_fd && in_fd < 0)
            err = EBADF;
        else
            err = env_.xrc.open_xrcd(s, req.u.open_xrcd.has_fd ? in_fd : -1, req.u.open_xrcd.oflags,
                                     &resp.u.xrcd.handle);
        break;
    case Op::kCloseXrcd: err = env_.xrc.close_xrcd(s, req.u.handle.handle); break;
    case Op::kOpenQp: err = env_.xrc.open_qp(s, req.u.open_qp, &resp.u.open_qp); break;
    case Op::kAttachMcast: err = env_.mcast.attach(s, req.u.mcast); break;
    case Op::kDetachMcast: err = env_.mcast.detach(s, req.u.mcast); break;
    case Op::kAllocMw: err = env_.windows.alloc_mw(s, req.u.mw, &resp.u.mw); break;
    case Op::kDeallocMw: err = env_.windows.dealloc_mw(s, req.u.handle.handle); break;
    default: err = EOPNOTSUPP;
    }
    resp.err = err;
    trace_call(s, req, resp, before);
}

}  // namespace uroce::emu
