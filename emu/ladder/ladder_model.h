// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The ladder diagram's model (`uroce ladder`, docs/ladder.md): packets seen in one or more
// captures turned into lanes (one per QP, one CM lane per address) and rows (an arrow per
// packet, a band per long run of one kind, a trace event on a lane), in time order. Pure
// data in, data out: the captures are read by ladder_capture.h, drawn by ladder_svg.h, and
// the unit tests feed it synthetic packets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uroce::ladder {

// One record of one capture: the fields the ladder needs, decoded once (no pointer into the
// file's buffer survives the read).
struct Sighting {
    int64_t t_us = 0;  // capture timestamp, microseconds since the epoch
    uint32_t src = 0;  // addresses: numbers in Ladder::addr_names, or IPv4 host order
    uint32_t dst = 0;
    uint16_t sport = 0;  // UDP source port (the sending QP's)
    uint8_t opcode = 0;
    uint8_t syndrome = 0;  // AETH, where the opcode has one
    bool has_aeth = false;
    bool icrc_ok = true;
    bool ackreq = false;
    uint16_t file = 0;      // which capture (index into the --from list)
    uint16_t mad_attr = 0;  // a CM MAD's attribute ID (QP1 traffic), else 0
    uint32_t dqpn = 0;
    uint32_t psn = 0;
    uint32_t src_qpn = 0;  // DETH (UD), else 0
    uint32_t srqn = 0;     // XRCETH (XRC requests), else 0
    uint32_t msn = 0;      // AETH
    uint32_t len = 0;      // UDP payload length: BTH .. ICRC
    uint32_t payload_len = 0;
};

// What happened to a packet at its receiver, as far as the captures tell.
enum class Fate : uint8_t {
    kDelivered,  // seen arriving with a good ICRC, or the receiver's capture is not given
    kLost,       // the receiver's capture is given and does not hold it (fault injector, wire)
    kBadIcrc,    // arrived with a bad ICRC: the receiver dropped it (drop bad_icrc)
    kNoQp,       // a reliable request to a QP that never answers anything (drop bad_qp)
};
const char* fate_name(Fate);

struct Lane {
    uint32_t addr = 0;
    uint32_t qpn = 0;    // 1: the address's CM lane; kUnknownQpn: a sender not resolved
    uint16_t sport = 0;  // for an unresolved sender: the UDP port it sent from
    int32_t pid = -1;    // from the trace, where it names the QP's creator
    std::string device;  // from the trace
};
constexpr uint32_t kUnknownQpn = 0xffffffffu;

// One packet after the captures' copies of it were merged.
struct Packet {
    Sighting s;                 // the sender's copy where there is one, else the receiver's
    int64_t rx_t_us = -1;       // when the receiver's capture saw it (-1: not seen there)
    uint32_t from = 0, to = 0;  // lane indices
    Fate fate = Fate::kDelivered;
    int32_t retx_of = -1;    // index of the packet it retransmits (same QP, PSN, request opcode)
    bool duplicate = false;  // a second arrival of one sent once (fault injector's dup)
};

// Something the trace put on a lane.
struct LaneEvent {
    int64_t t_us = 0;
    uint32_t lane = 0;
    std::string text;  // "RTS -> ERR", "send wr_id 0x5 completed with RETRY_EXC_ERR", ...
    bool error = false;
};

enum class RowKind : uint8_t { kArrow, kBand, kEvent };
struct Row {
    RowKind kind = RowKind::kArrow;
    uint32_t first = 0;  // packet index (arrow, band's first) or event index
    uint32_t last = 0;   // band: its last packet
    uint32_t count = 1;  // band: packets in it
    uint64_t bytes = 0;  // band: UDP payload bytes
};

struct Options {
    std::vector<uint32_t> qpns;  // keep packets with one of these QPNs at either end
    int64_t t0_us = INT64_MIN;   // keep packets in [t0, t1], relative to the first packet
    int64_t t1_us = INT64_MAX;
    uint32_t min_band = 6;      // runs at least this long become a band
    int64_t slice_us = 100000;  // a band ends at each multiple of this after the first packet
    // Drawn at most, the rest counted: 1300 rows are about 31,000 pixels high, within the
    // 32,767 librsvg renders, and some 400 KB.
    uint32_t max_rows = 1300;
    int64_t self_window_us = 2000;      // a device's own rx copy follows its tx copy within this
    int64_t cross_window_us = 1000000;  // and another device's within this
    int64_t skew_us = 1000;  // a receiver's copy may be stamped this much before the sender's
};

struct Ladder {
    std::vector<Lane> lanes;
    std::vector<Packet> packets;  // in time order (the sender's copy's time)
    std::vector<LaneEvent> events;
    std::vector<Row> rows;         // in time order
    size_t sightings = 0;          // records read
    size_t packets_not_drawn = 0;  // beyond max_rows
    size_t retransmissions = 0;
    size_t short_arrows = 0;  // packets whose fate is not kDelivered
    int64_t t_first_us = 0;
    // The captures' addresses (ladder_capture.h's AddressBook): a Sighting's src and dst are
    // numbers in it. Empty: they are IPv4 addresses (the unit tests).
    std::vector<std::string> addr_names;
    std::vector<std::array<uint8_t, 16>> addr_keys;  // the 16-byte (IPv4-mapped) form, for order
};

// The band key of a packet: transport and operation family (SEND, WRITE, READ request, READ
// response, ATOMIC, ACK, NAK, RNR NAK, ...), its fate and whether it is a retransmission.
// Packets of one key in a row between the same two lanes form a band.
uint32_t band_kind(const Packet&);

// Merges the sightings of every capture (any order) into packets: a packet seen by its
// sender and its receiver is one packet; finds each packet's lanes, fate and original.
// The sightings are sorted in place.
void build_packets(std::vector<Sighting>& sightings, size_t files, const Options&, Ladder* out);

// The rows: arrows, bands (runs of min_band or more) and the events, merged by time.
void build_rows(const Options&, Ladder* out);

// Short names: "RC_SEND_ONLY" from the opcode table, "CM REQ" for a MAD; the AETH syndrome as
// "ACK", "NAK PSN_SEQ_ERR", "RNR NAK 0x0e".
std::string packet_name(const Sighting&);
std::string syndrome_name(uint8_t syndrome);
std::string lane_name(const Ladder&, const Lane&);
std::string ipv4_name(uint32_t addr_host);
// An address as the captures name it: from the ladder's address book where it has one
// (either IP version), else the IPv4 address itself.
std::string address_name(const Ladder&, uint32_t addr);

}  // namespace uroce::ladder
