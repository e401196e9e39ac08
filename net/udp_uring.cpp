// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/udp_uring.h"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "net/headers.h"
#include "net/udp_options.h"

namespace uroce::net {

namespace {
// user_data layout: kind in the top byte, an index below.
constexpr uint64_t kKindShift = 56;
enum Kind : uint64_t { kRecv = 1, kSend = 2, kWatch = 3, kCancel = 4 };
constexpr uint64_t tag(Kind k, uint64_t idx) { return (k << kKindShift) | idx; }
constexpr uint16_t kBgid = 1;
// A sendmsg error that says the kernel will not take GSO trains here: no UDP_SEGMENT (old
// kernel), no checksum offload on the way out (EIO), a segment the route cannot carry.
bool gso_refused(int err) {
    return err == EIO || err == EINVAL || err == EOPNOTSUPP || err == ENOPROTOOPT ||
           err == EMSGSIZE;
}
// Private anonymous memory for a buffer pool; nullptr when there is none.
uint8_t* map_pool(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}
}  // namespace

UdpUring::~UdpUring() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    for (auto& w : watches_)
        if (w.fd >= 0) close(w.fd);
    for (auto& k : socks_)
        if (k.fd >= 0) close(k.fd);
    for (size_t i = 1; i < senders_.size(); ++i)  // [0] is socks_[0]
        if (senders_[i].fd >= 0 && !senders_[i].receives) close(senders_[i].fd);
    if (tx_mem_) munmap(tx_mem_, size_t(kTxBufs) * kBufSize);
    if (rx_mem_) munmap(rx_mem_, size_t(rx_bufs_) * rx_buf_size_);
    if (br_) munmap(br_, br_bytes_);
}

