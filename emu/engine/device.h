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
#include "emu/control/trace.h"
#include "emu/engine/dma_write_batch.h"
#include "emu/engine/self_link.h"
#include "emu/transport/rc_completer.h"
#include "emu/transport/rc_requester.h"
#include "emu/transport/rc_responder.h"
#include "emu/transport/recv_common.h"
#include "emu/transport/uc_responder.h"
#include "emu/transport/ud_transport.h"
#include "emu/verbs/control_verbs.h"
#include "emu/verbs/handle_table.h"
#include "emu/verbs/mcast_groups.h"
#include "emu/verbs/memory_windows.h"
#include "emu/verbs/objects.h"
#include "emu/verbs/xrc_domains.h"
#include "net/fault_injector.h"
#include "net/headers.h"
#include "net/opcodes.h"
#include "net/pcap_tap.h"
#include "net/udp_uring.h"

namespace uroce::emu {

uint64_t now_ns();

struct DeviceConfig {
    std::string name = "uroce0";
    uint32_t ipv4_be = 0;  // network order
    uint16_t port = 4791;
    std::string pcap;       // capture file, empty: none
    uint64_t pcap_max = 0;  // rotation size in bytes, 0: unlimited
    net::FaultSpec faults;  // fault injection from the start (docs/faults.md)
    // How long the engine keeps polling after its last work before it sleeps (0: it sleeps
    // at once). Saves the wake-ups of a latency test on hosts with a core to spare
    // (docs/performance.md, "Polling budget").
    uint32_t poll_us = 0;
    static constexpr uint32_t kMaxPollUs = 1000000;
};

struct DeviceCounters {
    uint64_t tx_pkts = 0, rx_pkts = 0, tx_bytes = 0, rx_bytes = 0;
    uint64_t drops[size_t(net::DropReason::kCount)] = {};
    uint64_t retransmits = 0, tx_stalls = 0;
    uint64_t xrc_bad_srqn = 0;  // XRC requests naming an SRQ outside the TGT QP's domain
    // Multicast: packets sent to a group, received for a group, and copies handed to
    // attached QPs (docs/multicast.md).
    uint64_t mcast_tx_pkts = 0, mcast_rx_pkts = 0, mcast_deliveries = 0;
    // By opcode (counters_op lines of `uroce counters`). rx counts every datagram of at least
    // one byte under its first byte, dropped ones included, as rx_pkts does.
    OpCounters tx_op, rx_op;
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

class Device : private net::UdpUring::Handler {
public:
    explicit Device(DeviceConfig cfg);
    ~Device() override;

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
    int set_capture(const std::string& path, uint64_t max_bytes);
    // Packets written by the current (or last) capture, rotated files included.
    uint64_t capture_packets() const;
    // Replaces the fault injection spec (off: !spec.any()). Returns the seed in use.
    uint64_t set_faults(const net::FaultSpec& spec);
    // The connection manager agent (emu/cm/cm_agent.h). Engine thread only.
    CmAgent& cm() { return cm_; }
    // Trace lines after `since` (docs/trace.md), at most max_bytes; returns the last one's
    // number. Engine thread only.
    uint64_t read_trace(uint64_t since, std::string* out, size_t max_bytes) const {
        return trace_.read(since, out, max_bytes);
    }

private:
    // The control verbs (emu/verbs/): the classes below reach the tables and the engine
    // as friends. What the engine and the transport call of theirs goes through these.
    bool holds(const Session& s, const Qp* qp) const { return xrc_.holds(s, qp); }
    void release_qp(Session& s, uint32_t qpn, uint64_t cookie = 0) {
        xrc_.release_qp(s, qpn, cookie);
    }
    int destroy_srq(Session& s, uint32_t handle) { return verbs_.destroy_srq(s, handle); }
    int close_xrcd(Session& s, uint32_t handle) { return xrc_.close_xrcd(s, handle); }
    void xrc_receive(Qp& qp, const net::Packet& p) { xrc_.receive(qp, p); }
    void post_qp_async(Qp& qp, ibv_event_type type) { xrc_.post_qp_async(qp, type); }
    void mcast_receive(const net::Packet& p, const sockaddr_in& from, uint32_t group_be,
                       size_t len) {
        mcast_.receive(p, from, group_be, len);
    }
    bool mcast_member(uint32_t group_be) const { return mcast_.member(group_be); }
    Mr* mr_for_key(uint32_t key) const { return verbs_.mr_for_key(key); }
    void unbind(Mw& mw) { windows_.unbind(mw); }
    ibv_wc_status bind_mw(Qp& qp, uint32_t index) { return windows_.bind_mw(qp, index); }
    ibv_wc_status local_invalidate(Qp& qp, uint32_t rkey) {
        return windows_.local_invalidate(qp, rkey);
    }
    Mw* remote_invalidatable(const Qp& qp, uint32_t rkey) const {
        return windows_.remote_invalidatable(qp, rkey);
    }
    uint64_t mw_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                       Session** owner) const {
        return windows_.mw_target(qp, rkey, va, len, access, owner);
    }

