// net/: the io_uring socket. io_uring runs a request's completion work (task work) in the
// thread that submitted it, so what the ring submits decides which thread each received
// packet wakes: it must be the one that drives the ring (the engine), never the one that
// opened it (uroced's control thread).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "net/udp_uring.h"

using namespace uroce::net;

namespace {

struct Counter : UdpUring::Handler {
    std::atomic<int> packets{0};
    void on_packet(const sockaddr_in&, uint32_t, uint8_t*, size_t) override { ++packets; }
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
