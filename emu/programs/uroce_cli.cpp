// uroce: the operator's tool. start/stop/list devices, run a program over uroce,
// and look inside a running device.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/programs/ladder_cli.h"
#include "emu/programs/rdma_tool.h"
#include "emu/programs/res_graph.h"
#include "emu/programs/system_view.h"
#include "net/fault_injector.h"

using namespace uroce;

namespace {

std::string exe_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    std::string p = buf;
    return p.substr(0, p.rfind('/'));
}

// `path` made absolute against the working directory (a file handed to a daemon, or written
// by a later step, whose own directory differs). "" when there is no working directory.
std::string absolute(const std::string& path) {
    if (path.empty() || path[0] == '/') return path;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return "";
    return std::string(cwd) + "/" + path;
}

// The programs and libraries are found relative to this executable, so an installed prefix
// can be moved (docs/install.md): first where the install rules put them, then the build
// tree's build/bin and build/lib.
std::string lib_dir() {
    std::string lib = exe_dir() + "/" UROCE_BIN_TO_LIB;
    if (access((lib + "/libibverbs.so.1").c_str(), R_OK) != 0) lib = exe_dir() + "/../lib";
    if (char* real = realpath(lib.c_str(), nullptr)) {
        lib = real;
        free(real);
    }
    return lib;
}

// `list` (a colon-separated path) with `value` in front, unless it is already in it.
std::string path_with(const std::string& value, const char* list) {
    std::string l = list ? list : "";
    if ((":" + l + ":").find(":" + value + ":") != std::string::npos) return l;
    return l.empty() ? value : value + ":" + l;
}

// Commands that ask the kernel about RDMA devices rather than libibverbs (iproute2's
// `rdma link`, which pyverbs runs): links to this program, which `uroce run` puts first on
// PATH (emu/programs/rdma_tool.cpp). "" when they are not there.
std::string tools_dir() {
    std::string dir = exe_dir() + "/" UROCE_BIN_TO_DAEMON "/path";
    if (access((dir + "/rdma").c_str(), X_OK) != 0) dir = exe_dir() + "/../libexec/uroce/path";
    if (access((dir + "/rdma").c_str(), X_OK) != 0) return "";
    if (char* real = realpath(dir.c_str(), nullptr)) {
        dir = real;
        free(real);
    }
    return dir;
}

// `uroce cluster` is a script beside the daemon (emu/programs/uroce-cluster.sh): what it
// does is run ip(8) and this program, in that order, many times.
std::string cluster_script() {
    std::string installed = exe_dir() + "/" UROCE_BIN_TO_DAEMON "/cluster";
    if (access(installed.c_str(), X_OK) == 0) return installed;
    return exe_dir() + "/../libexec/uroce/cluster";
}

// Runs the cluster script with `args` (docs/cluster.md); it calls back this program by its
// path and finds clusters under the runtime directory.
int cmd_cluster(const std::vector<std::string>& args) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string rt = absolute(abi::runtime_base_dir());
    if (n <= 0 || rt.empty()) return 1;
    self[n] = 0;
    setenv("UROCE", self, 1);
    setenv("UROCE_RUNTIME_DIR", rt.c_str(), 1);
    std::string script = cluster_script();
    std::vector<char*> argv = {const_cast<char*>("bash"), script.data()};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    signal(SIGPIPE, SIG_DFL);
    execvp("bash", argv.data());
    std::fprintf(stderr, "uroce: cannot run %s: %s\n", script.c_str(), std::strerror(errno));
    return 127;
}

std::string daemon_path() {
    if (const char* d = getenv("UROCE_DAEMON")) return d;
    std::string installed = exe_dir() + "/" UROCE_BIN_TO_DAEMON "/uroced";
    if (access(installed.c_str(), X_OK) == 0) return installed;
    return exe_dir() + "/uroced";
}

