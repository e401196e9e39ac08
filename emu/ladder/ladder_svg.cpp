// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// SVG and HTML of a ladder (ladder_svg.h). Rows are laid out top to bottom in the model's
// order; lanes left to right by address, each address's CM lane first. Every element is
// printed with one snprintf into a string that grows by doubling: the output of a
// million-packet capture is a few thousand rows, written in milliseconds.
#include "emu/ladder/ladder_svg.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <unordered_map>

#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::ladder {

namespace {

constexpr int kLeft = 120;     // time labels
constexpr int kLaneGap = 230;  // between lanes
constexpr int kTop = 64;       // lane names
constexpr int kArrowRow = 24;
constexpr int kBandRow = 36;
constexpr int kEventRow = 20;

void add(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void add(std::string& out, const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) out.append(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
}

std::string esc(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': o += "&amp;"; break;
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '"': o += "&quot;"; break;
        default: o += c;
        }
    }
    return o;
}

// "+1.234567 s" style offsets from the first packet.
std::string rel_time(int64_t us) {
    char b[32];
    unsigned long long a = us < 0 ? -(unsigned long long)us : us;
    std::snprintf(b, sizeof b, "%c%llu.%06llu s", us < 0 ? '-' : '+', a / 1000000, a % 1000000);
    return b;
}

// The opcode's family for a band's label: RC_RDMA_WRITE_FIRST -> RC_RDMA_WRITE_*.
std::string family_name(const Sighting& s) {
    std::string n = packet_name(s);
    for (const char* tail : {"_FIRST", "_MIDDLE", "_LAST", "_ONLY"}) {
        size_t at = n.find(tail);
        if (at != std::string::npos) return n.substr(0, at) + "_*";
    }
    return n;
}

struct Layout {
    std::vector<int> x;  // per lane
    int width = 0, height = 0;
};

Layout layout(const Ladder& lad) {
    std::vector<uint32_t> order(lad.lanes.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        const Lane& la = lad.lanes[a];
        const Lane& lb = lad.lanes[b];
        if (la.addr != lb.addr)
            return lad.addr_keys.empty() ? la.addr < lb.addr
                                         : lad.addr_keys[la.addr] < lad.addr_keys[lb.addr];
        return la.qpn < lb.qpn;  // QP1, the CM, first; unresolved senders last
    });
    Layout l;
    l.x.resize(lad.lanes.size());
    for (size_t k = 0; k < order.size(); ++k) l.x[order[k]] = kLeft + 100 + int(k) * kLaneGap;
    l.width = kLeft + 100 + int(std::max<size_t>(order.size(), 1)) * kLaneGap + 160;
    int y = kTop + 16;
    for (const Row& r : lad.rows)
        y += r.kind == RowKind::kBand    ? kBandRow
             : r.kind == RowKind::kEvent ? kEventRow
                                         : kArrowRow;
    l.height = y + 76;
    return l;
}

// The element each packet is drawn in: its arrow, or the band it is part of (a link to a
// retransmission's original goes there). UINT32_MAX: not drawn.
std::vector<uint32_t> drawn_in(const Ladder& lad) {
    std::vector<uint32_t> in(lad.packets.size(), UINT32_MAX);
    if (!lad.retransmissions) return in;  // only links need it
    // A band holds the packets of its lane pair and kind from its first to its last: one
    // sweep with the bands open at each packet.
    std::vector<const Row*> starts(lad.packets.size(), nullptr);
    for (const Row& r : lad.rows) {
        if (r.kind == RowKind::kEvent) continue;
        in[r.first] = r.first;
        if (r.kind == RowKind::kBand) starts[r.first] = &r;
    }
    auto key = [&](const Packet& p) {
        return (uint64_t(p.from) << 40 ^ uint64_t(p.to) << 20) * 31 + band_kind(p);
    };
    std::unordered_map<uint64_t, const Row*> open;
    for (uint32_t i = 0; i < lad.packets.size(); ++i) {
        const Packet& p = lad.packets[i];
        if (starts[i]) {
            open[key(p)] = starts[i];
            continue;
        }
        if (in[i] != UINT32_MAX || open.empty()) continue;  // an arrow of its own
        auto it = open.find(key(p));
        if (it == open.end()) continue;
        in[i] = it->second->first;
        if (it->second->last == i) open.erase(it);
    }
    return in;
}

