// Tests for the in-process device engine (emu/engine/device.h): argument checks of the control
// verbs, MR bounds and access checks on the data path, and the device's handling of the
// rings it shares with applications.
//
// The tests play the verbs library's part by hand: they open a session on the engine
// thread, drive Device::handle() with abi::Request messages, map the ring memfds and
// write WQEs exactly as verbs_api/ibverbs/datapath.cpp does. Because the session's pid is
// our own, the device's "DMA" is a memcpy, so MRs are plain local buffers whose every
// byte (including guard bytes around what the device may touch) we can inspect.
#include "emu/engine/device.h"

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
#include "emu/verbs/shared_region.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint8_t kGuard = 0xA5;  // fill of bytes the device must never write
constexpr uint16_t kFirstPort = 6100;
constexpr uint16_t kLastPort = 6499;

uint32_t ip(const char* dotted) { return inet_addr(dotted); }

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
        req.u.reg_mr.pd = pd;
        req.u.reg_mr.access = access;
        req.u.reg_mr.addr = reinterpret_cast<uint64_t>(addr);
        req.u.reg_mr.length = len;
        req.u.reg_mr.iova = iova ? iova : reinterpret_cast<uint64_t>(addr);
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
        if (int e = request(req, &resp, &fds)) return e;
        EXPECT_EQ(fds.size(), 1u);
        if (fds.size() != 1) return EPROTO;
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
        auto& r = req.u.create_qp;
        r.pd = pd;
        r.send_cq = scq;
        r.recv_cq = rcq;
        r.qp_type = IBV_QPT_RC;
        r.cap = cap;
        abi::Response resp;
        std::vector<int> fds;
        if (int e = request(req, &resp, &fds)) return e;
        EXPECT_EQ(fds.size(), 2u);
        if (fds.size() != 2) return EPROTO;
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
        if (int e = request(req, &resp, &fds)) return e;
        EXPECT_EQ(fds.size(), 1u);
        if (fds.size() != 1) return EPROTO;
        *srqn = resp.u.create_srq.handle;
        return ring->map(fds[0], resp.u.create_srq.slots, resp.u.create_srq.stride) ? 0 : ENOMEM;
    }
    int destroy_srq(uint32_t h) { return handle_op(abi::Op::kDestroySrq, h); }
    int create_tgt(uint32_t xrcd, uint64_t cookie, uint32_t* qpn) {
        abi::Request req{};
        req.op = abi::Op::kCreateQp;
        req.u.create_qp.qp_type = IBV_QPT_XRC_RECV;
        req.u.create_qp.xrcd = xrcd;
        req.u.create_qp.cookie = cookie;
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
        req.u.modify_qp.qpn = qpn;
        req.u.modify_qp.mask = mask;
        req.u.modify_qp.attr = attr;
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
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        if (int e = modify_qp(qp.qpn, a,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return e;
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = p.mtu;
        a.dest_qp_num = dest_qpn;
        a.rq_psn = p.rq_psn;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = p.min_rnr_timer;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.grh.dgid.raw[10] = 0xff;
        a.ah_attr.grh.dgid.raw[11] = 0xff;
        std::memcpy(&a.ah_attr.grh.dgid.raw[12], &dest_ip, 4);
        if (int e = modify_qp(qp.qpn, a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            return e;
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = p.timeout;
        a.retry_cnt = p.retry_cnt;
        a.rnr_retry = p.rnr_retry;
        a.sq_psn = p.sq_psn;
        a.max_rd_atomic = 1;
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

// Waits up to `ms` for the next CQE, consuming it as poll_cq does.
bool poll_cq(TestCq& cq, abi::Cqe* out, int ms = 3000) {
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

uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
}

// Starts `n` devices (127.0.0.2, 127.0.0.3, ...) on one UDP port that is free on all of
// them. Each test runs in its own process (gtest_discover_tests) and ctest runs them in
// parallel, so a fixed port would collide; the first port every bind accepts is ours.
std::vector<std::unique_ptr<Device>> start_devices(int n) {
    static const char* kAddrs[] = {"127.0.0.2", "127.0.0.3"};
    for (uint32_t port = kFirstPort; port <= kLastPort; ++port) {
        std::vector<std::unique_ptr<Device>> devs;
        for (int i = 0; i < n; ++i) {
            DeviceConfig cfg;
            cfg.name = "utest" + std::to_string(i);
            cfg.ipv4_be = ip(kAddrs[i]);
            cfg.port = uint16_t(port);
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
uint64_t qp_tx_pkts(Device& dev, uint32_t qpn) {
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

ibv_qp_cap small_cap(uint32_t sge = 4) {
    ibv_qp_cap c{};
    c.max_send_wr = 16;
    c.max_recv_wr = 16;
    c.max_send_sge = sge;
    c.max_recv_sge = sge;
    c.max_inline_data = 64;
    return c;
}

// ---------------------------------------------------------------------------------------------
// Control verbs: argument checks.

class ControlTest : public ::testing::Test {
protected:
    void SetUp() override {
        devs_ = start_devices(1);
        ASSERT_EQ(devs_.size(), 1u);
        c_ = std::make_unique<Client>(*devs_[0]);
        ASSERT_TRUE(c_->ok());
        ASSERT_EQ(c_->alloc_pd(&pd_), 0);
    }
    void TearDown() override {
        c_.reset();
        devs_.clear();
    }
    std::vector<std::unique_ptr<Device>> devs_;
    std::unique_ptr<Client> c_;
    uint32_t pd_ = 0;
    std::vector<uint8_t> buf_ = std::vector<uint8_t>(8192);
};

TEST_F(ControlTest, RegMrRejectsZeroLength) {
    uint32_t key;
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 0, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    // The same call with a length succeeds, so EINVAL above was about the length.
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 1, IBV_ACCESS_LOCAL_WRITE, &key), 0);
}

TEST_F(ControlTest, RegMrRejectsRemoteWriteWithoutLocalWrite) {
    uint32_t key;
    // The kernel (ib_check_mr_access) refuses remote write and remote atomic without
    // local write; remote read alone is fine.
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_WRITE, &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_ATOMIC, &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_READ, &key), 0);
    EXPECT_EQ(
        c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE, &key),
        0);
}

TEST_F(ControlTest, RegMrRejectsUnknownAccessBits) {
    uint32_t key;
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE | (1u << 15), &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE | (1u << 31), &key), EINVAL);
}

TEST_F(ControlTest, RegMrRejectsAddressWrap) {
    abi::Request req{};
    req.op = abi::Op::kRegMr;
    req.u.reg_mr.pd = pd_;
    req.u.reg_mr.access = IBV_ACCESS_LOCAL_WRITE;
    req.u.reg_mr.addr = ~uint64_t(0) - 10;
    req.u.reg_mr.length = 4096;
    req.u.reg_mr.iova = 0x1000;
    abi::Response resp;
    EXPECT_EQ(c_->request(req, &resp), EINVAL);
    // The same range without the wrap registers, so EINVAL above was about the wrap.
    req.u.reg_mr.addr = reinterpret_cast<uint64_t>(buf_.data());
    EXPECT_EQ(c_->request(req, &resp), 0);
}

TEST_F(ControlTest, RegMrRejectsWrongAndForeignPd) {
    uint32_t key;
    EXPECT_EQ(c_->reg_mr(0, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_ + 1000, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    // A PD of another session (another process) is not ours to use, though it exists.
    Client other(*devs_[0]);
    uint32_t foreign;
    ASSERT_EQ(other.alloc_pd(&foreign), 0);
    EXPECT_EQ(c_->reg_mr(foreign, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    EXPECT_EQ(other.reg_mr(foreign, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    // Nor may we free it or its MR.
    EXPECT_EQ(c_->dereg_mr(key), EINVAL);
    EXPECT_EQ(c_->dealloc_pd(foreign), EINVAL);
    EXPECT_EQ(other.dereg_mr(key), 0);
    EXPECT_EQ(other.dealloc_pd(foreign), 0);
}

TEST_F(ControlTest, DeregMrRejectsBadKeys) {
    uint32_t key;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    EXPECT_EQ(c_->dereg_mr(0), EINVAL);
    EXPECT_EQ(c_->dereg_mr(0xffffffff), EINVAL);
    // Right table slot, wrong generation byte: a stale or forged key.
    EXPECT_EQ(c_->dereg_mr(key ^ 0x1), EINVAL);
    EXPECT_EQ(c_->dereg_mr(key), 0);
    // Already gone.
    EXPECT_EQ(c_->dereg_mr(key), EINVAL);
}

TEST_F(ControlTest, StaleKeyOfReusedSlotFails) {
    uint32_t k1, k2;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &k1), 0);
    ASSERT_EQ(c_->dereg_mr(k1), 0);
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &k2), 0);
    EXPECT_NE(k1, k2);
    EXPECT_EQ(c_->dereg_mr(k1), EINVAL);
    EXPECT_EQ(c_->dereg_mr(k2), 0);
}

TEST_F(ControlTest, DeallocPdWithMrIsBusy) {
    uint32_t key;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), EBUSY);
    ASSERT_EQ(c_->dereg_mr(key), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), EINVAL);
}

TEST_F(ControlTest, DestroyCqInUseIsBusy) {
    std::unique_ptr<TestCq> scq, rcq;
    ASSERT_EQ(c_->create_cq(8, &scq), 0);
    ASSERT_EQ(c_->create_cq(8, &rcq), 0);
    std::unique_ptr<TestQp> qp;
    ASSERT_EQ(c_->create_qp(pd_, scq->handle, rcq->handle, small_cap(), &qp), 0);
    EXPECT_EQ(c_->destroy_cq(scq->handle), EBUSY);
    EXPECT_EQ(c_->destroy_cq(rcq->handle), EBUSY);
    EXPECT_EQ(c_->dealloc_pd(pd_), EBUSY);
    ASSERT_EQ(c_->destroy_qp(qp->qpn), 0);
    EXPECT_EQ(c_->destroy_qp(qp->qpn), EINVAL);
    EXPECT_EQ(c_->destroy_cq(scq->handle), 0);
    EXPECT_EQ(c_->destroy_cq(rcq->handle), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), 0);
}