int UdpUring::open(const Endpoint& local, bool offload) {
    io_uring_params p{};
    // TASKRUN_FLAG: the ring says when completions wait for the thread to enter the kernel,
    // so that a run_once() that does not wait (a busy or polling engine) enters only then.
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    // Without io_uring (forbidden here, or not wanted) the same batches go through plain
    // system calls: see flush_sends() and poll_run().
    const char* no_uring = std::getenv("UROCE_NO_IO_URING");
    bool forced = no_uring && *no_uring && std::strcmp(no_uring, "0") != 0;
    int r = forced ? -1 : io_uring_queue_init_params(4096, &ring_, &p);
    if (r < 0 && !forced) {
        p.flags = 0;  // older kernels
        r = io_uring_queue_init_params(4096, &ring_, &p);
    }
    ring_ok_ = r >= 0;
    if (!ring_ok_) uring_errno_ = forced ? 0 : -r;

    port_ = local.port();
    sock_ = new_socket(local.is_v6());
    if (sock_ < 0) return errno;
    socks_.push_back(Sock{sock_, local, true, false, false});
    senders_.push_back(Sender{sock_, 0, false, local.is_v6(), true});
    locals_.push_back(Local{local, 0});
    set_buffers(sock_);
    recv_marks(sock_, local.is_v6());
    send_options(sock_, local);
    if (bind(sock_, &local.sa, local.len()) != 0) return errno;

    // Offloads: the kernel knows UDP_SEGMENT if it takes the option (a size per sendmsg is
    // given in a control message); whether the way out takes trains shows at the first send.
    if (offload) {
        int zero = 0, one = 1;
        off_.gso = setsockopt(sock_, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
        if (!off_.gso) off_.gso_errno = errno;
        off_.gro = setsockopt(sock_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
        if (!off_.gro) off_.gro_errno = errno;
    }
    if (!off_.gso) set_udp_csum_zero();
    if (off_.gro) {
        rx_buf_size_ = kRxTrainBufSize;
        rx_bufs_ = kRxTrainBufs;
    }

    // Transmit pool.
    tx_mem_ = map_pool(size_t(kTxBufs) * kBufSize);
    if (!tx_mem_) return ENOMEM;
    tx_free_.reserve(kTxBufs);
    for (uint32_t i = kTxBufs; i-- > 0;) tx_free_.push_back(i);
    trains_.reset(new Train[kTxBufs]);  // default-initialised: pages touched when used
    trains_free_.reserve(kTxBufs);
    for (uint32_t i = kTxBufs; i-- > 0;) trains_free_.push_back(i);

    // Receive buffers, provided to the kernel through a buffer ring.
    rx_mem_ = map_pool(size_t(rx_bufs_) * rx_buf_size_);
    if (!rx_mem_) return ENOMEM;
    // Room for either version's address, rounded up to 8: the multishot receive puts the
    // control messages right after the name, and a cmsghdr must be 8-aligned.
    rx_msg_.msg_namelen = (sizeof(sockaddr_in6) + 7) & ~size_t(7);
    rx_msg_.msg_controllen = kRxCtlBytes;
    if (!ring_ok_) return 0;  // the sockets are polled: nothing to arm
    br_bytes_ = rx_bufs_ * sizeof(io_uring_buf);
    void* brm =
        mmap(nullptr, br_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (brm == MAP_FAILED) return ENOMEM;
    br_ = static_cast<io_uring_buf_ring*>(brm);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<unsigned long>(br_);
    reg.ring_entries = rx_bufs_;
    reg.bgid = kBgid;
    r = io_uring_register_buf_ring(&ring_, &reg, 0);
    if (r < 0) return -r;
    io_uring_buf_ring_init(br_);
    for (uint32_t i = 0; i < rx_bufs_; ++i)
        io_uring_buf_ring_add(br_, rx_mem_ + size_t(i) * rx_buf_size_, unsigned(rx_buf_size_),
                              uint16_t(i), io_uring_buf_ring_mask(rx_bufs_), int(i));
    io_uring_buf_ring_advance(br_, int(rx_bufs_));

    // Queued, not submitted: the first run_once() submits it. io_uring completes a request
    // in the thread that submitted it, so submitted here (uroced's control thread) every
    // received packet would wake that thread first, and it the engine.
    arm_recv(0);
    return 0;
}

void UdpUring::close_group(int sock) {
    if (sock <= 0 || size_t(sock) >= socks_.size() || !socks_[sock].active) return;
    Sock& k = socks_[sock];
    k.active = false;
    k.rearm = false;
    // The ring holds the file while its receive is posted: closing the fd alone would not
    // end the membership. The cancelled receive's last completion frees the slot.
    close(k.fd);
    k.fd = -1;
    if (k.pending) {
        io_uring_sqe* s = sqe();
        io_uring_prep_cancel64(s, tag(kRecv, uint64_t(sock)), 0);
        io_uring_sqe_set_data64(s, tag(kCancel, uint64_t(sock)));
    }
}

io_uring_sqe* UdpUring::sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    if (!s) {
        io_uring_submit(&ring_);
        s = io_uring_get_sqe(&ring_);
    }
    return s;  // never null after a submit of a 4096-entry ring
}

void UdpUring::arm_recv(uint32_t sock) {
    if (!ring_ok_) return;  // polled
    io_uring_sqe* s = sqe();
    io_uring_prep_recvmsg_multishot(s, socks_[sock].fd, &rx_msg_, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = kBgid;
    io_uring_sqe_set_data64(s, tag(kRecv, sock));
    socks_[sock].pending = true;
}

void UdpUring::recycle_rx(uint16_t bid) {
    io_uring_buf_ring_add(br_, rx_mem_ + size_t(bid) * rx_buf_size_, unsigned(rx_buf_size_), bid,
                          io_uring_buf_ring_mask(rx_bufs_), 0);
    io_uring_buf_ring_advance(br_, 1);
}

void UdpUring::release_idle_buffers() {
    if (tx_mem_ && tx_free_.size() == kTxBufs)
        madvise(tx_mem_, size_t(kTxBufs) * kBufSize, MADV_DONTNEED);
    if (rx_mem_) madvise(rx_mem_, size_t(rx_bufs_) * rx_buf_size_, MADV_DONTNEED);
}

uint8_t* UdpUring::tx_alloc(uint32_t* slot) {
    if (tx_free_.empty()) return nullptr;
    *slot = tx_free_.back();
    tx_free_.pop_back();
    return tx_mem_ + size_t(*slot) * kBufSize;
}

void UdpUring::tx_free(uint32_t slot) { tx_free_.push_back(slot); }

// One received datagram, or the packets of a GRO train one by one.
// One control message of a receive: UDP_GRO's segment size, the packet's TOS or TTL.
void UdpUring::read_rx_cmsg(const cmsghdr* c, int& seg, IpMarks& marks) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int)))
        std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
    else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1))
        marks.tos = *CMSG_DATA(c);
    else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL &&
             c->cmsg_len >= CMSG_LEN(sizeof(int))) {
        int ttl;
        std::memcpy(&ttl, CMSG_DATA(c), sizeof ttl);
        marks.ttl = uint8_t(ttl);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_len >= CMSG_LEN(sizeof(int)) &&
               (c->cmsg_type == IPV6_TCLASS || c->cmsg_type == IPV6_HOPLIMIT)) {
        int v;
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        (c->cmsg_type == IPV6_TCLASS ? marks.tos : marks.ttl) = uint8_t(v);
    }
}

