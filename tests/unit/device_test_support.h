// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the device engine's tests (device_*_test.cpp) share: a Client that plays the verbs
// library's part by hand (a session on the engine thread, abi::Request messages to
// Device::handle(), the ring memfds mapped and WQEs written exactly as
// verbs_api/ibverbs/datapath.cpp does), guarded buffers, devices on a free port, and the
// fixture of two QPs that the data path and ring abuse tests start from. The session's pid
// is our own, so the device's "DMA" is a memcpy: MRs are plain local buffers whose every
// byte (including guard bytes around what the device may touch) we can inspect.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emu/abi/caps.h"
#include "emu/abi/doorbell.h"
#include "emu/abi/protocol.h"
#include "emu/abi/rings.h"
#include "emu/abi/runtime.h"
#include "emu/engine/device.h"
#include "emu/verbs/shared_region.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/opcodes.h"

namespace uroce::emu::device_test {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint8_t kGuard = 0xA5;  // fill of bytes the device must never write
constexpr uint16_t kFirstPort = 6100;
constexpr uint16_t kLastPort = 6499;

inline uint32_t ip(const char* dotted) { return inet_addr(dotted); }

// A ring memfd from the device, mapped the way the verbs library maps it.
class MappedRing {
public:
    MappedRing() = default;
    MappedRing(const MappedRing&) = delete;
    MappedRing& operator=(const MappedRing&) = delete;
    ~MappedRing() {
        if (base_) munmap(base_, bytes_);
    }
    bool map(int fd, uint32_t slots, size_t stride) {
        bytes_ = abi::ring_bytes(slots, stride);
        void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) return false;
        base_ = p;
        mask_ = slots - 1;
        stride_ = stride;
        return true;
    }
    abi::RingHeader* hdr() const { return static_cast<abi::RingHeader*>(base_); }
    uint8_t* slot(uint32_t i) const { return abi::ring_slot(base_, stride_, mask_, i); }
    uint32_t mask() const { return mask_; }
    size_t stride() const { return stride_; }

private:
    void* base_ = nullptr;
    size_t bytes_ = 0;
    uint32_t mask_ = 0;
    size_t stride_ = 0;
};

struct TestCq {
    uint32_t handle = 0;
    MappedRing ring;
};

struct TestQp {
    uint32_t qpn = 0;
    ibv_qp_cap cap{};
    MappedRing sq, rq;
};

// Parameters of RESET -> INIT -> RTR -> RTS.
struct Path {
    ibv_mtu mtu = IBV_MTU_1024;
    uint8_t timeout = 14;  // 67 ms: never fires in a healthy exchange
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 1;  // 10 us, what this QP asks its peers to wait
    uint32_t sq_psn = 0x100;
    uint32_t rq_psn = 0x100;
};

// RoCEv2's address vector to the device at `ip_be`: its IPv4-mapped GID, port 1.
inline ibv_ah_attr ipv4_av(uint32_t ip_be) {
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.hop_limit = 64;
    ah.grh.dgid.raw[10] = 0xff;
    ah.grh.dgid.raw[11] = 0xff;
    std::memcpy(&ah.grh.dgid.raw[12], &ip_be, 4);
    return ah;
}

// One application session on a device: what one ibv_context is to the library.
class Client {
public:
    explicit Client(Device& dev) : dev_(dev) {
        int fds[3] = {-1, -1, -1};
        int err = 0;
        dev_.call([&] { s_ = dev_.open_session(getpid(), fds, &err); });
        EXPECT_EQ(err, 0);
        doorbell_ = fds[0];
        async_ = fds[1];
        if (fds[2] >= 0) {
            void* p = mmap(nullptr, abi::doorbell_page_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
                           fds[2], 0);
            EXPECT_NE(p, MAP_FAILED);
            if (p != MAP_FAILED) db_ = static_cast<abi::DoorbellPage*>(p);
            close(fds[2]);
        }
        // Polled with a deadline in async_event(), so a missing event fails the test
        // instead of hanging it.
        if (async_ >= 0) fcntl(async_, F_SETFL, fcntl(async_, F_GETFL) | O_NONBLOCK);
    }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    ~Client() {
        if (s_) dev_.call([&] { dev_.close_session(s_); });
        if (doorbell_ >= 0) close(doorbell_);
        if (async_ >= 0) close(async_);
        if (db_) munmap(db_, abi::doorbell_page_bytes());
    }

    bool ok() const { return s_ != nullptr; }

