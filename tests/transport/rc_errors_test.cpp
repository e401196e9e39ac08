// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RC completion errors, as ibv_poll_cq(3) names them and IBTA 9.9 / 10.8 say where they
// end: the failing WR completes with its status, every WR queued behind it (and every
// receive) with IBV_WC_WR_FLUSH_ERR, the requester's QP is in ERR; for an error the
// responder detects, the responder's QP is in ERR too and its owner gets the affiliated
// asynchronous event. Posting to a QP in ERR still works: the WRs are flushed.
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class RcErrors : public TransportTest {
protected:
    // A WRITE without REMOTE_WRITE rights from p.a: its error completion, and p.b in ERR
    // with IBV_EVENT_QP_ACCESS_ERR queued for its owner.
    void provoke_access_error(Pair& p) {
        Buffer& local = reg(A(), 64);
        Buffer& target = reg(B(), 64, kAllAccess & ~IBV_ACCESS_REMOTE_WRITE);
        std::vector<ibv_sge> sg{local.sge(0, 64)};
        ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_WRITE, sg, target.addr(0), target.rkey());
        ASSERT_EQ(post(p.a.qp, w), 0);
        expect_error(p.a.scq, p.a.qpn(), 1, IBV_WC_REM_ACCESS_ERR, "the failing WR");
        EXPECT_TRUE(wait_state(p.b.qp, IBV_QPS_ERR));
    }
    // Posts `n` SENDs of 8 bytes (wr_id first..first+n-1) behind whatever is queued.
    void queue_sends(Endpoint& e, Buffer& b, uint64_t first, int n) {
        for (int i = 0; i < n; ++i) {
            std::vector<ibv_sge> sg{b.sge(0, 8)};
            ibv_send_wr w = wr(first + i, IBV_WR_SEND, sg);
            ASSERT_EQ(post(e.qp, w), 0);
        }
    }
    void expect_flushed(ibv_cq* cq, uint32_t qpn, uint64_t first, int n) {
        for (int i = 0; i < n; ++i)
            expect_error(cq, qpn, first + i, IBV_WC_WR_FLUSH_ERR, "flushed");
        expect_empty(cq, 0);
    }
    // p.a's WR `id`, just posted, fails with `status` (`what`) and the `behind` SENDs of `b`
    // then queued (wr_ids from id + 1) are flushed; p.a ends in ERR, p.b stays in RTS.
    void expect_fails_and_flushes(Pair& p, uint64_t id, ibv_wc_status status, const char* what,
                                  Buffer& b, int behind) {
        queue_sends(p.a, b, id + 1, behind);
        expect_error(p.a.scq, p.a.qpn(), id, status, what);
        expect_flushed(p.a.scq, p.a.qpn(), id + 1, behind);
        EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
        EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
    }
    // The event B's owner must get for B's QP.
    void expect_event(Side& s, ibv_qp* qp, ibv_event_type type) {
        ibv_async_event ev = next_async(s);
        EXPECT_EQ(ev.event_type, type)
            << ibv_event_type_str(ev.event_type) << ", want " << ibv_event_type_str(type);
        EXPECT_EQ(ev.element.qp, qp);
    }
};

// IBV_WC_LOC_LEN_ERR at the receiver (the message is longer than its receive) and
// IBV_WC_REM_INV_REQ_ERR at the sender: both QPs in ERR, the rest of both queues flushed,
// IBV_EVENT_QP_REQ_ERR for the receiver; the part of the message that fits is not
// delivered past the receive's end.
TEST_F(RcErrors, ReceiveTooSmall) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& src = reg(A(), 4096).fill(81);
    Buffer& dst = reg(B(), 4096);
    ASSERT_EQ(post_recv(p.b.qp, 1, {dst.sge(0, 1000)}), 0);
    ASSERT_EQ(post_recv(p.b.qp, 2, {dst.sge(1000, 3000)}), 0);
    std::vector<ibv_sge> sg{src.sge(0, 2500)};
    ibv_send_wr w = wr(10, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p.a.qp, w), 0);
    queue_sends(p.a, src, 11, 3);
    expect_error(p.a.scq, p.a.qpn(), 10, IBV_WC_REM_INV_REQ_ERR, "the long SEND");
    expect_flushed(p.a.scq, p.a.qpn(), 11, 3);
    expect_error(p.b.rcq, p.b.qpn(), 1, IBV_WC_LOC_LEN_ERR, "the short receive");
    expect_flushed(p.b.rcq, p.b.qpn(), 2, 1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_ERR);
    expect_event(B(), p.b.qp, IBV_EVENT_QP_REQ_ERR);
    expect_no_async(A(), 0);
    EXPECT_EQ(dst.not_poison(1000, 3096), -1) << "written past the receive";
}

