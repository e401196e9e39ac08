// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The raw UDP limit on this host, for scripts/bench to compare uroce against: what two
// processes get from plain UDP sockets, with no RDMA semantics at all.
//
//   udp_baseline bw  [--size 4096] [--seconds 2] [--batch 64] [--gso N]
//       A sender process pushes SIZE-byte datagrams with sendmmsg (BATCH per call) as
//       fast as it can; a receiver process drains them with recvmmsg. Prints the
//       receiver's goodput (payload bytes that arrived) over SECONDS, and the loss.
//       --gso N: the ceiling instead. Each message is a train of N SIZE-byte segments that
//       the kernel splits (UDP_SEGMENT), and the receiver has UDP_GRO on, so a train
//       travels loopback or veth as one packet and arrives in one read; datagrams are
//       still counted one per segment.
//   udp_baseline lat [--size 2] [--iters 20000] [--warmup 1000] [--block]
//       Ping-pong of SIZE-byte datagrams between two processes; both sides busy-poll
//       (MSG_DONTWAIT) like perftest's latency tests, or sleep in recv with --block.
//       Prints the round-trip time and half of it (the one-way figure perftest's
//       send_lat/write_lat report).
//   Both: --to ADDR (the receiver's, or the pinging side's, address; 127.0.0.1),
//       --from ADDR (the other side's; 127.0.0.1), --netns NAME (the other side runs in
//       network namespace NAME, /run/netns/NAME: two hosts joined by a veth pair).
//
// Output: one line of key=value pairs (bandwidth in MiB/s, perftest's "MB/sec"; times
// in microseconds), so scripts can parse it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

[[noreturn]] void die(const char* what) { bench::die("udp_baseline", what); }
using bench::now_ns;

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

constexpr size_t kMaxUdpPayload = 65507;

struct Options {
    size_t size = 0;
    double seconds = 2.0;
    unsigned batch = 64;
    unsigned gso = 0;  // segments per train; 0: one datagram per message
    unsigned iters = 20000;
    unsigned warmup = 1000;
    bool block = false;
    std::string to = "127.0.0.1", from = "127.0.0.1", netns;
};

// The side that runs in the other namespace joins it before it makes its socket.
void enter_netns(const std::string& name) {
    if (name.empty()) return;
    std::string path = "/run/netns/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) die("setns (--netns)");
    close(fd);
}

int udp_socket(const std::string& addr, sockaddr_in* bound) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) die("socket");
    int buf = 8 << 20;  // what uroced asks for, so both sides get the same buffering
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) die("bad address");
    if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind");
    socklen_t len = sizeof a;
    if (getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) die("getsockname");
    if (bound) *bound = a;
    return s;
}

void connect_to(int s, const sockaddr_in& to) {
    if (connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) die("connect");
}

// --- bandwidth -------------------------------------------------------------------

// Room for one UDP control message (UDP_SEGMENT's u16 or UDP_GRO's int).
union Cmsg {
    char buf[CMSG_SPACE(sizeof(int))];
    cmsghdr align;
};

void reset_msg(mmsghdr& m, iovec* iov, Cmsg* ctl) {
    m.msg_hdr = msghdr{};
    m.msg_hdr.msg_iov = iov;
    m.msg_hdr.msg_iovlen = 1;
    if (ctl) {
        m.msg_hdr.msg_control = ctl->buf;
        m.msg_hdr.msg_controllen = sizeof ctl->buf;
    }
}

