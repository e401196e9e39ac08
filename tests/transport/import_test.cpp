// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Importing a context and its objects (ibv_import_device(3), ibv_import_pd(3),
// ibv_import_mr(3)): a dup of a context's cmd_fd opens a second context on the same
// device session, whose PDs and MRs it names by handle. Traffic runs through a QP of the
// imported context with the imported PD and MR; unimporting leaves the objects, deallocating
// an imported PD destroys it; the session outlives the context that opened it.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class Import : public TransportTest {
protected:
    void TearDown() override {
        TransportTest::TearDown();  // the QPs and CQs made through `imported_` first
        if (imported_.pd) ibv_unimport_pd(imported_.pd);
        if (imported_.ctx) {
            EXPECT_EQ(ibv_close_device(imported_.ctx), 0);
        }
    }
    // Imports A's context from a dup of its cmd_fd.
    ibv_context* import_a() {
        int fd = dup(A().ctx->cmd_fd);
        EXPECT_GE(fd, 0);
        ibv_context* c = ibv_import_device(fd);
        EXPECT_NE(c, nullptr) << std::strerror(errno);
        if (!c) close(fd);
        return c;
    }
    // A's context imported, A's PD imported into it, and an RC QP of the imported context
    // on that PD connected to one of B.
    Pair imported_pair() {
        Pair p;
        imported_ = A();
        imported_.pd = nullptr;
        imported_.ctx = import_a();
        if (!imported_.ctx) return p;
        imported_.pd = ibv_import_pd(imported_.ctx, A().pd->handle);
        EXPECT_NE(imported_.pd, nullptr) << std::strerror(errno);
        if (!imported_.pd) return p;
        QpOpts o;
        p.a = make_qp(imported_, o, true);
        p.b = make_qp(B(), o, false);
        if (!p.a.qp || !p.b.qp) return p;
        connect_qp(p.a, B(), p.b.qpn(), o, o.psn_a, o.psn_b);
        connect_qp(p.b, imported_, p.a.qpn(), o, o.psn_b, o.psn_a);
        return p;
    }
    Side imported_;
};

TEST_F(Import, TrafficThroughImportedPdAndMr) {
    Pair p = imported_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    const Endpoint &a = p.a, &b = p.b;
    EXPECT_NE(imported_.ctx, A().ctx);
    EXPECT_EQ(imported_.ctx->device, A().ctx->device);
    EXPECT_NE(imported_.ctx->cmd_fd, A().ctx->cmd_fd);  // the dup, which it now owns
    EXPECT_EQ(imported_.ctx->async_fd, -1);             // as rdma-core's: none of its own
    ibv_device_attr attr{};
    EXPECT_EQ(ibv_query_device(imported_.ctx, &attr), 0);
    EXPECT_EQ(imported_.pd->handle, A().pd->handle);
    EXPECT_EQ(imported_.pd->context, imported_.ctx);
    Buffer& mine = reg(A(), 8192);
    ibv_mr* mr = ibv_import_mr(imported_.pd, mine.mr->handle);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    EXPECT_EQ(mr->lkey, mine.lkey());
    EXPECT_EQ(mr->rkey, mine.rkey());
    EXPECT_EQ(mr->length, 8192u);
    EXPECT_EQ(mr->addr, nullptr);  // as rdma-core's: keys and length only
    EXPECT_EQ(mr->pd, imported_.pd);
    EXPECT_EQ(mr->context, imported_.ctx);

    // B writes into the MR through the imported rkey; the imported QP sends from it.
    Buffer& theirs = reg(B(), 8192);
    theirs.fill(3);
    std::vector<ibv_sge> s1{theirs.sge(0, 4096)};
    ibv_send_wr w1 = rdma_wr(1, IBV_WR_RDMA_WRITE, s1, mine.addr(), mr->rkey);
    ASSERT_EQ(post(b.qp, w1), 0);
    expect_send_ok(b, 1, IBV_WC_RDMA_WRITE, 4096);
    EXPECT_EQ(mine.mismatch(3, 0, 4096), -1);

    ASSERT_EQ(post_recv(b.qp, 2, {theirs.sge(4096, 4096)}), 0);
    std::vector<ibv_sge> s2{{mine.addr(), 4096, mr->lkey}};
    ibv_send_wr w2 = wr(3, IBV_WR_SEND, s2);
    ASSERT_EQ(post(a.qp, w2), 0);
    expect_send_ok(a, 3, IBV_WC_SEND, 4096);
    expect_recv_ok(b, 2, IBV_WC_RECV, 4096, a.qpn());
    EXPECT_EQ(theirs.mismatch(3, 4096, 4096), -1);

    // Unimporting leaves the MR: A's handle still deregisters it.
    ibv_unimport_mr(mr);
    errno = 0;
    EXPECT_EQ(ibv_import_mr(imported_.pd, 0x7fffff00), nullptr);
    EXPECT_EQ(errno, ENOENT);  // no MR of that handle, as the kernel's lookup
    errno = 0;
    EXPECT_EQ(ibv_import_pd(imported_.ctx, 0x7fffff), nullptr);
    EXPECT_EQ(errno, ENOENT);
}

