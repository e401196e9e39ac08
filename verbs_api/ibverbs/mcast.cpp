// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD multicast: attaching a QP to a group is the device's business (emu/verbs/mcast.cpp,
// docs/multicast.md); the library passes the GID and LID on.
#include <cstring>

#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

int mcast_request(abi::Op op, ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    abi::Request req{};
    req.op = op;
    req.u.mcast.qpn = qp->handle;
    req.u.mcast.lid = lid;
    std::memcpy(req.u.mcast.gid, gid->raw, sizeof req.u.mcast.gid);
    abi::Response resp{};
    return request(ctx_of(qp->context), req, resp);
}

}  // namespace

extern "C" {

// 0 or an errno, as rdma-core's: EINVAL for a QP that is not UD or a GID that is not
// multicast, EINVAL for a detach of a group the QP is not attached to, ENOMEM past the
// device's limits.
int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast_request(abi::Op::kAttachMcast, qp, gid, lid);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast_request(abi::Op::kDetachMcast, qp, gid, lid);
}

}  // extern "C"
