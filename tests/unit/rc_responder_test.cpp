// The RC responder stage (emu/transport/rc_responder.h) driven through its own interface with
// crafted request packets, without a device, a socket or a thread: FakeEnv is its
// environment. Packets it sends are captured and decoded with net's decoder; its DMA is
// memcpy into buffers the test owns; receives, completions, async events and the error
// state are recorded.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "emu/transport/rc_responder_impl.h"
#include "net/headers.h"
#include "net/opcodes.h"
#include "net/psn.h"

namespace uroce::emu {
namespace {

// A receive the test posted: where its bytes go.
struct PostedRecv {
    uint64_t wr_id;
    uint8_t* buf;
    uint32_t len;
};

struct RecvCompletion {
    uint64_t wr_id;
    ibv_wc_status status;
    uint32_t byte_len;
    uint8_t opcode;  // of the packet that ended the receive (0 for none)
};

struct FakeTrace {
    std::vector<std::string> lines;
    void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
        char line[256];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        lines.emplace_back(line);
    }
};

class FakeEnv {
public:
    static constexpr uint32_t kSlots = 64;
    static constexpr size_t kSlotBytes = net::kMaxHdrLen + 4096 + 4;

    // What the responder did.
    std::vector<std::vector<uint8_t>> sent;  // each packet's bytes, BTH through ICRC
    std::deque<PostedRecv> posted;
    std::vector<RecvCompletion> completions;
    std::vector<ibv_event_type> events;
    uint32_t to_error = 0, comm_est = 0, drops = 0, slots_in_use = 0;
    uint32_t dma_reads = 0, dma_writes = 0;
    std::vector<Mr> mrs;  // keys resolve through this table
    FakeTrace trace_log;

