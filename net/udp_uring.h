// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Packet I/O for one device: a UDP socket driven through io_uring. Receives use a
// multishot recvmsg with a ring of provided buffers; sends use a fixed pool of
// transmit buffers; eventfds (doorbells, the command queue) are watched with reads on
// the same ring. Everything is submitted in batches: one io_uring_enter per loop turn.
// Offloads (docs/performance.md, "GSO and GRO"): consecutive packets to one peer leave as one
// UDP GSO train (one sendmsg with UDP_SEGMENT, the kernel cuts it into the datagrams), and the
// socket has UDP_GRO on, so a train arrives in one receive and is cut here by the segment size
// the kernel reports. Each packet still reaches the handler on its own. Where the kernel
// refuses either, packets go one datagram per sendmsg/receive, as without offloads.
// Multicast groups the device has joined each have a socket of their own (bound to the
// group's address, member on the device's interface) whose receives share the buffers.
// Each packet carries its IPv4 TOS and TTL (net/ip_marks.h) in control messages of its
// sendmsg when they are not the socket's own (0 and 64); a train joins packets of one TOS and
// TTL only. DF is set on every packet (IP_PMTUDISC_PROBE). The UDP checksum is zero, as rxe
// and RoCE NICs send it (SO_NO_CHECK), whenever the socket sends no GSO trains: the kernel
// refuses UDP GSO without a checksum (udp_send_skb: EINVAL), so with GSO on every packet has
// the kernel's checksum. Receivers accept both (a zero UDP checksum means "none" in IPv4).
// Where io_uring is forbidden (a container's seccomp profile, kernel.io_uring_disabled), or
// UROCE_NO_IO_URING=1 is set, the same batches go through plain system calls instead: trains
// queued and sent with sendmmsg, receives with recvmmsg (GRO trains cut the same way), the
// sockets and eventfds watched with ppoll (docs/ci.md, "Privileges").
// Packets may leave from other UDP source ports than the device's (per QP, net/udp_sport.h):
// each such port has a send-only socket of its own (open_sender), bound to the device's
// address, that receives nothing (a filter drops all); a train leaves from one socket.
#pragma once

#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "net/endpoint.h"
#include "net/ip_marks.h"

namespace uroce::net {

class UdpUring {
public:
    static constexpr size_t kBufSize = 4608;  // largest RoCEv2 packet (4096 MTU) + slack
    static constexpr uint32_t kTxBufs = 2048;
    static constexpr uint32_t kRxBufs = 1024;
    // With GRO a receive buffer holds a whole train: the largest UDP payload, plus the header,
    // address and control message the multishot receive puts in front of it. Fewer of them:
    // the pages of every buffer are touched as the ring cycles through them.
    static constexpr size_t kRxTrainBufSize = 65536 + 512;
    static constexpr uint32_t kRxTrainBufs = 256;
    // A GSO train: at most 64 segments (UDP_SEGMENT's limit before Linux 6.9) and one UDP
    // payload's worth of bytes.
    static constexpr uint32_t kMaxSegs = 64;
    static constexpr size_t kMaxTrainBytes = 65535 - 20 - 8;
    static constexpr uint32_t kSendBatch = 32;  // sends queued before a submission mid-turn
    static constexpr uint32_t kRecvBatch = 8;   // received packets handled before one

    class Handler {
    public:
        virtual ~Handler() = default;
        // `to`: the address (and port) the datagram was sent to: the device's own address,
        // or a multicast group's. IPv4 or IPv6, as the device's address is.
        // `seg`: the packet's place in the GRO train it arrived in (0 for a datagram on its
        // own), which is the IPv4 ID the sender's kernel gave it if the train is the sender's
        // GSO train whole (loopback, veth).
        // `marks`: the IPv4 TOS and TTL it arrived with (IP_RECVTOS, IP_RECVTTL), or the IPv6
        // traffic class and hop limit (IPV6_RECVTCLASS, IPV6_RECVHOPLIMIT).
        virtual void on_packet(const Endpoint& from, const Endpoint& to, uint8_t* data, size_t len,
                               uint16_t seg, IpMarks marks) = 0;
        virtual void on_eventfd(uint64_t tag) = 0;
        // A packet queued as segment `from_seg` of a GSO train leaves as segment `to_seg` of
        // another (the kernel refused the train; it goes again one datagram at a time). Its
        // IPv4 ID, which the sender's ICRC covers, changes accordingly.
        // `to`: where the train went (IPv6 has no ID: nothing to change).
        virtual void on_resend(const Endpoint& to, uint8_t* data, size_t len, uint16_t from_seg,
                               uint16_t to_seg) {
            (void)to, (void)data, (void)len, (void)from_seg, (void)to_seg;
        }
    };

