// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA FLUSH between two processes on two devices, through the verbs API: ibv_wr_flush where
// the system's headers have it (UROCE_HAVE_WR_FLUSH), else the same member of ibv_qp_ex as
// rdma-core 56 lays it out (emu/abi/flush.h), which a program built on Debian 13 calls.
//
// usage: flush_pair DEV_A DEV_B
//   The program forks. The child (responder) opens DEV_B and registers a 256-byte buffer with
//   LOCAL_WRITE | REMOTE_WRITE | FLUSH_GLOBAL | FLUSH_PERSISTENT and a 64-byte one without the
//   flush flags. The parent (requester) opens DEV_A and posts, in one ibv_wr_* batch, an RDMA
//   WRITE of 128 bytes and a global-visibility FLUSH of that range; then a persistent FLUSH of
//   the whole MR; each must complete (IBV_WC_RDMA_WRITE 128, IBV_WC_FLUSH 128, IBV_WC_FLUSH 0)
//   and the child then finds the bytes. Last, a FLUSH to the MR without the flags must
//   complete with IBV_WC_REM_ACCESS_ERR and the child's QP report IBV_EVENT_QP_ACCESS_ERR.
// On the wire: 1 RC_RDMA_WRITE_ONLY and 3 RC_FLUSH one way, 2 zero-length
// RC_RDMA_READ_RESPONSE_ONLY and the NAK the other (flush_test.sh checks the capture).
// Exits 0 when every check holds; prints each mismatch and exits 1 otherwise.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "emu/abi/flush.h"
#include "verbs_checks.h"

