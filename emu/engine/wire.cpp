// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/engine/wire.h"

#include <arpa/inet.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emu/engine/device.h"
#include "emu/engine/dma.h"
#include "emu/verbs/mcast_groups.h"
#include "net/icrc.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {
// The ICRC of a packet from `src` to `dst` (address and port each), stored in it: over IPv4
// for ID 0 (net/icrc_id.h moves it to another), over IPv6 for its exact headers.
void store_icrc(const net::Endpoint& src, const net::Endpoint& dst, uint8_t* buf, size_t len) {
    if (src.is_v6())
        net::icrc_store6(src.addr6(), dst.addr6(), src.port(), dst.port(), buf, len);
    else
        net::icrc_store(src.v4_be(), dst.v4_be(), src.port(), dst.port(), buf, len);
}
}  // namespace

Wire::Wire(DeviceConfig& cfg, DeviceCounters& counters, Dma& dma, const McastGroups& mcast,
           Device& dev)
    : cfg_(cfg), counters_(counters), dma_(dma), mcast_(mcast), dev_(dev), sources_(io_, cfg.port) {
    self_ = cfg_.endpoint();
    // The engine flushes the capture once per loop turn (Device::run_turn), not once per
    // packet.
    pcap_.set_flush_each(false);
}

int Wire::open() {
    self_ = cfg_.endpoint();  // (the configuration may have changed since construction)
    int err = io_.open(self_, cfg_.offload);
    if (err) return err;
    const std::vector<net::Endpoint> all = cfg_.addresses();
    for (size_t i = 1; i < all.size(); ++i)
        if (int r = io_.add_local(all[i]); r < 0) return -r;
    gid_local_.clear();
    for (const net::Endpoint& g : cfg_.gid_table())
        for (size_t i = 0; i < all.size(); ++i)
            if (all[i].same_addr(g)) {
                gid_local_.push_back(uint16_t(i));
                break;
            }
    cm_src_ = sources_.acquire(net::sport_for_qpn(1));  // as rxe's GSI QP
    if (!cfg_.pcap.empty()) {
        std::string why;
        if (!pcap_.open(cfg_.pcap, cfg_.pcap_max, &why)) return errno ? errno : EIO;
    }
    if (cfg_.faults.any()) set_faults(cfg_.faults);
    // A 4 KiB datagram costs more than 8 KiB of receive buffer: its data sits in an 8 KiB
    // allocation, plus the skb (truesize about 8.8 KiB). 10 KiB a packet leaves some margin.
    self_budget_ = std::max(16, io_.rcvbuf() / 10240);
    return 0;
}

uint16_t Wire::self_local(const net::Endpoint& to) const {
    return to.port() == self_.port() ? addr_local(to) : kNoLocal;
}

uint16_t Wire::addr_local(const net::Endpoint& a) const {
    for (size_t i = 0; i < io_.locals(); ++i)
        if (io_.local(i).same_addr(a)) return uint16_t(i);
    return kNoLocal;
}

bool Wire::loops_back(const net::Endpoint& to) const {
    return to.port() == self_.port() && !to.is_v6() && net::is_ipv4_multicast(to.v4_be()) &&
           mcast_.member(to.v4_be());
}

bool Wire::self_paced(const net::Endpoint& to) {
    if (self_inflight_ < self_budget_ || !loops_back(to)) return false;
    if (turn_ - self_rx_turn_ < 4 || now_ns() - last_self_rx_ns_ < 2000000) return true;
    self_inflight_ = 0;
    return false;
}

// The device's own eventfds (doorbells, commands) come through the same ring.
void Wire::on_eventfd(uint64_t tag) { dev_.on_eventfd(tag); }

uint8_t* Wire::tx_begin(uint32_t* slot) {
    uint8_t* buf = io_.tx_alloc(slot);
    if (!buf) ++counters_.tx_stalls;
    return buf;
}

void Wire::transmit(uint32_t slot, size_t len_no_icrc, const net::Endpoint& to, Qp* qp) {
    transmit(slot, len_no_icrc, to, qp, qp ? qp->ip_marks : net::IpMarks{});
}

