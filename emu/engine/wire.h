// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's side of the wire: its UDP socket and io_uring (net/udp_uring.h), the link
// that carries what the device sends to itself (self_link.h), the capture, the fault
// injector and the packet counters. Packets leave through transmit(). Arriving ones pass
// the fault injector, are counted, captured, decoded and checked (ICRC, P_Key) here, and
// then go to the device, which hands them to a QP's stage (Device::dispatch).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "emu/engine/counters.h"
#include "emu/engine/self_link.h"
#include "emu/engine/source_ports.h"
#include "net/fault_injector.h"
#include "net/headers.h"
#include "net/icrc_id.h"
#include "net/pcap_tap.h"
#include "net/udp_uring.h"

namespace uroce::emu {

class Device;
class Dma;
class McastGroups;
struct DeviceConfig;

class Wire : private net::UdpUring::Handler {
public:
    // `cfg`: the device's address and port, and where the capture and fault settings are
    // recorded when they change. `dev` gets the packets that pass the checks.
    Wire(DeviceConfig& cfg, DeviceCounters& counters, Dma& dma, const McastGroups& mcast,
         Device& dev);

    // Binds the socket (one per address); starts the capture and faults the configuration asks
    // for. 0 or errno.
    int open();
    // The GID table (DeviceConfig::gid_table): its entries, and for each the wire's address
    // number (UdpUring::add_local) it sends from; kNoLocal past the end.
    static constexpr uint16_t kNoLocal = emu::kNoLocal;
    uint32_t gid_count() const { return uint32_t(gid_local_.size()); }
    uint16_t local_of_gid(uint32_t gid_index) const {
        return gid_index < gid_local_.size() ? gid_local_[gid_index] : kNoLocal;
    }
    const net::Endpoint& local(uint16_t i) const { return io_.local(i); }
    // Sending from address `i` on the device's own port.
    net::TxSource device_source(uint16_t i) const { return {self_.port(), io_.local_sender(i), i}; }
    net::UdpUring& io() { return io_; }
    // Waits for packets and eventfds at most `timeout_ns` and handles what came.
    void run_once(uint64_t timeout_ns) { io_.run_once(timeout_ns, *this); }
    // Nothing in flight: every transmit buffer is back and nothing waits on the self link.
    bool idle() const { return self_link_.empty() && io_.tx_free_count() == io_.kTxBufs; }

    // Sending. tx_begin: a transmit buffer (nullptr: all in flight, counted as a stall).
    uint8_t* tx_begin(uint32_t* slot);
    // Appends the ICRC, records the packet in the capture, and queues it. `qp`: the QP that
    // sends it, for its per-opcode counters (nullptr: the CM's QP1, the device's counters
    // only), whose UDP source port it leaves from (Qp::tx; source_ports.h), and whose address
    // vector gives the IPv4 TOS and TTL (Qp::ip_marks) unless `marks` does (UD: the AH's).
    void transmit(uint32_t slot, size_t len_no_icrc, const net::Endpoint& to, Qp* qp = nullptr);
    void transmit(uint32_t slot, size_t len_no_icrc, const net::Endpoint& to, Qp* qp,
                  net::IpMarks marks, const net::TxSource* from = nullptr);
    void tx_free(uint32_t slot) { io_.tx_free(slot); }
    // True when a requester should wait before sending more to `to`: multicast this device
    // sent to its own groups that has not come back yet. A count that stops moving (the
    // kernel dropped some of them after all) is forgotten after 2 ms and 4 engine turns
    // without one of them arriving.
    bool self_paced(const net::Endpoint& to);

    // The engine's turn: begin_turn() first; deliver_to_self() receives what this device
    // sent to itself, until nothing is left (what that answers to itself included).
    void begin_turn() {
        ++turn_;
        looped_ = false;
    }
    void deliver_to_self();
    size_t self_backlog() const { return self_link_.size(); }
    bool looped() const { return looped_; }  // this turn received packets from the self link

    // The UDP source ports QPs send from (emu/engine/source_ports.h).
    SourcePorts& sources() { return sources_; }
    std::string sport_line() const { return sources_.line(); }

