// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The RC (and XRC target) responder stage: checks request PSNs, executes SEND, RDMA WRITE,
// RDMA READ, ATOMIC, ATOMIC WRITE and FLUSH, and answers with ACKs, sequence NAKs, RNR NAKs and
// error NAKs. A template over its environment so that a test can drive it without a device
// (tests/unit/rc_responder_test.cpp); in the daemon Env is TransportEnv
// (emu/engine/transport_env.h, instantiated in emu/engine/stages/rc_responder.cpp).
//
// What the Env offers, by part: wire (tx_begin, transmit, tx_free); sched (mark_ready: an ACK
// owed for want of a transmit buffer); recv (comm_established,
// take, place_payload, complete); dma (read, readv, write, store64, write_later, settle);
// verbs (mr_for_key); windows (mw_target, remote_invalidatable, unbind); errors: xrc
// (post_qp_async), done (qp_to_error), counters (drop(reason, qp)); and trace.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/verbs/objects.h"
#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::emu {

template <class Env>
class RcResponder {
public:
    explicit RcResponder(Env& env) : env_(env) {}

    // A request packet for `qp` (an RC QP, or an XRC TGT QP once its SRQ is resolved).
    void receive(Qp& qp, const net::Packet& p);
    // Sends what `qp` owes for want of transmit buffers: the rest of a READ's responses, then
    // an ACK (the engine calls it for the QPs on its ready list).
    void send_owed(Qp& qp);
    // An rkey resolved for remote access (0: denied); the UC responder uses it too.
    uint64_t remote_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                           Session** owner) const;
    // A responder-side error (NAK `nak`, the QP to error); the engine's DMA path and XRC
    // use it too.
    void error(Qp& qp, ibv_wc_status status, uint8_t nak, uint32_t psn, ibv_event_type event);

private:
    // AETH syndromes (IBTA 9.7.5.2): ACK with "credits not used", RNR NAK, NAK codes.
    static constexpr uint8_t kAckUnlimited = 0x1f;
    static constexpr uint8_t kRnrNak = 0x20;
    static constexpr uint8_t kNakSeqErr = 0x60;
    static constexpr uint8_t kNakInvReq = 0x61;
    static constexpr uint8_t kNakRemAccess = 0x62;
    static constexpr uint8_t kNakRemOp = 0x63;

    static uint32_t replay_slots(const Qp& qp);
    static const Qp::AtomicReplay* find_replay(const Qp& qp, uint32_t psn);
    static void record_executed(Qp& qp, uint32_t psn, uint64_t orig);
    void send_ack(Qp& qp, uint8_t syndrome, uint32_t psn);
    void execute_read(Qp& qp, const net::Packet& p, bool duplicate);
    void send_read_responses(Qp& qp, const Qp::ReadOwed& r, uint64_t src, Session* mem);
    void resume_read(Qp& qp);
    void execute_atomic(Qp& qp, const net::Packet& p, bool duplicate);
    void execute_atomic_write(Qp& qp, const net::Packet& p, bool duplicate);
    bool flush_allowed(const Qp& qp, const net::Packet& p, uint32_t access) const;
    void execute_flush(Qp& qp, const net::Packet& p, bool duplicate);
    void execute_write(Qp& qp, const net::Packet& p, const net::OpInfo* info);
    void send_ack_response(Qp& qp, uint8_t op, uint32_t psn, uint64_t orig);

    Env& env_;
};

}  // namespace uroce::emu
