// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Captures to lanes and rows (ladder_model.h). One pass over the time-ordered sightings with
// a flat hash index of the last packet per wire key; nothing is allocated per packet beyond
// the output vector's growth, so a capture of a million packets takes well under a second.
#include "emu/ladder/ladder_model.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::ladder {

const char* fate_name(Fate f) {
    switch (f) {
    case Fate::kDelivered: return "delivered";
    case Fate::kLost: return "lost";
    case Fate::kBadIcrc: return "bad_icrc";
    case Fate::kNoQp: return "no_qp";
    }
    return "?";
}

namespace {

// The headers that make two sightings copies of one packet (or a retransmission of it): the
// addresses, the port and the BTH, which a corrupted copy keeps (the fault injector flips a
// bit after the BTH). What follows the BTH is compared where the copy is intact (same_content).
uint64_t wire_hash(const Sighting& s) {
    uint64_t h = (uint64_t(s.src) << 32 | s.dst) * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t(s.sport) << 48 | uint64_t(s.dqpn) << 24 | s.psn) * 0xc2b2ae3d27d4eb4full;
    h ^= uint64_t(s.opcode) * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
}

bool same_wire(const Sighting& a, const Sighting& b) {
    return a.src == b.src && a.dst == b.dst && a.sport == b.sport && a.dqpn == b.dqpn &&
           a.psn == b.psn && a.opcode == b.opcode;
}

// An ACK's syndrome and MSN (an RNR NAK and a sequence NAK may carry one PSN in one
// microsecond), a MAD's attribute.
bool same_content(const Sighting& a, const Sighting& b) {
    return a.syndrome == b.syndrome && a.msn == b.msn && a.mad_attr == b.mad_attr;
}

// Open addressing, linear probing: slot = packet index + 1 of the latest packet of a key.
class LatestIndex {
public:
    explicit LatestIndex(size_t expect) {
        size_t n = 1024;
        while (n < expect * 2) n <<= 1;
        slots_.assign(n, 0);
    }
    // The slot holding the key's latest packet, or the empty slot where it would go.
    uint32_t* find(const Sighting& s, const std::vector<Packet>& pk) {
        if (used_ * 2 >= slots_.size()) grow(pk);
        size_t mask = slots_.size() - 1;
        for (size_t i = wire_hash(s) & mask;; i = (i + 1) & mask) {
            uint32_t v = slots_[i];
            if (v == 0 || same_wire(pk[v - 1].s, s)) return &slots_[i];
        }
    }
    void set(uint32_t* slot, uint32_t packet) {
        if (*slot == 0) ++used_;
        *slot = packet + 1;
    }

private:
    void grow(const std::vector<Packet>& pk) {
        std::vector<uint32_t> old(slots_.size() * 2, 0);
        old.swap(slots_);
        size_t mask = slots_.size() - 1;
        for (uint32_t v : old) {
            if (!v) continue;
            size_t i = wire_hash(pk[v - 1].s) & mask;
            while (slots_[i]) i = (i + 1) & mask;
            slots_[i] = v;
        }
    }
    std::vector<uint32_t> slots_;
    size_t used_ = 0;
};

