// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the transport stages use of the device, part by part. Each stage is a template over
// its environment (a test passes fakes of the parts it uses: tests/unit/); in the daemon
// it is this set of references to the device's parts, so every call is a direct call.
#pragma once

#include <cstdint>

#include "emu/engine/counters.h"
#include "emu/engine/schedule.h"
#include "emu/verbs/handle_table.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

class Wire;
class Dma;
class Trace;
class ControlVerbs;
class MemoryWindows;
class XrcDomains;
struct DeviceConfig;
template <class>
class Completions;
template <class>
class RecvPath;
template <class>
class RcResponder;
template <class>
class UcResponder;
template <class>
class RcRequester;
template <class>
class RcCompleter;
template <class>
class UdTransport;

struct TransportEnv {
    Wire& wire;       // tx_begin, transmit, tx_free, self_paced
    Dma& dma;         // application memory
    Schedule& sched;  // mark_ready, arm_timer
    DeviceCounters& counters;
    Trace& trace;
    const DeviceConfig& config;
    const uint32_t& port_mtu_bytes;  // the largest UD message
    HandleTable<Qp>& qps;
    HandleTable<Cq>& cqs;
    HandleTable<CompChannel>& channels;
    HandleTable<Srq>& srqs;
    const ControlVerbs& verbs;  // mr_for_key, check_local_sges
    MemoryWindows& windows;     // memory window binds, invalidation, rkey lookup
    XrcDomains& xrc;            // post_qp_async (an XRC TGT QP's events go to every sharer)
    // The stages, for each other.
    Completions<TransportEnv>& done;
    RecvPath<TransportEnv>& recv;
    RcResponder<TransportEnv>& responder;
    UcResponder<TransportEnv>& uc_responder;
    RcRequester<TransportEnv>& requester;
    RcCompleter<TransportEnv>& completer;
    UdTransport<TransportEnv>& ud;

    static uint64_t now_ns() { return emu::now_ns(); }
};

}  // namespace uroce::emu