// IBV_WC_LOC_PROT_ERR: an lkey that names no MR, an MR of another PD, an MR without
// LOCAL_WRITE as the destination of a READ. Only the requester's QP fails; the responder
// never hears of it.
TEST_F(RcErrors, LocalProtection) {
    ibv_pd* other_pd = alloc_pd(A());
    Buffer& mine = reg(A(), 64);
    Buffer& foreign = reg(A(), 64, kAllAccess, other_pd);
    Buffer& ro = reg(A(), 64, IBV_ACCESS_REMOTE_READ);
    Buffer& remote = reg(B(), 64).fill(82);
    enum { kBadKey, kOtherPd, kReadIntoReadOnly };
    for (int c : {kBadKey, kOtherPd, kReadIntoReadOnly}) {
        SCOPED_TRACE(c);
        Pair p = connect_pair();
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Buffer& rbuf = reg(B(), 64);
        ASSERT_EQ(post_recv(p.b.qp, 1, {rbuf.sge(0, 64)}), 0);
        std::vector<ibv_sge> sg{mine.sge(0, 64)};
        if (c == kBadKey) sg[0].lkey ^= 0x80;
        if (c == kOtherPd) sg[0] = foreign.sge(0, 64);
        if (c == kReadIntoReadOnly) sg[0] = ro.sge(0, 64);
        ibv_send_wr w = c == kReadIntoReadOnly
                            ? rdma_wr(10, IBV_WR_RDMA_READ, sg, remote.addr(0), remote.rkey())
                            : wr(10, IBV_WR_SEND, sg);
        ASSERT_EQ(post(p.a.qp, w), 0);
        expect_fails_and_flushes(p, 10, IBV_WC_LOC_PROT_ERR, "bad local SGE", mine, 2);
        expect_empty(p.b.rcq, 20);
        EXPECT_EQ(ro.not_poison(0, 64), -1);
        EXPECT_EQ(rbuf.not_poison(0, 64), -1);
    }
    expect_no_async(A(), 0);
    expect_no_async(B(), 0);
}

// A receive whose lkey is bad: the responder completes it with IBV_WC_LOC_PROT_ERR and
// NAKs the SEND with a remote operational error (IBV_WC_REM_OP_ERR); both QPs in ERR,
// IBV_EVENT_QP_ACCESS_ERR for the responder.
TEST_F(RcErrors, BadReceiveLkeyIsRemoteOperationalError) {
    Pair p = connect_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), 64);
    ibv_sge bad = dst.sge(0, 64);
    bad.lkey ^= 0x80;
    ASSERT_EQ(post_recv(p.b.qp, 1, {bad}), 0);
    ASSERT_EQ(post_recv(p.b.qp, 2, {dst.sge(0, 64)}), 0);
    std::vector<ibv_sge> sg{src.sge(0, 64)};
    ibv_send_wr w = wr(10, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_error(p.a.scq, p.a.qpn(), 10, IBV_WC_REM_OP_ERR, "SEND into a bad receive");
    expect_error(p.b.rcq, p.b.qpn(), 1, IBV_WC_LOC_PROT_ERR, "the bad receive");
    expect_flushed(p.b.rcq, p.b.qpn(), 2, 1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_ERR);
    expect_event(B(), p.b.qp, IBV_EVENT_QP_ACCESS_ERR);
    EXPECT_EQ(dst.not_poison(0, 64), -1);
}