int usage() {
    std::fprintf(stderr,
                 "usage:\n"
                 "  uroce start [--name N] [--addr ADDR]... [--port P] [--pcap FILE] "
                 "[--pcap-max BYTES]\n"
                 "              [--faults SPEC] [--poll-us US] [--offload on|off]\n"
                 "              [--icrc-nodf on|off]\n"
                 "  uroce stop [NAME]          stop NAME, or every device\n"
                 "  uroce list\n"
                 "  uroce res [NAME] [xrcd|srq|qp|mr|mw]...\n"
                 "                             objects of a device (QPs, CQs, MRs, memory\n"
                 "                             windows, PDs, SRQs, XRC domains); kind words\n"
                 "                             keep only those lines\n"
                 "  uroce res --graph [NAME...] [--pid P] -o FILE.svg\n"
                 "                             XRC domains as a graph: handles and their\n"
                 "                             processes, XRC SRQs, TGT QPs and the INI QPs\n"
                 "                             sending to them; --pid: P's PDs, MRs, QPs, CQs\n"
                 "  uroce counters [NAME]      packets/bytes by opcode and QP, drops\n"
                 "  uroce trace [-f] [NAME]... what changed: objects, QP states, failed calls\n"
                 "                             and why, async events, error completions, CM\n"
                 "                             messages; -f keeps following\n"
                 "  uroce capture start FILE [--max-bytes N] [NAME]\n"
                 "                             record every packet sent and received to a pcap;\n"
                 "                             with --max-bytes, FILE rotates to FILE.1\n"
                 "  uroce capture stop [NAME]  close the capture of NAME, or of every device\n"
                 "  uroce faults SPEC [NAME]   inject faults on NAME (or every device), e.g.\n"
                 "                             loss=0.02,dup=0.02,reorder=0.02,delay=100,\n"
                 "                             corrupt=0.01,seed=N,dir=rx|tx|both\n"
                 "  uroce faults off [NAME]    stop injecting faults\n"
                 "  uroce ladder [--from CAPTURE...] [--trace FILE] [--qp QPN...]\n"
                 "               [--time T0..T1] -o FILE.svg|FILE.html\n"
                 "                             a ladder diagram of the captures: a lane per QP,\n"
                 "                             an arrow per packet, retransmissions, drops,\n"
                 "                             CM messages, the trace's QP events; long runs\n"
                 "                             as bands (docs/ladder.md)\n"
                 "  uroce run [--no-view] [--trace FILE] [start options] -- CMD [ARGS...]\n"
                 "                             run CMD over uroce (starting a device if none\n"
                 "                             runs) where /dev/infiniband and\n"
                 "                             /sys/class/infiniband show the devices\n"
                 "                             (docs/system-view.md); --no-view: without them.\n"
                 "                             A device it starts stops when CMD ends; the\n"
                 "                             exit status is CMD's; --trace: the devices'\n"
                 "                             trace, once CMD has ended, to FILE\n"
                 "  uroce env [--github]       the environment later shells or CI steps need:\n"
                 "                             eval \"$(uroce env)\"; --github: lines for\n"
                 "                             $GITHUB_ENV (docs/ci.md)\n"
                 "  uroce cluster up N|down|list|hosts|exec HOST -- CMD|agent ...\n"
                 "                             N RDMA hosts in network namespaces, a device\n"
                 "                             on each (docs/cluster.md; uroce cluster help)\n"
                 "environment: UROCE_RUNTIME_DIR (where devices live; default\n"
                 "  $XDG_RUNTIME_DIR/uroce, else /tmp/uroce-UID; a directory of yours, mode "
                 "0700),\n"
                 "  UROCE_UDP_PORT\n");
    return 2;
}

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

// A device `uroce run` started for its command, and stops when the command ends.
struct OwnDevice {
    std::string name;
    pid_t pid = 0;
};

