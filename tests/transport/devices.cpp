// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The two devices transport_tests runs against, and the test binary's main.
//
//   transport_tests --devices-start   starts uroce0/uroce1 detached in $UROCE_TRANSPORT_DIR
//                                     (ctest fixture setup: one pair for the whole suite)
//   transport_tests --devices-stop    stops them; fails if a device log has a sanitizer
//                                     report (ctest fixture cleanup)
//   transport_tests [gtest flags]     the tests: against the devices in $UROCE_TRANSPORT_DIR
//                                     if set, else against a pair of its own (started before
//                                     the first test, stopped after the last)
//
// Starting a device per test would cost more than most tests take (about a second under
// ASan on a busy 2-core host); one shared pair keeps the suite well under a minute.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

using Clock = std::chrono::steady_clock;
double secs_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr const char* kAddrs[2] = {"127.0.0.2", "127.0.0.3"};
bool g_ready = false;

std::string daemon_path() {
    if (const char* p = getenv("UROCE_DAEMON")) return p;
    return UROCE_BIN_DIR "/uroced";
}

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A process we started, known by pid and start time: a pid the kernel has given to another
// process since is never signalled (other builds and tests share this host's pid space).
struct Proc {
    pid_t pid = -1;
    unsigned long long start = 0;  // /proc/PID/stat field 22, in clock ticks since boot
};

// Field 22 (start time) and field 3 (state) of /proc/PID/stat; false if there is no such process.
bool proc_stat(pid_t pid, unsigned long long* start, char* state) {
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) return false;
    std::istringstream rest(stat.substr(paren + 1));
    std::string field;
    rest >> *state;
    for (int i = 4; i <= 22 && rest >> field; ++i) {
    }
    *start = std::strtoull(field.c_str(), nullptr, 10);
    return true;
}

// Gone: exited (a zombie its new parent has not reaped yet counts: a detached device belongs
// to init, which in a container may reap late), or its pid now names another process.
bool gone(const Proc& p) {
    if (p.pid <= 0) return true;
    waitpid(p.pid, nullptr, WNOHANG);  // reaps it if it is our child
    unsigned long long start = 0;
    char state = 0;
    return !proc_stat(p.pid, &start, &state) || start != p.start || state == 'Z';
}

