// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// net/: the io_uring socket. io_uring runs a request's completion work (task work) in the
// thread that submitted it, so what the ring submits decides which thread each received
// packet wakes: it must be the one that drives the ring (the engine), never the one that
// opened it (uroced's control thread).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "net/udp_uring.h"

using namespace uroce::net;

namespace {

struct Counter : UdpUring::Handler {
    std::atomic<int> packets{0};
    void on_packet(const Endpoint&, const Endpoint&, uint8_t*, size_t, uint16_t, IpMarks) override {
        ++packets;
    }
    void on_eventfd(uint64_t) override {}
};

// A UDP port on 127.0.0.1 nobody holds right now.
uint16_t free_udp_port() {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
        sa.sin_port = 0;
    close(fd);
    return ntohs(sa.sin_port);
}

long voluntary_switches() {
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

}  // namespace

// io_uring is used where it may be, and not when UROCE_NO_IO_URING is set (ctest
// UdpUring.without_io_uring runs these tests so); without it, the kernel's refusal is kept.
TEST(UdpUring, UsesIoUringUnlessToldNotTo) {
    uint16_t port = free_udp_port();
    ASSERT_NE(port, 0);
    UdpUring io;
    ASSERT_EQ(io.open(htonl(INADDR_LOOPBACK), port), 0);
    const char* e = std::getenv("UROCE_NO_IO_URING");
    if (e && *e && std::strcmp(e, "0") != 0) {
        EXPECT_FALSE(io.uses_io_uring());
        EXPECT_EQ(io.io_uring_errno(), 0);
    } else if (!io.uses_io_uring()) {
        EXPECT_NE(io.io_uring_errno(), 0);
        GTEST_SKIP() << "io_uring is forbidden here: " << std::strerror(io.io_uring_errno());
    }
}

// The thread that opened the ring sleeps in one read() while another thread runs the ring
// and receives packets sent one at a time. Were the receive submitted by the opening
// thread, each packet would wake it (to post the completion the loop waits for): one
// context switch per packet, and two wake-ups in series on every receive.
TEST(UdpUring, ReceivedPacketsWakeOnlyTheThreadThatRunsTheRing) {
    constexpr int kPackets = 40;
    uint16_t port = free_udp_port();
    ASSERT_NE(port, 0);
    UdpUring io;
    ASSERT_EQ(io.open(htonl(INADDR_LOOPBACK), port), 0);

    int done[2];
    ASSERT_EQ(pipe(done), 0);
    Counter h;
    std::thread loop([&] {
        // Ends after the last packet, or after 10 s if they stopped arriving.
        for (int i = 0; i < 1000 && h.packets < kPackets; ++i) io.run_once(10000000, h);
        char c = 1;
        EXPECT_EQ(write(done[1], &c, 1), 1);
    });
    std::thread sender([&] {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        to.sin_port = htons(port);
        uint8_t payload[32] = {};
        for (int i = 0; i < kPackets; ++i) {
            sendto(fd, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
            usleep(500);  // each packet on its own: the receiver has gone back to sleep
        }
        close(fd);
    });
    long before = voluntary_switches();
    char c;
    ssize_t r = read(done[0], &c, 1);
    long woken = voluntary_switches() - before;
    sender.join();
    loop.join();
    close(done[0]);
    close(done[1]);
    EXPECT_EQ(r, 1);
    EXPECT_EQ(h.packets, kPackets);
    // One switch for the read itself; a few spare for the host's own reasons.
    EXPECT_LT(woken, kPackets / 4) << "the opening thread was woken " << woken << " times";
}

namespace {

// Records what arrived: each packet's first byte, length and place in its GRO train, and
// the packets a refused train sent again.
struct Recorder : UdpUring::Handler {
    struct Got {
        uint8_t tag;
        size_t len;
        uint16_t seg;
        IpMarks marks;
        uint16_t from_port;
    };
    std::vector<Got> got;
    std::vector<std::pair<uint16_t, uint16_t>> moved;  // on_resend's (from_seg, to_seg)
    void on_packet(const Endpoint& from, const Endpoint&, uint8_t* data, size_t len, uint16_t seg,
                   IpMarks marks) override {
        got.push_back({data[0], len, seg, marks, from.port()});
    }
    void on_eventfd(uint64_t) override {}
    void on_resend(const Endpoint&, uint8_t*, size_t, uint16_t from, uint16_t to) override {
        moved.emplace_back(from, to);
    }
};

// Two rings on 127.0.0.1: tx sends to rx.
class UdpUringPair : public ::testing::Test {
protected:
    void open(bool offload = true) {
        uint16_t ptx = free_udp_port(), prx = free_udp_port();
        ASSERT_EQ(tx.open(htonl(INADDR_LOOPBACK), ptx, offload), 0);
        ASSERT_EQ(rx.open(htonl(INADDR_LOOPBACK), prx, offload), 0);
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        to.sin_port = htons(prx);
    }
    bool offloads_here() const { return tx.offloads().gso && rx.offloads().gro; }
    sockaddr_in tx_addr() const {
        sockaddr_in sa{};
        socklen_t len = sizeof sa;
        getsockname(tx.socket_fd(), reinterpret_cast<sockaddr*>(&sa), &len);
        return sa;
    }

    // Queues packets of `lens` (the first byte of packet i is i; marks[i] its TOS and TTL, if
    // given); returns the segment numbers tx_send gave them.
    std::vector<uint16_t> queue(const std::vector<size_t>& lens,
                                const std::vector<IpMarks>& marks = {},
                                const std::vector<uint16_t>& senders = {}) {
        std::vector<uint16_t> ids;
        for (size_t i = 0; i < lens.size(); ++i) {
            uint32_t slot;
            uint8_t* b = tx.tx_alloc(&slot);
            EXPECT_NE(b, nullptr);
            if (!b) break;
            std::memset(b, 0, lens[i]);
            b[0] = uint8_t(i);
            ids.push_back(tx.tx_send(slot, lens[i], to, i < marks.size() ? marks[i] : IpMarks{},
                                     i < senders.size() ? senders[i] : 0));
        }
        return ids;
    }
    // Runs both rings until rx has `n` packets (at most a second), then the send completions.
    void deliver(size_t n) {
        for (int i = 0; i < 200 && got.got.size() < n; ++i) {
            tx.run_once(0, sent);
            rx.run_once(5000000, got);
        }
        tx.run_once(1000000, sent);
    }
    std::vector<uint16_t> send_all(const std::vector<size_t>& lens,
                                   const std::vector<IpMarks>& marks = {},
                                   const std::vector<uint16_t>& senders = {}) {
        got = Recorder{};
        std::vector<uint16_t> ids = queue(lens, marks, senders);
        deliver(lens.size());
        return ids;
    }

    // UdpUringPair.PacketsKeepTheirTosAndTtl (below).
    void check_marks(bool offload) {
        open(offload);
        const IpMarks def{}, ef{0xb8, 17}, ect{0x6a, 255};
        std::vector<IpMarks> marks = {def, def, ef, ef, ef, ect, def};
        std::vector<uint16_t> ids = send_all(std::vector<size_t>(marks.size(), 1000), marks);
        ASSERT_EQ(got.got.size(), marks.size());
        for (size_t i = 0; i < marks.size(); ++i) {
            EXPECT_EQ(got.got[i].tag, uint8_t(i)) << i;
            EXPECT_EQ(got.got[i].marks.tos, marks[i].tos) << i;
            EXPECT_EQ(got.got[i].marks.ttl, marks[i].ttl) << i;
        }
        if (offloads_here()) {
            EXPECT_EQ(ids, (std::vector<uint16_t>{0, 1, 0, 1, 2, 0, 0}));
            EXPECT_EQ(tx.offloads().tx_trains, 2u);  // {def, def} and {ef, ef, ef}
            EXPECT_FALSE(tx.offloads().udp_csum_zero);
        } else {
            EXPECT_EQ(ids, std::vector<uint16_t>(marks.size(), 0));
        }
        if (!tx.offloads().gso) {
            EXPECT_TRUE(tx.offloads().udp_csum_zero);
            int v = 0;
            socklen_t l = sizeof v;
            ASSERT_EQ(getsockopt(tx.socket_fd(), SOL_SOCKET, SO_NO_CHECK, &v, &l), 0);
            EXPECT_EQ(v, 1);
        }
        int pmtu = 0;
        socklen_t l = sizeof pmtu;
        ASSERT_EQ(getsockopt(tx.socket_fd(), IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, &l), 0);
        EXPECT_EQ(pmtu, IP_PMTUDISC_PROBE);  // DF on every packet
    }

    UdpUring tx, rx;
    sockaddr_in to{};
    Recorder got, sent;
};

}  // namespace

// Packets of one length to one peer leave as one GSO train and arrive as one GRO train, each
// packet handed over on its own, in order, with its place in the train. A shorter packet ends
// a train; a longer one starts the next.
TEST_F(UdpUringPair, PacketsToOnePeerTravelAsOneTrain) {
    open();
    if (!offloads_here())
        GTEST_SKIP() << "this kernel has no UDP GSO/GRO (errno " << tx.offloads().gso_errno << "/"
                     << rx.offloads().gro_errno << ")";
    std::vector<size_t> lens(10, 1100);
    lens.push_back(700);               // ends the first train
    lens.insert(lens.end(), 3, 1200);  // a train of its own
    std::vector<uint16_t> ids = send_all(lens);
    ASSERT_EQ(got.got.size(), lens.size());
    std::vector<uint16_t> want_ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2};
    EXPECT_EQ(ids, want_ids);
    for (size_t i = 0; i < lens.size(); ++i) {
        EXPECT_EQ(got.got[i].tag, uint8_t(i)) << i;
        EXPECT_EQ(got.got[i].len, lens[i]) << i;
        EXPECT_EQ(got.got[i].seg, want_ids[i]) << i;
    }
    EXPECT_EQ(tx.offloads().tx_trains, 2u);
    EXPECT_EQ(tx.offloads().tx_train_pkts, 14u);
    EXPECT_EQ(rx.offloads().rx_trains, 2u);
    EXPECT_EQ(rx.offloads().rx_train_pkts, 14u);
    EXPECT_EQ(tx.tx_free_count(), UdpUring::kTxBufs);  // every buffer came back
}

// Each packet leaves with its own IPv4 TOS and TTL (the receiver sees them: IP_RECVTOS,
// IP_RECVTTL), and a train joins only packets with the same ones: a sendmsg has one of each.
// Whatever the offloads, DF is set and, without GSO, the UDP checksum is 0 (SO_NO_CHECK).
TEST_F(UdpUringPair, PacketsKeepTheirTosAndTtl) { check_marks(true); }
TEST_F(UdpUringPair, PacketsKeepTheirTosAndTtlWithoutOffloads) { check_marks(false); }

// A train holds at most kMaxSegs packets and one UDP payload's worth of bytes.
TEST_F(UdpUringPair, TrainsStopAtTheKernelsLimits) {
    open();
    if (!offloads_here()) GTEST_SKIP() << "no UDP GSO/GRO here";
    // 4 KiB packets: 15 fit in 65507 bytes.
    std::vector<uint16_t> ids = send_all(std::vector<size_t>(31, 4140));
    ASSERT_EQ(got.got.size(), 31u);
    for (size_t i = 0; i < 31; ++i) EXPECT_EQ(ids[i], i % 15) << i;
    // Small packets: 64 a train.
    ids = send_all(std::vector<size_t>(130, 60));
    ASSERT_EQ(got.got.size(), 130u);
    for (size_t i = 0; i < 130; ++i) {
        EXPECT_EQ(ids[i], i % UdpUring::kMaxSegs) << i;
        EXPECT_EQ(got.got[i].tag, uint8_t(i)) << i;
    }
}

// Offloads off: one datagram per packet both ways, as on a kernel without them.
TEST_F(UdpUringPair, OffloadsOffSendsOneDatagramPerPacket) {
    open(false);
    EXPECT_FALSE(tx.offloads().gso);
    EXPECT_FALSE(rx.offloads().gro);
    std::vector<uint16_t> ids = send_all(std::vector<size_t>(20, 1000));
    ASSERT_EQ(got.got.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
        EXPECT_EQ(ids[i], 0) << i;
        EXPECT_EQ(got.got[i].seg, 0) << i;
        EXPECT_EQ(got.got[i].tag, uint8_t(i)) << i;
    }
    EXPECT_EQ(tx.offloads().tx_trains, 0u);
    EXPECT_EQ(rx.offloads().rx_trains, 0u);
}

// A train the kernel refuses (here: a socket without UDP checksums, where Linux takes no
// UDP_SEGMENT) goes again one datagram per packet, each renumbered; nothing is lost, GSO is
// off from then on and the offloads say why.
TEST_F(UdpUringPair, ARefusedTrainGoesAgainPacketByPacket) {
    open();
    if (!tx.offloads().gso) GTEST_SKIP() << "no UDP GSO here";
    int one = 1;
    ASSERT_EQ(setsockopt(tx.socket_fd(), SOL_SOCKET, SO_NO_CHECK, &one, sizeof one), 0);
    std::vector<uint16_t> ids = send_all(std::vector<size_t>(6, 1000));
    EXPECT_EQ(ids, (std::vector<uint16_t>{0, 1, 2, 3, 4, 5}));
    ASSERT_EQ(got.got.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
        EXPECT_EQ(got.got[i].tag, uint8_t(i)) << i;
        EXPECT_EQ(got.got[i].seg, 0) << i;
    }
    std::vector<std::pair<uint16_t, uint16_t>> want = {{0, 0}, {1, 0}, {2, 0},
                                                       {3, 0}, {4, 0}, {5, 0}};
    EXPECT_EQ(sent.moved, want);
    EXPECT_FALSE(tx.offloads().gso);
    EXPECT_EQ(tx.offloads().gso_errno, EINVAL);
    EXPECT_EQ(tx.offloads().tx_trains, 0u);
    EXPECT_EQ(tx.tx_free_count(), UdpUring::kTxBufs);
    // Later packets go one by one at once.
    ids = send_all(std::vector<size_t>(2, 1000));
    EXPECT_EQ(ids, (std::vector<uint16_t>{0, 0}));
    EXPECT_EQ(got.got.size(), 2u);
}

// Packets leave from the port of the socket they are sent through (open_sender: one per UDP
// source port a QP uses), in order; a train joins packets of one socket. A socket closed with
// a packet still queued through it stays open until that packet has left, and a port another
// socket holds (without SO_REUSEPORT) is refused.
TEST_F(UdpUringPair, PacketsLeaveFromTheirSendersPort) {
    open();
    uint16_t p1 = free_udp_port(), p2 = free_udp_port();
    int s1 = tx.open_sender(p1), s2 = tx.open_sender(p2);
    ASSERT_GT(s1, 0);
    ASSERT_GT(s2, 0);
    EXPECT_NE(s1, s2);
    EXPECT_EQ(tx.senders_open(), 2u);
    const uint16_t a = uint16_t(s1), b = uint16_t(s2), p0 = ntohs(tx_addr().sin_port);
    std::vector<uint16_t> senders = {0, a, a, b, b, b, 0};
    std::vector<uint16_t> ids = send_all(std::vector<size_t>(senders.size(), 1000), {}, senders);
    ASSERT_EQ(got.got.size(), senders.size());
    const std::vector<uint16_t> ports = {p0, p1, p1, p2, p2, p2, p0};
    for (size_t i = 0; i < senders.size(); ++i) {
        EXPECT_EQ(got.got[i].tag, uint8_t(i)) << i;
        EXPECT_EQ(got.got[i].from_port, ports[i]) << i;
    }
    if (offloads_here()) {
        EXPECT_EQ(ids, (std::vector<uint16_t>{0, 0, 1, 0, 1, 2, 0}));
    }

    // Closed with a packet queued through it: the packet still leaves from p1.
    got = Recorder{};
    queue({1000}, {}, {a});
    tx.close_sender(s1);
    deliver(1);
    ASSERT_EQ(got.got.size(), 1u);
    EXPECT_EQ(got.got[0].from_port, p1);
    EXPECT_EQ(tx.senders_open(), 1u);
    EXPECT_EQ(tx.tx_free_count(), UdpUring::kTxBufs);

    // p2 is taken by a socket of another kind (no SO_REUSEPORT): refused, nothing opened.
    int holder = socket(AF_INET, SOCK_DGRAM, 0);
    uint16_t p3 = free_udp_port();
    sockaddr_in sa = tx_addr();
    sa.sin_port = htons(p3);
    ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(tx.open_sender(p3), -EADDRINUSE);
    EXPECT_EQ(tx.senders_open(), 1u);
    close(holder);
    tx.close_sender(s2);
    EXPECT_EQ(tx.senders_open(), 0u);
}

// Over IPv6 (issue 27): two rings on ::1 exchange packets; each arrives from the sender's
// IPv6 address and port, with the traffic class and hop limit it was sent with, and trains
// form as over IPv4. The socket is IPv6 only and takes zero UDP checksums.
TEST(UdpUring, Ipv6PacketsKeepTheirTrafficClassAndHopLimit) {
    Endpoint a, b;
    ASSERT_TRUE(parse_address("::1", 0, &a));
    UdpUring tx, rx;
    if (int e = tx.open(a)) GTEST_SKIP() << "no IPv6 on lo here: " << std::strerror(e);
    sockaddr_in6 sa{};
    socklen_t len = sizeof sa;
    ASSERT_EQ(getsockname(tx.socket_fd(), reinterpret_cast<sockaddr*>(&sa), &len), 0);
    const uint16_t tx_port = ntohs(sa.sin6_port);
    ASSERT_EQ(rx.open(a), 0);
    len = sizeof sa;
    ASSERT_EQ(getsockname(rx.socket_fd(), reinterpret_cast<sockaddr*>(&sa), &len), 0);
    b = Endpoint(sa);
    int v6only = 0;
    len = sizeof v6only;
    ASSERT_EQ(getsockopt(rx.socket_fd(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len), 0);
    EXPECT_EQ(v6only, 1);
    struct Got6 : UdpUring::Handler {
        std::vector<std::pair<IpMarks, Endpoint>> got;
        void on_packet(const Endpoint& from, const Endpoint& to, uint8_t*, size_t, uint16_t,
                       IpMarks m) override {
            EXPECT_TRUE(to.is_v6());
            got.emplace_back(m, from);
        }
        void on_eventfd(uint64_t) override {}
    } got, sent;
    const std::vector<IpMarks> marks = {IpMarks{}, IpMarks{}, {0xb8, 17}, {0x6a, 255}};
    for (const IpMarks& m : marks) {
        uint32_t slot;
        uint8_t* p = tx.tx_alloc(&slot);
        ASSERT_NE(p, nullptr);
        std::memset(p, 0, 1000);
        tx.tx_send(slot, 1000, b, m);
    }
    for (int i = 0; i < 200 && got.got.size() < marks.size(); ++i) {
        tx.run_once(0, sent);
        rx.run_once(5000000, got);
    }
    ASSERT_EQ(got.got.size(), marks.size());
    for (size_t i = 0; i < marks.size(); ++i) {
        EXPECT_EQ(got.got[i].first, marks[i]) << i;
        EXPECT_TRUE(got.got[i].second.is_v6()) << i;
        EXPECT_EQ(got.got[i].second.addr_str(), "::1") << i;
        EXPECT_EQ(got.got[i].second.port(), tx_port) << i;
    }
    if (tx.offloads().gso && rx.offloads().gro) {
        EXPECT_EQ(tx.offloads().tx_trains, 1u);
    }
}

// A watch's read waits in the kernel with the address of the watch's value, where the
// kernel writes the eventfd's count when it is signalled. Adding a watch (a new session's
// doorbell) must not move the watches whose reads wait: when their storage grew by moving,
// the counts landed in freed memory, which by then held the device's next objects (an MR's
// address and window count became 1: RDMA to it failed, ibv_dereg_mr said EINVAL). Blocks
// of the sizes that storage had are allocated right after the new watch (glibc gives a
// freed block of that size back first) and must keep their bytes.
TEST(UdpUring, AWatchAddedDoesNotMoveTheReadsInFlight) {
    uint16_t port = free_udp_port();
    ASSERT_NE(port, 0);
    UdpUring io;
    ASSERT_EQ(io.open(htonl(INADDR_LOOPBACK), port), 0);
    struct Seen : UdpUring::Handler {
        std::vector<uint64_t> tags;
        void on_packet(const Endpoint&, const Endpoint&, uint8_t*, size_t, uint16_t,
                       IpMarks) override {}
        void on_eventfd(uint64_t tag) override { tags.push_back(tag); }
    } seen;
    constexpr int kWaiting = 4;
    int fds[kWaiting + 1];
    for (int i = 0; i <= kWaiting; ++i)
        ASSERT_GE(fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), 0);
    for (int i = 0; i < kWaiting; ++i) io.watch_eventfd(fds[i], uint64_t(i));
    constexpr uint8_t kFill = 0xa5;
    std::vector<std::unique_ptr<uint8_t[]>> blocks;
    std::vector<size_t> sizes;
    blocks.reserve(64);  // nothing but the blocks is allocated after the new watch
    sizes.reserve(64);
    seen.tags.reserve(64);
    io.run_once(0, seen);  // their reads are in the kernel now
    io.watch_eventfd(fds[kWaiting], kWaiting);
    for (size_t size = 16; size <= 1024; size *= 2)
        for (int k = 0; k < 4; ++k) {
            blocks.emplace_back(new uint8_t[size]);
            std::memset(blocks.back().get(), kFill, size);
            sizes.push_back(size);
        }
    for (int i = 0; i < kWaiting; ++i) {
        uint64_t one = 1;
        ASSERT_EQ(write(fds[i], &one, sizeof one), ssize_t(sizeof one));
    }
    for (int i = 0; i < 100 && seen.tags.size() < size_t(kWaiting); ++i)
        io.run_once(10000000, seen);
    std::sort(seen.tags.begin(), seen.tags.end());
    EXPECT_EQ(seen.tags, (std::vector<uint64_t>{0, 1, 2, 3}));
    for (size_t b = 0; b < blocks.size(); ++b)
        for (size_t j = 0; j < sizes[b]; ++j)
            ASSERT_EQ(blocks[b][j], kFill)
                << "a block of " << sizes[b] << " bytes changed at byte " << j;
}

// Addresses as `uroce start --addr` takes them.
TEST(Endpoint, ParsesEitherVersion) {
    Endpoint e;
    ASSERT_TRUE(parse_address("10.1.2.3", 4791, &e));
    EXPECT_FALSE(e.is_v6());
    EXPECT_EQ(e.addr_str(), "10.1.2.3");
    uint8_t g[16];
    e.gid(g);
    EXPECT_TRUE(gid_is_v4(g));
    EXPECT_TRUE(Endpoint::from_gid(g, 4791).same(e));
    ASSERT_TRUE(parse_address("fd00::5", 4791, &e));
    EXPECT_TRUE(e.is_v6());
    EXPECT_EQ(e.port(), 4791);
    EXPECT_EQ(e.addr_str(), "fd00::5");
    ASSERT_TRUE(parse_address("::ffff:10.1.2.3", 1, &e));  // IPv4-mapped is IPv4
    EXPECT_FALSE(e.is_v6());
    ASSERT_TRUE(parse_address("fe80::1%lo", 1, &e));
    EXPECT_NE(e.v6.sin6_scope_id, 0u);
    EXPECT_EQ(e.addr_str(), "fe80::1%lo");
    EXPECT_FALSE(parse_address("fe80::1%", 1, &e));
    EXPECT_FALSE(parse_address("fe80::1%no-such-if", 1, &e));
    EXPECT_FALSE(parse_address("10.1.2", 1, &e));
    EXPECT_FALSE(parse_address("host.example", 1, &e));
}
