// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// One uroce HCA: a RoCEv2 port on an IPv4 address, its object tables, transport and
// packet I/O. Every object lives on the engine thread; other threads reach the device
// only through call(), which runs a function on that thread and waits.
#pragma once

#include <netinet/in.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu/abi/caps.h"
#include "emu/abi/protocol.h"
#include "emu/cm/cm_agent.h"
#include "emu/cm/cm_env.h"
#include "emu/control/trace.h"
#include "emu/engine/counters.h"
#include "emu/engine/dma.h"
#include "emu/engine/schedule.h"
#include "emu/engine/transport_env.h"
#include "emu/engine/wire.h"
#include "emu/transport/completions.h"
#include "emu/transport/rc_completer.h"
#include "emu/transport/rc_requester.h"
#include "emu/transport/rc_responder.h"
#include "emu/transport/recv_path.h"
#include "emu/transport/uc_responder.h"
#include "emu/transport/ud_transport.h"
#include "emu/verbs/control_verbs.h"
#include "emu/verbs/handle_table.h"
#include "emu/verbs/mcast_groups.h"
#include "emu/verbs/memory_windows.h"
#include "emu/verbs/objects.h"
#include "emu/verbs/verbs_env.h"
#include "emu/verbs/xrc_domains.h"
#include "net/fault_injector.h"

namespace uroce::emu {

struct DeviceConfig {
    std::string name = "uroce0";
    uint32_t ipv4_be = 0;  // network order
    // Or an IPv6 address (ipv4_be 0), with the interface of a link-local one. The device has
    // one address, the GID at index 0 (docs/behaviour.md, "GIDs").
    uint8_t ipv6[16] = {};
    uint32_t ipv6_scope = 0;
    bool is_ipv6() const {
        for (uint8_t b : ipv6)
            if (b) return ipv4_be == 0;
        return false;
    }
    // The device's (first) address and UDP port.
    net::Endpoint endpoint() const {
        return is_ipv6() ? net::Endpoint::from_gid(ipv6, port, ipv6_scope)
                         : net::Endpoint::ipv4(ipv4_be, port);
    }
    // Its other addresses (uroce start --addr given more than once), IPv4 or IPv6; their
    // ports are `port`.
    std::vector<net::Endpoint> more;
    // Every address: endpoint() first, then `more` (the wire's sockets, in that order).
    std::vector<net::Endpoint> addresses() const;
    // The GID table: the same addresses in the order rxe gives its netdev's (the default GID,
    // a link-local IPv6 address, first; then the IPv4 addresses; then the other IPv6 ones),
    // each once, at most abi::kGidTblLen.
    std::vector<net::Endpoint> gid_table() const;
    uint16_t port = 4791;
    std::string pcap;       // capture file, empty: none
    uint64_t pcap_max = 0;  // rotation size in bytes, 0: unlimited
    net::FaultSpec faults;  // fault injection from the start (docs/faults.md)
    // How long the engine keeps polling after its last work before it sleeps (0: it sleeps
    // at once). Saves the wake-ups of a latency test on hosts with a core to spare
    // (docs/performance.md, "Polling budget").
    uint32_t poll_us = 0;
    static constexpr uint32_t kMaxPollUs = 1000000;
    // UDP GSO and GRO on the socket (docs/performance.md, "GSO and GRO"). Off: one datagram
    // per packet, which a capture on the interface (tcpdump) shows one by one.
    bool offload = true;
    // Accept packets whose ICRC is right for an IPv4 header with DF clear (as well as set): a
    // sender that lets its packets be fragmented. Off by default: RoCEv2 senders set DF, and
    // allowing both halves the error detection left (docs/behaviour.md, "The IPv4 ID").
    bool icrc_nodf = false;
};

// How many objects of each kind the device holds (Device::objects()): a session that has
// closed leaves none of its own behind, which the tests and the control fuzzer check.
struct DeviceObjects {
    uint32_t sessions = 0, pds = 0, mrs = 0, mws = 0, channels = 0, cqs = 0, qps = 0, srqs = 0,
             xrcds = 0, xrcd_handles = 0;
    size_t mcast_groups = 0;
    size_t ready = 0, timers = 0, awake = 0;  // engine lists that point at QPs and sessions
    CmAgent::Objects cm;
    bool operator==(const DeviceObjects&) const = default;
};

class Device {
public:
    explicit Device(DeviceConfig cfg);
    ~Device();

