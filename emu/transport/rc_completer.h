// RC completer stage: matches ACKs, NAKs and READ/ATOMIC responses to outstanding WQEs,
// completes them in order, and drives retransmission (timeout, NAK, RNR NAK).
//
// Env (emu::Device in production) offers: complete_send, complete_blocked,
// complete_local_ops and go_back (the requester stage), qp_to_error, mark_ready, arm_timer,
// now_ns(), count_drop(reason, qp), counters() (its `retransmits`), dma_write,
// dma_write_later and dma_settle.
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
