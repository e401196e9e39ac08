// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The ibv_wr_* interface (ibv_wr_post(3)) between two devices: every builder and setter
// moves real bytes, several work requests go in one ibv_wr_start/ibv_wr_complete, the
// setters copy what they are given at once, ibv_wr_abort posts nothing, and every error
// makes ibv_wr_complete fail and post none of the batch (docs/verbs-support.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "tests/transport/fixture.h"
#include "tests/transport/verbs_util.h"

namespace uroce::transport_test {
namespace {

// Each send op and the QP types ibv_create_qp_ex takes it for: the sets mlx5 and rxe accept
// (docs/verbs-support.md). They accept SEND_WITH_INV on UC although the IETH is RC/XRC only;
// such a request completes with IBV_WC_LOC_QP_OP_ERR, as on rxe (WrApi.UcWriteAndSend).
// ATOMIC_WRITE is RC only, as rxe has it.
struct OpTypes {
    uint64_t op;
    bool rc, uc, ud, xrc;  // XRC_RECV has no send queue
};
constexpr OpTypes kOps[] = {
    {IBV_QP_EX_WITH_SEND, true, true, true, true},
    {IBV_QP_EX_WITH_SEND_WITH_IMM, true, true, true, true},
    {IBV_QP_EX_WITH_SEND_WITH_INV, true, true, false, true},
    {IBV_QP_EX_WITH_RDMA_WRITE, true, true, false, true},
    {IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, true, true, false, true},
    {IBV_QP_EX_WITH_RDMA_READ, true, false, false, true},
    {IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, true, false, false, true},
    {IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, true, false, false, true},
    {IBV_QP_EX_WITH_LOCAL_INV, true, true, false, true},
    {IBV_QP_EX_WITH_BIND_MW, true, true, false, true},
    {IBV_QP_EX_WITH_TSO, false, false, false, false},
    {IBV_QP_EX_WITH_ATOMIC_WRITE, true, false, false, false},
    {uint64_t(1) << 40, false, false, false, false},
};

bool takes(const OpTypes& o, ibv_qp_type type) {
    switch (type) {
    case IBV_QPT_RC: return o.rc;
    case IBV_QPT_UC: return o.uc;
    case IBV_QPT_UD: return o.ud;
    case IBV_QPT_XRC_SEND: return o.xrc;
    default: return false;
    }
}

// Every op a QP type takes.
uint64_t ops_of(ibv_qp_type type) {
    uint64_t ops = 0;
    for (const OpTypes& o : kOps)
        if (takes(o, type)) ops |= o.op;
    return ops;
}

class WrApi : public TransportTest {
protected:
    // A connected RC (or UC) pair whose QPs were created with every op of their type.
    Pair wr_pair(ibv_qp_type type = IBV_QPT_RC, uint32_t max_send_wr = 64) {
        QpOpts o;
        o.type = type;
        o.max_send_wr = max_send_wr;
        o.max_inline_data = 64;
        o.send_ops_flags = ops_of(type);
        Pair p = connect_pair(o);
        if (p.a.qp) qa_ = ibv_qp_to_qp_ex(p.a.qp);
        return p;
    }
    // The granted capabilities (ibv_query_qp).
    static ibv_qp_cap cap(ibv_qp* qp) {
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), 0);
        return init.cap;
    }
    // A signaled SEND of src[off, off + len) as work request `wr_id`.
    void send(uint64_t wr_id, const Buffer& src, size_t off, uint32_t len) {
        qa_->wr_id = wr_id;
        qa_->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_send(qa_);
        ibv_wr_set_sge(qa_, src.lkey(), src.addr(off), len);
    }

    ibv_qp_ex* qa_ = nullptr;  // A's side of the pair
};

TEST_F(WrApi, QpExOnlyWithSendOpsFlags) {
    QpOpts o;
    Endpoint plain = make_qp(A(), o, true);
    ASSERT_TRUE(plain.qp);
    EXPECT_EQ(ibv_qp_to_qp_ex(plain.qp), nullptr) << "as mlx5: only with SEND_OPS_FLAGS";
    o.send_ops_flags = IBV_QP_EX_WITH_SEND;
    Endpoint ex = make_qp(A(), o, true);
    ASSERT_TRUE(ex.qp);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(ex.qp);
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(&x->qp_base, ex.qp);
    // As mlx5: every builder of the QP type, whatever was asked for; no TSO.
    EXPECT_TRUE(x->wr_rdma_read && x->wr_atomic_fetch_add && x->wr_local_inv && x->wr_bind_mw &&
                x->wr_atomic_write);
    EXPECT_EQ(x->wr_send_tso, nullptr);
    EXPECT_EQ(x->wr_set_ud_addr, nullptr);
    EXPECT_EQ(x->wr_set_xrc_srqn, nullptr);
}