    // Whether the offloads are in use, and what they carried.
    struct Offloads {
        bool gso = false, gro = false;
        int gso_errno = 0;  // why GSO is off: the kernel's refusal (0: turned off, or never on)
        int gro_errno = 0;
        uint64_t tx_trains = 0, tx_train_pkts = 0;  // GSO trains sent (2 packets or more)
        uint64_t rx_trains = 0, rx_train_pkts = 0;  // GRO trains received (2 or more)
        bool udp_csum_zero = false;  // packets leave with UDP checksum 0 (no GSO: SO_NO_CHECK)
    };

    UdpUring() = default;
    UdpUring(const UdpUring&) = delete;
    UdpUring& operator=(const UdpUring&) = delete;
    ~UdpUring();

    // Binds ip:port (network order ip, host order port). Multicast sent from this socket
    // leaves through the interface of ip and loops back to the host's members. Returns 0 or
    // errno. Submits nothing: the receive starts with the first run_once(), so that its
    // completions run in the thread that runs the ring (see udp_uring.cpp), which may be
    // another than this one.
    // `offload`: try GSO and GRO (false: one datagram per packet both ways).
    int open(uint32_t ip_be, uint16_t port, bool offload = true) {
        return open(Endpoint::ipv4(ip_be, port), offload);
    }
    // The same for an address of either version (`local`: address and port). An IPv6 socket is
    // IPv6 only (IPV6_V6ONLY), takes a zero UDP checksum (UDP_NO_CHECK6_RX, as rxe sends it)
    // and sends with the traffic class and hop limit of IpMarks.
    int open(const Endpoint& local, bool offload = true);
    const Endpoint& local() const { return locals_[0].ep; }  // open()'s (after it)
    // Another address of the device (after open(): the same port and options), IPv4 or IPv6,
    // with a socket of its own that receives and sends. Returns its number (1, 2, ...: the
    // order of the calls; open()'s is 0) or a negative errno. Control path.
    int add_local(const Endpoint& local);
    size_t locals() const { return locals_.size(); }
    const Endpoint& local(size_t i) const { return locals_[i].ep; }
    uint16_t local_sender(size_t i) const { return locals_[i].sender; }  // for tx_send

    // Joins IPv4 multicast group `group_be` on the interface of the device's address and
    // receives what is sent to group:port. Returns the group socket's number (> 0), or a
    // negative errno (-EAFNOSUPPORT on a device without an IPv4 address). Several
    // devices (also in one process) may join the same group.
    int open_group(uint32_t group_be);
    // The same for an IPv6 group (16 bytes), joined on the interface of the device's first IPv6
    // address (MLD); -EADDRNOTAVAIL when the device has none.
    int open_group6(const uint8_t* group);
    bool has_ipv6() const { return first_local(true) != nullptr; }
    // Leaves the group: no more of its packets are handed to on_packet.
    void close_group(int sock);

    // A send-only socket bound to the device's address and `port` (host order), with the
    // device socket's options; SO_REUSEPORT, so that devices sharing an address share the
    // port. Returns its sender number (> 0, for tx_send) or a negative errno. Control path.
    // `local`: which of the device's addresses it is bound to (add_local).
    int open_sender(uint16_t port, size_t local = 0);
    // The socket closes once no packet queued through it is still in flight.
    void close_sender(int sender);
    uint32_t senders_open() const { return senders_open_; }

