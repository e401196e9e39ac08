// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce run` and `uroce env`: programs over uroce, in the system view or a CI job (docs/ci.md).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"
#include "emu/sysview/system_view.h"

namespace uroce::cli {

namespace {

// Runs argv (never returns but on failure): in the system view unless `view` is false,
// with the drop-in libraries first on LD_LIBRARY_PATH.
int exec_command(bool view, char* const* argv) {
    // Both read before the view's mount namespace: /proc/self/exe names the file as the
    // namespace it was started in sees it, which under a chroot is no path in the new one.
    std::string lib = lib_dir();
    std::string tools = tools_dir();
    // The files the kernel would provide for the devices (docs/system-view.md); the devices
    // already run, outside the namespace.
    bool in_view = false;
    if (view) {
        std::string why = sysview::enter(lib);
        in_view = why.empty();
        if (!in_view)
            std::fprintf(stderr, "uroce: running without the system view: %s\n", why.c_str());
    }
    const char* old = getenv("LD_LIBRARY_PATH");
    std::string path = lib + (old && *old ? ":" + std::string(old) : "");
    setenv("LD_LIBRARY_PATH", path.c_str(), 1);
    if (!tools.empty()) setenv("PATH", path_with(tools, getenv("PATH")).c_str(), 1);
    // The library starts no device of its own here: one runs (uroce run started it if none
    // did), and a device deleted (`rdma link delete`) stays gone, as a kernel's.
    setenv("UROCE_NO_AUTOSTART", "1", 1);
    signal(SIGPIPE, SIG_DFL);  // main() ignores it; an ignored signal stays ignored over exec
    // In the view, this process stays to keep it in step with the devices, CMD its child.
    pid_t child = in_view ? fork() : 0;
    if (child > 0) return sysview::follow(lib, child);
    execvp(argv[0], argv);
    std::fprintf(stderr, "uroce: cannot run %s: %s\n", argv[0], std::strerror(errno));
    return 127;
}

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

}  // namespace

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
    // The device started because none ran: a set-up script's `rdma link add` on its
    // interface may replace it (emu/sysview/rdma_link.cpp).
    if (start && start_args.empty()) setenv("UROCE_RUN_DEVICE", dev.name.c_str(), 1);
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

}  // namespace uroce::cli