// Starts a device and returns once it accepts work. Prints its name, unless `own` is given:
// then the device is this process's child and ends with it (SIGTERM when it dies).
int cmd_start(std::vector<std::string> args, OwnDevice* own = nullptr) {
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

int cmd_dump(const std::vector<std::string>& all_args, bool counters_only) {
    // `uroce res [NAME] [xrcd|srq|qp|mr|mw]...`: the kind words keep only the lines that
    // start with them (docs/xrc.md, docs/memory-windows.md); the other words name devices.
    std::vector<std::string> args, kinds;
    for (const auto& a : all_args) {
        bool kind = a == "xrcd" || a == "srq" || a == "qp" || a == "mr" || a == "mw";
        (!counters_only && kind ? kinds : args).push_back(a);
    }
    auto devs = select(args);
    if (devs.empty()) {
        std::fprintf(stderr, "uroce: no device running\n");
        return 1;
    }
    for (auto& d : devs) {
        std::string text;
        if (int e = abi::simple_request(d.name, abi::Op::kDump, &text)) {
            std::fprintf(stderr, "uroce: %s: %s\n", d.name.c_str(), std::strerror(e));
            return 1;
        }
        if (!counters_only && !kinds.empty()) {
            for (size_t pos = 0; pos < text.size();) {
                size_t nl = text.find('\n', pos);
                std::string line = text.substr(pos, nl - pos);
                std::string first = line.substr(0, line.find(' '));
                for (const auto& k : kinds)
                    if (first == k) std::printf("%s\n", line.c_str());
                pos = nl == std::string::npos ? text.size() : nl + 1;
            }
            continue;
        }
        if (!counters_only) {
            std::fputs(text.c_str(), stdout);
            continue;
        }
        std::printf("device %s\n", d.name.c_str());
        size_t pos = 0;
        while (pos < text.size()) {
            size_t nl = text.find('\n', pos);
            std::string line = text.substr(pos, nl - pos);
            // counters, counters_op (by opcode), drop (by reason), qp_counters (per QP).
            if (line.rfind("counters", 0) == 0 || line.rfind("drop", 0) == 0 ||
                line.rfind("qp_counters", 0) == 0 || line.rfind("faults", 0) == 0)
                std::printf("%s\n", line.c_str());
            pos = nl == std::string::npos ? text.size() : nl + 1;
        }
    }
    return 0;
}

// Sends a kCapture message (path empty: stop). Returns 0 or an errno (transport or the
// device's verdict); *packets: what the previous capture wrote.
int capture_request(const std::string& name, const std::string& path, uint64_t max_bytes,
                    uint64_t* packets) {
    int fd = abi::connect_device(name);
    if (fd < 0) return -fd;
    auto req = std::make_unique<abi::CaptureReq>();
    std::memset(req.get(), 0, sizeof *req);
    req->op = abi::Op::kCapture;
    req->max_bytes = max_bytes;
    std::memcpy(req->path, path.data(), std::min(path.size(), sizeof req->path - 1));
    ssize_t n;
    do {
        n = send(fd, req.get(), sizeof *req, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != ssize_t(sizeof *req)) {
        int e = n < 0 ? errno : EPROTO;
        close(fd);
        return e;
    }
    abi::Response resp{};
    do {
        n = recv(fd, &resp, sizeof resp, 0);
    } while (n < 0 && errno == EINTR);
    int e = n < 0 ? errno : 0;
    close(fd);
    if (e) return e;
    if (n < ssize_t(offsetof(abi::Response, u) + sizeof(abi::CaptureResp))) return ENODEV;
    *packets = resp.u.capture.packets;
    return resp.err;
}

int cmd_capture(const std::vector<std::string>& args) {
    if (args.empty()) return usage();
    const std::string& what = args[0];
    std::vector<std::string> pos;
    uint64_t max_bytes = 0;
    for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--max-bytes") {
            if (what != "start" || i + 1 >= args.size()) return usage();
            const std::string& v = args[++i];
            char* end = nullptr;
            errno = 0;
            max_bytes = std::strtoull(v.c_str(), &end, 10);
            if (v.empty() || v[0] == '-' || *end != 0 || errno) {
                std::fprintf(stderr, "uroce: bad --max-bytes %s\n", v.c_str());
                return 2;
            }
        } else {
            pos.push_back(args[i]);
        }
    }
    if (what == "start") {
        if (pos.empty() || pos.size() > 2) return usage();
        std::string file = absolute(pos[0]);
        if (file.empty()) return 1;
        if (file.size() >= abi::kMaxCapturePath) {
            std::fprintf(stderr, "uroce: path too long\n");
            return 1;
        }
        auto devs = select(std::vector<std::string>(pos.begin() + 1, pos.end()));
        if (devs.empty()) {
            std::fprintf(stderr, "uroce: no device %s\n",
                         pos.size() > 1 ? pos[1].c_str() : "running");
            return 1;
        }
        if (devs.size() > 1) {
            std::fprintf(stderr, "uroce: %zu devices are running; name one\n", devs.size());
            return 1;
        }
        uint64_t before = 0;
        if (int e = capture_request(devs[0].name, file, max_bytes, &before)) {
            std::fprintf(stderr, "uroce: %s: capture to %s: %s\n", devs[0].name.c_str(),
                         file.c_str(), std::strerror(e));
            return 1;
        }
        if (!devs[0].pcap.empty())
            std::printf("%s: closed %s (%llu packets)\n", devs[0].name.c_str(),
                        devs[0].pcap.c_str(), (unsigned long long)before);
        std::printf("%s: capturing to %s", devs[0].name.c_str(), file.c_str());
        if (max_bytes)
            std::printf(" (rotating to %s.1 at %llu bytes)", file.c_str(),
                        (unsigned long long)max_bytes);
        std::printf("\n");
        return 0;
    }
    if (what == "stop") {
        auto devs = select(pos);
        if (devs.empty()) {
            std::fprintf(stderr, "uroce: no device %s\n", pos.empty() ? "running" : pos[0].c_str());
            return 1;
        }
        int rc = 0;
        for (auto& d : devs) {
            uint64_t packets = 0;
            if (int e = capture_request(d.name, "", 0, &packets)) {
                std::fprintf(stderr, "uroce: %s: %s\n", d.name.c_str(), std::strerror(e));
                rc = 1;
                continue;
            }
            if (d.pcap.empty())
                std::printf("%s: no capture running\n", d.name.c_str());
            else
                std::printf("%s: capture stopped, %llu packets written to %s\n", d.name.c_str(),
                            (unsigned long long)packets, d.pcap.c_str());
        }
        return rc;
    }
    return usage();
}

