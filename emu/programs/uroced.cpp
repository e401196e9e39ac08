// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// uroced: one process = one uroce HCA. Usually started by `uroce start` (or by the
// verbs library when no device is running); runs in the foreground.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <asio.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "emu/abi/runtime.h"
#include "emu/control/control_server.h"
#include "emu/engine/device.h"
#include "emu/engine/port_mtu.h"
#include "net/endpoint.h"

using namespace uroce;

static void usage() {
    std::fprintf(stderr,
                 "usage: uroced [--name NAME] [--addr ADDR[,ADDR...]]... [--port UDP_PORT]\n"
                 "              [--pcap FILE] [--pcap-max BYTES] [--faults SPEC] [--nice N]\n"
                 "              [--poll-us US] [--offload on|off] [--icrc-nodf on|off]\n");
}

// The device stands for hardware: its peers' ACK timers (4.096 us x 2^timeout, retry_cnt
// times) assume it answers. On a loaded host the scheduler let a device's engine wait over a
// second behind compile jobs, with the packets its peer retransmitted queued in its socket,
// while the peer's QP spent every retry (timeout 14, retry_cnt 7: 0.54 s) and failed with
// IBV_WC_RETRY_EXC_ERR (docs/faults.md, "A loaded host"). So the device's threads run at a
// higher priority: their nice value, and, when the device leads its own session (`uroce start`
// makes it one), its autogroup's, which is what the scheduler weighs against other sessions.
// Only where the process may (CAP_SYS_NICE, RLIMIT_NICE); otherwise it says so and runs as is.
static void raise_priority(int nice) {
    if (nice == 0) return;
    bool ok = setpriority(PRIO_PROCESS, 0, nice) == 0;  // threads started later inherit it
    int err = errno;
    if (ok && getsid(0) == getpid()) {
        std::ofstream ag("/proc/self/autogroup");
        if (ag) {
            ag << nice << std::flush;
            if (!ag) ok = false, err = errno;
        }
    }
    if (!ok)
        std::fprintf(stderr, "uroced: running at the default priority (nice %d refused: %s)\n",
                     nice, std::strerror(err));
}

// The device's addresses from --addr's comma-separated list: IPv4 or IPv6 (a link-local one
// with %INTERFACE, all of them on one interface), or an interface's name for every address it
// has at start; each once; the first is the device's first address. Returns why not, or "".
static std::string set_addresses(const std::string& list, emu::DeviceConfig* cfg) {
    std::vector<net::Endpoint> given;
    for (const std::string& a : net::split_list(list)) {
        net::Endpoint ep;
        if (net::parse_address(a, cfg->port, &ep)) {
            given.push_back(ep);
        } else if (!a.empty() && if_nametoindex(a.c_str())) {
            std::vector<net::Endpoint> v = net::interface_addresses(a, cfg->port);
            if (v.empty()) return "interface " + a + " has no IPv4 or IPv6 address";
            given.insert(given.end(), v.begin(), v.end());
        } else {
            return "bad address " + a + " (IPv4, IPv6 or an interface's name)";
        }
    }
    std::vector<net::Endpoint> all;
    for (const net::Endpoint& ep : given) {
        const std::string a = ep.addr_str();
        if (ep.multicast() || (!ep.is_v6() && ep.v4_be() == 0))
            return "bad address " + a + " (IPv4 or IPv6)";
        const bool link_local =
            ep.is_v6() && ep.addr6()[0] == 0xfe && (ep.addr6()[1] & 0xc0) == 0x80;
        if (link_local && !ep.v6.sin6_scope_id)
            return "link-local address " + a + " needs %INTERFACE";
        if (link_local && cfg->ipv6_scope && cfg->ipv6_scope != ep.v6.sin6_scope_id)
            return "link-local addresses on two interfaces (" + a + ")";
        if (link_local) cfg->ipv6_scope = ep.v6.sin6_scope_id;
        for (const net::Endpoint& x : all)
            if (x.same_addr(ep)) return "address " + a + " given twice";
        all.push_back(ep);
    }
    if (all.size() > abi::kGidTblLen) return "more than 16 addresses";
    if (all[0].is_v6())
        std::memcpy(cfg->ipv6, all[0].addr6(), 16);
    else
        cfg->ipv4_be = all[0].v4_be();
    cfg->more.assign(all.begin() + 1, all.end());
    return "";
}

