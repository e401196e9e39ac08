// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Completions and the error state, the paths every transport stage shares: CQEs into a CQ's
// ring and its channel's event, send completions, the QP's move to ERR (or SQE) with its
// queues flushed, asynchronous events, and what a failed deferred write means for the path
// that asked for it.
//
// Env (TransportEnv in the daemon, emu/engine/transport_env.h) offers: dma (flush), cqs,
// channels and qps (tables), trace, xrc (post_qp_async), and the stages requester
// (fetch_send_wqe), recv (complete), responder (error) and completer (fail_oldest).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/abi/protocol.h"
#include "emu/engine/dma_write_batch.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

template <class Env>
class Completions {
public:
    explicit Completions(Env& env) : env_(env) {}

    void push_cqe(uint32_t cq_handle, const abi::Cqe& cqe, bool solicited);
    void complete_send(Qp& qp, uint32_t index, ibv_wc_status status);
    void qp_to_error(Qp& qp);
    void send_queue_error(Qp& qp);  // UC/UD: SQE; RC/XRC: ERR
    void last_wqe_reached(Qp& qp);
    void flush_queues(Qp& qp);
    void flush_send_queue(Qp& qp);
    // `what`/`id` name the object for the trace ("qp", qpn); what == nullptr: the port.
    void post_async(Session* s, ibv_event_type type, uint64_t cookie, const char* what = nullptr,
                    uint32_t id = 0);
    // A deferred write (emu/engine/dma.h) that failed: the error of the path that asked.
    void dma_write_failed(const DmaWriteBatch::Failure& f);

private:
    void fire_cq_event(Cq& cq);

    Env& env_;
};

}  // namespace uroce::emu
