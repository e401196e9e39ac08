// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC completer stage: matches ACKs, NAKs and READ/ATOMIC responses to outstanding WQEs,
// completes them in order, and drives retransmission (timeout, NAK, RNR NAK).
//
// Env (TransportEnv in the daemon, emu/engine/transport_env.h) offers, by part: requester
// (go_back, complete_blocked, complete_local_ops), done (complete_send, qp_to_error), sched
// (mark_ready, arm_timer), dma (write, write_later, settle), counters (drop(reason, qp),
// retransmits) and now_ns().
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/verbs/objects.h"
#include "net/headers.h"

namespace uroce::emu {

template <class Env>
class RcCompleter {
public:
    explicit RcCompleter(Env& env) : env_(env) {}

    // An ACK, NAK, READ response or ATOMIC acknowledge for this requester.
    void receive(Qp& qp, const net::Packet& p);
    // The QP's retransmit or RNR timer expired.
    void retransmit_timeout(Qp& qp);
    // Completes the oldest outstanding WQE with `status` and moves the QP to the error state.
    void fail_oldest(Qp& qp, ibv_wc_status status);

private:
    void ack_upto(Qp& qp, uint32_t psn, bool implicit = false);
    void after_progress(Qp& qp, bool rerequest);
    void read_atomic_response(Qp& qp, const net::Packet& p);

    Env& env_;
};

}  // namespace uroce::emu