    // Capture (docs/capture.md). set_capture: starts (path non-empty; replaces a running
    // capture) or stops it; 0 or errno.
    int set_capture(const std::string& path, uint64_t max_bytes);
    uint64_t capture_packets() const { return pcap_.packets(); }  // rotated files included
    void flush_capture() { pcap_.flush(); }
    void close_capture() { pcap_.close(); }

    // Fault injection (docs/faults.md, wire_faults.cpp). set_faults replaces the spec (off:
    // !spec.any()) and returns the seed in use.
    uint64_t set_faults(const net::FaultSpec& spec);
    bool faults_holding() const { return faults_.holding(); }
    uint64_t next_release_in(uint64_t now) const { return faults_.next_release_in(now); }
    void release_faults(uint64_t now);  // the held packets that are due
    std::string fault_lines() const;    // the "faults ..." lines of the dump

    // The ring's callbacks: a datagram the socket delivered, a doorbell or command eventfd
    // that fired (the device's). Tests and fuzzers call them as the ring does.
    // `seg`: the packet's place in the GRO train it came in (net/udp_uring.h; 0: alone).
    void on_packet(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                   uint16_t seg, net::IpMarks marks = {}) override;
    void on_eventfd(uint64_t tag) override;
    // The GSO/GRO line of the dump (`uroce counters`): which offloads are in use.
    std::string offload_line() const;
    // How received ICRCs were accepted (counters_icrc, docs/counters.md).
    std::string icrc_line() const;

private:
    // Where a packet enters the device, from the socket or from self_link_: the fault
    // injector, then receive().
    void arrive(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                uint16_t seg, net::IpMarks marks);
    // Checks, counts, captures, then the device's dispatch. `to`: the address the packet
    // was sent to (the device's, or a multicast group's). `icrc_unset`: a packet from this
    // device to itself whose ICRC nobody needed (transmit). `seg`: the IPv4 ID the packet
    // most likely had (its place in a GRO train); the ICRC check tries it first.
    void receive(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                 bool icrc_unset = false, uint16_t seg = 0, net::IpMarks marks = {});
    // Hands a finished packet to the socket, or to self_link_ if it is for this device
    // (loopback pacing counts the multicast ones that come back).
    void wire_send(uint32_t slot, size_t len, const net::Endpoint& to, net::IpMarks marks,
                   net::TxSource src, bool icrc = true);
    // Fault injection: false when the packet must go no further.
    bool fault_rx(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                  uint16_t seg, net::IpMarks marks);
    // A GSO train the kernel refused goes again packet by packet: new IPv4 IDs, new ICRCs.
    void on_resend(const net::Endpoint& to, uint8_t* data, size_t len, uint16_t from_seg,
                   uint16_t to_seg) override;
    bool fault_tx(uint32_t slot, size_t len, const net::Endpoint& to, net::IpMarks marks,
                  net::TxSource src);
    // Whether anything outside the engine can see a packet's bytes: a capture, or the fault
    // injector (which corrupts packets for the ICRC check to find).
    bool packets_observed() const {
        return pcap_.is_open() || faults_.armed(net::kFaultTx) || faults_.armed(net::kFaultRx);
    }
    bool to_self(const net::Endpoint& to) const { return self_local(to) != kNoLocal; }
    uint16_t self_local(const net::Endpoint& to) const;  // which address of the device it is
    uint16_t addr_local(const net::Endpoint& a) const;   // the same, whatever the port
    bool loops_back(const net::Endpoint& to) const;

    DeviceConfig& cfg_;
    DeviceCounters& counters_;
    Dma& dma_;
    const McastGroups& mcast_;
    Device& dev_;
    net::Endpoint self_;  // the device's (first) address and port
    std::vector<uint16_t> gid_local_;
    net::UdpUring io_;
    SourcePorts sources_;
    net::TxSource cm_src_;  // the CM's MADs: QP1's port (open)
    net::PcapTap pcap_;
    net::FaultInjector faults_;
    // A packet sent as segment k of a GSO train has IPv4 ID k, which its ICRC covers
    // (transmit computes it for ID 0 and wire_send corrects it).
    net::IcrcIdDelta icrc_ids_;
    // Finds the ID of a received packet from any sender (its tables are made here, once).
    const net::IcrcIdSolver icrc_solver_;
    SelfLink self_link_;   // unicast packets to this device's own address
    bool looped_ = false;  // this engine turn received packets from self_link_
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
};

}  // namespace uroce::emu
