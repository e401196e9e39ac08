// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device engine's control verbs (emu/engine/device.h): their argument checks, driven
// through Device::handle() by a hand-made client (device_test_support.h).
#include <gtest/gtest.h>

#include "device_test_support.h"

namespace uroce::emu::device_test {
namespace {

class ControlTest : public ::testing::Test {
protected:
    void SetUp() override {
        devs_ = start_devices(1);
        ASSERT_EQ(devs_.size(), 1u);
        c_ = std::make_unique<Client>(*devs_[0]);
        ASSERT_TRUE(c_->ok());
        ASSERT_EQ(c_->alloc_pd(&pd_), 0);
    }
    void TearDown() override {
        c_.reset();
        devs_.clear();
    }
    std::vector<std::unique_ptr<Device>> devs_;
    std::unique_ptr<Client> c_;
    uint32_t pd_ = 0;
    std::vector<uint8_t> buf_ = std::vector<uint8_t>(8192);
};

TEST_F(ControlTest, RegMrRejectsZeroLength) {
    uint32_t key;
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 0, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    // The same call with a length succeeds, so EINVAL above was about the length.
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 1, IBV_ACCESS_LOCAL_WRITE, &key), 0);
}

TEST_F(ControlTest, RegMrRejectsRemoteWriteWithoutLocalWrite) {
    uint32_t key;
    // The kernel (ib_check_mr_access) refuses remote write and remote atomic without
    // local write; remote read alone is fine.
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_WRITE, &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_ATOMIC, &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_READ, &key), 0);
    EXPECT_EQ(
        c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE, &key),
        0);
}

TEST_F(ControlTest, RegMrRejectsUnknownAccessBits) {
    uint32_t key;
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE | (1u << 15), &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE | (1u << 31), &key), EINVAL);
}

TEST_F(ControlTest, RegMrRejectsAddressWrap) {
    abi::Request req{};
    req.op = abi::Op::kRegMr;
    req.u.reg_mr.pd = pd_;
    req.u.reg_mr.access = IBV_ACCESS_LOCAL_WRITE;
    req.u.reg_mr.addr = ~uint64_t(0) - 10;
    req.u.reg_mr.length = 4096;
    req.u.reg_mr.iova = 0x1000;
    abi::Response resp;
    EXPECT_EQ(c_->request(req, &resp), EINVAL);
    // The same range without the wrap registers, so EINVAL above was about the wrap.
    req.u.reg_mr.addr = reinterpret_cast<uint64_t>(buf_.data());
    EXPECT_EQ(c_->request(req, &resp), 0);
}

TEST_F(ControlTest, RegMrRejectsWrongAndForeignPd) {
    uint32_t key;
    EXPECT_EQ(c_->reg_mr(0, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    EXPECT_EQ(c_->reg_mr(pd_ + 1000, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    // A PD of another session (another process) is not ours to use, though it exists.
    Client other(*devs_[0]);
    uint32_t foreign;
    ASSERT_EQ(other.alloc_pd(&foreign), 0);
    EXPECT_EQ(c_->reg_mr(foreign, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), EINVAL);
    EXPECT_EQ(other.reg_mr(foreign, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    // Nor may we free it or its MR.
    EXPECT_EQ(c_->dereg_mr(key), EINVAL);
    EXPECT_EQ(c_->dealloc_pd(foreign), EINVAL);
    EXPECT_EQ(other.dereg_mr(key), 0);
    EXPECT_EQ(other.dealloc_pd(foreign), 0);
}

TEST_F(ControlTest, DeregMrRejectsBadKeys) {
    uint32_t key;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    EXPECT_EQ(c_->dereg_mr(0), EINVAL);
    EXPECT_EQ(c_->dereg_mr(0xffffffff), EINVAL);
    // Right table slot, wrong generation byte: a stale or forged key.
    EXPECT_EQ(c_->dereg_mr(key ^ 0x1), EINVAL);
    EXPECT_EQ(c_->dereg_mr(key), 0);
    // Already gone.
    EXPECT_EQ(c_->dereg_mr(key), EINVAL);
}

TEST_F(ControlTest, StaleKeyOfReusedSlotFails) {
    uint32_t k1, k2;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &k1), 0);
    ASSERT_EQ(c_->dereg_mr(k1), 0);
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &k2), 0);
    EXPECT_NE(k1, k2);
    EXPECT_EQ(c_->dereg_mr(k1), EINVAL);
    EXPECT_EQ(c_->dereg_mr(k2), 0);
}

TEST_F(ControlTest, DeallocPdWithMrIsBusy) {
    uint32_t key;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), EBUSY);
    ASSERT_EQ(c_->dereg_mr(key), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), EINVAL);
}