    // Engine loop (device.cpp).
    int open_io();  // start()'s part before the thread
    void loop();
    void run_turn(bool may_sleep);
    void on_packet(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len) override;
    // Where a packet enters the device, from the socket or from self_link_: the fault
    // injector, then receive().
    void arrive(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len);
    // Receives what this device sent to itself, until nothing is left (what that answers
    // to itself included); sets looped_ if there was anything.
    void deliver_to_self();
    void release_idle_memory();
    // The receive path after the fault injector: checks, counts, captures, dispatches.
    // `to_be`: the address the packet was sent to (the device's, or a multicast group's).
    // `icrc_unset`: a packet from this device to itself whose ICRC nobody needed (transmit).
    void receive(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len,
                 bool icrc_unset = false);
    // Hands a finished packet to the socket, or to self_link_ if it is for this device
    // (loopback pacing counts the multicast ones that come back).
    void wire_send(uint32_t slot, size_t len, const sockaddr_in& to, bool icrc = true);
    // Whether anything outside the engine can see a packet's bytes: a capture, or the fault
    // injector (which corrupts packets for the ICRC check to find).
    bool packets_observed() const {
        return pcap_.is_open() || faults_.armed(net::kFaultTx) || faults_.armed(net::kFaultRx);
    }
    void on_eventfd(uint64_t tag) override;
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
    void run_ready();
    void run_timers(uint64_t now);
    uint64_t next_timeout(uint64_t now) const;
    void mark_ready(Qp& qp);
    void arm_timer(Qp& qp, uint64_t deadline);

    // Packet helpers (device.cpp).
    uint8_t* tx_begin(uint32_t* slot);
    // Appends the ICRC, records the packet in the capture, and queues it. `qp`: the QP that
    // sends it, for its per-opcode counters (nullptr: the device's counters only).
    void transmit(uint32_t slot, size_t len_no_icrc, const sockaddr_in& to, Qp* qp = nullptr);
    void count_drop(net::DropReason r) { ++counters_.drops[size_t(r)]; }
    // Fault injection (device_faults.cpp): false when the packet must go no further.
    bool fault_rx(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len);
    bool fault_tx(uint32_t slot, size_t len, const sockaddr_in& to);
    void release_faults(uint64_t now);
    std::string fault_lines() const;  // the "faults ..." lines of dump()
    // A drop once the packet has reached a QP: counted for the device and for the QP.
    void count_drop(net::DropReason r, Qp& qp) {
        ++counters_.drops[size_t(r)];
        ++qp.drops[size_t(r)];
    }

    // DMA into the QP owner's memory. A failure because the process has exited marks
    // its session dead: from then on its QPs neither answer nor report errors, as
    // hardware whose QPs the kernel is tearing down (completion.cpp).
    bool dma_read(Session* s, void* dst, const iovec* remote, int n, size_t total);
    bool dma_write(Session* s, const void* src, const iovec* remote, int n, size_t total);
    bool dma_store64(Session* s, uint64_t addr, uint64_t value);  // after every pending write
    bool dma_readv(Session* s, const iovec* local, int nlocal, const iovec* remote, int nremote,
                   size_t total);
    // Received payloads are written later, many packets with one system call; the ordering
    // rules are in dma_write_batch.cpp. dma_flush() lands what is pending (cheap when
    // nothing is); dma_settle() too, and says whether `qp` is still fine (no write of its
    // failed and brought its error path).
    void dma_write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                         uint32_t qpn, uint32_t psn, DmaWriteBatch::Path path);
    void dma_flush() {
        if (!wb_.empty()) dma_flush_now();
    }
    void dma_flush_now();
    bool dma_settle(Qp& qp);
    void dma_write_failed(const DmaWriteBatch::Failure& f);