    // A transmit buffer of kBufSize bytes, or nullptr when all are in flight.
    uint8_t* tx_alloc(uint32_t* slot);
    void tx_free(uint32_t slot);
    uint8_t* tx_buffer(uint32_t slot) const { return tx_mem_ + size_t(slot) * kBufSize; }
    // Queues the packet. It joins the train to `to` being built when it can (same peer, not
    // longer than the train's first packet, room left), else starts one; a train leaves when
    // the next packet cannot join it, and at the latest with run_once(). Returns its segment
    // number in the train (the IPv4 ID the kernel gives it), 0 for the first or only packet.
    // Until the next tx_send or run_once the buffer may still be changed.
    // `marks`: the packet's IPv4 TOS and TTL; only packets with the same ones share a train.
    // `sender`: the socket it leaves from (0: the device's; open_sender); trains join packets
    // of one sender.
    uint16_t tx_send(uint32_t slot, size_t len, const Endpoint& to, IpMarks marks = {},
                     uint16_t sender = 0);
    // The segment number tx_send(…, len, to, marks, sender) would give a packet now.
    uint16_t tx_next_seg(size_t len, const Endpoint& to, IpMarks marks = {},
                         uint16_t sender = 0) const;
    uint32_t tx_free_count() const { return uint32_t(tx_free_.size()); }
    // Gives the pages of the packet buffers back to the kernel; they stay mapped and come
    // back, zeroed, when a packet next uses them. Transmit buffers only when every one is
    // free (a send in flight may still be read by the kernel). Receive buffers are filled
    // by the kernel in the engine thread's own context (task work, never while the thread
    // runs this), so a packet received afterwards faults its page back in.
    void release_idle_buffers();

    // Keeps a read posted on `fd` (an eventfd); on_eventfd(tag) runs each time it
    // fires. The ring owns fd from now on and closes it after unwatch().
    void watch_eventfd(int fd, uint64_t tag);
    void unwatch_eventfd(uint64_t tag);

    // Submits what is queued, waits up to timeout_ns (0: don't wait) for at least one
    // completion, and dispatches every completion available.
    void run_once(uint64_t timeout_ns, Handler& h);

    // Whether packets go through io_uring (false: the fallback without it), and, when not,
    // why (the errno io_uring_setup gave; 0: UROCE_NO_IO_URING).
    bool uses_io_uring() const { return ring_ok_; }
    int io_uring_errno() const { return uring_errno_; }

    uint64_t rx_nobufs() const { return rx_nobufs_; }
    const Offloads& offloads() const { return off_; }
    int socket_fd() const { return sock_; }  // the device's socket (tests change its options)
    // The socket's receive buffer in bytes, as the kernel granted it.
    int rcvbuf() const;

private:
    // One sendmsg: a packet on its own, or a GSO train of packets of `seg` bytes (the last
    // may be shorter). Its buffers are not contiguous: one iovec per packet.
    struct Train {
        msghdr msg;
        Endpoint to;
        uint32_t n;    // packets
        uint32_t seg;  // the first packet's length: every segment's but the last
        IpMarks marks;
        uint16_t sender;
        // UDP_SEGMENT, IP_TOS, IP_TTL.
        alignas(
            cmsghdr) unsigned char ctl[CMSG_SPACE(sizeof(uint16_t)) + 2 * CMSG_SPACE(sizeof(int))];
        iovec iov[kMaxSegs];
        uint32_t slot[kMaxSegs];
    };
    // A receiving socket: [0] the device's own, then one per joined multicast group.
    struct Sock {
        int fd = -1;
        Endpoint local;        // the address its datagrams are sent to
        bool active = false;   // receives go to the handler
        bool rearm = false;    // the multishot receive ended; post it again
        bool pending = false;  // a receive is posted (the slot is not reusable yet)
    };
    // A socket packets leave from: [0] the device's, then open_sender's. `inflight`: trains
    // through it not yet completed (a closing socket waits for them).
    struct Sender {
        int fd = -1;
        uint32_t inflight = 0;
        bool closing = false;
        bool v6 = false;
        bool receives = false;  // an address's own socket (socks_ closes it)
    };
    // The device's addresses: open()'s first, then add_local()'s.
    struct Local {
        Endpoint ep;
        uint16_t sender = 0;
    };
    struct Watch {
        int fd = -1;
        uint64_t tag = 0;
        uint64_t value = 0;
        bool active = false;
        bool closing = false;
    };