TEST_F(ControlTest, CreateCqChecksSize) {
    std::unique_ptr<TestCq> cq;
    EXPECT_EQ(c_->create_cq(0, &cq), EINVAL);
    EXPECT_EQ(c_->create_cq(abi::kMaxCqe + 1, &cq), EINVAL);
    EXPECT_EQ(cq, nullptr);
    EXPECT_EQ(c_->create_cq(1, &cq), 0);
}

// ibv_resize_cq's new ring comes from the application: the device maps it only if it is a
// memfd sealed against shrinking and large enough, and refuses sizes as rxe does. A refused
// resize leaves the CQ as it was; an accepted one moves what the CQ holds.
TEST_F(ControlTest, ResizeCqChecksTheRingAndTheSize) {
    std::unique_ptr<TestCq> cq;
    ASSERT_EQ(c_->create_cq(8, &cq), 0);
    auto resize = [&](uint32_t cqe, uint32_t slots, int fd, uint32_t handle = 0) {
        abi::Request req{};
        req.op = abi::Op::kResizeCq;
        req.u.resize_cq = abi::ResizeCqReq{handle ? handle : cq->handle, cqe, slots, 0};
        abi::Response resp;
        int e = c_->request(req, &resp, nullptr, fd);
        if (!e) {
            EXPECT_EQ(resp.u.resize_cq.cqe, slots - 1);
        }
        return e;
    };
    auto memfd = [](size_t bytes, unsigned seals) {
        int fd = memfd_create("test-cq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        EXPECT_GE(fd, 0);
        EXPECT_EQ(ftruncate(fd, off_t(bytes)), 0);
        if (seals) {
            EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
        }
        return fd;
    };
    const uint32_t slots = abi::cq_slots(100);
    const size_t bytes = abi::ring_bytes(slots, sizeof(abi::Cqe));
    int good = memfd(bytes, F_SEAL_SHRINK);
    int unsealed = memfd(bytes, 0);
    int small = memfd(bytes - 4096, F_SEAL_SHRINK);
    int readonly = memfd(bytes, F_SEAL_SHRINK | F_SEAL_WRITE);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    EXPECT_EQ(resize(100, slots, -1), EBADF);
    EXPECT_EQ(resize(100, slots, unsealed), EINVAL);  // it could shrink under the device
    EXPECT_EQ(resize(100, slots, small), EINVAL);
    EXPECT_EQ(resize(100, slots, p[0]), EINVAL);
    EXPECT_EQ(resize(100, slots, readonly), EPERM);
    EXPECT_EQ(resize(100, slots * 2, good), EINVAL);  // not the device's size for 100
    EXPECT_EQ(resize(0, abi::cq_slots(0), good), EINVAL);
    EXPECT_EQ(resize(abi::kMaxCqe + 1, abi::cq_slots(abi::kMaxCqe + 1), good), EINVAL);
    EXPECT_EQ(resize(100, slots, good, cq->handle + 1000), EINVAL);
    Client other(*devs_[0]);
    std::unique_ptr<TestCq> foreign;
    ASSERT_EQ(other.create_cq(8, &foreign), 0);
    EXPECT_EQ(resize(100, slots, good, foreign->handle), EINVAL);
    // A consumer index that claims more CQEs than the ring has slots is garbage.
    cq->ring.hdr()->cons.store(1000, std::memory_order_release);
    EXPECT_EQ(resize(100, slots, good), EINVAL);
    cq->ring.hdr()->cons.store(0, std::memory_order_release);
    EXPECT_EQ(resize(100, slots, good), 0);
    // The device moved to the new ring: its header is there, and the CQ can be destroyed.
    MappedRing ring;
    ASSERT_TRUE(ring.map(dup(good), slots, sizeof(abi::Cqe)));
    EXPECT_EQ(ring.hdr()->prod.load(), 0u);
    EXPECT_EQ(ring.hdr()->cons.load(), 0u);
    for (int fd : {good, unsealed, small, readonly, p[0], p[1]}) close(fd);
    EXPECT_EQ(c_->destroy_cq(cq->handle), 0);
}

TEST_F(ControlTest, ReregMrChecksAndMovesThePd) {
    uint32_t key, pd2;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    ASSERT_EQ(c_->alloc_pd(&pd2), 0);
    auto rereg = [&](uint32_t handle, uint32_t flags, uint32_t pd, uint32_t access, uint64_t addr,
                     uint64_t length) {
        abi::Request req{};
        req.op = abi::Op::kReregMr;
        req.u.rereg_mr = abi::ReregMrReq{handle, flags, pd, access, addr, length};
        abi::Response resp;
        int e = c_->request(req, &resp);
        if (!e) {
            EXPECT_EQ(resp.u.reg_mr.lkey, key);
        }
        return e;
    };
    const uint64_t a = reinterpret_cast<uint64_t>(buf_.data());
    EXPECT_EQ(rereg(key, 0, 0, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, 8, 0, 0, 0, 0), EOPNOTSUPP);
    EXPECT_EQ(rereg(key ^ 1, IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_PD, pd2 + 1000, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_ACCESS, 0, 1u << 15, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, ~uint64_t(0) - 10, 4096), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, a, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, a, abi::kMaxMrSize + 1), EINVAL);
    Client other(*devs_[0]);
    uint32_t foreign_pd, foreign_key;
    ASSERT_EQ(other.alloc_pd(&foreign_pd), 0);
    ASSERT_EQ(other.reg_mr(foreign_pd, buf_.data(), 64, 0, &foreign_key), 0);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_PD, foreign_pd, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(foreign_key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, 0), EINVAL);
    // Moved to pd2, the MR holds pd2 and no longer its first PD.
    ASSERT_EQ(rereg(key, IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0), 0);
    EXPECT_EQ(c_->dealloc_pd(pd2), EBUSY);
    EXPECT_EQ(c_->dealloc_pd(pd_), 0);
    EXPECT_EQ(c_->dereg_mr(key), 0);
    EXPECT_EQ(c_->dealloc_pd(pd2), 0);
}

