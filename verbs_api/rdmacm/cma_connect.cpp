// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm over uroce, connections: connect, listen, accept, reject, disconnect, establish,
// and the synchronous endpoints of rdma_create_ep. The IB CM protocol itself runs in the
// device (emu/cm/cm_agent.h). docs/cm.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rdma_verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

int establish(Id* id) {
    abi::CmReq r = cm_req(abi::CmOp::kEstablish, id->handle);
    return cm_call(*id->dev, r);
}

// The device's CM id h of a listener, no longer the library's: its events go nowhere and
// the device destroys it.
static void release_listen(DevConn* d, uint32_t h) {
    {
        std::lock_guard<std::mutex> g(g_mu);
        g_ids.erase(key(d->tag, h));
    }
    abi::CmReq r = cm_req(abi::CmOp::kDestroy, h);
    cm_call(*d, r);
}

// Binds and listens on id->port on device d for the wildcard listener id (held under
// g_listen_mu). Returns 0 (the device's CM id added to id->listens) or the errno (nothing
// left on d).
int listen_on_dev(Id* id, DevConn* d) {
    abi::CmResp resp{};
    if (int e = bind_request(id, d, nullptr, id->port, &resp)) return e;
    register_key(d->tag, resp.handle, id);
    abi::CmReq l = cm_req(abi::CmOp::kListen, resp.handle);
    l.backlog = id->backlog;
    if (int e = cm_call(*d, l)) {
        release_listen(d, resp.handle);
        return e;
    }
    id->listens.emplace_back(d, resp.handle);
    return 0;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

// ---- connections -------------------------------------------------------------------------

static bool valid_param(Id* id, rdma_conn_param* p) {
    if (id->id.ps != RDMA_PS_TCP) return true;
    if (!id->id.qp && !p) return false;
    if (!p) return true;
    if (p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > abi::kMaxQpRdAtom)
        return false;
    if (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > abi::kMaxQpRdAtom)
        return false;
    return true;
}

int rdma_connect(rdma_cm_id* idp, rdma_conn_param* p) {
    Id* id = id_of(idp);
    if (!valid_param(id, p)) return fail(EINVAL);
    if (!id->route_resolved || !id->dev || id->conn_req || id->listening) return fail(EINVAL);
    size_t max = is_ud(id) ? abi::kCmSidrReqUserPrivate : abi::kCmReqUserPrivate;
    size_t pd_len = id->connect_data.size() + (p && p->private_data ? p->private_data_len : 0);
    if (pd_len > max) return fail(EINVAL);
    id->init_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ? p->initiator_depth
                                                                    : uint8_t(abi::kMaxQpRdAtom);
    id->resp_res = p && p->responder_resources != RDMA_MAX_RESP_RES ? p->responder_resources
                                                                    : uint8_t(abi::kMaxQpRdAtom);
    id->retry_count = p ? p->retry_count & 7 : 7;
    abi::CmReq r = cm_req(abi::CmOp::kConnect, id->handle);
    r.qp_type = idp->qp_type;
    id->remote.gid(r.remote_addr);
    r.remote_port = port_of(&idp->route.addr.dst_addr);
    r.qpn = idp->qp ? idp->qp->qp_num : (p ? p->qp_num : 0);
    r.srq = idp->qp ? idp->qp->srq != nullptr : (p ? p->srq : 0);
    r.psn = id->local_psn;
    r.tos = id->tos;  // the REQ's traffic class and the TOS of the id's MADs
    r.responder_resources = id->resp_res;
    r.initiator_depth = id->init_depth;
    r.flow_control = p ? p->flow_control : 0;
    r.retry_count = id->retry_count;
    r.rnr_retry_count = p ? p->rnr_retry_count & 7 : 7;
    r.mtu = id->mtu;
    r.private_data_len = uint8_t(pd_len);
    if (!id->connect_data.empty())
        std::memcpy(r.private_data, id->connect_data.data(), id->connect_data.size());
    if (p && p->private_data && p->private_data_len)
        std::memcpy(r.private_data + id->connect_data.size(), p->private_data, p->private_data_len);
    if (int e = cm_call(*id->dev, r)) return fail(e);
    id->connect_data.clear();
    return complete(id);
}

int rdma_establish(rdma_cm_id* idp) {
    Id* id = id_of(idp);
    if (idp->qp || !id->have_conn || !id->dev) return fail(EINVAL);
    if (int e = establish(id)) return fail(e);
    return 0;
}

// Listens on id->port on every device of the families the wildcard listener takes (an
// IPv4 one: IPv4 devices; an IPv6 one: all, or IPv6 ones with IPV6_V6ONLY). None running is
// fine: the listener waits for one, as the kernel's on its listen-any list
// (waiting_listeners.cpp). On failure nothing is left registered and the errno is returned.
static int listen_everywhere(Id* id) {
    sync_devices();
    const bool afonly = effective_afonly(id);
    std::vector<DevConn*> devs;
    for (DevConn* d : all_devs())
        if (listens_on(id->bind_family, afonly, d->addr)) devs.push_back(d);
    int err = 0;
    for (DevConn* d : devs) {
        if (int e = ensure_open(*d)) {  // gone meanwhile: the others may do
            if (!err) err = e;
            continue;
        }
        if (int e = listen_on_dev(id, d)) {
            err = e;
            break;
        }
    }
    if (err && (id->listens.empty() || err == EADDRINUSE)) {
        for (auto& [d, h] : id->listens) release_listen(d, h);
        id->listens.clear();
        return err;
    }
    return 0;
}

int rdma_listen(rdma_cm_id* idp, int backlog) {
    Id* id = id_of(idp);
    if (id->listening || id->addr_resolved) return fail(EINVAL);
    if (!id->bound) {
        // rdma-core binds an unbound listener to the IPv4 wildcard.
        sockaddr_in any{};
        any.sin_family = AF_INET;
        if (rdma_bind_addr(idp, reinterpret_cast<sockaddr*>(&any))) return -1;
    }
    if (id->dev) {
        abi::CmReq r = cm_req(abi::CmOp::kListen, id->handle);
        r.backlog = backlog;
        if (int e = cm_call(*id->dev, r)) return fail(e);
        id->listening = true;
        return 0;
    }
    // Wildcard: listen on every device, and on every device started later. A port the
    // library picked (bind to port 0) that is taken on some device is picked again, as the
    // kernel finds a port free everywhere.
    std::lock_guard<std::mutex> lg(g_listen_mu);
    id->backlog = backlog;
    int err = listen_everywhere(id);
    for (int tries = 0; err == EADDRINUSE && id->any_port && tries < 64; ++tries) {
        id->port = random_port();
        set_port(&id->id.route.addr.src_storage, id->port);
        err = listen_everywhere(id);
    }
    if (err) return fail(err);
    id->listening = true;
    watch_for_devices();
    return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** idp) {
    Id* l = id_of(listen);
    if (!l->sync || !idp) return fail(EINVAL);
    if (listen->event) {
        rdma_ack_cm_event(listen->event);
        listen->event = nullptr;
    }
    rdma_cm_event* ev;
    if (rdma_get_cm_event(listen->channel, &ev)) return -1;
    int e = 0;
    if (ev->status) {
        e = ev->status < 0 ? -ev->status : ev->status;
    } else if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        e = EINVAL;
    } else if (l->qp_init_attr) {
        ibv_qp_init_attr attr = *l->qp_init_attr;
        if (rdma_create_qp(ev->id, listen->pd, &attr)) e = errno;
    }
    if (e) {
        listen->event = ev;
        return fail(e);
    }
    *idp = ev->id;
    (*idp)->event = ev;
    return 0;
}

