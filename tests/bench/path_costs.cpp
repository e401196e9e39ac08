// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The fixed costs of a device that is a process of its own, measured on this host, so that
// scripts/bench can show the floor under uroce's latency (docs/performance.md): whatever the
// device does, one message costs at least one doorbell wake-up and one write into the
// receiver's memory.
//
//   path_costs [--iters 20000]
//     wake: a busy-polling process writes an eventfd that a second process sleeps on (as
//           ibv_post_send rings the device, asleep in io_uring_enter); that one wakes and
//           stores a sequence number into shared memory, which the first sees while
//           spinning (as an application polls its CQ). Median of the round trip.
//     dma:  process_vm_writev of 2 bytes into another process, as the device writes a
//           received payload (median per call).
//
// Output: one line of key=value pairs, times in microseconds.
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/bench/bench_common.h"

namespace uroce {
namespace {

[[noreturn]] void die(const char* what) { bench::die("path_costs", what); }
using bench::now_ns;

double median_us(std::vector<uint64_t>& ns) {
    std::sort(ns.begin(), ns.end());
    return ns.empty() ? 0 : double(ns[ns.size() / 2]) / 1000.0;
}

// A child that sleeps on `efd` and answers each wake-up through `seq`, until killed.
pid_t start_sleeper(int efd, std::atomic<uint64_t>* seq) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        for (;;) {
            uint64_t v;
            if (read(efd, &v, sizeof v) != sizeof v && errno != EINTR) _exit(1);
            seq->fetch_add(1, std::memory_order_release);
        }
    }
    return pid;
}

double wake_us(int iters) {
    int efd = eventfd(0, EFD_CLOEXEC);
    if (efd < 0) die("eventfd");
    void* shm = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) die("mmap");
    auto* seq = new (shm) std::atomic<uint64_t>(0);
    pid_t child = start_sleeper(efd, seq);
    std::vector<uint64_t> rtt;
    rtt.reserve(size_t(iters));
    for (int i = 0; i < iters + iters / 10; ++i) {
        uint64_t want = seq->load(std::memory_order_acquire) + 1, one = 1;
        uint64_t t0 = now_ns();
        if (write(efd, &one, sizeof one) != sizeof one) die("write");
        while (seq->load(std::memory_order_acquire) < want) {
        }
        if (i >= iters / 10) rtt.push_back(now_ns() - t0);  // after a warm-up
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    close(efd);
    return median_us(rtt);
}

double dma_us(int iters) {
    static char target[64];
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        for (;;) pause();
    }
    char src[2] = {1, 2};
    std::vector<uint64_t> t;
    t.reserve(size_t(iters));
    for (int i = 0; i < iters; ++i) {
        iovec l{src, sizeof src}, r{target, sizeof src};
        uint64_t t0 = now_ns();
        if (process_vm_writev(child, &l, 1, &r, 1, 0) != ssize_t(sizeof src))
            die("process_vm_writev");
        t.push_back(now_ns() - t0);
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return median_us(t);
}

}  // namespace
}  // namespace uroce

using namespace uroce;

int main(int argc, char** argv) {
    int iters = 20000;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--iters" && i + 1 < argc) {
            iters = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: path_costs [--iters N]\n");
            return 2;
        }
    }
    if (iters < 10) iters = 10;
    double w = wake_us(iters), d = dma_us(iters);
    std::printf("wake_us=%.2f dma_us=%.2f floor_us=%.2f\n", w, d, w + d);
    return 0;
}