int run_bw(const Options& o) {
    sockaddr_in raddr;
    int rs = udp_socket(o.to, &raddr);
    const size_t msg = o.gso ? o.size * o.gso : o.size;  // bytes per message (train)
    if (o.gso) {
        int on = 1;
        if (setsockopt(rs, IPPROTO_UDP, UDP_GRO, &on, sizeof on) != 0) die("UDP_GRO");
    }
    int report[2];  // the sender tells the receiver how many datagrams it sent
    if (pipe(report) != 0) die("pipe");

    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(rs);
        close(report[0]);
        enter_netns(o.netns);
        int ss = udp_socket(o.from, nullptr);
        connect_to(ss, raddr);
        static volatile sig_atomic_t stop = 0;
        struct sigaction sa = {};
        sa.sa_handler = [](int) { stop = 1; };
        sigaction(SIGTERM, &sa, nullptr);
        std::vector<char> data(msg, 'u');
        std::vector<iovec> iov(o.batch);
        std::vector<mmsghdr> msgs(o.batch);
        // One UDP_SEGMENT control message per train, all alike.
        std::vector<Cmsg> ctl(o.batch);
        for (unsigned i = 0; i < o.batch; ++i) {
            iov[i] = {data.data(), msg};
            reset_msg(msgs[i], &iov[i], o.gso ? &ctl[i] : nullptr);
            if (o.gso) {
                cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr);
                c->cmsg_level = SOL_UDP;
                c->cmsg_type = UDP_SEGMENT;
                c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                uint16_t seg = uint16_t(o.size);
                std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
            }
        }
        const uint64_t per_msg = o.gso ? o.gso : 1;
        uint64_t sent = 0;
        while (!stop) {
            int n = sendmmsg(ss, msgs.data(), o.batch, 0);
            if (n > 0)
                sent += unsigned(n) * per_msg;
            else if (n < 0 && errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
                die(o.gso ? "sendmmsg (UDP_SEGMENT)" : "sendmmsg");
        }
        if (write(report[1], &sent, sizeof sent) != sizeof sent) _exit(1);
        _exit(0);
    }
    close(report[1]);

    timeval tv{0, 200000};
    setsockopt(rs, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    // With GRO on, one read can carry a whole train: buffers of the largest UDP payload.
    const size_t cap = o.gso ? 65535 : o.size + 64;
    std::vector<char> bufs(size_t(o.batch) * cap);
    std::vector<iovec> iov(o.batch);
    std::vector<mmsghdr> msgs(o.batch);
    std::vector<Cmsg> ctl(o.batch);  // the GRO segment size of each read
    for (unsigned i = 0; i < o.batch; ++i) iov[i] = {bufs.data() + size_t(i) * cap, cap};
    uint64_t start = 0, end = 0, dgrams = 0, bytes = 0, reads = 0;
    uint64_t give_up = now_ns() + 5000000000ull;  // no datagram at all within 5 s
    for (;;) {
        for (unsigned i = 0; i < o.batch; ++i)
            reset_msg(msgs[i], &iov[i], o.gso ? &ctl[i] : nullptr);
        int n = recvmmsg(rs, msgs.data(), o.batch, 0, nullptr);
        uint64_t t = now_ns();
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) die("recvmmsg");
            if (!start && t > give_up) break;
            continue;
        }
        if (!start) {
            start = t;  // the clock starts at the first arrival; it is not counted
            continue;
        }
        for (int i = 0; i < n; ++i) {
            size_t len = msgs[i].msg_len;
            bytes += len;
            size_t seg = len;  // a read without a GRO size is one datagram
            for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); o.gso && c;
                 c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                    int g = 0;
                    std::memcpy(&g, CMSG_DATA(c), sizeof g);
                    if (g > 0) seg = size_t(g);
                }
            }
            dgrams += seg ? (len + seg - 1) / seg : 1;
        }
        reads += unsigned(n);
        end = t;
        if (double(t - start) >= o.seconds * 1e9) break;
    }
    kill(child, SIGTERM);
    uint64_t sent = 0;
    if (read(report[0], &sent, sizeof sent) != sizeof sent) sent = 0;
    int st = 0;
    waitpid(child, &st, 0);
    if (!start || end <= start) {
        std::fprintf(stderr, "udp_baseline: nothing received%s\n",
                     WIFEXITED(st) && WEXITSTATUS(st) ? " (the sender failed)" : "");
        return 1;
    }
    double secs = double(end - start) / 1e9;
    double mibs = double(bytes) / secs / 1048576.0;
    // Loss over the whole run (the sender kept going a little after we stopped counting,
    // so this is an upper bound).
    double loss = sent ? 1.0 - double(dgrams) / double(sent) : 0.0;
    std::printf(
        "mode=bw size=%zu batch=%u gso=%u seconds=%.3f datagrams=%llu bytes=%llu reads=%llu "
        "goodput_MiBps=%.1f goodput_Gbps=%.2f datagrams_per_s=%.0f sent=%llu loss=%.3f\n",
        o.size, o.batch, o.gso, secs, (unsigned long long)dgrams, (unsigned long long)bytes,
        (unsigned long long)reads, mibs, double(bytes) * 8 / secs / 1e9, double(dgrams) / secs,
        (unsigned long long)sent, loss < 0 ? 0.0 : loss);
    return 0;
}

// --- latency ---------------------------------------------------------------------

// Sends one datagram and waits for one; busy-polls unless `block`.
bool exchange_recv(int s, char* buf, size_t cap, bool block, uint64_t deadline) {
    for (;;) {
        ssize_t n = recv(s, buf, cap, block ? 0 : MSG_DONTWAIT);
        if (n >= 0) return true;
        if (errno != EAGAIN && errno != EINTR) die("recv");
        if (now_ns() > deadline) return false;
    }
}