TEST_F(ControlTest, CreateQpChecksCapsAgainstLimits) {
    std::unique_ptr<TestCq> cq;
    ASSERT_EQ(c_->create_cq(8, &cq), 0);
    std::unique_ptr<TestQp> qp;
    struct Case {
        const char* what;
        ibv_qp_cap cap;
    };
    auto with = [](auto f) {
        ibv_qp_cap c = small_cap();
        f(c);
        return c;
    };
    const Case cases[] = {
        {"max_send_wr", with([](ibv_qp_cap& c) { c.max_send_wr = abi::kMaxQpWr + 1; })},
        {"max_recv_wr", with([](ibv_qp_cap& c) { c.max_recv_wr = abi::kMaxQpWr + 1; })},
        {"max_send_sge", with([](ibv_qp_cap& c) { c.max_send_sge = abi::kMaxSge + 1; })},
        {"max_recv_sge", with([](ibv_qp_cap& c) { c.max_recv_sge = abi::kMaxSge + 1; })},
        {"max_inline_data", with([](ibv_qp_cap& c) { c.max_inline_data = abi::kMaxInline + 1; })},
        {"max_send_wr huge", with([](ibv_qp_cap& c) { c.max_send_wr = 0xffffffffu; })},
    };
    for (const Case& k : cases)
        EXPECT_EQ(c_->create_qp(pd_, cq->handle, cq->handle, k.cap, &qp), EINVAL) << k.what;
    EXPECT_EQ(qp, nullptr);
    // Exactly at the limits is allowed.
    ibv_qp_cap max{};
    max.max_send_wr = abi::kMaxQpWr;
    max.max_recv_wr = abi::kMaxQpWr;
    max.max_send_sge = abi::kMaxSge;
    max.max_recv_sge = abi::kMaxSge;
    max.max_inline_data = abi::kMaxInline;
    ASSERT_EQ(c_->create_qp(pd_, cq->handle, cq->handle, max, &qp), 0);
    EXPECT_EQ(qp->cap.max_send_wr, abi::kMaxQpWr);
    EXPECT_EQ(qp->cap.max_inline_data, abi::kMaxInline);
}

TEST_F(ControlTest, CreateQpRejectsForeignObjects) {
    std::unique_ptr<TestCq> cq;
    ASSERT_EQ(c_->create_cq(8, &cq), 0);
    Client other(*devs_[0]);
    uint32_t opd;
    ASSERT_EQ(other.alloc_pd(&opd), 0);
    std::unique_ptr<TestCq> ocq;
    ASSERT_EQ(other.create_cq(8, &ocq), 0);
    std::unique_ptr<TestQp> qp;
    EXPECT_EQ(c_->create_qp(opd, cq->handle, cq->handle, small_cap(), &qp), EINVAL);
    EXPECT_EQ(c_->create_qp(pd_, ocq->handle, cq->handle, small_cap(), &qp), EINVAL);
    EXPECT_EQ(c_->create_qp(pd_, cq->handle, ocq->handle, small_cap(), &qp), EINVAL);
    EXPECT_EQ(c_->destroy_cq(ocq->handle), EINVAL);
    ASSERT_EQ(c_->create_qp(pd_, cq->handle, cq->handle, small_cap(), &qp), 0);
    // Another session can neither modify, query nor destroy our QP.
    EXPECT_EQ(other.destroy_qp(qp->qpn), EINVAL);
    EXPECT_EQ(other.qp_state(qp->qpn), -EINVAL);
    EXPECT_EQ(c_->qp_state(qp->qpn), int(IBV_QPS_RESET));
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
    void TearDown() override {
        s_ = Side{};
        r_ = Side{};
        devs_.clear();
    }

    std::vector<std::unique_ptr<Device>> devs_;
    Side s_, r_;
};

