// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// transport_tests: the transport between two uroce devices, through the public verbs API.
//
// Two devices (uroced), uroce0 on 127.0.0.2 and uroce1 on 127.0.0.3, on the first free UDP
// port of a range (UROCE_UDP_PORT .. + UROCE_TRANSPORT_PORTS - 1) in a runtime directory of
// their own (devices.cpp): under ctest one pair serves the whole suite (a ctest fixture
// starts and stops it, so tests run side by side on it and must not depend on device-wide
// counters); run by hand, the binary starts its own. Each test opens both devices through
// the drop-in libibverbs, drives them with the helpers below and checks memory bytes, every
// ibv_wc field and the QP state afterwards. Every buffer made with reg() sits between
// poisoned guard bytes; TearDown fails the test if any guard byte changed (docs/testing.md).
//
// Adding tests: drop a file tests/transport/<area>_test.cpp that includes this header and
// defines TEST_F(TransportTest, ...). tests/CMakeLists.txt globs *_test.cpp here, so no
// CMake change is needed (re-run cmake once so the glob sees the new file; a build of an
// existing tree does that by itself through CONFIGURE_DEPENDS). ctest names the tests
// transport.<Test>.<Name>. Keep each test short: the suite runs under ASan in CI too.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace uroce::transport_test {

// How long a helper waits for something that must happen (a completion, an event). Generous:
// an ASan build on a loaded 2-core host is slow, and a passing test never waits this long.
constexpr double kWaitSeconds = 10.0;
constexpr uint8_t kPoison = 0xE7;  // guard bytes and untouched destination bytes
constexpr size_t kGuard = 64;      // guard bytes on each side of a registered buffer

constexpr const char* kDeviceNames[2] = {"uroce0", "uroce1"};
// True once the devices run (devices.cpp).
bool devices_ready();

constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// The value of byte `i` of pattern `seed` (never kPoison, so a pattern byte is told from an
// untouched one).
uint8_t pattern_byte(uint32_t seed, size_t i);
const char* state_name(int s);

// A registered buffer between two guard areas: [kGuard poison][len data][kGuard poison].
struct Buffer {
    uint8_t* alloc = nullptr;  // page aligned; data = alloc + kGuard... see data()
    size_t alloc_len = 0;
    size_t len = 0;
    size_t lead = 0;  // offset of the data in alloc
    ibv_mr* mr = nullptr;
    std::string what;  // for failure messages

    uint8_t* data() const { return alloc + lead; }
    uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(data() + off); }
    uint32_t lkey() const { return mr->lkey; }
    uint32_t rkey() const { return mr->rkey; }
    ibv_sge sge(size_t off, uint32_t n) const { return {addr(off), n, lkey()}; }
    // Pattern `seed` at [off, off + n) (whole buffer by default), poison elsewhere unchanged.
    // Returns the buffer: `Buffer& src = reg(A(), n).fill(seed);`.
    Buffer& fill(uint32_t seed, size_t off = 0, size_t n = SIZE_MAX);
    void poison() const;  // every data byte back to kPoison
    // Offset of the first byte of [off, off+n) that is not pattern `seed` at pattern offset
    // `pat_off + k`, or -1.
    long mismatch(uint32_t seed, size_t off, size_t n, size_t pat_off = 0) const;
    long not_poison(size_t off, size_t n) const;  // first non-poison byte, or -1
    // Offset (relative to alloc) of the first changed guard byte, or -1.
    long broken_guard() const;
};

struct Side {
    const char* name = "";
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_gid gid{};
    uint32_t ipv4_be = 0;
};

// One QP and its own send and receive CQs.
struct Endpoint {
    Side* side = nullptr;
    ibv_qp* qp = nullptr;
    ibv_cq* scq = nullptr;
    ibv_cq* rcq = nullptr;
    uint32_t qpn() const { return qp->qp_num; }
};

struct QpOpts {
    ibv_qp_type type = IBV_QPT_RC;
    uint32_t max_send_wr = 64, max_recv_wr = 64;
    uint32_t max_send_sge = 4, max_recv_sge = 4;
    uint32_t max_inline_data = 0;
    int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ibv_mtu mtu = IBV_MTU_1024;
    uint8_t timeout = 14;  // 67 ms: a loaded host never makes a live peer look dead
    uint8_t retry_cnt = 7, rnr_retry = 7;
    uint8_t min_rnr_timer = 1;
    uint8_t max_rd_atomic = 16, max_dest_rd_atomic = 16;
    uint32_t psn_a = 0x123456, psn_b = 0xfffff0;  // B's wraps past 2^24 within a few packets
    ibv_srq* srq_a = nullptr;
    ibv_srq* srq_b = nullptr;
    int sq_sig_all = 0;
    ibv_comp_channel* channel_a = nullptr;  // for both of A's CQs
    ibv_comp_channel* channel_b = nullptr;
    uint32_t qkey = 0x11111111;  // UD
    // Nonzero: the QP comes from ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS and
    // these ops, so it has the ibv_wr_* interface (ibv_qp_to_qp_ex).
    uint64_t send_ops_flags = 0;
    // The QP's CQs come from ibv_create_cq_ex with these wc_flags; Endpoint holds
    // ibv_cq_ex_to_cq of them.
    bool cq_ex = false;
    uint64_t cq_wc_flags = IBV_WC_STANDARD_FLAGS;
};