    // The environment RcResponder<Env> uses.
    uint8_t* tx_begin(uint32_t* slot) {
        for (uint32_t i = 0; i < kSlots; ++i)
            if (!busy_[i]) {
                busy_[i] = true;
                ++slots_in_use;
                *slot = i;
                return slot_buf_[i];
            }
        return nullptr;
    }
    void transmit(uint32_t slot, size_t len_no_icrc, const sockaddr_in&, Qp*) {
        std::vector<uint8_t> pkt(slot_buf_[slot], slot_buf_[slot] + len_no_icrc);
        pkt.resize(len_no_icrc + net::kIcrcLen);  // the ICRC: decode() leaves it unchecked
        sent.push_back(std::move(pkt));
        tx_free(slot);
    }
    void tx_free(uint32_t slot) {
        busy_[slot] = false;
        --slots_in_use;
    }
    void count_drop(net::DropReason, Qp&) { ++drops; }
    void comm_established(Qp& qp) {
        qp.comm_est = true;
        ++comm_est;
    }
    bool take_recv(Qp& qp) {
        if (posted.empty()) return false;
        PostedRecv r = posted.front();
        posted.pop_front();
        qp.rwr.wr_id = r.wr_id;
        qp.rwr.num_sge = 1;
        qp.rwr.sge[0] = {reinterpret_cast<uint64_t>(r.buf), r.len, 0};
        qp.rwr.length = r.len;
        qp.rwr_off = 0;
        qp.rwr_ok = true;
        qp.have_rwr = true;
        qp.rx_owner = qp.owner;
        return true;
    }
    void place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path) {
        std::memcpy(reinterpret_cast<uint8_t*>(qp.rwr.sge[0].addr) + qp.rwr_off, p.payload,
                    p.payload_len);
        qp.rwr_off += p.payload_len;
    }
    void complete_recv(Qp& qp, const net::Packet& p, ibv_wc_status status) {
        completions.push_back({qp.rwr.wr_id, status, qp.rwr_off, p.bth.opcode});
        qp.have_rwr = false;
    }
    bool dma_read(Session*, void* dst, const iovec* remote, int n, size_t) {
        ++dma_reads;
        for (int i = 0; i < n; ++i) {
            std::memcpy(dst, remote[i].iov_base, remote[i].iov_len);
            dst = static_cast<uint8_t*>(dst) + remote[i].iov_len;
        }
        return true;
    }
    bool dma_readv(Session*, const iovec* local, int nlocal, const iovec* remote, int nremote,
                   size_t) {
        ++dma_reads;
        EXPECT_EQ(nremote, 1);  // a READ's source is contiguous
        const uint8_t* src = static_cast<const uint8_t*>(remote[0].iov_base);
        for (int i = 0; i < nlocal; ++i) {
            std::memcpy(local[i].iov_base, src, local[i].iov_len);
            src += local[i].iov_len;
        }
        return true;
    }
    bool dma_write(Session*, const void* src, const iovec* remote, int n, size_t) {
        ++dma_writes;
        for (int i = 0; i < n; ++i) {
            std::memcpy(remote[i].iov_base, src, remote[i].iov_len);
            src = static_cast<const uint8_t*>(src) + remote[i].iov_len;
        }
        return true;
    }
    bool dma_store64(Session*, uint64_t addr, uint64_t value) {
        ++dma_writes;
        std::memcpy(reinterpret_cast<void*>(addr), &value, 8);
        return true;
    }
    // Lands at once: the device's batch lands before the ACK that Dma::settle() allows.
    void dma_write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                         uint32_t, uint32_t, DmaWriteBatch::Path) {
        dma_write(s, src, remote, n, total);
    }
    bool dma_settle(Qp&) { return true; }
    Mr* mr_for_key(uint32_t key) const {
        for (const Mr& mr : mrs)
            if (mr.rkey == key || mr.lkey == key) return const_cast<Mr*>(&mr);
        return nullptr;
    }
    // No memory windows in these tests: a window key resolves to nothing.
    uint64_t mw_target(const Qp&, uint32_t, uint64_t, uint64_t, uint32_t, Session**) const {
        return 0;
    }
    Mw* remote_invalidatable(const Qp&, uint32_t) const { return nullptr; }
    void unbind(Mw&) {}
    void post_qp_async(Qp&, ibv_event_type type) { events.push_back(type); }
    void qp_to_error(Qp& qp) {
        ++to_error;
        qp.state = IBV_QPS_ERR;
    }

    // The parts RcResponder<Env> reaches them through, named as in the device's TransportEnv
    // (emu/transport/transport_env.h).
    struct WirePart {
        FakeEnv& e;
        uint8_t* tx_begin(uint32_t* slot) { return e.tx_begin(slot); }
        void transmit(uint32_t slot, size_t len, const sockaddr_in& to, Qp* qp) {
            e.transmit(slot, len, to, qp);
        }
        void tx_free(uint32_t slot) { e.tx_free(slot); }
    };
    struct CountersPart {
        FakeEnv& e;
        void drop(net::DropReason r, Qp& qp) { e.count_drop(r, qp); }
    };
    struct RecvPart {
        FakeEnv& e;
        void comm_established(Qp& qp) { e.comm_established(qp); }
        bool take(Qp& qp) { return e.take_recv(qp); }
        void place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path path) {
            e.place_payload(qp, p, path);
        }
        void complete(Qp& qp, const net::Packet& p, ibv_wc_status st) {
            e.complete_recv(qp, p, st);
        }
    };
    struct DmaPart {
        FakeEnv& e;
        bool read(Session* s, void* dst, const iovec* remote, int n, size_t total) {
            return e.dma_read(s, dst, remote, n, total);
        }
        bool readv(Session* s, const iovec* local, int nlocal, const iovec* remote, int nremote,
                   size_t total) {
            return e.dma_readv(s, local, nlocal, remote, nremote, total);
        }
        bool write(Session* s, const void* src, const iovec* remote, int n, size_t total) {
            return e.dma_write(s, src, remote, n, total);
        }
        bool store64(Session* s, uint64_t addr, uint64_t value) {
            return e.dma_store64(s, addr, value);
        }
        void write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                         uint32_t qpn, uint32_t psn, DmaWriteBatch::Path path) {
            e.dma_write_later(s, src, remote, n, total, qpn, psn, path);
        }
        bool settle(Qp& qp) { return e.dma_settle(qp); }
    };
    struct VerbsPart {
        FakeEnv& e;
        Mr* mr_for_key(uint32_t key) const { return e.mr_for_key(key); }
    };
    struct WindowsPart {
        FakeEnv& e;
        uint64_t mw_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                           Session** owner) const {
            return e.mw_target(qp, rkey, va, len, access, owner);
        }
        Mw* remote_invalidatable(const Qp& qp, uint32_t rkey) const {
            return e.remote_invalidatable(qp, rkey);
        }
        void unbind(Mw& mw) { e.unbind(mw); }
    };
    struct XrcPart {
        FakeEnv& e;
        void post_qp_async(Qp& qp, ibv_event_type type) { e.post_qp_async(qp, type); }
    };
    struct DonePart {
        FakeEnv& e;
        void qp_to_error(Qp& qp) { e.qp_to_error(qp); }
    };
    WirePart wire{*this};
    CountersPart counters{*this};
    RecvPart recv{*this};
    DmaPart dma{*this};
    VerbsPart verbs{*this};
    WindowsPart windows{*this};
    XrcPart xrc{*this};
    DonePart done{*this};
    FakeTrace& trace = trace_log;