// The async events of an imported context's QP come on the session's one event pipe,
// which the original context reads.
TEST_F(Import, EventsOfImportedObjectsReachTheOriginal) {
    Pair p = imported_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    const Endpoint &a = p.a, &b = p.b;
    // B writes to a key A's device does not know: the responder (the imported QP) goes to
    // the error state with IBV_EVENT_QP_ACCESS_ERR.
    Buffer& theirs = reg(B(), 64);
    std::vector<ibv_sge> s{theirs.sge(0, 64)};
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, s, 0x1000, 0xdead00);
    ASSERT_EQ(post(b.qp, w), 0);
    expect_error(b.scq, b.qpn(), 1, IBV_WC_REM_ACCESS_ERR);
    ibv_async_event ev = next_async(A());
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
    EXPECT_EQ(ev.element.qp, a.qp);  // next_async acknowledged it
}

// ibv_unimport_pd frees only the library's object: a QP made on the imported PD goes on
// working and is destroyed later without reading it (rdma-core's suite does exactly this;
// the ASan build checks that nothing reads the freed PD).
TEST_F(Import, QpOutlivesItsUnimportedPd) {
    Pair p = imported_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    ibv_unimport_pd(imported_.pd);
    imported_.pd = nullptr;
    Buffer& mine = reg(A(), 64);
    Buffer& theirs = reg(B(), 64);
    mine.fill(5);
    ASSERT_EQ(post_recv(p.b.qp, 1, {theirs.sge(0, 64)}), 0);
    std::vector<ibv_sge> s{mine.sge(0, 64)};
    ibv_send_wr w = wr(2, IBV_WR_SEND, s);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_send_ok(p.a, 2, IBV_WC_SEND, 64);
    expect_recv_ok(p.b, 1, IBV_WC_RECV, 64, p.a.qpn());
    EXPECT_EQ(theirs.mismatch(5, 0, 64), -1);
    destroy_qp(p.a);
}

// Deallocating an imported PD destroys it (ibv_import_pd(3)); the original's struct is
// then only memory, which ibv_unimport_pd frees.
TEST_F(Import, DeallocOfImportedPdDestroysIt) {
    ibv_context* c = import_a();
    ASSERT_NE(c, nullptr);
    ibv_pd* pd = ibv_alloc_pd(A().ctx);
    ASSERT_NE(pd, nullptr);
    ibv_pd* same = ibv_import_pd(c, pd->handle);
    ASSERT_NE(same, nullptr) << std::strerror(errno);
    EXPECT_EQ(ibv_dealloc_pd(same), 0);
    errno = 0;
    EXPECT_EQ(ibv_import_pd(A().ctx, pd->handle), nullptr);
    EXPECT_EQ(errno, ENOENT);
    EXPECT_EQ(ibv_dealloc_pd(pd), EINVAL);  // gone on the device
    ibv_unimport_pd(pd);
    EXPECT_EQ(ibv_close_device(c), 0);
}

// The session lives while any context on it does: closing the one that opened the device
// leaves the imported one and the objects working.
TEST_F(Import, SessionOutlivesTheOriginalContext) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ibv_context* orig = nullptr;
    for (int i = 0; i < n; ++i)
        if (std::strcmp(ibv_get_device_name(list[i]), kDeviceNames[0]) == 0)
            orig = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    ASSERT_NE(orig, nullptr);
    ibv_pd* pd = ibv_alloc_pd(orig);
    ASSERT_NE(pd, nullptr);
    int fd = dup(orig->cmd_fd);
    ibv_context* c = ibv_import_device(fd);
    ASSERT_NE(c, nullptr) << std::strerror(errno);
    const uint32_t handle = pd->handle;
    ibv_unimport_pd(pd);  // only the struct: the original is about to go
    EXPECT_EQ(ibv_close_device(orig), 0);

    ibv_pd* kept = ibv_import_pd(c, handle);
    ASSERT_NE(kept, nullptr) << std::strerror(errno);
    static char buf[4096];
    ibv_mr* mr = ibv_reg_mr(kept, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    ibv_cq* cq = ibv_create_cq(c, 4, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr) << std::strerror(errno);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_dealloc_pd(kept), 0);
    EXPECT_EQ(ibv_close_device(c), 0);
}

TEST_F(Import, WhatCannotBeImported) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    errno = 0;
    EXPECT_EQ(ibv_import_device(p[0]), nullptr);  // not a socket (rdma-core: no uverbs file)
    EXPECT_EQ(errno, EINVAL);
    close(p[0]);
    close(p[1]);
    errno = 0;
    EXPECT_EQ(ibv_import_device(-1), nullptr);
    EXPECT_EQ(errno, EINVAL);
    int sp[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
    errno = 0;
    EXPECT_EQ(ibv_import_device(sp[0]), nullptr);  // a socket, but no device's
    EXPECT_EQ(errno, ENODEV);
    close(sp[0]);
    close(sp[1]);

    // Another process (here a child after fork) cannot use the session: the device reaches
    // the memory of the process that opened it.
    int fd = dup(A().ctx->cmd_fd);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ibv_context* c = ibv_import_device(fd);
        _exit(c == nullptr && errno == EOPNOTSUPP ? 0 : 1);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
    close(fd);
    // ibv_import_dm stays unsupported: there is no device memory.
    errno = 0;
    EXPECT_EQ(ibv_import_dm(A().ctx, 1), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
}

}  // namespace
}  // namespace uroce::transport_test
