// uroced: one process = one uroce HCA. Usually started by `uroce start` (or by the
// verbs library when no device is running); runs in the foreground.
#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include <asio.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "emu/abi/runtime.h"
#include "emu/control_server.h"
#include "emu/device.h"

using namespace uroce;

static void usage() {
    std::fprintf(stderr,
                 "usage: uroced [--name NAME] [--addr IPV4] [--port UDP_PORT]\n"
                 "              [--pcap FILE] [--pcap-max BYTES] [--faults SPEC]\n");
}

int main(int argc, char** argv) {
    emu::DeviceConfig cfg;
    std::string addr = "127.0.0.1";
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
            addr = val();
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
        } else {
            usage();
            return 2;
        }
    }
    in_addr ia{};
    if (inet_pton(AF_INET, addr.c_str(), &ia) != 1) {
        std::fprintf(stderr, "uroced: bad IPv4 address %s\n", addr.c_str());
        return 2;
    }
    cfg.ipv4_be = ia.s_addr;
    signal(SIGPIPE, SIG_IGN);
    if (std::string why = abi::check_runtime_dir(true); !why.empty()) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 1;
    }

    emu::Device dev(cfg);
    if (int e = dev.start()) {
        std::fprintf(stderr, "uroced: cannot start %s on %s:%u: %s\n", cfg.name.c_str(),
                     addr.c_str(), cfg.port, std::strerror(e));
        return 1;
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
    std::fprintf(stderr, "uroced: %s up on %s:%u (pid %d)\n", cfg.name.c_str(), addr.c_str(),
                 cfg.port, int(getpid()));
    if (dev.config().faults.any())  // with the seed the device chose, so a run can be replayed
        std::fprintf(stderr, "uroced: faults %s\n",
                     net::format_fault_spec(dev.config().faults).c_str());
    io.run();
    unlink(abi::info_path(cfg.name).c_str());
    unlink(sock.c_str());
    dev.stop();
    return 0;
}