TEST_F(ControlTest, DestroyCqInUseIsBusy) {
    std::unique_ptr<TestCq> scq, rcq;
    ASSERT_EQ(c_->create_cq(8, &scq), 0);
    ASSERT_EQ(c_->create_cq(8, &rcq), 0);
    std::unique_ptr<TestQp> qp;
    ASSERT_EQ(c_->create_qp(pd_, scq->handle, rcq->handle, small_cap(), &qp), 0);
    EXPECT_EQ(c_->destroy_cq(scq->handle), EBUSY);
    EXPECT_EQ(c_->destroy_cq(rcq->handle), EBUSY);
    EXPECT_EQ(c_->dealloc_pd(pd_), EBUSY);
    ASSERT_EQ(c_->destroy_qp(qp->qpn), 0);
    EXPECT_EQ(c_->destroy_qp(qp->qpn), EINVAL);
    EXPECT_EQ(c_->destroy_cq(scq->handle), 0);
    EXPECT_EQ(c_->destroy_cq(rcq->handle), 0);
    EXPECT_EQ(c_->dealloc_pd(pd_), 0);
}

TEST_F(ControlTest, CreateCqChecksSize) {
    std::unique_ptr<TestCq> cq;
    EXPECT_EQ(c_->create_cq(0, &cq), EINVAL);
    EXPECT_EQ(c_->create_cq(abi::kMaxCqe + 1, &cq), EINVAL);
    EXPECT_EQ(cq, nullptr);
    EXPECT_EQ(c_->create_cq(1, &cq), 0);
}