uint32_t UdpUring::deliver(const Endpoint& from, const Endpoint& to, uint8_t* data, size_t len,
                           uint32_t seg, IpMarks marks, Handler& h) {
    if (seg == 0 || len <= seg) {
        h.on_packet(from, to, data, len, 0, marks);
        return 1;
    }
    // (GRO merges only datagrams whose IPv4 headers agree but for the ID and lengths.)
    uint16_t k = 0;
    for (size_t off = 0; off < len; off += seg, ++k)
        h.on_packet(from, to, data + off, std::min<size_t>(seg, len - off), k, marks);
    ++off_.rx_trains;
    off_.rx_train_pkts += k;
    return k;
}

// A train takes packets of its first packet's length, and then one shorter packet at most
// (GSO cuts at one size; only the last segment may be shorter). So until then it holds n
// packets of seg bytes.
// (One sendmsg carries one TOS and TTL: packets with others start a train of their own.)
bool UdpUring::joins(const Train& t, size_t len, const Endpoint& to, IpMarks marks,
                     uint16_t sender) const {
    return t.iov[t.n - 1].iov_len == t.seg && len <= t.seg && t.n < kMaxSegs &&
           size_t(t.n) * t.seg + len <= kMaxTrainBytes && t.to.same(to) && t.marks == marks &&
           t.sender == sender;
}

uint16_t UdpUring::tx_next_seg(size_t len, const Endpoint& to, IpMarks marks,
                               uint16_t sender) const {
    if (open_train_ < 0) return 0;
    const Train& t = trains_[size_t(open_train_)];
    return joins(t, len, to, marks, sender) ? uint16_t(t.n) : 0;
}

uint16_t UdpUring::tx_send(uint32_t slot, size_t len, const Endpoint& to, IpMarks marks,
                           uint16_t sender) {
    if (open_train_ >= 0) {
        Train& t = trains_[size_t(open_train_)];
        if (joins(t, len, to, marks, sender)) {
            uint32_t k = t.n++;
            t.slot[k] = slot;
            t.iov[k] = iovec{tx_mem_ + size_t(slot) * kBufSize, len};
            return uint16_t(k);
        }
        close_train();
    }
    // A long burst (a window of requests, the responses to a large READ) leaves in batches
    // while the engine builds the rest, instead of all at once at the end of the turn: the
    // peer starts working (and acknowledging) at once, and the burst's first packets do not
    // wait behind its last ones for longer than the peer's ACK timeout.
    if (sends_queued_ >= kSendBatch) {
        if (ring_ok_)
            io_uring_submit(&ring_);
        else
            flush_sends();
        sends_queued_ = 0;
    }
    start_train(slot, len, to, marks, sender);
    // Multicast goes on its own: the group sockets of this host's members have no GRO.
    if (!off_.gso || to.multicast()) close_train();
    return 0;
}

