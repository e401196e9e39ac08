// Packet I/O for one device: a UDP socket driven through io_uring. Receives use a
// multishot recvmsg with a ring of provided buffers; sends use a fixed pool of
// transmit buffers; eventfds (doorbells, the command queue) are watched with reads on
// the same ring. Everything is submitted in batches: one io_uring_enter per loop turn.
// Multicast groups the device has joined each have a socket of their own (bound to the
// group's address, member on the device's interface) whose receives share the buffers.
#pragma once

#include <liburing.h>
#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uroce::net {

class UdpUring {
public:
    static constexpr size_t kBufSize = 4608;  // largest RoCEv2 packet (4096 MTU) + slack
    static constexpr uint32_t kTxBufs = 2048;
    static constexpr uint32_t kRxBufs = 1024;
    static constexpr uint32_t kSendBatch = 32;  // sends queued before a submission mid-turn
    static constexpr uint32_t kRecvBatch = 8;   // received packets handled before one

    class Handler {
    public:
        virtual ~Handler() = default;
        // `to_be`: the destination IPv4 address the datagram was sent to (network order):
        // the device's own address, or a multicast group's.
        virtual void on_packet(const sockaddr_in& from, uint32_t to_be, uint8_t* data,
                               size_t len) = 0;
        virtual void on_eventfd(uint64_t tag) = 0;
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
    int open(uint32_t ip_be, uint16_t port);

    // Joins IPv4 multicast group `group_be` on the interface of the device's address and
    // receives what is sent to group:port. Returns the group socket's number (> 0), or a
    // negative errno. Several devices (also in one process) may join the same group.
    int open_group(uint32_t group_be);
    // Leaves the group: no more of its packets are handed to on_packet.
    void close_group(int sock);

    // A transmit buffer of kBufSize bytes, or nullptr when all are in flight.
    uint8_t* tx_alloc(uint32_t* slot);
    void tx_free(uint32_t slot);
    uint8_t* tx_buffer(uint32_t slot) const { return tx_mem_ + size_t(slot) * kBufSize; }
    void tx_send(uint32_t slot, size_t len, const sockaddr_in& to);
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

    uint64_t rx_nobufs() const { return rx_nobufs_; }
    // The socket's receive buffer in bytes, as the kernel granted it.
    int rcvbuf() const;

private:
    struct Tx {
        msghdr msg;
        iovec iov;
        sockaddr_in to;
    };
    // A receiving socket: [0] the device's own, then one per joined multicast group.
    struct Sock {
        int fd = -1;
        uint32_t local_be = 0;  // the address its datagrams are sent to
        bool active = false;    // receives go to the handler
        bool rearm = false;     // the multishot receive ended; post it again
        bool pending = false;   // a receive is posted (the slot is not reusable yet)
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
    static void set_buffers(int fd);
    void post_watch_read(uint32_t idx);
    void recycle_rx(uint16_t bid);

    io_uring ring_{};
    bool ring_ok_ = false;
    int sock_ = -1;  // socks_[0].fd
    uint32_t ip_be_ = 0;
    uint16_t port_ = 0;
    std::vector<Sock> socks_;
    uint8_t* tx_mem_ = nullptr;
    std::vector<Tx> tx_;
    std::vector<uint32_t> tx_free_;
    uint8_t* rx_mem_ = nullptr;
    io_uring_buf_ring* br_ = nullptr;
    size_t br_bytes_ = 0;
    msghdr rx_msg_{};
    std::vector<Watch> watches_;
    std::vector<uint32_t> watch_free_;
    uint64_t rx_nobufs_ = 0;
    uint32_t sends_queued_ = 0;  // sendmsg SQEs not yet submitted
};

}  // namespace uroce::net
