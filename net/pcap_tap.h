// Writes RoCEv2 traffic to a pcap file that Wireshark/tshark dissect as InfiniBand over UDP 4791.
// uroce exchanges UDP payloads through sockets (and loops same-host traffic internally), so
// there are no real frames to capture: the tap synthesizes Ethernet + IPv4 + UDP around each
// payload, using the same IPv4/UDP header the ICRC is computed over (see icrc.h), so the
// recorded ICRC verifies.
#pragma once

#include <sys/time.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

struct pcap;
struct pcap_dumper;

namespace uroce::net {

class PcapTap {
public:
    // Largest frame recorded whole: Ethernet + IPv4 + UDP + 4096 MTU payload + headroom for the
    // RoCE headers and ICRC. Longer payloads are recorded truncated (caplen < len).
    static constexpr size_t kMaxFrame = 14 + 20 + 8 + 4096 + 64;

    PcapTap() = default;
    ~PcapTap();
    PcapTap(const PcapTap&) = delete;
    PcapTap& operator=(const PcapTap&) = delete;

    // Create/truncate `path`. max_bytes == 0: unlimited. Otherwise, before a packet would take
    // the file past max_bytes, close it, rename it to path + ".1" (replacing an older one) and
    // start a new file, so at most about 2 * max_bytes stay on disk. Closes any file already open.
    bool open(const std::string& path, uint64_t max_bytes, std::string* err);
    void close();
    bool is_open() const;

    // Record one RoCEv2 UDP payload (BTH .. ICRC) with synthesized framing: Ethernet with MACs
    // 02:00:<ip bytes>, IPv4 (ID 0, DF, TTL 64, valid header checksum), UDP (checksum 0).
    // Addresses in network byte order, ports in host order. Thread safe; no allocation.
    void record(uint32_t src_ip_be, uint16_t sport, uint32_t dst_ip_be, uint16_t dport,
                const uint8_t* udp_payload, size_t udp_len, const struct timeval& ts);

    // Packets recorded since construction (across opens and rotations).
    uint64_t packets() const { return packets_.load(std::memory_order_relaxed); }

    // By default every record is flushed to the file so a capture is complete even if the
    // process dies; turn off for throughput and call flush() from a timer instead.
    void set_flush_each(bool on);
    void flush();

private:
    bool open_file_locked(std::string* err);
    void close_file_locked();
    void rotate_locked();

    mutable std::mutex mu_;
    pcap* pcap_ = nullptr;
    pcap_dumper* dumper_ = nullptr;
    std::string path_;
    uint64_t max_bytes_ = 0;
    uint64_t file_bytes_ = 0;  // size of the current file, counted as written
    bool flush_each_ = true;
    std::atomic<uint64_t> packets_{0};
    std::array<uint8_t, kMaxFrame> frame_{};  // scratch for building one frame
};

}  // namespace uroce::net
