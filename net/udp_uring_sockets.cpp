// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UdpUring's sockets (net/udp_uring.h): the device's addresses, the per-QP source-port
// senders, multicast groups and the options each socket gets. The ring, receives, transmit
// trains and the loop are in udp_uring.cpp.
#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "net/udp_options.h"
#include "net/udp_uring.h"

namespace uroce::net {

int UdpUring::new_socket(bool v6) {
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || !v6) return fd;
    // IPv6 only: the device's IPv4 address, if it has one, is another socket's.
    int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    // rxe sends IPv6 packets with a zero UDP checksum (RFC 6935 allows it for tunnels).
    setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
    return fd;
}

// Every device on the host that joins a group binds group:port; each gets a copy. A socket
// hears only the groups it joined itself, on the interface it joined them on.
int UdpUring::group_socket(bool v6) {
    int fd = new_socket(v6);
    if (fd < 0) return fd;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof zero);
    else
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof zero);
    set_buffers(fd);
    recv_marks(fd, v6);
    return fd;
}

int UdpUring::bind_or_close(int fd, const Endpoint& at) {
    if (bind(fd, &at.sa, at.len()) == 0) return 0;
    int e = errno;
    close(fd);
    return -e;
}

uint32_t UdpUring::free_sock() {
    uint32_t i = 1;
    while (i < socks_.size() && (socks_[i].fd >= 0 || socks_[i].pending)) ++i;
    if (i == socks_.size()) socks_.emplace_back();
    return i;
}

int UdpUring::add_local(const Endpoint& local) {
    if (sock_ < 0 || !tx_mem_ || locals_.size() > UINT16_MAX) return -EINVAL;
    const bool v6 = local.is_v6();
    int fd = new_socket(v6);
    if (fd < 0) return -errno;
    set_buffers(fd);
    recv_marks(fd, v6);
    send_options(fd, local);
    int one = 1;  // (GSO needs no option: each train names its segment size)
    if (off_.gro) setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
    if (!off_.gso) no_udp_csum(fd, v6);
    if (int e = bind_or_close(fd, local)) return e;
    const uint32_t i = free_sock();
    socks_[i] = Sock{fd, local, true, false, false};
    const size_t k = senders_.size();
    senders_.push_back(Sender{fd, 0, false, v6, true});
    locals_.push_back(Local{local, uint16_t(k)});
    arm_recv(i);
    return int(locals_.size() - 1);
}

void UdpUring::send_options(int fd, const Endpoint& at) {
    if (at.is_v6()) {
        // No fragmentation (IPv6 has no DF: a sender that fragments adds a header); the
        // traffic class and hop limit of a packet that names none; multicast as over IPv4.
        int pmtu = IPV6_PMTUDISC_PROBE, tclass = IpMarks{}.tos, hops = IpMarks{}.ttl, loop = 1;
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
        setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);
        setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hops, sizeof hops);
        unsigned ifindex = interface_of(at);
        if (ifindex) setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof ifindex);
        setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops);
        setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &loop, sizeof loop);
        return;
    }
    // DF set and no fragmentation: the IPv4 ID is then 0, which the ICRC covers.
    int pmtu = IP_PMTUDISC_PROBE;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    // The TOS and TTL of a packet that names none (IpMarks{}), whatever the host's
    // net.ipv4.ip_default_ttl: control messages on a sendmsg set others (close_train).
    int tos = IpMarks{}.tos, uttl = IpMarks{}.ttl;
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    setsockopt(fd, IPPROTO_IP, IP_TTL, &uttl, sizeof uttl);
    // Multicast (docs/multicast.md) leaves through the device's interface, not the default
    // route's, with the TTL of unicast packets, and loops back to this host's members
    // (other devices, and this one's own group sockets).
    ip_mreqn mif{};
    mif.imr_address.s_addr = at.v4_be();
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof mif);
    int ttl = 64, loop = 1;
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
}

// As rxe and RoCE NICs send it. Only without GSO trains: the kernel refuses a train from a
// socket with SO_NO_CHECK (EINVAL).
void UdpUring::set_udp_csum_zero() {
    off_.udp_csum_zero = no_udp_csum(sock_, senders_[0].v6);
    for (size_t i = 1; i < senders_.size(); ++i)
        if (senders_[i].fd >= 0) no_udp_csum(senders_[i].fd, senders_[i].v6);
}

