// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `rdma dev` and `rdma link` (iproute2's RDMA tool) for the devices of `uroce run`'s system
// view: iproute2 asks the kernel over NETLINK_RDMA, which knows no uroce device (and on a
// host without ib_core does not exist, so the real tool fails), while rdma-core's pyverbs
// suite (56 on) and scripts call `rdma link show -j` to find a device's netdev. This answers
// from the view's sysfs files, in iproute2's output formats (text, -j, -p); every other
// command goes to the real tool further along PATH. docs/system-view.md.
#include "emu/sysview/rdma_tool.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "emu/cli/cli.h"
#include "emu/sysview/rdma_out.h"

namespace uroce::rdmatool {

namespace {

const char kSys[] = "/sys/class/infiniband/";

std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') out.push_back(e->d_name);
        closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// "4: ACTIVE" -> 4.
int leading_number(const std::string& s) { return std::atoi(s.c_str()); }

// The kernel's index of a device: the N of its uverbs<N> (uroce's devices and the kernel's
// are numbered alike), else its place in the list.
unsigned dev_index(const std::string& dev, unsigned place) {
    for (const std::string& uv : entries("/sys/class/infiniband_verbs"))
        if (uv.rfind("uverbs", 0) == 0 &&
            first_line("/sys/class/infiniband_verbs/" + uv + "/ibdev") == dev)
            return unsigned(std::atoi(uv.c_str() + 6));
    return place;
}

const char* node_type_name(int t) {
    switch (t) {
    case 1: return "ca";
    case 2: return "switch";
    case 3: return "router";
    case 4: return "rnic";
    case 5: return "usnic";
    case 6: return "usnic_udp";
    default: return "unspecified";
    }
}

const char* state_name(int s) {
    static const char* const kNames[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    return s >= 0 && s < 6 ? kNames[s] : "UNKNOWN";
}

const char* phys_state_name(int s) {
    static const char* const kNames[] = {"NOP",
                                         "SLEEP",
                                         "POLLING",
                                         "DISABLED",
                                         "ARMED",
                                         "LINK_UP",
                                         "LINK_ERROR_RECOVER",
                                         "PHY_TEST",
                                         "UNKNOWN",
                                         "OPA_OFFLINE",
                                         "UNKNOWN",
                                         "OPA_TEST"};
    return s >= 0 && s < 12 ? kNames[s] : "UNKNOWN";
}

const char* protocol_name(const std::string& link_layer) {
    if (link_layer == "Ethernet") return "roce";
    if (link_layer == "InfiniBand") return "ib";
    return nullptr;
}

// A port's netdev: its first GID's interface, else the device's net/ entry.
std::string port_netdev(const std::string& dev, const std::string& port) {
    std::string nd = first_line(kSys + dev + "/ports/" + port + "/gid_attrs/ndevs/0");
    if (nd.empty()) {
        auto net = entries(kSys + dev + "/device/net");
        if (!net.empty()) nd = net[0];
    }
    return nd;
}

// DEV or DEV/PORT from the command line.
struct Filter {
    std::string dev;
    unsigned port = 0;
};

// Calls show(dev, ifindex) for each device the filter names (all when it names none), and
// says "Wrong device name", false, when a name was given and no call showed something.
template <typename Show>
bool each_dev(const Filter& f, Show show) {
    unsigned place = 0;
    bool found = f.dev.empty();
    for (const std::string& dev : entries(kSys)) {
        unsigned idx = dev_index(dev, place++);
        if (!f.dev.empty() && dev != f.dev) continue;
        found |= show(dev, idx);
    }
    if (!found) std::fprintf(stderr, "Wrong device name\n");
    return found;
}

bool dev_show(Out* out, const Filter& f) {
    return each_dev(f, [&](const std::string& dev, unsigned idx) {
        Row row{{"ifindex", std::to_string(idx), true}, {"ifname", dev, false}};
        std::string text = std::to_string(idx) + ": " + dev + ": ";
        auto add = [&](const char* key, const std::string& v) {
            if (v.empty()) return;
            row.push_back({key, v, false});
            text += std::string(key) + " " + v + " ";
        };
        add("node_type", node_type_name(leading_number(first_line(kSys + dev + "/node_type"))));
        auto ports = entries(kSys + dev + "/ports");
        if (!ports.empty())
            if (const char* p =
                    protocol_name(first_line(kSys + dev + "/ports/" + ports[0] + "/link_layer")))
                add("protocol", p);
        add("fw", first_line(kSys + dev + "/fw_ver"));
        add("node_guid", first_line(kSys + dev + "/node_guid"));
        add("sys_image_guid", first_line(kSys + dev + "/sys_image_guid"));
        if (text.back() == ' ') text.pop_back();
        out->rows.push_back(row);
        out->lines.push_back(text);
        return true;
    });
}

bool link_show(Out* out, const Filter& f) {
    return each_dev(f, [&](const std::string& dev, unsigned idx) {
        bool found = false;
        for (const std::string& port : entries(kSys + dev + "/ports")) {
            unsigned pn = unsigned(std::atoi(port.c_str()));
            if (f.port && pn != f.port) continue;
            found = true;
            std::string base = kSys + dev + "/ports/" + port;
            Row row{{"ifindex", std::to_string(idx), true},
                    {"ifname", dev, false},
                    {"port", std::to_string(pn), true}};
            std::string text = "link " + dev + "/" + std::to_string(pn) + " ";
            std::string state = state_name(leading_number(first_line(base + "/state")));
            std::string phys = phys_state_name(leading_number(first_line(base + "/phys_state")));
            row.push_back({"state", state, false});
            row.push_back({"physical_state", phys, false});
            text += "state " + state + " physical_state " + phys + " ";
            std::string nd = port_netdev(dev, port);
            if (!nd.empty()) {
                std::string ndi = first_line("/sys/class/net/" + nd + "/ifindex");
                row.push_back({"netdev", nd, false});
                if (!ndi.empty()) row.push_back({"netdev_index", ndi, true});
                text += "netdev " + nd + " ";
                if (out->details && !ndi.empty()) text += "netdev_index " + ndi + " ";
            }
            text.pop_back();
            out->rows.push_back(row);
            out->lines.push_back(text);
        }
        return found;
    });
}

// The real tool: the host's `rdma`.
int pass_on(char** argv) {
    std::string real = cli::next_on_path("rdma");
    if (!real.empty()) execv(real.c_str(), argv);
    std::fprintf(stderr,
                 "rdma: only `rdma dev` and `rdma link` are answered for uroce devices, and "
                 "no other rdma tool is on PATH\n");
    return 1;
}

int usage() {
    std::fprintf(stderr,
                 "Usage: rdma [ OPTIONS ] OBJECT { COMMAND | help }\n"
                 "where  OBJECT := { dev | link | resource | system | statistic | help }\n"
                 "       OPTIONS := { -V[ersion] | -d[etails] | -j[son] | -p[retty]}\n"
                 "(uroce run: dev and link from the system view, link add NAME type rxe netdev "
                 "IF and link delete NAME as uroce start and stop; the rest from the host's "
                 "tool)\n");
    return 1;
}

bool is_option(const char* a, const char* name) {
    // iproute2 takes any prefix of the option's name, with one dash or two.
    if (a[0] != '-') return false;
    const char* s = a + (a[1] == '-' ? 2 : 1);
    return *s && std::strncmp(name, s, std::strlen(s)) == 0;
}

}  // namespace

unsigned device_index(const std::string& dev) {
    unsigned place = 0;
    for (const std::string& d : entries(kSys)) {
        if (d == dev) return dev_index(d, place);
        ++place;
    }
    return place;
}

int run(int argc, char** argv) {
    Out out;
    // Options may come anywhere (iproute2 parses them with getopt_long, which permutes).
    std::vector<std::string> words;
    for (int i = 1; i < argc; ++i) {
        if (argv[i][0] != '-' || !argv[i][1]) {
            words.push_back(argv[i]);
        } else if (is_option(argv[i], "json")) {
            out.json = true;
        } else if (is_option(argv[i], "pretty")) {
            out.pretty = true;
        } else if (is_option(argv[i], "details")) {
            out.details = true;
        } else {
            return pass_on(argv);  // -V, -b, -n, -r, -f: the real tool's business
        }
    }
    if (words.empty()) return usage();
    const std::string& object = words[0];
    const bool is_res = std::string("resource").rfind(object, 0) == 0 && object.size() >= 3;
    const bool is_stat = std::string("statistic").rfind(object, 0) == 0 && object.size() >= 4;
    if (is_res || is_stat) {
        std::vector<std::string> rest(words.begin() + 1, words.end());
        int r = is_res ? res(rest, out.json, out.pretty) : statistic(rest, out.json, out.pretty);
        if (r >= 0) return r;
        return pass_on(argv);
    }
    bool is_dev = object == "dev" || object == "device";
    bool is_link = object == "link";
    if (!is_dev && !is_link) return pass_on(argv);
    std::string cmd = words.size() > 1 ? words[1] : "show";
    if (cmd == "help") return usage();
    // iproute2 takes a prefix of a command's name ("del").
    auto is = [&](const char* full) { return std::string(full).rfind(cmd, 0) == 0; };
    std::vector<std::string> rest(words.begin() + std::min<size_t>(2, words.size()), words.end());
    if (is_link && is("add")) return link_add(rest, usage);
    if (is_link && is("delete")) return link_delete(rest);
    if (cmd != "show" && cmd != "list") return pass_on(argv);  // dev set, link set
    Filter f;
    if (words.size() > 2) {
        const std::string& name = words[2];
        size_t slash = name.find('/');
        f.dev = name.substr(0, slash);
        if (slash != std::string::npos) f.port = unsigned(std::atoi(name.c_str() + slash + 1));
    }
    bool ok = is_dev ? dev_show(&out, f) : link_show(&out, f);
    if (!ok) return 1;
    out.print();
    return 0;
}

}  // namespace uroce::rdmatool
