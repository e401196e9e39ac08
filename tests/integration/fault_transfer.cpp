// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC under injected faults (docs/faults.md), through the public verbs API: built against
// the system's <infiniband/verbs.h> and run over the drop-in libibverbs, with one RC QP on
// each of two devices (one process, two contexts).
//
// usage: fault_transfer DEV_A DEV_B transfer [--mib N] [--atomics N] [--mtu 1024|4096]
//                [--timeout T] [--max-msg BYTES] [--phases wrsa]
//            RDMA WRITE, RDMA READ and SEND of N MiB each from A to B (patterned data, every
//            byte checked, destination guard bytes too), then N FETCH_AND_ADD(1) from A on a
//            counter at B: each must return exactly its predecessor count, the counter must
//            end at exactly N.
//        fault_transfer DEV_A DEV_B retry [--timeout T --retry R]...
//            B's QP is destroyed; A's SEND must complete with IBV_WC_RETRY_EXC_ERR after
//            max(4.096 us * 2^T, 1 ms) * (R + 1), within a factor of 2, and A's QP is in ERR.
//        fault_transfer DEV_A DEV_B rnr
//            B posts no receive: with rnr_retry 1 A's SEND completes with
//            IBV_WC_RNR_RETRY_EXC_ERR; with rnr_retry 7 it waits until B posts one.
// QP attributes: timeout 14 (67 ms; --timeout T), retry_cnt 7, rnr_retry 7, max_rd_atomic
// and max_dest_rd_atomic 16, path MTU 4096 unless told.
// Exits 0 when every check holds; otherwise prints each mismatch and exits 1.
#include <infiniband/verbs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "verbs_checks.h"
#include "verbs_objects.h"

namespace {

// Before giving up, show the devices' state while our QPs still exist (the script sets
// FAULT_TRANSFER_ON_FAIL to `uroce res`).
void on_fatal() {
    if (const char* cmd = getenv("FAULT_TRANSFER_ON_FAIL")) {
        std::fflush(stdout);
        if (std::system(cmd) != 0) std::fprintf(stderr, "%s failed\n", cmd);
    }
}

using Clock = std::chrono::steady_clock;
double secs_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr size_t kChunk = 1 << 20;  // largest message (buffer area per message)
size_t g_max_msg = kChunk;          // --max-msg
constexpr uint32_t kWindow = 16;    // messages in flight (and buffer areas per side)
constexpr uint32_t kAtomicDepth = 16;
constexpr size_t kGuard = 64;  // poisoned bytes after each destination
constexpr uint8_t kPoison = 0xE7;
constexpr int kStallSeconds = 30;  // no completion for this long: the transport hangs

// The bytes of message `id`: a keyed stream, so a message landing in the wrong place, a
// stale retransmission or a shifted offset all show.
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
void fill(uint8_t* p, size_t len, uint64_t id) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = mix(id * 0x100000000ull + i / 8);
        std::memcpy(p + i, &v, 8);
    }
    if (i < len) {
        uint64_t v = mix(id * 0x100000000ull + i / 8);
        std::memcpy(p + i, &v, len - i);
    }
}
// Offset of the first wrong byte, or -1.
long verify(const uint8_t* p, size_t len, uint64_t id) {
    uint8_t want[4096];
    for (size_t off = 0; off < len; off += sizeof want) {
        size_t n = std::min(sizeof want, len - off);
        // fill() of a block at a multiple of 8 continues the stream: regenerate in place.
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t v = mix(id * 0x100000000ull + (off + i) / 8);
            std::memcpy(want + i, &v, 8);
        }
        if (i < n) {
            uint64_t v = mix(id * 0x100000000ull + (off + i) / 8);
            std::memcpy(want + i, &v, n - i);
        }
        if (std::memcmp(p + off, want, n) != 0)
            for (size_t k = 0; k < n; ++k)
                if (p[off + k] != want[k]) return long(off + k);
    }
    return -1;
}
long guard_broken(const uint8_t* p) {
    for (size_t k = 0; k < kGuard; ++k)
        if (p[k] != kPoison) return long(k);
    return -1;
}