private:
    bool busy_[kSlots] = {};
    uint8_t slot_buf_[kSlots][kSlotBytes];
};

constexpr uint32_t kQpn = 0x11, kPeerQpn = 0x22, kPd = 3, kMtu = 1024;
constexpr uint32_t kRkey = 0x1234, kBadRkey = 0x4321;
constexpr uint64_t kIova = 0x100000;  // the address the requester names

class RcResponderTest : public ::testing::Test {
protected:
    void SetUp() override {
        mem_.assign(4 * kMtu, 0);
        for (size_t i = 0; i < mem_.size(); ++i) mem_[i] = uint8_t(i * 7 + 1);
        Mr mr;
        mr.owner = &session_;
        mr.pd = kPd;
        mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC;
        mr.addr = reinterpret_cast<uint64_t>(mem_.data());
        mr.iova = kIova;
        mr.length = mem_.size();
        mr.lkey = mr.rkey = kRkey;
        env_.mrs.push_back(mr);

        qp_.owner = &session_;
        qp_.qpn = kQpn;
        qp_.type = IBV_QPT_RC;
        qp_.transport = net::kTransportRc;
        qp_.state = IBV_QPS_RTS;
        qp_.comm_est = true;
        qp_.pd = kPd;
        qp_.mtu = kMtu;
        qp_.attr.dest_qp_num = kPeerQpn;
        qp_.attr.qp_access_flags =
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        qp_.attr.max_dest_rd_atomic = 4;
        qp_.attr.min_rnr_timer = 12;
        qp_.atomic_replay.resize(4);
        qp_.epsn = 100;
    }

    void TearDown() override { EXPECT_EQ(env_.slots_in_use, 0u); }  // every slot sent or freed

