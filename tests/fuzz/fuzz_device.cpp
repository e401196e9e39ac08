// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// libFuzzer target: the device's receive path (Wire::on_packet and the RC/UC responder and
// completer behind it), driven without a peer (docs/fuzzing.md).
//
// One Device runs for the whole fuzzing session on 127.0.0.1 (a free UDP port; nothing sends
// to it). For every input the target builds a fresh application session, as the verbs library
// would: a PD, two MRs, a CQ, and three QPs
//   qps[0]  RC in RTS, with a SEND, an RDMA READ (2 packets) and a FETCH_ADD outstanding
//           (PSNs 0, 1-2, 3), so ACKs, NAKs, read responses and atomic ACKs have work to match;
//   qps[1]  UC in RTS, with a SEND outstanding;
//   qps[2]  RC left in INIT (packets to it must be dropped);
// every QP with receives posted, RQ PSN 0, path MTU 1024, and its peer at 127.0.0.254 where
// nobody listens (what the device sends back goes nowhere). Then it feeds the input's
// packets to Wire::on_packet on the engine thread, exactly as the io_uring receive loop
// does, and closes the session (the device destroys everything, as when a process exits).
//
// Input: byte 0 = flags, then packets as [2-byte big-endian length][bytes], at most 64.
//   flags bit 0: store the correct ICRC (else the packet's own 4 last bytes stay)
//         bit 1: dqpn := qps[dqpn % 3] (else the raw 24-bit dqpn)
//         bit 2: RETH/AtomicETH rkey := MR key (rkey bit 0 picks the read-write MR or the
//                read-only one), va := that MR's base + va % its length
//         bit 3: the packets come from the QPs' peer address (else from 127.0.0.1)
// tests/fuzz/make_corpus.cpp writes seeds in this format for every opcode.
//
// Oracles besides the sanitizers: the device never writes outside the read-write MR (guard
// bytes around it and the whole read-only MR are checked after each input), and it stays
// able to run the next input (every control call succeeds).
#include <arpa/inet.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emu/abi/protocol.h"
#include "emu/abi/rings.h"
#include "emu/engine/device.h"
#include "net/byteorder.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/opcodes.h"
#include "tests/fuzz/fuzz_support.h"

using namespace uroce;

