// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A fake environment for the receive-side transport stages (RcResponder, UcResponder): the
// parts of emu/engine/transport_env.h they use, recording what the stage did. Packets
// it sends are kept as bytes; its DMA is memcpy into buffers the test owns; receives are
// posted by the test; completions, async events, drops and the error state are recorded.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "emu/engine/dma_write_batch.h"
#include "emu/verbs/objects.h"
#include "net/headers.h"

namespace uroce::emu::fake {

// What a fake environment's take_recv does with a receive the test posted: `qp`'s current
// receive WQE becomes one SGE over `buf` (`ok`: its SGE passed the checks).
inline void take_one_sge_recv(Qp& qp, uint64_t wr_id, uint8_t* buf, uint32_t len, bool ok) {
    qp.rwr.wr_id = wr_id;
    qp.rwr.num_sge = 1;
    qp.rwr.sge[0] = {reinterpret_cast<uint64_t>(buf), len, 0};
    qp.rwr.length = len;
    qp.rwr_off = 0;
    qp.rwr_ok = ok;
    qp.have_rwr = true;
    qp.rx_owner = qp.owner;
}

// A fake environment's place_payload: `p`'s payload appended to that one SGE (memcpy as DMA).
inline void place_in_one_sge_recv(Qp& qp, const net::Packet& p) {
    std::memcpy(reinterpret_cast<uint8_t*>(qp.rwr.sge[0].addr) + qp.rwr_off, p.payload,
                p.payload_len);
    qp.rwr_off += p.payload_len;
}

// `qp` as a QP of `type` in RTS owned by `owner`, its BTH transport bits those of the type.
inline void rts_qp(Qp& qp, Session& owner, uint32_t qpn, ibv_qp_type type) {
    qp.owner = &owner;
    qp.qpn = qpn;
    qp.type = type;
    qp.transport = type == IBV_QPT_UD   ? net::kTransportUd
                   : type == IBV_QPT_UC ? net::kTransportUc
                                        : net::kTransportRc;
    qp.state = IBV_QPS_RTS;
}

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
    uint32_t settles = 0;  // Dma::settle() calls: pending writes made to land
    uint32_t dma_reads = 0, dma_writes = 0;
    std::vector<uint32_t> marked_ready;  // QPNs put on the engine's ready list
    // Takes all but `left` transmit slots (the device's buffers in flight), or gives them back.
    void fill_slots(bool full, uint32_t left = 0) {
        for (uint32_t i = 0; i < kSlots; ++i) busy_[i] = full && i >= left;
        slots_in_use = full ? kSlots - left : 0;
    }
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
    void transmit(uint32_t slot, size_t len_no_icrc, const net::Endpoint&, Qp*) {
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
        take_one_sge_recv(qp, r.wr_id, r.buf, r.len, true);
        return true;
    }
    void place_payload(Qp& qp, const net::Packet& p, DmaWriteBatch::Path) {
        place_in_one_sge_recv(qp, p);
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
    bool dma_settle(Qp&) {
        ++settles;
        return true;
    }
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
    // (emu/engine/transport_env.h).
    struct WirePart {
        FakeEnv& e;
        uint8_t* tx_begin(uint32_t* slot) { return e.tx_begin(slot); }
        void transmit(uint32_t slot, size_t len, const net::Endpoint& to, Qp* qp) {
            e.transmit(slot, len, to, qp);
        }
        void tx_free(uint32_t slot) { e.tx_free(slot); }
    };
    struct CountersPart {
        FakeEnv& e;
        void drop(net::DropReason r, Qp& qp) { e.count_drop(r, qp); }
    };
    struct SchedPart {
        FakeEnv& e;
        void mark_ready(Qp& qp) { e.marked_ready.push_back(qp.qpn); }
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
    // The UC responder resolves an R_Key through the RC responder's remote_target: here the
    // MR table above, without windows.
    struct ResponderPart {
        FakeEnv& e;
        uint64_t remote_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len,
                               uint32_t access, Session** owner) const {
            Mr* mr = e.mr_for_key(rkey);
            if (!mr || mr->rkey != rkey || mr->pd != qp.pd || !(mr->access & access)) return 0;
            if (va < mr->iova || va + len > mr->iova + mr->length) return 0;
            *owner = mr->owner;
            return mr->addr + (va - mr->iova);
        }
    };
    WirePart wire{*this};
    CountersPart counters{*this};
    SchedPart sched{*this};
    RecvPart recv{*this};
    DmaPart dma{*this};
    VerbsPart verbs{*this};
    WindowsPart windows{*this};
    XrcPart xrc{*this};
    DonePart done{*this};
    ResponderPart responder{*this};
    FakeTrace& trace = trace_log;

private:
    bool busy_[kSlots] = {};
    uint8_t slot_buf_[kSlots][kSlotBytes];
};

// An MR over `mem`, named `iova` by the peer, with `key` as both its lkey and rkey.
inline Mr mr_over(Session& owner, uint32_t pd, uint32_t access, std::vector<uint8_t>& mem,
                  uint64_t iova, uint32_t key) {
    Mr mr;
    mr.owner = &owner;
    mr.pd = pd;
    mr.access = access;
    mr.addr = reinterpret_cast<uint64_t>(mem.data());
    mr.iova = iova;
    mr.length = mem.size();
    mr.lkey = mr.rkey = key;
    return mr;
}

// `qp` as a connected QP in RTS whose communication is established.
inline void connected_qp(Qp& qp, Session& owner, uint32_t qpn, ibv_qp_type type, uint32_t pd,
                         uint32_t mtu, uint32_t remote_access) {
    rts_qp(qp, owner, qpn, type);
    qp.comm_est = true;
    qp.pd = pd;
    qp.mtu = mtu;
    qp.attr.qp_access_flags = remote_access;
}

}  // namespace uroce::emu::fake
