// Reading captures for `uroce ladder`: every RoCEv2 record of a pcap (libpcap) decoded with
// the project's own codec (net/headers.h) into the ladder's Sighting, the ICRC checked as the
// receiver checks it (net/icrc.h), a CM MAD's attribute read from QP1's payload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emu/programs/ladder_model.h"

namespace uroce::ladder {

struct CaptureStats {
    size_t records = 0;   // frames in the file
    size_t roce = 0;      // RoCEv2 packets among them (appended to the output)
    size_t not_roce = 0;  // other frames (not IPv4/UDP to the port, or undecodable)
    size_t ipv6 = 0;      // IPv6 frames: not drawn yet (the ladder's addresses are IPv4)
};

// Appends the file's RoCEv2 packets (UDP destination port `port`) to *out, marked with
// `file`. False with *err on a file libpcap cannot read.
bool read_capture(const std::string& path, uint16_t file, uint16_t port, std::vector<Sighting>* out,
                  CaptureStats* stats, std::string* err);

// One UDP payload (BTH .. ICRC) as a Sighting; the ICRC is checked when `ip` (the whole
// IPv4 datagram, ip_len bytes) is given. False if it does not decode.
bool sighting_from_payload(const uint8_t* udp_payload, size_t len, const uint8_t* ip, size_t ip_len,
                           Sighting* out);

}  // namespace uroce::ladder