// Which device each capture belongs to: the address in every one of its packets; where two
// are (a capture of traffic between two devices), the one whose copies of shared packets
// come first in this capture (a packet is recorded as it is sent, before it arrives).
std::vector<uint32_t> capture_owners(const std::vector<Sighting>& ss, size_t files,
                                     const Options& opt) {
    std::vector<uint32_t> cand_a(files, 0), cand_b(files, 0);
    std::vector<bool> seen(files, false);
    for (const Sighting& s : ss) {
        uint32_t& a = cand_a[s.file];
        uint32_t& b = cand_b[s.file];
        if (!seen[s.file]) {
            seen[s.file] = true;
            a = s.src;
            b = s.dst == s.src ? 0 : s.dst;
            continue;
        }
        if (a && a != s.src && a != s.dst) a = 0;
        if (b && b != s.src && b != s.dst) b = 0;
    }
    std::vector<uint32_t> owner(files, 0);
    bool ambiguous = false;
    for (size_t f = 0; f < files; ++f) {
        if (cand_a[f] && cand_b[f])
            ambiguous = true;
        else
            owner[f] = cand_a[f] ? cand_a[f] : cand_b[f];
    }
    if (!ambiguous || files < 2) return owner;
    // Votes from the first copies of the first packets seen in two captures.
    struct First {
        uint16_t file;
        int64_t t;
    };
    std::unordered_map<uint64_t, First> first;
    std::vector<std::unordered_map<uint32_t, size_t>> votes(files);
    size_t n = 0;
    for (const Sighting& s : ss) {
        if (++n > 200000) break;
        auto [it, fresh] = first.try_emplace(wire_hash(s), First{s.file, s.t_us});
        if (fresh || it->second.file == s.file || s.t_us - it->second.t > opt.cross_window_us)
            continue;
        ++votes[it->second.file][s.src];
        ++votes[s.file][s.dst];
        first.erase(it);
    }
    for (size_t f = 0; f < files; ++f) {
        if (owner[f] || votes[f].empty()) continue;
        size_t best = 0;
        for (auto [addr, v] : votes[f])
            if ((addr == cand_a[f] || addr == cand_b[f]) && v > best) {
                best = v;
                owner[f] = addr;
            }
    }
    return owner;
}

uint64_t lane_key(uint32_t addr, uint32_t qpn) { return uint64_t(addr) << 32 | qpn; }

constexpr uint32_t kSportLane = 0x80000000u;  // lane_key's qpn for a sender known by its port

}  // namespace

uint32_t band_kind(const Packet& p) {
    const Sighting& s = p.s;
    uint32_t family = s.opcode;
    if (const net::OpInfo* info = net::op_info(s.opcode)) {
        // The operation families, first match wins (a READ response is not a request).
        static const uint32_t kFamilies[] = {net::kSendOp,   net::kWriteOp,       net::kReadReq,
                                             net::kReadResp, net::kAtomicOp,      net::kAtomicAck,
                                             net::kCnp,      net::kAtomicWriteOp, net::kFlushOp};
        for (uint32_t k = 0; k < sizeof kFamilies / sizeof kFamilies[0]; ++k)
            if (info->flags & kFamilies[k]) {
                family = k + 1;
                break;
            }
        if (family == s.opcode && (info->flags & net::kAckOp))
            family = 0x80 | net::aeth::type(s.syndrome);
        if (family == (0x80u | net::aeth::kNak)) family |= net::aeth::value(s.syndrome) << 8;
    }
    if (s.mad_attr) family = 0x1000 | s.mad_attr;
    uint32_t transport = s.opcode & net::kOpTransportMask;
    return (transport << 24) ^ (family << 4) ^ (uint32_t(p.fate) << 1) ^
           (p.retx_of >= 0 ? 1u : 0u) ^ (p.duplicate ? 0x10000000u : 0u);
}

