// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the control verbs (ControlVerbs, XrcDomains, McastGroups) use of the device, part by
// part: the object tables, the engine parts and the transport stages they call. The device
// builds one from references to its members (emu/engine/device.h) and passes it to each, so
// they need no Device and no friendship; each class's header says which parts it uses.
#pragma once

#include "emu/verbs/handle_table.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

class Wire;
class Trace;
struct DeviceCounters;
class Schedule;
class ControlVerbs;
class XrcDomains;
class McastGroups;
class MemoryWindows;
struct DeviceConfig;
struct TransportEnv;
template <class>
class Completions;
template <class>
class RcRequester;
template <class>
class RcResponder;
template <class>
class UdTransport;

struct VerbsEnv {
    // The object tables.
    HandleTable<Pd>& pds;
    HandleTable<Mr>& mrs;
    HandleTable<CompChannel>& channels;
    HandleTable<Cq>& cqs;
    HandleTable<Qp>& qps;
    HandleTable<Srq>& srqs;
    HandleTable<Xrcd>& xrcds;
    HandleTable<XrcdHandle>& xrcd_handles;
    DeviceCounters& counters;
    Trace& trace;
    const DeviceConfig& config;  // the UDP port and IPv6 scope of a UD address's destination
    Wire& wire;                  // source ports, the GID table's addresses, group sockets
    Schedule& sched;             // mark_ready, forget
    // The verbs' parts, for each other.
    ControlVerbs& verbs;     // destroy_qp_now
    XrcDomains& xrc;         // holds, find_hold, release_qp, object_gone, srq_gone
    McastGroups& mcast;      // attach, detach, detach_all
    MemoryWindows& windows;  // alloc_mw, dealloc_mw, unbind_qp_windows
    // The transport stages they call.
    Completions<TransportEnv>& done;       // post_async, flush_queues, last_wqe_reached
    RcRequester<TransportEnv>& requester;  // progress
    RcResponder<TransportEnv>& responder;  // receive and error, for an XRC TGT QP's requests
    UdTransport<TransportEnv>& ud;         // receive, for a multicast packet
};

}  // namespace uroce::emu
