// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA ATOMIC WRITE between two processes on two devices, through the public verbs API (built
// against the system's <infiniband/verbs.h>, run over the drop-in libibverbs).
//
// usage: atomic_write_pair DEV_A DEV_B
//   The program forks. The child (responder) opens DEV_B and registers a 64-byte buffer of
//   0xE7 with LOCAL_WRITE | REMOTE_WRITE only; the parent (requester) opens DEV_A and writes
//   into its word at offset 16 with ibv_wr_atomic_write (kFirst), then with ibv_post_send's
//   IBV_WR_ATOMIC_WRITE from a registered 8-byte SGE (kSecond). Each must complete with
//   IBV_WC_ATOMIC_WRITE, 8 bytes. The child then checks that the word holds kSecond and that
//   no other byte changed. The two talk over pipes (QP numbers, GIDs, the key and address).
// Exits 0 when every check holds; prints each mismatch and exits 1 otherwise.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "verbs_checks.h"

namespace {

constexpr size_t kLen = 64, kWordOff = 16;
constexpr uint8_t kPoison = 0xE7;
constexpr uint64_t kFirst = 0x1122334455667788ull, kSecond = 0x0a0b0c0d0e0f1011ull;
constexpr uint32_t kPsn = 0x777;

// What each side tells the other.
struct Hello {
    uint32_t qpn;
    ibv_gid gid;
    uint32_t rkey;
    uint64_t addr;
};

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

// An RC QP created with IBV_QP_EX_WITH_ATOMIC_WRITE (the ibv_wr_* interface).
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
    a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    s.qp = ibv_create_qp_ex(s.ctx, &a);
    REQUIRE(s.qp, "create_qp_ex with IBV_QP_EX_WITH_ATOMIC_WRITE: %s", std::strerror(errno));
}

void to_rts(Side& s, const Hello& peer) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
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

// The next completion, which must be a successful 8-byte ATOMIC WRITE of `wr_id`.
void expect_atomic_write_done(ibv_cq* cq, uint64_t wr_id) {
    ibv_wc wc{};
    int n = 0;
    for (int spins = 0; n == 0 && spins < 10000; ++spins) {
        n = ibv_poll_cq(cq, 1, &wc);
        if (n == 0) usleep(1000);
    }
    REQUIRE(n == 1, "no completion for wr %llu", static_cast<unsigned long long>(wr_id));
    CHECK(wc.status == IBV_WC_SUCCESS, "wr %llu: %s", static_cast<unsigned long long>(wr_id),
          ibv_wc_status_str(wc.status));
    CHECK(wc.wr_id == wr_id, "wr_id %llu", static_cast<unsigned long long>(wc.wr_id));
    CHECK(wc.opcode == IBV_WC_ATOMIC_WRITE, "opcode %d, want IBV_WC_ATOMIC_WRITE", wc.opcode);
    CHECK(wc.byte_len == 8, "byte_len %u", wc.byte_len);
}

int responder(const char* dev, int to_parent, int from_parent) {
    g_role = "responder";
    Side s;
    open_side(s, dev);
    alignas(8) static uint8_t buf[kLen];
    std::memset(buf, kPoison, kLen);
    ibv_mr* mr = ibv_reg_mr(s.pd, buf, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    REQUIRE(mr, "reg_mr: %s", std::strerror(errno));
    Hello me{s.qp->qp_num, s.gid, mr->rkey, reinterpret_cast<uintptr_t>(buf + kWordOff)};
    put(to_parent, &me, sizeof me);
    Hello peer;
    get(from_parent, &peer, sizeof peer);
    to_rts(s, peer);
    put(to_parent, "r", 1);
    char done;
    get(from_parent, &done, 1);  // the requester's writes completed
    uint64_t word;
    std::memcpy(&word, buf + kWordOff, 8);
    CHECK(word == kSecond, "the word holds 0x%016llx, want 0x%016llx",
          static_cast<unsigned long long>(word), static_cast<unsigned long long>(kSecond));
    for (size_t i = 0; i < kLen; ++i)
        if (i < kWordOff || i >= kWordOff + 8)
            CHECK(buf[i] == kPoison, "byte %zu changed to 0x%02x", i, buf[i]);
    ibv_destroy_qp(s.qp);
    ibv_dereg_mr(mr);
    return g_failures ? 1 : 0;
}

int requester(const char* dev, int to_child, int from_child) {
    g_role = "requester";
    Side s;
    open_side(s, dev);
    Hello peer;
    get(from_child, &peer, sizeof peer);
    Hello me{s.qp->qp_num, s.gid, 0, 0};
    put(to_child, &me, sizeof me);
    to_rts(s, peer);
    char ready;
    get(from_child, &ready, 1);

    ibv_qp_ex* x = ibv_qp_to_qp_ex(s.qp);
    REQUIRE(x && x->wr_atomic_write, "no ibv_wr_atomic_write on an RC QP");
    uint64_t v = kFirst;
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, peer.rkey, peer.addr, &v);
    REQUIRE(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    expect_atomic_write_done(s.cq, 1);

    alignas(8) static uint64_t src = kSecond;
    ibv_mr* mr = ibv_reg_mr(s.pd, &src, 8, 0);
    REQUIRE(mr, "reg_mr: %s", std::strerror(errno));
    ibv_sge sge{reinterpret_cast<uintptr_t>(&src), 8, mr->lkey};
    ibv_send_wr w{};
    w.wr_id = 2;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_ATOMIC_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = peer.addr;
    w.wr.rdma.rkey = peer.rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(s.qp, &w, &bad) == 0, "ibv_post_send IBV_WR_ATOMIC_WRITE");
    expect_atomic_write_done(s.cq, 2);
    put(to_child, "d", 1);
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
