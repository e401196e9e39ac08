// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the two-process pair programs (atomic_write_pair, flush_pair) share, so each holds only
// its own operation and checks: main forks a requester process on DEV_A and a responder on
// DEV_B, which talk over pipes; each opens one RC QP made for the ibv_wr_* interface, they
// trade a Hello (QP number, GID, whatever the program adds) and move their QPs to RTS.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "verbs_checks.h"

namespace rc_pair {

inline void put(int fd, const void* p, size_t n) {
    REQUIRE(write(fd, p, n) == ssize_t(n), "pipe write: %s", std::strerror(errno));
}

inline void get(int fd, void* p, size_t n) {
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
    int to_peer = -1, from_peer = -1;  // the pipes
    std::vector<ibv_mr*> mrs;          // deregistered after the QP is destroyed

    // Registers `len` bytes at `p` with `access`, or ends the program (`what` names the MR).
    ibv_mr* reg(void* p, size_t len, int access, const char* what = "reg_mr") {
        ibv_mr* mr = ibv_reg_mr(pd, p, len, access);
        REQUIRE(mr, "%s: %s", what, std::strerror(errno));
        mrs.push_back(mr);
        return mr;
    }
};

// Opens `dev` with an RC QP created with `send_ops` (IBV_QP_EX_WITH_*, named `ops` in the
// message when the device refuses them).
inline void open_side(Side& s, const char* dev, uint64_t send_ops, const char* ops) {
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
    a.send_ops_flags = send_ops;
    s.qp = ibv_create_qp_ex(s.ctx, &a);
    REQUIRE(s.qp, "create_qp_ex with %s: %s", ops, std::strerror(errno));
}

// The set-up: the responder tells its Hello first and the requester answers with its own;
// both move their QPs to RTS (PSN `psn` both ways, MTU 1024, 4 reads or atomics in flight,
// QP access `access`) and the requester then waits until the responder's QP is ready for
// its first packet. Returns the peer's Hello.
template <class Hello>
Hello meet(Side& s, bool responder, const Hello& me, uint32_t psn, int access) {
    Hello peer;
    if (responder) {
        put(s.to_peer, &me, sizeof me);
        get(s.from_peer, &peer, sizeof peer);
    } else {
        get(s.from_peer, &peer, sizeof peer);
        put(s.to_peer, &me, sizeof me);
    }
    uroce::verbs_util::PathAttrs p;
    p.access = access;
    p.max_rd_atomic = p.max_dest_rd_atomic = 4;
    rc_to_rts(s.qp, peer.gid, peer.qpn, psn, p);
    char ready = 'r';
    if (responder)
        put(s.to_peer, &ready, 1);
    else
        get(s.from_peer, &ready, 1);
    return peer;
}

// The next completion: `wr_id` with `status` (and, when successful, `opcode`, `byte_len`).
inline void expect_done(ibv_cq* cq, uint64_t wr_id, ibv_wc_status status, uint32_t opcode,
                        uint32_t byte_len) {
    ibv_wc wc{};
    REQUIRE(uroce::verbs_util::poll_one(cq, &wc, 10.0) == 1, "no completion for wr %llu",
            static_cast<unsigned long long>(wr_id));
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

// A process's part; its CHECKs count in g_failures.
using Role = void (*)(Side& s, const char* dev);

// After a part: its QP destroyed, then its MRs deregistered. 0 when all its checks held.
inline int finish(Side& s) {
    if (s.qp) ibv_destroy_qp(s.qp);
    for (ibv_mr* mr : s.mrs) ibv_dereg_mr(mr);
    return g_failures ? 1 : 0;
}

// The program's main: usage DEV_A DEV_B. Forks; the child runs `responder` on DEV_B, the
// parent `requester` on DEV_A, each with its Side's pipes to the other set. Prints "all checks
// passed" and returns 0 when both parts held.
inline int run(int argc, char** argv, Role requester, Role responder) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DEV_A DEV_B\n", argv[0]);
        return 2;
    }
    int down[2], up[2];  // parent -> child, child -> parent
    REQUIRE(pipe(down) == 0 && pipe(up) == 0, "pipe: %s", std::strerror(errno));
    std::fflush(nullptr);
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", std::strerror(errno));
    const bool responds = child == 0;
    close(responds ? down[1] : down[0]);  // the child reads `down` and writes `up`
    close(responds ? up[0] : up[1]);
    Side s;
    s.to_peer = responds ? up[1] : down[1];
    s.from_peer = responds ? down[0] : up[0];
    g_role = responds ? "responder" : "requester";
    (responds ? responder : requester)(s, argv[responds ? 2 : 1]);
    int rc = finish(s);
    if (responds) std::exit(rc);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child, "waitpid: %s", std::strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "the responder failed (status 0x%x)\n", status);
        rc = 1;
    }
    if (rc == 0) std::printf("all checks passed\n");
    return rc;
}

}  // namespace rc_pair
