// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC and UC requester stage: turns send WQEs into request packets, one MTU at a time, and
// rewinds (go-back-N) when the completer asks for a retransmission.
//
// Env (TransportEnv in the daemon, emu/engine/transport_env.h) offers, by part: wire
// (tx_begin, transmit, tx_free), dma (readv), verbs (check_local_sges), windows (bind_mw,
// local_invalidate), done (complete_send, send_queue_error, qp_to_error, flush_queues,
// flush_send_queue), xrc (post_qp_async), sched (mark_ready, arm_timer), ud
// (requester_progress: the UD requester stage), port_mtu_bytes and now_ns().
#pragma once

#include <cstdint>

#include "emu/engine/tx_batch.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

template <class Env>
class RcRequester {
public:
    explicit RcRequester(Env& env) : env_(env) {}

    // Sends what the QP's send queue allows (UD: hands it to the UD stage), or flushes the
    // queues of a QP in error.
    void progress(Qp& qp);
    // Copies the next WQE out of the application's ring; false when there is none.
    bool fetch_send_wqe(Qp& qp);
    // Resumes sending at `psn` (a retransmission).
    void go_back(Qp& qp, uint32_t psn);
    void complete_blocked(Qp& qp);
    void complete_local_ops(Qp& qp);

private:
    void build(Qp& qp);
    void tx_flush(Qp& qp);

    Env& env_;
    TxBatch txb_;  // build()'s packets until their payloads are read
};

}  // namespace uroce::emu