// IBV_WC_REM_ACCESS_ERR for each missing right: an MR without REMOTE_WRITE / REMOTE_READ /
// REMOTE_ATOMIC, and a QP whose qp_access_flags lack it. (Bad keys and bounds: guard_test.)
TEST_F(RcErrors, RemoteAccessRights) {
    Buffer& local = reg(A(), 64);
    local.fill(83);
    struct Case {
        ibv_wr_opcode op;
        int mr_access;
        int qp_access;
    } cases[] = {
        {IBV_WR_RDMA_WRITE, kAllAccess & ~IBV_ACCESS_REMOTE_WRITE, kAllAccess},
        {IBV_WR_RDMA_READ, kAllAccess & ~IBV_ACCESS_REMOTE_READ, kAllAccess},
        {IBV_WR_ATOMIC_FETCH_AND_ADD, kAllAccess & ~IBV_ACCESS_REMOTE_ATOMIC, kAllAccess},
        {IBV_WR_RDMA_WRITE, kAllAccess, kAllAccess & ~IBV_ACCESS_REMOTE_WRITE},
        {IBV_WR_RDMA_READ, kAllAccess, kAllAccess & ~IBV_ACCESS_REMOTE_READ},
        {IBV_WR_ATOMIC_CMP_AND_SWP, kAllAccess, kAllAccess & ~IBV_ACCESS_REMOTE_ATOMIC},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << "op " << c.op << " MR access " << c.mr_access
                                        << " QP access " << c.qp_access);
        QpOpts o;
        o.access = c.qp_access & ~IBV_ACCESS_LOCAL_WRITE;
        Pair p = connect_pair(o);
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Buffer& target = reg(B(), 64, c.mr_access);
        target.fill(84);
        Buffer& dst = reg(A(), 64);
        std::vector<ibv_sge> sg{c.op == IBV_WR_RDMA_WRITE ? local.sge(0, 64) : dst.sge(0, 8)};
        ibv_send_wr w = c.op == IBV_WR_RDMA_WRITE || c.op == IBV_WR_RDMA_READ
                            ? rdma_wr(1, c.op, sg, target.addr(0), target.rkey())
                            : atomic_wr(1, c.op, sg, target.addr(0), target.rkey(), 1, 2);
        ASSERT_EQ(post(p.a.qp, w), 0);
        expect_remote_error(p, 1, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
        EXPECT_EQ(target.mismatch(84, 0, 64), -1);
        EXPECT_EQ(dst.not_poison(0, 64), -1);
    }
}