int main(int argc, char** argv) {
    emu::DeviceConfig cfg;
    std::string addr;  // every --addr, comma-separated
    int nice = -10;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc) {
                usage();
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--name")
            cfg.name = val();
        else if (a == "--addr")
            addr += (addr.empty() ? "" : ",") + std::string(val());
        else if (a == "--port")
            cfg.port = uint16_t(std::strtoul(val(), nullptr, 10));
        else if (a == "--pcap")
            cfg.pcap = val();
        else if (a == "--pcap-max")
            cfg.pcap_max = std::strtoull(val(), nullptr, 10);
        else if (a == "--faults") {
            std::string why;
            if (!net::parse_fault_spec(val(), &cfg.faults, &why)) {
                std::fprintf(stderr, "uroced: bad --faults: %s\n", why.c_str());
                return 2;
            }
        } else if (a == "--poll-us") {
            const char* v = val();
            char* end = nullptr;
            unsigned long us = std::strtoul(v, &end, 10);
            if (!*v || *end || *v == '-' || us > emu::DeviceConfig::kMaxPollUs) {
                std::fprintf(stderr, "uroced: --poll-us %s is not in 0..%u\n", v,
                             emu::DeviceConfig::kMaxPollUs);
                return 2;
            }
            cfg.poll_us = uint32_t(us);
        } else if (a == "--offload" || a == "--icrc-nodf") {
            std::string v = val();
            if (v != "on" && v != "off") {
                std::fprintf(stderr, "uroced: %s %s is not on or off\n", a.c_str(), v.c_str());
                return 2;
            }
            (a == "--offload" ? cfg.offload : cfg.icrc_nodf) = v == "on";
        } else if (a == "--nice") {
            nice = std::atoi(val());
            if (nice < -20 || nice > 19) {
                std::fprintf(stderr, "uroced: --nice %d is not in -20..19\n", nice);
                return 2;
            }
        } else {
            usage();
            return 2;
        }
    }
    if (addr.empty()) addr = "127.0.0.1";
    if (std::string why = set_addresses(addr, &cfg); !why.empty()) {
        std::fprintf(stderr, "uroced: %s\n", why.c_str());
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (std::string why = abi::check_runtime_dir(true); !why.empty()) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 1;
    }
    raise_priority(nice);

    emu::Device dev(cfg);
    if (int e = dev.start()) {
        std::fprintf(stderr, "uroced: cannot start %s on %s:%u: %s\n", cfg.name.c_str(),
                     addr.c_str(), cfg.port, std::strerror(e));
        return 1;
    }
    // Containers' default seccomp profiles (Docker's since 25.0) and kernel.io_uring_disabled
    // can forbid io_uring: the device then runs without it, and says so (docs/ci.md).
    if (!dev.wire().io().uses_io_uring()) {
        if (int r = dev.wire().io().io_uring_errno())
            std::fprintf(stderr,
                         "uroced: io_uring is not available here (%s): a container's seccomp "
                         "profile or the kernel.io_uring_disabled sysctl forbids it; packets go "
                         "through sendmmsg/recvmmsg instead (docs/ci.md)\n",
                         std::strerror(r));
        else
            std::fprintf(stderr,
                         "uroced: UROCE_NO_IO_URING is set: packets go through "
                         "sendmmsg/recvmmsg, not io_uring\n");
    }
    asio::io_context io;
    emu::ControlServer server(io, dev);
    std::string sock = abi::socket_path(cfg.name);
    if (int e = server.listen(sock)) {
        std::fprintf(stderr, "uroced: cannot listen on %s: %s\n", sock.c_str(), std::strerror(e));
        return 1;
    }
    abi::DeviceInfo info;
    info.name = cfg.name;
    info.addr = addr;
    info.port = cfg.port;
    info.pid = getpid();
    info.guid = dev.guid();
    info.pcap = cfg.pcap;
    if (!abi::write_info(info)) {
        std::fprintf(stderr, "uroced: cannot write %s\n", abi::info_path(cfg.name).c_str());
        return 1;
    }
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](asio::error_code, int) { io.stop(); });
    ibv_mtu mtu = dev.refresh_port_mtu();
    std::fprintf(stderr, "uroced: %s up on %s:%u (pid %d), active MTU %u\n", cfg.name.c_str(),
                 addr.c_str(), cfg.port, int(getpid()), emu::mtu_bytes(mtu));
    if (dev.config().faults.any())  // with the seed the device chose, so a run can be replayed
        std::fprintf(stderr, "uroced: faults %s\n",
                     net::format_fault_spec(dev.config().faults).c_str());
    io.run();
    unlink(abi::info_path(cfg.name).c_str());
    unlink(sock.c_str());
    dev.stop();
    return 0;
}