    // A request as it comes off the wire: headers encoded, payload behind them, decoded.
    net::Packet request(uint8_t opcode, uint32_t psn, bool ackreq,
                        const std::vector<uint8_t>& payload = {}, net::Packet h = {}) {
        h.bth.opcode = opcode;
        h.bth.pkey = net::kDefaultPkey;
        h.bth.dqpn = kQpn;
        h.bth.psn = psn;
        h.bth.ackreq = ackreq;
        h.bth.pad = net::pad_for(uint32_t(payload.size()));
        auto& wire = wire_.emplace_back(net::kMaxHdrLen + payload.size() + 3 + net::kIcrcLen, 0);
        size_t hdr = net::encode_headers(h, wire.data());
        if (!payload.empty()) std::memcpy(wire.data() + hdr, payload.data(), payload.size());
        wire.resize(hdr + payload.size() + h.bth.pad + net::kIcrcLen);
        net::Packet p{};
        EXPECT_EQ(net::decode(wire.data(), wire.size(), p), net::DropReason::kNone);
        return p;
    }
    net::Packet write_request(uint8_t opcode, uint32_t psn, uint32_t rkey, uint64_t va,
                              const std::vector<uint8_t>& payload) {
        net::Packet h{};
        h.reth = {va, rkey, uint32_t(payload.size())};
        return request(opcode, psn, true, payload, h);
    }
    net::Packet sent(size_t i) {
        net::Packet p{};
        EXPECT_EQ(net::decode(env_.sent.at(i).data(), env_.sent.at(i).size(), p),
                  net::DropReason::kNone);
        return p;
    }
    void post_recv(uint64_t wr_id) {
        recv_bufs_.emplace_back(256, 0);
        env_.posted.push_back({wr_id, recv_bufs_.back().data(), 256});
    }

    Session session_;
    Qp qp_;
    FakeEnv env_;
    RcResponder<FakeEnv> responder_{env_};
    std::vector<uint8_t> mem_;
    std::deque<std::vector<uint8_t>> wire_, recv_bufs_;  // stable addresses
};

// AETH syndromes (IBTA 9.7.5.2) the responder must send.
constexpr uint8_t kAck = net::aeth::ack(net::aeth::kCreditInvalid);
constexpr uint8_t kNakSeq = net::aeth::nak(net::aeth::kNakPsnSeqError);
constexpr uint8_t kNakRemAccess = net::aeth::nak(net::aeth::kNakRemoteAccessError);

TEST_F(RcResponderTest, InOrderSendIsDeliveredAndAcknowledged) {
    post_recv(0xabc);
    std::vector<uint8_t> msg = {'h', 'e', 'l', 'l', 'o'};
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, msg));

    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 0xabcu);
    EXPECT_EQ(env_.completions[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(env_.completions[0].byte_len, 5u);
    EXPECT_EQ(std::memcmp(recv_bufs_[0].data(), "hello", 5), 0);
    ASSERT_EQ(env_.sent.size(), 1u);
    net::Packet ack = sent(0);
    EXPECT_EQ(ack.bth.opcode, net::kRcAck);
    EXPECT_EQ(ack.bth.dqpn, kPeerQpn);
    EXPECT_EQ(ack.bth.psn, 100u);
    EXPECT_EQ(ack.aeth.syndrome, kAck);
    EXPECT_EQ(ack.aeth.msn, 1u);  // the first message completed
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);
    EXPECT_EQ(env_.to_error, 0u);
}

TEST_F(RcResponderTest, MultiPacketSendAcknowledgedOnlyWhereAsked) {
    post_recv(7);
    responder_.receive(qp_, request(net::kRcSendFirst, 100, false, std::vector<uint8_t>(8, 1)));
    responder_.receive(qp_, request(net::kRcSendLast, 101, true, std::vector<uint8_t>(4, 2)));

    EXPECT_EQ(env_.sent.size(), 1u);  // coalesced: the LAST asked, the FIRST did not
    EXPECT_EQ(sent(0).bth.psn, 101u);
    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].byte_len, 12u);
    EXPECT_EQ(recv_bufs_[0][7], 1);
    EXPECT_EQ(recv_bufs_[0][8], 2);
}