// Every op alone on every QP type: created when the type takes it, else EOPNOTSUPP.
TEST_F(WrApi, SendOpsByQpType) {
    ibv_cq* cq = make_cq(A());
    for (ibv_qp_type type :
         {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV}) {
        for (const OpTypes& o : kOps) {
            ibv_qp_init_attr_ex a{};
            a.qp_type = type;
            a.send_cq = cq;
            a.recv_cq = type == IBV_QPT_XRC_SEND ? nullptr : cq;
            a.cap.max_send_wr = a.cap.max_recv_wr = 4;
            a.cap.max_send_sge = a.cap.max_recv_sge = 1;
            a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
            a.pd = A().pd;
            a.send_ops_flags = o.op;
            errno = 0;
            ibv_qp* qp = ibv_create_qp_ex(A().ctx, &a);
            if (takes(o, type)) {
                EXPECT_NE(qp, nullptr) << "type " << type << " op 0x" << std::hex << o.op << ": "
                                       << std::strerror(errno);
                EXPECT_TRUE(qp && ibv_qp_to_qp_ex(qp));
            } else {
                EXPECT_EQ(qp, nullptr) << "type " << type << " op 0x" << std::hex << o.op;
                EXPECT_EQ(errno, EOPNOTSUPP) << "type " << type << " op 0x" << std::hex << o.op;
            }
            if (qp) {
                EXPECT_EQ(ibv_destroy_qp(qp), 0);
            }
        }
    }
}