struct Side {
    const char* name = nullptr;
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_mr* mr = nullptr;
    ibv_gid gid{};
    uint8_t* buf = nullptr;  // kWindow areas of kChunk + kGuard, then the atomic words
    size_t len = 0;
    uint8_t* area(uint32_t i) const { return buf + size_t(i % kWindow) * (kChunk + kGuard); }
    uint64_t* atomic_words() const {
        return reinterpret_cast<uint64_t*>(buf + size_t(kWindow) * (kChunk + kGuard));
    }
};

struct QpParams {
    // 67 ms: a QP survives 0.5 s of silence from its peer. With 8 (1 ms, 8.4 ms of silence
    // before IBV_WC_RETRY_EXC_ERR) a QP dies whenever the peer device gets no CPU for 8 ms,
    // which happens all the time on a 2-core host running other tests; 12 (134 ms) still
    // failed about one run in eight (docs/faults.md).
    uint8_t timeout = 14;
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 1;  // 0.01 ms
    ibv_mtu mtu = IBV_MTU_4096;
};

void open_side(Side& s, const char* name) {
    s.name = name;
    s.ctx = open_by_name(name);
    REQUIRE(ibv_query_gid(s.ctx, 1, 0, &s.gid) == 0, "%s: query_gid", name);
    s.pd = ibv_alloc_pd(s.ctx);
    REQUIRE(s.pd, "%s: alloc_pd: %s", name, std::strerror(errno));
    s.len = size_t(kWindow) * (kChunk + kGuard) + 4096;
    s.len = (s.len + 4095) / 4096 * 4096;  // aligned_alloc wants a multiple of the alignment
    s.buf = static_cast<uint8_t*>(std::aligned_alloc(4096, s.len));
    REQUIRE(s.buf, "aligned_alloc");
    std::memset(s.buf, kPoison, s.len);
    s.mr = ibv_reg_mr(s.pd, s.buf, s.len,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC);
    REQUIRE(s.mr, "%s: reg_mr: %s", name, std::strerror(errno));
}

void create_qp(Side& s) {
    s.cq = ibv_create_cq(s.ctx, 4 * kWindow + 64, nullptr, nullptr, 0);
    REQUIRE(s.cq, "%s: create_cq: %s", s.name, std::strerror(errno));
    ibv_qp_init_attr ia = verbs_objects::qp_init_attr(s.cq, IBV_QPT_RC, 2 * kWindow, 1);
    s.qp = ibv_create_qp(s.pd, &ia);
    REQUIRE(s.qp, "%s: create_qp: %s", s.name, std::strerror(errno));
}

void connect_qp(Side& s, const Side& peer, const QpParams& p) {
    uroce::verbs_util::PathAttrs path;
    path.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    path.mtu = p.mtu;
    path.timeout = p.timeout;
    path.retry_cnt = p.retry_cnt;
    path.rnr_retry = p.rnr_retry;
    path.min_rnr_timer = p.min_rnr_timer;
    path.max_rd_atomic = path.max_dest_rd_atomic = kAtomicDepth;
    // PSNs wrap past 2^24 during the run.
    rc_to_rts(s.qp, peer.gid, peer.qp->qp_num, 0xfff000, path, s.name);
}

void connect_pair(Side& a, Side& b, const QpParams& pa, const QpParams& pb) {
    create_qp(a);
    create_qp(b);
    connect_qp(a, b, pa);
    connect_qp(b, a, pb);
}

void destroy_qp(Side& s) {
    if (s.qp) CHECK(ibv_destroy_qp(s.qp) == 0, "%s: destroy_qp", s.name);
    if (s.cq) CHECK(ibv_destroy_cq(s.cq) == 0, "%s: destroy_cq", s.name);
    s.qp = nullptr;
    s.cq = nullptr;
}

// Next completion of `cq`; a run of empty polls sleeps a little so the devices get the CPU
// (two devices and this process share two cores).
bool next_wc(ibv_cq* cq, ibv_wc* wc, double timeout_s = kStallSeconds) {
    auto start = Clock::now();
    for (uint32_t empty = 0;; ++empty) {
        int n = ibv_poll_cq(cq, 1, wc);
        REQUIRE(n >= 0, "ibv_poll_cq: %d", n);
        if (n == 1) return true;
        if (empty > 64) {
            timespec ts{0, 20000};
            nanosleep(&ts, nullptr);
            if ((empty & 63) == 0 && secs_since(start) > timeout_s) return false;
        }
    }
}