// Memory the responder's application unmapped after registering it: the device reads a
// READ's responses in bursts and cannot read the missing page (hardware would still hold
// it pinned). The responses before the hole leave, then the REM_ACCESS_ERR NAK: the
// requester's READ fails with it and the responder's QP enters ERR with QP_ACCESS_ERR.
TEST_F(RcErrors, ReadOfUnmappedMemory) {
    Pair p = connect_pair();  // MTU 1024: the hole is in the second burst of responses
    ASSERT_TRUE(p.a.qp && p.b.qp);
    constexpr size_t kPage = 4096, kLen = 16 * kPage;
    Buffer& target = reg(B(), kLen);
    target.fill(85);
    Buffer& dst = reg(A(), kLen);
    ASSERT_EQ(munmap(target.alloc + 12 * kPage, kPage), 0);  // data bytes 48 KiB - 64 on
    std::vector<ibv_sge> sg{dst.sge(0, kLen)};
    ibv_send_wr w = rdma_wr(1, IBV_WR_RDMA_READ, sg, target.addr(0), target.rkey());
    ASSERT_EQ(post(p.a.qp, w), 0);
    expect_remote_error(p, 1, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
    // The first 47 packets could be read and were sent; what arrived is the target's.
    EXPECT_EQ(dst.mismatch(85, 0, 47 * 1024), -1);
}

// IBV_WC_RNR_RETRY_EXC_ERR: no receive at the responder for rnr_retry + 1 tries. Only the
// requester fails (an RNR NAK changes nothing at the responder). WRITE_WITH_IMM needs a
// receive as SEND does. With rnr_retry 7 the requester waits until a receive is posted.
TEST_F(RcErrors, ReceiverNotReady) {
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), 64);
    src.fill(85);
    for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_RDMA_WRITE_WITH_IMM}) {
        SCOPED_TRACE(op);
        QpOpts o;
        o.rnr_retry = 1;
        o.min_rnr_timer = 1;  // 0.01 ms
        Pair p = connect_pair(o);
        ASSERT_TRUE(p.a.qp && p.b.qp);
        std::vector<ibv_sge> sg{src.sge(0, 64)};
        ibv_send_wr w = rdma_wr(1, op, sg, dst.addr(0), dst.rkey());
        ASSERT_EQ(post(p.a.qp, w), 0);
        expect_fails_and_flushes(p, 1, IBV_WC_RNR_RETRY_EXC_ERR, "no receive", src, 1);
        EXPECT_EQ(dst.not_poison(0, 64), -1);
    }
    QpOpts o;
    o.rnr_retry = 7;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    queue_sends(p.a, src, 5, 1);
    expect_empty(p.a.scq, 100);
    ASSERT_EQ(post_recv(p.b.qp, 6, {dst.sge(0, 64)}), 0);
    expect_send_ok(p.a, 5, IBV_WC_SEND, 8);
    expect_recv_ok(p.b, 6, IBV_WC_RECV, 8, p.a.qpn());
    EXPECT_EQ(dst.mismatch(85, 0, 8), -1);
    expect_no_async(B(), 0);
}

// The RNR budget is per request (IBTA, rxe): progress restores it. 20 SENDs, each refused
// once for want of a receive (the receive is posted only after A has had the RNR NAK), all
// complete with rnr_retry 3; a budget spent over the QP's life would fail the fourth.
TEST_F(RcErrors, RnrBudgetRestoredOnProgress) {
    Buffer& src = reg(A(), 64);
    Buffer& dst = reg(B(), 64);
    src.fill(17);
    QpOpts o;
    o.rnr_retry = 3;
    // The receive must be posted within the budget after the NAK is seen, which takes a
    // `uroce counters` run: 3 tries of 491.52 ms leave 1.5 s for it (a loaded ASan build
    // once took longer than the 3 x 122.88 ms this test had).
    o.min_rnr_timer = 31;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "qp_counters 0x%x rx RC_ACKNOWLEDGE ", p.a.qpn());
    auto acks = [&] {
        long n = counter(cli(std::string("counters ") + A().name), prefix, "pkts");
        return n < 0 ? 0 : n;
    };
    for (uint64_t i = 1; i <= 20; ++i) {
        SCOPED_TRACE(i);
        long before = acks();
        queue_sends(p.a, src, i, 1);
        long now = before;
        for (int k = 0; k < 200 && now == before; ++k) {
            usleep(5000);
            now = acks();
        }
        ASSERT_GT(now, before) << "no RNR NAK came back";
        ASSERT_EQ(post_recv(p.b.qp, 100 + i, {dst.sge(0, 64)}), 0);
        expect_send_ok(p.a, i, IBV_WC_SEND, 8);
        expect_recv_ok(p.b, 100 + i, IBV_WC_RECV, 8, p.a.qpn());
    }
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_GE(acks(), 40);  // an RNR NAK and an ACK for each
}

