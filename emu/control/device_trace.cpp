// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Trace lines for control calls (docs/trace.md): one per call that changes something, and
// one per failed call, with the reason where the device can tell it.
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "emu/engine/device.h"
#include "emu/verbs/qp_state.h"

namespace uroce::emu {

namespace {
const char* op_name(abi::Op op) {
    switch (op) {
    case abi::Op::kOpen: return "open";
    case abi::Op::kAllocPd: return "alloc_pd";
    case abi::Op::kDeallocPd: return "dealloc_pd";
    case abi::Op::kRegMr: return "reg_mr";
    case abi::Op::kDeregMr: return "dereg_mr";
    case abi::Op::kCreateCompChannel: return "create_comp_channel";
    case abi::Op::kDestroyCompChannel: return "destroy_comp_channel";
    case abi::Op::kCreateCq: return "create_cq";
    case abi::Op::kDestroyCq: return "destroy_cq";
    case abi::Op::kCreateQp: return "create_qp";
    case abi::Op::kModifyQp: return "modify_qp";
    case abi::Op::kQueryQp: return "query_qp";
    case abi::Op::kDestroyQp: return "destroy_qp";
    case abi::Op::kCreateSrq: return "create_srq";
    case abi::Op::kModifySrq: return "modify_srq";
    case abi::Op::kQuerySrq: return "query_srq";
    case abi::Op::kDestroySrq: return "destroy_srq";
    case abi::Op::kOpenXrcd: return "open_xrcd";
    case abi::Op::kCloseXrcd: return "close_xrcd";
    case abi::Op::kOpenQp: return "open_qp";
    case abi::Op::kAttachMcast: return "attach_mcast";
    case abi::Op::kDetachMcast: return "detach_mcast";
    case abi::Op::kAllocMw: return "alloc_mw";
    case abi::Op::kDeallocMw: return "dealloc_mw";
    case abi::Op::kQueryPort: return "query_port";
    case abi::Op::kResizeCq: return "resize_cq";
    case abi::Op::kReregMr: return "rereg_mr";
    case abi::Op::kAdviseMr: return "advise_mr";
    case abi::Op::kQueryPd: return "import_pd";
    case abi::Op::kQueryMr: return "import_mr";
    default: return "request";
    }
}

// The object a request names, for the failure line ("qp 0x12", "cq 3"); empty if none.
void object_of(const abi::Request& req, char* buf, size_t len) {
    using abi::Op;
    buf[0] = 0;
    switch (req.op) {
    case Op::kModifyQp: std::snprintf(buf, len, " qp 0x%x", req.u.modify_qp.qpn); break;
    case Op::kQueryQp: std::snprintf(buf, len, " qp 0x%x", req.u.query_qp.qpn); break;
    case Op::kDestroyQp: std::snprintf(buf, len, " qp 0x%x", req.u.handle.handle); break;
    case Op::kOpenQp: std::snprintf(buf, len, " qp 0x%x", req.u.open_qp.qpn); break;
    case Op::kDestroyCq: std::snprintf(buf, len, " cq %u", req.u.handle.handle); break;
    case Op::kModifySrq: std::snprintf(buf, len, " srq %u", req.u.modify_srq.handle); break;
    case Op::kQuerySrq:
    case Op::kDestroySrq: std::snprintf(buf, len, " srq %u", req.u.handle.handle); break;
    case Op::kCloseXrcd: std::snprintf(buf, len, " xrcd handle %u", req.u.handle.handle); break;
    case Op::kDeallocPd: std::snprintf(buf, len, " pd %u", req.u.pd.pd); break;
    case Op::kDeregMr:
    case Op::kQueryMr: std::snprintf(buf, len, " mr %u", req.u.handle.handle); break;
    case Op::kQueryPd: std::snprintf(buf, len, " pd %u", req.u.pd.pd); break;
    case Op::kReregMr: std::snprintf(buf, len, " mr %u", req.u.rereg_mr.handle); break;
    case Op::kResizeCq: std::snprintf(buf, len, " cq %u", req.u.resize_cq.handle); break;
    case Op::kAttachMcast:
    case Op::kDetachMcast: std::snprintf(buf, len, " qp 0x%x", req.u.mcast.qpn); break;
    default: break;
    }
}
}  // namespace

void ControlVerbs::trace_call(const Session& s, const abi::Request& req, const abi::Response& resp,
                              ibv_qp_state before) {
    using abi::Op;
    const int pid = int(s.pid);
    if (resp.err) {
        char obj[48];
        object_of(req, obj, sizeof obj);
        char why[160] = "";
        if (req.op == Op::kModifyQp && resp.err == EINVAL)
            if (const Qp* qp = env_.qps.get(req.u.modify_qp.qpn); qp && env_.xrc.holds(s, qp)) {
                const auto& m = req.u.modify_qp;
                uint32_t next =
                    (m.mask & IBV_QP_STATE) ? enum_bits(m.attr.qp_state) : uint32_t(qp->state);
                if (next > IBV_QPS_ERR)
                    std::snprintf(why, sizeof why, "%u is no QP state", next);
                else
                    qp_modify_explain(qp->type, qp->state, ibv_qp_state(next),
                                      m.mask & ~qp_ignored_attrs(qp->type), why, sizeof why);
            }
        env_.trace.add("pid %d %s%s failed: %s%s%s", pid, op_name(req.op), obj,
                       strerrorname_np(resp.err) ? strerrorname_np(resp.err) : "?",
                       why[0] ? ": " : "", why);
        return;
    }
    const auto& u = req.u;
    const auto& r = resp.u;
    switch (req.op) {
    case Op::kAllocPd: env_.trace.add("pid %d alloc_pd pd %u", pid, r.pd.pd); break;
    case Op::kDeallocPd: env_.trace.add("pid %d dealloc_pd pd %u", pid, u.pd.pd); break;
    case Op::kRegMr:
        env_.trace.add(
            "pid %d reg_mr mr %u pd %u lkey 0x%x rkey 0x%x iova 0x%llx length %llu "
            "access 0x%x",
            pid, r.reg_mr.handle, u.reg_mr.pd, r.reg_mr.lkey, r.reg_mr.rkey,
            static_cast<unsigned long long>(u.reg_mr.iova),
            static_cast<unsigned long long>(u.reg_mr.length), u.reg_mr.access);
        break;
    case Op::kDeregMr: env_.trace.add("pid %d dereg_mr mr %u", pid, u.handle.handle); break;
    case Op::kReregMr:
        if (const Mr* mr = mr_for_key(u.rereg_mr.handle))
            env_.trace.add(
                "pid %d rereg_mr mr %u flags 0x%x pd %u iova 0x%llx length %llu access 0x%x", pid,
                u.rereg_mr.handle, u.rereg_mr.flags, mr->pd,
                static_cast<unsigned long long>(mr->iova),
                static_cast<unsigned long long>(mr->length), mr->access);
        break;
    case Op::kCreateCq:
        env_.trace.add("pid %d create_cq cq %u cqe %u", pid, r.create_cq.handle, r.create_cq.cqe);
        break;
    case Op::kDestroyCq: env_.trace.add("pid %d destroy_cq cq %u", pid, u.handle.handle); break;
    case Op::kResizeCq:
        env_.trace.add("pid %d resize_cq cq %u cqe %u", pid, u.resize_cq.handle, r.resize_cq.cqe);
        break;
    case Op::kCreateQp: {
        const auto& c = u.create_qp;
        env_.trace.add(
            "pid %d create_qp qp 0x%x type %s pd %u send_cq %u recv_cq %u srq %u "
            "xrcd handle %u max_send_wr %u max_recv_wr %u",
            pid, r.create_qp.qpn, qp_type_name(ibv_qp_type(c.qp_type)), c.pd, c.send_cq, c.recv_cq,
            c.srq, c.xrcd, r.create_qp.cap.max_send_wr, r.create_qp.cap.max_recv_wr);
        break;
    }
    case Op::kModifyQp: {
        const auto& m = u.modify_qp;
        const Qp* qp = env_.qps.get(m.qpn);
        const ibv_qp_state now = qp ? qp->state : before;
        char extra[160] = "";
        size_t n = 0;
        auto put = [&](const char* fmt, unsigned v) {
            if (n < sizeof extra) n += size_t(std::snprintf(extra + n, sizeof extra - n, fmt, v));
        };
        if (m.mask & IBV_QP_DEST_QPN) put(" dest_qp 0x%x", m.attr.dest_qp_num);
        if (m.mask & IBV_QP_RQ_PSN) put(" rq_psn 0x%x", m.attr.rq_psn & 0xffffff);
        if (m.mask & IBV_QP_SQ_PSN) put(" sq_psn 0x%x", m.attr.sq_psn & 0xffffff);
        if (m.mask & IBV_QP_PATH_MTU) put(" mtu %u", 128u << unsigned(m.attr.path_mtu));
        if (m.mask & IBV_QP_TIMEOUT) put(" timeout %u", m.attr.timeout);
        // Not what an XRC QP ignored (qp_ignored_attrs).
        const uint64_t used = m.mask & ~(qp ? qp_ignored_attrs(qp->type) : 0);
        if (used & IBV_QP_RETRY_CNT) put(" retry_cnt %u", m.attr.retry_cnt);
        if (used & IBV_QP_RNR_RETRY) put(" rnr_retry %u", m.attr.rnr_retry);
        env_.trace.add("pid %d modify_qp qp 0x%x %s -> %s mask 0x%llx%s", pid, m.qpn,
                       qp_state_name(before), qp_state_name(now),
                       static_cast<unsigned long long>(m.mask), extra);
        break;
    }
    case Op::kDestroyQp: break;  // release_qp / destroy_qp_now say what happened
    case Op::kCreateSrq: {
        const auto& c = u.create_srq;
        if (c.srq_type == IBV_SRQT_XRC)
            env_.trace.add("pid %d create_srq srq %u type XRC xrcd handle %u cq %u max_wr %u", pid,
                           r.create_srq.handle, c.xrcd, c.cq, r.create_srq.max_wr);
        else
            env_.trace.add("pid %d create_srq srq %u pd %u max_wr %u", pid, r.create_srq.handle,
                           c.pd, r.create_srq.max_wr);
        break;
    }
    case Op::kModifySrq:
        if (u.modify_srq.mask & IBV_SRQ_LIMIT)
            env_.trace.add("pid %d modify_srq srq %u srq_limit %u%s", pid, u.modify_srq.handle,
                           u.modify_srq.attr.srq_limit,
                           u.modify_srq.attr.srq_limit ? " (armed)" : "");
        if (u.modify_srq.mask & IBV_SRQ_MAX_WR)
            env_.trace.add("pid %d modify_srq srq %u max_wr %u", pid, u.modify_srq.handle,
                           u.modify_srq.attr.max_wr);
        break;
    case Op::kDestroySrq: env_.trace.add("pid %d destroy_srq srq %u", pid, u.handle.handle); break;
    case Op::kOpenXrcd:
        if (const XrcdHandle* hh = env_.xrcd_handles.get(r.xrcd.handle))
            if (const Xrcd* x = env_.xrcds.get(hh->xrcd)) {
                if (x->has_inode)
                    env_.trace.add(
                        "pid %d open_xrcd xrcd %u handle %u inode %u:%u:%llu %s, %u handles", pid,
                        hh->xrcd, r.xrcd.handle, major(x->dev), minor(x->dev),
                        static_cast<unsigned long long>(x->ino),
                        x->handles == 1 ? "created" : "joined", x->handles);
                else
                    env_.trace.add("pid %d open_xrcd xrcd %u handle %u (no inode)", pid, hh->xrcd,
                                   r.xrcd.handle);
            }
        break;
    case Op::kCloseXrcd: break;  // close_xrcd says whether the domain lives on
    case Op::kOpenQp:
        if (const Qp* qp = env_.qps.get(r.open_qp.qpn))
            env_.trace.add("pid %d open_qp qp 0x%x (%s, xrcd %u, state %s), %zu handles", pid,
                           r.open_qp.qpn, qp_type_name(qp->type), qp->xrcd,
                           qp_state_name(qp->state), qp->holders.size());
        break;
    case Op::kAttachMcast:
    case Op::kDetachMcast: {
        const uint8_t* g = u.mcast.gid;
        env_.trace.add("pid %d %s qp 0x%x group %u.%u.%u.%u", pid, op_name(req.op), u.mcast.qpn,
                       g[12], g[13], g[14], g[15]);
        break;
    }
    case Op::kAllocMw:
        env_.trace.add("pid %d alloc_mw mw %u type %u rkey 0x%x", pid, r.mw.handle, u.mw.type,
                       r.mw.rkey);
        break;
    case Op::kDeallocMw: env_.trace.add("pid %d dealloc_mw mw %u", pid, u.handle.handle); break;
    default: break;  // queries, channels: nothing changed worth a line
    }
}

}  // namespace uroce::emu
