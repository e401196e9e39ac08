// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// pcap records to Sightings (ladder_capture.h).
#include "emu/ladder/ladder_capture.h"

#include <arpa/inet.h>
#include <pcap/pcap.h>

#include <cstring>

#include "emu/cm/cm_mad.h"
#include "net/headers.h"
#include "net/icrc.h"

namespace uroce::ladder {

namespace {
uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
}  // namespace

uint32_t AddressBook::id(const uint8_t* addr, bool v6) {
    std::array<uint8_t, 16> k{};
    if (v6) {
        std::memcpy(k.data(), addr, 16);
    } else {
        k[10] = k[11] = 0xff;
        std::memcpy(k.data() + 12, addr, 4);
    }
    auto [it, fresh] = ids.try_emplace(k, uint32_t(keys.size()));
    if (fresh) {
        char b[INET6_ADDRSTRLEN];
        inet_ntop(v6 ? AF_INET6 : AF_INET, addr, b, sizeof b);
        keys.push_back(k);
        names.push_back(b);
    }
    return it->second;
}

bool sighting_from_payload(const uint8_t* udp, size_t len, const uint8_t* ip, size_t ip_len,
                           bool v6, Sighting* out) {
    net::Packet p;
    if (net::decode(udp, len, p) != net::DropReason::kNone) return false;
    Sighting& s = *out;
    s.opcode = p.bth.opcode;
    s.dqpn = p.bth.dqpn;
    s.psn = p.bth.psn;
    s.ackreq = p.bth.ackreq;
    s.len = uint32_t(len);
    s.payload_len = p.payload_len;
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    s.has_aeth = info && (info->hdrs & net::kAETH);
    s.syndrome = s.has_aeth ? p.aeth.syndrome : 0;
    s.msn = s.has_aeth ? p.aeth.msn : 0;
    s.src_qpn = info && (info->hdrs & net::kDETH) ? p.deth.src_qpn : 0;
    s.srqn = info && (info->hdrs & net::kXRCETH) ? p.xrc.srqn : 0;
    s.mad_attr = 0;
    // QP1's MADs of the CM class: the attribute says which message (REQ, REP, ...).
    if (s.dqpn == emu::cm::kGsiQpn && p.payload_len >= emu::cm::kMadHdrLen &&
        p.payload[1] == emu::cm::kMgmtClassCm)
        s.mad_attr = be16(p.payload + 16);
    s.icrc_ok =
        ip ? (v6 ? net::icrc_check_ipv6(ip, ip_len) : net::icrc_check_ipv4(ip, ip_len)) : true;
    return true;
}

bool read_capture(const std::string& path, uint16_t file, uint16_t port, AddressBook* book,
                  std::vector<Sighting>* out, CaptureStats* stats, std::string* err) {
    char ebuf[PCAP_ERRBUF_SIZE] = {};
    pcap_t* pc =
        pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_MICRO, ebuf);
    if (!pc) {
        *err = path + ": " + ebuf;
        return false;
    }
    int link = pcap_datalink(pc);
    if (link != DLT_EN10MB && link != DLT_RAW && link != DLT_LINUX_SLL) {
        *err = path + ": link type " + std::to_string(link) + " (Ethernet or raw IP expected)";
        pcap_close(pc);
        return false;
    }
    size_t l2 = link == DLT_EN10MB ? 14 : link == DLT_LINUX_SLL ? 16 : 0;
    pcap_pkthdr* h;
    const u_char* d;
    int r;
    while ((r = pcap_next_ex(pc, &h, &d)) == 1) {
        ++stats->records;
        size_t cap = h->caplen;
        const uint8_t* ip = d + l2;
        // The EtherType (SLL protocol), or a raw packet's IP version.
        bool v6 = cap > l2 && (l2 ? be16(d + l2 - 2) == 0x86dd : (ip[0] >> 4) == 6);
        bool ok = cap >= l2 + (v6 ? 48 : 28) && (!l2 || v6 || be16(d + l2 - 2) == 0x0800);
        size_t ihl = 0, ip_len = 0;
        if (ok && v6) {  // no extension headers: what uroce and rxe send
            ihl = 40;
            ok = (ip[0] >> 4) == 6 && ip[6] == 17;
            ip_len = 40 + size_t(be16(ip + 4));
        } else if (ok) {
            ihl = size_t(ip[0] & 0x0f) * 4;
            ok = (ip[0] >> 4) == 4 && ihl >= 20 && ip[9] == 17 && cap >= l2 + ihl + 8;
            ip_len = be16(ip + 2);
        }
        const uint8_t* udp = ip + ihl;
        ok = ok && ip_len >= ihl + 8 && be16(udp + 2) == port;
        Sighting s;
        if (ok) {
            // A truncated record (caplen < len) still decodes its headers; its ICRC cannot
            // be checked.
            bool whole = cap >= l2 + ip_len;
            size_t udp_len = (whole ? ip_len : cap - l2) - ihl - 8;
            ok = sighting_from_payload(udp + 8, udp_len, whole ? ip : nullptr, ip_len, v6, &s);
        }
        if (!ok) {
            ++stats->not_roce;
            continue;
        }
        s.t_us = int64_t(h->ts.tv_sec) * 1000000 + h->ts.tv_usec;
        s.src = book->id(ip + (v6 ? 8 : 12), v6);
        s.dst = book->id(ip + (v6 ? 24 : 16), v6);
        s.sport = be16(udp);
        s.file = file;
        out->push_back(s);
        ++stats->roce;
    }
    if (r == PCAP_ERROR) {
        *err = path + ": " + pcap_geterr(pc);
        pcap_close(pc);
        return false;
    }
    pcap_close(pc);
    return true;
}

}  // namespace uroce::ladder