struct Pair {
    Endpoint a, b;  // a on uroce0, b on uroce1
};

// What a completion must hold. Error completions only define wr_id, status, qp_num and
// vendor_err (ibv_poll_cq(3)), so only those are compared when status != SUCCESS.
struct WcWant {
    uint64_t wr_id = 0;
    ibv_wc_status status = IBV_WC_SUCCESS;
    ibv_wc_opcode opcode = IBV_WC_SEND;
    uint32_t byte_len = 0;
    uint32_t qp_num = 0;
    uint32_t src_qp = 0;
    unsigned wc_flags = 0;
    uint32_t imm_data = 0;  // network order, as in ibv_wc
    bool check_src_qp = true;
};
std::string wc_str(const ibv_wc& wc);
// Compares every field (non-fatal EXPECTs); returns true if all matched.
bool wc_matches(const ibv_wc& wc, const WcWant& want, const char* what = "");

// Work requests for post().
// A signaled WR of `op` over `sges` (the vector must outlive the post).
ibv_send_wr wr(uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge>& sges,
               unsigned flags = IBV_SEND_SIGNALED);
ibv_send_wr rdma_wr(uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge>& sges,
                    uint64_t remote_addr, uint32_t rkey, unsigned flags = IBV_SEND_SIGNALED);
ibv_send_wr atomic_wr(uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge>& sges,
                      uint64_t remote_addr, uint32_t rkey, uint64_t compare_add, uint64_t swap = 0);

// What the devices say about themselves (the `uroce` CLI).
// Packets the device of `s` dropped at QP `qpn` for `reason` (`uroce counters`, e.g.
// "bad_qkey"); 0 if none.
long qp_drops(const Side& s, uint32_t qpn, const char* reason);
// Waits (up to a second) until that count reaches `want`; returns the count.
long wait_qp_drops(const Side& s, uint32_t qpn, const char* reason, long want);
// `uroce res NAME` / `uroce counters NAME` output, and the number after `key` on the
// first line starting with `line_prefix` (-1 if none).
std::string cli(const std::string& args);
long counter(const std::string& dump, const std::string& line_prefix, const std::string& key);

class TransportTest : public ::testing::Test {
protected:
    // Opens both devices, then calls set_up().
    void SetUp() override;
    void TearDown() override;
    // What a fixture of its own sets up once both devices are open.
    virtual void set_up() {}

    Side a_, b_;
    Side& A() { return a_; }
    Side& B() { return b_; }

    // Objects made here are destroyed in TearDown (reverse order of creation).
    ibv_pd* alloc_pd(Side& s);
    ibv_cq* make_cq(Side& s, int cqe = 256, ibv_comp_channel* ch = nullptr);
    // ibv_create_cq_ex; QPs and ibv_poll_cq take ibv_cq_ex_to_cq of it.
    ibv_cq_ex* make_cq_ex(Side& s, uint64_t wc_flags, int cqe = 256, ibv_comp_channel* ch = nullptr,
                          uint32_t flags = 0, void* cq_context = nullptr);
    ibv_comp_channel* make_channel(Side& s);
    // `len` bytes registered with `access` in `pd` (the side's PD by default), poisoned.
    Buffer& reg(Side& s, size_t len, int access = kAllAccess, ibv_pd* pd = nullptr);
    void dereg(Buffer& b);  // ibv_dereg_mr now; the memory (and its guards) stays
    ibv_srq* make_srq(Side& s, uint32_t max_wr, uint32_t max_sge = 4, uint32_t limit = 0);
    // A QP in RESET with its own CQs.
    Endpoint make_qp(Side& s, const QpOpts& o, bool is_a);
    // A QP in RESET on the given CQs (o's CQ and channel options are not used).
    Endpoint make_qp_with_cqs(Side& s, const QpOpts& o, ibv_cq* scq, ibv_cq* rcq,
                              ibv_srq* srq = nullptr);
    void destroy_qp(Endpoint& e);  // before TearDown (the peer then sees no answer)