    io_uring_sqe* sqe();
    void arm_recv(uint32_t sock);
    bool joins(const Train& t, size_t len, const Endpoint& to, IpMarks marks,
               uint16_t sender) const;
    void start_train(uint32_t slot, size_t len, const Endpoint& to, IpMarks marks, uint16_t sender);
    void sender_done(uint16_t sender);  // a train through it completed
    void set_udp_csum_zero();  // SO_NO_CHECK on every send socket, once they send no trains
    static bool no_udp_csum(int fd, bool v6);  // SO_NO_CHECK, or UDP_NO_CHECK6_TX over IPv6
    void send_options(
        int fd, const Endpoint& at);  // DF, default TOS and TTL, multicast: every send socket's
    void close_train();               // the open train's sendmsg is queued
    void sent(uint32_t train, int res, Handler& h);
    uint32_t deliver(const Endpoint& from, const Endpoint& to, uint8_t* data, size_t len,
                     uint32_t seg, IpMarks marks, Handler& h);  // returns the packets
    static void set_buffers(int fd);
    static void recv_marks(int fd, bool v6);  // receives come with their TOS and TTL
    static int new_socket(bool v6);
    static int group_socket(bool v6);  // new_socket, set up to join a multicast group
    static int bind_or_close(int fd, const Endpoint& at);  // 0, or -errno (fd closed)
    uint32_t free_sock();  // a slot of socks_ past [0] for a new receiving socket
    // A group's bound socket joins it (setsockopt level/join with req) and starts receiving;
    // returns its number, or -errno (fd closed).
    int add_group_sock(int fd, const Endpoint& group, int level, int join, const void* req,
                       socklen_t req_len);
    const Local* first_local(bool v6) const;  // the device's first address of that version
    static void read_rx_cmsg(const cmsghdr* c, int& seg, IpMarks& marks);
    // Room for a receive's control messages: its TOS (one byte) and TTL, UDP_GRO's size.
    static constexpr size_t kRxCtlBytes = CMSG_SPACE(sizeof(int)) * 3;
    void post_watch_read(uint32_t idx);
    void recycle_rx(uint16_t bid);
    // Without io_uring: what the ring's sendmsg requests and completions did.
    void flush_sends();               // the queued trains, sendmmsg in batches
    void complete_sends(Handler& h);  // sent() for each, as the completions were
    void poll_run(uint64_t timeout_ns, Handler& h);
    void poll_recv(uint32_t sock, Handler& h);

    io_uring ring_{};
    bool ring_ok_ = false;
    int sock_ = -1;  // socks_[0].fd
    std::vector<Local> locals_;
    uint16_t port_ = 0;
    std::vector<Sock> socks_;
    std::vector<Sender> senders_;
    uint32_t senders_open_ = 0;  // open_sender's sockets open
    uint8_t* tx_mem_ = nullptr;
    std::vector<uint32_t> tx_free_;
    // Trains: as many as transmit buffers (a train has one at least), allocated once and
    // touched as they are used.
    std::unique_ptr<Train[]> trains_;
    std::vector<uint32_t> trains_free_;
    int64_t open_train_ = -1;  // being built: packets may still join it
    size_t rx_buf_size_ = kBufSize;
    uint32_t rx_bufs_ = kRxBufs;
    uint8_t* rx_mem_ = nullptr;
    io_uring_buf_ring* br_ = nullptr;
    size_t br_bytes_ = 0;
    msghdr rx_msg_{};
    // A deque: a watch's posted read names its `value`, which the kernel writes when the
    // eventfd is signalled, so adding a watch must not move the others (a vector's growth
    // freed them, and that write then corrupted whatever the heap put there next).
    std::deque<Watch> watches_;
    std::vector<uint32_t> watch_free_;
    uint64_t rx_nobufs_ = 0;
    uint32_t sends_queued_ = 0;  // packets in sendmsg SQEs not yet submitted
    Offloads off_;
    // The fallback without io_uring: trains closed and not yet sent, trains sent (or failed)
    // and not yet completed, with sendmsg's result; the pollfds of a turn.
    int uring_errno_ = 0;
    std::vector<uint32_t> send_queue_;
    size_t send_head_ = 0;  // send_queue_[send_head_...] are still to send
    std::vector<std::pair<uint32_t, int>> send_done_;
    std::vector<pollfd> pfds_;
};

}  // namespace uroce::net