// Each setter in one batch: one SGE, an SGE list, inline data (changed after the setter
// returned), an inline list, no data at all; SEND_WITH_IMM; an unsignaled request.
TEST_F(WrApi, SendsWithEverySetterInOneBatch) {
    Pair p = wr_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    Buffer& src = reg(A(), 4096);
    src.fill(1);
    Buffer& dst = post_recvs(p.b, 100, 5, 1024);

    uint8_t inl[40], inl2[2][12];
    for (size_t i = 0; i < sizeof inl; ++i) inl[i] = pattern_byte(7, i);
    for (size_t i = 0; i < sizeof inl2; ++i) inl2[i / 12][i % 12] = pattern_byte(8, i);

    ibv_wr_start(qa_);
    send(1, src, 0, 100);
    qa_->wr_id = 2;
    ibv_wr_send_imm(qa_, htonl(0x01020304));
    ibv_sge list[3] = {src.sge(100, 50), src.sge(300, 10), src.sge(500, 100)};
    ibv_wr_set_sge_list(qa_, 3, list);
    std::memset(list, 0, sizeof list);  // the setter copied them
    qa_->wr_id = 3;
    ibv_wr_send(qa_);
    ibv_wr_set_inline_data(qa_, inl, sizeof inl);
    std::memset(inl, 0, sizeof inl);  // inline data is copied by the setter (ibv_wr_post(3))
    qa_->wr_id = 4;
    qa_->wr_flags = 0;  // unsignaled: no send completion
    ibv_wr_send(qa_);
    ibv_data_buf bufs[2] = {{inl2[0], 12}, {inl2[1], 12}};
    ibv_wr_set_inline_data_list(qa_, 2, bufs);
    std::memset(inl2, 0, sizeof inl2);
    qa_->wr_id = 5;
    qa_->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qa_);  // no data setter: a zero-length SEND
    ASSERT_EQ(ibv_wr_complete(qa_), 0);

    expect_send_ok(p.a, 1, IBV_WC_SEND, 100);
    expect_send_ok(p.a, 2, IBV_WC_SEND, 160);
    expect_send_ok(p.a, 3, IBV_WC_SEND, 40);
    expect_send_ok(p.a, 5, IBV_WC_SEND, 0);
    expect_empty(p.a.scq);
    expect_recv_ok(p.b, 100, IBV_WC_RECV, 100, p.a.qpn());
    expect_recv_ok(p.b, 101, IBV_WC_RECV, 160, p.a.qpn(), IBV_WC_WITH_IMM, htonl(0x01020304));
    expect_recv_ok(p.b, 102, IBV_WC_RECV, 40, p.a.qpn());
    expect_recv_ok(p.b, 103, IBV_WC_RECV, 24, p.a.qpn());
    expect_recv_ok(p.b, 104, IBV_WC_RECV, 0, p.a.qpn());
    EXPECT_EQ(dst.mismatch(1, 0, 100, 0), -1);
    EXPECT_EQ(dst.mismatch(1, 1024, 50, 100), -1);
    EXPECT_EQ(dst.mismatch(1, 1074, 10, 300), -1);
    EXPECT_EQ(dst.mismatch(1, 1084, 100, 500), -1);
    EXPECT_EQ(dst.mismatch(7, 2048, 40, 0), -1) << "inline data";
    EXPECT_EQ(dst.mismatch(8, 3072, 24, 0), -1) << "inline data list";
    for (int i = 0; i < 5; ++i) {
        uint32_t used[] = {100, 160, 40, 24, 0};
        EXPECT_EQ(dst.not_poison(i * 1024 + used[i], 1024 - used[i]), -1) << "receive " << i;
    }
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// RDMA WRITE (SGE, SGE list, inline), WRITE_WITH_IMM, READ and both atomics in one batch.
TEST_F(WrApi, RdmaAndAtomicsInOneBatch) {
    Pair p = wr_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    Buffer& src = reg(A(), 4096);
    Buffer& local = reg(A(), 4096);
    Buffer& remote = reg(B(), 8192);
    Buffer& rbuf = reg(B(), 64);
    src.fill(2);
    remote.fill(3, 4096, 2048);  // what the READ fetches
    uint64_t cas_old = 0x1111222233334444, faa_old = 1000;
    std::memcpy(remote.data() + 6144, &cas_old, 8);
    std::memcpy(remote.data() + 6152, &faa_old, 8);
    ASSERT_EQ(post_recv(p.b.qp, 50, {rbuf.sge(0, 64)}), 0);
    uint8_t inl[33];
    for (size_t i = 0; i < sizeof inl; ++i) inl[i] = pattern_byte(4, i);

    ibv_wr_start(qa_);
    qa_->wr_flags = IBV_SEND_SIGNALED;
    qa_->wr_id = 1;
    ibv_wr_rdma_write(qa_, remote.rkey(), remote.addr(10));
    ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 1000);
    qa_->wr_id = 2;
    ibv_wr_rdma_write_imm(qa_, remote.rkey(), remote.addr(2000), htonl(0xcafe));
    ibv_sge list[2] = {src.sge(1000, 300), src.sge(2000, 200)};
    ibv_wr_set_sge_list(qa_, 2, list);
    qa_->wr_id = 3;
    ibv_wr_rdma_write(qa_, remote.rkey(), remote.addr(3000));
    ibv_wr_set_inline_data(qa_, inl, sizeof inl);
    qa_->wr_id = 4;
    ibv_wr_rdma_read(qa_, remote.rkey(), remote.addr(4096));
    ibv_wr_set_sge(qa_, local.lkey(), local.addr(0), 2048);
    qa_->wr_id = 5;
    ibv_wr_atomic_cmp_swp(qa_, remote.rkey(), remote.addr(6144), cas_old, 0x5555666677778888);
    ibv_wr_set_sge(qa_, local.lkey(), local.addr(3000), 8);
    qa_->wr_id = 6;
    ibv_wr_atomic_fetch_add(qa_, remote.rkey(), remote.addr(6152), 25);
    ibv_wr_set_sge(qa_, local.lkey(), local.addr(3008), 8);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);

    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, 1000);
    expect_send_ok(p.a, 2, IBV_WC_RDMA_WRITE, 500);
    expect_send_ok(p.a, 3, IBV_WC_RDMA_WRITE, 33);
    expect_send_ok(p.a, 4, IBV_WC_RDMA_READ, 2048);
    expect_send_ok(p.a, 5, IBV_WC_COMP_SWAP, 8);
    expect_send_ok(p.a, 6, IBV_WC_FETCH_ADD, 8);
    expect_recv_ok(p.b, 50, IBV_WC_RECV_RDMA_WITH_IMM, 500, p.a.qpn(), IBV_WC_WITH_IMM,
                   htonl(0xcafe));
    expect_empty(p.b.rcq);
    EXPECT_EQ(remote.not_poison(0, 10), -1);
    EXPECT_EQ(remote.mismatch(2, 10, 1000, 0), -1) << "WRITE";
    EXPECT_EQ(remote.not_poison(1010, 990), -1);
    EXPECT_EQ(remote.mismatch(2, 2000, 300, 1000), -1) << "WRITE_WITH_IMM, first SGE";
    EXPECT_EQ(remote.mismatch(2, 2300, 200, 2000), -1) << "WRITE_WITH_IMM, second SGE";
    EXPECT_EQ(remote.not_poison(2500, 500), -1);
    EXPECT_EQ(remote.mismatch(4, 3000, 33, 0), -1) << "inline WRITE";
    EXPECT_EQ(remote.not_poison(3033, 4096 - 3033), -1);
    EXPECT_EQ(local.mismatch(3, 0, 2048, 0), -1) << "READ";
    uint64_t v;
    std::memcpy(&v, local.data() + 3000, 8);
    EXPECT_EQ(v, cas_old) << "CMP_SWP returns the old value";
    std::memcpy(&v, remote.data() + 6144, 8);
    EXPECT_EQ(v, 0x5555666677778888u) << "CMP_SWP swapped";
    std::memcpy(&v, local.data() + 3008, 8);
    EXPECT_EQ(v, faa_old) << "FETCH_ADD returns the old value";
    std::memcpy(&v, remote.data() + 6152, 8);
    EXPECT_EQ(v, faa_old + 25) << "FETCH_ADD added";
    EXPECT_EQ(rbuf.not_poison(0, 64), -1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);
}

