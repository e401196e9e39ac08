// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Control requests that fuzz_control (tests/fuzz/fuzz_control.cpp) found to hurt the device,
// each reduced to the requests that matter. A device with no engine thread
// (Device::start_manual) serves one connection through dispatch_control, as the daemon's
// ControlServer does, so every test runs the same way each time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emu/abi/cm_protocol.h"
#include "emu/abi/protocol.h"
#include "emu/control/control_dispatch.h"
#include "emu/engine/device.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {

// A device without its thread, on 127.0.0.4 and the first free port, and one connection.
class ControlGarbageTest : public ::testing::Test {
protected:
    void SetUp() override {
        for (uint16_t port = 6500; port < 6600 && !dev_; ++port) {
            DeviceConfig cfg;
            cfg.name = "garbage0";
            cfg.ipv4_be = inet_addr("127.0.0.4");
            cfg.port = port;
            auto d = std::make_unique<Device>(cfg);
            if (d->start_manual() == 0) dev_ = std::move(d);
        }
        ASSERT_TRUE(dev_);
        empty_ = dev_->objects();
        abi::Request q = req(abi::Op::kOpen);
        q.u.open.version = abi::kProtocolVersion;
        ASSERT_EQ(send(q), 0);
    }
    void TearDown() override {
        if (!dev_) return;
        if (Session* s = conn_.session) dev_->call([&] { dev_->close_session(s); });
        for (int i = 0; i < 4; ++i) dev_->turn();
        EXPECT_TRUE(dev_->objects() == empty_) << dev_->dump();
        for (int fd : fds_) close(fd);
    }

    static abi::Request req(abi::Op op) {
        abi::Request q{};
        q.op = op;
        return q;
    }
    // One Request; returns the answer's errno (and the answer in *a).
    int send(const abi::Request& q, abi::Response* a = nullptr) {
        ControlMsg msg;
        std::memset(&msg, 0, sizeof msg);
        msg.req = q;
        ControlReply out;
        EXPECT_TRUE(dispatch_control(*dev_, conn_, msg, sizeof q, -1, &out));
        fds_.insert(fds_.end(), out.fds.begin(), out.fds.end());
        abi::Response r{};
        EXPECT_EQ(out.bytes.size(), sizeof r);
        std::memcpy(&r, out.bytes.data(), std::min(sizeof r, out.bytes.size()));
        if (a) *a = r;
        return r.err;
    }
    // A PD, a CQ and an RC QP in RESET; returns the QPN.
    uint32_t rc_qp() {
        abi::Response a;
        EXPECT_EQ(send(req(abi::Op::kAllocPd), &a), 0);
        const uint32_t pd = pd_ = a.u.pd.pd;
        abi::Request q = req(abi::Op::kCreateCq);
        q.u.create_cq.cqe = 16;
        q.u.create_cq.channel = -1;
        EXPECT_EQ(send(q, &a), 0);
        uint32_t cq = a.u.create_cq.handle;
        q = req(abi::Op::kCreateQp);
        auto& c = q.u.create_qp;
        c.pd = pd;
        c.send_cq = c.recv_cq = cq;
        c.qp_type = IBV_QPT_RC;
        c.cap.max_send_wr = c.cap.max_recv_wr = 4;
        c.cap.max_send_sge = c.cap.max_recv_sge = 1;
        EXPECT_EQ(send(q, &a), 0);
        return a.u.create_qp.qpn;
    }

    // Modifies `qpn` to `st` with the attributes an RC QP needs for it (peer QP 0x77 at
    // 127.0.0.254, PSNs 0).
    int to_state(uint32_t qpn, ibv_qp_state st) {
        abi::Request q = req(abi::Op::kModifyQp);
        auto& m = q.u.modify_qp;
        m.qpn = qpn;
        m.attr.qp_state = st;
        m.attr.port_num = 1;
        m.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        m.attr.path_mtu = IBV_MTU_1024;
        m.attr.dest_qp_num = 0x77;
        m.attr.max_dest_rd_atomic = 1;
        m.attr.ah_attr.is_global = 1;
        m.attr.ah_attr.port_num = 1;
        m.attr.ah_attr.grh.dgid.raw[10] = m.attr.ah_attr.grh.dgid.raw[11] = 0xff;
        const uint32_t peer = inet_addr("127.0.0.254");
        std::memcpy(&m.attr.ah_attr.grh.dgid.raw[12], &peer, 4);
        m.mask = IBV_QP_STATE;
        if (st == IBV_QPS_INIT) m.mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        if (st == IBV_QPS_RTR)
            m.mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        return send(q);
    }
    ibv_qp_state state(uint32_t qpn) {
        abi::Request q = req(abi::Op::kQueryQp);
        q.u.query_qp.qpn = qpn;
        abi::Response a;
        EXPECT_EQ(send(q, &a), 0);
        return a.u.query_qp.attr.qp_state;
    }
    // An RC WRITE packet from the peer to `qpn`, as the socket would deliver it.
    void write_packet(uint8_t opcode, uint32_t qpn, uint32_t psn, uint64_t va, uint32_t rkey,
                      uint32_t dma_len, uint32_t payload) {
        net::Packet p{};
        p.bth.opcode = opcode;
        p.bth.pkey = net::kDefaultPkey;
        p.bth.dqpn = qpn;
        p.bth.psn = psn;
        p.bth.pad = net::pad_for(payload);
        p.reth = {va, rkey, dma_len};
        std::vector<uint8_t> b(net::op_info(opcode)->hdr_len + payload + p.bth.pad + net::kIcrcLen);
        net::encode_headers(p, b.data());
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = inet_addr("127.0.0.254");
        from.sin_port = htons(dev_->config().port);
        net::icrc_store(from.sin_addr.s_addr, dev_->config().ipv4_be, dev_->config().port,
                        dev_->config().port, b.data(), b.size());
        dev_->wire().on_packet(from, dev_->config().endpoint(), b.data(), b.size(), 0);
    }

