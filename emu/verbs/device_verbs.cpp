// The device side of the control verbs: creating, modifying and destroying objects
// on behalf of one application session. Every argument is validated here; the
// library is not trusted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "emu/engine/device.h"
#include "emu/engine/port_mtu.h"
#include "emu/verbs/qp_state.h"

namespace uroce::emu {

namespace {
void erase_handle(std::vector<uint32_t>& v, uint32_t h) {
    auto it = std::find(v.begin(), v.end(), h);
    if (it != v.end()) {
        *it = v.back();
        v.pop_back();
    }
}

constexpr uint32_t kMrAccessKnown =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |
    IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING;

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

int Device::alloc_pd(Session& s, uint32_t* pd) {
    auto p = std::make_unique<Pd>();
    p->owner = &s;
    if (!pds_.add(std::move(p), pd)) return ENOMEM;
    s.pds.push_back(*pd);
    return 0;
}

int Device::dealloc_pd(Session& s, uint32_t h) {
    Pd* pd = pds_.get(h);
    if (!owned(s, pd)) return EINVAL;
    if (pd->users) return EBUSY;
    pds_.remove(h);
    erase_handle(s.pds, h);
    return 0;
}

// The kernel's lookup of a handle the ufile does not hold: ENOENT.
int Device::query_pd(Session& s, uint32_t h, abi::PdResp* out) {
    if (!owned(s, pds_.get(h))) return ENOENT;
    out->pd = h;
    return 0;
}

int Device::query_mr(Session& s, uint32_t key, abi::QueryMrResp* out) {
    const Mr* mr = mr_for_key(key);
    if (!owned(s, mr)) return ENOENT;
    *out = abi::QueryMrResp{mr->lkey, mr->rkey, mr->length, mr->iova};
    return 0;
}

int Device::reg_mr(Session& s, const abi::RegMrReq& r, abi::RegMrResp* out) {
    Pd* pd = pds_.get(r.pd);
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
    Mr* m = mrs_.add(std::move(mr), &h);
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

int Device::dereg_mr(Session& s, uint32_t key) {
    Mr* mr = mr_for_key(key);
    if (!owned(s, mr)) return EINVAL;
    // IBTA 10.6.7.2.6: not while windows are bound into it; EINVAL as rxe (docs/verbs-support.md).
    if (mr->windows) return EINVAL;
    if (Pd* pd = pds_.get(mr->pd)) --pd->users;
    mrs_.remove(key >> 8);
    erase_handle(s.mrs, key);
    return 0;
}

// The MR keeps its keys, as on rxe and (when it can change the MR in place) mlx5. The
// checks come in the kernel's order (uverbs, then the driver); nothing changes on a failure.
// Work requests the device took before this keep what they were checked against (as after
// ibv_dereg_mr): an SGE already translated, an RDMA WRITE or a receive under way.
int Device::rereg_mr(Session& s, const abi::ReregMrReq& r, abi::RegMrResp* out) {
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
    Pd* pd = change_pd ? pds_.get(r.pd) : nullptr;
    if (change_pd && !owned(s, pd)) return EINVAL;
    if (trans)
        if (int e = mr_range_error(r.addr, r.length, r.addr)) return e;
    // Reregistering is deregistering and registering again (ibv_rereg_mr(3)), and an MR with
    // windows bound into it cannot be deregistered (IBTA 10.6.7.2.6; dereg_mr's errno).
    if (mr->windows) return EINVAL;
    if (change_pd) {
        if (Pd* old = pds_.get(mr->pd)) --old->users;
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

int Device::advise_mr(Session& s, const abi::AdviseMrReq& r, abi::AdviseMrResp* out) {
    // As rxe's prefetch: the lkey must name an ODP MR of this PD with local write, else
    // EINVAL; a range outside it is EFAULT, as ib_umem_odp_map_dma_and_lock gives.
    Pd* pd = pds_.get(r.pd);
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

Mr* Device::mr_for_key(uint32_t key) const {
    Mr* mr = mrs_.get(key >> 8);
    return mr && mr->lkey == key ? mr : nullptr;
}

int Device::create_channel(Session& s, uint32_t* handle, int* fd) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return errno;
    // The device must never block on a slow reader; the application's end stays
    // blocking, as a kernel completion channel's fd is.
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    auto ch = std::make_unique<CompChannel>();
    ch->owner = &s;
    ch->write_fd = p[1];
    if (!channels_.add(std::move(ch), handle)) {
        close(p[0]);
        close(p[1]);
        return EMFILE;
    }
    s.channels.push_back(*handle);
    *fd = p[0];
    return 0;
}

int Device::destroy_channel(Session& s, uint32_t h) {
    CompChannel* ch = channels_.get(h);
    if (!owned(s, ch)) return EINVAL;
    if (ch->users) return EBUSY;
    channels_.remove(h);
    erase_handle(s.channels, h);
    return 0;
}

int Device::create_cq(Session& s, const abi::CreateCqReq& r, abi::CreateCqResp* out, int* fd) {
    if (r.cqe < 1 || r.cqe > abi::kMaxCqe) return EINVAL;
    CompChannel* ch = nullptr;
    if (r.channel >= 0) {
        ch = channels_.get(uint32_t(r.channel));
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
    Cq* c = cqs_.add(std::move(cq), &h);
    if (!c) return ENOMEM;
    if (ch) ++ch->users;
    s.cqs.push_back(h);
    out->handle = h;
    out->cqe = c->cqe;
    out->slots = slots;
    *fd = c->ring.take_fd();
    return 0;
}

int Device::destroy_cq(Session& s, uint32_t h) {
    Cq* cq = cqs_.get(h);
    if (!owned(s, cq)) return EINVAL;
    if (cq->users) return EBUSY;
    if (CompChannel* ch = channels_.get(cq->channel)) --ch->users;
    cqs_.remove(h);
    erase_handle(s.cqs, h);
    return 0;
}

int Device::create_qp(Session& s, const abi::CreateQpReq& r, abi::CreateQpResp* out, int fds[2]) {
    bool ini = r.qp_type == IBV_QPT_XRC_SEND, tgt = r.qp_type == IBV_QPT_XRC_RECV;
    if (r.qp_type != IBV_QPT_RC && r.qp_type != IBV_QPT_UC && r.qp_type != IBV_QPT_UD && !ini &&
        !tgt)
        return EOPNOTSUPP;
    // An XRC INI QP only sends (PD and send CQ); an XRC TGT QP only has its domain:
    // its receives, PD and CQ come from the XRC SRQ each message names.
    Pd* pd = tgt ? nullptr : pds_.get(r.pd);
    Cq* scq = tgt ? nullptr : cqs_.get(r.send_cq);
    Cq* rcq = tgt || ini ? nullptr : cqs_.get(r.recv_cq);
    XrcdHandle* xh = tgt ? xrcd_handles_.get(r.xrcd) : nullptr;
    if (tgt ? !owned(s, xh) : (!owned(s, pd) || !owned(s, scq) || (!ini && !owned(s, rcq))))
        return EINVAL;
    Srq* srq = nullptr;
    if (r.srq && !ini && !tgt) {
        srq = srqs_.get(r.srq);
        if (!owned(s, srq) || srq->xrc) return EINVAL;
    }
    ibv_qp_cap c = r.cap;
    if (tgt) c = ibv_qp_cap{};
    if (ini) c.max_recv_wr = c.max_recv_sge = 0;
    if (c.max_send_wr > abi::kMaxQpWr || c.max_recv_wr > abi::kMaxQpWr ||
        c.max_send_sge > abi::kMaxSge || c.max_recv_sge > abi::kMaxSge ||
        c.max_inline_data > abi::kMaxInline)
        return EINVAL;

    auto qp = std::make_unique<Qp>();
    qp->owner = &s;
    qp->type = ibv_qp_type(r.qp_type);
    qp->transport = ini || tgt                ? net::kTransportXrc
                    : r.qp_type == IBV_QPT_UC ? net::kTransportUc
                    : r.qp_type == IBV_QPT_UD ? net::kTransportUd
                                              : net::kTransportRc;
    qp->pd = pd ? r.pd : 0;
    qp->send_cq = scq ? r.send_cq : 0;
    qp->recv_cq = rcq ? r.recv_cq : 0;
    qp->srq = srq ? r.srq : 0;
    if (tgt) qp->xrcd = xh->xrcd;
    qp->sq_sig_all = r.sq_sig_all != 0;
    qp->cookie = r.cookie;

    uint32_t ssge = std::max(1u, c.max_send_sge), rsge = std::max(1u, c.max_recv_sge);
    uint32_t sslots = abi::round_pow2(std::max(1u, c.max_send_wr));
    uint32_t rslots = abi::round_pow2(std::max(1u, c.max_recv_wr));
    // Inline data shares the SGE area; grant what the slot can hold, at least 64 bytes.
    uint32_t inl = std::max({c.max_inline_data, ssge * uint32_t(sizeof(abi::Sge)), 64u});
    inl = std::min(inl, abi::kMaxInline);
    size_t sstride = abi::send_stride(ssge, inl);
    size_t rstride = abi::recv_stride(rsge);
    int err = qp->sq_region.create("uroce-sq", abi::ring_bytes(sslots, sstride));
    if (!err) err = qp->rq_region.create("uroce-rq", abi::ring_bytes(rslots, rstride));
    if (err) return err;
    qp->sq = static_cast<abi::RingHeader*>(qp->sq_region.data());
    qp->rq = static_cast<abi::RingHeader*>(qp->rq_region.data());
    qp->sq_mask = sslots - 1;
    qp->rq_mask = rslots - 1;
    qp->sq_stride = uint32_t(sstride);
    qp->rq_stride = uint32_t(rstride);
    qp->cap.max_send_wr = sslots;
    qp->cap.max_recv_wr = rslots;
    qp->cap.max_send_sge = ssge;
    qp->cap.max_recv_sge = rsge;
    qp->cap.max_inline_data = inl;
    qp->swr.resize(sslots);
    qp->swr_sge.resize(size_t(sslots) * ssge);
    for (uint32_t i = 0; i < sslots; ++i) qp->swr[i].sge = &qp->swr_sge[size_t(i) * ssge];
    qp->atomic_replay.resize(abi::kMaxQpRdAtom);
    qp->attr.port_num = 1;
    qp->attr.path_mtu = IBV_MTU_1024;

    uint32_t qpn;
    Qp* q = qps_.add(std::move(qp), &qpn);
    if (!q) return ENOMEM;
    q->qpn = qpn;
    if (pd) ++pd->users;
    if (scq) ++scq->users;
    if (rcq) ++rcq->users;
    if (srq) ++srq->users;
    if (tgt) {
        q->holders.push_back({&s, r.cookie, r.xrcd});
        ++xh->objects;
        ++xrcds_.get(xh->xrcd)->objects;
    }
    s.qps.push_back(qpn);
    out->qpn = qpn;
    out->cap = q->cap;
    out->sq_slots = sslots;
    out->rq_slots = rslots;
    out->sq_stride = q->sq_stride;
    out->rq_stride = q->rq_stride;
    fds[0] = q->sq_region.take_fd();
    fds[1] = q->rq_region.take_fd();
    return 0;
}

int Device::modify_qp(Session& s, const abi::ModifyQpReq& r) {
    Qp* qp = qps_.get(r.qpn);
    if (!holds(s, qp)) return EINVAL;
    const ibv_qp_attr& a = r.attr;
    // What an XRC half has no use for is ignored, through any handle (uverbs' modify_qp_mask).
    uint64_t m = r.mask & ~qp_ignored_attrs(qp->type);
    ibv_qp_state cur = qp->state;
    // The enum fields hold whatever the client wrote: integers until they are checked.
    if ((m & IBV_QP_CUR_STATE) && enum_bits(a.cur_qp_state) != uint32_t(cur)) return EINVAL;
    if ((m & IBV_QP_STATE) && enum_bits(a.qp_state) > IBV_QPS_ERR) return EINVAL;
    ibv_qp_state next = (m & IBV_QP_STATE) ? ibv_qp_state(enum_bits(a.qp_state)) : cur;
    if (int e = qp_modify_check(qp->type, cur, next, m)) return e;

    // Value checks, as the kernel and hardware make them.
    if ((m & IBV_QP_PORT) && a.port_num != 1) return EINVAL;
    if ((m & IBV_QP_PKEY_INDEX) && a.pkey_index != 0) return EINVAL;
    const uint32_t mtu = enum_bits(a.path_mtu), mig = enum_bits(a.path_mig_state);
    // Checked against max_mtu, not the port's active MTU, as rxe and mlx5 do: a path MTU
    // above what the link carries is accepted, and its larger packets are lost on the way.
    if ((m & IBV_QP_PATH_MTU) && (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)) return EINVAL;
    if ((m & IBV_QP_PATH_MIG_STATE) && mig > IBV_MIG_ARMED) return EINVAL;
    if ((m & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
    if ((m & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return EINVAL;
    if ((m & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return EINVAL;
    if ((m & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return EINVAL;
    if ((m & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > abi::kMaxQpRdAtom) return EINVAL;
    if ((m & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > abi::kMaxQpRdAtom) return EINVAL;
    if ((m & IBV_QP_DEST_QPN) && a.dest_qp_num > 0xffffff) return EINVAL;
    if (m & IBV_QP_ALT_PATH) return EINVAL;  // one port, no alternate path
    sockaddr_in dest{};
    if (m & IBV_QP_AV) {
        const ibv_ah_attr& ah = a.ah_attr;
        // RoCE needs a GRH; the GID table has the single entry 0, an IPv4-mapped GID.
        if (!ah.is_global || ah.grh.sgid_index != 0 || (ah.port_num && ah.port_num != 1))
            return EINVAL;
        const uint8_t* g = ah.grh.dgid.raw;
        static const uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(g, kV4Prefix, 12) != 0) return EINVAL;
        dest.sin_family = AF_INET;
        std::memcpy(&dest.sin_addr.s_addr, g + 12, 4);
        dest.sin_port = htons(cfg_.port);
    }

    // Apply.
    ibv_qp_attr& q = qp->attr;
    if (m & IBV_QP_ACCESS_FLAGS) q.qp_access_flags = a.qp_access_flags;
    if (m & IBV_QP_PKEY_INDEX) q.pkey_index = a.pkey_index;
    if (m & IBV_QP_PORT) q.port_num = a.port_num;
    if (m & IBV_QP_QKEY) q.qkey = a.qkey;
    if (m & IBV_QP_AV) {
        q.ah_attr = a.ah_attr;
        qp->dest = dest;
    }
    if (m & IBV_QP_PATH_MTU) {
        q.path_mtu = ibv_mtu(mtu);
        qp->mtu = mtu_bytes(q.path_mtu);
    }
    if (m & IBV_QP_TIMEOUT) q.timeout = a.timeout;
    if (m & IBV_QP_RETRY_CNT) q.retry_cnt = a.retry_cnt;
    if (m & IBV_QP_RNR_RETRY) q.rnr_retry = a.rnr_retry;
    if (m & IBV_QP_RQ_PSN) q.rq_psn = a.rq_psn & 0xffffff;
    if (m & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = a.max_rd_atomic;
    if (m & IBV_QP_MIN_RNR_TIMER) q.min_rnr_timer = a.min_rnr_timer;
    if (m & IBV_QP_SQ_PSN) q.sq_psn = a.sq_psn & 0xffffff;
    if (m & IBV_QP_MAX_DEST_RD_ATOMIC) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (m & IBV_QP_DEST_QPN) q.dest_qp_num = a.dest_qp_num;
    if (m & IBV_QP_PATH_MIG_STATE) q.path_mig_state = ibv_mig_state(mig);
    if (m & IBV_QP_EN_SQD_ASYNC_NOTIFY) q.en_sqd_async_notify = a.en_sqd_async_notify;

    if (next == cur) return 0;
    switch (next) {
    case IBV_QPS_RESET:
        // A reset QP starts over with empty queues.
        qp->deadline_ns = 0;
        qp->rnr_wait = false;
        qp->sq_fetch = qp->sq_send = qp->sq_done = qp->sq_send_off = 0;
        qp->rq_next = 0;
        // No message in progress either: the next incarnation's first WRITE must not be
        // taken for a second message while one is open, nor its Middle packets continue
        // the old one into memory that may be deregistered by now.
        qp->have_rwr = false;
        qp->have_write = false;
        qp->write_imm_pending = false;
        qp->uc_drop = false;
        qp->sq->prod.store(0);
        qp->sq->cons.store(0);
        qp->rq->prod.store(0);
        qp->rq->cons.store(0);
        break;
    case IBV_QPS_RTR:
        if (cur == IBV_QPS_INIT) {
            qp->epsn = q.rq_psn;
            qp->msn = 0;
            qp->nak_sent = false;
            qp->comm_est = false;
        }
        break;
    case IBV_QPS_RTS:
        if (cur == IBV_QPS_RTR && qp->type == IBV_QPT_UD) {
            qp->wqe_psn = qp->next_psn = qp->una_psn = q.sq_psn;
        } else if (cur == IBV_QPS_RTR) {
            qp->wqe_psn = qp->next_psn = qp->una_psn = q.sq_psn;
            qp->retry_left = q.retry_cnt;
            qp->rnr_left = q.rnr_retry;
        }
        break;
    default: break;
    }
    qp->state = next;
    q.qp_state = next;
    if (next == IBV_QPS_ERR) {
        flush_queues(*qp);
        last_wqe_reached(*qp);
    }
    if (next == IBV_QPS_RTS) mark_ready(*qp);
    return 0;
}

int Device::query_qp(Session& s, const abi::QueryQpReq& r, abi::QueryQpResp* out) {
    Qp* qp = qps_.get(r.qpn);
    if (!holds(s, qp)) return EINVAL;
    out->attr = qp->attr;
    out->attr.qp_state = qp->state;
    out->attr.cur_qp_state = qp->state;
    out->attr.cap = qp->cap;
    out->attr.sq_draining = 0;
    out->cap = qp->cap;
    out->sq_sig_all = qp->sq_sig_all;
    return 0;
}

int Device::destroy_qp(Session& s, uint32_t qpn, uint64_t cookie) {
    Qp* qp = qps_.get(qpn);
    if (!holds(s, qp)) return EINVAL;
    // A TGT QP's handles are told apart by the library's ibv_qp (each ibv_open_qp is one).
    if (qp->type == IBV_QPT_XRC_RECV && !find_hold(s, *qp, cookie)) return EINVAL;
    // UD sends posted before the destroy leave first: their doorbell may still be unread
    // when this command runs, and on an HCA it would have reached the QP before the command.
    if (qp->type == IBV_QPT_UD && qp->state == IBV_QPS_RTS) requester_progress(*qp);
    release_qp(s, qpn, cookie);  // a shared XRC TGT QP lives on while other handles exist
    return 0;
}

void Device::destroy_qp_now(uint32_t qpn) {
    Qp* qp = qps_.get(qpn);
    if (!qp) return;
    trace_.add("qp 0x%x (%s) destroyed, was %s, pid %d", qpn, qp_type_name(qp->type),
               qp_state_name(qp->state), int(qp->owner->pid));
    if (qp->on_ready_list) ready_.erase(std::find(ready_.begin(), ready_.end(), qp));
    if (qp->on_timer_list) timers_.erase(std::find(timers_.begin(), timers_.end(), qp));
    // A TGT QP holds no PD: its `pd` is the one of the SRQ serving the current message.
    if (Pd* pd = pds_.get(qp->pd); pd && qp->type != IBV_QPT_XRC_RECV) --pd->users;
    if (Cq* c = cqs_.get(qp->send_cq)) --c->users;
    if (Cq* c = cqs_.get(qp->recv_cq)) --c->users;
    if (Srq* q = srqs_.get(qp->srq); q && qp->type != IBV_QPT_XRC_RECV) --q->users;
    // Its handles' pins on their XRCD handles went with them (release_qp); the domain's
    // count of its objects goes now.
    if (qp->type == IBV_QPT_XRC_RECV) xrc_object_gone(qp->xrcd, 0);
    if (qp->type == IBV_QPT_UD) detach_all_mcast(qpn);  // as uverbs does on destroy
    unbind_qp_windows(*qp);
    if (qp->type != IBV_QPT_XRC_RECV) erase_handle(qp->owner->qps, qpn);  // TGT: release_qp did
    qps_.remove(qpn);
}

void Device::handle(Session& s, const abi::Request& req, abi::Response& resp, std::vector<int>& fds,
                    int in_fd) {
    using abi::Op;
    int err = 0;
    const Qp* target = req.op == Op::kModifyQp ? qps_.get(req.u.modify_qp.qpn) : nullptr;
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
            err = open_xrcd(s, req.u.open_xrcd.has_fd ? in_fd : -1, req.u.open_xrcd.oflags,
                            &resp.u.xrcd.handle);
        break;
    case Op::kCloseXrcd: err = close_xrcd(s, req.u.handle.handle); break;
    case Op::kOpenQp: err = open_qp(s, req.u.open_qp, &resp.u.open_qp); break;
    case Op::kAttachMcast: err = attach_mcast(s, req.u.mcast); break;
    case Op::kDetachMcast: err = detach_mcast(s, req.u.mcast); break;
    case Op::kAllocMw: err = alloc_mw(s, req.u.mw, &resp.u.mw); break;
    case Op::kDeallocMw: err = dealloc_mw(s, req.u.handle.handle); break;
    default: err = EOPNOTSUPP;
    }
    resp.err = err;
    trace_call(s, req, resp, before);
}

// One line per direction and opcode with a non-zero count:
// "<head> tx|rx <OPCODE_NAME> pkts N bytes M" (an opcode uroce does not define: opcode_0xNN).
static void dump_op(std::ostringstream& o, const char* head, const char* dir, unsigned op,
                    uint64_t pkts, uint64_t bytes) {
    if (!pkts) return;
    o << head << " " << dir << " ";
    if (const net::OpInfo* info = net::op_info(uint8_t(op)))
        o << info->name;
    else
        o << "opcode_0x" << std::hex << op << std::dec;
    o << " pkts " << pkts << " bytes " << bytes << "\n";
}

static void dump_ops(std::ostringstream& o, const char* head, const char* dir,
                     const OpCounters& c) {
    for (unsigned op = 0; op < 256; ++op) dump_op(o, head, dir, op, c.pkts[op], c.bytes[op]);
}

static void dump_ops(std::ostringstream& o, const char* head, const char* dir, uint8_t transport,
                     const QpOpCounters& c) {
    for (unsigned i = 0; i < 32; ++i) dump_op(o, head, dir, transport | i, c.pkts[i], c.bytes[i]);
}

DeviceObjects Device::objects() const {
    DeviceObjects o;
    o.sessions = sessions_.count();
    o.pds = pds_.count();
    o.mrs = mrs_.count();
    o.mws = mws_.count();
    o.channels = channels_.count();
    o.cqs = cqs_.count();
    o.qps = qps_.count();
    o.srqs = srqs_.count();
    o.xrcds = xrcds_.count();
    o.xrcd_handles = xrcd_handles_.count();
    o.mcast_groups = mcast_.size();
    o.ready = ready_.size();
    o.timers = timers_.size();
    o.awake = awake_.size();
    o.cm = cm_.objects();
    return o;
}

std::string Device::dump() const {
    std::ostringstream o;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &cfg_.ipv4_be, ip, sizeof ip);
    o << "device " << cfg_.name << " addr " << ip << " port " << cfg_.port << " pcap "
      << (cfg_.pcap.empty() ? "-" : cfg_.pcap) << "\n";
    o << "counts sessions " << sessions_.count() << " pds " << pds_.count() << " mrs "
      << mrs_.count() << " cqs " << cqs_.count() << " qps " << qps_.count() << " channels "
      << channels_.count() << " srqs " << srqs_.count() << " mws " << mws_.count() << "\n";
    sessions_.for_each([&](uint32_t id, const Session& s) {
        o << "session " << id << " pid " << s.pid << " pds " << s.pds.size() << " mrs "
          << s.mrs.size() << " cqs " << s.cqs.size() << " qps " << s.qps.size() << "\n";
    });
    pds_.for_each([&](uint32_t h, const Pd& pd) {
        o << "pd " << h << " pid " << pd.owner->pid << " users " << pd.users << "\n";
    });
    mrs_.for_each([&](uint32_t, const Mr& mr) {
        o << "mr lkey 0x" << std::hex << mr.lkey << " addr 0x" << mr.addr << std::dec << " length "
          << mr.length << " pd " << mr.pd << " access 0x" << std::hex << mr.access << std::dec
          << " pid " << mr.owner->pid << " windows " << mr.windows << "\n";
    });
    mws_.for_each([&](uint32_t h, const Mw& mw) {
        o << "mw " << h << " type " << mw.type << " rkey 0x" << std::hex << mw.rkey << std::dec
          << " pd " << mw.pd << " pid " << mw.owner->pid;
        if (mw.bound)
            o << " mr 0x" << std::hex << mw.mr << " addr 0x" << mw.addr << std::dec << " length "
              << mw.length << " access 0x" << std::hex << mw.access << " qpn 0x" << mw.qpn
              << std::dec;
        else
            o << " unbound";
        o << "\n";
    });
    cqs_.for_each([&](uint32_t h, const Cq& cq) {
        o << "cq " << h << " cqe " << cq.cqe << " pid " << cq.owner->pid << "\n";
    });
    qps_.for_each([&](uint32_t qpn, const Qp& qp) {
        o << "qp 0x" << std::hex << qpn << std::dec << " type " << qp_type_name(qp.type)
          << " state " << qp_state_name(qp.state) << " pid " << qp.owner->pid << " dest_qpn 0x"
          << std::hex << qp.attr.dest_qp_num << " sq_psn 0x" << qp.next_psn << " una 0x"
          << qp.una_psn << " epsn 0x" << qp.epsn << std::dec << " tx " << qp.tx_pkts << " rx "
          << qp.rx_pkts << " retx " << qp.retransmits;
        if (qp.type == IBV_QPT_XRC_RECV) {
            o << " xrcd " << qp.xrcd << " holders";
            for (const auto& h : qp.holders) o << " " << h.session->pid;
        }
        o << "\n";
    });
    srqs_.for_each([&](uint32_t h, const Srq& q) {
        o << "srq " << h << (q.xrc ? " type XRC xrcd " + std::to_string(q.xrcd) : " type BASIC")
          << " max_wr " << q.max_wr << " limit " << q.limit << " qps " << q.users << " pid "
          << q.owner->pid << "\n";
    });
    xrcds_.for_each([&](uint32_t h, const Xrcd& x) {
        o << "xrcd " << h << " inode ";
        if (x.has_inode)
            o << major(x.dev) << ":" << minor(x.dev) << ":" << x.ino;
        else
            o << "-";
        o << " handles " << x.handles << " objects " << x.objects << " pids";
        xrcd_handles_.for_each([&](uint32_t, const XrcdHandle& hh) {
            if (hh.xrcd == h) o << " " << hh.owner->pid;
        });
        o << "\n";
    });
    o << cm_.dump();     // connection manager ids (cm_agent.cpp)
    o << mcast_lines();  // multicast groups and their counters (mcast.cpp)
    o << "counters tx_pkts " << counters_.tx_pkts << " rx_pkts " << counters_.rx_pkts
      << " tx_bytes " << counters_.tx_bytes << " rx_bytes " << counters_.rx_bytes << " retransmits "
      << counters_.retransmits << " tx_stalls " << counters_.tx_stalls << " xrc_bad_srqn "
      << counters_.xrc_bad_srqn << "\n";
    for (size_t i = 1; i < size_t(net::DropReason::kCount); ++i)
        o << "drop " << net::drop_reason_name(net::DropReason(i)) << " " << counters_.drops[i]
          << "\n";
    o << fault_lines();  // docs/faults.md
    dump_ops(o, "counters_op", "tx", counters_.tx_op);
    dump_ops(o, "counters_op", "rx", counters_.rx_op);
    qps_.for_each([&](uint32_t qpn, const Qp& qp) {
        char head[32];
        std::snprintf(head, sizeof head, "qp_counters 0x%x", qpn);
        dump_ops(o, head, "tx", qp.transport, qp.tx_op);
        dump_ops(o, head, "rx", qp.transport, qp.rx_op);
        for (size_t i = 1; i < size_t(net::DropReason::kCount); ++i)
            if (qp.drops[i])
                o << head << " drop " << net::drop_reason_name(net::DropReason(i)) << " "
                  << qp.drops[i] << "\n";
    });
    return o.str();
}

}  // namespace uroce::emu
