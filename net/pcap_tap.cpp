// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/pcap_tap.h"

#include <pcap/pcap.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "net/byteorder.h"

namespace uroce::net {
namespace {

constexpr size_t kEthLen = 14;
constexpr size_t kIpv4Len = 20;
constexpr size_t kUdpLen = 8;
constexpr size_t kFileHeaderLen = 24;    // pcap global header
constexpr size_t kRecordHeaderLen = 16;  // pcap per-packet header

// Locally administered unicast MAC derived from the IPv4 address, so frames between two uroce
// devices are stable and recognizable in a capture.
void put_mac(uint8_t* p, uint32_t ip_be) {
    p[0] = 0x02;
    p[1] = 0x00;
    std::memcpy(p + 2, &ip_be, 4);
}

// A UDP header, checksum zero: the caller puts one in where the packet had one.
void put_udp(uint8_t* udp, uint16_t sport, uint16_t dport, uint16_t len) {
    store_be16(udp, sport);
    store_be16(udp + 2, dport);
    store_be16(udp + 4, len);
    store_be16(udp + 6, 0);
}

uint16_t ipv4_checksum(const uint8_t* h) {
    uint32_t sum = 0;
    for (size_t i = 0; i < kIpv4Len; i += 2) sum += load_be16(h + i);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
}

// The UDP checksum (RFC 768) over the IPv4 pseudo-header, the UDP header (checksum 0) and the
// payload, as the sender's kernel computes it; 0xffff for a sum of 0, which means "none".
// The pseudo header's `addrs` bytes of addresses, then protocol, UDP header and payload.
uint16_t udp_sum(const uint8_t* addrs, size_t addr_bytes, const uint8_t* udp,
                 const uint8_t* payload, size_t len) {
    uint64_t sum = 0;
    for (size_t i = 0; i < addr_bytes; i += 2) sum += load_be16(addrs + i);
    sum += 17 + load_be16(udp + 4);  // protocol, UDP length
    for (size_t i = 0; i < kUdpLen; i += 2) sum += load_be16(udp + i);
    size_t i = 0;
    for (; i + 1 < len; i += 2) sum += load_be16(payload + i);
    if (i < len) sum += uint32_t(payload[i]) << 8;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const auto c = static_cast<uint16_t>(~sum);
    return c ? c : 0xffff;
}

uint16_t udp_checksum(const uint8_t* ip, const uint8_t* udp, const uint8_t* payload, size_t len) {
    return udp_sum(ip + 12, 8, udp, payload, len);
}

// The same over the IPv6 pseudo header (RFC 8200 8.1).
uint16_t udp6_checksum(const uint8_t* ip6, const uint8_t* udp, const uint8_t* payload, size_t len) {
    return udp_sum(ip6 + 8, 32, udp, payload, len);
}

}  // namespace

PcapTap::~PcapTap() { close(); }

bool PcapTap::open(const std::string& path, uint64_t max_bytes, std::string* err) {
    close_file();
    if (pcap_ == nullptr) {
        pcap_ = pcap_open_dead(DLT_EN10MB, static_cast<int>(kMaxFrame));
        if (pcap_ == nullptr) {
            if (err) *err = "pcap_open_dead failed";
            errno = ENOMEM;
            return false;
        }
    }
    if (!buf_) buf_ = std::make_unique<char[]>(kFileBuffer);
    path_ = path;
    max_bytes_ = max_bytes;
    packets_ = 0;
    return open_file(err);
}

bool PcapTap::open_file(std::string* err) {
    // Our own FILE, so its buffer is large enough to hold many records between flushes.
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) {
        const int e = errno;
        if (err) *err = "cannot create " + path_ + ": " + std::strerror(e);
        errno = e;
        return false;
    }
    std::setvbuf(f, buf_.get(), _IOFBF, kFileBuffer);
    dumper_ = pcap_dump_fopen(pcap_, f);
    if (dumper_ == nullptr) {
        const int e = errno ? errno : EIO;
        if (err) *err = "pcap_dump_fopen(" + path_ + "): " + pcap_geterr(pcap_);
        std::fclose(f);
        errno = e;
        return false;
    }
    file_bytes_ = kFileHeaderLen;
    // Make the file valid (header present) immediately, even before the first packet.
    pcap_dump_flush(dumper_);
    unflushed_ = false;
    return true;
}

void PcapTap::close_file() {
    if (dumper_ != nullptr) {
        pcap_dump_close(dumper_);  // flushes and closes the FILE
        dumper_ = nullptr;
    }
    unflushed_ = false;
}

void PcapTap::close() {
    close_file();
    if (pcap_ != nullptr) {
        pcap_close(pcap_);
        pcap_ = nullptr;
    }
}

bool PcapTap::is_open() const { return dumper_ != nullptr; }

void PcapTap::flush() {
    if (!unflushed_) return;
    unflushed_ = false;
    if (dumper_ != nullptr) pcap_dump_flush(dumper_);
}

void PcapTap::rotate() {
    close_file();
    const std::string old = path_ + ".1";
    std::rename(path_.c_str(), old.c_str());  // replaces an older .1 atomically
    // If the new file can't be created the tap just stops recording (is_open() turns false);
    // a debugging aid must not take the device down.
    open_file(nullptr);
}