void UdpUring::start_train(uint32_t slot, size_t len, const Endpoint& to, IpMarks marks,
                           uint16_t sender) {
    uint32_t i = trains_free_.back();  // never empty: a train holds one buffer at least
    trains_free_.pop_back();
    Train& t = trains_[i];
    t.to = to;
    t.marks = marks;
    t.sender = sender;
    ++senders_[sender].inflight;  // from now: a socket closed meanwhile waits for the train
    t.n = 1;
    t.seg = uint32_t(len);
    t.slot[0] = slot;
    t.iov[0] = iovec{tx_mem_ + size_t(slot) * kBufSize, len};
    open_train_ = i;
}

void UdpUring::close_train() {
    uint32_t i = uint32_t(open_train_);
    open_train_ = -1;
    Train& t = trains_[i];
    t.msg = msghdr{};
    t.msg.msg_name = &t.to.sa;
    t.msg.msg_namelen = t.to.len();
    t.msg.msg_iov = t.iov;
    t.msg.msg_iovlen = t.n;
    // Control messages only for what differs from the socket's defaults: most sendmsgs have
    // none or UDP_SEGMENT alone.
    unsigned char* c = t.ctl;
    auto add = [&c](int level, int type, const void* v, size_t len) {
        auto* h = reinterpret_cast<cmsghdr*>(c);
        h->cmsg_level = level;
        h->cmsg_type = type;
        h->cmsg_len = CMSG_LEN(len);
        std::memcpy(CMSG_DATA(h), v, len);
        c += CMSG_SPACE(len);
    };
    if (t.n > 1) {
        uint16_t seg = uint16_t(t.seg);
        add(SOL_UDP, UDP_SEGMENT, &seg, sizeof seg);
    }
    const bool v6 = t.to.is_v6();
    if (t.marks.tos != IpMarks{}.tos) {
        int v = t.marks.tos;
        add(v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TCLASS : IP_TOS, &v, sizeof v);
    }
    if (t.marks.ttl != IpMarks{}.ttl) {
        int v = t.marks.ttl;
        add(v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_HOPLIMIT : IP_TTL, &v, sizeof v);
    }
    if (c != t.ctl) {
        t.msg.msg_control = t.ctl;
        t.msg.msg_controllen = size_t(c - t.ctl);
    }
    sends_queued_ += t.n;
    if (!ring_ok_) {
        send_queue_.push_back(i);
        return;
    }
    io_uring_sqe* s = sqe();
    io_uring_prep_sendmsg(s, senders_[t.sender].fd, &t.msg, 0);
    io_uring_sqe_set_data64(s, tag(kSend, i));
}

// A sendmsg completed. A train the kernel refused goes again one packet at a time, and no
// more trains are built; any other error loses the packets as a wire would (RC retransmits).
void UdpUring::sent(uint32_t i, int res, Handler& h) {
    Train& t = trains_[i];
    const uint16_t sender = t.sender;
    if (t.n > 1 && res < 0 && gso_refused(-res)) {
        if (off_.gso) {
            off_.gso_errno = -res;  // the first refusal says why
            off_.gso = false;
            set_udp_csum_zero();
        }
        if (open_train_ >= 0) close_train();  // keeps the order of what is queued
        // The train's entry is given back first: each packet takes one of its own, and with
        // every buffer in flight there may be no other.
        const Train was = t;
        trains_free_.push_back(i);
        for (uint32_t k = 0; k < was.n; ++k) {
            h.on_resend(was.to, static_cast<uint8_t*>(was.iov[k].iov_base), was.iov[k].iov_len,
                        uint16_t(k), 0);
            start_train(was.slot[k], was.iov[k].iov_len, was.to, was.marks, was.sender);
            close_train();
        }
        sender_done(sender);
        return;
    }
    if (t.n > 1 && res >= 0) {
        ++off_.tx_trains;
        off_.tx_train_pkts += t.n;
    }
    for (uint32_t k = 0; k < t.n; ++k) tx_free_.push_back(t.slot[k]);
    trains_free_.push_back(i);
    sender_done(sender);
}