namespace {

constexpr size_t kGuard = 4096;
constexpr size_t kRwLen = 64 * 1024;
constexpr size_t kRoLen = 4096;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kRoByte = 0x5A;
constexpr size_t kMaxPackets = 64;
constexpr int kNumQps = 3;

[[noreturn]] void die(const char* what, int err) {
    std::fprintf(stderr, "fuzz_device: %s: %s\n", what, std::strerror(err));
    std::abort();
}

struct Ring {
    void* base = nullptr;
    size_t bytes = 0;
    uint32_t mask = 0;
    size_t stride = 0;
    void map(int fd, uint32_t slots, size_t st) {
        bytes = abi::ring_bytes(slots, st);
        base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (base == MAP_FAILED) die("mmap ring", errno);
        mask = slots - 1;
        stride = st;
    }
    ~Ring() {
        if (base && base != MAP_FAILED) munmap(base, bytes);
    }
    abi::RingHeader* hdr() const { return static_cast<abi::RingHeader*>(base); }
    uint8_t* slot(uint32_t i) const { return abi::ring_slot(base, stride, mask, i); }
};

emu::Device* g_dev = nullptr;
uint16_t g_port = 0;
const uint32_t kSelf = inet_addr("127.0.0.1");
const uint32_t kPeer = inet_addr("127.0.0.254");

// One application session with its objects, built for one input.
class World {
public:
    World() {
        std::memset(mem_, kGuardByte, kMemLen);
        std::memset(rw(), 0, kRwLen);
        std::memset(ro(), kRoByte, kRoLen);
        int fds[3] = {-1, -1, -1};
        int err = 0;
        g_dev->call([&] { s_ = g_dev->open_session(getpid(), fds, &err); });
        if (!s_) die("open_session", err);
        doorbell_ = fds[0];
        async_ = fds[1];
        close(fds[2]);  // the doorbell page: these inputs never ring

        abi::Request req{};
        abi::Response resp{};
        req.op = abi::Op::kAllocPd;
        must(req, &resp, "alloc_pd");
        pd_ = resp.u.pd.pd;
        rw_key_ = reg_mr(rw(), kRwLen,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC);
        ro_key_ = reg_mr(ro(), kRoLen, IBV_ACCESS_REMOTE_READ);

        req = {};
        req.op = abi::Op::kCreateCq;
        req.u.create_cq.cqe = 256;
        req.u.create_cq.channel = -1;
        std::vector<int> cfds;
        must(req, &resp, "create_cq", &cfds);
        if (cfds.size() != 1) die("create_cq fds", EPROTO);
        cq_ = resp.u.create_cq.handle;
        cq_ring_.map(cfds[0], resp.u.create_cq.slots, sizeof(abi::Cqe));

        create_qp(0, IBV_QPT_RC);
        create_qp(1, IBV_QPT_UC);
        create_qp(2, IBV_QPT_RC);
        for (int i = 0; i < kNumQps; ++i)
            for (uint32_t k = 0; k < 8; ++k) post_recv(i, k, rw() + (i * 8 + k) * 1024, 1024);

        to_init(0);
        to_rtr(0, true);
        post_send(0, IBV_WR_SEND, 64, 0);
        post_send(0, IBV_WR_RDMA_READ, 2048, 0x1000);
        post_send(0, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 0x2000);
        to_rts(0, true);
        to_init(1);
        to_rtr(1, false);
        post_send(1, IBV_WR_SEND, 64, 0);
        to_rts(1, false);
        to_init(2);
        // The requesters send on the engine's next loop turn, the RC QP's first (it entered
        // RTS first). The UC SEND completes as soon as it is sent: once its CQE is there, every
        // posted request is on the wire, and every run of an input starts from that state.
        auto start = std::chrono::steady_clock::now();
        while (cq_ring_.hdr()->prod.load(std::memory_order_acquire) == 0) {
            if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
                die("the UC SEND did not complete", ETIMEDOUT);
            sched_yield();
        }
    }

    ~World() {
        g_dev->call([&] { g_dev->close_session(s_); });
        close(doorbell_);
        close(async_);
        // The device owns nothing of ours any more: it must not have touched the guard
        // bytes around the read-write MR, nor anything of the read-only one.
        static const std::vector<uint8_t> guard(kGuard, kGuardByte), ro_fill(kRoLen, kRoByte);
        const std::pair<const uint8_t*, const std::vector<uint8_t>*> untouched[] = {
            {mem_, &guard}, {rw() + kRwLen, &guard}, {ro(), &ro_fill}, {ro() + kRoLen, &guard}};
        for (const auto& [at, want] : untouched) {
            if (std::memcmp(at, want->data(), want->size()) != 0) {
                std::fprintf(stderr, "fuzz_device: memory outside the writable MR changed\n");
                __builtin_trap();
            }
        }
    }

    uint32_t qpn(int i) const { return qpn_[i]; }
    uint32_t rw_key() const { return rw_key_; }
    uint32_t ro_key() const { return ro_key_; }
    uint64_t rw_addr() { return reinterpret_cast<uint64_t>(rw()); }
    uint64_t ro_addr() { return reinterpret_cast<uint64_t>(ro()); }

private:
    uint8_t* rw() { return mem_ + kGuard; }
    uint8_t* ro() { return mem_ + 2 * kGuard + kRwLen; }

