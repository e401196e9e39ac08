// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// UC: SEND, SEND_WITH_IMM, RDMA WRITE and RDMA WRITE_WITH_IMM land exactly as on RC (the
// requester completes once the message is sent). UC has no RDMA READ and no ATOMIC (IBTA
// table 37): such a WR completes with IBV_WC_LOC_QP_OP_ERR, as on ConnectX, the QP enters
// SQE and nothing reaches the peer. A WRITE the target MR does not allow is discarded (UC has no
// NAK).
#include <arpa/inet.h>
#include <sys/mman.h>

#include "tests/transport/fixture.h"

namespace uroce::transport_test {
namespace {

class Uc : public PairTest {
protected:
    void set_up() override {
        QpOpts o;
        o.type = IBV_QPT_UC;
        o.mtu = IBV_MTU_512;
        ASSERT_NO_FATAL_FAILURE(connect(o));
        buffers(8192, 8192, 41);
    }
};

TEST_F(Uc, SendAndSendWithImm) {
    ASSERT_EQ(post_recv(p_.b.qp, 1, {dst_->sge(0, 4000)}), 0);
    ASSERT_EQ(post_recv(p_.b.qp, 2, {dst_->sge(4000, 4000)}), 0);
    std::vector<ibv_sge> s1{src_->sge(0, 3000)}, s2{src_->sge(0, 1)};
    ibv_send_wr w1 = wr(10, IBV_WR_SEND, s1);
    ibv_send_wr w2 = wr(11, IBV_WR_SEND_WITH_IMM, s2);
    w2.imm_data = htonl(0xcafe);
    w1.next = &w2;
    ASSERT_EQ(post(p_.a.qp, w1), 0);
    expect_send_ok(p_.a, 10, IBV_WC_SEND, 3000);
    expect_send_ok(p_.a, 11, IBV_WC_SEND, 1);
    expect_recv_ok(p_.b, 1, IBV_WC_RECV, 3000, p_.a.qpn());
    expect_recv_ok(p_.b, 2, IBV_WC_RECV, 1, p_.a.qpn(), IBV_WC_WITH_IMM, htonl(0xcafe));
    EXPECT_EQ(dst_->mismatch(41, 0, 3000), -1);
    EXPECT_EQ(dst_->not_poison(3000, 1000), -1);
    EXPECT_EQ(dst_->mismatch(41, 4000, 1), -1);
    EXPECT_EQ(dst_->not_poison(4001, 8192 - 4001), -1);
    expect_rts();
}

TEST_F(Uc, WriteAndWriteWithImm) {
    Buffer& rbuf = reg(B(), 16);
    ASSERT_EQ(post_recv(p_.b.qp, 5, {rbuf.sge(0, 16)}), 0);
    std::vector<ibv_sge> s1{src_->sge(0, 2500)}, s2{src_->sge(0, 700)};
    ibv_send_wr w1 = rdma_wr(20, IBV_WR_RDMA_WRITE, s1, dst_->addr(100), dst_->rkey());
    ibv_send_wr w2 = rdma_wr(21, IBV_WR_RDMA_WRITE_WITH_IMM, s2, dst_->addr(5000), dst_->rkey());
    w2.imm_data = htonl(0x1234abcd);
    w1.next = &w2;
    ASSERT_EQ(post(p_.a.qp, w1), 0);
    expect_send_ok(p_.a, 20, IBV_WC_RDMA_WRITE, 2500);
    expect_send_ok(p_.a, 21, IBV_WC_RDMA_WRITE, 700);
    expect_recv_ok(p_.b, 5, IBV_WC_RECV_RDMA_WITH_IMM, 700, p_.a.qpn(), IBV_WC_WITH_IMM,
                   htonl(0x1234abcd));
    EXPECT_EQ(dst_->not_poison(0, 100), -1);
    EXPECT_EQ(dst_->mismatch(41, 100, 2500), -1);
    EXPECT_EQ(dst_->not_poison(2600, 2400), -1);
    EXPECT_EQ(dst_->mismatch(41, 5000, 700), -1);
    EXPECT_EQ(dst_->not_poison(5700, 8192 - 5700), -1);
    EXPECT_EQ(rbuf.not_poison(0, 16), -1) << "WRITE_WITH_IMM wrote into the receive buffer";
    expect_rts();
}

// READ, the two ATOMICs and SEND_WITH_INV (no UC opcode carries an IETH) are not UC
// operations: the WR completes with IBV_WC_LOC_QP_OP_ERR, the QP enters SQE (IBTA 10.3.1)
// and flushes the WRs behind it, the peer sees nothing. Back in RTS, the QP sends again.
TEST_F(Uc, ReadAndAtomicAreLocalQpOperationErrors) {
    for (ibv_wr_opcode op : {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
                             IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV}) {
        SCOPED_TRACE(op);
        std::vector<ibv_sge> sg{src_->sge(0, 8)};
        ibv_send_wr w = rdma_wr(30, op, sg, dst_->addr(0), dst_->rkey());
        if (op == IBV_WR_SEND_WITH_INV) {
            w = wr(30, op, sg);
            w.invalidate_rkey = dst_->rkey();
        } else if (op != IBV_WR_RDMA_READ) {
            w = atomic_wr(30, op, sg, dst_->addr(0), dst_->rkey(), 1, 2);
        }
        std::vector<ibv_sge> s2{src_->sge(0, 4)};
        ibv_send_wr behind = rdma_wr(31, IBV_WR_RDMA_WRITE, s2, dst_->addr(8), dst_->rkey());
        w.next = &behind;
        ASSERT_EQ(post(p_.a.qp, w), 0);
        expect_error(p_.a.scq, p_.a.qpn(), 30, IBV_WC_LOC_QP_OP_ERR, "not a UC operation");
        expect_error(p_.a.scq, p_.a.qpn(), 31, IBV_WC_WR_FLUSH_ERR, "behind it");
        EXPECT_EQ(qp_state(p_.a.qp), IBV_QPS_SQE);
        EXPECT_EQ(qp_state(p_.b.qp), IBV_QPS_RTS);
        EXPECT_EQ(src_->mismatch(41, 0, 8192), -1) << "READ/ATOMIC result written locally";
        EXPECT_EQ(dst_->not_poison(0, 8192), -1);
        expect_no_async(A(), 0);
        expect_no_async(B(), 0);
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_qp(p_.a.qp, &attr, IBV_QP_STATE), 0);
    }
    std::vector<ibv_sge> sg{src_->sge(0, 16)};
    ibv_send_wr w = rdma_wr(40, IBV_WR_RDMA_WRITE, sg, dst_->addr(100), dst_->rkey());
    ASSERT_EQ(post(p_.a.qp, w), 0);
    expect_send_ok(p_.a, 40, IBV_WC_RDMA_WRITE, 16);
    for (int i = 0; i < 1000 && dst_->not_poison(100, 16) < 0; ++i) usleep(1000);
    EXPECT_EQ(dst_->mismatch(41, 100, 16), -1);
    expect_rts();
}

// A WRITE with a wrong R_Key, beyond the MR, or into an MR without REMOTE_WRITE is dropped
// by the responder (the requester completes successfully: it cannot know); the next
// message is executed normally.
TEST_F(Uc, ForbiddenWriteIsDiscarded) {
    Buffer& ro = reg(B(), 256, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    std::vector<ibv_sge> sg{src_->sge(0, 600)};
    std::vector<ibv_send_wr> ws{
        rdma_wr(1, IBV_WR_RDMA_WRITE, sg, dst_->addr(0), dst_->rkey() ^ 0x100),
        rdma_wr(2, IBV_WR_RDMA_WRITE, sg, dst_->addr(8192 - 599), dst_->rkey()),
        rdma_wr(3, IBV_WR_RDMA_WRITE, sg, ro.addr(0), ro.rkey())};
    for (auto& w : ws) ASSERT_EQ(post(p_.a.qp, w), 0);
    for (uint64_t id = 1; id <= 3; ++id) expect_send_ok(p_.a, id, IBV_WC_RDMA_WRITE, 600);
    std::vector<ibv_sge> ok{src_->sge(0, 10)};
    ibv_send_wr w = rdma_wr(4, IBV_WR_RDMA_WRITE, ok, dst_->addr(20), dst_->rkey());
    ASSERT_EQ(post(p_.a.qp, w), 0);
    expect_send_ok(p_.a, 4, IBV_WC_RDMA_WRITE, 10);
    // The good WRITE arrived after the bad ones: they were dropped, not delayed.
    for (int i = 0; i < 1000 && dst_->not_poison(20, 10) < 0; ++i) usleep(1000);
    EXPECT_EQ(dst_->not_poison(0, 20), -1);
    EXPECT_EQ(dst_->mismatch(41, 20, 10), -1);
    EXPECT_EQ(dst_->not_poison(30, 8192 - 30), -1);
    EXPECT_EQ(ro.not_poison(0, 256), -1);
    EXPECT_EQ(wait_qp_drops(B(), p_.b.qpn(), "bad_rkey", 3), 3);
    expect_empty(p_.b.rcq);
    expect_rts();
    expect_no_async(B());
}

// Memory the receiver unmapped after registering it (the device finds out when it writes).
// A WRITE_WITH_IMM across the hole is discarded where it fails, as UC discards a message
// (no NAK, no completion), and the receive it took serves the next one. A SEND into a
// receive across the hole completes it with IBV_WC_LOC_PROT_ERR and puts the receiver's QP
// in ERR with IBV_EVENT_QP_ACCESS_ERR. The sender completes both: it cannot know.
TEST_F(Uc, MemoryUnmappedAfterRegistration) {
    Buffer& rbuf = reg(B(), 16);
    Buffer& holey = reg(B(), 3 * 4096);
    const size_t hole = 4096 - holey.lead;  // the data offset where the missing page starts
    // Nothing is mapped from here on (a new mapping could land in the hole).
    ASSERT_EQ(munmap(holey.alloc + 4096, 4096), 0);
    ASSERT_EQ(post_recv(p_.b.qp, 5, {rbuf.sge(0, 16)}), 0);
    std::vector<ibv_sge> sg{src_->sge(0, 2000)}, ok{src_->sge(0, 700)};
    ibv_send_wr w1 =
        rdma_wr(1, IBV_WR_RDMA_WRITE_WITH_IMM, sg, holey.addr(hole - 1000), holey.rkey());
    w1.imm_data = htonl(1);
    ASSERT_EQ(post(p_.a.qp, w1), 0);
    expect_send_ok(p_.a, 1, IBV_WC_RDMA_WRITE, 2000);
    ibv_send_wr w2 = rdma_wr(2, IBV_WR_RDMA_WRITE_WITH_IMM, ok, dst_->addr(0), dst_->rkey());
    w2.imm_data = htonl(2);
    ASSERT_EQ(post(p_.a.qp, w2), 0);
    expect_send_ok(p_.a, 2, IBV_WC_RDMA_WRITE, 700);
    expect_recv_ok(p_.b, 5, IBV_WC_RECV_RDMA_WITH_IMM, 700, p_.a.qpn(), IBV_WC_WITH_IMM, htonl(2));
    EXPECT_EQ(dst_->mismatch(41, 0, 700), -1);
    EXPECT_EQ(holey.mismatch(41, hole - 1000, 512), -1) << "the packet before the hole";
    expect_rts();
    ASSERT_EQ(post_recv(p_.b.qp, 6, {holey.sge(hole - 1000, 2000)}), 0);
    ibv_send_wr w3 = wr(3, IBV_WR_SEND, sg);
    ASSERT_EQ(post(p_.a.qp, w3), 0);
    expect_send_ok(p_.a, 3, IBV_WC_SEND, 2000);
    expect_error(p_.b.rcq, p_.b.qpn(), 6, IBV_WC_LOC_PROT_ERR, "the receive across the hole");
    EXPECT_EQ(qp_state(p_.b.qp), IBV_QPS_ERR);
    ibv_async_event ev = next_async(B());
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(ev.element.qp, p_.b.qp);
}

}  // namespace
}  // namespace uroce::transport_test