// A poll that must succeed with `op` for wr_id `id`.
void expect_wc(Side& s, uint64_t id, ibv_wc_opcode op, const char* what) {
    ibv_wc wc{};
    REQUIRE(next_wc(s.cq, &wc), "%s: %s %llu: no completion for %d s (the transport hangs)", s.name,
            what, (unsigned long long)id, kStallSeconds);
    REQUIRE(wc.status == IBV_WC_SUCCESS, "%s: %s %llu completed with %s (wr_id %llu)", s.name, what,
            (unsigned long long)id, ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
    REQUIRE(wc.wr_id == id, "%s: %s: completion for wr_id %llu, want %llu (out of order)", s.name,
            what, (unsigned long long)wc.wr_id, (unsigned long long)id);
    REQUIRE(wc.opcode == op, "%s: %s %llu: opcode %d, want %d", s.name, what,
            (unsigned long long)id, int(wc.opcode), int(op));
}

// Message sizes: mostly g_max_msg, every 8th an odd size (1 byte .. g_max_msg) so that short
// messages, partial last packets and single-packet messages are in the mix.
std::vector<uint32_t> message_sizes(uint64_t total, uint64_t seed) {
    std::vector<uint32_t> out;
    for (uint64_t sent = 0, i = 0; sent < total; ++i) {
        uint64_t n = i % 8 == 7 ? 1 + mix(seed + i) % g_max_msg : g_max_msg;
        n = std::min<uint64_t>(n, total - sent);
        out.push_back(uint32_t(n));
        sent += n;
    }
    return out;
}

// Posts `op`, signaled, as wr_id `id` from `len` bytes at `local` in A's MR; `remote` is the
// remote part (RDMA, atomic) where the operation has one.
void post_send(Side& a, uint64_t id, ibv_wr_opcode op, void* local, uint32_t len,
               decltype(ibv_send_wr::wr) remote = {}, const char* what = "post_send") {
    ibv_sge sge{reinterpret_cast<uintptr_t>(local), len, a.mr->lkey};
    ibv_send_wr wr = verbs_objects::send_wr(id, op, &sge);
    wr.wr = remote;
    ibv_send_wr* bad = nullptr;
    int e = ibv_post_send(a.qp, &wr, &bad);
    REQUIRE(e == 0, "%s: %s: %s", a.name, what, std::strerror(e));
}

// A receive of wr_id `id` into `len` bytes at `p` in B's MR.
void post_recv(Side& b, uint64_t id, void* p, uint32_t len) {
    ibv_sge rs{reinterpret_cast<uintptr_t>(p), len, b.mr->lkey};
    ibv_recv_wr rw = verbs_objects::recv_wr(id, &rs);
    ibv_recv_wr* rbad = nullptr;
    int e = ibv_post_recv(b.qp, &rw, &rbad);
    REQUIRE(e == 0, "%s: post_recv: %s", b.name, std::strerror(e));
}

void post_rdma(Side& a, const Side& b, uint64_t id, ibv_wr_opcode op, uint32_t len) {
    ibv_send_wr wr{};
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.area(uint32_t(id)));
    wr.wr.rdma.rkey = b.mr->rkey;
    post_send(a, id, op, a.area(uint32_t(id)), len, wr.wr);
}

