// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Tests of the UD stage (emu/transport/ud_transport.h) on its own: a fake environment stands
// for the device (the WQEs the requester fetched, transmit buffers, DMA, posted receives,
// completions, drops) and records what UdTransport asks of it. Sent packets are decoded
// again; received ones are crafted.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "emu/transport/ud_transport_impl.h"
#include "fake_receive_env.h"
#include "net/opcodes.h"

namespace uroce::emu {
namespace {

constexpr uint16_t kPort = 4791;

struct FakeEnv {
    struct Sent {
        std::vector<uint8_t> bytes;  // BTH through pad
        net::Endpoint to;
        net::IpMarks marks;
        bool other_source;
    };
    struct Posted {
        uint64_t wr_id;
        uint8_t* buf;
        uint32_t len;
        bool ok = true;  // its SGE passed the checks
    };
    struct Cqe {
        uint32_t cq;
        abi::Cqe c;
        bool solicited;
    };
    struct RecvDone {
        uint64_t wr_id;
        ibv_wc_status status;
    };

    std::deque<SendWr> to_fetch;  // what fetch_send_wqe takes next
    std::vector<Sent> sent;
    std::vector<std::pair<uint32_t, ibv_wc_status>> send_done;  // (index, status)
    std::vector<uint32_t> blocked;                              // complete_blocked: sq_send then
    std::deque<Posted> posted;
    std::vector<Cqe> cqes;
    std::vector<RecvDone> recv_done;
    std::vector<net::DropReason> drops;
    int ready = 0;
    bool no_buffers = false;
    std::vector<net::Endpoint> locals{net::Endpoint::ipv4(htonl(0x0a000001), kPort)};
    uint8_t tx_buf[8192];