TEST_F(DataPathTest, SendMovesExactBytesBetweenDevices) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf src(1000, 0), dst(1000);
    auto data = pattern(1000, 1);
    std::memcpy(src.data(), data.data(), data.size());
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 0xabc, {{addr_of(dst.data()), 1000, rkey}});
    s_.c->post_send(*s_.qp, 0x123, {{addr_of(src.data()), 1000, skey}});

    abi::Cqe rc{}, sc{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &rc));
    EXPECT_EQ(rc.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(rc.opcode, uint32_t(IBV_WC_RECV));
    EXPECT_EQ(rc.wr_id, 0xabcu);
    EXPECT_EQ(rc.byte_len, 1000u);
    EXPECT_EQ(rc.qp_num, r_.qp->qpn);
    EXPECT_EQ(rc.src_qp, s_.qp->qpn);
    EXPECT_EQ(rc.wc_flags & IBV_WC_WITH_IMM, 0u);
    ASSERT_TRUE(poll_cq(*s_.scq, &sc));
    EXPECT_EQ(sc.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(sc.opcode, uint32_t(IBV_WC_SEND));
    EXPECT_EQ(sc.wr_id, 0x123u);
    EXPECT_EQ(sc.qp_num, s_.qp->qpn);

    EXPECT_EQ(std::memcmp(dst.data(), data.data(), 1000), 0);
    EXPECT_TRUE(dst.guards_intact());
    // Both rings were consumed: the library sizes its free space from these.
    EXPECT_EQ(s_.qp->sq.hdr()->cons.load(), 1u);
    EXPECT_EQ(r_.qp->rq.hdr()->cons.load(), 1u);
}

TEST_F(DataPathTest, SendWithImmAndUnsignaledWqes) {
    // Both QPs on one device: loopback through its own UDP socket.
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf src(64, 0x11), dst(128);
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 64, rkey}});
    r_.c->post_recv(*r_.qp, 2, {{addr_of(dst.data() + 64), 64, rkey}});
    // An unsignaled SEND produces no send CQE but still consumes its SQ slot.
    s_.c->post_send(*s_.qp, 10, {{addr_of(src.data()), 32, skey}}, IBV_WR_SEND, 0);
    s_.c->post_send(*s_.qp, 11, {{addr_of(src.data()), 64, skey}}, IBV_WR_SEND_WITH_IMM,
                    IBV_SEND_SIGNALED, htobe32(0xfeedbeef));

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 1u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.byte_len, 32u);
    EXPECT_EQ(c.wc_flags & IBV_WC_WITH_IMM, 0u);
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 2u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.opcode, uint32_t(IBV_WC_RECV));
    EXPECT_EQ(c.byte_len, 64u);
    EXPECT_NE(c.wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(c.imm_data, htobe32(0xfeedbeef));  // network order, as in ibv_wc
    EXPECT_EQ(c.src_qp, s_.qp->qpn);
    EXPECT_EQ(c.qp_num, r_.qp->qpn);

    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 11u);  // not 10: that one was unsignaled
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(s_.qp->sq.hdr()->cons.load(), 2u);
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 50)) << "unexpected CQE wr_id " << c.wr_id;

    for (int i = 0; i < 32; ++i) ASSERT_EQ(dst.data()[i], 0x11) << i;
    for (int i = 32; i < 64; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;  // past byte_len
    for (int i = 64; i < 128; ++i) ASSERT_EQ(dst.data()[i], 0x11) << i;
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, MultiPacketMessageAcrossSges) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    ASSERT_NO_FATAL_FAILURE(connect());
    // 10000 bytes at MTU 1024 is 10 packets; the SGE boundaries on neither side line up
    // with the packet boundaries, and the receiver's MR has an iova unlike its address,
    // so the device has to translate every receive SGE.
    constexpr size_t kLen = 10000;
    auto data = pattern(kLen, 7);
    GuardedBuf a(3000, 0), b(7000, 0);
    std::memcpy(a.data(), data.data(), 3000);
    std::memcpy(b.data(), data.data() + 3000, 7000);
    uint32_t ka, kb;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, a.base(), a.total(), 0, &ka), 0);
    ASSERT_EQ(s_.c->reg_mr(s_.pd, b.base(), b.total(), 0, &kb), 0);

    // Receive segments: 1500 | gap 100 | 2500 | gap 100 | 5000 | gap 100 | 1000.
    const size_t seg[] = {1500, 2500, 5000, 1000};
    constexpr size_t kGap = 100;
    GuardedBuf dst(kLen + 3 * kGap);
    constexpr uint64_t kIova = 0x7000000000;
    uint32_t kd;
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &kd, kIova), 0);
    std::vector<abi::Sge> rs;
    size_t off = 0;
    for (size_t n : seg) {
        rs.push_back({kIova + GuardedBuf::kPad + off, uint32_t(n), kd});
        off += n + kGap;
    }
    r_.c->post_recv(*r_.qp, 77, rs);
    s_.c->post_send(*s_.qp, 78,
                    {{addr_of(a.data()), 1000, ka},
                     {addr_of(a.data() + 1000), 2000, ka},
                     {addr_of(b.data()), 7000, kb}});

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.wr_id, 77u);
    EXPECT_EQ(c.byte_len, kLen);
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.wr_id, 78u);

    off = 0;
    size_t src_off = 0;
    for (size_t n : seg) {
        EXPECT_EQ(std::memcmp(dst.data() + off, data.data() + src_off, n), 0)
            << "segment at " << off;
        if (off + n < dst.len) {
            for (size_t g = 0; g < kGap; ++g)
                ASSERT_EQ(dst.data()[off + n + g], kGuard) << "gap byte " << off + n + g;
        }
        off += n + kGap;
        src_off += n;
    }
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, InlineSendNeedsNoMr) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf dst(64);
    uint32_t rkey;
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 64, rkey}});
    // Inline data travels in the SQ slot itself, after the header (datapath.cpp), so it
    // needs no lkey: the device must take the bytes from the ring, not from memory.
    auto data = pattern(48, 3);
    uint8_t* slot = s_.qp->sq.slot(0);
    abi::SendWqe w{};
    w.wr_id = 2;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    w.inline_len = 48;
    std::memcpy(slot + sizeof w, data.data(), 48);
    std::memcpy(slot, &w, sizeof w);
    s_.qp->sq.hdr()->prod.store(1, std::memory_order_release);
    s_.c->ring_doorbell();
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.byte_len, 48u);
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(std::memcmp(dst.data(), data.data(), 48), 0);
    for (size_t i = 48; i < 64; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, ZeroLengthSendWithImm) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf dst(16);
    uint32_t rkey;
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 16, rkey}});
    // No SGE at all: a message of zero bytes is still a message (one packet, one CQE).
    s_.c->post_send(*s_.qp, 2, {}, IBV_WR_SEND_WITH_IMM, IBV_SEND_SIGNALED, htobe32(42));
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.byte_len, 0u);
    EXPECT_NE(c.wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(c.imm_data, htobe32(42));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    for (size_t i = 0; i < 16; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;
}

TEST_F(DataPathTest, MessageOverMaxMsgSizeIsLengthError) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    // An MR may be far larger than memory actually mapped; the device must refuse a
    // message over max_msg_sz (2 GiB) before touching any of it.
    std::vector<uint8_t> mem(64);
    uint32_t key;
    constexpr uint64_t kIova = 0x10000000000;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, mem.data(), uint64_t(1) << 33, 0, &key, kIova), 0);
    s_.c->post_send(*s_.qp, 6,
                    {{kIova, 0x80000000u, key}, {kIova + 0x80000000u, 0x80000000u, key}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 6u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_LEN_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
}

TEST_F(DataPathTest, BadLkeyIsLocalProtectionErrorThenFlush) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf src(256, 0x22), dst(256);
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 256, rkey}});
    // A receive on the sender's own RQ: the error state must flush it too.
    s_.c->post_recv(*s_.qp, 500, {{addr_of(src.data()), 16, skey}});

    s_.c->post_send(*s_.qp, 1, {{addr_of(src.data()), 256, skey ^ 0x80}});
    s_.c->post_send(*s_.qp, 2, {{addr_of(src.data()), 256, skey}});
    s_.c->post_send(*s_.qp, 3, {{addr_of(src.data()), 256, skey}});

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 1u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_PROT_ERR));
    for (uint64_t id : {2u, 3u}) {
        ASSERT_TRUE(poll_cq(*s_.scq, &c));
        EXPECT_EQ(c.wr_id, id);
        EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    }
    ASSERT_TRUE(poll_cq(*s_.rcq, &c));
    EXPECT_EQ(c.wr_id, 500u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));

    // Work posted in ERR is flushed too, as soon as the doorbell rings.
    s_.c->post_send(*s_.qp, 4, {{addr_of(src.data()), 8, skey}});
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 4u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));

    // Nothing reached the receiver.
    EXPECT_FALSE(poll_cq(*r_.rcq, &c, 50));
    EXPECT_TRUE(dst.guards_intact());
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(dst.data()[i], kGuard);
}

TEST_F(DataPathTest, SgeOneByteOutsideMrIsLocalProtectionError) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    // Each bad SGE puts its QP in error, so every case gets a fresh sender QP.
    std::vector<uint8_t> mem(8192, 0x33);
    uint8_t* mr_start = mem.data() + 1024;
    constexpr uint32_t kMrLen = 4096;
    struct Case {
        const char* what;
        uint64_t addr;
        uint32_t len;
    };
    const Case cases[] = {
        {"one past the end", addr_of(mr_start) + 1, kMrLen},
        {"one before the start", addr_of(mr_start) - 1, 16},
        {"last byte plus one", addr_of(mr_start) + kMrLen, 1},
        {"length far past the end", addr_of(mr_start) + 16, 0xfffffff0u},
    };
    ASSERT_NO_FATAL_FAILURE(make_side(r_, *devs_[0], ip("127.0.0.2")));
    for (const Case& k : cases) {
        s_ = Side{};
        ASSERT_NO_FATAL_FAILURE(make_side(s_, *devs_[0], ip("127.0.0.2")));
        uint32_t key;
        ASSERT_EQ(s_.c->reg_mr(s_.pd, mr_start, kMrLen, 0, &key), 0);
        ASSERT_EQ(s_.c->connect(*s_.qp, r_.qp->qpn, r_.ip, Path{}), 0);
        s_.c->post_send(*s_.qp, 9, {{k.addr, k.len, key}});
        abi::Cqe c{};
        ASSERT_TRUE(poll_cq(*s_.scq, &c)) << k.what;
        EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_PROT_ERR)) << k.what;
        EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR)) << k.what;
    }
    // The exact MR, first to last byte, is fine.
    s_ = Side{};
    ASSERT_NO_FATAL_FAILURE(make_side(s_, *devs_[0], ip("127.0.0.2")));
    uint32_t key;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, mr_start, kMrLen, 0, &key), 0);
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf dst(kMrLen);
    uint32_t rkey;
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), kMrLen, rkey}});
    s_.c->post_send(*s_.qp, 10, {{addr_of(mr_start), kMrLen, key}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.byte_len, kMrLen);
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, SgeOfAnotherPdIsLocalProtectionError) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf src(64, 0x44);
    uint32_t pd2, key;
    ASSERT_EQ(s_.c->alloc_pd(&pd2), 0);
    ASSERT_EQ(s_.c->reg_mr(pd2, src.base(), src.total(), 0, &key), 0);
    s_.c->post_send(*s_.qp, 5, {{addr_of(src.data()), 64, key}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_PROT_ERR));
}