void UdpUring::watch_eventfd(int fd, uint64_t t) {
    uint32_t idx;
    if (!watch_free_.empty()) {
        idx = watch_free_.back();
        watch_free_.pop_back();
    } else {
        idx = uint32_t(watches_.size());
        watches_.emplace_back();
    }
    watches_[idx] = Watch{fd, t, 0, true, false};
    post_watch_read(idx);
}

void UdpUring::unwatch_eventfd(uint64_t t) {
    for (uint32_t i = 0; i < watches_.size(); ++i) {
        Watch& w = watches_[i];
        if (w.active && !w.closing && w.tag == t) {
            if (!ring_ok_) {  // nothing in flight reads it
                close(w.fd);
                w = Watch{};
                watch_free_.push_back(i);
                return;
            }
            w.closing = true;
            io_uring_sqe* s = sqe();
            io_uring_prep_cancel64(s, tag(kWatch, i), 0);
            io_uring_sqe_set_data64(s, tag(kCancel, i));
            return;
        }
    }
}

void UdpUring::post_watch_read(uint32_t idx) {
    if (!ring_ok_) return;  // polled
    io_uring_sqe* s = sqe();
    io_uring_prep_read(s, watches_[idx].fd, &watches_[idx].value, sizeof(uint64_t), 0);
    io_uring_sqe_set_data64(s, tag(kWatch, idx));
}

void UdpUring::run_once(uint64_t timeout_ns, Handler& h) {
    if (!ring_ok_) {
        poll_run(timeout_ns, h);
        return;
    }
    io_uring_cqe* cqe = nullptr;
    if (open_train_ >= 0) close_train();
    sends_queued_ = 0;  // submitted just below
    if (timeout_ns == 0) {
        io_uring_submit(&ring_);
    } else {
        __kernel_timespec ts{};
        ts.tv_sec = int64_t(timeout_ns / 1000000000ull);
        ts.tv_nsec = int64_t(timeout_ns % 1000000000ull);
        io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    }
    unsigned head, seen = 0, rx_since_submit = 0;
    bool rearm = false;  // some socket's multishot receive ended
    io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        uint64_t kind = ud >> kKindShift, idx = ud & ((uint64_t(1) << kKindShift) - 1);
        switch (kind) {
        case kRecv: {
            Sock& k = socks_[idx];
            if (!(cqe->flags & IORING_CQE_F_MORE)) {
                k.pending = false;
                k.rearm = k.active;
                rearm |= k.active;
            }
            if (cqe->res == -ENOBUFS) ++rx_nobufs_;
            if (cqe->res < 0 || !(cqe->flags & IORING_CQE_F_BUFFER)) break;
            uint16_t bid = uint16_t(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            uint8_t* buf = rx_mem_ + size_t(bid) * rx_buf_size_;
            auto* out = io_uring_recvmsg_validate(buf, cqe->res, &rx_msg_);
            if (k.active && out && out->namelen >= sizeof(sockaddr_in) &&
                !(out->flags & MSG_TRUNC)) {
                Endpoint from;
                std::memcpy(&from.sa, io_uring_recvmsg_name(out),
                            std::min<size_t>(out->namelen, sizeof(sockaddr_in6)));
                auto* data = static_cast<uint8_t*>(io_uring_recvmsg_payload(out, &rx_msg_));
                size_t len = io_uring_recvmsg_payload_length(out, cqe->res, &rx_msg_);
                int seg = 0;  // UDP_GRO: the size of the train's segments
                IpMarks marks;
                for (cmsghdr* c = io_uring_recvmsg_cmsg_firsthdr(out, &rx_msg_); c;
                     c = io_uring_recvmsg_cmsg_nexthdr(out, &rx_msg_, c))
                    read_rx_cmsg(c, seg, marks);
                rx_since_submit +=
                    deliver(from, k.local, data, len, seg > 0 ? uint32_t(seg) : 0, marks, h);
                // What handling received packets produced (ACKs, NAKs, READ responses)
                // leaves after a few of them, not when the whole batch is done.
                if (rx_since_submit >= kRecvBatch && (sends_queued_ || open_train_ >= 0)) {
                    if (open_train_ >= 0) close_train();
                    io_uring_submit(&ring_);
                    sends_queued_ = 0;
                    rx_since_submit = 0;
                }
            }
            recycle_rx(bid);
            break;
        }
        case kSend: sent(uint32_t(idx), cqe->res, h); break;
        case kWatch: {
            Watch& w = watches_[idx];
            if (w.closing || cqe->res < 0) {
                if (w.closing || cqe->res != -EINTR) {
                    if (w.fd >= 0) close(w.fd);
                    w = Watch{};
                    watch_free_.push_back(uint32_t(idx));
                    break;
                }
            } else {
                h.on_eventfd(w.tag);
            }
            if (watches_[idx].active && !watches_[idx].closing) post_watch_read(uint32_t(idx));
            break;
        }
        default: break;
        }
    }
    io_uring_cq_advance(&ring_, seen);
    if (rearm)
        for (uint32_t i = 0; i < socks_.size(); ++i)
            if (socks_[i].rearm) {
                socks_[i].rearm = false;
                arm_recv(i);
            }
}