    struct RequesterPart {
        FakeEnv& e;
        bool fetch_send_wqe(Qp& qp) {
            if (e.to_fetch.empty()) return false;
            qp.swr[qp.sq_fetch & qp.sq_mask] = e.to_fetch.front();
            e.to_fetch.pop_front();
            ++qp.sq_fetch;
            return true;
        }
        void complete_blocked(Qp& qp) { e.blocked.push_back(qp.sq_send); }
    };
    struct WirePart {
        FakeEnv& e;
        bool self_paced(const net::Endpoint&) const { return false; }
        const net::Endpoint& local(uint16_t i) const { return e.locals.at(i); }
        net::TxSource device_source(uint16_t i) const { return net::TxSource{kPort, 0, i}; }
        uint8_t* tx_begin(uint32_t* slot) {
            *slot = 0;
            return e.no_buffers ? nullptr : e.tx_buf;
        }
        void transmit(uint32_t, size_t len, const net::Endpoint& to, Qp*, net::IpMarks marks,
                      const net::TxSource* other) {
            e.sent.push_back(
                {std::vector<uint8_t>(e.tx_buf, e.tx_buf + len), to, marks, other != nullptr});
        }
        void tx_free(uint32_t) {}
    };
    struct DmaPart {
        FakeEnv& e;
        bool read(Session*, void* dst, const iovec* remote, int n, size_t) {
            for (int i = 0; i < n; ++i) {
                std::memcpy(dst, remote[i].iov_base, remote[i].iov_len);
                dst = static_cast<uint8_t*>(dst) + remote[i].iov_len;
            }
            return true;
        }
        void write_later(Session*, const void* src, const iovec* remote, int n, size_t, uint32_t,
                         uint32_t, DmaWriteBatch::Path) {
            for (int i = 0; i < n; ++i) {
                std::memcpy(remote[i].iov_base, src, remote[i].iov_len);
                src = static_cast<const uint8_t*>(src) + remote[i].iov_len;
            }
        }
        bool settle(Qp&) { return true; }
    };
    struct RecvPart {
        FakeEnv& e;
        bool take(Qp& qp) {
            if (e.posted.empty()) return false;
            Posted r = e.posted.front();
            e.posted.pop_front();
            fake::take_one_sge_recv(qp, r.wr_id, r.buf, r.len, r.ok);
            qp.rx_cq = qp.recv_cq;
            return true;
        }
        void place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path) {
            fake::place_in_one_sge_recv(qp, p);
        }
        void complete(Qp& qp, const net::Packet&, ibv_wc_status st) {
            e.recv_done.push_back({qp.rwr.wr_id, st});
            qp.have_rwr = false;
        }
    };
    struct DonePart {
        FakeEnv& e;
        void complete_send(Qp& qp, uint32_t index, ibv_wc_status st) {
            e.send_done.emplace_back(index, st);
            qp.sq_done = index + 1;
        }
        void push_cqe(uint32_t cq, const abi::Cqe& c, bool solicited) {
            e.cqes.push_back({cq, c, solicited});
        }
    };
    struct SchedPart {
        FakeEnv& e;
        void mark_ready(Qp&) { ++e.ready; }
    };
    struct CountersPart {
        FakeEnv& e;
        void drop(net::DropReason r, Qp&) { e.drops.push_back(r); }
    };
    RequesterPart requester{*this};
    WirePart wire{*this};
    DmaPart dma{*this};
    RecvPart recv{*this};
    DonePart done{*this};
    SchedPart sched{*this};
    CountersPart counters{*this};
};

class UdTransportTest : public ::testing::Test {
protected:
    UdTransportTest() {
        fake::rts_qp(qp, session, 0x33, IBV_QPT_UD);
        qp.attr.qkey = 0x11111111;
        qp.recv_cq = 4;
        qp.next_psn = qp.una_psn = 100;
        qp.sq_mask = 7;
        qp.swr.resize(8);
        qp.swr_sge.resize(8);
    }
    // A UD SEND WQE of `data` to QPN 0x44 at 10.0.0.2, from the device's first address.
    SendWr send_wr(uint64_t id, std::string& data, uint32_t qkey = 0x22222222) {
        SendWr w;
        w.wr_id = id;
        w.opcode = IBV_WR_SEND;
        w.length = uint32_t(data.size());
        w.ud_dest = net::Endpoint::ipv4(htonl(0x0a000002), kPort);
        w.ud_local = 0;
        w.ud_marks = net::IpMarks{0x68, 9};
        w.ud_qpn = 0x44;
        w.ud_qkey = qkey;
        w.num_sge = 1;
        sges.push_back({reinterpret_cast<uint64_t>(data.data()), uint32_t(data.size()), 1});
        w.sge = &sges.back();
        return w;
    }
    // A received UD SEND of `payload` from 10.0.0.2 (QPN 0x44) with `qkey`.
    net::Packet ud_packet(const std::string& payload, uint32_t qkey, bool imm = false) {
        net::Packet p{};
        p.bth.opcode = imm ? net::kUdSendOnlyImm : net::kUdSendOnly;
        p.bth.pad = net::pad_for(uint32_t(payload.size()));
        p.bth.dqpn = qp.qpn;
        p.bth.psn = 7;
        p.deth.qkey = qkey;
        p.deth.src_qpn = 0x44;
        p.imm = 0xa1b2c3d4;
        p.ip = net::IpMarks{0x20, 61};
        p.payload = reinterpret_cast<const uint8_t*>(payload.data());
        p.payload_len = uint32_t(payload.size());
        return p;
    }
    net::Endpoint peer = net::Endpoint::ipv4(htonl(0x0a000002), 51234);
    net::Endpoint me = net::Endpoint::ipv4(htonl(0x0a000001), kPort);
    Session session;
    Qp qp;
    std::deque<abi::Sge> sges;  // stable addresses for the WQEs' SGEs
    FakeEnv env;
    UdTransport<FakeEnv> ud{env};
};

// Each WQE leaves as one UD SEND ONLY packet: the destination's QPN and Q_Key (the QP's own
// when the WQE's has its high bit set, IBTA 10.2.5), the QP as source, consecutive PSNs, the
// payload read from the application, the AH's address and IP marks; then it completes.
TEST_F(UdTransportTest, SendsEachWqeAsOnePacketAndCompletesIt) {
    std::string a = "hello, datagram", b = "second";
    env.to_fetch.push_back(send_wr(1, a));
    env.to_fetch.push_back(send_wr(2, b, 0x80000000u));
    ud.requester_progress(qp);
    ASSERT_EQ(env.sent.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        net::Packet p{};
        std::vector<uint8_t> bytes = env.sent[i].bytes;
        bytes.resize(bytes.size() + net::kIcrcLen);  // decode() leaves the ICRC unchecked
        ASSERT_EQ(net::decode(bytes.data(), bytes.size(), p), net::DropReason::kNone);
        EXPECT_EQ(p.bth.opcode, net::kUdSendOnly);
        EXPECT_EQ(p.bth.dqpn, 0x44u);
        EXPECT_EQ(p.bth.psn, 100u + i);
        EXPECT_EQ(p.deth.src_qpn, 0x33u);
        EXPECT_EQ(p.deth.qkey, i == 0 ? 0x22222222u : 0x11111111u);
        const std::string& want = i == 0 ? a : b;
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(p.payload), p.payload_len), want);
        EXPECT_TRUE(env.sent[i].to.same(net::Endpoint::ipv4(htonl(0x0a000002), kPort)));
        EXPECT_EQ(env.sent[i].marks.tos, 0x68);
        EXPECT_EQ(env.sent[i].marks.ttl, 9);
    }
    ASSERT_EQ(env.send_done.size(), 2u);
    EXPECT_EQ(env.send_done[0], std::make_pair(0u, IBV_WC_SUCCESS));
    EXPECT_EQ(env.send_done[1], std::make_pair(1u, IBV_WC_SUCCESS));
    EXPECT_EQ(qp.next_psn, 102u);
    EXPECT_EQ(qp.tx_pkts, 2u);
}