int run_lat(const Options& o) {
    sockaddr_in a;
    int sa = udp_socket(o.to, &a);
    timeval tv{1, 0};
    if (o.block) setsockopt(sa, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned total = o.iters + o.warmup;
    pid_t child = fork();
    if (child < 0) die("fork");
    std::vector<char> buf(o.size + 64, 'u');
    if (child == 0) {  // the echo side: its socket is made where it runs, then says hello
        close(sa);
        enter_netns(o.netns);
        int sb = udp_socket(o.from, nullptr);
        connect_to(sb, a);
        if (o.block) setsockopt(sb, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (send(sb, "h", 1, 0) != 1) die("send (hello)");
        for (unsigned i = 0; i < total; ++i) {
            if (!exchange_recv(sb, buf.data(), buf.size(), o.block, now_ns() + 5000000000ull))
                _exit(1);
            if (send(sb, buf.data(), o.size, 0) < 0) die("send");
        }
        _exit(0);
    }
    {
        timeval hello_wait{5, 0};  // the echo side's first datagram gives its address
        setsockopt(sa, SOL_SOCKET, SO_RCVTIMEO, &hello_wait, sizeof hello_wait);
        sockaddr_in b{};
        socklen_t blen = sizeof b;
        if (recvfrom(sa, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&b), &blen) < 0)
            die("no hello from the echo side");
        connect_to(sa, b);
        timeval none{0, 0};
        setsockopt(sa, SOL_SOCKET, SO_RCVTIMEO, o.block ? &tv : &none, sizeof tv);
    }
    std::vector<double> rtt;
    rtt.reserve(o.iters);
    for (unsigned i = 0; i < total; ++i) {
        uint64_t t0 = now_ns();
        if (send(sa, buf.data(), o.size, 0) < 0) die("send");
        if (!exchange_recv(sa, buf.data(), buf.size(), o.block, t0 + 5000000000ull)) {
            std::fprintf(stderr, "udp_baseline: no reply within 5 s\n");
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
            return 1;
        }
        if (i >= o.warmup) rtt.push_back(double(now_ns() - t0) / 1000.0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    std::sort(rtt.begin(), rtt.end());
    double sum = 0;
    for (double v : rtt) sum += v;
    auto pct = [&](double p) {
        return rtt[std::min(rtt.size() - 1, size_t(p * double(rtt.size())))];
    };
    std::printf(
        "mode=lat size=%zu iters=%u poll=%s rtt_min_us=%.2f rtt_median_us=%.2f "
        "rtt_avg_us=%.2f rtt_p99_us=%.2f half_rtt_median_us=%.2f half_rtt_avg_us=%.2f\n",
        o.size, o.iters, o.block ? "block" : "busy", rtt.front(), pct(0.5),
        sum / double(rtt.size()), pct(0.99), pct(0.5) / 2, sum / double(rtt.size()) / 2);
    return 0;
}

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: udp_baseline bw  [--size N] [--seconds S] [--batch B] [--gso N]\n"
                 "       udp_baseline lat [--size N] [--iters N] [--warmup N] [--block]\n"
                 "       both: [--to ADDR] [--from ADDR] [--netns NAME]\n");
    std::exit(2);
}

}  // namespace
}  // namespace uroce

using namespace uroce;

int main(int argc, char** argv) {
    if (argc < 2) usage();
    std::string mode = argv[1];
    Options o;
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc) usage();
            return argv[++i];
        };
        if (a == "--size")
            o.size = std::strtoul(val(), nullptr, 0);
        else if (a == "--seconds")
            o.seconds = std::strtod(val(), nullptr);
        else if (a == "--batch")
            o.batch = unsigned(std::strtoul(val(), nullptr, 0));
        else if (a == "--iters")
            o.iters = unsigned(std::strtoul(val(), nullptr, 0));
        else if (a == "--warmup")
            o.warmup = unsigned(std::strtoul(val(), nullptr, 0));
        else if (a == "--gso")
            o.gso = unsigned(std::strtoul(val(), nullptr, 0));
        else if (a == "--to")
            o.to = val();
        else if (a == "--from")
            o.from = val();
        else if (a == "--netns")
            o.netns = val();
        else if (a == "--block")
            o.block = true;
        else
            usage();
    }
    if (mode == "bw") {
        if (!o.size) o.size = 4096;
        if (o.size > kMaxUdpPayload || o.batch == 0 || o.seconds <= 0) usage();
        // GSO: at most 64 segments per train (the kernel's UDP_MAX_SEGMENTS), the whole
        // train one UDP payload.
        if (o.gso && (o.gso > 64 || o.size * o.gso > kMaxUdpPayload)) usage();
        return run_bw(o);
    }
    if (mode == "lat") {
        if (!o.size) o.size = 2;
        if (o.size > kMaxUdpPayload || o.iters == 0) usage();
        return run_lat(o);
    }
    usage();
}
