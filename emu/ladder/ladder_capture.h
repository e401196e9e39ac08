// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Reading captures for `uroce ladder`: every RoCEv2 record of a pcap (libpcap) decoded with
// the project's own codec (net/headers.h) into the ladder's Sighting, the ICRC checked as the
// receiver checks it (net/icrc.h), a CM MAD's attribute read from QP1's payload.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emu/ladder/ladder_model.h"

namespace uroce::ladder {

struct CaptureStats {
    size_t records = 0;   // frames in the file
    size_t roce = 0;      // RoCEv2 packets among them (appended to the output)
    size_t not_roce = 0;  // other frames (not IPv4/IPv6 UDP to the port, or undecodable)
};

// The addresses of the captures, IPv4 and IPv6, numbered as first seen: a Sighting names
// them by number (Ladder::addr_names, addr_keys).
// Number 0 is no address (the model's "none").
struct AddressBook {
    std::vector<std::array<uint8_t, 16>> keys{{}};  // IPv6, or IPv4 written IPv4-mapped
    std::vector<std::string> names{""};
    std::map<std::array<uint8_t, 16>, uint32_t> ids;
    uint32_t id(const uint8_t* addr, bool v6);
};

// Appends the file's RoCEv2 packets (UDP destination port `port`, over IPv4 or IPv6) to *out,
// marked with `file`, their addresses numbered in *book. False with *err on a file libpcap
// cannot read.
bool read_capture(const std::string& path, uint16_t file, uint16_t port, AddressBook* book,
                  std::vector<Sighting>* out, CaptureStats* stats, std::string* err);

// One UDP payload (BTH .. ICRC) as a Sighting; the ICRC is checked when `ip` (the whole
// IPv4 or, v6, IPv6 datagram, ip_len bytes) is given. False if it does not decode.
bool sighting_from_payload(const uint8_t* udp_payload, size_t len, const uint8_t* ip, size_t ip_len,
                           bool v6, Sighting* out);

}  // namespace uroce::ladder
