// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce start`, `uroce stop`, `uroce list`: the devices of the runtime directory.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"
#include "net/fault_injector.h"

namespace uroce::cli {

namespace {

bool wait_gone(pid_t pid, int ms) {
    for (int i = 0; i < ms / 10; ++i) {
        if (!abi::process_alive(pid)) return true;  // a zombie init has yet to reap is gone
        usleep(10000);
    }
    return false;
}

std::string free_name() {
    std::set<std::string> used;
    for (auto& d : abi::list_devices()) used.insert(d.name);
    for (int i = 0;; ++i) {
        std::string n = "uroce" + std::to_string(i);
        if (!used.count(n)) return n;
    }
}

}  // namespace

// Starts a device and returns once it accepts work. Prints its name, unless `own` is given:
// then the device is this process's child and ends with it (SIGTERM when it dies).
int cmd_start(std::vector<std::string> args, OwnDevice* own) {
    std::string name, addr, port, pcap, pcap_max, faults, poll_us, offload, icrc_nodf;
    if (const char* p = getenv("UROCE_UDP_PORT")) port = p;
    for (size_t i = 0; i < args.size(); ++i) {
        auto val = [&](std::string& out) {
            if (i + 1 >= args.size()) return false;
            out = args[++i];
            return true;
        };
        bool ok = true;
        if (args[i] == "--name")
            ok = val(name);
        else if (args[i] == "--addr") {  // again: more addresses (uroced takes a list)
            std::string a;
            ok = val(a);
            addr += (addr.empty() ? "" : ",") + a;
        } else if (args[i] == "--port")
            ok = val(port);
        else if (args[i] == "--pcap")
            ok = val(pcap);
        else if (args[i] == "--pcap-max")
            ok = val(pcap_max);
        else if (args[i] == "--faults")
            ok = val(faults);
        else if (args[i] == "--poll-us")  // checked by uroced, whose log says why it refused
            ok = val(poll_us);
        else if (args[i] == "--offload")  // on or off, checked by uroced
            ok = val(offload);
        else if (args[i] == "--icrc-nodf")  // on or off, checked by uroced
            ok = val(icrc_nodf);
        else
            ok = false;
        if (!ok) return usage();
    }
    if (!faults.empty()) {
        net::FaultSpec spec;
        std::string why;
        if (!net::parse_fault_spec(faults, &spec, &why)) {
            std::fprintf(stderr, "uroce: bad --faults: %s\n", why.c_str());
            return 2;
        }
    }
    if (name.empty()) name = free_name();
    abi::DeviceInfo existing;
    if (abi::read_info(name, &existing) && abi::process_alive(existing.pid)) {
        std::fprintf(stderr, "uroce: device %s is already running (pid %d)\n", name.c_str(),
                     int(existing.pid));
        return 1;
    }
    if (std::string a = absolute(pcap); !a.empty()) pcap = a;
    std::string daemon = daemon_path();
    if (addr.empty()) addr = "127.0.0.1";
    std::vector<std::string> argv = {daemon, "--name", name, "--addr", addr};
    if (!port.empty()) argv.insert(argv.end(), {"--port", port});
    if (!pcap.empty()) argv.insert(argv.end(), {"--pcap", pcap});
    if (!pcap_max.empty()) argv.insert(argv.end(), {"--pcap-max", pcap_max});
    if (!faults.empty()) argv.insert(argv.end(), {"--faults", faults});
    if (!poll_us.empty()) argv.insert(argv.end(), {"--poll-us", poll_us});
    if (!offload.empty()) argv.insert(argv.end(), {"--offload", offload});
    if (!icrc_nodf.empty()) argv.insert(argv.end(), {"--icrc-nodf", icrc_nodf});
    std::string log = abi::runtime_dir() + "/" + name + ".log";

    const pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        setsid();
        sigset_t none;  // whatever the caller holds (uroce run holds SIGTERM until CMD runs)
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        if (own && (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)) _exit(1);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        // Nothing else of the caller's: a CI step's pipe held open by the device would keep
        // the step from ending.
        close_range(3, ~0U, 0);
        std::vector<char*> cargv;
        for (auto& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        execv(daemon.c_str(), cargv.data());
        std::perror("uroce: exec uroced");
        _exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
        int st;
        if (waitpid(child, &st, WNOHANG) == child) {
            std::fprintf(stderr, "uroce: device %s failed to start (see %s):\n", name.c_str(),
                         log.c_str());
            if (FILE* f = fopen(log.c_str(), "r")) {
                char line[512];
                while (fgets(line, sizeof line, f)) std::fputs(line, stderr);
                fclose(f);
            }
            return 1;
        }
        abi::DeviceInfo info;
        if (abi::read_info(name, &info) && info.pid == child) {
            int fd = abi::connect_device(name);
            if (fd >= 0) {
                close(fd);
                if (own) {
                    own->name = name;
                    own->pid = child;
                } else {
                    std::printf("%s\n", name.c_str());
                }
                return 0;
            }
        }
        usleep(10000);
    }
    std::fprintf(stderr, "uroce: device %s did not come up within 10 s\n", name.c_str());
    kill(child, SIGKILL);
    return 1;
}

std::vector<abi::DeviceInfo> select(const std::vector<std::string>& args) {
    auto all = abi::list_devices();
    if (args.empty()) return all;
    std::vector<abi::DeviceInfo> out;
    for (auto& d : all)
        for (auto& a : args)
            if (d.name == a) out.push_back(d);
    return out;
}

std::vector<abi::DeviceInfo> select_some(const std::vector<std::string>& args) {
    auto devs = select(args);
    if (devs.empty())
        std::fprintf(stderr, "uroce: no device %s\n", args.empty() ? "running" : args[0].c_str());
    return devs;
}

int cmd_stop(const std::vector<std::string>& args) {
    auto devs = select(args);
    if (!args.empty() && devs.empty()) {
        std::fprintf(stderr, "uroce: no device %s\n", args[0].c_str());
        return 1;
    }
    for (auto& d : devs) {
        abi::simple_request(d.name, abi::Op::kShutdown, nullptr);
        if (!wait_gone(d.pid, 5000)) {
            kill(d.pid, SIGKILL);
            wait_gone(d.pid, 2000);
        }
        unlink(abi::info_path(d.name).c_str());
        unlink(abi::socket_path(d.name).c_str());
        std::printf("stopped %s\n", d.name.c_str());
    }
    return 0;
}

int cmd_list() {
    for (auto& d : abi::list_devices())
        std::printf("%-10s %-15s port %-5u pid %-7d pcap %s\n", d.name.c_str(), d.addr.c_str(),
                    d.port, int(d.pid), d.pcap.empty() ? "-" : d.pcap.c_str());
    return 0;
}

}  // namespace uroce::cli