TEST_F(DataPathTest, ReceiveBufferTooSmall) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    ASSERT_NO_FATAL_FAILURE(connect());
    // Three packets; the receive takes two minus a little, so the first packet lands and
    // the second does not fit.
    GuardedBuf src(3000, 0x55), dst(2000);
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 31, {{addr_of(dst.data()), 2000, rkey}});
    r_.c->post_recv(*r_.qp, 32, {{addr_of(dst.data()), 2000, rkey}});
    s_.c->post_send(*s_.qp, 41, {{addr_of(src.data()), 3000, skey}});

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 31u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_LEN_ERR));
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 32u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 41u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_REM_INV_REQ_ERR));
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_TRUE(dst.guards_intact());
}

TEST_F(DataPathTest, SinglePacketLargerThanReceive) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf src(100, 0x56), dst(99);
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 99, rkey}});
    s_.c->post_send(*s_.qp, 2, {{addr_of(src.data()), 100, skey}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_LEN_ERR));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_REM_INV_REQ_ERR));
    EXPECT_TRUE(dst.guards_intact());
    for (size_t i = 0; i < dst.len; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;
}

TEST_F(DataPathTest, ReceiveIntoMrWithoutLocalWrite) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    ASSERT_NO_FATAL_FAILURE(connect());
    GuardedBuf src(128, 0x66), dst(128);
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    // Remote read only: the device may not write here, not even for a receive.
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_REMOTE_READ, &rkey), 0);
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst.data()), 128, rkey}});
    s_.c->post_send(*s_.qp, 2, {{addr_of(src.data()), 128, skey}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 1u);
    // IBTA: a local protection error on the responder's receive WQE; the requester sees a
    // Remote Operational Error NAK.
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_PROT_ERR));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 2u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_REM_OP_ERR));
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_TRUE(dst.guards_intact());
    for (size_t i = 0; i < dst.len; ++i) ASSERT_EQ(dst.data()[i], kGuard) << i;
}

TEST_F(DataPathTest, RnrRetryExceeded) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    Path ps;
    ps.rnr_retry = 1;
    Path pr;
    pr.min_rnr_timer = 1;  // 10 us between attempts
    ASSERT_NO_FATAL_FAILURE(connect(ps, pr));
    GuardedBuf src(64, 0x77);
    uint32_t skey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    auto t0 = steady_clock::now();
    s_.c->post_send(*s_.qp, 3, {{addr_of(src.data()), 64, skey}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c, 2000));
    EXPECT_EQ(c.wr_id, 3u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_RNR_RETRY_EXC_ERR));
    EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    // An RNR NAK is not an error for the responder: it stays usable.
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_RTS));
}

TEST_F(DataPathTest, RnrRecoversWhenReceiveArrives) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    Path ps;
    ps.rnr_retry = 7;  // retry forever
    ASSERT_NO_FATAL_FAILURE(connect(ps, Path{}));
    GuardedBuf src(64, 0x78), dst(64);
    uint32_t skey, rkey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    ASSERT_EQ(r_.c->reg_mr(r_.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rkey), 0);
    s_.c->post_send(*s_.qp, 3, {{addr_of(src.data()), 64, skey}});
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 30));
    r_.c->post_recv(*r_.qp, 4, {{addr_of(dst.data()), 64, rkey}});
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(dst.data()[63], 0x78);
}

TEST_F(DataPathTest, RetryExceededWhenPeerIsGone) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    Path ps;
    ps.timeout = 10;  // 4.096 us * 2^10 = 4.2 ms
    ps.retry_cnt = 2;
    ASSERT_NO_FATAL_FAILURE(connect(ps, Path{}));
    ASSERT_EQ(r_.c->destroy_qp(r_.qp->qpn), 0);
    GuardedBuf src(64, 0x79);
    uint32_t skey;
    ASSERT_EQ(s_.c->reg_mr(s_.pd, src.base(), src.total(), 0, &skey), 0);
    auto t0 = steady_clock::now();
    s_.c->post_send(*s_.qp, 8, {{addr_of(src.data()), 64, skey}});
    s_.c->post_send(*s_.qp, 9, {{addr_of(src.data()), 64, skey}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c, 2000));
    auto took = steady_clock::now() - t0;
    EXPECT_EQ(c.wr_id, 8u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_RETRY_EXC_ERR));
    // Three timeouts of ~4 ms (the first try and two retries); far less than a second,
    // and not instantly either.
    EXPECT_GE(took, milliseconds(8));
    EXPECT_LT(took, milliseconds(1000));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 9u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
}

// ---------------------------------------------------------------------------------------------
// Rings written by a buggy or hostile application. The device must not crash, must not
// touch memory it should not, and must keep serving everyone else.

class RingAbuseTest : public DataPathTest {
protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(start(1));
        ASSERT_NO_FATAL_FAILURE(connect());
        src_ = std::make_unique<GuardedBuf>(512, 0x5a);
        dst_ = std::make_unique<GuardedBuf>(512);
        ASSERT_EQ(s_.c->reg_mr(s_.pd, src_->base(), src_->total(), 0, &skey_), 0);
        ASSERT_EQ(r_.c->reg_mr(r_.pd, dst_->base(), dst_->total(), IBV_ACCESS_LOCAL_WRITE, &rkey_),
                  0);
    }

    // A second, well-behaved QP pair on the same device still works.
    void expect_device_healthy() {
        Side a, b;
        ASSERT_NO_FATAL_FAILURE(make_side(a, *devs_[0], ip("127.0.0.2")));
        ASSERT_NO_FATAL_FAILURE(make_side(b, *devs_[0], ip("127.0.0.2")));
        ASSERT_EQ(a.c->connect(*a.qp, b.qp->qpn, b.ip, Path{}), 0);
        ASSERT_EQ(b.c->connect(*b.qp, a.qp->qpn, a.ip, Path{}), 0);
        GuardedBuf src(300, 0x3c), dst(300);
        uint32_t sk, rk;
        ASSERT_EQ(a.c->reg_mr(a.pd, src.base(), src.total(), 0, &sk), 0);
        ASSERT_EQ(b.c->reg_mr(b.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rk), 0);
        b.c->post_recv(*b.qp, 1, {{addr_of(dst.data()), 300, rk}});
        a.c->post_send(*a.qp, 2, {{addr_of(src.data()), 300, sk}});
        abi::Cqe c{};
        ASSERT_TRUE(poll_cq(*b.rcq, &c));
        EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
        EXPECT_EQ(c.byte_len, 300u);
        ASSERT_TRUE(poll_cq(*a.scq, &c));
        EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
        for (size_t i = 0; i < 300; ++i) ASSERT_EQ(dst.data()[i], 0x3c);
        EXPECT_TRUE(dst.guards_intact());
    }

    void expect_receiver_untouched() {
        abi::Cqe c{};
        EXPECT_FALSE(poll_cq(*r_.rcq, &c, 20)) << "receiver got wr_id " << c.wr_id;
        EXPECT_TRUE(dst_->guards_intact());
        for (size_t i = 0; i < dst_->len; ++i) ASSERT_EQ(dst_->data()[i], kGuard) << i;
    }

    std::unique_ptr<GuardedBuf> src_, dst_;
    uint32_t skey_ = 0, rkey_ = 0;
};

