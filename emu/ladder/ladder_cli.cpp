// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce ladder [--from CAPTURE...] [--trace FILE] [--qp QPN...] [--time T0..T1] [--port P]
// [--band N] [--slice S] [--max-rows N] -o FILE.svg|FILE.html` (ladder_cli.h, docs/ladder.md).
#include "emu/ladder/ladder_cli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "emu/abi/runtime.h"
#include "emu/ladder/ladder_capture.h"
#include "emu/ladder/ladder_svg.h"
#include "emu/ladder/ladder_trace.h"
#include "net/headers.h"

namespace uroce::ladder {

namespace {

int usage() {
    std::fprintf(stderr,
                 "usage: uroce ladder [--from CAPTURE...] [--trace FILE] [--qp QPN...]\n"
                 "                    [--time T0..T1] [--port P] [--band N] [--slice S]\n"
                 "                    [--max-rows N]\n"
                 "                    -o FILE.svg|FILE.html\n"
                 "  CAPTURE: pcap files (default: the running devices' captures), merged by\n"
                 "  time; FILE: `uroce trace` output; T0..T1: seconds after the first packet\n"
                 "  (either side may be left out); --band N: runs of N or more packets of one\n"
                 "  kind become one band (6); --slice S: a band spans S seconds at most (0.1;\n"
                 "  0: no limit); --max-rows N: rows drawn at most (1300)\n");
    return 2;
}

// "1.5" seconds to microseconds; false if it is not a number.
bool seconds(const std::string& s, int64_t* us) {
    if (s.empty()) return true;
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s.c_str(), &end);
    if (errno || *end || end == s.c_str()) return false;
    *us = int64_t(v * 1e6);
    return true;
}

bool number(const std::string& s, uint64_t* v) {
    char* end = nullptr;
    errno = 0;
    *v = std::strtoull(s.c_str(), &end, 0);
    return !errno && !*end && end != s.c_str();
}

bool ends_with(const std::string& s, const char* tail) {
    size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

}  // namespace

int cmd_ladder(const std::vector<std::string>& args) {
    std::vector<std::string> from;
    std::string trace, output;
    Options opt;
    uint16_t port = net::kRoceUdpPort;
    if (const char* p = getenv("UROCE_UDP_PORT"); p && *p) port = uint16_t(std::atoi(p));
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto more = [&] { return i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0; };
        uint64_t v = 0;
        if (a == "--from") {
            if (!more()) return usage();
            while (more()) from.push_back(args[++i]);
        } else if (a == "--qp") {
            if (!more()) return usage();
            while (more()) {
                if (!number(args[++i], &v)) return usage();
                opt.qpns.push_back(uint32_t(v));
            }
        } else if (a == "--trace" && more()) {
            trace = args[++i];
        } else if (a == "-o" && i + 1 < args.size()) {
            output = args[++i];
        } else if (a == "--time" && more()) {
            const std::string& r = args[++i];
            size_t dots = r.find("..");
            if (dots == std::string::npos || !seconds(r.substr(0, dots), &opt.t0_us) ||
                !seconds(r.substr(dots + 2), &opt.t1_us))
                return usage();
        } else if (a == "--port" && more() && number(args[i + 1], &v) && v && v < 65536) {
            port = uint16_t(v);
            ++i;
        } else if (a == "--band" && more() && number(args[i + 1], &v) && v >= 2) {
            opt.min_band = uint32_t(v);
            ++i;
        } else if (a == "--slice" && more() && seconds(args[i + 1], &opt.slice_us)) {
            ++i;
        } else if (a == "--max-rows" && more() && number(args[i + 1], &v) && v) {
            opt.max_rows = uint32_t(v);
            ++i;
        } else {
            return usage();
        }
    }
    bool html = ends_with(output, ".html") || ends_with(output, ".htm");
    if (output.empty() || (!html && !ends_with(output, ".svg"))) return usage();
    if (from.empty()) {
        for (const auto& d : abi::list_devices())
            if (!d.pcap.empty()) from.push_back(d.pcap);
        if (from.empty()) {
            std::fprintf(stderr, "uroce: ladder: no --from, and no running device captures\n");
            return 2;
        }
    }
    if (from.size() > 0x7fff) return usage();

    std::vector<Sighting> sightings;
    AddressBook book;
    for (size_t f = 0; f < from.size(); ++f) {
        CaptureStats st;
        std::string err;
        if (!read_capture(from[f], uint16_t(f), port, &book, &sightings, &st, &err)) {
            std::fprintf(stderr, "uroce: ladder: %s\n", err.c_str());
            return 1;
        }
        std::printf("%s: %zu records, %zu RoCEv2 packets to port %u\n", from[f].c_str(), st.records,
                    st.roce, port);
    }
    Ladder lad;
    lad.addr_names = std::move(book.names);
    lad.addr_keys = std::move(book.keys);
    build_packets(sightings, from.size(), opt, &lad);
    std::vector<Sighting>().swap(sightings);
    if (!trace.empty()) {
        TraceStats ts;
        std::string err;
        if (!apply_trace(trace, &lad, &ts, &err)) {
            std::fprintf(stderr, "uroce: ladder: --trace %s\n", err.c_str());
            return 1;
        }
        std::string devs;
        for (const auto& d : ts.devices) devs += " " + d;
        std::printf("%s: %zu lines, %zu on lanes; devices:%s\n", trace.c_str(), ts.lines, ts.events,
                    devs.empty() ? " none" : devs.c_str());
    }
    build_rows(opt, &lad);
    std::string out = html ? render_html(lad) : render_svg(lad);
    FILE* f = std::fopen(output.c_str(), "w");
    if (!f || std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "uroce: ladder: %s: %s\n", output.c_str(), std::strerror(errno));
        return 1;
    }
    std::printf(
        "%s: %zu lanes, %zu packets (%zu retransmissions, %zu not delivered) in %zu "
        "rows%s, %zu bytes\n",
        output.c_str(), lad.lanes.size(), lad.packets.size(), lad.retransmissions, lad.short_arrows,
        lad.rows.size(),
        lad.packets_not_drawn ? " (row limit reached: see the picture's last line)" : "",
        out.size());
    return 0;
}

}  // namespace uroce::ladder