// uroce faults SPEC|off [NAME]: sends a kFaults message to NAME, or to every device.
int cmd_faults(const std::vector<std::string>& args) {
    if (args.empty() || args.size() > 2) return usage();
    net::FaultSpec spec;
    std::string why;
    if (!net::parse_fault_spec(args[0], &spec, &why)) {
        std::fprintf(stderr, "uroce: bad fault spec: %s\n", why.c_str());
        return 2;
    }
    if (args[0].size() >= abi::kMaxFaultSpec) {
        std::fprintf(stderr, "uroce: fault spec too long\n");
        return 2;
    }
    auto devs = select(std::vector<std::string>(args.begin() + 1, args.end()));
    if (devs.empty()) {
        std::fprintf(stderr, "uroce: no device %s\n",
                     args.size() > 1 ? args[1].c_str() : "running");
        return 1;
    }
    int rc = 0;
    for (auto& d : devs) {
        abi::FaultsReq req{};
        req.op = abi::Op::kFaults;
        std::memcpy(req.spec, args[0].data(), args[0].size());
        abi::Response resp{};
        int e = 0;
        int fd = abi::connect_device(d.name);
        if (fd < 0) {
            e = -fd;
        } else {
            ssize_t n;
            do {
                n = send(fd, &req, sizeof req, MSG_NOSIGNAL);
            } while (n < 0 && errno == EINTR);
            if (n != ssize_t(sizeof req)) e = n < 0 ? errno : EPROTO;
            if (!e) {
                do {
                    n = recv(fd, &resp, sizeof resp, 0);
                } while (n < 0 && errno == EINTR);
                if (n < 0)
                    e = errno;
                else if (n < ssize_t(offsetof(abi::Response, u) + sizeof(abi::FaultsResp)))
                    e = ENODEV;
                else
                    e = resp.err;
            }
            close(fd);
        }
        if (e) {
            std::fprintf(stderr, "uroce: %s: faults: %s\n", d.name.c_str(), std::strerror(e));
            rc = 1;
            continue;
        }
        spec.seed = resp.u.faults.seed;
        spec.has_seed = true;
        std::printf("%s: faults %s\n", d.name.c_str(), net::format_fault_spec(spec).c_str());
    }
    return rc;
}