void Wire::transmit(uint32_t slot, size_t len_no_icrc, const net::Endpoint& to, Qp* qp,
                    net::IpMarks marks, const net::TxSource* from_src) {
    dma_.flush();  // nothing leaves before the data it may acknowledge (emu/engine/dma.cpp)
    uint8_t* buf = io_.tx_buffer(slot);
    size_t len = len_no_icrc + net::kIcrcLen;
    const net::TxSource src = from_src ? *from_src : qp ? qp->tx : cm_src_;
    // A packet to this device itself that nobody can see needs no ICRC: it is never on a
    // wire, and receive() skips the check for it (docs/behaviour.md, "Loopback").
    bool icrc = !to_self(to) || packets_observed();
    net::Endpoint from = io_.local(src.local);
    from.set_port(src.port);
    if (icrc) store_icrc(from, to, buf, len);
    if (pcap_.is_open()) {
        // Recorded with the IPv4 ID it will have on the wire (its place in the GSO train it
        // joins, net/udp_uring.h) and the ICRC for it; wire_send numbers it again from ID 0.
        // Its TOS and TTL too, and the UDP checksum when the socket sends one (net/udp_uring.h);
        // a packet to itself never reaches the socket and has none.
        const bool wire = !to_self(to);
        // (IPv6 has no ID.)
        uint16_t id = icrc && wire && !to.is_v6() ? io_.tx_next_seg(len, to, marks, src.sock) : 0;
        if (id) net::icrc_set_id(buf, len, 0, id, icrc_ids_);
        timeval tv;
        gettimeofday(&tv, nullptr);
        pcap_.record(from, to, buf, len, tv, id, true, marks,
                     wire && !io_.offloads().udp_csum_zero);
        if (id) net::icrc_set_id(buf, len, id, 0, icrc_ids_);
    }
    ++counters_.tx_pkts;
    counters_.tx_bytes += len;
    if (to.multicast()) ++counters_.mcast_tx_pkts;
    counters_.tx_op.add(buf[0], len);
    if (qp) qp->tx_op.add(buf[0], len);
    if (faults_.armed(net::kFaultTx) && !fault_tx(slot, len, to, marks, src))
        return;  // docs/faults.md
    wire_send(slot, len, to, marks, src, icrc);
}

void Wire::wire_send(uint32_t slot, size_t len, const net::Endpoint& to, net::IpMarks marks,
                     net::TxSource src, bool icrc) {
    if (uint16_t l = self_local(to); l != kNoLocal)
        return self_link_.push(slot, uint32_t(len), icrc, marks, src.port, src.local, l);
    if (loops_back(to)) ++self_inflight_;
    uint8_t* buf = io_.tx_buffer(slot);
    if (uint16_t id = io_.tx_send(slot, len, to, marks, src.sock))
        if (!to.is_v6()) net::icrc_set_id(buf, len, 0, id, icrc_ids_);
}

void Wire::on_resend(const net::Endpoint& to, uint8_t* data, size_t len, uint16_t from_seg,
                     uint16_t to_seg) {
    if (!to.is_v6()) net::icrc_set_id(data, len, from_seg, to_seg, icrc_ids_);
}

// What the socket delivered: loopback pacing counts it here, once (multicast of its own, from
// the device's port or a QP's).
void Wire::on_packet(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                     uint16_t seg, net::IpMarks marks) {
    if (uint16_t l = addr_local(from); l != kNoLocal && sources_.ours(from.port(), l)) {
        if (self_inflight_) --self_inflight_;
        last_self_rx_ns_ = now_ns();
        self_rx_turn_ = turn_;
    }
    arrive(from, to, data, len, seg, marks);
}

// The fault injector (which may drop, hold or duplicate the packet), then the receive path.
void Wire::arrive(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                  uint16_t seg, net::IpMarks marks) {
    if (faults_.armed(net::kFaultRx) && !fault_rx(from, to, data, len, seg, marks))
        return;  // docs/faults.md
    receive(from, to, data, len, false, seg, marks);
}