// ibv_wr_abort discards the batch, however often, and the slots it used stay free.
TEST_F(WrApi, AbortPostsNothing) {
    Pair p = wr_pair(IBV_QPT_RC, 4);
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    uint32_t depth = cap(p.a.qp).max_send_wr;
    Buffer& src = reg(A(), 256);
    Buffer& dst = reg(B(), 256);
    src.fill(5);
    Buffer& rbuf = post_recvs(p.b, 300, depth + 1, 64);
    for (int round = 0; round < 3; ++round) {
        ibv_wr_start(qa_);
        for (uint32_t i = 0; i < depth; ++i) {
            send(1000 + i, src, 0, 64);
            qa_->wr_id = 2000 + i;
            ibv_wr_rdma_write(qa_, dst.rkey(), dst.addr(0));
            ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 256);
        }
        ibv_wr_abort(qa_);
    }
    expect_empty(p.a.scq, 100);
    expect_empty(p.b.rcq);
    EXPECT_EQ(dst.not_poison(0, 256), -1) << "an aborted WRITE reached memory";
    EXPECT_EQ(rbuf.not_poison(0, 64 * (depth + 1)), -1) << "an aborted SEND arrived";

    // A full queue's worth after the aborts: none of their slots is taken.
    ibv_wr_start(qa_);
    for (uint32_t i = 0; i < depth; ++i) send(i, src, i, 20);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    for (uint32_t i = 0; i < depth; ++i) {
        expect_send_ok(p.a, i, IBV_WC_SEND, 20);
        expect_recv_ok(p.b, 300 + i, IBV_WC_RECV, 20, p.a.qpn());
        EXPECT_EQ(rbuf.mismatch(5, i * 64, 20, i), -1);
    }
    expect_empty(p.b.rcq);
}

// A batch with an error in it: ibv_wr_complete returns it and none of the batch (not the
// good request before the bad one either) reaches the device; the next batch works.
TEST_F(WrApi, ErrorsPostNoneOfTheBatch) {
    Pair p = wr_pair(IBV_QPT_RC, 8);
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    ibv_qp_cap c = cap(p.a.qp);
    Buffer& src = reg(A(), 4096);
    Buffer& remote = reg(B(), 4096);
    Buffer& rbuf = reg(B(), 1024);
    src.fill(6);
    ASSERT_EQ(post_recv(p.b.qp, 77, {rbuf.sge(0, 1024)}), 0);
    std::vector<uint8_t> big(c.max_inline_data + 1, 1);
    std::vector<ibv_sge> many(c.max_send_sge + 1, src.sge(0, 4));

    struct Case {
        const char* what;
        int err;
        std::function<void()> bad;  // adds the bad request after a good SEND
    } cases[] = {
        {"more SGEs than max_send_sge", EINVAL,
         [&] {
             ibv_wr_send(qa_);
             ibv_wr_set_sge_list(qa_, many.size(), many.data());
         }},
        {"more inline data than max_inline_data", EINVAL,
         [&] {
             ibv_wr_send(qa_);
             ibv_wr_set_inline_data(qa_, big.data(), big.size());
         }},
        {"inline data list longer than max_inline_data", EINVAL,
         [&] {
             ibv_data_buf b[2] = {{big.data(), 8}, {big.data(), c.max_inline_data}};
             ibv_wr_rdma_write(qa_, remote.rkey(), remote.addr(0));
             ibv_wr_set_inline_data_list(qa_, 2, b);
         }},
        {"inline data on an RDMA READ", EINVAL,
         [&] {
             ibv_wr_rdma_read(qa_, remote.rkey(), remote.addr(0));
             ibv_wr_set_inline_data(qa_, big.data(), 8);
         }},
        {"a setter with no builder", EINVAL,
         [&] {
             ibv_wr_abort(qa_);  // start a new batch whose first call is a setter
             ibv_wr_start(qa_);
             ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 8);
             send(3, src, 0, 8);
         }},
        {"more requests than the send queue holds", ENOMEM,
         [&] {
             for (uint32_t i = 0; i < c.max_send_wr; ++i) send(4, src, 0, 8);
         }},
    };
    for (const Case& k : cases) {
        ibv_wr_start(qa_);
        send(1, src, 0, 100);
        k.bad();
        EXPECT_EQ(ibv_wr_complete(qa_), k.err) << k.what;
        expect_empty(p.a.scq);
        expect_empty(p.b.rcq);
    }
    EXPECT_EQ(remote.not_poison(0, 4096), -1);
    EXPECT_EQ(rbuf.not_poison(0, 1024), -1);
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_RTS);

    // The receive is still there for the first request that does get posted.
    ibv_wr_start(qa_);
    send(9, src, 200, 300);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_send_ok(p.a, 9, IBV_WC_SEND, 300);
    expect_recv_ok(p.b, 77, IBV_WC_RECV, 300, p.a.qpn());
    EXPECT_EQ(rbuf.mismatch(6, 0, 300, 200), -1);
}