void packet_attrs(std::string& o, const Ladder& lad, const Row& r,
                  const std::vector<uint32_t>& in) {
    const Packet& p = lad.packets[r.first];
    const Sighting& s = p.s;
    add(o, " id=\"p%u\" data-n=\"%u\" data-from=\"%u\" data-to=\"%u\" data-t=\"%lld\"", r.first,
        r.count, p.from, p.to, (long long)(s.t_us - lad.t_first_us));
    add(o, " data-op=\"0x%02x\" data-psn=\"0x%06x\" data-len=\"%llu\" data-fate=\"%s\"", s.opcode,
        s.psn, (unsigned long long)r.bytes, fate_name(p.fate));
    if (s.has_aeth) add(o, " data-syn=\"0x%02x\" data-msn=\"0x%06x\"", s.syndrome, s.msn);
    if (s.mad_attr) add(o, " data-mad=\"0x%04x\"", s.mad_attr);
    if (s.srqn) add(o, " data-srqn=\"0x%x\"", s.srqn);
    if (p.retx_of >= 0 && in[p.retx_of] != UINT32_MAX) add(o, " data-orig=\"p%u\"", in[p.retx_of]);
    if (p.duplicate) add(o, " data-dup=\"1\"");
    if (p.rx_t_us >= 0 && p.rx_t_us != s.t_us)
        add(o, " data-rx=\"%lld\"", (long long)(p.rx_t_us - lad.t_first_us));
    if (r.kind == RowKind::kBand) {
        const Sighting& e = lad.packets[r.last].s;
        add(o, " data-last-psn=\"0x%06x\" data-t-last=\"%lld\"", e.psn,
            (long long)(e.t_us - lad.t_first_us));
    }
}

std::string arrow_label(const Packet& p) {
    const Sighting& s = p.s;
    char b[160];
    std::string name = packet_name(s);
    std::snprintf(b, sizeof b, "%s psn 0x%x len %u", name.c_str(), s.psn, s.payload_len);
    std::string l = b;
    if (s.has_aeth) l += " " + syndrome_name(s.syndrome);
    if (p.retx_of >= 0) l += " (retx)";
    if (p.duplicate) l += " (dup)";
    if (p.fate != Fate::kDelivered) l += std::string(" [") + fate_name(p.fate) + "]";
    return l;
}