TEST_F(RcResponderTest, PsnAheadIsNakedOncePerGap) {
    post_recv(1);
    responder_.receive(qp_, request(net::kRcSendOnly, 102, true, {1, 2, 3, 4}));
    responder_.receive(qp_, request(net::kRcSendOnly, 103, true, {1, 2, 3, 4}));
    responder_.receive(qp_, request(net::kRcSendOnly, 104, true, {1, 2, 3, 4}));

    ASSERT_EQ(env_.sent.size(), 1u);  // one sequence NAK, not one per packet past the gap
    net::Packet nak = sent(0);
    EXPECT_EQ(nak.bth.opcode, net::kRcAck);
    EXPECT_EQ(nak.aeth.syndrome, kNakSeq);
    EXPECT_EQ(nak.bth.psn, 100u);  // the PSN the responder expects
    EXPECT_EQ(nak.aeth.msn, 0u);
    EXPECT_TRUE(env_.completions.empty());
    EXPECT_EQ(env_.posted.size(), 1u);  // no receive consumed
    EXPECT_EQ(qp_.epsn, 100u);

    // The retransmission from the expected PSN is taken, and a new gap is NAKed again.
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {9, 9, 9, 9}));
    EXPECT_EQ(env_.completions.size(), 1u);
    ASSERT_EQ(env_.sent.size(), 2u);
    EXPECT_EQ(sent(1).aeth.syndrome, kAck);
    responder_.receive(qp_, request(net::kRcSendOnly, 105, true, {1, 2, 3, 4}));
    ASSERT_EQ(env_.sent.size(), 3u);
    EXPECT_EQ(sent(2).aeth.syndrome, kNakSeq);
    EXPECT_EQ(sent(2).bth.psn, 101u);
}

TEST_F(RcResponderTest, DuplicateSendIsAcknowledgedNotDeliveredTwice) {
    post_recv(1);
    post_recv(2);
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {5, 6, 7, 8}));
    responder_.receive(qp_, request(net::kRcSendOnly, 100, true, {5, 6, 7, 8}));

    ASSERT_EQ(env_.completions.size(), 1u);
    EXPECT_EQ(env_.completions[0].wr_id, 1u);
    EXPECT_EQ(env_.posted.size(), 1u);  // the second receive is still posted
    ASSERT_EQ(env_.sent.size(), 2u);
    net::Packet reack = sent(1);
    EXPECT_EQ(reack.aeth.syndrome, kAck);
    EXPECT_EQ(reack.bth.psn, 100u);  // the last PSN it took
    EXPECT_EQ(reack.aeth.msn, 1u);
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);
}

TEST_F(RcResponderTest, WriteWithGoodRkeyLandsTheBytes) {
    std::vector<uint8_t> data(64);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(0xa0 + i);
    std::vector<uint8_t> before = mem_;
    responder_.receive(qp_, write_request(net::kRcWriteOnly, 100, kRkey, kIova + 16, data));

    EXPECT_EQ(std::memcmp(mem_.data() + 16, data.data(), data.size()), 0);
    EXPECT_EQ(std::memcmp(mem_.data(), before.data(), 16), 0);  // nothing before it
    EXPECT_EQ(mem_[16 + 64], before[16 + 64]);                  // nor after it
    EXPECT_TRUE(env_.completions.empty());  // a WRITE without immediate consumes no receive
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kAck);
    EXPECT_EQ(sent(0).bth.psn, 100u);
    EXPECT_EQ(sent(0).aeth.msn, 1u);
    EXPECT_EQ(qp_.epsn, 101u);
}

TEST_F(RcResponderTest, WriteWithBadRkeyIsNakedAndTheQpFails) {
    std::vector<uint8_t> before = mem_;
    responder_.receive(qp_, write_request(net::kRcWriteOnly, 100, kBadRkey, kIova, {1, 2, 3, 4}));

    EXPECT_EQ(mem_, before);
    ASSERT_EQ(env_.sent.size(), 1u);
    net::Packet nak = sent(0);
    EXPECT_EQ(nak.aeth.syndrome, kNakRemAccess);
    EXPECT_EQ(nak.bth.psn, 100u);
    EXPECT_EQ(env_.to_error, 1u);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
    ASSERT_EQ(env_.events.size(), 1u);
    EXPECT_EQ(env_.events[0], IBV_EVENT_QP_ACCESS_ERR);
    ASSERT_EQ(env_.trace_log.lines.size(), 1u);
    EXPECT_NE(env_.trace_log.lines[0].find("refused (REM_ACCESS_ERR)"), std::string::npos)
        << env_.trace_log.lines[0];
}

