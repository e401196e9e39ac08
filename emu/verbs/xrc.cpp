// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// XRC: domains shared through a file's inode, XRC SRQs (device-wide numbers), and
// TGT QPs that several processes hold at once (ibv_open_qp). The errno values are the
// Linux kernel's (drivers/infiniband/core/uverbs_cmd.c); see docs/xrc.md.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "emu/control/trace.h"
#include "emu/engine/counters.h"
#include "emu/engine/transport_env.h"
#include "emu/transport/completions.h"
#include "emu/transport/rc_responder.h"
#include "emu/verbs/control_verbs.h"
#include "emu/verbs/qp_state.h"
#include "emu/verbs/xrc_domains.h"
#include "net/opcodes.h"

namespace uroce::emu {

int XrcDomains::open_xrcd(Session& s, int fd, int oflags, uint32_t* handle) {
    uint32_t id = 0;
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) != 0) return EBADF;
        env_.xrcds.for_each([&](uint32_t h, const Xrcd& x) {
            if (x.has_inode && x.dev == st.st_dev && x.ino == st.st_ino) id = h;
        });
        if (!id && !(oflags & O_CREAT)) return EAGAIN;  // no domain yet, and no O_CREAT
        if (id && (oflags & O_EXCL)) return EINVAL;     // O_CREAT|O_EXCL on an existing one
        if (!id) {
            auto x = std::make_unique<Xrcd>();
            x->has_inode = true;
            x->dev = st.st_dev;
            x->ino = st.st_ino;
            if (!env_.xrcds.add(std::move(x), &id)) return ENOMEM;
        }
    } else if (!env_.xrcds.add(std::make_unique<Xrcd>(), &id)) {  // fd -1: a private domain
        return ENOMEM;
    }
    auto hh = std::make_unique<XrcdHandle>();
    hh->owner = &s;
    hh->xrcd = id;
    if (!env_.xrcd_handles.add(std::move(hh), handle)) {
        if (env_.xrcds.get(id)->handles == 0) env_.xrcds.remove(id);
        return ENOMEM;
    }
    ++env_.xrcds.get(id)->handles;
    s.xrcd_handles.push_back(*handle);
    return 0;
}

// Drops one reference (a handle or an object) and frees the domain after the last.
static void drop_xrcd_ref(HandleTable<Xrcd>& xrcds, uint32_t id) {
    Xrcd* x = xrcds.get(id);
    if (x && x->handles == 0 && x->objects == 0) xrcds.remove(id);
}

int XrcDomains::close_xrcd(Session& s, uint32_t handle) {
    XrcdHandle* hh = env_.xrcd_handles.get(handle);
    if (!owned(s, hh)) return EINVAL;
    if (hh->objects) return EBUSY;  // SRQs or TGT QPs created through it still exist
    uint32_t id = hh->xrcd;
    --env_.xrcds.get(id)->handles;
    env_.xrcd_handles.remove(handle);
    auto it = std::find(s.xrcd_handles.begin(), s.xrcd_handles.end(), handle);
    if (it != s.xrcd_handles.end()) s.xrcd_handles.erase(it);
    drop_xrcd_ref(env_.xrcds, id);
    if (const Xrcd* x = env_.xrcds.get(id))
        env_.trace.add("pid %d close_xrcd handle %u: xrcd %u lives on (%u handles, %u objects)",
                       int(s.pid), handle, id, x->handles, x->objects);
    else
        env_.trace.add("pid %d close_xrcd handle %u: xrcd %u destroyed (last handle)", int(s.pid),
                       handle, id);
    return 0;
}

// Called when an XRC object (SRQ or TGT QP) created through `handle` goes away.
void XrcDomains::object_gone(uint32_t xrcd, uint32_t handle) {
    if (XrcdHandle* hh = env_.xrcd_handles.get(handle); hh && hh->xrcd == xrcd) --hh->objects;
    if (Xrcd* x = env_.xrcds.get(xrcd)) --x->objects;
    drop_xrcd_ref(env_.xrcds, xrcd);
}

bool XrcDomains::holds(const Session& s, const Qp* qp) const {
    if (!qp) return false;
    if (qp->type != IBV_QPT_XRC_RECV) return qp->owner == &s;
    return find_hold(s, *qp, 0) != nullptr;
}

// The session's handle of a TGT QP whose ibv_qp is `cookie` (0: its first handle).
const Qp::Holder* XrcDomains::find_hold(const Session& s, const Qp& qp, uint64_t cookie) const {
    for (const auto& h : qp.holders)
        if (h.session == &s && (!cookie || h.cookie == cookie)) return &h;
    return nullptr;
}