// IBV_WC_RETRY_EXC_ERR: the peer's QP was destroyed; nothing answers for retry_cnt + 1
// timeouts (timeout 8: the 1 ms minimum). The WRs behind are flushed; posting afterwards
// (the library still thinks RTS) and posting receives are accepted and flushed too.
TEST_F(RcErrors, PeerGone) {
    Pair p = connect_pair({.timeout = 8, .retry_cnt = 2});
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& src = reg(A(), 64);
    Buffer& abuf = reg(A(), 64);
    ASSERT_EQ(post_recv(p.a.qp, 20, {abuf.sge(0, 64)}), 0);
    destroy_qp(p.b);
    queue_sends(p.a, src, 1, 3);
    expect_error(p.a.scq, p.a.qpn(), 1, IBV_WC_RETRY_EXC_ERR, "no answer");
    expect_flushed(p.a.scq, p.a.qpn(), 2, 2);
    expect_flushed(p.a.rcq, p.a.qpn(), 20, 1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
    queue_sends(p.a, src, 30, 2);
    expect_flushed(p.a.scq, p.a.qpn(), 30, 2);
    ASSERT_EQ(post_recv(p.a.qp, 40, {abuf.sge(0, 64)}), 0);
    expect_flushed(p.a.rcq, p.a.qpn(), 40, 1);
    EXPECT_EQ(abuf.not_poison(0, 64), -1);
    expect_no_async(A(), 0);
}

// A QP the application moves to ERR flushes both queues; its peer, whose requests now go
// unanswered, ends in IBV_WC_RETRY_EXC_ERR.
TEST_F(RcErrors, ModifyToErrorFlushes) {
    Pair p = connect_pair({.timeout = 8, .retry_cnt = 1});
    ASSERT_TRUE(p.a.qp && p.b.qp);
    Buffer& b = reg(B(), 64);
    Buffer& a = reg(A(), 64);
    for (uint64_t k = 0; k < 3; ++k) ASSERT_EQ(post_recv(p.b.qp, k, {b.sge(0, 64)}), 0);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(p.b.qp, &attr, IBV_QP_STATE), 0);
    expect_flushed(p.b.rcq, p.b.qpn(), 0, 3);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_ERR);
    queue_sends(p.a, a, 7, 1);
    expect_error(p.a.scq, p.a.qpn(), 7, IBV_WC_RETRY_EXC_ERR, "a peer in ERR does not answer");
    EXPECT_EQ(b.not_poison(0, 64), -1);
    expect_no_async(B(), 0);
}