void build_packets(std::vector<Sighting>& ss, size_t files, const Options& opt, Ladder* out) {
    out->sightings = ss.size();
    std::stable_sort(ss.begin(), ss.end(),
                     [](const Sighting& a, const Sighting& b) { return a.t_us < b.t_us; });
    if (!ss.empty()) out->t_first_us = ss.front().t_us;
    std::vector<uint32_t> owner = capture_owners(ss, files, opt);
    auto captured = [&](uint32_t addr) {
        return std::find(owner.begin(), owner.end(), addr) != owner.end();
    };

    std::vector<Packet>& pk = out->packets;
    pk.clear();
    pk.reserve(ss.size());
    // Per packet during the pass: the capture of its sender's and its receiver's copy.
    std::vector<int16_t> tx_file, rx_file;
    std::vector<int32_t> prev_of;  // the key's packet before it (-1: none)
    tx_file.reserve(ss.size());
    rx_file.reserve(ss.size());
    prev_of.reserve(ss.size());
    LatestIndex latest(ss.size() / 2 + 1);
    auto add = [&](const Sighting& s, bool tx) {
        Packet p;
        p.s = s;
        if (!tx) p.rx_t_us = s.t_us;
        if (!s.icrc_ok) p.fate = Fate::kBadIcrc;
        pk.push_back(p);
        tx_file.push_back(tx ? int16_t(s.file) : int16_t(-1));
        rx_file.push_back(tx ? int16_t(-1) : int16_t(s.file));
        return uint32_t(pk.size() - 1);
    };
    // The packet of the key's chain (latest first, while `open` holds) a copy belongs to: a
    // request's copy to the latest (an older one still open was lost: the sender resent it);
    // identical responses (an ACK sent again for a duplicate) first come, first matched.
    // The packet of the key's chain (latest first) a copy belongs to, among those `open`
    // allows with the same content (a corrupted copy's content is not compared): a request's
    // copy to the latest (an older one still open was lost: the sender resent it); identical
    // responses (an ACK sent again for a duplicate) first come, first matched. The walk ends
    // at a packet of the same content that is not open.
    auto match = [&](int64_t g, const Sighting& s, bool request, auto open) {
        int64_t best = -1;
        for (int k = 0; g >= 0 && k < 64; ++k, g = prev_of[g]) {
            if (s.icrc_ok && !same_content(pk[g].s, s)) continue;
            if (!open(g)) break;
            best = g;
            if (request) break;
        }
        return best;
    };
    for (const Sighting& s : ss) {
        uint32_t* slot = latest.find(s, pk);
        int64_t g = *slot ? int64_t(*slot) - 1 : -1;
        const net::OpInfo* info = net::op_info(s.opcode);
        bool request = info && (info->flags & net::kRequest);
        uint32_t own = owner[s.file];
        int16_t file = int16_t(s.file);
        auto sent_unmatched = [&](int64_t window) {
            return [&, window](int64_t k) {
                return tx_file[k] >= 0 && rx_file[k] < 0 && s.t_us - pk[k].s.t_us <= window;
            };
        };
        bool tx;
        if (!s.icrc_ok)
            tx = false;  // only a received copy can be bad: the sender stored the ICRC
        else if (!own)
            tx = true;  // whose capture is unknown: each packet is in it once
        else if (own == s.src && own == s.dst)  // a device talking to itself: tx, then rx
            tx = match(g, s, request, sent_unmatched(opt.self_window_us)) < 0;
        else
            tx = own != s.dst;
        if (tx) {
            // The receiver's copy, in another capture, may have been stamped a little earlier
            // (a device stamps what it receives with its loop turn's clock) and sorted first.
            int64_t m = match(g, s, request, [&](int64_t k) {
                return tx_file[k] < 0 && rx_file[k] != file &&
                       s.t_us - pk[k].rx_t_us <= opt.skew_us;
            });
            if (m >= 0) {
                tx_file[m] = file;
                pk[m].s = s;
                pk[m].duplicate = false;
                continue;
            }
            uint32_t i = add(s, true);
            prev_of.push_back(int32_t(g));
            latest.set(slot, i);
            continue;
        }
        int64_t m = match(g, s, request, sent_unmatched(opt.cross_window_us));
        if (m >= 0) {
            rx_file[m] = file;
            pk[m].rx_t_us = s.t_us;
            if (!s.icrc_ok) pk[m].fate = Fate::kBadIcrc;
            continue;
        }
        uint32_t i = add(s, false);
        prev_of.push_back(int32_t(g));
        pk[i].duplicate = g >= 0 && rx_file[g] >= 0 && same_content(pk[g].s, s) &&
                          s.t_us - pk[g].s.t_us <= opt.cross_window_us;
        latest.set(slot, i);
    }

    // Retransmissions: a request of a key seen before (a duplicate arrival is not one). Then
    // time order by the sender's copy, which a receiver's early stamp may have disturbed.
    for (size_t i = 0; i < pk.size(); ++i) {
        const net::OpInfo* info = net::op_info(pk[i].s.opcode);
        int32_t g = prev_of[i];
        if (g < 0 || pk[i].duplicate || !info || !(info->flags & net::kRequest) ||
            pk[i].s.mad_attr || info->cls == net::QpClass::UD)
            continue;
        pk[i].retx_of = pk[g].retx_of >= 0 ? pk[g].retx_of : g;
        ++out->retransmissions;
    }
    std::vector<uint32_t> order(pk.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return pk[a].s.t_us < pk[b].s.t_us; });
    std::vector<uint32_t> where(pk.size());
    for (uint32_t k = 0; k < order.size(); ++k) where[order[k]] = k;
    {
        std::vector<Packet> sorted(pk.size());
        std::vector<int16_t> tf(pk.size()), rf(pk.size());
        for (uint32_t k = 0; k < order.size(); ++k) {
            sorted[k] = pk[order[k]];
            if (sorted[k].retx_of >= 0) sorted[k].retx_of = int32_t(where[sorted[k].retx_of]);
            tf[k] = tx_file[order[k]];
            rf[k] = rx_file[order[k]];
        }
        pk.swap(sorted);
        tx_file.swap(tf);
        rx_file.swap(rf);
    }

    // Lanes. A connected QP's packets leave from the port its path gives it, which the two
    // QP numbers make (net/udp_sport.h: the flow label of lqpn * rqpn), the same both ways: so
    // the sender of a request A -> B from port P is the QP that B's responses to A from port
    // P are for, and the sender of a response the QP B's requests are for. (By kind, because
    // XRC pairs cross: A's INI QP 0x12 sends to B's TGT QP 0x11 and B's INI QP 0x12 to A's
    // TGT QP 0x11, all from one port.) Without responses (UC), B's requests tell.
    struct Flow {
        uint32_t dqpn;
        bool many;
    };
    std::unordered_map<uint64_t, Flow> flows;  // (src, dst, sport, response) -> dqpn
    auto flow_key = [](uint32_t src, uint32_t dst, uint16_t sport, bool response) {
        return (uint64_t(src) << 32 | dst) * 0x9e3779b97f4a7c15ull ^
               (uint64_t(response) << 16 | sport);
    };
    auto is_response = [](const Sighting& s) {
        const net::OpInfo* info = net::op_info(s.opcode);
        return info && (info->flags & net::kResponse);
    };
    for (const Packet& p : pk) {
        auto [it, fresh] = flows.try_emplace(
            flow_key(p.s.src, p.s.dst, p.s.sport, is_response(p.s)), Flow{p.s.dqpn, false});
        if (!fresh && it->second.dqpn != p.s.dqpn) it->second.many = true;
    }
    auto sender = [&](const Sighting& s) {
        bool resp = is_response(s);
        for (bool kind : {!resp, resp}) {
            auto it = flows.find(flow_key(s.dst, s.src, s.sport, kind));
            if (it != flows.end()) return it->second.many ? kUnknownQpn : it->second.dqpn;
        }
        return kUnknownQpn;
    };
    std::unordered_map<uint64_t, uint32_t> lane_of;
    auto lane = [&](uint32_t addr, uint32_t qpn, uint16_t sport) {
        uint64_t k = lane_key(addr, qpn == kUnknownQpn ? kSportLane | sport : qpn);
        auto [it, fresh] = lane_of.try_emplace(k, uint32_t(out->lanes.size()));
        if (fresh) {
            Lane l;
            l.addr = addr;
            l.qpn = qpn;
            l.sport = qpn == kUnknownQpn ? sport : 0;
            out->lanes.push_back(l);
        }
        return it->second;
    };
    for (Packet& p : pk) {
        const Sighting& s = p.s;
        uint32_t from_qpn = kUnknownQpn;
        if (s.src_qpn)
            from_qpn = s.src_qpn;  // a DETH says who sent it (UD, and the CM's QP1)
        else
            from_qpn = sender(s);
        p.from = lane(s.src, from_qpn, s.sport);
        p.to = lane(s.dst, s.dqpn, 0);
    }

    // Fates of what no receiver's copy accounts for.
    std::vector<bool> answers(out->lanes.size(), false);
    for (const Packet& p : pk) answers[p.from] = true;
    for (size_t i = 0; i < pk.size(); ++i) {
        Packet& p = pk[i];
        if (p.fate != Fate::kDelivered) continue;
        const net::OpInfo* info = net::op_info(p.s.opcode);
        bool reliable_request = info && (info->flags & net::kRequest) &&
                                (info->cls == net::QpClass::RC || info->cls == net::QpClass::XRC);
        if (rx_file[i] < 0 && tx_file[i] >= 0 && captured(p.s.dst))
            p.fate = Fate::kLost;
        else if (reliable_request && !answers[p.to])
            p.fate = Fate::kNoQp;
    }
    for (const Packet& p : pk) out->short_arrows += p.fate != Fate::kDelivered;
}