// ibv_resize_cq's new ring comes from the application: the device maps it only if it is a
// memfd sealed against shrinking and large enough, and refuses sizes as rxe does. A refused
// resize leaves the CQ as it was; an accepted one moves what the CQ holds.
TEST_F(ControlTest, ResizeCqChecksTheRingAndTheSize) {
    std::unique_ptr<TestCq> cq;
    ASSERT_EQ(c_->create_cq(8, &cq), 0);
    auto resize = [&](uint32_t cqe, uint32_t slots, int fd, uint32_t handle = 0) {
        abi::Request req{};
        req.op = abi::Op::kResizeCq;
        req.u.resize_cq = abi::ResizeCqReq{handle ? handle : cq->handle, cqe, slots, 0};
        abi::Response resp;
        int e = c_->request(req, &resp, nullptr, fd);
        if (!e) {
            EXPECT_EQ(resp.u.resize_cq.cqe, slots - 1);
        }
        return e;
    };
    auto memfd = [](size_t bytes, unsigned seals) {
        int fd = memfd_create("test-cq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        EXPECT_GE(fd, 0);
        EXPECT_EQ(ftruncate(fd, off_t(bytes)), 0);
        if (seals) {
            EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
        }
        return fd;
    };
    const uint32_t slots = abi::cq_slots(100);
    const size_t bytes = abi::ring_bytes(slots, sizeof(abi::Cqe));
    int good = memfd(bytes, F_SEAL_SHRINK);
    int unsealed = memfd(bytes, 0);
    int small = memfd(bytes - 4096, F_SEAL_SHRINK);
    int readonly = memfd(bytes, F_SEAL_SHRINK | F_SEAL_WRITE);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    EXPECT_EQ(resize(100, slots, -1), EBADF);
    EXPECT_EQ(resize(100, slots, unsealed), EINVAL);  // it could shrink under the device
    EXPECT_EQ(resize(100, slots, small), EINVAL);
    EXPECT_EQ(resize(100, slots, p[0]), EINVAL);
    EXPECT_EQ(resize(100, slots, readonly), EPERM);
    EXPECT_EQ(resize(100, slots * 2, good), EINVAL);  // not the device's size for 100
    EXPECT_EQ(resize(0, abi::cq_slots(0), good), EINVAL);
    EXPECT_EQ(resize(abi::kMaxCqe + 1, abi::cq_slots(abi::kMaxCqe + 1), good), EINVAL);
    EXPECT_EQ(resize(100, slots, good, cq->handle + 1000), EINVAL);
    Client other(*devs_[0]);
    std::unique_ptr<TestCq> foreign;
    ASSERT_EQ(other.create_cq(8, &foreign), 0);
    EXPECT_EQ(resize(100, slots, good, foreign->handle), EINVAL);
    // A consumer index that claims more CQEs than the ring has slots is garbage.
    cq->ring.hdr()->cons.store(1000, std::memory_order_release);
    EXPECT_EQ(resize(100, slots, good), EINVAL);
    cq->ring.hdr()->cons.store(0, std::memory_order_release);
    EXPECT_EQ(resize(100, slots, good), 0);
    // The device moved to the new ring: its header is there, and the CQ can be destroyed.
    MappedRing ring;
    ASSERT_TRUE(ring.map(dup(good), slots, sizeof(abi::Cqe)));
    EXPECT_EQ(ring.hdr()->prod.load(), 0u);
    EXPECT_EQ(ring.hdr()->cons.load(), 0u);
    for (int fd : {good, unsealed, small, readonly, p[0], p[1]}) close(fd);
    EXPECT_EQ(c_->destroy_cq(cq->handle), 0);
}

TEST_F(ControlTest, ReregMrChecksAndMovesThePd) {
    uint32_t key, pd2;
    ASSERT_EQ(c_->reg_mr(pd_, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE, &key), 0);
    ASSERT_EQ(c_->alloc_pd(&pd2), 0);
    auto rereg = [&](uint32_t handle, uint32_t flags, uint32_t pd, uint32_t access, uint64_t addr,
                     uint64_t length) {
        abi::Request req{};
        req.op = abi::Op::kReregMr;
        req.u.rereg_mr = abi::ReregMrReq{handle, flags, pd, access, addr, length};
        abi::Response resp;
        int e = c_->request(req, &resp);
        if (!e) {
            EXPECT_EQ(resp.u.reg_mr.lkey, key);
        }
        return e;
    };
    const uint64_t a = reinterpret_cast<uint64_t>(buf_.data());
    EXPECT_EQ(rereg(key, 0, 0, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, 8, 0, 0, 0, 0), EOPNOTSUPP);
    EXPECT_EQ(rereg(key ^ 1, IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_PD, pd2 + 1000, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_ACCESS, 0, 1u << 15, 0, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, ~uint64_t(0) - 10, 4096), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, a, 0), EINVAL);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, a, abi::kMaxMrSize + 1), EINVAL);
    Client other(*devs_[0]);
    uint32_t foreign_pd, foreign_key;
    ASSERT_EQ(other.alloc_pd(&foreign_pd), 0);
    ASSERT_EQ(other.reg_mr(foreign_pd, buf_.data(), 64, 0, &foreign_key), 0);
    EXPECT_EQ(rereg(key, IBV_REREG_MR_CHANGE_PD, foreign_pd, 0, 0, 0), EINVAL);
    EXPECT_EQ(rereg(foreign_key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, 0), EINVAL);
    // Moved to pd2, the MR holds pd2 and no longer its first PD.
    ASSERT_EQ(rereg(key, IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0), 0);
    EXPECT_EQ(c_->dealloc_pd(pd2), EBUSY);
    EXPECT_EQ(c_->dealloc_pd(pd_), 0);
    EXPECT_EQ(c_->dereg_mr(key), 0);
    EXPECT_EQ(c_->dealloc_pd(pd2), 0);
}

