// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the net/ tests (net_*_test.cpp) share: every opcode, a packet with every field set,
// its bytes on the wire, and a field-by-field comparison of two decoded packets.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "net/headers.h"
#include "net/opcodes.h"

namespace uroce::net {

inline std::vector<uint8_t> all_opcodes() {
    std::vector<uint8_t> v;
    for (int op = 0; op < 256; ++op)
        if (op_info(static_cast<uint8_t>(op))) v.push_back(static_cast<uint8_t>(op));
    return v;
}

// A packet with every field set to a distinct, full-width value.
inline Packet full_packet(uint8_t opcode, uint32_t seed) {
    Packet p{};
    p.bth = Bth{opcode,
                true,
                true,
                0,
                0,
                uint16_t(0x8000 | seed),
                true,
                true,
                (0xabcd00 + seed) & kQpnMask,
                true,
                (0xfffff0 + seed) & kPsnMask};
    p.reth = Reth{0x0123456789abcdefull + seed, 0xdeadbeef ^ seed, 0x80000000u + seed};
    p.aeth = Aeth{uint8_t(0x60 | (seed & 0x1f)), (0x654321 + seed) & kPsnMask};
    p.deth = Deth{0x80010000u + seed, (0x123456 + seed) & kQpnMask};
    p.xrc = Xrceth{(0xfedcba + seed) & kQpnMask};
    p.atomic = AtomicEth{0x1111222233334444ull + seed, 0x55667788u + seed,
                         0x99aabbccddeeff00ull + seed, 0x0fedcba987654321ull + seed};
    p.atomic_ack = AtomicAckEth{0xa5a5a5a55a5a5a5aull + seed};
    p.imm = 0xc0ffee00u + seed;
    p.ieth = 0x12345678u + seed;
    p.feth = Feth{uint8_t((1 + seed) & feth::kPlacementMask), uint8_t(seed & 3)};
    return p;
}

// Headers + payload + pad + room for the ICRC, as a UDP payload.
inline std::vector<uint8_t> build(const Packet& p, uint32_t payload_len, uint8_t fill = 0x5a) {
    const OpInfo* op = op_info(p.bth.opcode);
    std::vector<uint8_t> b(op->hdr_len + payload_len + p.bth.pad + kIcrcLen, 0);
    EXPECT_EQ(encode_headers(p, b.data()), op->hdr_len);
    for (uint32_t i = 0; i < payload_len; ++i) b[op->hdr_len + i] = uint8_t(fill + i);
    return b;
}

inline void expect_same_fields(const Packet& want, const Packet& got) {
    const OpInfo* op = op_info(want.bth.opcode);
    ASSERT_NE(op, nullptr);
    SCOPED_TRACE(op->name);
    EXPECT_EQ(got.bth.opcode, want.bth.opcode);
    EXPECT_EQ(got.bth.se, want.bth.se);
    EXPECT_EQ(got.bth.mig, want.bth.mig);
    EXPECT_EQ(got.bth.pad, want.bth.pad);
    EXPECT_EQ(got.bth.tver, want.bth.tver);
    EXPECT_EQ(got.bth.pkey, want.bth.pkey);
    EXPECT_EQ(got.bth.fecn, want.bth.fecn);
    EXPECT_EQ(got.bth.becn, want.bth.becn);
    EXPECT_EQ(got.bth.dqpn, want.bth.dqpn);
    EXPECT_EQ(got.bth.ackreq, want.bth.ackreq);
    EXPECT_EQ(got.bth.psn, want.bth.psn);
    const uint32_t h = op->hdrs;
    // Present headers round-trip; absent ones decode as zero.
    auto pick = [](bool present, auto v) { return present ? v : decltype(v){}; };
    EXPECT_EQ(got.reth.va, pick(h & kRETH, want.reth.va));
    EXPECT_EQ(got.reth.rkey, pick(h & kRETH, want.reth.rkey));
    EXPECT_EQ(got.reth.dma_len, pick(h & kRETH, want.reth.dma_len));
    EXPECT_EQ(got.aeth.syndrome, pick(h & kAETH, want.aeth.syndrome));
    EXPECT_EQ(got.aeth.msn, pick(h & kAETH, want.aeth.msn));
    EXPECT_EQ(got.deth.qkey, pick(h & kDETH, want.deth.qkey));
    EXPECT_EQ(got.deth.src_qpn, pick(h & kDETH, want.deth.src_qpn));
    EXPECT_EQ(got.xrc.srqn, pick(h & kXRCETH, want.xrc.srqn));
    EXPECT_EQ(got.atomic.va, pick(h & kAtomicETH, want.atomic.va));
    EXPECT_EQ(got.atomic.rkey, pick(h & kAtomicETH, want.atomic.rkey));
    EXPECT_EQ(got.atomic.swap_add, pick(h & kAtomicETH, want.atomic.swap_add));
    EXPECT_EQ(got.atomic.compare, pick(h & kAtomicETH, want.atomic.compare));
    EXPECT_EQ(got.atomic_ack.orig, pick(h & kAtomicAckETH, want.atomic_ack.orig));
    EXPECT_EQ(got.feth.placement, pick(h & kFETH, want.feth.placement));
    EXPECT_EQ(got.feth.selectivity, pick(h & kFETH, want.feth.selectivity));
    EXPECT_EQ(got.imm, pick(h & kImmDt, want.imm));
    EXPECT_EQ(got.ieth, pick(h & kIETH, want.ieth));
}

inline uint32_t ip(const char* s) { return inet_addr(s); }

}  // namespace uroce::net