void Wire::receive(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                   bool icrc_unset, uint16_t seg, net::IpMarks marks) {
    ++counters_.rx_pkts;
    counters_.rx_bytes += len;
    if (len) counters_.rx_op.add(data[0], len);
    // The ICRC covers the sender's IPv4 ID, which a socket does not show: a packet that was
    // segment k of a GSO train had ID k (net/udp_uring.h), one from rxe or a NIC any ID; the
    // solver finds it (net/icrc_id.h). The ID found goes in the capture.
    // Over IPv6 every covered field is known: one exact check.
    uint16_t id = seg;
    bool df = true;
    const bool v6 = from.is_v6();
    net::IcrcWay way = net::IcrcWay::kBad;
    if (v6 && !icrc_unset &&
        net::icrc_check6(from.addr6(), to.addr6(), from.port(), cfg_.port, data, len))
        way = net::IcrcWay::kId0;
    else if (!v6 && !icrc_unset)
        way = net::icrc_check_any_id(from.v4_be(), to.v4_be(), from.port(), cfg_.port, data, len,
                                     seg, cfg_.icrc_nodf, icrc_ids_, icrc_solver_, &id, &df);
    if (pcap_.is_open()) {
        timeval tv;
        gettimeofday(&tv, nullptr);
        pcap_.record(from, to, data, len, tv, id, df, marks);  // (`to` has the device's port)
    }
    net::Packet p;
    net::DropReason why = net::decode(data, len, p);
    if (why != net::DropReason::kNone) return counters_.drop(why);
    p.ip = marks;
    if (icrc_unset)
        ++counters_.icrc_unchecked;
    else
        switch (way) {
        case net::IcrcWay::kBad: return counters_.drop(net::DropReason::kBadIcrc);
        case net::IcrcWay::kId0: ++(v6 ? counters_.icrc_ipv6 : counters_.icrc_id0); break;
        case net::IcrcWay::kHint: ++counters_.icrc_train; break;
        case net::IcrcWay::kSolved: ++counters_.icrc_solved; break;
        case net::IcrcWay::kSolvedNoDf: ++counters_.icrc_solved_nodf; break;
        }
    if ((p.bth.pkey & 0x7fff) != (net::kDefaultPkey & 0x7fff))
        return counters_.drop(net::DropReason::kBadPkey);
    dev_.dispatch(p, from, to, len);
}

void Wire::deliver_to_self() {
    if (self_link_.empty()) return;
    looped_ = true;
    while (!self_link_.empty()) {
        SelfLink::Pkt k = self_link_.pop();
        uint8_t* buf = io_.tx_buffer(k.slot);
        net::Endpoint from = io_.local(k.from);
        from.set_port(k.sport);
        const net::Endpoint& to = io_.local(k.to);
        if (!k.icrc && packets_observed()) {
            // A capture or the injector started since it was sent.
            store_icrc(from, to, buf, k.len);
            k.icrc = true;
        }
        if (k.icrc)
            arrive(from, to, buf, k.len, 0, k.marks);
        else
            receive(from, to, buf, k.len, true, 0, k.marks);
        io_.tx_free(k.slot);
    }
}

int Wire::set_capture(const std::string& path, uint64_t max_bytes) {
    pcap_.close();  // flushes what the current capture still buffers
    cfg_.pcap.clear();
    cfg_.pcap_max = 0;
    if (path.empty()) return 0;
    std::string why;
    if (!pcap_.open(path, max_bytes, &why)) return errno ? errno : EIO;
    cfg_.pcap = path;
    cfg_.pcap_max = max_bytes;
    return 0;
}

std::string Wire::offload_line() const {
    const net::UdpUring::Offloads& o = io_.offloads();
    auto state = [](bool on, int err) {
        if (on) return std::string("on");
        return err ? "off (" + std::string(strerrorname_np(err) ? strerrorname_np(err) : "?") + ")"
                   : std::string("off");
    };
    return "counters_offload gso " + state(o.gso, o.gso_errno) + " gro " +
           state(o.gro, o.gro_errno) + " tx_trains " + std::to_string(o.tx_trains) +
           " tx_train_pkts " + std::to_string(o.tx_train_pkts) + " rx_trains " +
           std::to_string(o.rx_trains) + " rx_train_pkts " + std::to_string(o.rx_train_pkts) +
           " rx_nobufs " + std::to_string(io_.rx_nobufs()) + " udp_csum " +
           (o.udp_csum_zero ? "zero" : "kernel") + "\n";
}

std::string Wire::icrc_line() const {
    const DeviceCounters& c = counters_;
    return "counters_icrc id0 " + std::to_string(c.icrc_id0) + " train " +
           std::to_string(c.icrc_train) + " solved " + std::to_string(c.icrc_solved) +
           " solved_nodf " + std::to_string(c.icrc_solved_nodf) + " unchecked " +
           std::to_string(c.icrc_unchecked) + " ipv6 " + std::to_string(c.icrc_ipv6) + " nodf " +
           (cfg_.icrc_nodf ? "on" : "off") + "\n";
}

}  // namespace uroce::emu