TEST_F(ControlTest, CreateQpChecksCapsAgainstLimits) {
    std::unique_ptr<TestCq> cq;
    ASSERT_EQ(c_->create_cq(8, &cq), 0);
    std::unique_ptr<TestQp> qp;
    struct Case {
        const char* what;
        ibv_qp_cap cap;
    };
    auto with = [](auto f) {
        ibv_qp_cap c = small_cap();
        f(c);
        return c;
    };
    const Case cases[] = {
        {"max_send_wr", with([](ibv_qp_cap& c) { c.max_send_wr = abi::kMaxQpWr + 1; })},
        {"max_recv_wr", with([](ibv_qp_cap& c) { c.max_recv_wr = abi::kMaxQpWr + 1; })},
        {"max_send_sge", with([](ibv_qp_cap& c) { c.max_send_sge = abi::kMaxSge + 1; })},
        {"max_recv_sge", with([](ibv_qp_cap& c) { c.max_recv_sge = abi::kMaxSge + 1; })},
        {"max_inline_data", with([](ibv_qp_cap& c) { c.max_inline_data = abi::kMaxInline + 1; })},
        {"max_send_wr huge", with([](ibv_qp_cap& c) { c.max_send_wr = 0xffffffffu; })},
    };
    for (const Case& k : cases)
        EXPECT_EQ(c_->create_qp(pd_, cq->handle, cq->handle, k.cap, &qp), EINVAL) << k.what;
    EXPECT_EQ(qp, nullptr);
    // Exactly at the limits is allowed.
    ibv_qp_cap max{};
    max.max_send_wr = abi::kMaxQpWr;
    max.max_recv_wr = abi::kMaxQpWr;
    max.max_send_sge = abi::kMaxSge;
    max.max_recv_sge = abi::kMaxSge;
    max.max_inline_data = abi::kMaxInline;
    ASSERT_EQ(c_->create_qp(pd_, cq->handle, cq->handle, max, &qp), 0);
    EXPECT_EQ(qp->cap.max_send_wr, abi::kMaxQpWr);
    EXPECT_EQ(qp->cap.max_inline_data, abi::kMaxInline);
}

TEST_F(ControlTest, CreateQpRejectsForeignObjects) {
    std::unique_ptr<TestCq> cq;
    ASSERT_EQ(c_->create_cq(8, &cq), 0);
    Client other(*devs_[0]);
    uint32_t opd;
    ASSERT_EQ(other.alloc_pd(&opd), 0);
    std::unique_ptr<TestCq> ocq;
    ASSERT_EQ(other.create_cq(8, &ocq), 0);
    std::unique_ptr<TestQp> qp;
    EXPECT_EQ(c_->create_qp(opd, cq->handle, cq->handle, small_cap(), &qp), EINVAL);
    EXPECT_EQ(c_->create_qp(pd_, ocq->handle, cq->handle, small_cap(), &qp), EINVAL);
    EXPECT_EQ(c_->create_qp(pd_, cq->handle, ocq->handle, small_cap(), &qp), EINVAL);
    EXPECT_EQ(c_->destroy_cq(ocq->handle), EINVAL);
    ASSERT_EQ(c_->create_qp(pd_, cq->handle, cq->handle, small_cap(), &qp), 0);
    // Another session can neither modify, query nor destroy our QP.
    EXPECT_EQ(other.destroy_qp(qp->qpn), EINVAL);
    EXPECT_EQ(other.qp_state(qp->qpn), -EINVAL);
    EXPECT_EQ(c_->qp_state(qp->qpn), int(IBV_QPS_RESET));
}

}  // namespace
}  // namespace uroce::emu::device_test