    // RC/UC: a connected pair in RTS (A on uroce0, B on uroce1).
    Pair connect_pair(const QpOpts& o = {});
    // Moves an RC/UC QP, or an XRC INI or TGT QP, to RTS towards `peer` (qpn on side `to`).
    // With `to_rts` false it stops in RTR.
    void connect_qp(Endpoint& e, const Side& to, uint32_t dest_qpn, const QpOpts& o,
                    uint32_t my_psn, uint32_t peer_psn, bool to_rts = true);
    // UD: a QP in RTS with Q_Key o.qkey.
    Endpoint make_ud(Side& s, const QpOpts& o = QpOpts{IBV_QPT_UD});
    ibv_ah* make_ah(Side& from, const Side& to);

    // Data path helpers. They return the verb's errno; bad_wr checks are left to the test.
    int post_recv(ibv_qp* qp, uint64_t wr_id, std::vector<ibv_sge> sges);
    int post_srq_recv(ibv_srq* srq, uint64_t wr_id, std::vector<ibv_sge> sges);
    // `n` receives of `each` bytes each into one new buffer on e's side, wr_ids from
    // `first`: to e's QP, or to `srq`. Returns the buffer.
    Buffer& post_recvs(const Endpoint& e, uint64_t first, size_t n, size_t each,
                       ibv_srq* srq = nullptr);
    int post(ibv_qp* qp, ibv_send_wr& wr, ibv_send_wr** bad = nullptr);

    // The next completion of `cq`; fails the test (fatal) when none comes in kWaitSeconds.
    ibv_wc poll1(ibv_cq* cq, double timeout = kWaitSeconds);
    // True (and *wc filled) if a completion arrives within `timeout`.
    bool try_poll(ibv_cq* cq, ibv_wc* wc, double timeout);
    // Polls `cq` and compares the completion with `want` (wc_matches).
    void expect_wc(ibv_cq* cq, const WcWant& want, const char* what = "");
    // A successful completion on e's send CQ (src_qp is not defined there).
    void expect_send_ok(const Endpoint& e, uint64_t wr_id, ibv_wc_opcode op, uint32_t byte_len);
    // A successful completion on e's receive CQ from `src_qp`; imm_be in network order.
    void expect_recv_ok(const Endpoint& e, uint64_t wr_id, ibv_wc_opcode op, uint32_t byte_len,
                        uint32_t src_qp, unsigned wc_flags = 0, uint32_t imm_be = 0);
    // An error completion of `qpn` on `cq`: wr_id, status and qp_num.
    void expect_error(ibv_cq* cq, uint32_t qpn, uint64_t wr_id, ibv_wc_status status,
                      const char* what = "");
    // Expects that nothing arrives on `cq` for `ms` milliseconds.
    void expect_empty(ibv_cq* cq, int ms = 30);

    // ibv_query_qp's state (as the device sees it).
    static int qp_state(ibv_qp* qp);
    // Waits until the QP reports `state` (a remote error reaches the responder's device a
    // moment after the requester's completion); true if it did within kWaitSeconds.
    bool wait_state(ibv_qp* qp, int state);

    // An error the responder detects (IBTA class C): WR `wr_id` of p.a completes with
    // `status` and the WR `flushed_id` behind it (if not 0) is flushed; both QPs end in ERR;
    // B's owner gets `event` for p.b's QP, A's none.
    void expect_remote_error(const Pair& p, uint64_t wr_id, ibv_wc_status status,
                             uint64_t flushed_id, ibv_event_type event);

    // Async events of a context: the next one (fatal when none comes), or none for `ms`.
    ibv_async_event next_async(Side& s, double timeout = kWaitSeconds);
    bool try_async(Side& s, ibv_async_event* ev, double timeout);
    void expect_no_async(Side& s, int ms = 50);

private:
    // What TearDown destroys, newest first (an object only depends on older ones).
    struct Obj {
        const void* p;  // nullptr once the test destroyed it itself
        std::function<int()> destroy;
        std::string what;
    };
    std::vector<Obj> objs_;
    template <typename T>
    T* keep(T* p, const char* what, std::function<int()> destroy);
    std::vector<std::unique_ptr<Buffer>> bufs_;
    bool timed_out_ = false;
    void open_side(Side& s, const char* name);
};

// A fixture whose tests share one connected pair, p_, made in set_up() with connect(), and
// often a buffer on each side, src_ on A and dst_ on B (buffers()).
class PairTest : public TransportTest {
protected:
    // p_ = connect_pair(o); fatal when that failed.
    void connect(const QpOpts& o = {});
    // src_ of `src_len` bytes with pattern `seed`, dst_ of `dst_len` (poison).
    void buffers(size_t src_len, size_t dst_len, uint32_t seed);
    // Both of p_'s QPs are still in RTS.
    void expect_rts();
    // That, and B received nothing.
    void expect_quiet_rts();

    Pair p_;
    Buffer* src_ = nullptr;
    Buffer* dst_ = nullptr;
};

}  // namespace uroce::transport_test