// A source address the device does not have (garbage in the ring) cannot leave: the WQE
// completes with LOC_QP_OP_ERR and nothing is sent.
TEST_F(UdTransportTest, AnUnknownSourceAddressIsALocalQpOperationError) {
    std::string a = "x";
    SendWr w = send_wr(1, a);
    w.ud_local = kNoLocal;
    env.to_fetch.push_back(w);
    ud.requester_progress(qp);
    EXPECT_TRUE(env.sent.empty());
    ASSERT_EQ(env.blocked.size(), 1u);
    EXPECT_EQ(qp.swr[0].status, IBV_WC_LOC_QP_OP_ERR);
}

// With every transmit buffer in flight the QP waits on the ready list; nothing is lost.
TEST_F(UdTransportTest, WaitsForATransmitBuffer) {
    std::string a = "later";
    env.to_fetch.push_back(send_wr(1, a));
    env.no_buffers = true;
    ud.requester_progress(qp);
    EXPECT_TRUE(env.sent.empty());
    EXPECT_EQ(env.ready, 1);
    EXPECT_TRUE(env.send_done.empty());
    env.no_buffers = false;
    ud.requester_progress(qp);
    ASSERT_EQ(env.sent.size(), 1u);
    ASSERT_EQ(env.send_done.size(), 1u);
}