// Memory the application unmapped after registering it: the device finds out only when it
// writes there (registration does not pin pages). The writes before the hole land, and then
// it is the error the memory's access would bring, as on hardware whose pages were pulled
// from under an MR: an RDMA WRITE is NAKed (IBV_WC_REM_ACCESS_ERR, the responder's QP in ERR
// with IBV_EVENT_QP_ACCESS_ERR), a SEND's receive completes with IBV_WC_LOC_PROT_ERR (the
// sender's with REM_ACCESS_ERR), an RDMA READ's own completion is IBV_WC_LOC_PROT_ERR.
TEST_F(RcErrors, MemoryUnmappedAfterRegistration) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    Buffer& src = reg(A(), 4 * page).fill(86);  // what WRITE and SEND send
    Buffer& far = reg(B(), 4 * page).fill(86);  // what READ reads
    enum { kWrite, kSend, kRead };
    for (int c : {kWrite, kSend, kRead}) {
        SCOPED_TRACE(c);
        Pair p = connect_pair();
        ASSERT_TRUE(p.a.qp && p.b.qp);
        Side& holder = c == kRead ? A() : B();
        auto* holey = static_cast<uint8_t*>(
            mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        ASSERT_NE(holey, MAP_FAILED);
        std::memset(holey, 0x11, 4 * page);
        ibv_mr* mr = ibv_reg_mr(holder.pd, holey, 4 * page, kAllAccess);
        ASSERT_NE(mr, nullptr) << std::strerror(errno);
        ASSERT_EQ(munmap(holey + 2 * page, page), 0);
        ibv_sge hole{reinterpret_cast<uintptr_t>(holey), uint32_t(4 * page), mr->lkey};
        std::vector<ibv_sge> sg{c == kRead ? hole : src.sge(0, uint32_t(4 * page))};
        if (c == kSend) {
            ASSERT_EQ(post_recv(p.b.qp, 2, {hole}), 0);
        }
        uint64_t va = reinterpret_cast<uintptr_t>(holey);
        ibv_send_wr w = c == kWrite  ? rdma_wr(1, IBV_WR_RDMA_WRITE, sg, va, mr->rkey)
                        : c == kSend ? wr(1, IBV_WR_SEND, sg)
                                     : rdma_wr(1, IBV_WR_RDMA_READ, sg, far.addr(0), far.rkey());
        ASSERT_EQ(post(p.a.qp, w), 0);
        if (c == kWrite) {
            expect_remote_error(p, 1, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
        } else if (c == kSend) {
            expect_error(p.b.rcq, p.b.qpn(), 2, IBV_WC_LOC_PROT_ERR, "the receive");
            expect_remote_error(p, 1, IBV_WC_REM_ACCESS_ERR, 0, IBV_EVENT_QP_ACCESS_ERR);
        } else {
            expect_error(p.a.scq, p.a.qpn(), 1, IBV_WC_LOC_PROT_ERR, "the READ");
            EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
            EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
        }
        // What precedes the hole arrived; the page after it was not written.
        EXPECT_EQ(std::memcmp(holey, src.data(), 2 * page), 0);
        EXPECT_EQ(holey[3 * page], 0x11);
        EXPECT_EQ(ibv_dereg_mr(mr), 0);
        munmap(holey, 4 * page);
    }
}

}  // namespace
// An async event the device queued for a QP that the application destroyed before reading
// it is dropped, as the kernel drops a destroyed object's pending events: the next event read
// is a live QP's, never one naming freed memory (UCX destroys QPs while its async thread reads).
TEST_F(RcErrors, PendingEventOfADestroyedQpIsDropped) {
    Pair first = connect_pair();
    Pair second = connect_pair();  // made first, so it cannot reuse the destroyed QP's memory
    ASSERT_TRUE(first.b.qp && second.b.qp);
    provoke_access_error(first);
    pollfd pf{B().ctx->async_fd, POLLIN, 0};
    ASSERT_EQ(poll(&pf, 1, 5000), 1) << "no event queued for the first QP";
    destroy_qp(first.b);
    provoke_access_error(second);
    ibv_async_event ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
    EXPECT_EQ(ev.element.qp, second.b.qp) << "an event of the destroyed QP was handed out";
    expect_no_async(B(), 50);
}

// The same with a QP made after the destroy, which the allocator often places where the
// destroyed one was: the dead QP's event is still dropped, never handed out as the new
// QP's (events name objects by a serial of their own, not by address).
TEST_F(RcErrors, PendingEventOfADestroyedQpSkipsItsSuccessor) {
    Pair first = connect_pair();
    ASSERT_TRUE(first.b.qp);
    provoke_access_error(first);
    pollfd pf{B().ctx->async_fd, POLLIN, 0};
    ASSERT_EQ(poll(&pf, 1, 5000), 1) << "no event queued for the first QP";
    const void* old_addr = first.b.qp;
    destroy_qp(first.b);
    // The new QP on B at once, on the old one's CQs: nothing else is allocated in between.
    QpOpts o;
    Pair second;
    second.b = make_qp_with_cqs(B(), o, first.b.scq, first.b.rcq);
    second.a = make_qp(A(), o, true);
    ASSERT_TRUE(second.a.qp && second.b.qp);
    connect_qp(second.a, B(), second.b.qpn(), o, o.psn_a, o.psn_b);
    connect_qp(second.b, A(), second.a.qpn(), o, o.psn_b, o.psn_a);
    if (second.b.qp == old_addr) std::printf("the new QP took the destroyed one's address\n");
    provoke_access_error(second);
    ibv_async_event ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
    EXPECT_EQ(ev.element.qp, second.b.qp);
    expect_no_async(B(), 50);  // one event: the dead QP's was not handed out as well
}

}  // namespace uroce::transport_test
