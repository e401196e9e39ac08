// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Writes RoCEv2 traffic to a pcap file that Wireshark/tshark dissect as InfiniBand over UDP 4791.
// uroce exchanges UDP payloads through sockets (and loops same-host traffic internally), so
// there are no real frames to capture: the tap synthesizes Ethernet + IPv4 + UDP around each
// payload, using the same IPv4/UDP header the ICRC is computed over (see icrc.h), so the
// recorded ICRC verifies.
#pragma once

#include <sys/time.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/endpoint.h"
#include "net/ip_marks.h"

struct pcap;
struct pcap_dumper;

namespace uroce::net {

// Not thread safe: one thread at a time. In the device every call happens on the engine
// thread (or before it starts / after it ends), so recording takes no lock.
class PcapTap {
public:
    // Largest frame recorded whole: Ethernet + IPv4 + UDP + 4096 MTU payload + headroom for the
    // RoCE headers and ICRC. Longer payloads are recorded truncated (caplen < len).
    static constexpr size_t kMaxFrame = 14 + 40 + 8 + 4096 + 64;  // IPv6's header: 40 bytes
    // stdio buffer of the open file: records accumulate here between flushes.
    static constexpr size_t kFileBuffer = 256 * 1024;

    PcapTap() = default;
    ~PcapTap();
    PcapTap(const PcapTap&) = delete;
    PcapTap& operator=(const PcapTap&) = delete;

    // Create/truncate `path`. max_bytes == 0: unlimited. Otherwise, before a packet would take
    // the file past max_bytes, close it, rename it to path + ".1" (replacing an older one) and
    // start a new file, so at most about 2 * max_bytes stay on disk. Closes any file already open
    // and resets packets(). On failure errno holds the reason (and *err a message).
    bool open(const std::string& path, uint64_t max_bytes, std::string* err);
    void close();
    bool is_open() const;

    // Record one RoCEv2 UDP payload (BTH .. ICRC) with synthesized framing: Ethernet with MACs
    // 02:00:<ip bytes>, IPv4 (ID ip_id, DF, TOS and TTL from marks, valid header checksum),
    // UDP (checksum 0, or with udp_csum the real one over the whole payload).
    // ip_id is the ID the payload's ICRC was made for (a UDP GSO segment's index, or the ID a
    // received packet had, icrc_id.h); df false: the flags field is 0 instead of DF.
    // marks and udp_csum: what the packet had on the wire (net/udp_uring.h), where known.
    // Addresses in network byte order, ports in host order. No allocation, no lock; a system
    // call only when the file buffer fills (or per record with set_flush_each(true)).
    void record(uint32_t src_ip_be, uint16_t sport, uint32_t dst_ip_be, uint16_t dport,
                const uint8_t* udp_payload, size_t udp_len, const struct timeval& ts,
                uint16_t ip_id = 0, bool df = true, IpMarks marks = {}, bool udp_csum = false);

    // The same for either IP version: over IPv6 the frame has an IPv6 header (traffic class
    // and hop limit from marks, flow label 0, no extension header) and the MACs come from the
    // addresses' last four bytes; ip_id and df are IPv4's only.
    void record(const Endpoint& src, const Endpoint& dst, const uint8_t* udp_payload,
                size_t udp_len, const struct timeval& ts, uint16_t ip_id = 0, bool df = true,
                IpMarks marks = {}, bool udp_csum = false);
    // Packets recorded since the last open() (across rotations).
    uint64_t packets() const { return packets_; }
    // Size of the current file as written so far (including what is still buffered).
    uint64_t file_bytes() const { return file_bytes_; }

    // By default every record is flushed to the file so a capture is complete even if the
    // process dies. Turn off for throughput and call flush() at a convenient point (the device
    // does once per engine-loop turn): records then cost no system call of their own.
    void set_flush_each(bool on) { flush_each_ = on; }
    // Writes buffered records to the file. Cheap no-op when nothing was recorded since the last
    // flush.
    void flush();
    bool flush_pending() const { return unflushed_; }

private:
    bool open_file(std::string* err);
    void close_file();
    void rotate();
    void record6(const Endpoint& src, const Endpoint& dst, const uint8_t* udp_payload,
                 size_t udp_len, const struct timeval& ts, IpMarks marks, bool udp_csum);
    bool room_for(size_t cap_len);  // an open file with room for the record (rotates)
    // Copies what fits of the payload into frame_ at `at` (after the headers) and records it.
    void dump(uint8_t* at, const uint8_t* udp_payload, size_t cap_len, size_t wire_len,
              const struct timeval& ts);

    pcap* pcap_ = nullptr;
    pcap_dumper* dumper_ = nullptr;
    std::unique_ptr<char[]> buf_;  // the open file's stdio buffer (outlives the FILE)
    std::string path_;
    uint64_t max_bytes_ = 0;
    uint64_t file_bytes_ = 0;  // size of the current file, counted as written
    bool flush_each_ = true;
    bool unflushed_ = false;  // records buffered since the last flush
    uint64_t packets_ = 0;
    std::array<uint8_t, kMaxFrame> frame_{};  // scratch for building one frame
};

}  // namespace uroce::net
