// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device side of the QP verbs: creating, modifying, querying and destroying QPs on
// behalf of one application session. Every argument is validated here; the library is not
// trusted.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emu/engine/device.h"
#include "emu/engine/port_mtu.h"
#include "emu/verbs/qp_state.h"

namespace uroce::emu {

int ControlVerbs::create_qp(Session& s, const abi::CreateQpReq& r, abi::CreateQpResp* out,
                            int fds[2]) {
    bool ini = r.qp_type == IBV_QPT_XRC_SEND, tgt = r.qp_type == IBV_QPT_XRC_RECV;
    if (r.qp_type != IBV_QPT_RC && r.qp_type != IBV_QPT_UC && r.qp_type != IBV_QPT_UD && !ini &&
        !tgt)
        return EOPNOTSUPP;
    // An XRC INI QP only sends (PD and send CQ); an XRC TGT QP only has its domain:
    // its receives, PD and CQ come from the XRC SRQ each message names.
    Pd* pd = tgt ? nullptr : env_.pds.get(r.pd);
    Cq* scq = tgt ? nullptr : env_.cqs.get(r.send_cq);
    Cq* rcq = tgt || ini ? nullptr : env_.cqs.get(r.recv_cq);
    XrcdHandle* xh = tgt ? env_.xrcd_handles.get(r.xrcd) : nullptr;
    if (tgt ? !owned(s, xh) : (!owned(s, pd) || !owned(s, scq) || (!ini && !owned(s, rcq))))
        return EINVAL;
    Srq* srq = nullptr;
    if (r.srq && !ini && !tgt) {
        srq = env_.srqs.get(r.srq);
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
    Qp* q = env_.qps.add(std::move(qp), &qpn);
    if (!q) return ENOMEM;
    q->qpn = qpn;
    if (pd) ++pd->users;
    if (scq) ++scq->users;
    if (rcq) ++rcq->users;
    if (srq) ++srq->users;
    if (tgt) {
        q->holders.push_back({&s, r.cookie, r.xrcd});
        ++xh->objects;
        ++env_.xrcds.get(xh->xrcd)->objects;
    }
    s.qps.push_back(qpn);
    set_udp_sport(*q, net::sport_for_qpn(qpn), 0);
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

// The new port's socket first: a QP that keeps its port keeps its socket.
void ControlVerbs::set_udp_sport(Qp& qp, uint16_t port, uint16_t local) {
    if (port == qp.udp_sport && local == qp.tx.local) return;
    SourcePorts& ports = env_.wire.sources();
    net::TxSource tx = port ? ports.acquire(port, local) : net::TxSource{};
    if (qp.udp_sport) ports.release(qp.udp_sport, qp.tx.local);
    qp.udp_sport = port;
    qp.tx = tx;
}

int ControlVerbs::modify_qp(Session& s, const abi::ModifyQpReq& r) {
    Qp* qp = env_.qps.get(r.qpn);
    if (!env_.xrc.holds(s, qp)) return EINVAL;
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
    net::Endpoint dest;
    uint16_t local = 0;
    if (m & IBV_QP_AV) {
        const ibv_ah_attr& ah = a.ah_attr;
        // RoCE needs a GRH whose source GID is one of the table's (each an address of the
        // device, whose socket the QP sends from). The destination GID is of the same IP
        // version (an IPv4-mapped one for IPv4), as the kernel requires of a RoCEv2 path; a
        // link-local one is on the device's interface.
        local = env_.wire.local_of_gid(ah.grh.sgid_index);
        if (!ah.is_global || local == Wire::kNoLocal || (ah.port_num && ah.port_num != 1))
            return EINVAL;
        const uint8_t* g = ah.grh.dgid.raw;
        if (net::gid_is_v4(g) == env_.wire.local(local).is_v6()) return EINVAL;
        dest = net::Endpoint::from_gid(g, env_.config.port, env_.config.ipv6_scope);
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
        qp->ip_marks = net::ip_marks_from_grh(a.ah_attr.grh.traffic_class, a.ah_attr.grh.hop_limit);
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
    // As rxe: the path's flow label, or one made of the two QP numbers (net/udp_sport.h).
    if (m & IBV_QP_AV)
        set_udp_sport(*qp, net::sport_for_path(a.ah_attr.grh.flow_label, qp->qpn, q.dest_qp_num),
                      local);
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
        qp->ack_owed = false;  // nothing owed to the old incarnation's peer
        qp->read_owed.active = false;
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
        env_.done.flush_queues(*qp);
        env_.done.last_wqe_reached(*qp);
    }
    if (next == IBV_QPS_RTS) env_.sched.mark_ready(*qp);
    return 0;
}

int ControlVerbs::query_qp(Session& s, const abi::QueryQpReq& r, abi::QueryQpResp* out) {
    Qp* qp = env_.qps.get(r.qpn);
    if (!env_.xrc.holds(s, qp)) return EINVAL;
    out->attr = qp->attr;
    out->attr.qp_state = qp->state;
    out->attr.cur_qp_state = qp->state;
    out->attr.cap = qp->cap;
    out->attr.sq_draining = 0;
    out->cap = qp->cap;
    out->sq_sig_all = qp->sq_sig_all;
    return 0;
}

int ControlVerbs::destroy_qp(Session& s, uint32_t qpn, uint64_t cookie) {
    Qp* qp = env_.qps.get(qpn);
    if (!env_.xrc.holds(s, qp)) return EINVAL;
    // A TGT QP's handles are told apart by the library's ibv_qp (each ibv_open_qp is one).
    if (qp->type == IBV_QPT_XRC_RECV && !env_.xrc.find_hold(s, *qp, cookie)) return EINVAL;
    // UD sends posted before the destroy leave first: their doorbell may still be unread
    // when this command runs, and on an HCA it would have reached the QP before the command.
    if (qp->type == IBV_QPT_UD && qp->state == IBV_QPS_RTS) env_.requester.progress(*qp);
    env_.xrc.release_qp(s, qpn, cookie);  // a shared XRC TGT QP lives on while other handles exist
    return 0;
}

void ControlVerbs::destroy_qp_now(uint32_t qpn) {
    Qp* qp = env_.qps.get(qpn);
    if (!qp) return;
    env_.trace.add("qp 0x%x (%s) destroyed, was %s, pid %d", qpn, qp_type_name(qp->type),
                   qp_state_name(qp->state), int(qp->owner->pid));
    env_.sched.forget(*qp);
    // A TGT QP holds no PD: its `pd` is the one of the SRQ serving the current message.
    if (Pd* pd = env_.pds.get(qp->pd); pd && qp->type != IBV_QPT_XRC_RECV) --pd->users;
    if (Cq* c = env_.cqs.get(qp->send_cq)) --c->users;
    if (Cq* c = env_.cqs.get(qp->recv_cq)) --c->users;
    if (Srq* q = env_.srqs.get(qp->srq); q && qp->type != IBV_QPT_XRC_RECV) --q->users;
    // Its handles' pins on their XRCD handles went with them (release_qp); the domain's
    // count of its objects goes now.
    if (qp->type == IBV_QPT_XRC_RECV) env_.xrc.object_gone(qp->xrcd, 0);
    if (qp->type == IBV_QPT_UD) env_.mcast.detach_all(qpn);  // as uverbs does on destroy
    env_.windows.unbind_qp_windows(*qp);
    set_udp_sport(*qp, 0, 0);
    if (qp->type != IBV_QPT_XRC_RECV) erase_handle(qp->owner->qps, qpn);  // TGT: release_qp did
    env_.qps.remove(qpn);
}

}  // namespace uroce::emu