bool UdpUring::no_udp_csum(int fd, bool v6) {
    int one = 1;
    if (v6) return setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_TX, &one, sizeof one) == 0;
    return setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one) == 0;
}

int UdpUring::open_sender(uint16_t port, size_t local) {
    if (local >= locals_.size()) return -EINVAL;
    const Endpoint& at = locals_[local].ep;
    int fd = new_socket(at.is_v6());
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    send_options(fd, at);
    int buf = 8 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    // It receives nothing (peers answer the device's port): a filter that drops every
    // datagram before it is queued, and the smallest buffer.
    sock_filter drop_all{BPF_RET | BPF_K, 0, 0, 0};
    sock_fprog prog{1, &drop_all};
    setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
    int small = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    if (!off_.gso) no_udp_csum(fd, at.is_v6());
    Endpoint sa = at;
    sa.set_port(port);
    if (int e = bind_or_close(fd, sa)) return e;
    size_t i = 1;
    while (i < senders_.size() && (senders_[i].fd >= 0 || senders_[i].inflight)) ++i;
    if (i > UINT16_MAX) {
        close(fd);
        return -EMFILE;
    }
    if (i == senders_.size()) senders_.emplace_back();
    senders_[i] = Sender{fd, 0, false, at.is_v6(), false};
    ++senders_open_;
    return int(i);
}

void UdpUring::close_sender(int sender) {
    if (sender <= 0 || size_t(sender) >= senders_.size() || senders_[sender].fd < 0) return;
    Sender& k = senders_[sender];
    k.closing = true;
    if (!k.inflight) {
        close(k.fd);
        k = Sender{};
        --senders_open_;
    }
}

void UdpUring::sender_done(uint16_t sender) {
    Sender& k = senders_[sender];
    if (--k.inflight || !k.closing) return;
    close(k.fd);
    k = Sender{};
    --senders_open_;
}

void UdpUring::recv_marks(int fd, bool v6) {
    int one = 1;
    if (v6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof one);
        return;
    }
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof one);
}

void UdpUring::set_buffers(int fd) {
    int buf = 8 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
}

const UdpUring::Local* UdpUring::first_local(bool v6) const {
    for (const Local& l : locals_)
        if (l.ep.is_v6() == v6) return &l;
    return nullptr;
}

int UdpUring::add_group_sock(int fd, const Endpoint& group, int level, int join, const void* req,
                             socklen_t req_len) {
    if (setsockopt(fd, level, join, req, req_len) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    const uint32_t i = free_sock();
    socks_[i] = Sock{fd, group, true, false, false};
    arm_recv(i);
    return int(i);
}

int UdpUring::open_group(uint32_t group_be) {
    const Local* on = first_local(false);  // the interface it joins on
    if (!on) return -EAFNOSUPPORT;
    int fd = group_socket(false);
    if (fd < 0) return -errno;
    const Endpoint g = Endpoint::ipv4(group_be, port_);
    ip_mreqn m{};
    m.imr_multiaddr.s_addr = group_be;
    m.imr_address.s_addr = on->ep.v4_be();
    if (int e = bind_or_close(fd, g)) return e;
    return add_group_sock(fd, g, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m);
}

int UdpUring::open_group6(const uint8_t* group) {
    const Local* at = first_local(true);
    if (!at) return -EADDRNOTAVAIL;
    const uint32_t ifindex = interface_of(at->ep);
    int fd = group_socket(true);
    if (fd < 0) return -errno;
    Endpoint g = Endpoint::from_gid(group, port_, ifindex);
    ipv6_mreq m{};
    std::memcpy(&m.ipv6mr_multiaddr, group, 16);
    m.ipv6mr_interface = ifindex;
    if (int e = bind_or_close(fd, g)) return e;
    return add_group_sock(fd, g, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof m);
}

int UdpUring::rcvbuf() const {
    int v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &v, &len) != 0) return 0;
    return v;
}

}  // namespace uroce::net