int XrcDomains::open_qp(Session& s, const abi::OpenQpReq& r, abi::OpenQpResp* out) {
    XrcdHandle* hh = env_.xrcd_handles.get(r.xrcd);
    if (!owned(s, hh)) return EINVAL;
    Qp* qp = env_.qps.get(r.qpn);
    // As the kernel's ib_open_qp: only a TGT QP of that same domain can be opened.
    if (!qp || qp->type != IBV_QPT_XRC_RECV || qp->xrcd != hh->xrcd ||
        r.qp_type != IBV_QPT_XRC_RECV)
        return EINVAL;
    // Each open is a handle of its own, as the kernel's ib_uverbs_open_qp makes one (its
    // creator or an earlier open in this process notwithstanding). It pins the XRCD handle
    // it was opened through: ibv_close_xrcd on that is EBUSY until this handle is destroyed.
    qp->holders.push_back({&s, r.cookie, r.xrcd});
    ++hh->objects;
    s.qps.push_back(r.qpn);  // once per handle: a dying session releases each
    out->qpn = r.qpn;
    out->state = qp->state;
    return 0;
}

void XrcDomains::release_qp(Session& s, uint32_t qpn, uint64_t cookie) {
    Qp* qp = env_.qps.get(qpn);
    if (!qp) return;
    if (qp->type != IBV_QPT_XRC_RECV) return env_.verbs.destroy_qp_now(qpn);
    auto& hs = qp->holders;
    const Qp::Holder* h = find_hold(s, *qp, cookie);
    if (!h) return;
    // This handle's XRCD handle is free again (as the kernel's uxrcd refcnt), even if the QP
    // lives on: its creator can destroy it, close its domain handle and go.
    if (XrcdHandle* hh = env_.xrcd_handles.get(h->xrcd_handle); hh && hh->objects) --hh->objects;
    hs.erase(hs.begin() + (h - hs.data()));
    auto it = std::find(s.qps.begin(), s.qps.end(), qpn);
    if (it != s.qps.end()) s.qps.erase(it);
    if (hs.empty())
        return env_.verbs.destroy_qp_now(qpn);  // the last handle (as __ib_destroy_shared_qp)
    env_.trace.add("qp 0x%x (XRC_TGT) handle released by pid %d; lives on for pid %d (%zu handles)",
                   qpn, int(s.pid), int(hs.front().session->pid), hs.size());
    // The QP outlives its creator's handle: it now belongs to the next holder.
    qp->owner = hs.front().session;
    qp->cookie = hs.front().cookie;
}

// An XRC SRQ is destroyed (by its owner, or because its process closed): a TGT QP in the
// middle of a message that SRQ serves forgets the message, whose receive, CQ, PD and memory
// (rx_owner, write_owner: the SRQ owner's session, which may be freed next) are gone. The
// message's later packets then name an SRQ the QP does not have, and fail as any such packet.
void XrcDomains::srq_gone(uint32_t srqn) {
    env_.qps.for_each([&](uint32_t, Qp& qp) {
        if (qp.type != IBV_QPT_XRC_RECV || qp.srq != srqn) return;
        if (qp.have_rwr || qp.have_write)
            env_.trace.add(
                "qp 0x%x (XRC_TGT): srq %u destroyed during a message; the message is "
                "dropped",
                qp.qpn, srqn);
        qp.have_rwr = qp.have_write = qp.write_imm_pending = false;
        qp.rx_owner = qp.write_owner = nullptr;
        qp.srq = qp.pd = qp.rx_cq = 0;
    });
}

void XrcDomains::post_qp_async(Qp& qp, ibv_event_type type) {
    if (qp.type != IBV_QPT_XRC_RECV)
        return env_.done.post_async(qp.owner, type, qp.cookie, "qp", qp.qpn);
    for (const auto& h : qp.holders) env_.done.post_async(h.session, type, h.cookie, "qp", qp.qpn);
}

// An XRC request at a TGT QP: the XRCETH names the SRQ whose receives (and PD, and
// CQ) serve this message. It must be an XRC SRQ of the TGT QP's own domain.
void XrcDomains::receive(Qp& qp, const net::Packet& p) {
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    bool in_order = p.bth.psn == qp.epsn;
    bool starts = info->flags & (net::kFirst | net::kReadReq | net::kAtomicOp);
    if (in_order && starts) {
        Srq* srq = env_.srqs.get(p.xrc.srqn);
        if (!srq || !srq->xrc || srq->xrcd != qp.xrcd) {
            ++env_.counters.xrc_bad_srqn;
            env_.trace.add("qp 0x%x (XRC_TGT, xrcd %u): request names srq %u, %s", qp.qpn, qp.xrcd,
                           p.xrc.srqn,
                           !srq        ? "which does not exist"
                           : !srq->xrc ? "which is not an XRC SRQ"
                                       : "which belongs to another XRC domain");
            return env_.responder.error(qp, IBV_WC_REM_INV_REQ_ERR, 0x61, p.bth.psn,
                                        IBV_EVENT_QP_REQ_ERR);
        }
        qp.srq = p.xrc.srqn;
        qp.pd = srq->pd;
    } else if (in_order && p.xrc.srqn != qp.srq) {
        ++env_.counters.xrc_bad_srqn;
        env_.trace.add("qp 0x%x (XRC_TGT): a message that began on srq %u continues on srq %u",
                       qp.qpn, qp.srq, p.xrc.srqn);
        return env_.responder.error(qp, IBV_WC_REM_INV_REQ_ERR, 0x61, p.bth.psn,
                                    IBV_EVENT_QP_REQ_ERR);
    }
    env_.responder.receive(qp, p);
}

}  // namespace uroce::emu