// RDMA WRITE (A's data lands in B) or RDMA READ (B's data lands in A).
void rdma_phase(Side& a, Side& b, ibv_wr_opcode op, uint64_t total, uint64_t seed) {
    bool read = op == IBV_WR_RDMA_READ;
    const char* what = read ? "RDMA READ" : "RDMA WRITE";
    Side& src = read ? b : a;
    Side& dst = read ? a : b;
    auto sizes = message_sizes(total, seed);
    auto start = Clock::now();
    uint64_t posted = 0, done = 0, bytes = 0;
    auto post = [&](uint64_t id) {
        uint32_t len = sizes[id];
        fill(src.area(uint32_t(id)), len, seed + id);
        std::memset(dst.area(uint32_t(id)), kPoison, len + kGuard);
        post_rdma(a, b, id, op, len);
    };
    while (posted < sizes.size() && posted < kWindow) post(posted++);
    while (done < sizes.size()) {
        expect_wc(a, done, read ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, what);
        uint32_t len = sizes[done];
        const uint8_t* got = dst.area(uint32_t(done));
        long bad = verify(got, len, seed + done);
        REQUIRE(bad < 0, "%s %llu (%u bytes): byte %ld is 0x%02x, want the pattern", what,
                (unsigned long long)done, len, bad, got[bad]);
        long g = guard_broken(got + len);
        REQUIRE(g < 0, "%s %llu (%u bytes): %ld bytes past the end were written", what,
                (unsigned long long)done, len, g);
        bytes += len;
        ++done;
        if (posted < sizes.size()) post(posted++);
    }
    double t = secs_since(start);
    std::printf("%-10s %8.1f MiB in %4zu messages: %6.2f s, %7.1f MiB/s\n", what,
                double(bytes) / (1 << 20), sizes.size(), t, double(bytes) / (1 << 20) / t);
}

// SEND from A into receives posted at B, which complete in order with the right length.
void send_phase(Side& a, Side& b, uint64_t total, uint64_t seed) {
    auto sizes = message_sizes(total, seed);
    auto start = Clock::now();
    uint64_t posted = 0, sent_done = 0, recv_done = 0, bytes = 0;
    auto post = [&](uint64_t id) {
        uint32_t len = sizes[id];
        uint8_t* dst = b.area(uint32_t(id));
        std::memset(dst, kPoison, kChunk + kGuard);
        post_recv(b, id, dst, uint32_t(kChunk));
        uint8_t* src = a.area(uint32_t(id));
        fill(src, len, seed + id);
        post_send(a, id, IBV_WR_SEND, src, len);
    };
    while (posted < sizes.size() && posted < kWindow) post(posted++);
    auto progress = Clock::now();
    while (recv_done < sizes.size() || sent_done < sizes.size()) {
        ibv_wc wc{};
        bool got_any = false;
        for (int side = 0; side < 2; ++side) {
            Side& s = side ? b : a;
            int n = ibv_poll_cq(s.cq, 1, &wc);
            REQUIRE(n >= 0, "poll_cq");
            if (!n) continue;
            got_any = true;
            uint64_t& next = side ? recv_done : sent_done;
            const char* what = side ? "SEND (receive side)" : "SEND";
            REQUIRE(wc.status == IBV_WC_SUCCESS, "%s %llu: %s", what, (unsigned long long)next,
                    ibv_wc_status_str(wc.status));
            REQUIRE(wc.wr_id == next, "%s: completion for wr_id %llu, want %llu", what,
                    (unsigned long long)wc.wr_id, (unsigned long long)next);
            REQUIRE(wc.opcode == (side ? IBV_WC_RECV : IBV_WC_SEND), "%s: opcode %d", what,
                    int(wc.opcode));
            if (side) {
                uint32_t len = sizes[next];
                REQUIRE(wc.byte_len == len, "receive %llu: byte_len %u, want %u",
                        (unsigned long long)next, wc.byte_len, len);
                const uint8_t* got = b.area(uint32_t(next));
                long bad = verify(got, len, seed + next);
                REQUIRE(bad < 0, "SEND %llu (%u bytes): byte %ld is 0x%02x, want the pattern",
                        (unsigned long long)next, len, bad, got[bad]);
                // The bytes of the receive buffer past the message stay untouched.
                long g = guard_broken(got + len);
                REQUIRE(g < 0, "SEND %llu (%u bytes): byte %ld past the end was written",
                        (unsigned long long)next, len, g);
                bytes += len;
            }
            ++next;
        }
        // A buffer area is reused once both its send and its receive have completed.
        while (posted < sizes.size() && posted < std::min(sent_done, recv_done) + kWindow)
            post(posted++);
        if (got_any) {
            progress = Clock::now();
        } else {
            timespec ts{0, 20000};
            nanosleep(&ts, nullptr);
            REQUIRE(secs_since(progress) < kStallSeconds,
                    "SEND: no completion for %d s after %llu sent, %llu received (the transport "
                    "hangs)",
                    kStallSeconds, (unsigned long long)sent_done, (unsigned long long)recv_done);
        }
    }
    double t = secs_since(start);
    std::printf("%-10s %8.1f MiB in %4zu messages: %6.2f s, %7.1f MiB/s\n", "SEND",
                double(bytes) / (1 << 20), sizes.size(), t, double(bytes) / (1 << 20) / t);
}

