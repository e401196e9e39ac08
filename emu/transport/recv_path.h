// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The receive side every transport shares (RecvPath): taking a posted receive (from the
// QP's RQ or its SRQ), placing payload into it, and completing it. A template over its
// environment, as the stages that use it (rc_responder.h); in the daemon Env is TransportEnv
// (emu/engine/transport_env.h, instantiated in emu/engine/stages/recv_path.cpp).
//
// What the Env offers, by part: srqs (get), verbs (check_local_sges), dma (write_later),
// done (push_cqe, post_async), xrc (post_qp_async) and trace.
#pragma once

#include <infiniband/verbs.h>

#include "emu/engine/dma_write_batch.h"
#include "emu/verbs/objects.h"
#include "net/headers.h"

namespace uroce::emu {

template <class Env>
class RecvPath {
public:
    explicit RecvPath(Env& env) : env_(env) {}

    void comm_established(Qp& qp);
    bool take(Qp& qp);
    void place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path path);
    void complete(Qp& qp, const net::Packet& p, ibv_wc_status status);

private:
    Env& env_;
};

}  // namespace uroce::emu