int rdma_accept(rdma_cm_id* idp, rdma_conn_param* p) {
    Id* id = id_of(idp);
    if (!valid_param(id, p)) return fail(EINVAL);
    if (!id->conn_req || !id->dev) return fail(EINVAL);
    if (!idp->qp && !p) return fail(EINVAL);
    size_t max = is_ud(id) ? abi::kCmSidrRepPrivate : abi::kCmRepPrivate;
    if (p && p->private_data && p->private_data_len > max) return fail(EINVAL);
    if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
        id->init_depth = std::min<uint8_t>(id->init_depth, abi::kMaxQpRdAtom);
    else
        id->init_depth = p->initiator_depth;
    if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
        id->resp_res = std::min<uint8_t>(id->resp_res, abi::kMaxQpRdAtom);
    else
        id->resp_res = p->responder_resources;
    if (!is_ud(id)) {
        int e = modify_rtr(id, id->resp_res);
        if (!e) e = modify_rts(id, id->init_depth);
        if (e) return fail(e);
    }
    abi::CmReq r = cm_req(abi::CmOp::kAccept, id->handle);
    r.qpn = idp->qp ? idp->qp->qp_num : p->qp_num;
    r.srq = idp->qp ? idp->qp->srq != nullptr : p->srq;
    r.psn = id->local_psn;
    r.qkey = RDMA_UDP_QKEY;
    r.responder_resources = id->resp_res;
    r.initiator_depth = id->init_depth;
    r.flow_control = p ? p->flow_control : 0;
    r.rnr_retry_count = p ? p->rnr_retry_count & 7 : 7;
    if (p && p->private_data && p->private_data_len) {
        r.private_data_len = p->private_data_len;
        std::memcpy(r.private_data, p->private_data, p->private_data_len);
    }
    if (int e = cm_call(*id->dev, r)) {
        modify_err(id);
        return fail(e);
    }
    id->conn_req = false;
    if (is_ud(id)) {
        if (id->sync && idp->event) {
            rdma_ack_cm_event(idp->event);
            idp->event = nullptr;
        }
        return 0;
    }
    return complete(id);
}