// Starts uroced logging to DIR/NAME.log. `detach`: in a session of its own, outliving us (the
// ctest fixture); otherwise it dies with this process.
Proc spawn_device(const std::string& dir, int i, long port, bool detach) {
    std::string log = dir + "/" + kDeviceNames[i] + ".log";
    std::string exe = daemon_path(), ps = std::to_string(port);
    pid_t pid = fork();
    if (pid == 0) {
        if (detach)
            setsid();
        else
            prctl(PR_SET_PDEATHSIG, SIGTERM);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execl(exe.c_str(), exe.c_str(), "--name", kDeviceNames[i], "--addr", kAddrs[i], "--port",
              ps.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    Proc p;
    char state;
    if (pid > 0 && proc_stat(pid, &p.start, &state)) p.pid = pid;  // our child: still there
    return p;
}

// Stops the devices (SIGTERM: a clean shutdown, with ASan's leak check) and waits for them.
void stop(Proc procs[2]) {
    for (int i = 0; i < 2; ++i)
        if (!gone(procs[i])) kill(procs[i].pid, SIGTERM);
    for (int i = 0; i < 2; ++i) {
        auto start = Clock::now();
        while (!gone(procs[i]) && secs_since(start) < 20) usleep(2000);
        if (!gone(procs[i])) kill(procs[i].pid, SIGKILL);
        procs[i] = Proc{};
    }
}

// Starts both devices on the first port of the range where both can bind. 0 or the port.
long start(const std::string& dir, Proc procs[2], bool detach) {
    long base = 0, count = 8;
    if (const char* p = getenv("UROCE_UDP_PORT")) base = std::atol(p);
    if (const char* c = getenv("UROCE_TRANSPORT_PORTS")) count = std::atol(c);
    if (base <= 0) base = 30000 + getpid() % 20000, count = 32;  // by hand
    for (long port = base; port < base + count; ++port) {
        for (int i = 0; i < 2; ++i) procs[i] = spawn_device(dir, i, port, detach);
        // uroced writes NAME.info once it accepts sessions; it exits if the port is taken.
        bool up = true;
        for (int i = 0; i < 2 && up; ++i) {
            std::string info = dir + "/" + kDeviceNames[i] + ".info";
            for (auto t = Clock::now(); up && access(info.c_str(), F_OK) != 0;) {
                up = !gone(procs[i]) && secs_since(t) < 20;
                usleep(2000);
            }
        }
        if (up) return port;
        stop(procs);
    }
    std::fprintf(stderr, "no free UDP port in %ld..%ld for two devices on %s and %s\n", base,
                 base + count - 1, kAddrs[0], kAddrs[1]);
    return 0;
}

// The sanitizer reports in the devices' logs, if any.
std::string sanitizer_reports(const std::string& dir) {
    std::string out;
    for (const char* n : kDeviceNames) {
        std::string log = read_file(dir + "/" + n + ".log");
        if (log.find("Sanitizer") != std::string::npos ||
            log.find("runtime error:") != std::string::npos)
            out += std::string("--- ") + n + ".log\n" + log;
    }
    return out;
}

// The detached pair's pids and start times, kept next to them.
std::string pids_path(const std::string& dir) { return dir + "/devices.pids"; }

void stop_recorded(const std::string& dir) {
    Proc procs[2];
    std::ifstream f(pids_path(dir));
    f >> procs[0].pid >> procs[0].start >> procs[1].pid >> procs[1].start;
    if (f) stop(procs);
}

int devices_start(const std::string& dir) {
    setenv("UROCE_RUNTIME_DIR", dir.c_str(), 1);  // where the devices register
    stop_recorded(dir);                           // a pair an interrupted run left behind
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (mkdir(dir.c_str(), 0700) != 0) {
        std::perror(dir.c_str());
        return 1;
    }
    Proc procs[2];
    long port = start(dir, procs, true);
    if (!port) return 1;
    std::ofstream(pids_path(dir)) << procs[0].pid << " " << procs[0].start << " " << procs[1].pid
                                  << " " << procs[1].start << "\n";
    std::printf("uroce0 (pid %d) on %s and uroce1 (pid %d) on %s, UDP port %ld, in %s\n",
                procs[0].pid, kAddrs[0], procs[1].pid, kAddrs[1], port, dir.c_str());
    return 0;
}

int devices_stop(const std::string& dir) {
    stop_recorded(dir);
    std::string reports = sanitizer_reports(dir);
    if (!reports.empty()) {
        std::fprintf(stderr, "FAIL: sanitizer report in a device log:\n%s", reports.c_str());
        return 1;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::printf("devices stopped\n");
    return 0;
}

// The devices the tests use: the shared pair, or this process's own.
class Devices : public ::testing::Environment {
public:
    void SetUp() override {
        setenv("UROCE_NO_AUTOSTART", "1", 1);
        if (const char* shared = getenv("UROCE_TRANSPORT_DIR")) {
            dir_ = shared;
            setenv("UROCE_RUNTIME_DIR", shared, 1);
            for (const char* n : kDeviceNames)
                ASSERT_EQ(access((dir_ + "/" + n + ".info").c_str(), F_OK), 0)
                    << n << " is not running in " << dir_
                    << " (the ctest fixture transport.devices.start starts it)";
            g_ready = true;
            return;
        }
        char tmpl[] = "/tmp/uroce-transport.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr) << std::strerror(errno);
        dir_ = tmpl;
        own_ = true;
        setenv("UROCE_RUNTIME_DIR", dir_.c_str(), 1);
        g_ready = start(dir_, procs_, false) != 0;
    }

    void TearDown() override {
        if (!own_) return;
        stop(procs_);
        std::string reports = sanitizer_reports(dir_);
        EXPECT_TRUE(reports.empty()) << "sanitizer report in a device log:\n" << reports;
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

private:
    std::string dir_;
    bool own_ = false;
    Proc procs_[2];
};

}  // namespace

bool devices_ready() { return g_ready; }

}  // namespace uroce::transport_test

int main(int argc, char** argv) {
    using namespace uroce::transport_test;
    if (argc == 2 && (std::strcmp(argv[1], "--devices-start") == 0 ||
                      std::strcmp(argv[1], "--devices-stop") == 0)) {
        const char* dir = getenv("UROCE_TRANSPORT_DIR");
        if (!dir || !*dir) {
            std::fprintf(stderr, "%s needs UROCE_TRANSPORT_DIR\n", argv[1]);
            return 2;
        }
        return std::strcmp(argv[1], "--devices-start") == 0 ? devices_start(dir)
                                                            : devices_stop(dir);
    }
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new Devices);
    return RUN_ALL_TESTS();
}