// Without io_uring. The queued trains leave with sendmmsg, a batch per call, in order; their
// results are kept as the ring's completions would be and handled by complete_sends() in
// run_once (the buffers are given back there, as with the ring). A full socket buffer
// (EAGAIN) keeps the rest queued until that socket is writable again.
void UdpUring::flush_sends() {
    mmsghdr mm[kSendBatch];
    while (send_head_ < send_queue_.size()) {
        // One call per run of trains from one socket.
        const uint16_t sender = trains_[send_queue_[send_head_]].sender;
        auto n = uint32_t(std::min<size_t>(kSendBatch, send_queue_.size() - send_head_));
        uint32_t j = 0;
        for (; j < n && trains_[send_queue_[send_head_ + j]].sender == sender; ++j)
            mm[j] = mmsghdr{trains_[send_queue_[send_head_ + j]].msg, 0};
        n = j;
        int r = sendmmsg(senders_[sender].fd, mm, n, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
            send_done_.emplace_back(send_queue_[send_head_++], -errno);  // this one failed
            continue;
        }
        for (int j = 0; j < r; ++j)
            send_done_.emplace_back(send_queue_[send_head_ + uint32_t(j)], int(mm[j].msg_len));
        send_head_ += uint32_t(r);
    }
    if (send_head_ == send_queue_.size()) {
        send_queue_.clear();
        send_head_ = 0;
    }
    sends_queued_ = 0;
}

void UdpUring::complete_sends(Handler& h) {
    // sent() may queue again (a refused train, packet by packet): to send_queue_, not here.
    for (size_t i = 0; i < send_done_.size(); ++i)
        sent(send_done_[i].first, send_done_[i].second, h);
    send_done_.clear();
}