// Runs argv (never returns but on failure): in the system view unless `view` is false,
// with the drop-in libraries first on LD_LIBRARY_PATH.
int exec_command(bool view, char* const* argv) {
    // Both read before the view's mount namespace: /proc/self/exe names the file as the
    // namespace it was started in sees it, which under a chroot is no path in the new one.
    std::string lib = lib_dir();
    std::string tools = tools_dir();
    // The files the kernel would provide for the devices (docs/system-view.md); the devices
    // already run, outside the namespace.
    if (view)
        if (std::string why = sysview::enter(lib); !why.empty())
            std::fprintf(stderr, "uroce: running without the system view: %s\n", why.c_str());
    const char* old = getenv("LD_LIBRARY_PATH");
    std::string path = lib + (old && *old ? ":" + std::string(old) : "");
    setenv("LD_LIBRARY_PATH", path.c_str(), 1);
    if (!tools.empty()) setenv("PATH", path_with(tools, getenv("PATH")).c_str(), 1);
    signal(SIGPIPE, SIG_DFL);  // main() ignores it; an ignored signal stays ignored over exec
    execvp(argv[0], argv);
    std::fprintf(stderr, "uroce: cannot run %s: %s\n", argv[0], std::strerror(errno));
    return 127;
}

int write_trace(const std::vector<std::string>& names, bool follow, FILE* out);

// `uroce run --trace FILE`: once CMD has ended, what the devices traced, in FILE. The
// device closes a session when it sees the socket hang up: the last lines (processes
// detaching, what they left) come once no session is open, or after a second.
int save_trace(const std::string& file) {
    for (int i = 0; i < 100; ++i) {
        bool open = false;
        for (auto& d : abi::list_devices()) {
            std::string text;
            open |= abi::simple_request(d.name, abi::Op::kDump, &text) == 0 &&
                    text.find("\ncounts sessions 0 ") == std::string::npos;
        }
        if (!open) break;
        usleep(10000);
    }
    FILE* f = fopen(file.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "uroce: --trace %s: %s\n", file.c_str(), std::strerror(errno));
        return 1;
    }
    int r = write_trace({}, false, f);
    return fclose(f) != 0 ? 1 : r;
}

pid_t g_command = 0;  // what SIGTERM and SIGHUP to `uroce run` are passed on to

