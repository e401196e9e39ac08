// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma res`, `rdma res show qp` and `rdma statistic` (iproute2) for uroce's devices under
// `uroce run`: the kernel answers them over NETLINK_RDMA from its restrack and the drivers'
// hw counters, which know no uroce device; here each device reports its objects and counters
// (the `uroce res` dump) and they are printed as iproute2 prints the kernel's, text and JSON.
// docs/system-view.md, "rdma dev and rdma link".
#include <fstream>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/protocol.h"
#include "emu/abi/runtime.h"
#include "emu/resgraph/res_graph.h"
#include "emu/sysview/rdma_out.h"
#include "emu/sysview/rdma_tool.h"

namespace uroce::rdmatool {

namespace {

using DumpLine = std::vector<std::string>;

// The device's dump (the `uroce res` text), a line of words each.
std::vector<DumpLine> dump_of(const std::string& dev) {
    std::string text;
    if (abi::simple_request(dev, abi::Op::kDump, &text) != 0) return {};
    return resgraph::parse_dump(dev, text).lines;
}

// A number of the dump ("17", "0x11") in decimal, as iproute2 prints it.
std::string decimal(const std::string& s) {
    return std::to_string(std::stoul(s.empty() ? "0" : s, nullptr, 0));
}

// The process's name, as iproute2 reads it (/proc/PID/comm).
std::string comm_of(const std::string& pid) {
    std::ifstream f("/proc/" + pid + "/comm");
    std::string c;
    std::getline(f, c);
    return c;
}

// A device's row as iproute2 starts one: its index (JSON only) and name, and "link DEV/1"
// for a port's.
Line device_line(const std::string& dev, unsigned idx, bool port) {
    Line l;
    l.row = {{"ifindex", std::to_string(idx), true}, {"ifname", dev, false}};
    if (port) l.row.push_back({"port", "1", true});
    l.text = port ? "link " + dev + "/1" : std::to_string(idx) + ": " + dev + ":";
    return l;
}

void qp_rows(const std::string& dev, unsigned idx, Out* out) {
    for (const DumpLine& w : dump_of(dev)) {
        if (w[0] != "qp") continue;
        auto at = [&](const char* k) { return resgraph::dump_field(w, k); };
        const std::string type = at("type");
        Line l = device_line(dev, idx, true);
        // As the kernel's nldev: the remote QP and receive PSN of RC and UC QPs, the path
        // migration state of connected ones.
        bool connected = type == "RC" || type == "UC";
        l.num("lqpn", decimal(w[1]));
        if (connected) l.num("rqpn", decimal(at("dest_qpn")));
        l.str("type", type);
        l.str("state", at("state"));
        if (connected) l.num("rq-psn", decimal(at("epsn")));
        l.num("sq-psn", decimal(at("sq_psn")));
        if (connected || type == "XRC_INI" || type == "XRC_TGT")
            l.str("path-mig-state", "MIGRATED");
        l.num("pdn", decimal(at("pd")));
        l.num("pid", decimal(at("pid")));
        if (std::string comm = comm_of(at("pid")); !comm.empty()) l.str("comm", comm);
        out->push(std::move(l));
    }
}

// The summary: the count of each kind of object, in the kernel's order.
void summary_rows(const std::string& dev, unsigned idx, Out* out) {
    DumpLine counts, cm;
    for (DumpLine& w : dump_of(dev)) {
        if (w[0] == "counts")
            counts = std::move(w);
        else if (w[0] == "cm")
            cm = std::move(w);
    }
    Line l = device_line(dev, idx, false);
    const std::pair<const char*, std::string> kinds[] = {
        {"pd", resgraph::dump_field(counts, "pds")},
        {"cq", resgraph::dump_field(counts, "cqs")},
        {"qp", resgraph::dump_field(counts, "qps")},
        {"cm_id", resgraph::dump_field(cm, "ids")},
        {"mr", resgraph::dump_field(counts, "mrs")},
        {"ctx", resgraph::dump_field(counts, "sessions")},
        {"srq", resgraph::dump_field(counts, "srqs")}};
    for (const auto& [k, v] : kinds) l.num(k, v.empty() ? "0" : v);
    out->push(std::move(l));
}

// rxe's port counters that a device reports with the same meaning: every packet sent and
// received (rxe_xmit_packet, rxe_rcv), and link_downed (a device's link never goes down).
void stat_rows(const std::string& dev, Out* out) {
    std::string sent = "0", rcvd = "0";
    for (const DumpLine& w : dump_of(dev))
        if (w[0] == "counters") {
            sent = resgraph::dump_field(w, "tx_pkts");
            rcvd = resgraph::dump_field(w, "rx_pkts");
        }
    Line l;
    l.row = {{"ifname", dev, false}, {"port", "1", true}};
    l.text = "link " + dev + "/1";
    l.num("sent_pkts", sent);
    l.num("rcvd_pkts", rcvd);
    l.num("link_downed", "0");
    out->push(std::move(l));
}

}  // namespace

int statistic(const std::vector<std::string>& words, bool json, bool pretty) {
    size_t i = 0;
    if (i < words.size() && (std::string("show").rfind(words[i], 0) == 0 ||
                             std::string("list").rfind(words[i], 0) == 0))
        ++i;
    if (i < words.size() && words[i] == "link") ++i;
    std::string only, port;
    if (i < words.size()) {
        only = words[i].substr(0, words[i].find('/'));
        if (words[i].find('/') != std::string::npos) port = words[i].substr(words[i].find('/') + 1);
        ++i;
    }
    if (i < words.size() || (!port.empty() && port != "1")) return -1;  // qp, mr, mode, set...
    Out out;
    out.json = json;
    out.pretty = pretty;
    bool found = only.empty();
    for (const auto& d : abi::list_devices()) {
        if (!only.empty() && d.name != only) continue;
        found = true;
        stat_rows(d.name, &out);
    }
    if (!found) {
        std::fprintf(stderr, "Wrong device name\n");
        return 1;
    }
    out.print();
    return 0;
}

int res(const std::vector<std::string>& words, bool json, bool pretty) {
    size_t i = 0;
    if (i < words.size() && std::string("show").rfind(words[i], 0) == 0) ++i;
    std::string kind = i < words.size() ? words[i++] : "";
    if (!kind.empty() && kind != "qp") return -1;  // cq, mr, pd, cm_id, ...: the host's tool
    std::string only;                              // "link DEV[/PORT]"
    if (i + 1 < words.size() && words[i] == "link")
        only = words[i + 1].substr(0, words[i + 1].find('/'));
    else if (i < words.size())
        return -1;  // filters this does not take
    Out out;
    out.json = json;
    out.pretty = pretty;
    for (const auto& d : abi::list_devices()) {
        if (!only.empty() && d.name != only) continue;
        unsigned idx = device_index(d.name);
        if (kind.empty())
            summary_rows(d.name, idx, &out);
        else
            qp_rows(d.name, idx, &out);
    }
    out.print();
    return 0;
}

}  // namespace uroce::rdmatool