    // Runs one control request on the engine thread; returns the device's verdict. `in_fd`
    // stands for the descriptor that travels with the request (ibv_open_xrcd's).
    int request(const abi::Request& req, abi::Response* resp, std::vector<int>* fds = nullptr,
                int in_fd = -1) {
        std::vector<int> local;
        std::vector<int>& out = fds ? *fds : local;
        *resp = abi::Response{};
        dev_.call([&] { dev_.handle(*s_, req, *resp, out, in_fd); });
        if (!fds)
            for (int fd : local) close(fd);
        return resp->err;
    }

    // request() for a verb that answers with `n` descriptors (ring memfds) in *fds.
    int request_fds(const abi::Request& req, abi::Response* resp, std::vector<int>* fds, size_t n) {
        if (int e = request(req, resp, fds)) return e;
        EXPECT_EQ(fds->size(), n);
        return fds->size() == n ? 0 : EPROTO;
    }

    int alloc_pd(uint32_t* pd) {
        abi::Request req{};
        req.op = abi::Op::kAllocPd;
        abi::Response resp;
        int e = request(req, &resp);
        *pd = resp.u.pd.pd;
        return e;
    }
    int dealloc_pd(uint32_t pd) {
        abi::Request req{};
        req.op = abi::Op::kDeallocPd;
        req.u.pd.pd = pd;
        abi::Response resp;
        return request(req, &resp);
    }
    int reg_mr(uint32_t pd, const void* addr, uint64_t len, uint32_t access, uint32_t* lkey,
               uint64_t iova = 0) {
        abi::Request req{};
        req.op = abi::Op::kRegMr;
        const uint64_t at = reinterpret_cast<uint64_t>(addr);
        req.u.reg_mr = {
            .pd = pd, .access = access, .addr = at, .length = len, .iova = iova ? iova : at};
        abi::Response resp;
        int e = request(req, &resp);
        if (lkey) *lkey = resp.u.reg_mr.lkey;
        if (!e) {
            EXPECT_EQ(resp.u.reg_mr.lkey, resp.u.reg_mr.rkey);
        }
        return e;
    }
    int dereg_mr(uint32_t key) { return handle_op(abi::Op::kDeregMr, key); }

    int create_cq(uint32_t cqe, std::unique_ptr<TestCq>* out) {
        abi::Request req{};
        req.op = abi::Op::kCreateCq;
        req.u.create_cq.cqe = cqe;
        req.u.create_cq.channel = -1;
        abi::Response resp;
        std::vector<int> fds;
        if (int e = request_fds(req, &resp, &fds, 1)) return e;
        auto cq = std::make_unique<TestCq>();
        cq->handle = resp.u.create_cq.handle;
        EXPECT_GE(resp.u.create_cq.cqe, cqe);
        if (!cq->ring.map(fds[0], resp.u.create_cq.slots, sizeof(abi::Cqe))) return ENOMEM;
        *out = std::move(cq);
        return 0;
    }
    int destroy_cq(uint32_t h) { return handle_op(abi::Op::kDestroyCq, h); }

    int create_qp(uint32_t pd, uint32_t scq, uint32_t rcq, const ibv_qp_cap& cap,
                  std::unique_ptr<TestQp>* out) {
        abi::Request req{};
        req.op = abi::Op::kCreateQp;
        req.u.create_qp = {
            .pd = pd, .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC, .cap = cap};
        abi::Response resp;
        std::vector<int> fds;
        if (int e = request_fds(req, &resp, &fds, 2)) return e;
        const auto& o = resp.u.create_qp;
        auto qp = std::make_unique<TestQp>();
        qp->qpn = o.qpn;
        qp->cap = o.cap;
        EXPECT_GE(o.cap.max_send_wr, cap.max_send_wr);
        EXPECT_GE(o.cap.max_recv_sge, cap.max_recv_sge);
        if (!qp->sq.map(fds[0], o.sq_slots, o.sq_stride)) return ENOMEM;
        if (!qp->rq.map(fds[1], o.rq_slots, o.rq_stride)) return ENOMEM;
        *out = std::move(qp);
        return 0;
    }
    int destroy_qp(uint32_t qpn) { return handle_op(abi::Op::kDestroyQp, qpn); }