    // Completion and error paths (completion.cpp).
    void push_cqe(uint32_t cq_handle, const abi::Cqe& cqe, bool solicited);
    void fire_cq_event(Cq& cq);
    void notify_if_pending(Cq& cq);
    void complete_send(Qp& qp, uint32_t index, ibv_wc_status status);
    void qp_to_error(Qp& qp);
    void send_queue_error(Qp& qp);  // UC/UD: SQE; RC/XRC: ERR
    void last_wqe_reached(Qp& qp);
    void flush_queues(Qp& qp);
    void flush_send_queue(Qp& qp);
    // `what`/`id` name the object for the trace ("qp", qpn); what == nullptr: the port.
    void post_async(Session* s, ibv_event_type type, uint64_t cookie, const char* what = nullptr,
                    uint32_t id = 0);
    // Checks keys, PD, access and bounds of an SGE list and rewrites each address
    // from the MR's iova space to the owning process's address space.
    bool check_local_sges(const Session* owner, uint32_t pd, abi::Sge* sge, uint32_t n, bool write,
                          uint64_t* total) const;

    // The transport stages' environment: what they use of the device's data.
    DeviceCounters& counters() { return counters_; }
    Trace& trace() { return trace_; }
    void tx_free(uint32_t slot) { io_.tx_free(slot); }
    Srq* srq(uint32_t handle) { return srqs_.get(handle); }
    uint32_t port_mtu_bytes() const { return port_mtu_bytes_; }
    static uint64_t now_ns() { return emu::now_ns(); }

    // The send side's stages (emu/transport/rc_requester.h, rc_completer.h, ud_transport.h):
    // what the engine, the receive side and the verbs call of them.
    void requester_progress(Qp& qp) { requester_.progress(qp); }
    bool fetch_send_wqe(Qp& qp) { return requester_.fetch_send_wqe(qp); }
    void go_back(Qp& qp, uint32_t psn) { requester_.go_back(qp, psn); }
    void complete_blocked(Qp& qp) { requester_.complete_blocked(qp); }
    void complete_local_ops(Qp& qp) { requester_.complete_local_ops(qp); }
    void completer_receive(Qp& qp, const net::Packet& p) { completer_.receive(qp, p); }
    void fail_oldest(Qp& qp, ibv_wc_status s) { completer_.fail_oldest(qp, s); }
    void retransmit_timeout(Qp& qp) { completer_.retransmit_timeout(qp); }
    void ud_requester_progress(Qp& qp) { ud_.requester_progress(qp); }
    void ud_receive(Qp& qp, const net::Packet& p, const sockaddr_in& from, uint32_t to_be) {
        ud_.receive(qp, p, from, to_be);
    }

