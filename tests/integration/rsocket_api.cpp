// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rsockets against rsocket(7) and TCP's behaviour (docs/rsockets.md): one process plays
// both ends over one device (the library's CM thread answers the connection request, so a
// blocking rconnect returns with the server's end waiting in raccept).
// usage: rsocket_api ADDR (the device's address)
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string g_addr = "127.0.0.1";

sockaddr_in addr_of(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, g_addr.c_str(), &a.sin_addr);
    return a;
}

// A listener on an ephemeral port; its port in *port.
int listener(uint16_t* port, int iomap = 0) {
    int l = rsocket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) return -1;
    if (iomap) rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap);
    sockaddr_in a = addr_of(0);
    if (rbind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || rlisten(l, 8)) return -1;
    socklen_t len = sizeof a;
    rgetsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    *port = ntohs(a.sin_port);
    return l;
}

struct Pair {
    int l = -1, c = -1, s = -1;
    ~Pair() {
        for (int fd : {c, s, l})
            if (fd >= 0) rclose(fd);
    }
};

void connect_pair(Pair* p, int iomap = 0) {
    uint16_t port;
    p->l = listener(&port, iomap);
    ASSERT_GE(p->l, 0) << strerror(errno);
    p->c = rsocket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(p->c, 0);
    if (iomap) rsetsockopt(p->c, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap);
    sockaddr_in a = addr_of(port);
    ASSERT_EQ(rconnect(p->c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
    p->s = raccept(p->l, nullptr, nullptr);
    ASSERT_GE(p->s, 0) << strerror(errno);
}

void recv_all(int fd, void* buf, size_t len) {
    ASSERT_EQ(rrecv(fd, buf, len, MSG_WAITALL), ssize_t(len)) << strerror(errno);
}

TEST(RsocketDgram, DatagramsKeepTheirBoundariesAndSources) {
    int a = rsocket(AF_INET, SOCK_DGRAM, 0), b = rsocket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    sockaddr_in sa = addr_of(0), sb = addr_of(0);
    ASSERT_EQ(rbind(a, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << strerror(errno);
    ASSERT_EQ(rbind(b, reinterpret_cast<sockaddr*>(&sb), sizeof sb), 0) << strerror(errno);
    socklen_t len = sizeof sa;
    ASSERT_EQ(rgetsockname(a, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    len = sizeof sb;
    ASSERT_EQ(rgetsockname(b, reinterpret_cast<sockaddr*>(&sb), &len), 0);
    EXPECT_NE(sa.sin_port, 0);
    char big[4096] = {};
    EXPECT_EQ(rsendto(a, big, sizeof big, 0, reinterpret_cast<sockaddr*>(&sb), sizeof sb), -1);
    EXPECT_EQ(errno, EMSGSIZE);
    EXPECT_EQ(rsend(a, "x", 1, 0), -1);  // no destination
    EXPECT_EQ(errno, EDESTADDRREQ);
    // The first datagrams go by UDP until the peer's QP is known, the rest by UD: each
    // arrives whole, in order here, with the sender's address.
    for (int i = 0; i < 50; ++i) {
        char m[64];
        int n = snprintf(m, sizeof m, "datagram %d", i);
        ASSERT_EQ(rsendto(a, m, size_t(n), 0, reinterpret_cast<sockaddr*>(&sb), sizeof sb), n);
        char r[64] = {};
        sockaddr_in from{};
        socklen_t fl = sizeof from;
        ASSERT_EQ(rrecvfrom(b, r, sizeof r, 0, reinterpret_cast<sockaddr*>(&from), &fl), n);
        EXPECT_STREQ(r, m);
        EXPECT_EQ(fl, sizeof from);
        EXPECT_EQ(from.sin_port, sa.sin_port);
        EXPECT_EQ(from.sin_addr.s_addr, sa.sin_addr.s_addr);
        // And back, to the address it came from.
        ASSERT_EQ(rsendto(b, r, size_t(n), 0, reinterpret_cast<sockaddr*>(&from), fl), n);
        memset(r, 0, sizeof r);
        ASSERT_EQ(rrecv(a, r, sizeof r, 0), n);
        EXPECT_STREQ(r, m);
    }
    // A short buffer takes the start of one datagram; the rest of it is gone.
    ASSERT_EQ(rconnect(a, reinterpret_cast<sockaddr*>(&sb), sizeof sb), 0);
    ASSERT_EQ(rsend(a, "abcdef", 6, 0), 6);
    ASSERT_EQ(rsend(a, "gh", 2, 0), 2);
    char r[8] = {};
    EXPECT_EQ(rrecv(b, r, 3, 0), 3);
    EXPECT_EQ(memcmp(r, "abc", 3), 0);
    EXPECT_EQ(rrecv(b, r, sizeof r, 0), 2);
    EXPECT_EQ(memcmp(r, "gh", 2), 0);
    EXPECT_EQ(rrecv(b, r, sizeof r, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    pollfd q{b, POLLIN, 0};
    EXPECT_EQ(rpoll(&q, 1, 0), 0);
    ASSERT_EQ(rsend(a, "p", 1, 0), 1);
    EXPECT_EQ(rpoll(&q, 1, 5000), 1);
    EXPECT_EQ(q.revents, POLLIN);
    EXPECT_EQ(rrecv(b, r, sizeof r, 0), 1);
    EXPECT_EQ(rclose(a), 0);
    EXPECT_EQ(rclose(b), 0);
}

TEST(Rsocket, BadArguments) {
    errno = 0;
    EXPECT_EQ(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
    EXPECT_EQ(errno, ENOTSUP);
    EXPECT_EQ(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), -1);
    EXPECT_EQ(errno, ENOTSUP);
    EXPECT_EQ(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), -1);
    EXPECT_EQ(errno, ENOTSUP);
    char b;
    EXPECT_EQ(rsend(0, &b, 1, 0), -1);  // stdin: not an rsocket
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(rclose(-1), -1);
    EXPECT_EQ(errno, EBADF);
    int s = rsocket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(s, 0);
    EXPECT_EQ(rsend(s, &b, 1, 0), -1);
    EXPECT_EQ(errno, ENOTCONN);
    EXPECT_EQ(rrecv(s, &b, 1, 0), -1);
    EXPECT_EQ(errno, ENOTCONN);
    sockaddr_in a;
    socklen_t len = sizeof a;
    EXPECT_EQ(rgetpeername(s, reinterpret_cast<sockaddr*>(&a), &len), -1);
    EXPECT_EQ(errno, ENOTCONN);
    EXPECT_EQ(raccept(s, nullptr, nullptr), -1);  // not listening
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(rshutdown(s, SHUT_WR), -1);
    EXPECT_EQ(errno, ENOTCONN);
    EXPECT_EQ(rclose(s), 0);
}

TEST(Rsocket, ConnectToNobodyIsRefused) {
    uint16_t port;
    int l = listener(&port);
    ASSERT_GE(l, 0);
    rclose(l);  // the port is free again: nobody listens there
    int c = rsocket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = addr_of(port);
    EXPECT_EQ(rconnect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
    EXPECT_EQ(errno, ECONNREFUSED);
    rclose(c);
}

TEST(Rsocket, NonBlockingConnectAndAccept) {
    uint16_t port;
    int l = listener(&port);
    ASSERT_GE(l, 0);
    ASSERT_EQ(rfcntl(l, F_SETFL, O_NONBLOCK), 0);
    EXPECT_EQ(raccept(l, nullptr, nullptr), -1);
    EXPECT_EQ(errno, EAGAIN);
    int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    EXPECT_TRUE(rfcntl(c, F_GETFL) & O_NONBLOCK);
    sockaddr_in a = addr_of(port);
    ASSERT_EQ(rconnect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
    EXPECT_EQ(errno, EINPROGRESS);
    pollfd p[2] = {{c, POLLOUT, 0}, {l, POLLIN, 0}};
    for (int i = 0; i < 100 && !(p[0].revents && p[1].revents); ++i) {
        pollfd q[2] = {{c, POLLOUT, 0}, {l, POLLIN, 0}};
        ASSERT_GE(rpoll(q, 2, 100), 0);
        p[0].revents |= q[0].revents;
        p[1].revents |= q[1].revents;
    }
    EXPECT_EQ(p[0].revents, POLLOUT);
    EXPECT_EQ(p[1].revents, POLLIN);
    int err = -1;
    socklen_t len = sizeof err;
    EXPECT_EQ(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len), 0);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(rconnect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
    EXPECT_EQ(errno, EISCONN);
    sockaddr_in peer{};
    len = sizeof peer;
    int s = raccept(l, reinterpret_cast<sockaddr*>(&peer), &len);
    ASSERT_GE(s, 0);
    EXPECT_EQ(len, sizeof peer);
    EXPECT_EQ(peer.sin_addr.s_addr, a.sin_addr.s_addr);
    char b;
    EXPECT_EQ(rrecv(c, &b, 1, 0), -1);  // O_NONBLOCK, nothing sent
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(rrecv(s, &b, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    rclose(s);
    rclose(c);
    rclose(l);
}

TEST(Rsocket, DataBothWaysIntact) {
    Pair p;
    connect_pair(&p);
    std::vector<uint8_t> out(3 << 20), in(out.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(i * 131 + (i >> 12));
    // Larger than the buffers: the sender waits for credits while the receiver reads.
    ASSERT_EQ(rfcntl(p.c, F_SETFL, O_NONBLOCK), 0);
    size_t sent = 0, got = 0;
    while (got < in.size()) {
        if (sent < out.size()) {
            ssize_t n = rsend(p.c, out.data() + sent, out.size() - sent, 0);
            if (n > 0)
                sent += size_t(n);
            else
                ASSERT_EQ(errno, EAGAIN);
        }
        ssize_t n = rrecv(p.s, in.data() + got, in.size() - got, MSG_DONTWAIT);
        if (n > 0)
            got += size_t(n);
        else
            ASSERT_EQ(errno, EAGAIN);
    }
    EXPECT_EQ(in, out);
    ASSERT_EQ(rfcntl(p.c, F_SETFL, 0), 0);
    // The other way, gathered and scattered.
    char a[] = "gathered ", b[] = "writev";
    iovec iov[2] = {{a, 9}, {b, 6}};
    EXPECT_EQ(rwritev(p.s, iov, 2), 15);
    char r[16] = {};
    recv_all(p.c, r, 15);
    EXPECT_STREQ(r, "gathered writev");
}

TEST(Rsocket, PeekLeavesTheData) {
    Pair p;
    connect_pair(&p);
    ASSERT_EQ(rsend(p.c, "hello", 5, 0), 5);
    char b[8] = {};
    pollfd q{p.s, POLLIN, 0};
    ASSERT_EQ(rpoll(&q, 1, 5000), 1);
    EXPECT_EQ(rrecv(p.s, b, 5, MSG_PEEK), 5);
    EXPECT_STREQ(b, "hello");
    memset(b, 0, sizeof b);
    EXPECT_EQ(rread(p.s, b, sizeof b), 5);
    EXPECT_STREQ(b, "hello");
}

TEST(Rsocket, ShutdownWriteIsEndOfFileForThePeer) {
    Pair p;
    connect_pair(&p);
    ASSERT_EQ(rsend(p.c, "last", 4, 0), 4);
    ASSERT_EQ(rshutdown(p.c, SHUT_WR), 0);
    char b[8];
    recv_all(p.s, b, 4);
    EXPECT_EQ(rrecv(p.s, b, sizeof b, 0), 0);  // end of file
    EXPECT_EQ(rsend(p.c, "x", 1, 0), -1);
    EXPECT_EQ(errno, EPIPE);
    // The other direction still works.
    ASSERT_EQ(rsend(p.s, "back", 4, 0), 4);
    recv_all(p.c, b, 4);
    EXPECT_EQ(memcmp(b, "back", 4), 0);
}

TEST(Rsocket, PeerCloseGivesEndOfFileThenHangUp) {
    Pair p;
    connect_pair(&p);
    ASSERT_EQ(rsend(p.c, "bye", 3, 0), 3);
    ASSERT_EQ(rclose(p.c), 0);
    p.c = -1;
    char b[8];
    pollfd q{p.s, POLLIN, 0};
    ASSERT_EQ(rpoll(&q, 1, 5000), 1);
    EXPECT_EQ(q.revents, POLLIN);  // the data first, no hang-up before it is read
    recv_all(p.s, b, 3);
    EXPECT_EQ(rrecv(p.s, b, sizeof b, 0), 0);
    q.revents = 0;
    EXPECT_EQ(rpoll(&q, 1, 0), 1);
    EXPECT_TRUE(q.revents & POLLHUP);
    EXPECT_EQ(rsend(p.s, "x", 1, 0), -1);
    EXPECT_EQ(errno, EPIPE);
}

TEST(Rsocket, RpollAndRselectMixDescriptors) {
    Pair p;
    connect_pair(&p);
    int pfd[2];
    ASSERT_EQ(pipe(pfd), 0);
    pollfd q[2] = {{pfd[0], POLLIN, 0}, {p.s, POLLIN, 0}};
    EXPECT_EQ(rpoll(q, 2, 0), 0);
    EXPECT_EQ(rpoll(q, 2, 50), 0);  // times out
    ASSERT_EQ(write(pfd[1], "p", 1), 1);
    ASSERT_EQ(rpoll(q, 2, 5000), 1);
    EXPECT_EQ(q[0].revents, POLLIN);
    EXPECT_EQ(q[1].revents, 0);
    char b;
    ASSERT_EQ(read(pfd[0], &b, 1), 1);
    ASSERT_EQ(rsend(p.c, "r", 1, 0), 1);
    ASSERT_EQ(rpoll(q, 2, 5000), 1);
    EXPECT_EQ(q[0].revents, 0);
    EXPECT_EQ(q[1].revents, POLLIN);
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_SET(pfd[0], &rd);
    FD_SET(p.s, &rd);
    FD_SET(p.c, &wr);
    timeval tv{5, 0};
    int n = std::max({pfd[0], p.s, p.c}) + 1;
    EXPECT_EQ(rselect(n, &rd, &wr, nullptr, &tv), 2);
    EXPECT_FALSE(FD_ISSET(pfd[0], &rd));
    EXPECT_TRUE(FD_ISSET(p.s, &rd));
    EXPECT_TRUE(FD_ISSET(p.c, &wr));
    close(pfd[0]);
    close(pfd[1]);
}

TEST(Rsocket, Options) {
    int s = rsocket(AF_INET, SOCK_STREAM, 0);
    int v = 128, r = 0;
    socklen_t len = sizeof r;
    EXPECT_EQ(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v), 0);
    EXPECT_EQ(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &r, &len), 0);
    EXPECT_EQ(r, 128);
    v = 100;
    EXPECT_EQ(rsetsockopt(s, SOL_RDMA, RDMA_INLINE, &v, sizeof v), 0);
    v = 1 << 16;
    EXPECT_EQ(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v), 0);
    len = sizeof r;
    EXPECT_EQ(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &r, &len), 0);
    EXPECT_EQ(r, 1 << 17);  // twice, as Linux reports
    v = 1;
    EXPECT_EQ(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v), 0);
    len = sizeof r;
    EXPECT_EQ(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &r, &len), 0);
    EXPECT_EQ(r, 1);
    linger lg{0, 0};
    EXPECT_EQ(rsetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    lg.l_onoff = 1;
    len = sizeof lg;
    EXPECT_EQ(rgetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
    EXPECT_EQ(lg.l_onoff, 0);
    EXPECT_EQ(rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof v), -1);
    EXPECT_EQ(errno, ENOTSUP);
    EXPECT_EQ(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, 1), -1);  // too short
    EXPECT_EQ(errno, EINVAL);
    len = sizeof r;
    EXPECT_EQ(rgetsockopt(s, SOL_SOCKET, SO_TYPE, &r, &len), 0);
    EXPECT_EQ(r, SOCK_STREAM);
    rclose(s);

    Pair p;
    connect_pair(&p);
    v = 64;
    EXPECT_EQ(rsetsockopt(p.c, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v), -1);  // the QP exists
    EXPECT_EQ(errno, EINVAL);
    len = sizeof r;
    EXPECT_EQ(rgetsockopt(p.c, IPPROTO_TCP, TCP_MAXSEG, &r, &len), 0);
    EXPECT_GE(r, 256);
    v = 1;
    EXPECT_EQ(rsetsockopt(p.c, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v), 0);
    len = sizeof r;
    EXPECT_EQ(rgetsockopt(p.c, SOL_SOCKET, SO_KEEPALIVE, &r, &len), 0);
    EXPECT_EQ(r, 1);
    v = 1;
    EXPECT_EQ(rsetsockopt(p.c, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof v), 0);
    sleep(2);  // keepalives sent; the connection is untouched
    ASSERT_EQ(rsend(p.c, "k", 1, 0), 1);
    char b;
    recv_all(p.s, &b, 1);
}

TEST(Rsocket, IomapWriteLandsInThePeersBuffer) {
    Pair p;
    connect_pair(&p, 4);
    void* mem = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    auto* buf = static_cast<uint8_t*>(mem);
    EXPECT_EQ(riomap(p.s, buf, 1 << 16, PROT_WRITE, 0, 4096), 4096);
    ASSERT_EQ(rsend(p.s, "m", 1, 0), 1);  // carries the mapping to the peer first
    char b;
    recv_all(p.c, &b, 1);
    std::vector<uint8_t> data(20000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7);
    EXPECT_EQ(riowrite(p.c, data.data(), data.size(), 4096 + 100, 0), data.size());
    ASSERT_EQ(rsend(p.c, "d", 1, 0), 1);  // after the writes (RC order)
    recv_all(p.s, &b, 1);
    EXPECT_EQ(memcmp(buf + 100, data.data(), data.size()), 0);
    EXPECT_EQ(riowrite(p.c, data.data(), 10, 1, 0), size_t(-1));  // nothing mapped there
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(riounmap(p.s, buf + 1, 10), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(riounmap(p.s, buf, 1 << 16), 0);
    munmap(mem, 1 << 16);
}

}  // namespace

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    if (argc > 1) g_addr = argv[1];
    return RUN_ALL_TESTS();
}