    // XRC: a handle of the domain of file `fd`; an XRC SRQ through it (its ring mapped into
    // `ring`); a TGT QP through it, whose handle is named by `cookie`.
    int open_xrcd(int fd, int oflags, uint32_t* handle) {
        abi::Request req{};
        req.op = abi::Op::kOpenXrcd;
        req.u.open_xrcd.has_fd = 1;
        req.u.open_xrcd.oflags = oflags;
        abi::Response resp;
        int e = request(req, &resp, nullptr, fd);
        *handle = resp.u.xrcd.handle;
        return e;
    }
    int create_xrc_srq(uint32_t pd, uint32_t xrcd, uint32_t cq, uint32_t* srqn, MappedRing* ring) {
        abi::Request req{};
        req.op = abi::Op::kCreateSrq;
        auto& r = req.u.create_srq;
        r.pd = pd;
        r.max_wr = 4;
        r.max_sge = 1;
        r.srq_type = IBV_SRQT_XRC;
        r.xrcd = xrcd;
        r.cq = cq;
        abi::Response resp;
        std::vector<int> fds;
        if (int e = request_fds(req, &resp, &fds, 1)) return e;
        *srqn = resp.u.create_srq.handle;
        return ring->map(fds[0], resp.u.create_srq.slots, resp.u.create_srq.stride) ? 0 : ENOMEM;
    }
    int destroy_srq(uint32_t h) { return handle_op(abi::Op::kDestroySrq, h); }
    int create_tgt(uint32_t xrcd, uint64_t cookie, uint32_t* qpn) {
        abi::Request req{};
        req.op = abi::Op::kCreateQp;
        req.u.create_qp = {.qp_type = IBV_QPT_XRC_RECV, .cookie = cookie, .xrcd = xrcd};
        abi::Response resp;
        std::vector<int> fds;
        int e = request(req, &resp, &fds);
        for (int fd : fds) close(fd);
        *qpn = resp.u.create_qp.qpn;
        return e;
    }
    // One receive of one SGE on an SRQ ring, as the library's post_srq_recv writes it.
    static void post_srq_recv(MappedRing& ring, uint64_t wr_id, const abi::Sge& sge) {
        abi::RingHeader* h = ring.hdr();
        uint32_t prod = h->prod.load(std::memory_order_relaxed);
        abi::RecvWqe r{wr_id, 1, 0};
        std::memcpy(ring.slot(prod), &r, sizeof r);
        std::memcpy(ring.slot(prod) + sizeof r, &sge, sizeof sge);
        h->prod.store(prod + 1, std::memory_order_release);
    }

    int modify_qp(uint32_t qpn, const ibv_qp_attr& attr, uint64_t mask) {
        abi::Request req{};
        req.op = abi::Op::kModifyQp;
        req.u.modify_qp = {.qpn = qpn, .mask = mask, .attr = attr};
        abi::Response resp;
        return request(req, &resp);
    }

    // The state the device holds for the QP, or -errno.
    int qp_state(uint32_t qpn) {
        abi::Request req{};
        req.op = abi::Op::kQueryQp;
        req.u.query_qp.qpn = qpn;
        req.u.query_qp.mask = IBV_QP_STATE;
        abi::Response resp;
        if (int e = request(req, &resp)) return -e;
        return int(resp.u.query_qp.attr.qp_state);
    }