    // The receive-side stages (emu/transport/rc_responder.h, uc_responder.h, recv_common.h),
    // for the code outside them.
    void responder_receive(Qp& qp, const net::Packet& p) { responder_.receive(qp, p); }
    uint64_t remote_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                           Session** owner) const {
        return responder_.remote_target(qp, rkey, va, len, access, owner);
    }
    void responder_error(Qp& qp, ibv_wc_status status, uint8_t nak, uint32_t psn,
                         ibv_event_type event) {
        responder_.error(qp, status, nak, psn, event);
    }
    void comm_established(Qp& qp) { recv_.comm_established(qp); }
    bool take_recv(Qp& qp) { return recv_.take(qp); }
    void place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path path) {
        recv_.place_payload(qp, p, path);
    }
    void complete_recv(Qp& qp, const net::Packet& p, ibv_wc_status status) {
        recv_.complete(qp, p, status);
    }

    DeviceConfig cfg_;
    uint64_t guid_ = 0;
    ibv_mtu port_mtu_ = IBV_MTU_4096;
    uint32_t port_mtu_bytes_ = 4096;  // the largest UD message
    sockaddr_in self_{};
    net::UdpUring io_;
    net::PcapTap pcap_;
    net::FaultInjector faults_;

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
    // The control verbs and their own state (emu/verbs/): they use the tables above.
    friend class ControlVerbs;
    friend class XrcDomains;
    friend class McastGroups;
    ControlVerbs verbs_{*this};
    XrcDomains xrc_{*this};
    McastGroups mcast_{*this};
    MemoryWindows windows_{mws_, pds_, verbs_};

    std::vector<Qp*> ready_;       // QPs with send work to push
    std::vector<uint32_t> awake_;  // sessions whose doorbell page says the device is awake
    DmaWriteBatch wb_;             // received payloads until they are written (dma_write_batch.cpp)
    std::vector<Qp*> timers_;      // QPs with a deadline
    DeviceCounters counters_;
    Trace trace_;
    SelfLink self_link_;   // unicast packets to this device's own address
    bool looped_ = false;  // this engine turn received packets from self_link_
    // The last session closed: release_idle_memory() runs once nothing is in flight.
    bool trim_pending_ = false;
    // Multicast packets this device sent to groups it is a member of that it has not
    // received back yet. They sit in its own group sockets' receive buffers, so UD requesters
    // pause at a budget that fits there instead of overrunning it (a loopback link has no
    // PFC to push back).
    uint32_t self_inflight_ = 0;
    uint32_t self_budget_ = 64;
    uint64_t last_self_rx_ns_ = 0;
    // Engine loop turns, and the turn that last received a packet from this device itself:
    // a count is only stale when turns went by without one (a descheduled engine finds its
    // packets still queued when it runs again, however long it was away).
    uint64_t turn_ = 0, self_rx_turn_ = 0;
    // The polling budget: doorbells taken, the work count keep_polling() saw last, and when.
    uint64_t rung_ = 0, work_seen_ = 0, last_work_ns_ = 0;
    bool to_self(const sockaddr_in& to) const {
        return to.sin_port == self_.sin_port && to.sin_addr.s_addr == cfg_.ipv4_be;
    }
    bool loops_back(const sockaddr_in& to) const {
        return to.sin_port == self_.sin_port && net::is_ipv4_multicast(to.sin_addr.s_addr) &&
               mcast_member(to.sin_addr.s_addr);
    }

public:
    // True when a requester should wait before sending more to `to`. A count that
    // stops moving (the kernel dropped some of them after all) is forgotten after 2 ms
    // and 4 engine turns without one of them arriving.
    bool self_paced(const sockaddr_in& to) {
        if (self_inflight_ < self_budget_ || !loops_back(to)) return false;
        if (turn_ - self_rx_turn_ < 4 || now_ns() - last_self_rx_ns_ < 2000000) return true;
        self_inflight_ = 0;
        return false;
    }

private:
    std::thread thread_;
    bool running_ = false;
    bool manual_ = false;  // start_manual(): no thread, turn() runs the loop
    bool stop_requested_ = false;
    int cmd_fd_ = -1;
    std::mutex cmd_mu_;
    std::deque<std::function<void()>> cmds_;

    // The transport stages (emu/transport/): they reach the device through the private
    // members above (their environment), with direct calls: templates, no virtual functions.
    template <class>
    friend class RecvPath;
    template <class>
    friend class RcResponder;
    template <class>
    friend class UcResponder;
    template <class>
    friend class RcRequester;
    template <class>
    friend class RcCompleter;
    template <class>
    friend class UdTransport;
    RecvPath<Device> recv_{*this};
    RcResponder<Device> responder_{*this};
    UcResponder<Device> uc_responder_{*this};
    RcRequester<Device> requester_{*this};
    RcCompleter<Device> completer_{*this};
    UdTransport<Device> ud_{*this};

    // Last: it holds a reference to the device and uses its packet I/O.
    friend class CmAgent;
    CmAgent cm_{*this};
};

uint64_t now_ns();

}  // namespace uroce::emu