// As ibv_post_send (and mlx5's wr_complete until RTS): a QP that is not in RTS takes none.
TEST_F(WrApi, CompleteBeforeRtsIsEinval) {
    QpOpts o;
    o.send_ops_flags = IBV_QP_EX_WITH_SEND;
    Endpoint e = make_qp(A(), o, true);
    ASSERT_TRUE(e.qp);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(e.qp);
    ASSERT_TRUE(x);
    Buffer& src = reg(A(), 64);
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, src.lkey(), src.addr(0), 64);
    EXPECT_EQ(ibv_wr_complete(x), EINVAL);
    expect_empty(e.scq);
    EXPECT_EQ(qp_state(e.qp), IBV_QPS_RESET);
}

// Work requests posted with ibv_post_send and batches of ibv_wr_* calls go through one send
// queue in the order they were posted.
TEST_F(WrApi, InterleavesWithPostSend) {
    Pair p = wr_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    Buffer& src = reg(A(), 1024);
    src.fill(9);
    Buffer& rbuf = post_recvs(p.b, 0, 4, 256);
    for (uint64_t i = 0; i < 4; ++i) {
        if (i % 2) {
            ibv_wr_start(qa_);
            send(10 + i, src, i * 100, 100);
            ASSERT_EQ(ibv_wr_complete(qa_), 0);
        } else {
            std::vector<ibv_sge> sg{src.sge(i * 100, 100)};
            ibv_send_wr w = wr(10 + i, IBV_WR_SEND, sg);
            ASSERT_EQ(post(p.a.qp, w), 0);
        }
    }
    for (uint64_t i = 0; i < 4; ++i) {
        expect_send_ok(p.a, 10 + i, IBV_WC_SEND, 100);
        expect_recv_ok(p.b, i, IBV_WC_RECV, 100, p.a.qpn());
        EXPECT_EQ(rbuf.mismatch(9, i * 256, 100, i * 100), -1);
    }
}

// IBV_SEND_SOLICITED in wr_flags reaches the receiver: its solicited-only notification
// fires for that message.
TEST_F(WrApi, SolicitedFlag) {
    QpOpts o;
    o.send_ops_flags = ops_of(IBV_QPT_RC);
    o.channel_b = make_channel(B());
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    qa_ = ibv_qp_to_qp_ex(p.a.qp);
    Buffer& src = reg(A(), 64);
    post_recvs(p.b, 1, 2, 64);
    ASSERT_EQ(ibv_req_notify_cq(p.b.rcq, 1), 0);
    ibv_wr_start(qa_);
    send(1, src, 0, 8);  // not solicited: no event
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_recv_ok(p.b, 1, IBV_WC_RECV, 8, p.a.qpn());
    pollfd pfd{o.channel_b->fd, POLLIN, 0};
    EXPECT_EQ(poll(&pfd, 1, 100), 0) << "an event for an unsolicited message";
    ibv_wr_start(qa_);
    qa_->wr_id = 2;
    qa_->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    ibv_wr_send(qa_);
    ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 16);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    EXPECT_EQ(poll(&pfd, 1, int(kWaitSeconds * 1000)), 1) << "no event for a solicited message";
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(o.channel_b, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, p.b.rcq);
    ibv_ack_cq_events(ev_cq, 1);
    expect_recv_ok(p.b, 2, IBV_WC_RECV, 16, p.a.qpn(), 0);
    expect_send_ok(p.a, 1, IBV_WC_SEND, 8);
    expect_send_ok(p.a, 2, IBV_WC_SEND, 16);
}

TEST_F(WrApi, UcWriteAndSend) {
    Pair p = wr_pair(IBV_QPT_UC);
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    EXPECT_EQ(qa_->wr_rdma_read, nullptr);
    EXPECT_EQ(qa_->wr_atomic_cmp_swp, nullptr);
    EXPECT_EQ(qa_->wr_atomic_fetch_add, nullptr);
    EXPECT_EQ(qa_->wr_atomic_write, nullptr);  // RC only
    EXPECT_TRUE(qa_->wr_send_inv && qa_->wr_local_inv && qa_->wr_bind_mw) << "as mlx5 and rxe";
    Buffer& src = reg(A(), 4096);
    Buffer& remote = reg(B(), 4096);
    Buffer& rbuf = reg(B(), 2048);
    src.fill(10);
    ASSERT_EQ(post_recv(p.b.qp, 1, {rbuf.sge(0, 2048)}), 0);
    ibv_wr_start(qa_);
    qa_->wr_flags = IBV_SEND_SIGNALED;
    qa_->wr_id = 1;
    ibv_wr_rdma_write(qa_, remote.rkey(), remote.addr(100));
    ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 3000);
    qa_->wr_id = 2;
    ibv_wr_send_imm(qa_, htonl(77));
    ibv_wr_set_sge(qa_, src.lkey(), src.addr(3000), 1000);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_send_ok(p.a, 1, IBV_WC_RDMA_WRITE, 3000);
    expect_send_ok(p.a, 2, IBV_WC_SEND, 1000);
    expect_recv_ok(p.b, 1, IBV_WC_RECV, 1000, p.a.qpn(), IBV_WC_WITH_IMM, htonl(77));
    EXPECT_EQ(remote.mismatch(10, 100, 3000, 0), -1);
    EXPECT_EQ(rbuf.mismatch(10, 0, 1000, 3000), -1);

    // UC has no SEND with invalidate on the wire: the request completes with
    // IBV_WC_LOC_QP_OP_ERR (as rxe) and the QP enters SQE; B sees nothing.
    ASSERT_EQ(post_recv(p.b.qp, 2, {rbuf.sge(0, 2048)}), 0);
    ibv_wr_start(qa_);
    qa_->wr_id = 3;
    ibv_wr_send_inv(qa_, remote.rkey());
    ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 8);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_error(p.a.scq, p.a.qpn(), 3, IBV_WC_LOC_QP_OP_ERR, "SEND_WITH_INV on UC");
    EXPECT_EQ(qp_state(p.a.qp), IBV_QPS_SQE);
    expect_empty(p.b.rcq);
    EXPECT_EQ(rbuf.mismatch(10, 0, 1000, 3000), -1) << "the receive buffer is untouched";
}