// An application that truncates a ring's memfd cannot make the device fault on it: the size is
// sealed, and the device's mapping stays whole.
TEST(SharedRegionTest, ApplicationCannotShrinkARing) {
    emu::SharedRegion r;
    ASSERT_EQ(r.create("uroce-test", 8192), 0);
    int fd = r.take_fd();
    ASSERT_GE(fd, 0);
    errno = 0;
    EXPECT_EQ(ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1) << "seals can be changed";
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 8192);
    static_cast<volatile uint8_t*>(r.data())[8191] = 1;  // still mapped to the end
    close(fd);
}

TEST_F(RingAbuseTest, RandomBytesInSendSlot) {
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst_->data()), 512, rkey_}});
    std::mt19937 rng(12345);
    uint8_t* slot = s_.qp->sq.slot(0);
    for (size_t i = 0; i < s_.qp->sq.stride(); ++i) slot[i] = uint8_t(rng());
    auto* w = reinterpret_cast<abi::SendWqe*>(slot);
    w->num_sge = 0xfffffff0u;
    w->opcode = 0xdeadbeefu;
    w->send_flags &= ~uint32_t(IBV_SEND_INLINE);
    uint64_t garbage_id = w->wr_id;
    s_.qp->sq.hdr()->prod.store(1, std::memory_order_release);
    s_.c->ring_doorbell();

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, garbage_id);
    // Both the opcode and num_sge (over the QP's max_send_sge) are invalid; which one the
    // device reports first is its choice, but it must be one of those local errors.
    EXPECT_TRUE(c.status == IBV_WC_LOC_LEN_ERR || c.status == IBV_WC_LOC_QP_OP_ERR)
        << "status " << c.status;
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, DoorbellPageNamingOtherSessionsObjectsOrGarbage) {
    // The receiver's session queues a zero-length RDMA WRITE but never rings. The sender's
    // doorbell page names the receiver's QP and CQs, QPNs and handles nobody has, and random
    // numbers: the device must act on none of them (emu/abi/doorbell.h).
    // First let the connection settle: a packet arriving for the QP (an ACK of the
    // connection's traffic) makes the device look at its send queue, which hardware may do too.
    std::this_thread::sleep_for(milliseconds(50));
    uint8_t* slot = r_.qp->sq.slot(0);
    abi::SendWqe w{};
    w.wr_id = 81;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    std::memcpy(slot, &w, sizeof w);
    r_.qp->sq.hdr()->prod.store(1, std::memory_order_release);
    abi::DoorbellPage* p = s_.c->doorbell_page();
    std::mt19937 rng(4242);
    abi::doorbell_push(p, r_.qp->qpn);
    abi::doorbell_push(p, r_.scq->handle | abi::kDoorbellCq);
    abi::doorbell_push(p, r_.rcq->handle | abi::kDoorbellCq);
    abi::doorbell_push(p, 0xffffffu);
    abi::doorbell_push(p, abi::kDoorbellCq | 0x7fffffffu);
    for (int i = 0; i < 100; ++i) abi::doorbell_push(p, rng() | 1);
    // A tail far ahead of the device: it reads at most one page of entries per wake-up.
    p->tail.store(p->tail.load() + 3 * abi::kDoorbellSlots);
    s_.c->wake();
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*r_.scq, &c, 200)) << "the receiver's WRITE ran: wr_id " << c.wr_id;
    // The receiver's own doorbell still works.
    r_.c->ring_doorbell();
    ASSERT_TRUE(poll_cq(*r_.scq, &c));
    EXPECT_EQ(c.wr_id, 81u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, GarbageOpcodeAndHugeInlineLength) {
    // A plausible SGE count but an opcode no verbs.h defines.
    uint8_t* slot = s_.qp->sq.slot(0);
    abi::SendWqe w{};
    w.wr_id = 71;
    w.opcode = 0xdeadbeefu;
    w.send_flags = IBV_SEND_SIGNALED;
    w.num_sge = 1;
    abi::Sge sge{addr_of(src_->data()), 16, skey_};
    std::memcpy(slot + sizeof w, &sge, sizeof sge);
    std::memcpy(slot, &w, sizeof w);
    // Then an inline WQE claiming more bytes than the slot can hold.
    slot = s_.qp->sq.slot(1);
    w.wr_id = 72;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    w.inline_len = 0x7fffffffu;
    std::memcpy(slot, &w, sizeof w);
    s_.qp->sq.hdr()->prod.store(2, std::memory_order_release);
    s_.c->ring_doorbell();

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 71u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_QP_OP_ERR));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 72u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    expect_receiver_untouched();
    expect_device_healthy();
}

// BIND_MW and LOCAL_INV WQEs naming windows, regions and ranges at random (the MwBind in
// the data area, emu/abi/rings.h, as garbage): the bind fails with IBV_WC_MW_BIND_ERR, the
// rest is flushed, and the device carries on.
TEST_F(RingAbuseTest, GarbageBindAndInvalidate) {
    std::mt19937_64 rng(777);
    uint8_t* slot = s_.qp->sq.slot(0);
    abi::SendWqe w{};
    w.wr_id = 81;
    w.opcode = IBV_WR_BIND_MW;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;  // inline means nothing to a bind
    w.num_sge = 0xfffffff0u;                             // nor does the SGE count
    w.inline_len = 0x7fffffffu;
    abi::MwBind b{uint32_t(rng()), uint32_t(rng()), skey_, uint32_t(rng()), rng(), rng()};
    std::memcpy(slot + sizeof w, &b, sizeof b);
    std::memcpy(slot, &w, sizeof w);
    slot = s_.qp->sq.slot(1);
    w = abi::SendWqe{};
    w.wr_id = 82;
    w.opcode = IBV_WR_LOCAL_INV;
    w.send_flags = IBV_SEND_SIGNALED;
    w.imm_data = uint32_t(rng()) | 0x80000000u;  // an R_Key that looks like a window's
    std::memcpy(slot, &w, sizeof w);
    s_.qp->sq.hdr()->prod.store(2, std::memory_order_release);
    s_.c->ring_doorbell();

    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 81u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_MW_BIND_ERR));
    EXPECT_EQ(c.opcode, uint32_t(IBV_WC_BIND_MW));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 82u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_TRUE(src_->guards_intact());
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, HugeInlineLengthFirst) {
    uint8_t* slot = s_.qp->sq.slot(0);
    abi::SendWqe w{};
    w.wr_id = 73;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    w.inline_len = 0xffffffffu;
    std::memcpy(slot, &w, sizeof w);
    s_.qp->sq.hdr()->prod.store(1, std::memory_order_release);
    s_.c->ring_doorbell();
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 73u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_LOC_LEN_ERR));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, ProducerFarBeyondConsumer) {
    r_.c->post_recv(*r_.qp, 1, {{addr_of(dst_->data()), 512, rkey_}});
    s_.qp->sq.hdr()->prod.store(0x80000000u, std::memory_order_release);
    s_.c->ring_doorbell();
    // More WQEs than the ring has slots cannot have been posted: the QP is broken, and the
    // application hears about it as a fatal QP error.
    abi::AsyncEvent ev{};
    ASSERT_TRUE(s_.c->async_event(&ev, 2000));
    EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_QP_FATAL));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    // No slot was executed: nothing went out, and no completion invented.
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 20)) << "send CQE wr_id " << c.wr_id;
    expect_receiver_untouched();
    expect_device_healthy();
}