static int reject(rdma_cm_id* idp, const void* private_data, uint8_t len) {
    Id* id = id_of(idp);
    if (!id->conn_req || !id->dev) return fail(EINVAL);
    size_t max = is_ud(id) ? abi::kCmSidrRepPrivate : abi::kCmRejPrivate;
    if (private_data && len > max) return fail(EINVAL);
    abi::CmReq r = cm_req(abi::CmOp::kReject, id->handle);
    if (private_data && len) {
        r.private_data_len = len;
        std::memcpy(r.private_data, private_data, len);
    }
    if (int e = cm_call(*id->dev, r)) return fail(e);
    id->conn_req = false;
    return 0;
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject(id, private_data, private_data_len);
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject(id, private_data, private_data_len);
}

int rdma_notify(rdma_cm_id* idp, ibv_event_type event) {
    Id* id = id_of(idp);
    if (!id->dev || !id->handle) return fail(EINVAL);
    abi::CmReq r = cm_req(abi::CmOp::kNotify, id->handle);
    r.event = event;
    if (int e = cm_call(*id->dev, r)) return fail(e);
    return 0;
}

int rdma_disconnect(rdma_cm_id* idp) {
    Id* id = id_of(idp);
    if (!idp->verbs || !id->dev) return fail(EINVAL);
    // The QP stops first (rdma-core's ucma_shutdown), then the DREQ (or DREP) goes out.
    if (int e = modify_err(id)) return fail(e);
    abi::CmReq r = cm_req(abi::CmOp::kDisconnect, id->handle);
    if (int e = cm_call(*id->dev, r)) return fail(e);
    return complete(id);
}

// ---- endpoints -----------------------------------------------------------------------------

int rdma_create_ep(rdma_cm_id** idp, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
    if (!idp || !res) return fail(EINVAL);
    if (!sync_devices()) return fail(ENODEV);
    rdma_port_space ps = rdma_port_space(res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP);
    ibv_qp_type qt = res->ai_qp_type
                         ? ibv_qp_type(res->ai_qp_type)
                         : (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC);
    Id* id = new_id(nullptr, nullptr, ps, qt);
    if (!id) return fail(ENOMEM);
    rdma_cm_id* cm = &id->id;
    int r = 0;
    if (res->ai_flags & RAI_PASSIVE) {
        if (rdma_bind_addr(cm, res->ai_src_addr)) goto err;
        if (pd) cm->pd = pd;
        if (qp_init_attr) {
            id->qp_init_attr = new ibv_qp_init_attr(*qp_init_attr);
            id->qp_init_attr->qp_type = qt;
        }
        *idp = cm;
        return 0;
    }
    if (rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000)) goto err;
    if (rdma_resolve_route(cm, 2000)) goto err;
    if (qp_init_attr) {
        qp_init_attr->qp_type = qt;
        if (rdma_create_qp(cm, pd, qp_init_attr)) goto err;
    }
    if (res->ai_connect_len && res->ai_connect) {
        auto* b = static_cast<const uint8_t*>(res->ai_connect);
        id->connect_data.assign(b, b + res->ai_connect_len);
    }
    *idp = cm;
    return 0;
err:
    r = errno;
    rdma_destroy_ep(cm);
    return fail(r);
}

void rdma_destroy_ep(rdma_cm_id* id) {
    if (id->qp) rdma_destroy_qp(id);
    if (id->srq) rdma_destroy_srq(id);
    rdma_destroy_id(id);
}

}  // extern "C"