    int start();  // binds the port and starts the engine thread; 0 or errno
    // Binds the port but starts no thread: the caller runs the engine with turn() and calls
    // everything else directly (call() runs inline). For reproducible tests and fuzzing.
    int start_manual();
    // One turn of the engine loop that never sleeps (after start_manual() only).
    void turn();
    void stop();
    const DeviceConfig& config() const { return cfg_; }
    uint64_t guid() const { return guid_; }
    // The port's active MTU (emu/engine/port_mtu.h): read from the interface at start, and again
    // by refresh_port_mtu() (ibv_open_device, ibv_query_port), which follows a change of
    // the interface's MTU. port_mtu(): engine thread only.
    ibv_mtu port_mtu() const { return port_mtu_; }
    ibv_mtu refresh_port_mtu();  // not on the engine thread: it makes system calls

    // Runs fn on the engine thread and waits for it.
    void call(const std::function<void()>& fn);

    // Engine thread only (wrap in call()).
    // fds_out: the doorbell eventfd, the async event pipe, the doorbell page (abi::OpenResp).
    Session* open_session(pid_t pid, int fds_out[3], int* err);
    void close_session(Session* s);
    // `in_fd` is an fd that came with the request (or -1); the caller closes it.
    void handle(Session& s, const abi::Request& req, abi::Response& resp, std::vector<int>& fds,
                int in_fd = -1) {
        verbs_.handle(s, req, resp, fds, in_fd);
    }
    std::string dump() const;
    DeviceObjects objects() const;
    // Starts (path non-empty; replaces a running capture) or stops the capture. 0 or errno.
    int set_capture(const std::string& path, uint64_t max_bytes) {
        return wire_.set_capture(path, max_bytes);
    }
    // Packets written by the current (or last) capture, rotated files included.
    uint64_t capture_packets() const { return wire_.capture_packets(); }
    // Replaces the fault injection spec (off: !spec.any()). Returns the seed in use.
    uint64_t set_faults(const net::FaultSpec& spec) { return wire_.set_faults(spec); }
    // The connection manager agent (emu/cm/cm_agent.h). Engine thread only.
    CmAgent& cm() { return cm_; }
    // The packet I/O (emu/engine/wire.h). Engine thread only.
    Wire& wire() { return wire_; }
    // Trace lines after `since` (docs/trace.md), at most max_bytes; returns the last one's
    // number. Engine thread only.
    uint64_t read_trace(uint64_t since, std::string* out, size_t max_bytes) const {
        return trace_.read(since, out, max_bytes);
    }

private:
    // The engine loop (device.cpp).
    int open_io();  // start()'s part before the thread
    void loop();
    void run_turn(bool may_sleep);
    void on_eventfd(uint64_t tag);    // from the wire's ring: a doorbell or a command
    bool take_doorbells(Session& s);  // false: the page named nothing
    // The pages of the sessions served lately, read every turn (emu/abi/doorbell.h); and,
    // before the engine sleeps, their `awake` flags cleared and the pages read once more.
    // True if anything was found then.
    void poll_doorbells();
    bool doze();
    // The polling budget (DeviceConfig::poll_us): true while the engine did work (a packet
    // in or out, a doorbell) less than poll_us ago, so that it polls instead of sleeping.
    bool keep_polling();
    void run_commands();
    // Before a control request: the work whose doorbells rang before it (device.cpp).
    void serve_doorbells();
    void run_ready();
    void run_timers(uint64_t now);
    uint64_t next_timeout(uint64_t now) const;
    void release_idle_memory();
    // A packet that passed the wire's checks, to its QP's stage (or the CM, or multicast).
    void dispatch(const net::Packet& p, const net::Endpoint& from, const net::Endpoint& to,
                  size_t len);