// N FETCH_AND_ADD(1) on one counter at B, kAtomicDepth in flight: the i-th must fetch i
// (executed exactly once each, in order), and the counter ends at N.
void atomic_phase(Side& a, Side& b, uint64_t n) {
    uint64_t* counter = b.atomic_words();
    *counter = 0;
    uint64_t* results = a.atomic_words();  // one per in-flight slot
    auto start = Clock::now();
    uint64_t posted = 0, done = 0;
    auto post = [&](uint64_t id) {
        uint64_t* res = results + id % kAtomicDepth;
        *res = ~uint64_t(0);
        ibv_send_wr wr{};
        wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(counter);
        wr.wr.atomic.rkey = b.mr->rkey;
        wr.wr.atomic.compare_add = 1;
        post_send(a, id, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, wr.wr, "post_send atomic");
    };
    while (posted < n && posted < kAtomicDepth) post(posted++);
    while (done < n) {
        expect_wc(a, done, IBV_WC_FETCH_ADD, "FETCH_AND_ADD");
        uint64_t got = results[done % kAtomicDepth];
        REQUIRE(got == done, "FETCH_AND_ADD %llu fetched %llu, want %llu (executed %s)",
                (unsigned long long)done, (unsigned long long)got, (unsigned long long)done,
                got > done ? "twice" : "out of order or not at all");
        ++done;
        if (posted < n) post(posted++);
    }
    double t = secs_since(start);
    CHECK(*counter == n, "the counter is %llu after %llu FETCH_AND_ADD, want %llu",
          (unsigned long long)*counter, (unsigned long long)n, (unsigned long long)n);
    std::printf("%-10s %8llu operations: %6.2f s, %7.0f ops/s; counter %llu\n", "ATOMIC",
                (unsigned long long)n, t, double(n) / t, (unsigned long long)*counter);
}

int qp_state(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init)) return -1;
    return int(attr.qp_state);
}

void post_send_small(Side& a, uint64_t id) { post_send(a, id, IBV_WR_SEND, a.area(0), 64); }

