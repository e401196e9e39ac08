// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The CM agent's disconnection: rdma_disconnect, DREQ and DREP received, and TimeWait.
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "emu/cm/cm_agent.h"
#include "emu/cm/cm_mad.h"
#include "emu/engine/schedule.h"  // now_ns

namespace uroce::emu {

int CmAgent::disconnect(Id& id) {
    switch (id.st) {
    case St::kEstablished:
    case St::kRepSent:  // the RTU was lost, the passive side gives up on it
    case St::kRepRcvd: {
        table_.leave_pending(id);
        cm::Short m;
        m.local_comm_id = id.local_comm_id;
        m.remote_comm_id = id.remote_comm_id;
        m.remote_qpn = id.remote_qpn;
        id.tid = new_tid();
        cm::encode_dreq(m, id.tid, id.mad);
        id.st = St::kDreqSent;
        send_request(id);
        return 0;
    }
    case St::kDreqRcvd: {
        cm::Short m;
        m.local_comm_id = id.local_comm_id;
        m.remote_comm_id = id.remote_comm_id;
        cm::encode_drep(m, id.tid, id.mad);
        send_mad(id.remote_addr, id.mad, id.tos);
        enter_timewait(id);
        return 0;
    }
    default: return EINVAL;
    }
}

void CmAgent::enter_timewait(Id& id) {
    id.st = St::kTimewait;
    arm(id, now_ns() + kTimewaitNs);
}

void CmAgent::on_dreq(const CmAddr& peer, const uint8_t* mad, uint64_t tid) {
    cm::Short m;
    cm::decode_dreq(mad, &m);
    Id* id = table_.by_comm(m.remote_comm_id);
    cm::Short rep;
    rep.local_comm_id = m.remote_comm_id;
    rep.remote_comm_id = m.local_comm_id;
    if (!id || id->remote_comm_id != m.local_comm_id) {
        // No such connection (any more): answer, so the peer stops asking (as the kernel does).
        uint8_t out[cm::kMadLen];
        cm::encode_drep(rep, tid, out);
        send_mad(peer, out, rx_tos_);
        return;
    }
    switch (id->st) {
    case St::kEstablished:
    case St::kRepSent:
    case St::kRepRcvd: {
        id->deadline = 0;
        table_.leave_pending(*id);
        id->tid = tid;
        id->st = St::kDreqRcvd;
        post(*id, RDMA_CM_EVENT_DISCONNECTED);
        break;
    }
    case St::kDreqSent: {
        // Both sides disconnect at once: answer theirs, and ours is answered too.
        cm::encode_drep(rep, tid, id->mad);
        send_mad(id->remote_addr, id->mad, id->tos);
        enter_timewait(*id);
        post(*id, RDMA_CM_EVENT_DISCONNECTED);
        break;
    }
    case St::kTimewait: {
        uint8_t out[cm::kMadLen];
        cm::encode_drep(rep, tid, out);
        send_mad(id->remote_addr, out, id->tos);
        break;
    }
    default: break;
    }
}

void CmAgent::on_drep(const uint8_t* mad) {
    cm::Short m;
    cm::decode_drep(mad, &m);
    Id* id = table_.by_comm(m.remote_comm_id);
    if (!id || id->st != St::kDreqSent) return;
    enter_timewait(*id);
    post(*id, RDMA_CM_EVENT_DISCONNECTED);
}

}  // namespace uroce::emu
