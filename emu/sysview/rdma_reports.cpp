// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma res`, `rdma res show qp` and `rdma statistic` (iproute2) for uroce's devices under
// `uroce run`: the kernel answers them over NETLINK_RDMA from its restrack and the drivers'
// hw counters, which know no uroce device; here each device reports its objects and counters
// (the `uroce res` dump) and they are printed as iproute2 prints the kernel's, text and JSON.
// docs/system-view.md, "rdma dev and rdma link".
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/protocol.h"
#include "emu/abi/runtime.h"
#include "emu/sysview/rdma_out.h"
#include "emu/sysview/rdma_tool.h"

namespace uroce::rdmatool {

namespace {

// One line of the dump as its first word and its key/value pairs (an object's number, which
// some lines put first, under the key "id").
struct DumpLine {
    std::string kind;
    std::map<std::string, std::string> v;
};

std::vector<DumpLine> dump_of(const std::string& dev) {
    std::vector<DumpLine> out;
    std::string text;
    if (abi::simple_request(dev, abi::Op::kDump, &text) != 0) return out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream w(line);
        DumpLine d;
        w >> d.kind;
        std::string k, val;
        // "qp 0x11 type RC ...": the object's number first; "counts sessions 1 ...": pairs.
        if (w >> k && !k.empty() && std::isdigit(static_cast<unsigned char>(k[0])))
            d.v["id"] = k;
        else if (w >> val)
            d.v[k] = val;
        while (w >> k >> val) d.v[k] = val;
        out.push_back(d);
    }
    return out;
}

unsigned number(const std::string& s) {
    return unsigned(std::stoul(s.empty() ? "0" : s, nullptr, 0));
}

// The process's name, as iproute2 reads it (/proc/PID/comm).
std::string comm_of(const std::string& pid) {
    std::ifstream f("/proc/" + pid + "/comm");
    std::string c;
    std::getline(f, c);
    return c;
}

void qp_rows(const std::string& dev, unsigned idx, Out* out) {
    for (const DumpLine& d : dump_of(dev)) {
        if (d.kind != "qp") continue;
        auto at = [&](const char* k) {
            auto it = d.v.find(k);
            return it == d.v.end() ? std::string() : it->second;
        };
        const std::string type = at("type");
        Row row{
            {"ifindex", std::to_string(idx), true}, {"ifname", dev, false}, {"port", "1", true}};
        std::string text = "link " + dev + "/1 ";
        auto num = [&](const char* key, unsigned v) {
            row.push_back({key, std::to_string(v), true});
            text += std::string(key) + " " + std::to_string(v) + " ";
        };
        auto str = [&](const char* key, const std::string& v) {
            row.push_back({key, v, false});
            text += std::string(key) + " " + v + " ";
        };
        // As the kernel's nldev: the remote QP and receive PSN of RC and UC QPs, the path
        // migration state of connected ones.
        bool connected = type == "RC" || type == "UC";
        num("lqpn", number(at("id")));
        if (connected) num("rqpn", number(at("dest_qpn")));
        str("type", type);
        str("state", at("state"));
        if (connected) num("rq-psn", number(at("epsn")));
        num("sq-psn", number(at("sq_psn")));
        if (connected || type == "XRC_INI" || type == "XRC_TGT") str("path-mig-state", "MIGRATED");
        num("pdn", number(at("pd")));
        num("pid", number(at("pid")));
        std::string comm = comm_of(at("pid"));
        if (!comm.empty()) str("comm", comm);
        text.pop_back();
        out->rows.push_back(row);
        out->lines.push_back(text);
    }
}

// The summary: the count of each kind of object, in the kernel's order.
void summary_rows(const std::string& dev, unsigned idx, Out* out) {
    std::map<std::string, std::string> counts;
    unsigned cm_ids = 0;
    for (const DumpLine& d : dump_of(dev)) {
        if (d.kind == "counts") counts = d.v;
        if (d.kind == "cm" && d.v.count("ids")) cm_ids = number(d.v.at("ids"));
    }
    Row row{{"ifindex", std::to_string(idx), true}, {"ifname", dev, false}};
    std::string text = std::to_string(idx) + ": " + dev + ": ";
    const std::pair<const char*, std::string> kinds[] = {
        {"pd", counts["pds"]},  {"cq", counts["cqs"]},
        {"qp", counts["qps"]},  {"cm_id", std::to_string(cm_ids)},
        {"mr", counts["mrs"]},  {"ctx", counts["sessions"]},
        {"srq", counts["srqs"]}};
    for (const auto& [k, v] : kinds) {
        std::string n = v.empty() ? "0" : v;
        row.push_back({k, n, true});
        text += std::string(k) + " " + n + " ";
    }
    text.pop_back();
    out->rows.push_back(row);
    out->lines.push_back(text);
}

// rxe's port counters that a device reports with the same meaning: every packet sent and
// received (rxe_xmit_packet, rxe_rcv), and link_downed (a device's link never goes down).
void stat_rows(const std::string& dev, Out* out) {
    std::string sent = "0", rcvd = "0";
    for (const DumpLine& d : dump_of(dev))
        if (d.kind == "counters" && d.v.count("tx_pkts") && d.v.count("rx_pkts")) {
            sent = d.v.at("tx_pkts");
            rcvd = d.v.at("rx_pkts");
        }
    Row row{{"ifname", dev, false}, {"port", "1", true}};
    std::string text = "link " + dev + "/1";
    for (const auto& [k, v] : {std::pair<const char*, std::string>{"sent_pkts", sent},
                               {"rcvd_pkts", rcvd},
                               {"link_downed", "0"}}) {
        row.push_back({k, v, true});
        text += std::string(" ") + k + " " + v;
    }
    out->rows.push_back(row);
    out->lines.push_back(text);
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