void build_rows(const Options& opt, Ladder* out) {
    const std::vector<Packet>& pk = out->packets;
    auto keep = [&](const Packet& p) {
        int64_t rel = p.s.t_us - out->t_first_us;
        if (rel < opt.t0_us || rel > opt.t1_us) return false;
        if (opt.qpns.empty()) return true;
        for (uint32_t q : opt.qpns)
            if (out->lanes[p.from].qpn == q || out->lanes[p.to].qpn == q) return true;
        return false;
    };
    std::stable_sort(out->events.begin(), out->events.end(),
                     [](const LaneEvent& a, const LaneEvent& b) { return a.t_us < b.t_us; });

    // Runs: per ordered lane pair, the current run of one band kind. An event on a lane ends
    // the runs that touch it, so a state change is drawn between the packets around it.
    struct Run {
        uint32_t kind, first, last, count;
        uint64_t bytes;
        int64_t slice;
    };
    std::vector<Run> runs;
    std::vector<uint32_t> run_of(pk.size(), UINT32_MAX);
    std::unordered_map<uint64_t, uint32_t> current;  // (from, to) -> run
    size_t e = 0;
    auto event_breaks = [&](int64_t until) {
        for (; e < out->events.size() && out->events[e].t_us <= until; ++e) {
            uint32_t l = out->events[e].lane;
            for (auto it = current.begin(); it != current.end();)
                it = (uint32_t(it->first >> 32) == l || uint32_t(it->first) == l)
                         ? current.erase(it)
                         : std::next(it);
        }
    };
    for (uint32_t i = 0; i < pk.size(); ++i) {
        const Packet& p = pk[i];
        if (!keep(p)) continue;
        event_breaks(p.s.t_us - 1);
        uint32_t kind = band_kind(p);
        // A NAK or RNR NAK ends the run it answers: what the requester sends next is its
        // reaction (a retransmission, a wait), drawn after it.
        if (p.s.has_aeth && net::aeth::type(p.s.syndrome) != net::aeth::kAck)
            current.erase(uint64_t(p.to) << 32 | p.from);
        auto [it, fresh] = current.try_emplace(uint64_t(p.from) << 32 | p.to, 0);
        // A band covers one time slice at most, so a long steady stream is drawn as its
        // packets per slice down the page rather than as one band.
        int64_t slice = opt.slice_us > 0 ? (p.s.t_us - out->t_first_us) / opt.slice_us : 0;
        if (fresh || runs[it->second].kind != kind || runs[it->second].slice != slice) {
            it->second = uint32_t(runs.size());
            runs.push_back({kind, i, i, 0, 0, slice});
        }
        Run& r = runs[it->second];
        r.last = i;
        ++r.count;
        r.bytes += p.s.len;
        run_of[i] = it->second;
    }

    out->rows.clear();
    e = 0;
    auto push = [&](const Row& r) {
        if (out->rows.size() < opt.max_rows) {
            out->rows.push_back(r);
            return true;
        }
        return false;
    };
    auto events_until = [&](int64_t until) {
        for (; e < out->events.size() && out->events[e].t_us <= until; ++e) {
            int64_t rel = out->events[e].t_us - out->t_first_us;
            if (rel < opt.t0_us || rel > opt.t1_us) continue;
            Row r;
            r.kind = RowKind::kEvent;
            r.first = r.last = uint32_t(e);
            push(r);
        }
    };
    for (uint32_t i = 0; i < pk.size(); ++i) {
        if (run_of[i] == UINT32_MAX) continue;
        events_until(pk[i].s.t_us - 1);
        const Run& run = runs[run_of[i]];
        Row r;
        if (run.count >= opt.min_band) {
            if (run.first != i) continue;
            r.kind = RowKind::kBand;
            r.first = run.first;
            r.last = run.last;
            r.count = run.count;
            r.bytes = run.bytes;
        } else {
            r.first = r.last = i;
            r.bytes = pk[i].s.len;
        }
        if (!push(r)) out->packets_not_drawn += r.count;
    }
    events_until(INT64_MAX);
}