TEST_F(RcResponderTest, WritePastTheEndOfTheMrIsNaked) {
    std::vector<uint8_t> before = mem_;
    responder_.receive(
        qp_, write_request(net::kRcWriteOnly, 100, kRkey, kIova + mem_.size() - 2, {1, 2, 3, 4}));
    EXPECT_EQ(mem_, before);
    ASSERT_EQ(env_.sent.size(), 1u);
    EXPECT_EQ(sent(0).aeth.syndrome, kNakRemAccess);
    EXPECT_EQ(qp_.state, IBV_QPS_ERR);
}

TEST_F(RcResponderTest, ReadOfThreeMtusIsThreeResponses) {
    qp_.epsn = 200;
    net::Packet h{};
    h.reth = {kIova + 4, kRkey, 3 * kMtu};
    responder_.receive(qp_, request(net::kRcReadReq, 200, false, {}, h));

    ASSERT_EQ(env_.sent.size(), 3u);
    const uint8_t ops[3] = {net::kRcReadRespFirst, net::kRcReadRespMiddle, net::kRcReadRespLast};
    for (uint32_t i = 0; i < 3; ++i) {
        net::Packet r = sent(i);
        EXPECT_EQ(r.bth.opcode, ops[i]) << i;
        EXPECT_EQ(r.bth.psn, 200u + i) << i;
        EXPECT_EQ(r.bth.dqpn, kPeerQpn);
        ASSERT_EQ(r.payload_len, kMtu) << i;
        EXPECT_EQ(std::memcmp(r.payload, mem_.data() + 4 + i * kMtu, kMtu), 0) << i;
    }
    EXPECT_EQ(sent(0).aeth.msn, 1u);  // FIRST and LAST carry an AETH
    EXPECT_EQ(sent(2).aeth.syndrome, kAck);
    EXPECT_EQ(qp_.epsn, 203u);  // a READ takes one PSN per response
    EXPECT_EQ(qp_.msn, 1u);
}

TEST_F(RcResponderTest, DuplicateAtomicIsAnsweredFromTheReplayEntry) {
    uint64_t value = 10;
    std::memcpy(mem_.data() + 64, &value, 8);
    net::Packet h{};
    h.atomic = {kIova + 64, kRkey, 5, 0};
    responder_.receive(qp_, request(net::kRcFetchAdd, 100, true, {}, h));
    responder_.receive(qp_, request(net::kRcFetchAdd, 100, true, {}, h));  // its retry

    std::memcpy(&value, mem_.data() + 64, 8);
    EXPECT_EQ(value, 15u);  // added once
    EXPECT_EQ(env_.dma_writes, 1u);
    ASSERT_EQ(env_.sent.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        net::Packet r = sent(i);
        EXPECT_EQ(r.bth.opcode, net::kRcAtomicAck) << i;
        EXPECT_EQ(r.bth.psn, 100u) << i;
        EXPECT_EQ(r.atomic_ack.orig, 10u) << i;  // the original value, both times
        EXPECT_EQ(r.aeth.syndrome, kAck) << i;
    }
    EXPECT_EQ(qp_.epsn, 101u);
    EXPECT_EQ(qp_.msn, 1u);

    // A compare-and-swap after it executes on the new value.
    h.atomic = {kIova + 64, kRkey, 99, 15};
    responder_.receive(qp_, request(net::kRcCmpSwap, 101, true, {}, h));
    std::memcpy(&value, mem_.data() + 64, 8);
    EXPECT_EQ(value, 99u);
    ASSERT_EQ(env_.sent.size(), 3u);
    EXPECT_EQ(sent(2).atomic_ack.orig, 15u);
}

}  // namespace
}  // namespace uroce::emu
