// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Drawing the object graph (res_graph.h) and the `uroce res --graph` command. A section per
// domain (and one for --pid's objects), its nodes in columns, edges as curves from column to
// column. What a reader or a test finds in the SVG:
//   <g class="section" data-title="...">
//   <g class="node CLS" id="ID" data-...>  CLS: proc, xrcd, srq, tgt, ini, pd, mr, qp, cq
//   <g class="edge KIND" data-from="ID" data-to="ID">
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/resgraph/res_graph.h"

namespace uroce::resgraph {

namespace {

constexpr int kColW = 300, kNodeW = 250, kLine = 15, kGap = 18, kLeft = 20;

std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '&')
            o += "&amp;";
        else if (c == '<')
            o += "&lt;";
        else if (c == '>')
            o += "&gt;";
        else if (c == '"')
            o += "&quot;";
        else
            o += c;
    }
    return o;
}

struct Box {
    int x, y, h;
};

}  // namespace

std::string render_graph_svg(const std::vector<Section>& sections) {
    std::string body;
    int y = 20, width = kLeft + 4 * kColW;
    char buf[512];
    for (const Section& s : sections) {
        std::snprintf(buf, sizeof buf, "<g class=\"section\" data-title=\"%s\">\n",
                      esc(s.title).c_str());
        body += buf;
        std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" class=\"title\">%s</text>\n", kLeft,
                      y + 14, esc(s.title).c_str());
        body += buf;
        y += 30;
        std::map<std::string, Box> at;
        std::string nodes;  // drawn after the edges, so boxes cover the curves under them
        std::vector<int> col_y(8, y);
        for (const Node& n : s.nodes) {
            int col = n.col < 0 ? 0 : n.col > 7 ? 7 : n.col;
            int h = int(n.text.size()) * kLine + 10;
            Box b{kLeft + col * kColW, col_y[col], h};
            col_y[col] += h + kGap;
            at[n.id] = b;
            if (b.x + kNodeW + kLeft > width) width = b.x + kNodeW + kLeft;
            nodes += "<g class=\"node " + n.cls + "\" id=\"" + esc(n.id) + "\"";
            for (const auto& [k, v] : n.data) nodes += " data-" + k + "=\"" + esc(v) + "\"";
            nodes += ">";
            std::snprintf(buf, sizeof buf,
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"5\"/>", b.x, b.y,
                          kNodeW, h);
            nodes += buf;
            for (size_t i = 0; i < n.text.size(); ++i) {
                std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\"%s>%s</text>", b.x + 8,
                              b.y + 17 + int(i) * kLine, i == 0 ? " class=\"head\"" : "",
                              esc(n.text[i]).c_str());
                nodes += buf;
            }
            nodes += "</g>\n";
        }
        for (const Edge& e : s.edges) {
            auto f = at.find(e.from), t = at.find(e.to);
            if (f == at.end() || t == at.end()) continue;
            const Box &a = f->second, &b = t->second;
            bool right = a.x <= b.x;  // draw from a's side that faces b
            int x1 = right ? a.x + kNodeW : a.x, y1 = a.y + a.h / 2;
            int x2 = right ? b.x : b.x + kNodeW, y2 = b.y + b.h / 2;
            if (a.x == b.x) x1 = x2 = a.x + kNodeW;  // same column: a loop on the right
            int bend = a.x == b.x ? 40 : (x2 - x1) / 2;
            std::snprintf(
                buf, sizeof buf,
                "<g class=\"edge %s\" data-from=\"%s\" data-to=\"%s\"><path d=\"M%d %dC%d "
                "%d %d %d %d %d\" marker-end=\"url(#ah)\"/>",
                e.kind.c_str(), esc(e.from).c_str(), esc(e.to).c_str(), x1, y1, x1 + bend, y1,
                x2 - (a.x == b.x ? -40 : bend), y2, x2, y2);
            body += buf;
            if (!e.label.empty()) {
                std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" class=\"label\">%s</text>",
                              (x1 + x2) / 2 - 30 + (a.x == b.x ? 40 : 0), (y1 + y2) / 2 - 3,
                              esc(e.label).c_str());
                body += buf;
            }
            body += "</g>\n";
        }
        body += nodes + "</g>\n";
        int bottom = y;
        for (int c : col_y) bottom = c > bottom ? c : bottom;
        y = bottom + 20;
    }
    if (sections.empty()) {
        body += "<text x=\"20\" y=\"40\">no XRC domain (and no objects of the process)</text>\n";
        y = 60;
    }
    std::string o = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    std::snprintf(buf, sizeof buf,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\">\n",
                  width, y + 10, width, y + 10);
    o += buf;
    o +=
        "<style>text{font:11px monospace;fill:#222}.title{font-weight:bold;font-size:13px}"
        ".head{font-weight:bold}rect{fill:#f6f5f4;stroke:#77767b}.xrcd rect{fill:#dcd0f0}"
        ".srq rect{fill:#d0e8d0}.tgt rect{fill:#d0e0f4}.ini rect{fill:#f8e0c8}"
        ".proc rect{fill:#fff8c0}path{fill:none;stroke:#5e5c64;stroke-width:1.3}"
        ".sends path{stroke:#c64600}.opened path{stroke-dasharray:4 3}"
        ".label{fill:#555;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}</style>\n"
        "<defs><marker id=\"ah\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" "
        "markerHeight=\"7\" orient=\"auto\"><path d=\"M0 0L10 5L0 10z\" "
        "style=\"fill:#5e5c64;stroke:none\"/></marker></defs>\n"
        "<rect width=\"100%\" height=\"100%\" style=\"fill:white;stroke:none\"/>\n";
    o += body;
    o += "</svg>\n";
    return o;
}