std::string syndrome_name(uint8_t syn) {
    char b[48];
    switch (net::aeth::type(syn)) {
    case net::aeth::kAck: return "ACK";
    case net::aeth::kRnrNak:
        std::snprintf(b, sizeof b, "RNR NAK 0x%02x", net::aeth::value(syn));
        return b;
    case net::aeth::kNak: {
        static const char* const kCodes[] = {"PSN_SEQ_ERR", "INV_REQ", "REM_ACCESS_ERR",
                                             "REM_OP_ERR", "INV_RD_REQ"};
        uint8_t v = net::aeth::value(syn);
        if (v < 5) return std::string("NAK ") + kCodes[v];
        std::snprintf(b, sizeof b, "NAK 0x%02x", v);
        return b;
    }
    }
    std::snprintf(b, sizeof b, "syndrome 0x%02x", syn);
    return b;
}

std::string packet_name(const Sighting& s) {
    if (s.mad_attr) {
        switch (s.mad_attr) {
        case 0x10: return "CM REQ";
        case 0x11: return "CM MRA";
        case 0x12: return "CM REJ";
        case 0x13: return "CM REP";
        case 0x14: return "CM RTU";
        case 0x15: return "CM DREQ";
        case 0x16: return "CM DREP";
        case 0x17: return "CM SIDR_REQ";
        case 0x18: return "CM SIDR_REP";
        }
        char b[32];
        std::snprintf(b, sizeof b, "MAD 0x%04x", s.mad_attr);
        return b;
    }
    if (const net::OpInfo* info = net::op_info(s.opcode)) return info->name;
    char b[32];
    std::snprintf(b, sizeof b, "opcode 0x%02x", s.opcode);
    return b;
}

std::string ipv4_name(uint32_t addr) {
    in_addr a{htonl(addr)};
    char b[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, b, sizeof b);
    return b;
}

std::string address_name(const Ladder& lad, uint32_t addr) {
    return addr < lad.addr_names.size() ? lad.addr_names[addr] : ipv4_name(addr);
}

std::string lane_name(const Ladder& lad, const Lane& l) {
    std::string a = address_name(lad, l.addr);
    char b[96];
    if (l.qpn == 1)
        std::snprintf(b, sizeof b, "%s CM", a.c_str());
    else if (l.qpn == kUnknownQpn)
        std::snprintf(b, sizeof b, "%s sport 0x%04x", a.c_str(), l.sport);
    else
        std::snprintf(b, sizeof b, "%s qp 0x%x", a.c_str(), l.qpn);
    return b;
}

}  // namespace uroce::ladder
