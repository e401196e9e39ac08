// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UD stage: single-packet SEND messages with a DETH, addressed per WQE (the AH gives the
// destination IPv4 address), no acknowledgements. Receives start with the 40-byte GRH
// area; for RoCEv2 over IPv4 its last 20 bytes hold the IPv4 header, as mlx5 does.
//
// Env (TransportEnv in the daemon, emu/engine/transport_env.h) offers, by part: requester
// (fetch_send_wqe, complete_blocked), config (its UDP port), wire (self_paced, tx_begin,
// transmit, tx_free), dma (read, write_later, settle), recv (take, place_payload, complete),
// done (complete_send, push_cqe), sched (mark_ready) and counters (drop(reason, qp)).
#pragma once

#include <netinet/in.h>

#include <cstdint>

#include "emu/verbs/objects.h"
#include "net/endpoint.h"
#include "net/headers.h"

namespace uroce::emu {

template <class Env>
class UdTransport {
public:
    explicit UdTransport(Env& env) : env_(env) {}

    // Sends the QP's send WQEs, one packet each, as far as the transmit buffers allow.
    void requester_progress(Qp& qp);
    // A UD SEND for `qp`, from `from`, sent to `to` (the device's address or a group's).
    void receive(Qp& qp, const net::Packet& p, const net::Endpoint& from, const net::Endpoint& to);

private:
    Env& env_;
};

}  // namespace uroce::emu