namespace {

using namespace uroce;

constexpr size_t kLen = 256, kPlainLen = 64, kWriteLen = 128;
constexpr uint8_t kPoison = 0xE7;
constexpr uint32_t kPsn = 0x1c1c;
constexpr int kFlushAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             int(abi::kAccessFlushGlobal | abi::kAccessFlushPersistent);

// What each side tells the other.
struct Hello {
    uint32_t qpn;
    ibv_gid gid;
    uint32_t rkey, plain_rkey;
    uint64_t addr, plain_addr;
};

uint8_t pattern(size_t i) { return uint8_t(0x30 + i * 5); }

void put(int fd, const void* p, size_t n) {
    REQUIRE(write(fd, p, n) == ssize_t(n), "pipe write: %s", std::strerror(errno));
}

void get(int fd, void* p, size_t n) {
    pollfd pf{fd, POLLIN, 0};
    REQUIRE(poll(&pf, 1, 30000) == 1, "no word from the other process in 30 s");
    REQUIRE(read(fd, p, n) == ssize_t(n), "pipe read: %s", std::strerror(errno));
}

struct Side {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_gid gid{};
};

// An RC QP created with IBV_QP_EX_WITH_FLUSH and RDMA_WRITE (the ibv_wr_* interface).
void open_side(Side& s, const char* dev) {
    s.ctx = open_by_name(dev);
    REQUIRE(ibv_query_gid(s.ctx, 1, 0, &s.gid) == 0, "query_gid");
    s.pd = ibv_alloc_pd(s.ctx);
    s.cq = ibv_create_cq(s.ctx, 16, nullptr, nullptr, 0);
    REQUIRE(s.pd && s.cq, "alloc_pd/create_cq: %s", std::strerror(errno));
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_RC;
    a.send_cq = a.recv_cq = s.cq;
    a.cap.max_send_wr = a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = s.pd;
    a.send_ops_flags = abi::kQpExWithFlush | IBV_QP_EX_WITH_RDMA_WRITE;
    s.qp = ibv_create_qp_ex(s.ctx, &a);
    REQUIRE(s.qp, "create_qp_ex with IBV_QP_EX_WITH_FLUSH: %s", std::strerror(errno));
}

void to_rts(Side& s, const Hello& peer) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | int(abi::kAccessFlush);  // as rxe wants
    int e = ibv_modify_qp(s.qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    REQUIRE(e == 0, "INIT: %s", std::strerror(e));
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = kPsn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    e = ibv_modify_qp(s.qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    REQUIRE(e == 0, "RTR: %s", std::strerror(e));
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = kPsn;
    a.max_rd_atomic = 4;
    e = ibv_modify_qp(s.qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    REQUIRE(e == 0, "RTS: %s", std::strerror(e));
}

// The next completion: `wr_id` with `status` (and, when successful, `opcode`, `byte_len`).
void expect_done(ibv_cq* cq, uint64_t wr_id, ibv_wc_status status, uint32_t opcode,
                 uint32_t byte_len) {
    ibv_wc wc{};
    int n = 0;
    for (int spins = 0; n == 0 && spins < 10000; ++spins) {
        n = ibv_poll_cq(cq, 1, &wc);
        if (n == 0) usleep(1000);
    }
    REQUIRE(n == 1, "no completion for wr %llu", static_cast<unsigned long long>(wr_id));
    CHECK(wc.wr_id == wr_id, "wr_id %llu, want %llu", static_cast<unsigned long long>(wc.wr_id),
          static_cast<unsigned long long>(wr_id));
    CHECK(wc.status == status, "wr %llu: %s, want %s", static_cast<unsigned long long>(wr_id),
          ibv_wc_status_str(wc.status), ibv_wc_status_str(status));
    if (status != IBV_WC_SUCCESS) return;
    CHECK(uint32_t(wc.opcode) == opcode, "wr %llu: opcode %d, want %u",
          static_cast<unsigned long long>(wr_id), wc.opcode, opcode);
    CHECK(wc.byte_len == byte_len, "wr %llu: byte_len %u, want %u",
          static_cast<unsigned long long>(wr_id), wc.byte_len, byte_len);
}

void wr_flush(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, size_t len, uint8_t type, uint8_t level) {
#ifdef UROCE_HAVE_WR_FLUSH
    ibv_wr_flush(x, rkey, addr, len, type, level);
#else
    static_cast<abi::QpEx*>(x)->wr_flush(x, rkey, addr, len, type, level);
#endif
}

int responder(const char* dev, int to_parent, int from_parent) {
    g_role = "responder";
    Side s;
    open_side(s, dev);
    alignas(64) static uint8_t buf[kLen], plain[kPlainLen];
    std::memset(buf, kPoison, kLen);
    std::memset(plain, kPoison, kPlainLen);
    ibv_mr* mr = ibv_reg_mr(s.pd, buf, kLen, kFlushAccess);
    REQUIRE(mr, "reg_mr with the flush flags: %s", std::strerror(errno));
    ibv_mr* pmr =
        ibv_reg_mr(s.pd, plain, kPlainLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    REQUIRE(pmr, "reg_mr: %s", std::strerror(errno));
    Hello me{s.qp->qp_num,
             s.gid,
             mr->rkey,
             pmr->rkey,
             reinterpret_cast<uintptr_t>(buf),
             reinterpret_cast<uintptr_t>(plain)};
    put(to_parent, &me, sizeof me);
    Hello peer;
    get(from_parent, &peer, sizeof peer);
    to_rts(s, peer);
    put(to_parent, "r", 1);
    char done;
    get(from_parent, &done, 1);  // the WRITE and the FLUSHes completed
    for (size_t i = 0; i < kLen; ++i) {
        uint8_t want = i < kWriteLen ? pattern(i) : kPoison;
        CHECK(buf[i] == want, "byte %zu is 0x%02x, want 0x%02x", i, buf[i], want);
    }
    put(to_parent, "c", 1);
    get(from_parent, &done, 1);  // the refused FLUSH completed
    pollfd pf{s.ctx->async_fd, POLLIN, 0};
    REQUIRE(poll(&pf, 1, 10000) == 1, "no async event for the refused FLUSH");
    ibv_async_event ev;
    REQUIRE(ibv_get_async_event(s.ctx, &ev) == 0, "ibv_get_async_event");
    CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == s.qp,
          "async event %s, want QP_ACCESS_ERR on the QP", ibv_event_type_str(ev.event_type));
    ibv_ack_async_event(&ev);
    for (size_t i = 0; i < kPlainLen; ++i)
        CHECK(plain[i] == kPoison, "plain byte %zu changed to 0x%02x", i, plain[i]);
    ibv_destroy_qp(s.qp);
    ibv_dereg_mr(mr);
    ibv_dereg_mr(pmr);
    return g_failures ? 1 : 0;
}

int requester(const char* dev, int to_child, int from_child) {
    g_role = "requester";
    Side s;
    open_side(s, dev);
    Hello peer;
    get(from_child, &peer, sizeof peer);
    Hello me{s.qp->qp_num, s.gid, 0, 0, 0, 0};
    put(to_child, &me, sizeof me);
    to_rts(s, peer);
    char ready;
    get(from_child, &ready, 1);

    ibv_device_attr_ex attr{};
    REQUIRE(ibv_query_device_ex(s.ctx, nullptr, &attr) == 0, "ibv_query_device_ex");
    CHECK((attr.device_cap_flags_ex & abi::kDeviceFlushGlobal) &&
              (attr.device_cap_flags_ex & abi::kDeviceFlushPersistent),
          "device_cap_flags_ex 0x%llx lacks the flush bits",
          static_cast<unsigned long long>(attr.device_cap_flags_ex));

    static uint8_t src[kWriteLen];
    for (size_t i = 0; i < kWriteLen; ++i) src[i] = pattern(i);
    ibv_mr* mr = ibv_reg_mr(s.pd, src, kWriteLen, 0);
    REQUIRE(mr, "reg_mr: %s", std::strerror(errno));
    ibv_qp_ex* x = ibv_qp_to_qp_ex(s.qp);
    REQUIRE(x && static_cast<abi::QpEx*>(x)->wr_flush, "no wr_flush on an RC QP");
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, peer.rkey, peer.addr);
    ibv_wr_set_sge(x, mr->lkey, reinterpret_cast<uintptr_t>(src), kWriteLen);
    x->wr_id = 2;
    wr_flush(x, peer.rkey, peer.addr, kWriteLen, abi::kFlushGlobal, abi::kFlushRange);
    x->wr_id = 3;
    wr_flush(x, peer.rkey, 0, 0, abi::kFlushPersistent, abi::kFlushMr);
    REQUIRE(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    expect_done(s.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, kWriteLen);
    expect_done(s.cq, 2, IBV_WC_SUCCESS, abi::kWcFlush, kWriteLen);
    expect_done(s.cq, 3, IBV_WC_SUCCESS, abi::kWcFlush, 0);
    put(to_child, "d", 1);
    char checked;
    get(from_child, &checked, 1);

    ibv_wr_start(x);
    x->wr_id = 4;
    x->wr_flags = IBV_SEND_SIGNALED;
    wr_flush(x, peer.plain_rkey, peer.plain_addr, kPlainLen, abi::kFlushGlobal, abi::kFlushRange);
    REQUIRE(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    expect_done(s.cq, 4, IBV_WC_REM_ACCESS_ERR, 0, 0);
    put(to_child, "e", 1);
    ibv_destroy_qp(s.qp);
    ibv_dereg_mr(mr);
    return g_failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DEV_A DEV_B\n", argv[0]);
        return 2;
    }
    int down[2], up[2];  // parent -> child, child -> parent
    REQUIRE(pipe(down) == 0 && pipe(up) == 0, "pipe: %s", std::strerror(errno));
    std::fflush(nullptr);
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", std::strerror(errno));
    if (child == 0) {
        close(down[1]);
        close(up[0]);
        std::exit(responder(argv[2], up[1], down[0]));
    }
    close(down[0]);
    close(up[1]);
    int rc = requester(argv[1], down[1], up[0]);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child, "waitpid: %s", std::strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "the responder failed (status 0x%x)\n", status);
        rc = 1;
    }
    if (rc == 0) std::printf("all checks passed\n");
    return rc;
}