void PcapTap::record(uint32_t src_ip_be, uint16_t sport, uint32_t dst_ip_be, uint16_t dport,
                     const uint8_t* udp_payload, size_t udp_len, const struct timeval& ts,
                     uint16_t ip_id, bool df, IpMarks marks, bool udp_csum) {
    const size_t wire_len = kEthLen + kIpv4Len + kUdpLen + udp_len;
    const size_t cap_len = std::min(wire_len, kMaxFrame);
    if (!room_for(cap_len)) return;

    uint8_t* f = frame_.data();
    put_mac(f, dst_ip_be);
    put_mac(f + 6, src_ip_be);
    store_be16(f + 12, 0x0800);  // IPv4

    // Same header icrc_compute() assumes (but for the ID, icrc_id.h); lengths saturate for
    // (impossible) oversize payloads.
    uint8_t* ip = f + kEthLen;
    const size_t ip_total = std::min<size_t>(kIpv4Len + kUdpLen + udp_len, 0xffff);
    ip[0] = 0x45;
    ip[1] = marks.tos;
    store_be16(ip + 2, static_cast<uint16_t>(ip_total));
    store_be16(ip + 4, ip_id);
    store_be16(ip + 6, df ? 0x4000 : 0);
    ip[8] = marks.ttl;
    ip[9] = 17;
    store_be16(ip + 10, 0);
    std::memcpy(ip + 12, &src_ip_be, 4);
    std::memcpy(ip + 16, &dst_ip_be, 4);
    store_be16(ip + 10, ipv4_checksum(ip));

    uint8_t* udp = ip + kIpv4Len;
    put_udp(udp, sport, dport, static_cast<uint16_t>(std::min<size_t>(kUdpLen + udp_len, 0xffff)));
    // No UDP checksum, as rxe and RoCE NICs send it, unless the packet had one (GSO trains).
    if (udp_csum && udp_payload != nullptr)
        store_be16(udp + 6, udp_checksum(ip, udp, udp_payload, udp_len));

    dump(udp + kUdpLen, udp_payload, cap_len, wire_len, ts);
}

bool PcapTap::room_for(size_t cap_len) {
    if (dumper_ == nullptr) return false;
    if (max_bytes_ != 0 && file_bytes_ > kFileHeaderLen &&
        file_bytes_ + kRecordHeaderLen + cap_len > max_bytes_)
        rotate();
    return dumper_ != nullptr;
}

void PcapTap::dump(uint8_t* at, const uint8_t* udp_payload, size_t cap_len, size_t wire_len,
                   const struct timeval& ts) {
    const size_t copy = cap_len - size_t(at - frame_.data());
    if (copy > 0 && udp_payload != nullptr) std::memcpy(at, udp_payload, copy);
    pcap_pkthdr h{};
    h.ts = ts;
    h.caplen = static_cast<bpf_u_int32>(cap_len);
    h.len = static_cast<bpf_u_int32>(wire_len);
    pcap_dump(reinterpret_cast<u_char*>(dumper_), &h, frame_.data());
    if (flush_each_)
        pcap_dump_flush(dumper_);
    else
        unflushed_ = true;
    file_bytes_ += kRecordHeaderLen + cap_len;
    ++packets_;
}

void PcapTap::record(const Endpoint& src, const Endpoint& dst, const uint8_t* udp_payload,
                     size_t udp_len, const struct timeval& ts, uint16_t ip_id, bool df,
                     IpMarks marks, bool udp_csum) {
    if (src.is_v6()) return record6(src, dst, udp_payload, udp_len, ts, marks, udp_csum);
    record(src.v4_be(), src.port(), dst.v4_be(), dst.port(), udp_payload, udp_len, ts, ip_id, df,
           marks, udp_csum);
}

void PcapTap::record6(const Endpoint& src, const Endpoint& dst, const uint8_t* udp_payload,
                      size_t udp_len, const struct timeval& ts, IpMarks marks, bool udp_csum) {
    constexpr size_t kIpv6Len = 40;
    const size_t wire_len = kEthLen + kIpv6Len + kUdpLen + udp_len;
    const size_t cap_len = std::min(wire_len, kMaxFrame);
    if (!room_for(cap_len)) return;
    uint8_t* f = frame_.data();
    uint32_t tail;
    std::memcpy(&tail, dst.addr6() + 12, 4);
    put_mac(f, tail);
    std::memcpy(&tail, src.addr6() + 12, 4);
    put_mac(f + 6, tail);
    store_be16(f + 12, 0x86dd);  // IPv6
    uint8_t* ip = f + kEthLen;
    ip[0] = uint8_t(0x60 | marks.tos >> 4);  // version, traffic class, flow label 0
    ip[1] = uint8_t(marks.tos << 4);
    ip[2] = ip[3] = 0;
    const auto plen = static_cast<uint16_t>(std::min<size_t>(kUdpLen + udp_len, 0xffff));
    store_be16(ip + 4, plen);
    ip[6] = 17;
    ip[7] = marks.ttl;
    std::memcpy(ip + 8, src.addr6(), 16);
    std::memcpy(ip + 24, dst.addr6(), 16);
    uint8_t* udp = ip + kIpv6Len;
    put_udp(udp, src.port(), dst.port(), plen);
    if (udp_csum && udp_payload != nullptr)
        store_be16(udp + 6, udp6_checksum(ip, udp, udp_payload, udp_len));
    dump(udp + kUdpLen, udp_payload, cap_len, wire_len, ts);
}

}  // namespace uroce::net
