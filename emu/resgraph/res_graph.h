// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce res --graph [NAME...] [--pid P] -o FILE.svg` (docs/xrc.md, "The graph"): the XRC
// domains of the devices as a graph, from the same dump `uroce res` prints
// (emu/control/device_dump.cpp): each domain's inode, the processes holding its handles, its
// XRC SRQs with their CQs, its TGT QPs with the handles that opened them, and the INI QPs that
// send to them, on this device or another one (found through each TGT QP's peer address and
// QP number); with --pid, one process's other objects (PD -> MR/QP/SRQ, QP -> CQ).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace uroce::resgraph {

// One device's dump, split into lines of words.
struct DeviceDump {
    std::string name, addr;
    std::vector<std::vector<std::string>> lines;
};
DeviceDump parse_dump(const std::string& name, const std::string& text);
// The word after `key` in a dump line (after its first word), or "".
std::string dump_field(const std::vector<std::string>& line, const std::string& key);

struct Node {
    std::string id;                 // unique in the graph, e.g. "uroce0/qp/0x12"
    std::string cls;                // proc, xrcd, srq, tgt, ini, pd, mr, qp, cq
    int col = 0;                    // left to right
    std::vector<std::string> text;  // lines drawn in the box
    std::vector<std::pair<std::string, std::string>> data;  // data-* attributes
};
struct Edge {
    std::string from, to;
    std::string kind;  // holds, srq, tgt, opened, sends, pd, cq
    std::string label;
};
struct Section {
    std::string title;
    std::vector<Node> nodes;
    std::vector<Edge> edges;
};

// Sections for the domains of the devices named in `show` (every device when empty), INI QPs
// looked up among `all`; then, for pid > 0, that process's objects on those devices.
std::vector<Section> build_graph(const std::vector<DeviceDump>& all,
                                 const std::vector<std::string>& show, int pid);

std::string render_graph_svg(const std::vector<Section>&);

// `uroce res --graph ...`: args are what follows `uroce res`.
int cmd_res_graph(const std::vector<std::string>& args);

}  // namespace uroce::resgraph
