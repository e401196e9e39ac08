// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The transport_tests fixture: the public verbs API over the two devices (devices.cpp),
// guarded buffers, and polling with timeouts (fixture.h).
#include "tests/transport/fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/transport/verbs_util.h"

namespace uroce::transport_test {

namespace {

using Clock = std::chrono::steady_clock;
double secs_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string cli_path() {
    if (const char* p = getenv("UROCE_CLI")) return p;
    return UROCE_BIN_DIR "/uroce";
}

}  // namespace

uint8_t pattern_byte(uint32_t seed, size_t i) {
    uint64_t x = (uint64_t(seed) << 32) ^ i;
    x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    uint8_t v = uint8_t(x);
    return v == kPoison ? uint8_t(v ^ 0x5a) : v;
}

const char* state_name(int s) { return verbs_util::qp_state_name(s); }

Buffer& Buffer::fill(uint32_t seed, size_t off, size_t n) {
    if (n == SIZE_MAX) n = len - off;
    for (size_t i = 0; i < n; ++i) data()[off + i] = pattern_byte(seed, i);
    return *this;
}

void Buffer::poison() const { std::memset(data(), kPoison, len); }

long Buffer::mismatch(uint32_t seed, size_t off, size_t n, size_t pat_off) const {
    for (size_t i = 0; i < n; ++i)
        if (data()[off + i] != pattern_byte(seed, pat_off + i)) return long(off + i);
    return -1;
}

long Buffer::not_poison(size_t off, size_t n) const {
    for (size_t i = 0; i < n; ++i)
        if (data()[off + i] != kPoison) return long(off + i);
    return -1;
}

long Buffer::broken_guard() const {
    for (size_t i = 0; i < lead; ++i)
        if (alloc[i] != kPoison) return long(i);
    for (size_t i = lead + len; i < alloc_len; ++i)
        if (alloc[i] != kPoison) return long(i);
    return -1;
}

std::string wc_str(const ibv_wc& wc) {
    char b[256];
    std::snprintf(b, sizeof b,
                  "{wr_id %llu status %s opcode %d byte_len %u imm 0x%x qp_num 0x%x src_qp 0x%x "
                  "wc_flags 0x%x}",
                  (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), int(wc.opcode),
                  wc.byte_len, ntohl(wc.imm_data), wc.qp_num, wc.src_qp, wc.wc_flags);
    return b;
}

bool wc_matches(const ibv_wc& wc, const WcWant& w, const char* what) {
    int before =
        ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    std::string ctx = std::string(what) + " " + wc_str(wc);
    EXPECT_EQ(wc.wr_id, w.wr_id) << ctx;
    EXPECT_EQ(wc.status, w.status) << ctx << ": status " << ibv_wc_status_str(wc.status)
                                   << ", want " << ibv_wc_status_str(w.status);
    EXPECT_EQ(wc.qp_num, w.qp_num) << ctx;
    if (w.status == IBV_WC_SUCCESS) {
        EXPECT_EQ(wc.opcode, w.opcode) << ctx;
        EXPECT_EQ(wc.byte_len, w.byte_len) << ctx;
        EXPECT_EQ(wc.wc_flags, w.wc_flags) << ctx;
        if (w.wc_flags & IBV_WC_WITH_IMM) {
            EXPECT_EQ(ntohl(wc.imm_data), ntohl(w.imm_data)) << ctx;
        }
        if (w.check_src_qp) {
            EXPECT_EQ(wc.src_qp, w.src_qp) << ctx;
        }
        // A completion with a GRH (UD) carries the network header type in sl as mlx5 does
        // (2: RoCEv2 over IPv4; UCX depends on it), the others 0.
        EXPECT_EQ(wc.sl, (w.wc_flags & IBV_WC_GRH) ? 2 : 0) << ctx << ": sl";
    }
    return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() ==
           before;
}

void TransportTest::open_side(Side& s, const char* name) {
    s.name = name;
    s.ctx = verbs_util::open_device(name);
    ASSERT_NE(s.ctx, nullptr) << "cannot open " << name << ": " << std::strerror(errno);
    ASSERT_EQ(ibv_query_gid(s.ctx, 1, 0, &s.gid), 0);
    std::memcpy(&s.ipv4_be, s.gid.raw + 12, 4);
    // Async events are read without blocking (try_async polls the fd).
    int fl = fcntl(s.ctx->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(s.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
    s.pd = ibv_alloc_pd(s.ctx);
    ASSERT_NE(s.pd, nullptr) << std::strerror(errno);
}

void TransportTest::SetUp() {
    ASSERT_TRUE(devices_ready()) << "the devices did not start";
    ASSERT_NO_FATAL_FAILURE(open_side(a_, kDeviceNames[0]));
    ASSERT_NO_FATAL_FAILURE(open_side(b_, kDeviceNames[1]));
    set_up();
}

void TransportTest::TearDown() {
    // Guard bytes first: whatever went wrong, nothing may have touched them.
    for (auto& b : bufs_) {
        long g = b->broken_guard();
        EXPECT_LT(g, 0) << "guard byte " << g - long(b->lead) << " (relative to the data) of "
                        << b->what << " changed to 0x" << std::hex << int(b->alloc[g]);
    }
    if (HasFailure()) {
        // The devices' view, for the log: QP states and PSNs, drops.
        std::printf("--- uroce res (at failure)\n%s", cli("res").c_str());
    }
    for (auto it = objs_.rbegin(); it != objs_.rend(); ++it) {
        if (!it->p) continue;
        int e = it->destroy();
        EXPECT_EQ(e, 0) << it->what << ": " << std::strerror(e);
    }
    objs_.clear();
    for (auto& b : bufs_) munmap(b->alloc, b->alloc_len);
    bufs_.clear();
    for (Side* s : {&a_, &b_}) {
        if (s->pd) {
            EXPECT_EQ(ibv_dealloc_pd(s->pd), 0);
        }
        if (s->ctx) {
            EXPECT_EQ(ibv_close_device(s->ctx), 0);
        }
        s->pd = nullptr;
        s->ctx = nullptr;
    }
}

template <typename T>
T* TransportTest::keep(T* p, const char* what, std::function<int()> destroy) {
    EXPECT_NE(p, nullptr) << what << ": " << std::strerror(errno);
    if (p) objs_.push_back({p, std::move(destroy), std::string("destroying ") + what});
    return p;
}

ibv_pd* TransportTest::alloc_pd(Side& s) {
    ibv_pd* pd = ibv_alloc_pd(s.ctx);
    return keep(pd, "ibv_alloc_pd", [pd] { return ibv_dealloc_pd(pd); });
}

ibv_comp_channel* TransportTest::make_channel(Side& s) {
    ibv_comp_channel* ch = ibv_create_comp_channel(s.ctx);
    return keep(ch, "ibv_create_comp_channel", [ch] { return ibv_destroy_comp_channel(ch); });
}

ibv_cq* TransportTest::make_cq(Side& s, int cqe, ibv_comp_channel* ch) {
    ibv_cq* cq = ibv_create_cq(s.ctx, cqe, nullptr, ch, 0);
    return keep(cq, "ibv_create_cq", [cq] { return ibv_destroy_cq(cq); });
}

Buffer& TransportTest::reg(Side& s, size_t len, int access, ibv_pd* pd) {
    auto b = std::make_unique<Buffer>();
    // The data starts kGuard bytes into a page-aligned mapping, the guards on both sides.
    b->lead = kGuard;
    b->len = len;
    b->alloc_len = (kGuard + len + kGuard + 4095) / 4096 * 4096;
    void* m =
        mmap(nullptr, b->alloc_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    b->alloc = static_cast<uint8_t*>(m);
    std::memset(b->alloc, kPoison, b->alloc_len);
    b->what = std::string(s.name) + " buffer of " + std::to_string(len) + " bytes";
    b->mr = ibv_reg_mr(pd ? pd : s.pd, b->data(), len, access);
    Buffer* bp = b.get();
    keep(b->mr, "ibv_reg_mr", [bp] { return ibv_dereg_mr(bp->mr); });
    bufs_.push_back(std::move(b));
    return *bp;
}

void TransportTest::dereg(Buffer& b) {
    ASSERT_NE(b.mr, nullptr);
    for (auto& o : objs_)
        if (o.p == b.mr) o.p = nullptr;
    EXPECT_EQ(ibv_dereg_mr(b.mr), 0);
    b.mr = nullptr;
}

ibv_srq* TransportTest::make_srq(Side& s, uint32_t max_wr, uint32_t max_sge, uint32_t limit) {
    ibv_srq_init_attr ia{};
    ia.attr.max_wr = max_wr;
    ia.attr.max_sge = max_sge;
    ia.attr.srq_limit = limit;
    ibv_srq* srq = ibv_create_srq(s.pd, &ia);
    return keep(srq, "ibv_create_srq", [srq] { return ibv_destroy_srq(srq); });
}

ibv_cq_ex* TransportTest::make_cq_ex(Side& s, uint64_t wc_flags, int cqe, ibv_comp_channel* ch,
                                     uint32_t flags, void* cq_context) {
    ibv_cq_init_attr_ex a{};
    a.cqe = uint32_t(cqe);
    a.cq_context = cq_context;
    a.channel = ch;
    a.wc_flags = wc_flags;
    if (flags) a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    a.flags = flags;
    ibv_cq_ex* cq = ibv_create_cq_ex(s.ctx, &a);
    return keep(cq, "ibv_create_cq_ex", [cq] { return ibv_destroy_cq(ibv_cq_ex_to_cq(cq)); });
}

Endpoint TransportTest::make_qp(Side& s, const QpOpts& o, bool is_a) {
    ibv_comp_channel* ch = is_a ? o.channel_a : o.channel_b;
    ibv_cq* cq[2];
    for (ibv_cq*& c : cq) {
        if (!o.cq_ex) {
            c = make_cq(s, 256, ch);
        } else {
            ibv_cq_ex* x = make_cq_ex(s, o.cq_wc_flags, 256, ch);
            c = x ? ibv_cq_ex_to_cq(x) : nullptr;
        }
    }
    return make_qp_with_cqs(s, o, cq[0], cq[1], is_a ? o.srq_a : o.srq_b);
}

Endpoint TransportTest::make_qp_with_cqs(Side& s, const QpOpts& o, ibv_cq* scq, ibv_cq* rcq,
                                         ibv_srq* srq) {
    Endpoint e;
    e.side = &s;
    e.scq = scq;
    e.rcq = rcq;
    ibv_qp_init_attr_ex ia{};
    ia.send_cq = e.scq;
    ia.recv_cq = e.rcq;
    ia.srq = srq;
    ia.qp_type = o.type;
    ia.sq_sig_all = o.sq_sig_all;
    ia.cap.max_send_wr = o.max_send_wr;
    ia.cap.max_recv_wr = o.max_recv_wr;
    ia.cap.max_send_sge = o.max_send_sge;
    ia.cap.max_recv_sge = o.max_recv_sge;
    ia.cap.max_inline_data = o.max_inline_data;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = s.pd;
    if (o.send_ops_flags) {
        ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        ia.send_ops_flags = o.send_ops_flags;
    }
    // ibv_create_qp unless the test wants the ibv_wr_* interface; ibv_qp_init_attr is the
    // prefix of ibv_qp_init_attr_ex (verbs.h relies on it too).
    ibv_qp* qp = o.send_ops_flags ? ibv_create_qp_ex(s.ctx, &ia)
                                  : ibv_create_qp(s.pd, reinterpret_cast<ibv_qp_init_attr*>(&ia));
    e.qp = keep(qp, "creating a QP", [qp] { return ibv_destroy_qp(qp); });
    return e;
}

void TransportTest::destroy_qp(Endpoint& e) {
    for (auto& o : objs_)
        if (o.p == e.qp) o.p = nullptr;
    EXPECT_EQ(ibv_destroy_qp(e.qp), 0);
    e.qp = nullptr;
}

void TransportTest::connect_qp(Endpoint& e, const Side& to, uint32_t dest_qpn, const QpOpts& o,
                               uint32_t my_psn, uint32_t peer_psn, bool to_rts) {
    // An RC QP and an XRC TGT QP are responders; the others take no remote rights but write.
    bool responder = o.type == IBV_QPT_RC || o.type == IBV_QPT_XRC_RECV;
    verbs_util::PathAttrs p;
    p.access = responder ? o.access : (o.access & IBV_ACCESS_REMOTE_WRITE);
    p.mtu = o.mtu;
    p.timeout = o.timeout;
    p.retry_cnt = o.retry_cnt;
    p.rnr_retry = o.rnr_retry;
    p.min_rnr_timer = o.min_rnr_timer;
    p.max_rd_atomic = o.max_rd_atomic;
    p.max_dest_rd_atomic = o.max_dest_rd_atomic;
    ibv_qp_state failed = IBV_QPS_RESET;
    int err = verbs_util::connect_qp(e.qp, o.type, to.gid, dest_qpn, my_psn, peer_psn, p, to_rts,
                                     &failed);
    ASSERT_EQ(err, 0) << "QP 0x" << std::hex << e.qp->qp_num << " to " << state_name(failed);
}

Pair TransportTest::connect_pair(const QpOpts& o) {
    Pair p;
    p.a = make_qp(a_, o, true);
    p.b = make_qp(b_, o, false);
    if (!p.a.qp || !p.b.qp) return p;
    connect_qp(p.a, b_, p.b.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(p.b, a_, p.a.qpn(), o, o.psn_b, o.psn_a);
    return p;
}

void PairTest::connect(const QpOpts& o) {
    p_ = connect_pair(o);
    ASSERT_TRUE(p_.a.qp && p_.b.qp);
}

void PairTest::buffers(size_t src_len, size_t dst_len, uint32_t seed) {
    src_ = &reg(A(), src_len).fill(seed);
    dst_ = &reg(B(), dst_len);
}

void PairTest::expect_rts() {
    EXPECT_EQ(qp_state(p_.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p_.b.qp), IBV_QPS_RTS);
}

void PairTest::expect_quiet_rts() {
    expect_empty(p_.b.rcq);
    expect_rts();
}

Endpoint TransportTest::make_ud(Side& s, const QpOpts& o) {
    QpOpts u = o;
    u.type = IBV_QPT_UD;
    Endpoint e = make_qp(s, u, &s == &a_);
    if (!e.qp) return e;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = u.qkey;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
              0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE), 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = u.psn_a;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    return e;
}

ibv_ah* TransportTest::make_ah(Side& from, const Side& to) {
    ibv_ah_attr at{};
    at.is_global = 1;
    at.grh.dgid = to.gid;
    at.grh.hop_limit = 64;
    at.port_num = 1;
    ibv_ah* ah = ibv_create_ah(from.pd, &at);
    return keep(ah, "ibv_create_ah", [ah] { return ibv_destroy_ah(ah); });
}

int TransportTest::post_recv(ibv_qp* qp, uint64_t wr_id, std::vector<ibv_sge> sges) {
    ibv_recv_wr r{
        .wr_id = wr_id, .next = nullptr, .sg_list = sges.data(), .num_sge = int(sges.size())};
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &r, &bad);
}

Buffer& TransportTest::post_recvs(const Endpoint& e, uint64_t first, size_t n, size_t each,
                                  ibv_srq* srq) {
    Buffer& buf = reg(*e.side, n * each);
    for (size_t i = 0; i < n; ++i) {
        std::vector<ibv_sge> sg{buf.sge(i * each, uint32_t(each))};
        int err = srq ? post_srq_recv(srq, first + i, sg) : post_recv(e.qp, first + i, sg);
        EXPECT_EQ(err, 0) << "posting receive " << i << ": " << std::strerror(err);
    }
    return buf;
}

int TransportTest::post_srq_recv(ibv_srq* srq, uint64_t wr_id, std::vector<ibv_sge> sges) {
    ibv_recv_wr r{
        .wr_id = wr_id, .next = nullptr, .sg_list = sges.data(), .num_sge = int(sges.size())};
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(srq, &r, &bad);
}

int TransportTest::post(ibv_qp* qp, ibv_send_wr& w, ibv_send_wr** bad) {
    ibv_send_wr* b = nullptr;
    int e = ibv_post_send(qp, &w, &b);
    if (bad) *bad = b;
    return e;
}

ibv_send_wr wr(uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge>& sges, unsigned flags) {
    ibv_send_wr w{};
    w.wr_id = wr_id;
    w.opcode = op;
    w.sg_list = sges.data();
    w.num_sge = int(sges.size());
    w.send_flags = flags;
    return w;
}

ibv_send_wr rdma_wr(uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge>& sges,
                    uint64_t remote_addr, uint32_t rkey, unsigned flags) {
    ibv_send_wr w = wr(wr_id, op, sges, flags);
    w.wr.rdma.remote_addr = remote_addr;
    w.wr.rdma.rkey = rkey;
    return w;
}

ibv_send_wr atomic_wr(uint64_t wr_id, ibv_wr_opcode op, std::vector<ibv_sge>& sges,
                      uint64_t remote_addr, uint32_t rkey, uint64_t compare_add, uint64_t swap) {
    ibv_send_wr w = wr(wr_id, op, sges);
    w.wr.atomic.remote_addr = remote_addr;
    w.wr.atomic.rkey = rkey;
    w.wr.atomic.compare_add = compare_add;
    w.wr.atomic.swap = swap;
    return w;
}

bool TransportTest::try_poll(ibv_cq* cq, ibv_wc* wc, double timeout) {
    int n = verbs_util::poll_one(cq, wc, timeout);
    EXPECT_GE(n, 0) << "ibv_poll_cq";
    return n == 1;
}

ibv_wc TransportTest::poll1(ibv_cq* cq, double timeout) {
    ibv_wc wc{};
    // After one completion failed to come, the rest of the test would only wait in vain.
    bool got = try_poll(cq, &wc, timed_out_ ? 0.05 : timeout);
    if (!got) timed_out_ = true;
    [&] { ASSERT_TRUE(got) << "no completion within " << timeout << " s"; }();
    if (!got) {
        std::memset(&wc, 0, sizeof wc);
        wc.status = ibv_wc_status(-1);  // matches nothing a test wants
        wc.wr_id = ~0ull;
    }
    return wc;
}

void TransportTest::expect_wc(ibv_cq* cq, const WcWant& want, const char* what) {
    wc_matches(poll1(cq), want, what);
}

void TransportTest::expect_send_ok(const Endpoint& e, uint64_t wr_id, ibv_wc_opcode op,
                                   uint32_t byte_len) {
    WcWant w{.wr_id = wr_id, .opcode = op, .byte_len = byte_len, .qp_num = e.qpn()};
    w.check_src_qp = false;
    expect_wc(e.scq, w, "send queue");
}

void TransportTest::expect_recv_ok(const Endpoint& e, uint64_t wr_id, ibv_wc_opcode op,
                                   uint32_t byte_len, uint32_t src_qp, unsigned wc_flags,
                                   uint32_t imm_be) {
    expect_wc(e.rcq,
              {.wr_id = wr_id,
               .opcode = op,
               .byte_len = byte_len,
               .qp_num = e.qpn(),
               .src_qp = src_qp,
               .wc_flags = wc_flags,
               .imm_data = imm_be},
              "receive queue");
}

void TransportTest::expect_error(ibv_cq* cq, uint32_t qpn, uint64_t wr_id, ibv_wc_status status,
                                 const char* what) {
    expect_wc(cq, {.wr_id = wr_id, .status = status, .qp_num = qpn}, what);
}

void TransportTest::expect_empty(ibv_cq* cq, int ms) {
    ibv_wc wc{};
    if (try_poll(cq, &wc, ms / 1000.0)) ADD_FAILURE() << "unexpected completion " << wc_str(wc);
}

int TransportTest::qp_state(ibv_qp* qp) {
    int e = 0;
    int s = verbs_util::query_qp_state(qp, &e);
    EXPECT_EQ(e, 0) << "ibv_query_qp: " << std::strerror(e);
    return s;
}

bool TransportTest::wait_state(ibv_qp* qp, int state) {
    auto start = Clock::now();
    for (;;) {
        int s = qp_state(qp);
        if (s == state) return true;
        if (s < 0 || secs_since(start) > kWaitSeconds) {
            ADD_FAILURE() << "QP 0x" << std::hex << qp->qp_num << " is in state " << state_name(s)
                          << ", want " << state_name(state);
            return false;
        }
        usleep(1000);
    }
}

void TransportTest::expect_remote_error(const Pair& p, uint64_t wr_id, ibv_wc_status status,
                                        uint64_t flushed_id, ibv_event_type event) {
    expect_error(p.a.scq, p.a.qpn(), wr_id, status, "the failing WR");
    if (flushed_id) expect_error(p.a.scq, p.a.qpn(), flushed_id, IBV_WC_WR_FLUSH_ERR, "behind it");
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
    EXPECT_TRUE(wait_state(p.b.qp, IBV_QPS_ERR));
    ibv_async_event ev = next_async(*p.b.side);
    EXPECT_EQ(ev.event_type, event)
        << ibv_event_type_str(ev.event_type) << ", want " << ibv_event_type_str(event);
    EXPECT_EQ(ev.element.qp, p.b.qp);
    expect_no_async(*p.a.side, 0);
}

bool TransportTest::try_async(Side& s, ibv_async_event* ev, double timeout) {
    pollfd p{s.ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, int(timeout * 1000)) != 1) return false;
    if (ibv_get_async_event(s.ctx, ev) != 0) return false;
    // Acknowledged at once (destroying the object waits for that); the event's fields stay
    // valid for the comparison.
    ibv_async_event copy = *ev;
    ibv_ack_async_event(&copy);
    return true;
}

ibv_async_event TransportTest::next_async(Side& s, double timeout) {
    ibv_async_event ev{};
    bool got = try_async(s, &ev, timeout);
    [&] { ASSERT_TRUE(got) << s.name << ": no async event within " << timeout << " s"; }();
    if (!got) ev.event_type = ibv_event_type(-1);
    return ev;
}

void TransportTest::expect_no_async(Side& s, int ms) {
    ibv_async_event ev{};
    if (try_async(s, &ev, ms / 1000.0))
        ADD_FAILURE() << s.name << ": unexpected async event " << ibv_event_type_str(ev.event_type);
}

std::string cli(const std::string& args) {
    return verbs_util::command_output("'" + cli_path() + "' " + args + " 2>&1");
}

long qp_drops(const Side& s, uint32_t qpn, const char* reason) {
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "qp_counters 0x%x drop %s ", qpn, reason);
    long n = counter(cli(std::string("counters ") + s.name), prefix, reason);
    return n < 0 ? 0 : n;
}

long wait_qp_drops(const Side& s, uint32_t qpn, const char* reason, long want) {
    long n = qp_drops(s, qpn, reason);
    for (int i = 0; i < 100 && n < want; ++i) {
        usleep(10000);
        n = qp_drops(s, qpn, reason);
    }
    return n;
}

long counter(const std::string& dump, const std::string& line_prefix, const std::string& key) {
    return verbs_util::counter(dump, line_prefix, key);
}

}  // namespace uroce::transport_test
