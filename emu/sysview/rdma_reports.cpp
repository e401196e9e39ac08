// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma res`, `rdma res show qp|cm_id|cq|pd|mr|ctx|srq` and `rdma statistic` (iproute2) for uroce's
// devices under `uroce run`: the kernel answers them over NETLINK_RDMA from its restrack and the
// drivers' hw counters, which know no uroce device; here each device reports its objects and
// counters (the `uroce res` dump) and they are printed as iproute2 prints the kernel's, text and
// JSON. docs/system-view.md, "rdma dev and rdma link".
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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

// How iproute2 starts a row: the summary's "IDX: DEV:", print_dev's "dev DEV" (PDs, CQs,
// MRs, contexts, SRQs) or print_link's "link DEV/1" (QPs, CM ids); the JSON always has the
// index and name, and the port for a link's.
enum class Head { kSummary, kDev, kLink };

Line device_line(const std::string& dev, unsigned idx, Head head) {
    Line l;
    l.row = {{"ifindex", std::to_string(idx), true}, {"ifname", dev, false}};
    if (head == Head::kLink) l.row.push_back({"port", "1", true});
    l.text = head == Head::kLink  ? "link " + dev + "/1"
             : head == Head::kDev ? "dev " + dev
                                  : std::to_string(idx) + ": " + dev + ":";
    return l;
}

// The owner's pid and name, as the kernel reports a user object's.
void owner_fields(Line& l, const std::string& pid) {
    l.num("pid", decimal(pid));
    if (std::string comm = comm_of(pid); !comm.empty()) l.str("comm", comm);
}

// A row of each kind from the device's dump line `w` (`dump`: the whole dump, for what
// other lines say). False: a line the kernel would not list.
using Dump = std::vector<DumpLine>;

bool qp_row(const DumpLine& w, const Dump&, Line& l) {
    auto at = [&](const char* k) { return resgraph::dump_field(w, k); };
    const std::string type = at("type");
    // As the kernel's nldev: the remote QP and receive PSN of RC and UC QPs, the path
    // migration state of connected ones.
    bool connected = type == "RC" || type == "UC";
    l.num("lqpn", decimal(w[1]));
    if (connected) l.num("rqpn", decimal(at("dest_qpn")));
    l.str("type", type);
    l.str("state", at("state"));
    if (connected) l.num("rq-psn", decimal(at("epsn")));
    l.num("sq-psn", decimal(at("sq_psn")));
    if (connected || type == "XRC_INI" || type == "XRC_TGT") l.str("path-mig-state", "MIGRATED");
    l.num("pdn", decimal(at("pd")));
    owner_fields(l, at("pid"));
    return true;
}

// Keys and addresses the kernel shows only to a caller with CAP_NET_ADMIN.
bool admin() { return geteuid() == 0; }

std::string hex(const std::string& s) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%lx", std::stoul(s.empty() ? "0" : s, nullptr, 0));
    return b;
}

bool pd_row(const DumpLine& w, const Dump&, Line& l) {
    l.num("pdn", w[1]);
    if (admin()) l.str("local_dma_lkey", "0x0");  // no reserved lkey, as rxe's user PDs
    l.num("users", decimal(resgraph::dump_field(w, "users")));
    l.num("ctxn", decimal(resgraph::dump_field(w, "ctx")));
    owner_fields(l, resgraph::dump_field(w, "pid"));
    return true;
}

bool mr_row(const DumpLine& w, const Dump&, Line& l) {
    auto at = [&](const char* k) { return resgraph::dump_field(w, k); };
    l.num("mrn", decimal(at("mrn")));
    if (admin()) {
        l.str("rkey", hex(at("rkey")));
        l.str("lkey", hex(at("lkey")));
        l.str("iova", hex(at("iova")));
    }
    l.num("mrlen", decimal(at("length")));
    l.num("pdn", decimal(at("pd")));
    owner_fields(l, at("pid"));
    return true;
}

bool cq_row(const DumpLine& w, const Dump&, Line& l) {
    l.num("cqn", w[1]);
    l.num("cqe", decimal(resgraph::dump_field(w, "cqe")));
    l.num("users", decimal(resgraph::dump_field(w, "users")));
    // iproute2's print_on_off: a bool in JSON, "off" in text (no CQ moderation here).
    l.row.push_back({"adaptive-moderation", "false", true});
    l.text += " adaptive-moderation off";
    l.num("ctxn", decimal(resgraph::dump_field(w, "ctx")));
    owner_fields(l, resgraph::dump_field(w, "pid"));
    return true;
}

bool ctx_row(const DumpLine& w, const Dump&, Line& l) {
    l.num("ctxn", w[1]);
    owner_fields(l, resgraph::dump_field(w, "pid"));
    return true;
}

// The QPs that take their receives from SRQ `srqn`, as the kernel lists them: runs of
// consecutive QPNs as ranges, "17-32,40".
std::vector<std::string> srq_qps(const std::vector<DumpLine>& dump, const std::string& srqn) {
    std::vector<unsigned long> qpns;
    for (const DumpLine& q : dump)
        if (q[0] == "qp" && resgraph::dump_field(q, "srq") == srqn)
            qpns.push_back(std::stoul(q[1], nullptr, 0));
    std::sort(qpns.begin(), qpns.end());
    std::vector<std::string> runs;
    for (size_t i = 0, j; i < qpns.size(); i = j) {
        for (j = i + 1; j < qpns.size() && qpns[j] == qpns[j - 1] + 1;) ++j;
        runs.push_back(std::to_string(qpns[i]) +
                       (j - i > 1 ? "-" + std::to_string(qpns[j - 1]) : std::string()));
    }
    return runs;
}