// A turn without io_uring: what is queued leaves, ppoll waits for the sockets and eventfds
// (the device's socket also for room to send, when sends wait for it), and each ready one is
// read: receives with recvmmsg, an eventfd's count with read.
void UdpUring::poll_run(uint64_t timeout_ns, Handler& h) {
    if (open_train_ >= 0) close_train();
    flush_sends();
    complete_sends(h);
    pfds_.clear();
    for (uint32_t i = 0; i < socks_.size(); ++i)
        if (socks_[i].active && socks_[i].fd >= 0) pfds_.push_back(pollfd{socks_[i].fd, POLLIN, 0});
    // Sends wait for room in the socket the next queued train leaves from.
    if (send_head_ < send_queue_.size()) {
        int fd = senders_[trains_[send_queue_[send_head_]].sender].fd;
        if (fd == sock_)
            pfds_[0].events |= POLLOUT;  // socks_[0] is always first
        else
            pfds_.push_back(pollfd{fd, POLLOUT, 0});
    }
    size_t nsocks = pfds_.size();
    for (const Watch& w : watches_)
        if (w.active && !w.closing && w.fd >= 0) pfds_.push_back(pollfd{w.fd, POLLIN, 0});
    timespec ts{};
    ts.tv_sec = time_t(timeout_ns / 1000000000ull);
    ts.tv_nsec = long(timeout_ns % 1000000000ull);
    int n = ppoll(pfds_.data(), nfds_t(pfds_.size()), &ts, nullptr);
    for (size_t j = 0; n > 0 && j < pfds_.size(); ++j) {
        const pollfd& p = pfds_[j];
        if (!p.revents) continue;
        --n;
        // The handler may have closed a group or a watch during this turn: each is found by
        // its fd again, and skipped when it is gone.
        if (j < nsocks) {
            if (p.revents & POLLOUT) flush_sends();
            if (p.revents & (POLLIN | POLLERR))
                for (uint32_t i = 0; i < socks_.size(); ++i)
                    if (socks_[i].fd == p.fd && socks_[i].active) {
                        poll_recv(i, h);
                        break;
                    }
            continue;
        }
        for (Watch& w : watches_)
            if (w.fd == p.fd && w.active && !w.closing && (p.revents & POLLIN)) {
                if (read(w.fd, &w.value, sizeof w.value) == ssize_t(sizeof w.value))
                    h.on_eventfd(w.tag);
                break;
            }
    }
    // What the turn produced leaves now; a refused train's packets go again at once.
    for (int round = 0; round < 2; ++round) {
        if (open_train_ >= 0) close_train();
        flush_sends();
        complete_sends(h);
    }
}

// Receives on one socket, kRecvBatch datagrams per recvmmsg (into the first receive
// buffers, free again once handled), until none is waiting or 16 batches were handled (the
// others wait for the next turn, so that the rest of the turn is not held up); what handling
// them produced leaves after each batch, as with the ring.
void UdpUring::poll_recv(uint32_t sock, Handler& h) {
    mmsghdr mm[kRecvBatch];
    iovec iov[kRecvBatch];
    Endpoint from[kRecvBatch];
    alignas(cmsghdr) unsigned char ctl[kRecvBatch][kRxCtlBytes];
    for (int batch = 0; batch < 16; ++batch) {
        if (!socks_[sock].active || socks_[sock].fd < 0) return;
        for (uint32_t j = 0; j < kRecvBatch; ++j) {
            iov[j] = iovec{rx_mem_ + size_t(j) * rx_buf_size_, rx_buf_size_};
            mm[j] = mmsghdr{};
            mm[j].msg_hdr.msg_name = &from[j].sa;
            mm[j].msg_hdr.msg_namelen = sizeof(sockaddr_in6);
            mm[j].msg_hdr.msg_iov = &iov[j];
            mm[j].msg_hdr.msg_iovlen = 1;
            mm[j].msg_hdr.msg_control = ctl[j];
            mm[j].msg_hdr.msg_controllen = sizeof ctl[j];
        }
        int n = recvmmsg(socks_[sock].fd, mm, kRecvBatch, MSG_DONTWAIT, nullptr);
        if (n <= 0) return;  // none waiting (EAGAIN), or an error the next turn sees again
        for (int j = 0; j < n; ++j) {
            const msghdr& m = mm[j].msg_hdr;
            if (!socks_[sock].active) return;
            if ((m.msg_flags & MSG_TRUNC) || m.msg_namelen < sizeof(sockaddr_in)) continue;
            int seg = 0;  // UDP_GRO: the size of the train's segments
            IpMarks marks;
            for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&m), c))
                read_rx_cmsg(c, seg, marks);
            deliver(from[j], socks_[sock].local, static_cast<uint8_t*>(iov[j].iov_base),
                    mm[j].msg_len, seg > 0 ? uint32_t(seg) : 0, marks, h);
        }
        if (sends_queued_ || open_train_ >= 0) {
            if (open_train_ >= 0) close_train();
            flush_sends();
        }
        if (uint32_t(n) < kRecvBatch) return;
    }
}

}  // namespace uroce::net