    DeviceConfig cfg_;
    uint64_t guid_ = 0;
    ibv_mtu port_mtu_ = IBV_MTU_4096;
    uint32_t port_mtu_bytes_ = 4096;  // the largest UD message

    HandleTable<Session> sessions_{4096};
    HandleTable<Pd> pds_{abi::kMaxPd};
    HandleTable<Mr> mrs_{abi::kMaxMr};
    HandleTable<Mw> mws_{abi::kMaxMw};
    HandleTable<CompChannel> channels_{abi::kMaxChannels};
    HandleTable<Cq> cqs_{abi::kMaxCq};
    HandleTable<Qp> qps_{abi::kMaxQp, abi::kFirstQpn};
    HandleTable<Srq> srqs_{abi::kMaxSrq};
    HandleTable<Xrcd> xrcds_{abi::kMaxXrcd};
    HandleTable<XrcdHandle> xrcd_handles_{abi::kMaxXrcd * 4};
    DeviceCounters counters_;
    Trace trace_;
    Schedule sched_;  // QPs with send work to push, QPs with a deadline

    // The control verbs and their own state (emu/verbs/). Their environment names the
    // parts they use, some declared below: their constructors only keep the reference.
    VerbsEnv verbs_env_{pds_,          mrs_,      channels_, cqs_,  qps_,       srqs_,      xrcds_,
                        xrcd_handles_, counters_, trace_,    cfg_,  wire_,      sched_,     verbs_,
                        xrc_,          mcast_,    windows_,  done_, requester_, responder_, ud_};
    ControlVerbs verbs_{verbs_env_};
    XrcDomains xrc_{verbs_env_};
    McastGroups mcast_{verbs_env_};
    MemoryWindows windows_{mws_, pds_, verbs_};

    // DMA into the applications' memory; a deferred write that fails goes to the
    // completions stage's error paths.
    Dma dma_{[](void* d, const DmaWriteBatch::Failure& f) {
                 static_cast<Device*>(d)->done_.dma_write_failed(f);
             },
             this};
    // Packet I/O; what passes its checks comes back to dispatch().
    friend class Wire;
    Wire wire_{cfg_, counters_, dma_, mcast_, *this};

    // The transport stages (emu/transport/): templates over their environment, which names
    // the parts above they use (direct calls: no virtual functions).
    TransportEnv env_{wire_,           dma_,       sched_, counters_, trace_,     cfg_,
                      port_mtu_bytes_, qps_,       cqs_,   channels_, srqs_,      verbs_,
                      windows_,        xrc_,       done_,  recv_,     responder_, uc_responder_,
                      requester_,      completer_, ud_};
    Completions<TransportEnv> done_{env_};
    RecvPath<TransportEnv> recv_{env_};
    RcResponder<TransportEnv> responder_{env_};
    UcResponder<TransportEnv> uc_responder_{env_};
    RcRequester<TransportEnv> requester_{env_};
    RcCompleter<TransportEnv> completer_{env_};
    UdTransport<TransportEnv> ud_{env_};

    std::vector<uint32_t> awake_;  // sessions whose doorbell page says the device is awake
    // The last session closed: release_idle_memory() runs once nothing is in flight.
    bool trim_pending_ = false;
    // The polling budget: doorbells taken, the work count keep_polling() saw last, and when.
    uint64_t rung_ = 0, work_seen_ = 0, last_work_ns_ = 0;
    std::thread thread_;
    bool running_ = false;
    bool manual_ = false;  // start_manual(): no thread, turn() runs the loop
    bool stop_requested_ = false;
    int cmd_fd_ = -1;
    std::mutex cmd_mu_;
    std::deque<std::function<void()>> cmds_;

    // Last: it sends through the packet I/O.
    CmAgent cm_{CmEnv{wire_, counters_, trace_, cfg_, guid_, port_mtu_}};
};

}  // namespace uroce::emu