    std::unique_ptr<Device> dev_;
    ControlConn conn_{nullptr, getpid()};
    DeviceObjects empty_;
    uint32_t pd_ = 0;  // rc_qp's
    std::vector<int> fds_;
};

// ibv_qp_attr's enum fields come from the client as any 32-bit value. They were loaded as
// the enums (undefined behaviour for a value outside the enum's range: UBSan's "load of value
// 3200171710, which is not a valid value for type 'enum ibv_qp_state'"); now they are checked
// as integers and a value that is no state, MTU or migration state is EINVAL.
TEST_F(ControlGarbageTest, ModifyQpEnumFieldsOutOfRange) {
    const uint32_t qpn = rc_qp();
    const uint32_t junk = 0xbebebebe;
    auto modify = [&](uint64_t mask, size_t offset) {
        abi::Request q = req(abi::Op::kModifyQp);
        q.u.modify_qp.qpn = qpn;
        q.u.modify_qp.mask = mask;
        q.u.modify_qp.attr.qp_state = IBV_QPS_INIT;
        q.u.modify_qp.attr.port_num = 1;
        std::memcpy(reinterpret_cast<uint8_t*>(&q.u.modify_qp.attr) + offset, &junk, 4);
        return send(q);
    };
    EXPECT_EQ(modify(IBV_QP_STATE | IBV_QP_PORT, offsetof(ibv_qp_attr, qp_state)), EINVAL);
    EXPECT_EQ(modify(IBV_QP_STATE | IBV_QP_CUR_STATE, offsetof(ibv_qp_attr, cur_qp_state)), EINVAL);
    EXPECT_EQ(modify(IBV_QP_PATH_MTU, offsetof(ibv_qp_attr, path_mtu)), EINVAL);
    EXPECT_EQ(modify(IBV_QP_PATH_MIG_STATE, offsetof(ibv_qp_attr, path_mig_state)), EINVAL);
    // Garbage in a field the mask does not name is no reason to refuse: RESET -> INIT.
    const uint64_t init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    EXPECT_EQ(modify(init, offsetof(ibv_qp_attr, path_mtu)), 0);
    abi::Request q = req(abi::Op::kQueryQp);
    q.u.query_qp.qpn = qpn;
    abi::Response a;
    ASSERT_EQ(send(q, &a), 0);
    EXPECT_EQ(a.u.query_qp.attr.qp_state, IBV_QPS_INIT);
}

// A QP reset while an RDMA WRITE it was receiving was unfinished kept that WRITE open: after
// RESET -> INIT -> RTR its first WRITE was "a new message while one is still open", a
// REM_INV_REQ_ERR that put the fresh QP in ERR (and a Middle packet would have continued the
// old WRITE). RESET forgets the message in progress, as it forgets the queues.
TEST_F(ControlGarbageTest, ResetForgetsWriteInProgress) {
    const uint32_t qpn = rc_qp();
    std::vector<uint8_t> mem(8192);
    abi::Request q = req(abi::Op::kRegMr);
    q.u.reg_mr.pd = pd_;
    q.u.reg_mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    q.u.reg_mr.addr = q.u.reg_mr.iova = reinterpret_cast<uint64_t>(mem.data());
    q.u.reg_mr.length = mem.size();
    abi::Response a;
    ASSERT_EQ(send(q, &a), 0);
    const uint32_t rkey = a.u.reg_mr.rkey;
    const uint64_t va = q.u.reg_mr.iova;
    ASSERT_EQ(to_state(qpn, IBV_QPS_INIT), 0);
    ASSERT_EQ(to_state(qpn, IBV_QPS_RTR), 0);
    write_packet(net::kRcWriteFirst, qpn, 0, va, rkey, 4096, 1024);  // the rest never comes
    ASSERT_EQ(state(qpn), IBV_QPS_RTR);
    for (ibv_qp_state st : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR})
        ASSERT_EQ(to_state(qpn, st), 0);
    write_packet(net::kRcWriteOnly, qpn, 0, va + 4096, rkey, 8, 8);
    EXPECT_EQ(state(qpn), IBV_QPS_RTR);
}

}  // namespace
}  // namespace uroce::emu