TEST_F(RingAbuseTest, ProducerMovedBackwards) {
    // Keep WQEs outstanding: the peer never answers (it is destroyed), and the ACK timeout
    // is long. Then the application moves prod back between the device's oldest
    // outstanding WQE and the next one it would fetch.
    ASSERT_EQ(r_.c->destroy_qp(r_.qp->qpn), 0);
    for (uint64_t id = 1; id <= 4; ++id)
        s_.c->post_send(*s_.qp, id, {{addr_of(src_->data()), 64, skey_}});
    // Wait until the device has fetched and transmitted all four (they stay
    // unacknowledged: the ACK timeout of 67 ms is far off).
    auto deadline = steady_clock::now() + milliseconds(2000);
    while (qp_tx_pkts(*devs_[0], s_.qp->qpn) < 4 && steady_clock::now() < deadline)
        std::this_thread::sleep_for(milliseconds(1));
    ASSERT_EQ(qp_tx_pkts(*devs_[0], s_.qp->qpn), 4u);
    ASSERT_EQ(s_.qp->sq.hdr()->cons.load(), 0u);
    s_.qp->sq.hdr()->prod.store(2, std::memory_order_release);
    s_.c->ring_doorbell();
    abi::AsyncEvent ev{};
    ASSERT_TRUE(s_.c->async_event(&ev, 2000));
    EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_QP_FATAL));
    EXPECT_EQ(s_.c->qp_state(s_.qp->qpn), int(IBV_QPS_ERR));
    // Only the four WQEs really posted complete (flushed); the device must not have run
    // ahead through slots that were never posted, wrapping around the ring.
    abi::Cqe c{};
    for (uint64_t id = 1; id <= 4; ++id) {
        ASSERT_TRUE(poll_cq(*s_.scq, &c)) << id;
        EXPECT_EQ(c.wr_id, id);
        EXPECT_EQ(c.status, uint32_t(IBV_WC_WR_FLUSH_ERR));
    }
    EXPECT_FALSE(poll_cq(*s_.scq, &c, 20)) << "extra CQE wr_id " << c.wr_id;
    expect_device_healthy();
}

TEST_F(RingAbuseTest, GarbageReceiveWqes) {
    // Receive WQEs with an absurd SGE count and with a bad key: each incoming message
    // completes in error at the receiver without any byte written.
    uint8_t* slot = r_.qp->rq.slot(0);
    abi::RecvWqe rw{91, 0xffffffffu, 0};
    std::memcpy(slot, &rw, sizeof rw);
    r_.qp->rq.hdr()->prod.store(1, std::memory_order_release);
    s_.c->post_send(*s_.qp, 92, {{addr_of(src_->data()), 64, skey_}});
    abi::Cqe c{};
    ASSERT_TRUE(poll_cq(*r_.rcq, &c));
    EXPECT_EQ(c.wr_id, 91u);
    EXPECT_NE(c.status, uint32_t(IBV_WC_SUCCESS));
    ASSERT_TRUE(poll_cq(*s_.scq, &c));
    EXPECT_EQ(c.wr_id, 92u);
    EXPECT_NE(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(r_.c->qp_state(r_.qp->qpn), int(IBV_QPS_ERR));
    EXPECT_TRUE(dst_->guards_intact());
    for (size_t i = 0; i < dst_->len; ++i) ASSERT_EQ(dst_->data()[i], kGuard) << i;
    expect_device_healthy();
}

TEST_F(RingAbuseTest, CqOverrunRaisesCqError) {
    // A CQ the application never polls: the device must stop at the ring's end (not
    // overwrite unread CQEs) and say so with IBV_EVENT_CQ_ERR.
    Side x, y;
    ASSERT_NO_FATAL_FAILURE(make_side(x, *devs_[0], ip("127.0.0.2")));
    ASSERT_NO_FATAL_FAILURE(make_side(y, *devs_[0], ip("127.0.0.2")));
    std::unique_ptr<TestCq> tiny;
    ASSERT_EQ(x.c->create_cq(1, &tiny), 0);
    std::unique_ptr<TestQp> qp;
    ASSERT_EQ(x.c->create_qp(x.pd, tiny->handle, x.rcq->handle, small_cap(), &qp), 0);
    ASSERT_EQ(x.c->connect(*qp, y.qp->qpn, y.ip, Path{}), 0);
    ASSERT_EQ(y.c->connect(*y.qp, qp->qpn, x.ip, Path{}), 0);
    GuardedBuf src(8, 1), dst(8 * 8);
    uint32_t sk, rk;
    ASSERT_EQ(x.c->reg_mr(x.pd, src.base(), src.total(), 0, &sk), 0);
    ASSERT_EQ(y.c->reg_mr(y.pd, dst.base(), dst.total(), IBV_ACCESS_LOCAL_WRITE, &rk), 0);
    uint32_t slots = tiny->ring.mask() + 1;
    for (uint32_t i = 0; i <= slots; ++i) {
        y.c->post_recv(*y.qp, i, {{addr_of(dst.data() + 8 * i), 8, rk}});
        x.c->post_send(*qp, 100 + i, {{addr_of(src.data()), 8, sk}});
    }
    abi::AsyncEvent ev{};
    ASSERT_TRUE(x.c->async_event(&ev, 2000));
    EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_CQ_ERR));
    // The CQEs that fit are intact and in order.
    abi::Cqe c{};
    for (uint32_t i = 0; i < slots; ++i) {
        ASSERT_TRUE(poll_cq(*tiny, &c, 100)) << i;
        EXPECT_EQ(c.wr_id, 100u + i);
    }
    EXPECT_TRUE(dst.guards_intact());
    expect_device_healthy();
}

// ibv_device.dev_name's uverbs<N> (docs/system-view.md): uroce<N> keeps N; other names
// take the lowest numbers left, in name order, so the library and `uroce run` agree.
TEST(UverbsIndex, DefaultNamesKeepTheirNumberOthersTakeWhatIsLeft) {
    auto dev = [](const char* n) {
        abi::DeviceInfo d;
        d.name = n;
        return d;
    };
    std::vector<abi::DeviceInfo> running = {dev("uroce0"), dev("uroce2"), dev("zeta"), dev("alpha"),
                                            dev("uroce01")};
    EXPECT_EQ(abi::uverbs_index("uroce0", running), 0);
    EXPECT_EQ(abi::uverbs_index("uroce2", running), 2);
    EXPECT_EQ(abi::uverbs_index("alpha", running), 1);
    EXPECT_EQ(abi::uverbs_index("uroce01", running), 3);  // not a uroce<N> name
    EXPECT_EQ(abi::uverbs_index("zeta", running), 4);
    EXPECT_EQ(abi::uverbs_index("uroce7", {}), 7);
    EXPECT_EQ(abi::uverbs_index("mine", {}), 0);
}

// ---------------------------------------------------------------------------------------------
// XRC: a TGT QP outlives the SRQ serving the message in progress on it. The message's
// receive, CQ and memory belong to the SRQ's owner, whose session may be freed next; the rest
// of the message must not reach them (nor a new SRQ that took the number), and fails as any
// packet naming an SRQ the QP does not have: the TGT QP enters ERR and its holders get
// IBV_EVENT_QP_REQ_ERR. The packets come from a plain UDP socket, so the test decides when
// each one arrives.
class XrcSrqGoneTest : public ::testing::Test {
protected:
    static constexpr uint32_t kPsn = 0x100;
    static constexpr uint64_t kTgtCookie = 0x7a7a;
    static constexpr uint32_t kMtu = 1024;