void svg_body(std::string& o, const Ladder& lad, const Layout& L) {
    const std::vector<uint32_t> in = drawn_in(lad);
    add(o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
        "class=\"ladder\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
        L.width, L.height, L.width, L.height);
    o += "<style>text{font:11px monospace;fill:#222}.lane line{stroke:#999;stroke-width:1}"
         ".lane text{font-weight:bold}.pkt text,.ev "
         "text{paint-order:stroke;stroke:#fff;stroke-width:3px}.pkt "
         "line{stroke:#1a5fb4;stroke-width:1.4}"
         ".pkt.retx line{stroke:#c64600;stroke-dasharray:5 3}.pkt.short line{stroke:#c01c28}"
         ".pkt.cm line{stroke:#26a269}.band polygon{fill:#1a5fb4;fill-opacity:0.18;"
         "stroke:#1a5fb4}.band.retx polygon{fill:#c64600;stroke:#c64600}"
         ".band.short polygon{fill:#c01c28;stroke:#c01c28}.ev circle{fill:#613583}"
         ".ev.err circle{fill:#c01c28}.ev.err text{fill:#c01c28}.t{fill:#777}"
         ".x{stroke:#c01c28;stroke-width:2}</style>\n"
         "<defs><marker id=\"ah\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" "
         "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0 0L10 5L0 10z\" "
         "fill=\"#555\"/></marker></defs>\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    for (size_t i = 0; i < lad.lanes.size(); ++i) {
        const Lane& ln = lad.lanes[i];
        std::string name = lane_name(lad, ln);
        std::string sub = ln.pid >= 0 ? "pid " + std::to_string(ln.pid) : "";
        if (!ln.device.empty()) sub += (sub.empty() ? "" : " ") + ln.device;
        add(o, "<g class=\"lane\" data-lane=\"%zu\" data-name=\"%s\" data-pid=\"%d\">", i,
            esc(name).c_str(), ln.pid);
        add(o, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\">%s</text>", L.x[i],
            esc(name).c_str());
        if (!sub.empty())
            add(o, "<text x=\"%d\" y=\"40\" text-anchor=\"middle\" class=\"t\">%s</text>", L.x[i],
                esc(sub).c_str());
        add(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/></g>\n", L.x[i], kTop - 8, L.x[i],
            L.height - 50);
    }
    int y = kTop + 16;
    for (const Row& r : lad.rows) {
        if (r.kind == RowKind::kEvent) {
            const LaneEvent& e = lad.events[r.first];
            add(o, "<g class=\"ev%s\" data-lane=\"%u\" data-t=\"%lld\">", e.error ? " err" : "",
                e.lane, (long long)(e.t_us - lad.t_first_us));
            add(o, "<text x=\"8\" y=\"%d\" class=\"t\">%s</text>", y + 4,
                rel_time(e.t_us - lad.t_first_us).c_str());
            add(o, "<circle cx=\"%d\" cy=\"%d\" r=\"4\"/><text x=\"%d\" y=\"%d\">%s</text></g>\n",
                L.x[e.lane], y, L.x[e.lane] + 8, y + 4, esc(e.text).c_str());
            y += kEventRow;
            continue;
        }
        const Packet& p = lad.packets[r.first];
        int x1 = L.x[p.from], x2 = L.x[p.to];
        bool short_end = p.fate != Fate::kDelivered;
        std::string cls = r.kind == RowKind::kBand ? "pkt band" : "pkt";
        if (p.retx_of >= 0) cls += " retx";
        if (short_end) cls += " short";
        if (p.s.mad_attr) cls += " cm";
        o += "<g class=\"" + cls + "\"";
        packet_attrs(o, lad, r, in);
        o += ">";
        add(o, "<text x=\"8\" y=\"%d\" class=\"t\">%s</text>", y + 4,
            rel_time(p.s.t_us - lad.t_first_us).c_str());
        if (x1 == x2) x2 = x1 + 60;  // to itself (a QP's own address): a short hook
        int dy = r.kind == RowKind::kBand ? 20 : 10;
        int xe = short_end ? x1 + (x2 - x1) * 55 / 100 : x2;
        int ye = short_end ? y + dy * 55 / 100 : y + dy;
        std::string label;
        if (r.kind == RowKind::kBand) {
            const Packet& last = lad.packets[r.last];
            char b[200];
            std::snprintf(b, sizeof b, "%u x %s psn 0x%x..0x%x, %llu bytes", r.count,
                          family_name(p.s).c_str(), p.s.psn, last.s.psn,
                          (unsigned long long)r.bytes);
            label = b;
            if (p.s.has_aeth) label += " " + syndrome_name(p.s.syndrome);
            if (p.retx_of >= 0) label += " (retx)";
            if (short_end) label += std::string(" [") + fate_name(p.fate) + "]";
            add(o, "<polygon points=\"%d,%d %d,%d %d,%d %d,%d\"/>", x1, y - 6, xe, ye - 6, xe,
                ye + 6, x1, y + 6);
            add(o, "<text x=\"8\" y=\"%d\" class=\"t\">%s</text>", y + 16,
                rel_time(last.s.t_us - lad.t_first_us).c_str());
        } else {
            label = arrow_label(p);
            add(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" marker-end=\"url(#ah)\"/>", x1, y,
                xe, ye);
        }
        if (short_end)
            add(o, "<path class=\"x\" d=\"M%d %dl8 8m0 -8l-8 8\"/>", xe + (x2 > x1 ? 2 : -10),
                ye - 4);
        int lx = (x1 + x2) / 2;
        bool link = p.retx_of >= 0 && in[p.retx_of] != UINT32_MAX;
        if (link) add(o, "<a xlink:href=\"#p%u\" href=\"#p%u\">", in[p.retx_of], in[p.retx_of]);
        add(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>", lx, y - 3,
            esc(label).c_str());
        if (link) o += "</a>";
        o += "</g>\n";
        y += r.kind == RowKind::kBand ? kBandRow : kArrowRow;
    }
    add(o,
        "<text x=\"8\" y=\"%d\" class=\"t\" id=\"summary\">%zu records, %zu packets, %zu "
        "retransmissions, %zu not delivered, %zu rows",
        y + 24, lad.sightings, lad.packets.size(), lad.retransmissions, lad.short_arrows,
        lad.rows.size());
    if (lad.packets_not_drawn)
        add(o,
            "</text>\n<text x=\"8\" y=\"%d\" class=\"t\">%zu packets not drawn (past the row "
            "limit: narrow with --time or --qp)",
            y + 40, lad.packets_not_drawn);
    o += "</text>\n</svg>\n";
}

}  // namespace

std::string render_svg(const Ladder& lad) {
    Layout L = layout(lad);
    std::string o;
    o.reserve(4096 + lad.rows.size() * 400);
    o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    svg_body(o, lad, L);
    return o;
}