    // RESET -> INIT -> RTR -> RTS towards `dest_qpn` on the device at `dest_ip`.
    int connect(const TestQp& qp, uint32_t dest_qpn, uint32_t dest_ip, const Path& p) {
        ibv_qp_attr a{.qp_state = IBV_QPS_INIT,
                      .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
                      .port_num = 1};
        if (int e = modify_qp(qp.qpn, a,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return e;
        a = {.qp_state = IBV_QPS_RTR,
             .path_mtu = p.mtu,
             .rq_psn = p.rq_psn,
             .dest_qp_num = dest_qpn,
             .ah_attr = ipv4_av(dest_ip),
             .max_dest_rd_atomic = 1,
             .min_rnr_timer = p.min_rnr_timer};
        if (int e = modify_qp(qp.qpn, a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            return e;
        a = {.qp_state = IBV_QPS_RTS,
             .sq_psn = p.sq_psn,
             .max_rd_atomic = 1,
             .timeout = p.timeout,
             .retry_cnt = p.retry_cnt,
             .rnr_retry = p.rnr_retry};
        return modify_qp(qp.qpn, a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    }

    // Writes one send WQE exactly as the library's post_send does and rings the doorbell.
    void post_send(TestQp& qp, uint64_t wr_id, const std::vector<abi::Sge>& sges,
                   uint32_t opcode = IBV_WR_SEND, uint32_t flags = IBV_SEND_SIGNALED,
                   uint32_t imm_be = 0) {
        abi::RingHeader* h = qp.sq.hdr();
        uint32_t prod = h->prod.load(std::memory_order_relaxed);
        // The library refuses to overfill; these tests never post that much.
        ASSERT_LE(prod - h->cons.load(std::memory_order_acquire), qp.sq.mask());
        ASSERT_LE(sges.size(), qp.cap.max_send_sge);
        uint8_t* slot = qp.sq.slot(prod);
        abi::SendWqe w{};
        w.wr_id = wr_id;
        w.opcode = opcode;
        w.send_flags = flags;
        w.imm_data = imm_be;
        w.num_sge = uint32_t(sges.size());
        if (!sges.empty())
            std::memcpy(slot + sizeof w, sges.data(), sizeof(abi::Sge) * sges.size());
        std::memcpy(slot, &w, sizeof w);
        h->prod.store(prod + 1, std::memory_order_release);
        // As the library's ring_qp: queue the QP once on the doorbell page.
        if (h->arm.exchange(1, std::memory_order_seq_cst) == 0) abi::doorbell_push(db_, qp.qpn);
        wake();
    }

    // Writes one receive WQE as the library's post_recv does (receives take no doorbell).
    void post_recv(TestQp& qp, uint64_t wr_id, const std::vector<abi::Sge>& sges) {
        abi::RingHeader* h = qp.rq.hdr();
        uint32_t prod = h->prod.load(std::memory_order_relaxed);
        ASSERT_LE(prod - h->cons.load(std::memory_order_acquire), qp.rq.mask());
        ASSERT_LE(sges.size(), qp.cap.max_recv_sge);
        uint8_t* slot = qp.rq.slot(prod);
        abi::RecvWqe r{wr_id, uint32_t(sges.size()), 0};
        std::memcpy(slot, &r, sizeof r);
        std::memcpy(slot + sizeof r, sges.data(), sizeof(abi::Sge) * sges.size());
        h->prod.store(prod + 1, std::memory_order_release);
    }

    abi::DoorbellPage* doorbell_page() { return db_; }

    // Publishes SQ slots up to `prod`, written by hand (write_send_slot), and rings a doorbell
    // that names no QP.
    void publish_sq(TestQp& qp, uint32_t prod) {
        qp.sq.hdr()->prod.store(prod, std::memory_order_release);
        ring_doorbell();
    }

    // A doorbell that names no QP: the page's overflow flag makes the device look at every
    // QP and CQ of the session.
    void ring_doorbell() {
        db_->overflow.store(1, std::memory_order_release);
        wake();
    }

    void wake() {
        uint64_t one = 1;
        ASSERT_EQ(write(doorbell_, &one, sizeof one), ssize_t(sizeof one));
    }

    // Next async event within `ms`, or false.
    bool async_event(abi::AsyncEvent* ev, int ms) {
        auto deadline = steady_clock::now() + milliseconds(ms);
        for (;;) {
            ssize_t n = read(async_, ev, sizeof *ev);
            if (n == ssize_t(sizeof *ev)) return true;
            if (steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(milliseconds(1));
        }
    }

private:
    int handle_op(abi::Op op, uint32_t h) {
        abi::Request req{};
        req.op = op;
        req.u.handle.handle = h;
        abi::Response resp;
        return request(req, &resp);
    }

    Device& dev_;
    Session* s_ = nullptr;
    int doorbell_ = -1;
    int async_ = -1;
    abi::DoorbellPage* db_ = nullptr;
};

// A send WQE's header with nothing else set.
inline abi::SendWqe send_wqe(uint64_t wr_id, uint32_t opcode, uint32_t flags) {
    abi::SendWqe w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = flags;
    return w;
}

// Writes `w` into SQ slot `i` by hand, with `n` bytes after it (SGEs, inline data, a bind),
// as a buggy or hostile library could; nothing is published.
inline void write_send_slot(TestQp& qp, uint32_t i, const abi::SendWqe& w,
                            const void* after = nullptr, size_t n = 0) {
    uint8_t* slot = qp.sq.slot(i);
    if (n) std::memcpy(slot + sizeof w, after, n);
    std::memcpy(slot, &w, sizeof w);
}

// Waits up to `ms` for the next CQE, consuming it as poll_cq does.
inline bool poll_cq(TestCq& cq, abi::Cqe* out, int ms = 3000) {
    abi::RingHeader* h = cq.ring.hdr();
    auto deadline = steady_clock::now() + milliseconds(ms);
    for (;;) {
        uint32_t cons = h->cons.load(std::memory_order_relaxed);
        uint32_t prod = h->prod.load(std::memory_order_acquire);
        if (cons != prod) {
            std::memcpy(out, cq.ring.slot(cons), sizeof *out);
            h->cons.store(cons + 1, std::memory_order_release);
            return true;
        }
        if (steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

// A buffer with guard bytes on both sides of the part handed to the device, all inside
// the MR, so a write one byte too far lands in registered memory and is caught.
struct GuardedBuf {
    static constexpr size_t kPad = 256;
    std::vector<uint8_t> mem;
    size_t len;
    explicit GuardedBuf(size_t n, uint8_t fill = kGuard) : mem(n + 2 * kPad, kGuard), len(n) {
        std::memset(data(), fill, n);
    }
    uint8_t* data() { return mem.data() + kPad; }
    uint8_t* base() { return mem.data(); }
    size_t total() const { return mem.size(); }
    bool guards_intact() const {
        for (size_t i = 0; i < kPad; ++i)
            if (mem[i] != kGuard || mem[kPad + len + i] != kGuard) return false;
        return true;
    }
};

// The next CQE of `cq` has `status` (its copy in *out).
inline void expect_status(TestCq& cq, ibv_wc_status status, abi::Cqe* out = nullptr,
                          int ms = 3000) {
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(cq, &c, ms));
    EXPECT_EQ(c.status, uint32_t(status));
    if (out) *out = c;
}
// The same, and it is WR `wr_id`'s.
inline void expect_cqe(TestCq& cq, uint64_t wr_id, ibv_wc_status status, abi::Cqe* out = nullptr,
                       int ms = 3000) {
    abi::Cqe c{};
    ASSERT_NO_FATAL_FAILURE(expect_status(cq, status, &c, ms));
    EXPECT_EQ(c.wr_id, wr_id);
    if (out) *out = c;
}

// The device wrote no byte of `b`: neither the part handed to it nor the guards around it.
inline void expect_untouched(GuardedBuf& b) {
    EXPECT_TRUE(b.guards_intact());
    for (size_t i = 0; i < b.len; ++i) ASSERT_EQ(b.data()[i], kGuard) << i;
}

inline uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
}

// Starts `n` devices (127.0.0.2, 127.0.0.3, ...) on one UDP port that is free on all of
// them. Each test runs in its own process (gtest_discover_tests) and ctest runs them in
// parallel, so a fixed port would collide; the first port every bind accepts is ours.
// `poll_us`: their polling budget (DeviceConfig::poll_us).
inline std::vector<std::unique_ptr<Device>> start_devices(int n, uint32_t poll_us = 0) {
    static const char* kAddrs[] = {"127.0.0.2", "127.0.0.3"};
    for (uint32_t port = kFirstPort; port <= kLastPort; ++port) {
        std::vector<std::unique_ptr<Device>> devs;
        for (int i = 0; i < n; ++i) {
            DeviceConfig cfg;
            cfg.name = "utest" + std::to_string(i);
            cfg.ipv4_be = ip(kAddrs[i]);
            cfg.port = uint16_t(port);
            cfg.poll_us = poll_us;
            auto d = std::make_unique<Device>(cfg);
            if (d->start() != 0) break;
            devs.push_back(std::move(d));
        }
        if (int(devs.size()) == n) return devs;
    }
    ADD_FAILURE() << "no UDP port in " << kFirstPort << ".." << kLastPort << " free";
    return {};
}

// Packets the device has sent for `qpn`, from its resource dump (`uroce res`).
inline uint64_t qp_tx_pkts(Device& dev, uint32_t qpn) {
    std::string text;
    dev.call([&] { text = dev.dump(); });
    char head[32];
    std::snprintf(head, sizeof head, "qp 0x%x ", qpn);
    size_t at = text.find(head);
    if (at == std::string::npos) return 0;
    size_t tx = text.find(" tx ", at);
    if (tx == std::string::npos) return 0;
    return std::strtoull(text.c_str() + tx + 4, nullptr, 10);
}

inline ibv_qp_cap small_cap(uint32_t sge = 4) {
    ibv_qp_cap c{};
    c.max_send_wr = 16;
    c.max_recv_wr = 16;
    c.max_send_sge = sge;
    c.max_recv_sge = sge;
    c.max_inline_data = 64;
    return c;
}

// ---------------------------------------------------------------------------------------------
// The data path between two QPs.

// Sender QP `s` (on device A) and receiver QP `r` (on device B, or on A too), each with
// its own PD, CQs and memory.
class DataPathTest : public ::testing::Test {
protected:
    struct Side {
        std::unique_ptr<Client> c;
        uint32_t pd = 0;
        std::unique_ptr<TestCq> scq, rcq;
        std::unique_ptr<TestQp> qp;
        uint32_t ip = 0;
    };

    void start(int ndev) {
        devs_ = start_devices(ndev);
        ASSERT_EQ(int(devs_.size()), ndev);
        ASSERT_NO_FATAL_FAILURE(make_side(s_, *devs_[0], ip("127.0.0.2")));
        const char* raddr = ndev == 2 ? "127.0.0.3" : "127.0.0.2";
        ASSERT_NO_FATAL_FAILURE(make_side(r_, *devs_[ndev - 1], ip(raddr)));
    }
    void make_side(Side& x, Device& d, uint32_t addr, ibv_qp_cap cap = small_cap()) {
        x.c = std::make_unique<Client>(d);
        ASSERT_TRUE(x.c->ok());
        x.ip = addr;
        ASSERT_EQ(x.c->alloc_pd(&x.pd), 0);
        ASSERT_EQ(x.c->create_cq(64, &x.scq), 0);
        ASSERT_EQ(x.c->create_cq(64, &x.rcq), 0);
        ASSERT_EQ(x.c->create_qp(x.pd, x.scq->handle, x.rcq->handle, cap, &x.qp), 0);
    }
    void connect(const Path& ps = Path{}, const Path& pr = Path{}) {
        ASSERT_EQ(s_.c->connect(*s_.qp, r_.qp->qpn, r_.ip, ps), 0);
        ASSERT_EQ(r_.c->connect(*r_.qp, s_.qp->qpn, s_.ip, pr), 0);
    }
    void start_connected(int ndev) {
        ASSERT_NO_FATAL_FAILURE(start(ndev));
        ASSERT_NO_FATAL_FAILURE(connect());
    }
    // Two more sides on the first device, connected to each other.
    void connected_sides(Side& a, Side& b) {
        ASSERT_NO_FATAL_FAILURE(make_side(a, *devs_[0], ip("127.0.0.2")));
        ASSERT_NO_FATAL_FAILURE(make_side(b, *devs_[0], ip("127.0.0.2")));
        ASSERT_EQ(a.c->connect(*a.qp, b.qp->qpn, b.ip, Path{}), 0);
        ASSERT_EQ(b.c->connect(*b.qp, a.qp->qpn, a.ip, Path{}), 0);
    }
    // The sender's buffer (no access rights) and the receiver's (`dst_access`) registered.
    void reg_src(GuardedBuf& src, uint32_t* skey) {
        ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, skey), 0);
    }
    void reg_dst(GuardedBuf& dst, uint32_t* rkey, uint32_t dst_access = IBV_ACCESS_LOCAL_WRITE) {
        ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), dst_access, rkey), 0);
    }
    // `dst` registered for the receiver, and one receive `wr_id` over all of it posted.
    void recv_into(GuardedBuf& dst, uint64_t wr_id, uint32_t dst_access = IBV_ACCESS_LOCAL_WRITE) {
        uint32_t rkey;
        ASSERT_NO_FATAL_FAILURE(reg_dst(dst, &rkey, dst_access));
        r_.c->post_recv(*r_.qp, wr_id, {{addr_of(dst.data()), uint32_t(dst.len), rkey}});
    }
    // The usual start: reg_src(), then recv_into().
    void reg_and_recv(GuardedBuf& src, uint32_t* skey, GuardedBuf& dst, uint64_t wr_id,
                      uint32_t dst_access = IBV_ACCESS_LOCAL_WRITE) {
        ASSERT_NO_FATAL_FAILURE(reg_src(src, skey));
        ASSERT_NO_FATAL_FAILURE(recv_into(dst, wr_id, dst_access));
    }
    void reg_bufs(GuardedBuf& src, uint32_t* skey, GuardedBuf& dst, uint32_t* rkey,
                  uint32_t dst_access = IBV_ACCESS_LOCAL_WRITE) {
        ASSERT_NO_FATAL_FAILURE(reg_src(src, skey));
        ASSERT_NO_FATAL_FAILURE(reg_dst(dst, rkey, dst_access));
    }
    void TearDown() override {
        s_ = Side{};
        r_ = Side{};
        devs_.clear();
    }

    std::vector<std::unique_ptr<Device>> devs_;
    Side s_, r_;
};

}  // namespace uroce::emu::device_test