// A receive starts with the 40-byte GRH area, whose last 20 bytes are the IPv4 header the
// packet came with (its TOS and TTL, a valid checksum), then the payload; the completion has
// IBV_WC_GRH, the sender's QPN, the immediate and wc.sl RDMA_NETWORK_IPV4 (2).
TEST_F(UdTransportTest, ReceivesWithTheIpv4HeaderInTheGrhArea) {
    std::vector<uint8_t> buf(256, 0xee);
    env.posted.push_back({9, buf.data(), uint32_t(buf.size())});
    std::string data = "payload of a datagram";
    net::Packet p = ud_packet(data, qp.attr.qkey, true);
    p.bth.se = true;
    ud.receive(qp, p, peer, me);
    ASSERT_EQ(env.cqes.size(), 1u);
    const abi::Cqe& c = env.cqes[0].c;
    EXPECT_EQ(env.cqes[0].cq, 4u);
    EXPECT_TRUE(env.cqes[0].solicited);
    EXPECT_EQ(c.wr_id, 9u);
    EXPECT_EQ(c.status, uint32_t(IBV_WC_SUCCESS));
    EXPECT_EQ(c.opcode, uint32_t(IBV_WC_RECV));
    EXPECT_EQ(c.byte_len, 40u + data.size());
    EXPECT_EQ(c.src_qp, 0x44u);
    EXPECT_EQ(c.qp_num, 0x33u);
    EXPECT_EQ(c.wc_flags, uint32_t(IBV_WC_GRH | IBV_WC_WITH_IMM));
    EXPECT_EQ(c.imm_data, htonl(0xa1b2c3d4));
    EXPECT_EQ(c.sl, 2);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(buf[i], 0) << "GRH byte " << i;
    const uint8_t* ip = buf.data() + 20;
    EXPECT_EQ(ip[0], 0x45);
    EXPECT_EQ(ip[1], 0x20) << "TOS as received";
    EXPECT_EQ(ip[8], 61) << "TTL as received";
    EXPECT_EQ(ip[9], 17);
    // IPv4 total length: 20 + UDP 8 + BTH 12 + DETH 8 + IMM 4 + payload + pad + ICRC 4.
    EXPECT_EQ(ip[2] << 8 | ip[3], 20 + 8 + 12 + 8 + 4 + int(data.size()) + p.bth.pad + 4);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += uint32_t(ip[i] << 8 | ip[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    EXPECT_EQ(sum, 0xffffu) << "the header checksum";
    uint32_t src, dst;
    std::memcpy(&src, ip + 12, 4);
    std::memcpy(&dst, ip + 16, 4);
    EXPECT_EQ(src, peer.v4_be());
    EXPECT_EQ(dst, me.v4_be());
    EXPECT_EQ(std::string(reinterpret_cast<char*>(buf.data()) + 40, data.size()), data);
    EXPECT_EQ(buf[40 + data.size()], 0xee) << "nothing written past the message";
}

// Over IPv6 the GRH area is the IPv6 header itself, and wc.sl says RDMA_NETWORK_IPV6 (3).
TEST_F(UdTransportTest, ReceivesWithTheIpv6HeaderAsTheGrh) {
    std::vector<uint8_t> buf(128, 0);
    env.posted.push_back({10, buf.data(), uint32_t(buf.size())});
    uint8_t a6[16] = {0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    uint8_t b6[16] = {0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    std::string data = "v6";
    ud.receive(qp, ud_packet(data, qp.attr.qkey), net::Endpoint::from_gid(a6, 51234),
               net::Endpoint::from_gid(b6, kPort));
    ASSERT_EQ(env.cqes.size(), 1u);
    EXPECT_EQ(env.cqes[0].c.sl, 3);
    EXPECT_EQ(env.cqes[0].c.wc_flags, uint32_t(IBV_WC_GRH));
    EXPECT_EQ(buf[0] >> 4, 6);
    EXPECT_EQ((buf[0] & 0xf) << 4 | buf[1] >> 4, 0x20) << "traffic class as received";
    EXPECT_EQ(buf[6], 17);
    EXPECT_EQ(buf[7], 61) << "hop limit as received";
    EXPECT_EQ(std::memcmp(buf.data() + 8, a6, 16), 0);
    EXPECT_EQ(std::memcmp(buf.data() + 24, b6, 16), 0);
}

// What the receiver drops, and counts at the QP: a QP not ready to receive, a wrong Q_Key,
// no receive posted. A receive too small for GRH and payload completes with LOC_LEN_ERR, one
// whose SGEs failed their checks with LOC_PROT_ERR.
TEST_F(UdTransportTest, DropsAndReceiveErrors) {
    std::string data(60, 'd');
    qp.state = IBV_QPS_INIT;
    ud.receive(qp, ud_packet(data, qp.attr.qkey), peer, me);
    qp.state = IBV_QPS_RTR;
    ud.receive(qp, ud_packet(data, 0x12345678), peer, me);
    ud.receive(qp, ud_packet(data, qp.attr.qkey), peer, me);
    ASSERT_EQ(env.drops.size(), 3u);
    EXPECT_EQ(env.drops[0], net::DropReason::kBadQp);
    EXPECT_EQ(env.drops[1], net::DropReason::kBadQkey);
    EXPECT_EQ(env.drops[2], net::DropReason::kNoRecv);
    std::vector<uint8_t> small(99), fine(200);
    env.posted.push_back({20, small.data(), uint32_t(small.size())});
    env.posted.push_back({21, fine.data(), uint32_t(fine.size()), false});
    ud.receive(qp, ud_packet(data, qp.attr.qkey), peer, me);
    ud.receive(qp, ud_packet(data, qp.attr.qkey), peer, me);
    ASSERT_EQ(env.recv_done.size(), 2u);
    EXPECT_EQ(env.recv_done[0].wr_id, 20u);
    EXPECT_EQ(env.recv_done[0].status, IBV_WC_LOC_LEN_ERR);
    EXPECT_EQ(env.recv_done[1].wr_id, 21u);
    EXPECT_EQ(env.recv_done[1].status, IBV_WC_LOC_PROT_ERR);
    EXPECT_TRUE(env.cqes.empty());
}

}  // namespace
}  // namespace uroce::emu