std::string render_html(const Ladder& lad) {
    Layout L = layout(lad);
    std::string o;
    o.reserve(8192 + lad.rows.size() * 400);
    o += "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>uroce ladder</title>\n"
         "<style>body{margin:0;font:12px monospace}#bar{position:fixed;top:0;left:0;right:0;"
         "height:26px;background:#eee;border-bottom:1px solid #ccc;padding:3px 8px;z-index:2}"
         "#view{position:absolute;top:33px;left:0;right:0;bottom:0;overflow:auto}"
         "#tip{position:fixed;display:none;background:#ffffe8;border:1px solid #999;"
         "padding:4px 6px;white-space:pre;pointer-events:none;z-index:3}"
         ".pkt:hover line,.pkt:hover polygon{stroke-width:3}</style></head><body>\n"
         "<div id=\"bar\"><button id=\"zin\">+</button> <button id=\"zout\">&#8722;</button> "
         "<button id=\"zfit\">1:1</button> <span id=\"zoom\">100%</span> &#183; "
         "ctrl+wheel zooms, hover an arrow for its fields</div>\n<div id=\"view\">\n";
    svg_body(o, lad, L);
    o += "</div><div id=\"tip\"></div>\n<script>\n"
         "(function(){\n"
         "var svg=document.querySelector('svg.ladder'),view=document.getElementById('view'),\n"
         "tip=document.getElementById('tip'),zl=document.getElementById('zoom');\n"
         "var w0=+svg.getAttribute('width'),h0=+svg.getAttribute('height'),z=1;\n"
         "var lanes={};document.querySelectorAll('g.lane').forEach(function(g){\n"
         " lanes[g.dataset.lane]=g.dataset.name+(g.dataset.pid>=0?' (pid "
         "'+g.dataset.pid+')':'');});\n"
         "function zoom(f,cx,cy){var nz=Math.min(8,Math.max(0.05,z*f));\n"
         " var sx=(view.scrollLeft+(cx||0))/z,sy=(view.scrollTop+(cy||0))/z;z=nz;\n"
         " svg.setAttribute('width',w0*z);svg.setAttribute('height',h0*z);\n"
         " view.scrollLeft=sx*z-(cx||0);view.scrollTop=sy*z-(cy||0);\n"
         " zl.textContent=Math.round(z*100)+'%';}\n"
         "document.getElementById('zin').onclick=function(){zoom(1.25);};\n"
         "document.getElementById('zout').onclick=function(){zoom(0.8);};\n"
         "document.getElementById('zfit').onclick=function(){zoom(1/z);};\n"
         "view.addEventListener('wheel',function(e){if(!e.ctrlKey)return;e.preventDefault();\n"
         " var r=view.getBoundingClientRect();zoom(e.deltaY<0?1.15:0.87,e.clientX-r.left,"
         "e.clientY-r.top);},{passive:false});\n"
         "function fields(g){var d=g.dataset,t=[];\n"
         " t.push(g.querySelector('text[text-anchor]').textContent);\n"
         " t.push('from '+lanes[d.from]+'\\nto   '+lanes[d.to]);\n"
         " t.push('time +'+(d.t/1e6).toFixed(6)+' s'+(d.rx?'  received +'+(d.rx/1e6).toFixed(6)"
         "+' s':''));\n"
         " t.push('opcode '+d.op+'  psn '+d.psn+(d.lastPsn?' .. '+d.lastPsn:'')+'  bytes '+"
         "d.len+'  packets '+d.n);\n"
         " if(d.syn)t.push('aeth syndrome '+d.syn+'  msn '+d.msn);\n"
         " if(d.srqn)t.push('xrc srqn '+d.srqn);if(d.mad)t.push('mad attribute '+d.mad);\n"
         " t.push('fate '+d.fate+(d.orig?'  retransmission of '+d.orig:'')+(d.dup?'  "
         "duplicate':''));\n"
         " return t.join('\\n');}\n"
         "svg.addEventListener('mousemove',function(e){var g=e.target.closest('g.pkt');\n"
         " if(!g){tip.style.display='none';return;}tip.textContent=fields(g);\n"
         " tip.style.display='block';tip.style.left=(e.clientX+14)+'px';"
         "tip.style.top=(e.clientY+14)+'px';});\n"
         "svg.addEventListener('mouseleave',function(){tip.style.display='none';});\n"
         // What hovering the first arrow shows, kept in the page for a headless check.
         "var first=svg.querySelector('g.pkt');\n"
         "document.body.setAttribute('data-first-tip',first?fields(first):'');\n"
         "document.body.setAttribute('data-ladder','ready');\n"
         "})();\n</script></body></html>\n";
    return o;
}

}  // namespace uroce::ladder