// The peer's QP is gone: every transmission is dropped by its device without an answer.
// Returns false when the completion came too late, which on a busy host can be scheduling
// noise (the device thread not run for milliseconds); the caller measures again then.
// Too early, a wrong status or a wrong QP state are failures at once.
bool retry_once(Side& a, Side& b, uint8_t timeout, uint8_t retry, bool last) {
    QpParams pa;
    pa.timeout = timeout;
    pa.retry_cnt = retry;
    connect_pair(a, b, pa, QpParams{});
    destroy_qp(b);
    double per_try = std::max(4.096e-6 * std::ldexp(1.0, timeout), 1e-3);
    double want = per_try * (retry + 1);
    auto start = Clock::now();
    post_send_small(a, 1);
    post_send_small(a, 2);
    ibv_wc wc{};
    bool got = next_wc(a.cq, &wc, want * 4 + 5);
    double t = secs_since(start);
    bool ok = true;
    CHECK(got, "timeout %u retry_cnt %u: no completion within %.1f s", timeout, retry,
          want * 4 + 5);
    if (got) {
        CHECK(wc.status == IBV_WC_RETRY_EXC_ERR && wc.wr_id == 1,
              "timeout %u retry_cnt %u: wr_id %llu completed with %s, want wr 1 with "
              "IBV_WC_RETRY_EXC_ERR",
              timeout, retry, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
        CHECK(t >= want / 2,
              "timeout %u retry_cnt %u: RETRY_EXC_ERR after %.1f ms, want %.1f ms (x0.5..x2)",
              timeout, retry, t * 1e3, want * 1e3);
        // x2, plus 10 ms for a host too busy to run the device thread on time: that
        // slack only matters for the short timeouts (8/7, 1/2), where one missed
        // scheduler tick is already a factor of two.
        if (t > std::max(want * 2, want + 0.010)) {
            CHECK(!last,
                  "timeout %u retry_cnt %u: RETRY_EXC_ERR after %.1f ms, want %.1f ms (x0.5..x2, "
                  "+10 ms)",
                  timeout, retry, t * 1e3, want * 1e3);
            ok = false;
        }
        std::printf("retry: timeout %2u retry_cnt %u: %s after %7.1f ms (expected %7.1f ms)\n",
                    timeout, retry, ibv_wc_status_str(wc.status), t * 1e3, want * 1e3);
        ibv_wc wc2{};
        CHECK(next_wc(a.cq, &wc2, 5) && wc2.wr_id == 2 && wc2.status == IBV_WC_WR_FLUSH_ERR,
              "the WR behind it: wr_id %llu %s, want 2 IBV_WC_WR_FLUSH_ERR",
              (unsigned long long)wc2.wr_id, ibv_wc_status_str(wc2.status));
        CHECK(qp_state(a.qp) == IBV_QPS_ERR, "the QP is in state %d, want ERR", qp_state(a.qp));
    }
    destroy_qp(a);
    return ok;
}

void retry_case(Side& a, Side& b, uint8_t timeout, uint8_t retry) {
    constexpr int kTries = 3;
    for (int i = 1; i <= kTries; ++i) {
        if (retry_once(a, b, timeout, retry, i == kTries)) return;
        std::printf("retry: too late, likely a busy host: measuring again (%d of %d)\n", i + 1,
                    kTries);
    }
}

// B has no receive posted.
void rnr_case(Side& a, Side& b) {
    QpParams pa, pb;
    pa.rnr_retry = 1;
    pb.min_rnr_timer = 14;  // 1.28 ms
    connect_pair(a, b, pa, pb);
    auto start = Clock::now();
    post_send_small(a, 1);
    ibv_wc wc{};
    bool got = next_wc(a.cq, &wc, 10);
    double t = secs_since(start);
    CHECK(got, "rnr_retry 1: no completion within 10 s");
    if (got) {
        CHECK(wc.status == IBV_WC_RNR_RETRY_EXC_ERR && wc.wr_id == 1,
              "rnr_retry 1: wr_id %llu completed with %s, want IBV_WC_RNR_RETRY_EXC_ERR",
              (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
        std::printf("rnr: rnr_retry 1, min_rnr_timer 1.28 ms: %s after %.1f ms\n",
                    ibv_wc_status_str(wc.status), t * 1e3);
        CHECK(qp_state(a.qp) == IBV_QPS_ERR, "the QP is in state %d, want ERR", qp_state(a.qp));
    }
    destroy_qp(a);
    destroy_qp(b);

    // rnr_retry 7 retries until a receive shows up.
    pa.rnr_retry = 7;
    connect_pair(a, b, pa, pb);
    post_send_small(a, 3);
    timespec ts{0, 50 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    CHECK(ibv_poll_cq(a.cq, 1, &wc) == 0, "rnr_retry 7: completed (%s) with no receive posted",
          ibv_wc_status_str(wc.status));
    post_recv(b, 4, b.area(1), 64);
    got = next_wc(a.cq, &wc, 10);
    CHECK(got && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3,
          "rnr_retry 7: after the receive was posted: %s",
          got ? ibv_wc_status_str(wc.status) : "no completion");
    got = next_wc(b.cq, &wc, 10);
    CHECK(got && wc.status == IBV_WC_SUCCESS && wc.wr_id == 4 && wc.byte_len == 64,
          "rnr_retry 7: the receive: %s", got ? ibv_wc_status_str(wc.status) : "no completion");
    destroy_qp(a);
    destroy_qp(b);
}

uint64_t arg_u64(int& i, int argc, char** argv) {
    REQUIRE(i + 1 < argc, "%s needs a value", argv[i]);
    char* end = nullptr;
    uint64_t v = std::strtoull(argv[++i], &end, 0);
    REQUIRE(*end == 0, "bad number %s", argv[i]);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    g_on_fatal = on_fatal;
    if (argc < 4) {
        std::fprintf(stderr,
                     "usage: %s DEV_A DEV_B transfer [--mib N] [--atomics N] [--mtu 1024|4096]\n"
                     "           [--timeout T] [--max-msg BYTES] [--phases wrsa]\n"
                     "       %s DEV_A DEV_B retry [--timeout T --retry R]...\n"
                     "       %s DEV_A DEV_B rnr\n",
                     argv[0], argv[0], argv[0]);
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Side a, b;
    open_side(a, argv[1]);
    open_side(b, argv[2]);
    std::string mode = argv[3];
    auto start = Clock::now();
    if (mode == "transfer") {
        uint64_t mib = 256, atomics = 100000;
        std::string phases = "wrsa";  // write, read, send, atomic
        QpParams p;
        for (int i = 4; i < argc; ++i) {
            std::string o = argv[i];
            if (o == "--mib")
                mib = arg_u64(i, argc, argv);
            else if (o == "--phases" && i + 1 < argc)
                phases = argv[++i];
            else if (o == "--max-msg") {
                g_max_msg = arg_u64(i, argc, argv);
                REQUIRE(g_max_msg >= 1 && g_max_msg <= kChunk, "--max-msg 1..%zu", kChunk);
            } else if (o == "--atomics")
                atomics = arg_u64(i, argc, argv);
            else if (o == "--timeout")
                p.timeout = uint8_t(arg_u64(i, argc, argv));
            else if (o == "--mtu") {
                uint64_t m = arg_u64(i, argc, argv);
                REQUIRE(m == 1024 || m == 4096, "--mtu 1024 or 4096");
                p.mtu = m == 1024 ? IBV_MTU_1024 : IBV_MTU_4096;
            } else
                REQUIRE(false, "unknown option %s", o.c_str());
        }
        connect_pair(a, b, p, p);
        auto has = [&](char c) { return phases.find(c) != std::string::npos; };
        if (has('w')) rdma_phase(a, b, IBV_WR_RDMA_WRITE, mib << 20, 1000000);
        if (has('r')) rdma_phase(a, b, IBV_WR_RDMA_READ, mib << 20, 2000000);
        if (has('s')) send_phase(a, b, mib << 20, 3000000);
        if (has('a')) atomic_phase(a, b, atomics);
        destroy_qp(a);
        destroy_qp(b);
    } else if (mode == "retry") {
        std::vector<std::pair<uint8_t, uint8_t>> cases;
        uint8_t t = 14;
        for (int i = 4; i < argc; ++i) {
            std::string o = argv[i];
            if (o == "--timeout")
                t = uint8_t(arg_u64(i, argc, argv));
            else if (o == "--retry")
                cases.emplace_back(t, uint8_t(arg_u64(i, argc, argv)));
            else
                REQUIRE(false, "unknown option %s", o.c_str());
        }
        if (cases.empty()) cases = {{14, 3}, {12, 7}, {8, 7}, {1, 2}};
        for (auto [timeout, retry] : cases) retry_case(a, b, timeout, retry);
    } else if (mode == "rnr") {
        rnr_case(a, b);
    } else {
        REQUIRE(false, "unknown mode %s", mode.c_str());
    }
    std::printf("total %.2f s\n", secs_since(start));
    for (Side* s : {&a, &b}) {
        CHECK(ibv_dereg_mr(s->mr) == 0, "dereg_mr");
        CHECK(ibv_dealloc_pd(s->pd) == 0, "dealloc_pd");
        CHECK(ibv_close_device(s->ctx) == 0, "close_device");
        std::free(s->buf);
    }
    if (g_failures) {
        std::fprintf(stderr, "%d check(s) failed\n", g_failures);
        return 1;
    }
    std::printf("all checks passed\n");
    return 0;
}