    void SetUp() override {
        devs_ = start_devices(1);
        ASSERT_EQ(devs_.size(), 1u);
        Device& d = *devs_[0];
        std::snprintf(path_, sizeof path_, "/tmp/uroce-xrc-unit-XXXXXX");
        fd_ = mkstemp(path_);
        ASSERT_GE(fd_, 0);
        // A holds the TGT QP; B owns the XRC SRQ, its CQ and the memory.
        a_ = std::make_unique<Client>(d);
        b_ = std::make_unique<Client>(d);
        ASSERT_TRUE(a_->ok() && b_->ok());
        uint32_t xa, xb;
        ASSERT_EQ(a_->open_xrcd(fd_, O_CREAT, &xa), 0);
        ASSERT_EQ(b_->open_xrcd(fd_, 0, &xb), 0);
        ASSERT_EQ(a_->create_tgt(xa, kTgtCookie, &tgt_), 0);
        ASSERT_EQ(b_->alloc_pd(&pd_), 0);
        ASSERT_EQ(b_->create_cq(16, &cq_), 0);
        ASSERT_EQ(b_->reg_mr(pd_, dst_.base(), dst_.total(), IBV_ACCESS_LOCAL_WRITE, &lkey_), 0);
        ASSERT_EQ(b_->create_xrc_srq(pd_, xb, cq_->handle, &srqn_, &ring_), 0);
        Client::post_srq_recv(ring_, 1, {addr_of(dst_.data()), uint32_t(dst_.len), lkey_});
        xb_ = xb;
        // The TGT QP to RTS, its peer "127.0.0.3" (nothing answers there; its ACKs are lost).
        ibv_qp_attr at{};
        at.qp_state = IBV_QPS_INIT;
        at.port_num = 1;
        ASSERT_EQ(
            a_->modify_qp(tgt_, at,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
        at = {};
        at.qp_state = IBV_QPS_RTR;
        at.path_mtu = IBV_MTU_1024;
        at.dest_qp_num = 0x77;
        at.rq_psn = kPsn;
        at.ah_attr.is_global = 1;
        at.ah_attr.port_num = 1;
        at.ah_attr.grh.dgid.raw[10] = at.ah_attr.grh.dgid.raw[11] = 0xff;
        uint32_t peer = ip("127.0.0.3");
        std::memcpy(&at.ah_attr.grh.dgid.raw[12], &peer, 4);
        ASSERT_EQ(
            a_->modify_qp(tgt_, at,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
        at = {};
        at.qp_state = IBV_QPS_RTS;
        at.timeout = 14;
        at.sq_psn = 0x500;
        ASSERT_EQ(a_->modify_qp(tgt_, at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), 0);

        sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(sock_, 0);
        sockaddr_in me{};
        me.sin_family = AF_INET;
        me.sin_addr.s_addr = peer;
        ASSERT_EQ(bind(sock_, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
        socklen_t len = sizeof me;
        ASSERT_EQ(getsockname(sock_, reinterpret_cast<sockaddr*>(&me), &len), 0);
        sport_ = ntohs(me.sin_port);

        // The message's first packet lands in B's receive.
        send_packet(net::kXrcSendFirst, kPsn, 1);
        ASSERT_TRUE(landed(0, kMtu, 1)) << "the FIRST packet's payload did not arrive";
        EXPECT_EQ(ring_.hdr()->cons.load(), 1u) << "the receive was not taken";
    }
    void TearDown() override {
        if (sock_ >= 0) close(sock_);
        a_.reset();
        b_.reset();
        devs_.clear();
        if (fd_ >= 0) close(fd_);
        unlink(path_);
    }

    // One XRC SEND packet of kMtu bytes of pattern `seed` to the TGT QP, naming srqn_.
    void send_packet(uint8_t opcode, uint32_t psn, uint32_t seed) {
        net::Packet p{};
        p.bth.opcode = opcode;
        p.bth.pkey = net::kDefaultPkey;
        p.bth.dqpn = tgt_;
        p.bth.psn = psn;
        p.xrc.srqn = srqn_;
        uint8_t buf[net::kMaxHdrLen + kMtu + 4] = {};
        size_t hdr = net::encode_headers(p, buf);
        ASSERT_GT(hdr, 0u);
        auto data = pattern(kMtu, seed);
        std::memcpy(buf + hdr, data.data(), kMtu);
        size_t len = hdr + kMtu + 4;
        const DeviceConfig& cfg = devs_[0]->config();
        net::icrc_store(ip("127.0.0.3"), cfg.ipv4_be, sport_, cfg.port, buf, len);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = cfg.ipv4_be;
        to.sin_port = htons(cfg.port);
        ASSERT_EQ(sendto(sock_, buf, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                  ssize_t(len));
    }
    // Waits (up to 2 s) until dst_[off, off + n) holds pattern `seed`.
    bool landed(size_t off, size_t n, uint32_t seed) {
        auto want = pattern(n, seed);
        for (int i = 0; i < 200; ++i) {
            if (std::memcmp(dst_.data() + off, want.data(), n) == 0) return true;
            std::this_thread::sleep_for(milliseconds(10));
        }
        return false;
    }
    // The rest of the message arrives: refused, and nothing of it written anywhere.
    void expect_rest_refused(GuardedBuf* also_untouched = nullptr) {
        send_packet(net::kXrcSendMiddle, kPsn + 1, 2);
        abi::AsyncEvent ev{};
        ASSERT_TRUE(a_->async_event(&ev, 2000)) << "no event for the TGT QP's holder";
        EXPECT_EQ(ev.event_type, uint32_t(IBV_EVENT_QP_REQ_ERR));
        EXPECT_EQ(ev.cookie, kTgtCookie);
        EXPECT_EQ(a_->qp_state(tgt_), int(IBV_QPS_ERR));
        send_packet(net::kXrcSendLast, kPsn + 2, 3);  // an ERR QP drops it
        std::string dump;
        devs_[0]->call([&] { dump = devs_[0]->dump(); });
        EXPECT_NE(dump.find(" xrc_bad_srqn 1\n"), std::string::npos) << dump;
        for (size_t i = kMtu; i < dst_.len; ++i) ASSERT_EQ(dst_.data()[i], kGuard) << i;
        EXPECT_TRUE(dst_.guards_intact());
        if (also_untouched) {
            for (size_t i = 0; i < also_untouched->len; ++i)
                ASSERT_EQ(also_untouched->data()[i], kGuard) << i;
            EXPECT_TRUE(also_untouched->guards_intact());
        }
    }

    std::vector<std::unique_ptr<Device>> devs_;
    char path_[64] = {};
    int fd_ = -1, sock_ = -1;
    uint16_t sport_ = 0;
    std::unique_ptr<Client> a_, b_;
    uint32_t tgt_ = 0, pd_ = 0, lkey_ = 0, srqn_ = 0, xb_ = 0;
    std::unique_ptr<TestCq> cq_;
    MappedRing ring_;
    GuardedBuf dst_{3 * kMtu};
};

// B's process goes (its session closes) between the first and the middle packet: the SRQ,
// CQ and MR go with it, and so does the Session the TGT QP's message pointed at.
TEST_F(XrcSrqGoneTest, SrqOwnerClosesDuringAMessage) {
    b_.reset();
    expect_rest_refused();
}

// B destroys the SRQ and makes another, which takes the same number: the old message does
// not continue into the new SRQ's receive (nor the old one), and completes nothing.
TEST_F(XrcSrqGoneTest, SrqDestroyedAndItsNumberReusedDuringAMessage) {
    ASSERT_EQ(b_->destroy_srq(srqn_), 0);
    uint32_t again = 0;
    MappedRing ring2;
    ASSERT_EQ(b_->create_xrc_srq(pd_, xb_, cq_->handle, &again, &ring2), 0);
    EXPECT_EQ(again, srqn_) << "the number was not reused: the test checks less";
    GuardedBuf dst2(3 * kMtu);
    uint32_t lkey2 = 0;
    ASSERT_EQ(b_->reg_mr(pd_, dst2.base(), dst2.total(), IBV_ACCESS_LOCAL_WRITE, &lkey2), 0);
    Client::post_srq_recv(ring2, 2, {addr_of(dst2.data()), uint32_t(dst2.len), lkey2});
    expect_rest_refused(&dst2);
    EXPECT_EQ(ring2.hdr()->cons.load(), 0u) << "the new SRQ's receive was taken";
    abi::Cqe c{};
    EXPECT_FALSE(poll_cq(*cq_, &c, 50)) << "a completion for wr_id " << c.wr_id;
}

}  // namespace
}  // namespace uroce::emu