TEST_F(WrApi, UdSendWithUdAddr) {
    QpOpts o{IBV_QPT_UD};
    o.max_inline_data = 64;
    o.send_ops_flags = ops_of(IBV_QPT_UD);
    Endpoint a = make_ud(A(), o);
    Endpoint b = make_ud(B(), o);
    ASSERT_TRUE(a.qp && b.qp);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(a.qp);
    ASSERT_TRUE(x);
    EXPECT_EQ(x->wr_rdma_write, nullptr);
    EXPECT_EQ(x->wr_send_inv, nullptr);
    EXPECT_EQ(x->wr_atomic_write, nullptr);
    EXPECT_EQ(x->wr_set_xrc_srqn, nullptr);
    ASSERT_NE(x->wr_set_ud_addr, nullptr);
    ibv_ah* ah = make_ah(A(), B());
    ASSERT_TRUE(ah);
    Buffer& src = reg(A(), 1024);
    src.fill(11);
    Buffer& rbuf = post_recvs(b, 0, 3, 1024);

    // Without wr_set_ud_addr the request has nowhere to go.
    ibv_wr_start(x);
    x->wr_id = 9;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, src.lkey(), src.addr(0), 10);
    EXPECT_EQ(ibv_wr_complete(x), EINVAL);
    expect_empty(a.scq);

    ibv_wr_start(x);
    x->wr_flags = IBV_SEND_SIGNALED;
    x->wr_id = 1;
    ibv_wr_send(x);  // address first, then data
    ibv_wr_set_ud_addr(x, ah, b.qpn(), o.qkey);
    ibv_wr_set_sge(x, src.lkey(), src.addr(0), 500);
    x->wr_id = 2;
    ibv_wr_send_imm(x, htonl(5));  // data first, then address
    ibv_wr_set_inline_data(x, src.data() + 500, 60);
    ibv_wr_set_ud_addr(x, ah, b.qpn(), o.qkey);
    ASSERT_EQ(ibv_wr_complete(x), 0);
    expect_send_ok(a, 1, IBV_WC_SEND, 500);
    expect_send_ok(a, 2, IBV_WC_SEND, 60);
    // A UD receive starts with the 40-byte GRH.
    expect_recv_ok(b, 0, IBV_WC_RECV, 540, a.qpn(), IBV_WC_GRH);
    expect_recv_ok(b, 1, IBV_WC_RECV, 100, a.qpn(), IBV_WC_GRH | IBV_WC_WITH_IMM, htonl(5));
    EXPECT_EQ(rbuf.mismatch(11, 40, 500, 0), -1);
    EXPECT_EQ(rbuf.mismatch(11, 1024 + 40, 60, 500), -1);
    expect_empty(b.rcq);
}

