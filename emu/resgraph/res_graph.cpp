// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The dump's lines to the graph's nodes and edges (res_graph.h).
#include "emu/resgraph/res_graph.h"

#include <map>
#include <sstream>

namespace uroce::resgraph {

namespace {

using Words = std::vector<std::string>;

// The words after `key` up to `stop` (or the end).
Words list(const Words& w, const std::string& key, const std::string& stop = "") {
    Words out;
    size_t i = 1;
    while (i < w.size() && w[i] != key) ++i;
    for (++i; i < w.size() && w[i] != stop; ++i) out.push_back(w[i]);
    return out;
}

std::string join(const Words& w, const char* sep) {
    std::string s;
    for (const auto& x : w) s += (s.empty() ? "" : sep) + x;
    return s;
}

std::string id(const DeviceDump& d, const std::string& kind, const std::string& n) {
    return d.name + "/" + kind + "/" + n;
}

const Words* find_line(const DeviceDump& d, const std::string& kind, const std::string& n) {
    for (const Words& w : d.lines)
        if (w[0] == kind && w[1] == n) return &w;
    return nullptr;
}

// The process-column node of `pid` on device d, added once.
void add_proc(Section& s, const DeviceDump& d, const std::string& pid,
              std::map<std::string, int>* seen, const std::string& handles) {
    std::string nid = id(d, "pid", pid);
    if (seen->count(nid)) return;
    (*seen)[nid] = 1;
    Node n;
    n.id = nid;
    n.cls = "proc";
    n.col = 0;
    n.text = {"pid " + pid, d.name};
    if (!handles.empty())
        n.text.push_back(
            std::string(handles.find(',') == std::string::npos ? "xrcd handle " : "xrcd handles ") +
            handles);
    n.data = {{"pid", pid}, {"dev", d.name}, {"handles", handles}};
    s.nodes.push_back(n);
}

void domain_section(const std::vector<DeviceDump>& all, const DeviceDump& d, const Words& x,
                    std::vector<Section>* out) {
    const std::string& h = x[1];
    Section s;
    std::string inode = dump_field(x, "inode");
    s.title = d.name + " (" + d.addr + ") XRC domain " + h + ", inode " + inode + ", " +
              dump_field(x, "handles") + " handles, " + dump_field(x, "objects") + " objects";
    Node xn;
    xn.id = id(d, "xrcd", h);
    xn.cls = "xrcd";
    xn.col = 1;
    xn.text = {"xrcd " + h, "inode " + inode, dump_field(x, "handles") + " handles"};
    xn.data = {
        {"dev", d.name}, {"xrcd", h}, {"inode", inode}, {"handles", dump_field(x, "handles")}};
    s.nodes.push_back(xn);

    // The processes holding its handles: "handle_ids H/PID ...".
    std::map<std::string, Words> handles_of;
    for (const auto& hp : list(x, "handle_ids")) {
        size_t slash = hp.find('/');
        if (slash != std::string::npos)
            handles_of[hp.substr(slash + 1)].push_back(hp.substr(0, slash));
    }
    std::map<std::string, int> seen;
    for (const auto& [pid, hs] : handles_of) {
        add_proc(s, d, pid, &seen, join(hs, ","));
        s.edges.push_back({id(d, "pid", pid), xn.id, "holds",
                           std::to_string(hs.size()) + (hs.size() == 1 ? " handle" : " handles")});
    }
    for (const Words& w : d.lines) {
        if (w[0] == "srq" && dump_field(w, "type") == "XRC" && dump_field(w, "xrcd") == h) {
            Node n;
            n.id = id(d, "srq", w[1]);
            n.cls = "srq";
            n.col = 2;
            n.text = {"XRC SRQ " + w[1],
                      "cq " + dump_field(w, "cq") + ", pd " + dump_field(w, "pd") + ", pid " +
                          dump_field(w, "pid"),
                      "max_wr " + dump_field(w, "max_wr") + ", " + dump_field(w, "qps") + " qps"};
            n.data = {{"srqn", w[1]}, {"cq", dump_field(w, "cq")}, {"pid", dump_field(w, "pid")}};
            s.nodes.push_back(n);
            s.edges.push_back({xn.id, n.id, "srq", ""});
        }
    }
    for (const Words& w : d.lines) {
        if (w[0] != "qp" || dump_field(w, "type") != "XRC_TGT" || dump_field(w, "xrcd") != h)
            continue;
        Node n;
        n.id = id(d, "qp", w[1]);
        n.cls = "tgt";
        n.col = 2;
        Words holders = list(w, "holder_handles", "xrcd");
        n.text = {"TGT QP " + w[1] + " " + dump_field(w, "state"),
                  "peer " + dump_field(w, "dest") + " qp " + dump_field(w, "dest_qpn"),
                  "handles (pid/xrcd handle) " + join(holders, " ")};
        n.data = {{"qpn", w[1]},
                  {"state", dump_field(w, "state")},
                  {"holders", join(holders, " ")},
                  {"peer", dump_field(w, "dest")},
                  {"peer-qpn", dump_field(w, "dest_qpn")}};
        s.nodes.push_back(n);
        s.edges.push_back({xn.id, n.id, "tgt", ""});
        for (const auto& ph : holders) {
            std::string pid = ph.substr(0, ph.find('/'));
            add_proc(s, d, pid, &seen, "");
            s.edges.push_back({id(d, "pid", pid), n.id, "opened",
                               "handle via xrcd handle " + ph.substr(ph.find('/') + 1)});
        }
        // Who sends to it: the INI QP its peer address and QP number name, on whichever
        // device has that address.
        std::string peer = dump_field(w, "dest"), pqpn = dump_field(w, "dest_qpn");
        if (peer.empty() || peer == "-") continue;
        Node ini;
        ini.cls = "ini";
        ini.col = 3;
        ini.id = peer + "/qp/" + pqpn;
        ini.text = {"INI QP " + pqpn, "at " + peer + " (no device here)"};
        ini.data = {{"addr", peer}, {"qpn", pqpn}};
        for (const DeviceDump& o : all) {
            if (o.addr != peer) continue;
            const Words* q = find_line(o, "qp", pqpn);
            if (!q || dump_field(*q, "type") != "XRC_INI") continue;
            ini.id = id(o, "qp", pqpn);
            ini.text = {
                "INI QP " + pqpn + " " + dump_field(*q, "state"),
                o.name + " (" + peer + "), pid " + dump_field(*q, "pid"),
                "sends to qp " + dump_field(*q, "dest_qpn") + ", cq " + dump_field(*q, "send_cq")};
            ini.data = {{"dev", o.name},
                        {"addr", peer},
                        {"qpn", pqpn},
                        {"pid", dump_field(*q, "pid")},
                        {"state", dump_field(*q, "state")},
                        {"dest-qpn", dump_field(*q, "dest_qpn")}};
        }
        bool have = false;
        for (const Node& m : s.nodes) have |= m.id == ini.id;
        if (!have) s.nodes.push_back(ini);
        s.edges.push_back({ini.id, n.id, "sends", "sends to"});
    }
    out->push_back(s);
}

void process_section(const DeviceDump& d, const std::string& pid, std::vector<Section>* out) {
    Section s;
    s.title = d.name + " (" + d.addr + ") objects of pid " + pid;
    auto add = [&](const std::string& cls, int col, const std::string& n, Words text) {
        Node node;
        node.id = id(d, cls, n);
        node.cls = cls;
        node.col = col;
        node.text = std::move(text);
        node.data = {{"n", n}, {"pid", pid}};
        s.nodes.push_back(node);
        return node.id;
    };
    for (const Words& w : d.lines) {
        if (dump_field(w, "pid") != pid) continue;
        if (w[0] == "pd") add("pd", 0, w[1], {"PD " + w[1], dump_field(w, "users") + " users"});
        if (w[0] == "cq") add("cq", 2, w[1], {"CQ " + w[1], "cqe " + dump_field(w, "cqe")});
    }
    for (const Words& w : d.lines) {
        if (dump_field(w, "pid") != pid) continue;
        std::string pd = dump_field(w, "pd");
        if (w[0] == "mr") {
            std::string n =
                add("mr", 1, dump_field(w, "lkey"),
                    {"MR lkey " + dump_field(w, "lkey"), "length " + dump_field(w, "length")});
            s.edges.push_back({id(d, "pd", pd), n, "pd", ""});
        } else if (w[0] == "srq") {
            std::string n = add(
                "srq", 1, w[1],
                {"SRQ " + w[1] + " " + dump_field(w, "type"), "max_wr " + dump_field(w, "max_wr")});
            s.edges.push_back({id(d, "pd", pd), n, "pd", ""});
            if (dump_field(w, "cq") != "0")
                s.edges.push_back({n, id(d, "cq", dump_field(w, "cq")), "cq", "completes"});
        } else if (w[0] == "qp") {
            std::string n =
                add("qp", 1, w[1],
                    {"QP " + w[1] + " " + dump_field(w, "type") + " " + dump_field(w, "state"),
                     "to " + dump_field(w, "dest") + " qp " + dump_field(w, "dest_qpn")});
            if (pd != "0") s.edges.push_back({id(d, "pd", pd), n, "pd", ""});
            std::string sc = dump_field(w, "send_cq"), rc = dump_field(w, "recv_cq");
            if (sc != "0")
                s.edges.push_back({n, id(d, "cq", sc), "cq", sc == rc ? "send+recv" : "send"});
            if (rc != "0" && rc != sc) s.edges.push_back({n, id(d, "cq", rc), "cq", "recv"});
            if (dump_field(w, "srq") != "0")
                s.edges.push_back({n, id(d, "srq", dump_field(w, "srq")), "srq", "receives from"});
        }
    }
    // Edges to objects the dump does not list for this pid (another process's PD) are dropped.
    std::vector<Edge> kept;
    for (const Edge& e : s.edges) {
        bool f = false, t = false;
        for (const Node& n : s.nodes) f |= n.id == e.from, t |= n.id == e.to;
        if (f && t) kept.push_back(e);
    }
    s.edges = kept;
    if (!s.nodes.empty()) out->push_back(s);
}

}  // namespace

std::string dump_field(const std::vector<std::string>& w, const std::string& key) {
    for (size_t i = 1; i + 1 < w.size(); ++i)
        if (w[i] == key) return w[i + 1];
    return "";
}

DeviceDump parse_dump(const std::string& name, const std::string& text) {
    DeviceDump d;
    d.name = name;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream ws(line);
        Words w;
        for (std::string x; ws >> x;) w.push_back(x);
        if (w.size() < 2) continue;
        if (w[0] == "device") d.addr = dump_field(w, "addr");
        d.lines.push_back(std::move(w));
    }
    return d;
}

std::vector<Section> build_graph(const std::vector<DeviceDump>& all,
                                 const std::vector<std::string>& show, int pid) {
    std::vector<Section> out;
    for (const DeviceDump& d : all) {
        bool shown = show.empty();
        for (const auto& n : show) shown |= n == d.name;
        if (!shown) continue;
        for (const Words& w : d.lines)
            if (w[0] == "xrcd") domain_section(all, d, w, &out);
        if (pid > 0) process_section(d, std::to_string(pid), &out);
    }
    return out;
}

}  // namespace uroce::resgraph