// Stops the device `uroce run` started: asks it, then kills it if it does not go. Its log is
// removed when it exited cleanly, else kept (and named) for whoever looks into why.
void stop_own_device(const OwnDevice& dev) {
    abi::simple_request(dev.name, abi::Op::kShutdown, nullptr);
    int st = 0;
    pid_t got = 0;
    for (int i = 0; i < 500 && got == 0; ++i) {
        got = waitpid(dev.pid, &st, WNOHANG);
        if (got == 0) usleep(10000);
    }
    if (got == 0) {
        kill(dev.pid, SIGKILL);
        while (waitpid(dev.pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    unlink(abi::info_path(dev.name).c_str());
    unlink(abi::socket_path(dev.name).c_str());
    std::string log = abi::runtime_dir() + "/" + dev.name + ".log";
    if (got > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        unlink(log.c_str());
    else
        std::fprintf(stderr, "uroce: device %s did not stop cleanly (%s %d); its log: %s\n",
                     dev.name.c_str(), WIFSIGNALED(st) ? "signal" : "exit status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), log.c_str());
}

// `uroce run [options] -- CMD...`: CMD, and every process it starts, over the running
// devices. Where none runs (or start options are given) it starts one, and then CMD runs as
// a child: when CMD ends the device is stopped and its files leave the runtime directory,
// and the exit status is CMD's (128+N for a signal N), so a whole CI job can be one command
// (docs/ci.md). With --trace FILE, CMD is a child too, and the trace is saved after it.
int cmd_run(std::vector<std::string> args) {
    std::vector<std::string> start_args;
    std::string trace;
    bool view = true;
    size_t i = 0;
    for (; i < args.size() && args[i] != "--"; ++i) {
        if (args[i] == "--no-view") {
            view = false;
        } else if (args[i] == "--trace") {
            if (i + 2 >= args.size()) return usage();
            trace = absolute(args[++i]);
            if (trace.empty()) return usage();
        } else {
            start_args.push_back(args[i]);
        }
    }
    if (i + 1 >= args.size()) return usage();
    std::vector<char*> argv;
    for (size_t k = i + 1; k < args.size(); ++k) argv.push_back(args[k].data());
    argv.push_back(nullptr);
    bool start = abi::list_devices().empty() || !start_args.empty();
    if (!start && trace.empty()) return exec_command(view, argv.data());

    // A SIGTERM or SIGHUP (a cancelled CI job) is sent to this process alone, so it is
    // passed on to CMD; held until CMD runs, so that one that comes early is not lost. A
    // terminal's ^C or ^\ reaches CMD's whole process group: CMD decides what it means, and
    // this process cleans up after it.
    sigset_t term, old_mask;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGHUP);
    sigprocmask(SIG_BLOCK, &term, &old_mask);
    OwnDevice dev;
    if (start)
        if (int r = cmd_start(start_args, &dev)) return r;
    struct sigaction ign = {}, old_int = {}, old_quit = {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    pid_t child = fork();
    if (child < 0) {
        std::fprintf(stderr, "uroce: fork: %s\n", std::strerror(errno));
        if (start) stop_own_device(dev);
        return 1;
    }
    if (child == 0) {
        sigaction(SIGINT, &old_int, nullptr);
        sigaction(SIGQUIT, &old_quit, nullptr);
        sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        _exit(exec_command(view, argv.data()));
    }
    g_command = child;
    struct sigaction fwd = {};
    fwd.sa_handler = [](int sig) { kill(g_command, sig); };
    sigaction(SIGTERM, &fwd, nullptr);
    sigaction(SIGHUP, &fwd, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    if (!trace.empty()) save_trace(trace);
    if (start) stop_own_device(dev);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

// `uroce env [--github]`: the environment under which later commands (another CI step, a
// shell that evals it) use the devices of this runtime directory through the drop-in
// libraries. Shell form: export lines; --github: NAME=value lines for $GITHUB_ENV (PATH is
// left to $GITHUB_PATH, docs/ci.md).
int cmd_env(const std::vector<std::string>& args) {
    bool github = false;
    for (const auto& a : args) {
        if (a == "--github")
            github = true;
        else
            return usage();
    }
    std::string rt = absolute(abi::runtime_dir());
    if (rt.empty()) return 1;
    std::vector<std::pair<std::string, std::string>> vars = {
        {"LD_LIBRARY_PATH", path_with(lib_dir(), getenv("LD_LIBRARY_PATH"))},
        {"UROCE_RUNTIME_DIR", rt},
    };
    // The port of this job's devices, for a device a later step starts.
    if (const char* port = getenv("UROCE_UDP_PORT"); port && *port)
        vars.push_back({"UROCE_UDP_PORT", port});
    if (!github) vars.push_back({"PATH", path_with(exe_dir(), getenv("PATH"))});
    for (const auto& [name, value] : vars) {
        if (github) {
            if (value.find('\n') != std::string::npos) {
                std::fprintf(stderr, "uroce: %s holds a newline; $GITHUB_ENV cannot take it\n",
                             name.c_str());
                return 1;
            }
            std::printf("%s=%s\n", name.c_str(), value.c_str());
            continue;
        }
        std::string q;
        for (char c : value) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        std::printf("export %s='%s'\n", name.c_str(), q.c_str());
    }
    if (abi::list_devices().empty())
        std::fprintf(stderr,
                     "uroce: no device runs in %s yet (`uroce start` starts one; a program "
                     "opening the library starts one unless UROCE_NO_AUTOSTART is set)\n",
                     rt.c_str());
    return 0;
}

// One device's trace lines after `*since`, as "TIME DEVICE TEXT" lines appended to out;
// advances *since. False when the device cannot be asked (it stopped).
bool fetch_trace(const std::string& dev, uint64_t* since, std::vector<std::string>* out) {
    for (;;) {
        abi::Request req{};
        req.op = abi::Op::kTrace;
        req.u.trace.since = *since;
        std::string text;
        if (abi::simple_request(dev, req, &text) != 0) return false;
        unsigned long long last = 0;
        if (std::sscanf(text.c_str(), "last %llu", &last) != 1) return false;
        if (last == *since) return true;
        size_t pos = text.find('\n');
        while (pos != std::string::npos && pos + 1 < text.size()) {
            size_t nl = text.find('\n', pos + 1);
            std::string line = text.substr(pos + 1, nl == std::string::npos ? nl : nl - pos - 1);
            pos = nl;
            unsigned long long lost = 0;
            size_t sp = line.find(' ');
            if (sp == std::string::npos) continue;
            std::string rest = line.substr(sp + 1);
            if (std::sscanf(rest.c_str(), "lost %llu", &lost) == 1) {
                out->push_back("-               " + dev + " " + std::to_string(lost) +
                               " earlier lines were overwritten (the device keeps the last " +
                               "4096)");
                continue;
            }
            size_t sp2 = rest.find(' ');
            if (sp2 == std::string::npos) continue;
            out->push_back(rest.substr(0, sp2) + " " + dev + " " + rest.substr(sp2 + 1));
        }
        *since = last;
    }
}

// `uroce trace [-f] [NAME]...` (docs/trace.md): every retained line of the devices, oldest
// first; with -f, then new lines as they come, until every device has stopped.
int write_trace(const std::vector<std::string>& names, bool follow, FILE* out) {
    auto devs = select(names);
    if (devs.empty()) {
        std::fprintf(stderr, "uroce: no device running\n");
        return 1;
    }
    std::vector<uint64_t> since(devs.size(), 0);
    std::vector<bool> up(devs.size(), true);
    for (bool first = true;; first = false) {
        std::vector<std::string> lines;
        size_t live = 0;
        for (size_t i = 0; i < devs.size(); ++i) {
            if (up[i] && !fetch_trace(devs[i].name, &since[i], &lines)) {
                up[i] = false;
                if (first) {
                    std::fprintf(stderr, "uroce: %s does not answer\n", devs[i].name.c_str());
                    return 1;
                }
            }
            live += up[i];
        }
        // Lines of several devices, interleaved by time (each device's are in order already).
        std::stable_sort(lines.begin(), lines.end(),
                         [](const std::string& a, const std::string& b) {
                             return a.compare(0, 15, b, 0, 15) < 0;
                         });
        for (const auto& l : lines) std::fprintf(out, "%s\n", l.c_str());
        std::fflush(out);
        if (!follow || live == 0) return 0;
        usleep(100000);
    }
}

int cmd_trace(const std::vector<std::string>& args) {
    bool follow = false;
    std::vector<std::string> names;
    for (const auto& a : args) {
        if (a == "-f" || a == "--follow")
            follow = true;
        else
            names.push_back(a);
    }
    return write_trace(names, follow, stdout);
}

}  // namespace

int main(int argc, char** argv) {
    // Started as `rdma` (the link `uroce run` puts on PATH): iproute2's rdma for the view.
    const char* base = std::strrchr(argv[0], '/');
    if (std::strcmp(base ? base + 1 : argv[0], "rdma") == 0) return rdmatool::run(argc, argv);
    // As `uroce-cluster-agent` (beside `rdma`): a launcher's remote shell (docs/cluster.md).
    if (std::strcmp(base ? base + 1 : argv[0], "uroce-cluster-agent") == 0) {
        std::vector<std::string> a = {"agent"};
        a.insert(a.end(), argv + 1, argv + argc);
        return cmd_cluster(a);
    }
    if (argc < 2) return usage();
    using Args = std::vector<std::string>;
    struct Command {
        const char* name;
        int (*run)(const Args&);
    };
    static const Command kCommands[] = {
        {"start", [](const Args& a) { return cmd_start(a); }},
        {"stop", cmd_stop},
        {"list", [](const Args&) { return cmd_list(); }},
        {"res",
         [](const Args& a) {
             if (std::find(a.begin(), a.end(), "--graph") != a.end())
                 return resgraph::cmd_res_graph(a);
             return cmd_dump(a, false);
         }},
        {"counters", [](const Args& a) { return cmd_dump(a, true); }},
        {"run", [](const Args& a) { return cmd_run(a); }},
        {"env", cmd_env},
        {"cluster", cmd_cluster},
        {"capture", cmd_capture},
        {"faults", cmd_faults},
        {"trace", cmd_trace},
        {"ladder", ladder::cmd_ladder},
    };
    std::string cmd = argv[1];
    Args args(argv + 2, argv + argc);
    signal(SIGPIPE, SIG_IGN);
    for (const Command& c : kCommands) {
        if (cmd != c.name) continue;
        // Every command trusts what the runtime directory holds (a device's socket, the pid
        // to signal, the log to write): none runs in one that someone else controls.
        if (std::string why =
                abi::check_runtime_dir(cmd == "start" || cmd == "run" || cmd == "cluster");
            !why.empty()) {
            std::fprintf(stderr, "%s\n", why.c_str());
            return 1;
        }
        return c.run(args);
    }
    return usage();
}