int cmd_res_graph(const std::vector<std::string>& args) {
    std::vector<std::string> names;
    std::string output;
    int pid = 0;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--graph") continue;
        if (args[i] == "-o" && i + 1 < args.size()) {
            output = args[++i];
        } else if (args[i] == "--pid" && i + 1 < args.size()) {
            pid = std::atoi(args[++i].c_str());
            if (pid <= 0) output.clear(), i = args.size();
        } else {
            names.push_back(args[i]);
        }
    }
    if (output.empty()) {
        std::fprintf(stderr, "usage: uroce res --graph [NAME...] [--pid P] -o FILE.svg\n");
        return 2;
    }
    // Every device's dump: the INI QPs that send to a domain's TGT QPs may be on any of them.
    std::vector<DeviceDump> all;
    for (const auto& d : abi::list_devices()) {
        std::string text;
        if (int e = abi::simple_request(d.name, abi::Op::kDump, &text)) {
            std::fprintf(stderr, "uroce: %s: %s\n", d.name.c_str(), std::strerror(e));
            continue;
        }
        all.push_back(parse_dump(d.name, text));
    }
    for (const auto& n : names) {
        bool found = false;
        for (const auto& d : all) found |= d.name == n;
        if (!found) {
            std::fprintf(stderr, "uroce: no device %s\n", n.c_str());
            return 1;
        }
    }
    if (all.empty()) {
        std::fprintf(stderr, "uroce: no device running\n");
        return 1;
    }
    std::vector<Section> g = build_graph(all, names, pid);
    std::string svg = render_graph_svg(g);
    FILE* f = std::fopen(output.c_str(), "w");
    if (!f || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "uroce: res --graph: %s: %s\n", output.c_str(), std::strerror(errno));
        return 1;
    }
    size_t nodes = 0, edges = 0;
    for (const auto& s : g) nodes += s.nodes.size(), edges += s.edges.size();
    std::printf("%s: %zu sections, %zu nodes, %zu edges\n", output.c_str(), g.size(), nodes, edges);
    return 0;
}

}  // namespace uroce::resgraph
