// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A uroced of a test's own (device_death_tests, port_mtu_tests), and opening a device by
// name. The uroced starts in a runtime directory on the first UDP port, from UROCE_UDP_PORT
// (else one from the pid), on which it comes up; it dies with the test process
// (PR_SET_PDEATHSIG) if the test does. Its stdout and stderr go to DIR/NAME.log.
// UROCE_BIN_DIR names the directory of uroced.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace uroce::test {

class UrocedProcess {
public:
    // Tries `ports` ports; true once NAME.info exists.
    bool start(const std::string& dir, const char* name, const char* addr, int ports) {
        using namespace std::chrono_literals;
        long base = 0;
        if (const char* p = getenv("UROCE_UDP_PORT")) base = std::atol(p);
        if (base <= 0) base = 30000 + getpid() % 20000;
        std::string info = dir + "/" + name + ".info";
        for (long port = base; port < base + ports; ++port) {
            std::filesystem::remove(info);
            pid_ = spawn(dir, name, addr, port);
            auto t0 = std::chrono::steady_clock::now();
            while (access(info.c_str(), F_OK) != 0 && alive() &&
                   std::chrono::steady_clock::now() - t0 < 20s)
                usleep(2000);
            if (access(info.c_str(), F_OK) == 0) return true;
            stop(SIGKILL);
        }
        return false;
    }

    // Sends `sig` and reaps it.
    void stop(int sig) {
        if (pid_ <= 0) return;
        kill(pid_, sig);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    ~UrocedProcess() { stop(SIGKILL); }

private:
    bool alive() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

    static pid_t spawn(const std::string& dir, const char* name, const char* addr, long port) {
        std::string exe = std::string(UROCE_BIN_DIR) + "/uroced", ps = std::to_string(port);
        std::string log = dir + "/" + name + ".log";
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
            dup2(out, 1);
            dup2(out, 2);
            execl(exe.c_str(), exe.c_str(), "--name", name, "--addr", addr, "--port", ps.c_str(),
                  static_cast<char*>(nullptr));
            _exit(127);
        }
        return pid;
    }

    pid_t pid_ = -1;
};

// ibv_open_device of the device called `name`, or nullptr.
inline ibv_context* open_named(const char* name) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ibv_context* ctx = nullptr;
    for (int i = 0; list && i < n; ++i)
        if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
    if (list) ibv_free_device_list(list);
    return ctx;
}

}  // namespace uroce::test