    int request(const abi::Request& req, abi::Response* resp, std::vector<int>* fds = nullptr) {
        std::vector<int> local;
        std::vector<int>& out = fds ? *fds : local;
        *resp = abi::Response{};
        g_dev->call([&] { g_dev->handle(*s_, req, *resp, out); });
        for (int fd : local) close(fd);
        return resp->err;
    }
    void must(const abi::Request& req, abi::Response* resp, const char* what,
              std::vector<int>* fds = nullptr) {
        if (int e = request(req, resp, fds)) die(what, e);
    }

    uint32_t reg_mr(uint8_t* addr, size_t len, uint32_t access) {
        abi::Request req{};
        req.op = abi::Op::kRegMr;
        req.u.reg_mr.pd = pd_;
        req.u.reg_mr.access = access;
        req.u.reg_mr.addr = reinterpret_cast<uint64_t>(addr);
        req.u.reg_mr.length = len;
        req.u.reg_mr.iova = reinterpret_cast<uint64_t>(addr);
        abi::Response resp;
        must(req, &resp, "reg_mr");
        return resp.u.reg_mr.rkey;
    }

    void create_qp(int i, ibv_qp_type type) {
        abi::Request req{};
        req.op = abi::Op::kCreateQp;
        req.u.create_qp = {
            .pd = pd_,
            .send_cq = cq_,
            .recv_cq = cq_,
            .qp_type = uint32_t(type),
            .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2}};
        abi::Response resp;
        std::vector<int> fds;
        must(req, &resp, "create_qp", &fds);
        if (fds.size() != 2) die("create_qp fds", EPROTO);
        const auto& o = resp.u.create_qp;
        qpn_[i] = o.qpn;
        sq_[i].map(fds[0], o.sq_slots, o.sq_stride);
        rq_[i].map(fds[1], o.rq_slots, o.rq_stride);
    }

    void modify(int i, const ibv_qp_attr& a, uint64_t mask, const char* what) {
        abi::Request req{};
        req.op = abi::Op::kModifyQp;
        req.u.modify_qp.qpn = qpn_[i];
        req.u.modify_qp.mask = mask;
        req.u.modify_qp.attr = a;
        abi::Response resp;
        must(req, &resp, what);
    }
    void to_init(int i) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags =
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        modify(i, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
               "modify INIT");
    }
    void to_rtr(int i, bool rc) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = 0x77;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 1;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.grh.dgid.raw[10] = 0xff;
        a.ah_attr.grh.dgid.raw[11] = 0xff;
        std::memcpy(&a.ah_attr.grh.dgid.raw[12], &kPeer, 4);
        uint64_t mask =
            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (rc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        modify(i, a, mask, "modify RTR");
    }
    void to_rts(int i, bool rc) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;  // 67 ms: an input never runs that long
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = 0;
        a.max_rd_atomic = 4;
        uint64_t mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (rc)
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        modify(i, a, mask, "modify RTS");
    }

    // WQEs are written before the QP reaches RTS and without a doorbell: the device fetches
    // them when the QP enters RTS.
    void post_send(int i, uint32_t opcode, uint32_t len, size_t remote_off) {
        abi::RingHeader* h = sq_[i].hdr();
        uint32_t prod = h->prod.load(std::memory_order_relaxed);
        uint8_t* slot = sq_[i].slot(prod);
        abi::SendWqe w{};
        w.wr_id = prod;
        w.opcode = opcode;
        w.send_flags = IBV_SEND_SIGNALED;
        w.num_sge = 1;
        w.rkey = rw_key_;
        w.remote_addr = rw_addr() + 0x8000 + remote_off;
        w.compare_add = 1;
        abi::Sge sge{rw_addr() + 0xc000 + remote_off, len, rw_key_};
        std::memcpy(slot + sizeof w, &sge, sizeof sge);
        std::memcpy(slot, &w, sizeof w);
        h->prod.store(prod + 1, std::memory_order_release);
    }
    void post_recv(int i, uint64_t wr_id, uint8_t* addr, uint32_t len) {
        abi::RingHeader* h = rq_[i].hdr();
        uint32_t prod = h->prod.load(std::memory_order_relaxed);
        uint8_t* slot = rq_[i].slot(prod);
        abi::RecvWqe r{wr_id, 1, 0};
        abi::Sge sge{reinterpret_cast<uint64_t>(addr), len, rw_key_};
        std::memcpy(slot, &r, sizeof r);
        std::memcpy(slot + sizeof r, &sge, sizeof sge);
        h->prod.store(prod + 1, std::memory_order_release);
    }

    // guard | read-write MR | guard | read-only MR | guard. One heap block for the whole run
    // (ASan's redzones still border it); refilled for every input.
    static constexpr size_t kMemLen = kGuard + kRwLen + kGuard + kRoLen + kGuard;
    static inline uint8_t* const mem_ = new uint8_t[kMemLen];
    emu::Session* s_ = nullptr;
    int doorbell_ = -1, async_ = -1;
    uint32_t pd_ = 0, cq_ = 0, rw_key_ = 0, ro_key_ = 0;
    uint32_t qpn_[kNumQps] = {};
    Ring sq_[kNumQps], rq_[kNumQps];
    Ring cq_ring_;
};

