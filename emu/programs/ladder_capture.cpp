// pcap records to Sightings (ladder_capture.h).
#include "emu/programs/ladder_capture.h"

#include <pcap/pcap.h>

#include "emu/cm/cm_mad.h"
#include "net/headers.h"
#include "net/icrc.h"

namespace uroce::ladder {

namespace {
uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
}  // namespace

bool sighting_from_payload(const uint8_t* udp, size_t len, const uint8_t* ip, size_t ip_len,
                           Sighting* out) {
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
    s.icrc_ok = ip ? net::icrc_check_ipv4(ip, ip_len) : true;
    return true;
}

bool read_capture(const std::string& path, uint16_t file, uint16_t port, std::vector<Sighting>* out,
                  CaptureStats* stats, std::string* err) {
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
        bool ok = cap >= l2 + 28;
        if (ok && l2 && be16(d + l2 - 2) == 0x86dd) {  // EtherType / SLL protocol: IPv6
            ++stats->ipv6;
            continue;
        }
        if (ok && l2) ok = be16(d + l2 - 2) == 0x0800;  // IPv4
        const uint8_t* ip = d + l2;
        size_t ihl = ok ? size_t(ip[0] & 0x0f) * 4 : 0;
        ok = ok && (ip[0] >> 4) == 4 && ihl >= 20 && ip[9] == 17 && cap >= l2 + ihl + 8;
        const uint8_t* udp = ip + ihl;
        ok = ok && be16(udp + 2) == port;
        size_t ip_len = ok ? be16(ip + 2) : 0;
        ok = ok && ip_len >= ihl + 8;
        Sighting s;
        if (ok) {
            // A truncated record (caplen < len) still decodes its headers; its ICRC cannot
            // be checked.
            bool whole = cap >= l2 + ip_len;
            size_t udp_len = (whole ? ip_len : cap - l2) - ihl - 8;
            ok = sighting_from_payload(udp + 8, udp_len, whole ? ip : nullptr, ip_len, &s);
        }
        if (!ok) {
            ++stats->not_roce;
            continue;
        }
        s.t_us = int64_t(h->ts.tv_sec) * 1000000 + h->ts.tv_usec;
        s.src = be32(ip + 12);
        s.dst = be32(ip + 16);
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