// XRC: the INI QP on A names B's XRC SRQ with wr_set_xrc_srqn, before or after the data.
// The SRQ completes its receives on an ibv_create_cq_ex CQ.
TEST_F(WrApi, XrcSendWithSrqn) {
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = -1;
    xa.oflags = O_CREAT;
    ibv_xrcd* xrcd = ibv_open_xrcd(B().ctx, &xa);
    ASSERT_TRUE(xrcd) << std::strerror(errno);
    // The XRC SRQ's CQ is an extended one: ibv_poll_cq reads it through ibv_cq_ex_to_cq.
    ibv_cq_ex* rcq_ex = make_cq_ex(B(), IBV_WC_STANDARD_FLAGS);
    ASSERT_TRUE(rcq_ex);
    ibv_cq* rcq = ibv_cq_ex_to_cq(rcq_ex);
    ibv_srq_init_attr_ex sa = verbs_util::xrc_srq_attr(xrcd, rcq, B().pd, 8);
    ibv_srq* srq = ibv_create_srq_ex(B().ctx, &sa);
    ibv_qp_init_attr_ex ta = verbs_util::xrc_tgt_attr(xrcd);
    ibv_qp* tgt = srq ? ibv_create_qp_ex(B().ctx, &ta) : nullptr;
    ibv_cq* scq = make_cq(A());
    ibv_qp_init_attr_ex ia = verbs_util::xrc_ini_attr(A().pd, scq, 8, 2);
    ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
    ibv_qp* ini = ibv_create_qp_ex(A().ctx, &ia);
    // Destroyed in this order before the fixture's TearDown frees the CQs and PDs.
    struct Cleanup {
        ibv_qp *&ini, *&tgt;
        ibv_srq*& srq;
        ibv_xrcd*& xrcd;
        ~Cleanup() {
            if (ini) ibv_destroy_qp(ini);
            if (tgt) ibv_destroy_qp(tgt);
            if (srq) ibv_destroy_srq(srq);
            if (xrcd) ibv_close_xrcd(xrcd);
        }
    } cleanup{ini, tgt, srq, xrcd};
    ASSERT_TRUE(srq && tgt && ini) << std::strerror(errno);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(ini);
    ASSERT_TRUE(x && x->wr_set_xrc_srqn && x->wr_atomic_fetch_add);
    EXPECT_TRUE(x->wr_send_inv && x->wr_local_inv && x->wr_bind_mw) << "as mlx5 and rxe";
    EXPECT_EQ(x->wr_atomic_write, nullptr) << "RC only";
    uint32_t srqn = 0;
    ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);

    QpOpts o;
    o.type = IBV_QPT_XRC_RECV;
    Endpoint te{&B(), tgt, nullptr, rcq};
    Endpoint ie{&A(), ini, scq, nullptr};
    connect_qp(te, A(), ini->qp_num, o, o.psn_b, o.psn_a);
    o.type = IBV_QPT_XRC_SEND;
    connect_qp(ie, B(), tgt->qp_num, o, o.psn_a, o.psn_b);
    ASSERT_EQ(qp_state(ini), IBV_QPS_RTS);

    Buffer& src = reg(A(), 2048);
    src.fill(12);
    Buffer& rbuf = post_recvs(te, 40, 2, 1024, srq);
    ibv_wr_start(x);
    x->wr_flags = IBV_SEND_SIGNALED;
    x->wr_id = 1;
    ibv_wr_send(x);
    ibv_wr_set_xrc_srqn(x, srqn);
    ibv_wr_set_sge(x, src.lkey(), src.addr(0), 700);
    x->wr_id = 2;
    ibv_wr_send(x);
    ibv_sge two[2] = {src.sge(700, 100), src.sge(1000, 200)};
    ibv_wr_set_sge_list(x, 2, two);
    ibv_wr_set_xrc_srqn(x, srqn);
    ASSERT_EQ(ibv_wr_complete(x), 0);
    expect_send_ok(ie, 1, IBV_WC_SEND, 700);
    expect_send_ok(ie, 2, IBV_WC_SEND, 300);
    // An XRC receive completes on the SRQ's CQ, with the TGT QP's number.
    expect_wc(rcq, {.wr_id = 40,
                    .opcode = IBV_WC_RECV,
                    .byte_len = 700,
                    .qp_num = tgt->qp_num,
                    .src_qp = ini->qp_num});
    expect_wc(rcq, {.wr_id = 41,
                    .opcode = IBV_WC_RECV,
                    .byte_len = 300,
                    .qp_num = tgt->qp_num,
                    .src_qp = ini->qp_num});
    EXPECT_EQ(rbuf.mismatch(12, 0, 700, 0), -1);
    EXPECT_EQ(rbuf.mismatch(12, 1024, 100, 700), -1);
    EXPECT_EQ(rbuf.mismatch(12, 1124, 200, 1000), -1);
}

// Memory windows through the builders (docs/memory-windows.md). A type 2 window serves only
// the QP that bound it, so B binds it on its own QP and A reaches it over the pair.
class WrApiMw : public WrApi {
protected:
    void TearDown() override {
        // A bound window keeps its MR from being deregistered: windows go first.
        for (ibv_mw* mw : mws_) EXPECT_EQ(ibv_dealloc_mw(mw), 0);
        WrApi::TearDown();
    }
    // B's memory a window can be bound into, and a type 2 window of B's PD.
    ibv_mw* alloc_mw2() {
        ibv_mw* mw = ibv_alloc_mw(B().pd, IBV_MW_TYPE_2);
        EXPECT_NE(mw, nullptr) << std::strerror(errno);
        if (mw) mws_.push_back(mw);
        return mw;
    }
    // Binds `mw` to target[off, off + len) for remote writes with ibv_wr_bind_mw on B's QP;
    // returns the window's new R_Key once the bind completed.
    uint32_t bind(const Endpoint& b, ibv_mw* mw, const Buffer& target, size_t off, size_t len) {
        ibv_qp_ex* x = ibv_qp_to_qp_ex(b.qp);
        uint32_t key = ibv_inc_rkey(mw->rkey);
        ibv_mw_bind_info info{target.mr, target.addr(off), len, IBV_ACCESS_REMOTE_WRITE};
        ibv_wr_start(x);
        x->wr_id = 70;
        x->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_bind_mw(x, mw, key, &info);
        EXPECT_EQ(ibv_wr_complete(x), 0);
        expect_wc(
            b.scq,
            {.wr_id = 70, .opcode = IBV_WC_BIND_MW, .qp_num = b.qpn(), .check_src_qp = false});
        return key;
    }
    // A WRITE of src[0, len) through `key` to `addr`, and its completion status.
    ibv_wc_status write(const Endpoint& a, const Buffer& src, uint32_t len, uint32_t key,
                        uint64_t addr, uint64_t wr_id) {
        std::vector<ibv_sge> sg{src.sge(0, len)};
        ibv_send_wr w = rdma_wr(wr_id, IBV_WR_RDMA_WRITE, sg, addr, key);
        EXPECT_EQ(post(a.qp, w), 0);
        ibv_wc wc = poll1(a.scq);
        EXPECT_EQ(wc.wr_id, wr_id);
        return wc.status;
    }