// rdma_cm's states as the kernel names them, from the device's protocol state.
const char* cm_state(const std::string& st) {
    if (st == "idle") return "ADDR_BOUND";
    if (st == "listen") return "LISTEN";
    if (st == "dreq_sent" || st == "dreq_rcvd" || st == "timewait") return "DISCONNECT";
    return "CONNECT";  // a connection being made or made, SIDR's too
}

const char* cm_ps(const std::string& ps) {
    unsigned long v = std::stoul(ps.empty() ? "0" : ps, nullptr, 0);
    return v == 0x106 ? "TCP" : v == 0x111 ? "UDP" : v == 0x2 || v == 0x3f ? "IPoIB" : "---";
}

// "[fd77::1]:7174" as iproute2 prints an address and port: "fd77::1:7174".
std::string cm_endpoint(std::string a) {
    if (!a.empty() && a[0] == '[') {
        size_t close = a.find(']');
        a = a.substr(1, close - 1) + a.substr(close + 1);
    }
    return a;
}

bool srq_row(const DumpLine& w, const Dump& dump, Line& l) {
    auto at = [&](const char* k) { return resgraph::dump_field(w, k); };
    l.num("srqn", w[1]);
    l.str("type", at("type"));
    if (std::vector<std::string> runs = srq_qps(dump, w[1]); !runs.empty()) {
        // A JSON array of strings, "17-32,40" in text (iproute2's print_qps).
        std::string arr, text;
        for (const std::string& r : runs) {
            arr += (arr.empty() ? "[" : ",") + json_string(r);
            text += (text.empty() ? "" : ",") + r;
        }
        l.row.push_back({"lqpn", arr + "]", true});
        l.text += " lqpn " + text;
    }
    l.num("pdn", decimal(at("pd")));
    if (at("type") == "XRC") l.num("cqn", decimal(at("cq")));
    owner_fields(l, at("pid"));
    return true;
}

bool cm_row(const DumpLine& w, const Dump&, Line& l) {
    auto at = [&](const char* k) { return resgraph::dump_field(w, k); };
    // An id with no owner is a parked request or one finishing after rdma_destroy_id: the
    // kernel lists neither.
    if (at("pid") == "0") return false;
    l.num("cm-idn", w[1]);
    const char* ps = cm_ps(at("ps"));
    if (decimal(at("qpn")) != "0") {
        l.num("lqpn", decimal(at("qpn")));
        l.str("qp-type", std::string(ps) == "TCP" ? "RC" : "UD");
    }
    l.str("state", cm_state(at("state")));
    l.str("ps", ps);
    owner_fields(l, at("pid"));
    l.str("src-addr", cm_endpoint(at("local")));
    std::string remote = cm_endpoint(at("remote"));
    if (remote != "0.0.0.0:0" && remote != ":::0") l.str("dst-addr", remote);
    return true;
}

// The kinds `rdma res show KIND` lists here: the dump lines each comes from, how its rows
// start, what they hold.
struct Kind {
    const char* name;
    const char* dump_head;
    Head head;
    bool (*row)(const DumpLine& w, const Dump& dump, Line& l);
};
constexpr Kind kKinds[] = {
    {"qp", "qp", Head::kLink, qp_row},   {"cm_id", "cm_id", Head::kLink, cm_row},
    {"cq", "cq", Head::kDev, cq_row},    {"pd", "pd", Head::kDev, pd_row},
    {"mr", "mr", Head::kDev, mr_row},    {"ctx", "session", Head::kDev, ctx_row},
    {"srq", "srq", Head::kDev, srq_row},
};

void object_rows(const Kind& k, const std::string& dev, unsigned idx, Out* out) {
    const Dump dump = dump_of(dev);
    for (const DumpLine& w : dump) {
        if (w.size() < 2 || w[0] != k.dump_head) continue;
        Line l = device_line(dev, idx, k.head);
        if (k.row(w, dump, l)) out->push(std::move(l));
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
    Line l = device_line(dev, idx, Head::kSummary);
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
    const Kind* kind = nullptr;  // none: the summary
    if (i < words.size()) {
        for (const Kind& k : kKinds)
            if (words[i] == k.name) kind = &k;
        if (!kind) return -1;  // counters and the like: the host's tool
        ++i;
    }
    std::string only;  // "link DEV[/PORT]" or "dev DEV"
    if (i + 1 < words.size() && (words[i] == "link" || words[i] == "dev"))
        only = words[i + 1].substr(0, words[i + 1].find('/'));
    else if (i < words.size())
        return -1;  // filters this does not take
    Out out;
    out.json = json;
    out.pretty = pretty;
    for (const auto& d : abi::list_devices()) {
        if (!only.empty() && d.name != only) continue;
        unsigned idx = device_index(d.name);
        if (kind)
            object_rows(*kind, d.name, idx, &out);
        else
            summary_rows(d.name, idx, &out);
    }
    out.print();
    return 0;
}

}  // namespace uroce::rdmatool
