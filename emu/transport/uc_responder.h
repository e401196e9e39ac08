// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UC responder stage: like RC without ACKs. A PSN gap loses the message in progress (its
// receive is reused for the next message, as IBTA 9.7.6 describes) and the responder
// resynchronizes on the next FIRST or ONLY packet. A message with no receive posted is
// dropped, as is an RDMA WRITE the MR does not allow. A template over its environment, as
// the RC responder (rc_responder.h); in the daemon Env is TransportEnv
// (emu/engine/stages/uc_responder.cpp).
//
// What the Env offers, by part: recv (comm_established, take, place_payload, complete),
// responder (remote_target), dma (write_later, settle), xrc (post_qp_async), done
// (qp_to_error) and counters (drop(reason, qp)).
#pragma once

#include "emu/verbs/objects.h"
#include "net/headers.h"

namespace uroce::emu {

template <class Env>
class UcResponder {
public:
    explicit UcResponder(Env& env) : env_(env) {}

    void receive(Qp& qp, const net::Packet& p);  // a UC request packet for `qp`

private:
    void execute_write(Qp& qp, const net::Packet& p, bool first, bool last, bool imm);

    Env& env_;
};

}  // namespace uroce::emu