    static constexpr int kMwTarget = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
    std::vector<ibv_mw*> mws_;
};

TEST_F(WrApiMw, BindMwThenLocalInv) {
    Pair p = wr_pair();
    ASSERT_TRUE(p.a.qp && p.b.qp && qa_);
    Buffer& target = reg(B(), 4096, kMwTarget);
    Buffer& src = reg(A(), 1024);
    src.fill(30);
    ibv_mw* mw = alloc_mw2();
    ASSERT_TRUE(mw);
    uint32_t key = bind(p.b, mw, target, 256, 1024);
    EXPECT_EQ(write(p.a, src, 1024, key, target.addr(256), 1), IBV_WC_SUCCESS);
    EXPECT_EQ(target.mismatch(30, 256, 1024, 0), -1) << "the WRITE through the window";
    EXPECT_EQ(target.not_poison(0, 256), -1);
    EXPECT_EQ(target.not_poison(1280, 4096 - 1280), -1);

    ibv_qp_ex* qb = ibv_qp_to_qp_ex(p.b.qp);
    ibv_wr_start(qb);
    qb->wr_id = 71;
    qb->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_local_inv(qb, key);
    ASSERT_EQ(ibv_wr_complete(qb), 0);
    expect_wc(
        p.b.scq,
        {.wr_id = 71, .opcode = IBV_WC_LOCAL_INV, .qp_num = p.b.qpn(), .check_src_qp = false});
    EXPECT_EQ(qp_state(p.b.qp), IBV_QPS_RTS);

    // The key is gone: a WRITE through it fails and changes nothing.
    src.fill(31);
    EXPECT_EQ(write(p.a, src, 64, key, target.addr(256), 2), IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(target.mismatch(30, 256, 1024, 0), -1);
}

// wr_send_inv retires the responder's key; B's extended CQ shows the invalidated R_Key.
TEST_F(WrApiMw, SendInvRetiresTheResponderKey) {
    QpOpts o;
    o.send_ops_flags = ops_of(IBV_QPT_RC);
    o.cq_ex = true;
    Pair p = connect_pair(o);
    ASSERT_TRUE(p.a.qp && p.b.qp);
    qa_ = ibv_qp_to_qp_ex(p.a.qp);
    Buffer& target = reg(B(), 4096, kMwTarget);
    Buffer& src = reg(A(), 1024);
    src.fill(32);
    ibv_mw* mw = alloc_mw2();
    ASSERT_TRUE(mw);
    uint32_t key = bind(p.b, mw, target, 0, 4096);
    Buffer& rbuf = post_recvs(p.b, 80, 1, 512);

    ibv_wr_start(qa_);
    qa_->wr_id = 5;
    qa_->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_inv(qa_, key);
    ibv_wr_set_sge(qa_, src.lkey(), src.addr(0), 300);
    ASSERT_EQ(ibv_wr_complete(qa_), 0);
    expect_send_ok(p.a, 5, IBV_WC_SEND, 300);
    ibv_cq_ex* x = reinterpret_cast<ibv_cq_ex*>(p.b.rcq);  // made by ibv_create_cq_ex
    ibv_poll_cq_attr attr{};
    ASSERT_EQ(ibv_start_poll(x, &attr), 0);
    EXPECT_EQ(x->wr_id, 80u);
    EXPECT_EQ(x->status, IBV_WC_SUCCESS);
    EXPECT_EQ(ibv_wc_read_opcode(x), IBV_WC_RECV);
    EXPECT_EQ(ibv_wc_read_byte_len(x), 300u);
    EXPECT_EQ(ibv_wc_read_wc_flags(x) & (IBV_WC_WITH_INV | IBV_WC_WITH_IMM), IBV_WC_WITH_INV);
    EXPECT_EQ(ibv_wc_read_invalidated_rkey(x), key);
    ibv_end_poll(x);
    EXPECT_EQ(rbuf.mismatch(32, 0, 300, 0), -1);
    EXPECT_EQ(write(p.a, src, 64, key, target.addr(0), 6), IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(target.not_poison(0, 4096), -1);
}

}  // namespace
}  // namespace uroce::transport_test