// Rewrites the fields the flags ask for (see the top of the file).
void fix_up(uint8_t flags, World& w, std::vector<uint8_t>& pkt, const sockaddr_in& from) {
    if (pkt.size() < net::kBthLen) return;
    const net::OpInfo* op = net::op_info(pkt[0]);
    if (flags & 2) net::store_be24(&pkt[5], w.qpn(int(net::load_be24(&pkt[5]) % kNumQps)));
    if ((flags & 4) && op && pkt.size() >= op->hdr_len) {
        size_t off = net::kBthLen;
        if (op->hdrs & net::kDETH) off += net::kDethLen;
        if (op->hdrs & net::kXRCETH) off += net::kXrcethLen;
        if (op->hdrs & (net::kRETH | net::kAtomicETH)) {
            bool ro = net::load_be32(&pkt[off + 8]) & 1;
            uint64_t base = ro ? w.ro_addr() : w.rw_addr();
            uint64_t len = ro ? kRoLen : kRwLen;
            net::store_be64(&pkt[off], base + net::load_be64(&pkt[off]) % len);
            net::store_be32(&pkt[off + 8], ro ? w.ro_key() : w.rw_key());
        }
    }
    if ((flags & 1) && pkt.size() >= net::kBthLen + net::kIcrcLen)
        net::icrc_store(from.sin_addr.s_addr, kSelf, ntohs(from.sin_port), g_port, pkt.data(),
                        pkt.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    emu::DeviceConfig cfg;
    cfg.name = "fuzz0";
    cfg.ipv4_be = kSelf;
    g_dev = fuzz::start_on_free_port(cfg, 47000, 48000, [](emu::Device& d) { return d.start(); });
    if (!g_dev) die("no free UDP port in 47000..47999", EADDRINUSE);
    g_port = g_dev->config().port;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
    if (len < 1) return 0;
    const uint8_t flags = data[0];
    std::vector<std::vector<uint8_t>> pkts;
    size_t at = 1;
    while (at + 2 <= len && pkts.size() < kMaxPackets) {
        size_t n = net::load_be16(data + at);
        at += 2;
        n = std::min({n, len - at, size_t(net::UdpUring::kBufSize)});
        pkts.emplace_back(data + at, data + at + n);  // exact size: ASan sees any overread
        at += n;
    }

    World w;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = (flags & 8) ? kPeer : kSelf;
    from.sin_port = htons(g_port);
    for (auto& p : pkts) fix_up(flags, w, p, from);
    // On the engine thread, as the receive loop calls it.
    uint8_t none = 0;  // a zero-length datagram still has a buffer
    g_dev->call([&] {
        for (auto& p : pkts)
            g_dev->wire().on_packet(from, g_dev->config().endpoint(), p.empty() ? &none : p.data(),
                                    p.size(), 0);
    });
    return 0;
}
