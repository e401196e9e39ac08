// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/headers.h"

#include "net/byteorder.h"

namespace uroce::net {

// Extension headers follow the BTH in this fixed order (IBTA 9.2, "packet header layout").
// Opcodes never combine headers in a way that makes the order ambiguous, so encode and decode
// both simply walk this list and skip the absent ones.
//   DETH, XRCETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, [CNP reserved]

const char* drop_reason_name(DropReason r) {
    static constexpr const char* kNames[] = {
        "none",       "too_short", "unknown_opcode", "bad_version", "bad_pad",
        "bad_length", "bad_icrc",  "bad_pkey",       "bad_qp",      "op_not_for_qp",
        "bad_qkey",   "no_recv",   "mcast_no_group", "bad_rkey",
    };
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(DropReason::kCount));
    auto i = static_cast<size_t>(r);
    return i < static_cast<size_t>(DropReason::kCount) ? kNames[i] : "unknown";
}

DropReason decode(const uint8_t* buf, size_t len, Packet& out) {
    out = Packet{};
    if (buf == nullptr || len < kBthLen + kIcrcLen) return DropReason::kTooShort;
    const OpInfo* op = op_info(buf[0]);
    if (op == nullptr) return DropReason::kUnknownOpcode;
    if (len < op->hdr_len + kIcrcLen) return DropReason::kTooShort;

    Bth& b = out.bth;
    b.opcode = buf[0];
    b.se = buf[1] & 0x80;
    b.mig = buf[1] & 0x40;
    b.pad = (buf[1] >> 4) & 3;
    b.tver = buf[1] & 0x0f;
    b.pkey = load_be16(buf + 2);
    b.fecn = buf[4] & 0x80;
    b.becn = buf[4] & 0x40;
    b.dqpn = load_be24(buf + 5);
    b.ackreq = buf[8] & 0x80;
    b.psn = load_be24(buf + 9);
    if (b.tver != 0) return DropReason::kBadVersion;

    const size_t body = len - op->hdr_len - kIcrcLen;  // payload + pad
    if (op->flags & kPayload) {
        if (b.pad > body) return DropReason::kBadPad;
    } else {
        if (b.pad != 0) return DropReason::kBadPad;
        if (body != 0) return DropReason::kBadLength;
    }

    // Every read below is within hdr_len, which the length check above guarantees.
    const uint8_t* p = buf + kBthLen;
    const uint32_t h = op->hdrs;
    if (h & kDETH) {
        out.deth.qkey = load_be32(p);
        out.deth.src_qpn = load_be24(p + 5);
        p += kDethLen;
    }
    if (h & kXRCETH) {
        out.xrc.srqn = load_be24(p + 1);
        p += kXrcethLen;
    }
    if (h & kFETH) {  // before the RETH (IBTA 1.5, rxe_opcode.c)
        uint32_t bits = load_be32(p);
        out.feth.placement = static_cast<uint8_t>(bits & feth::kPlacementMask);
        out.feth.selectivity =
            static_cast<uint8_t>((bits & feth::kSelectivityMask) >> feth::kSelectivityShift);
        p += kFethLen;
    }
    if (h & kRETH) {
        out.reth.va = load_be64(p);
        out.reth.rkey = load_be32(p + 8);
        out.reth.dma_len = load_be32(p + 12);
        p += kRethLen;
    }
    if (h & kAtomicETH) {
        out.atomic.va = load_be64(p);
        out.atomic.rkey = load_be32(p + 8);
        out.atomic.swap_add = load_be64(p + 12);
        out.atomic.compare = load_be64(p + 20);
        p += kAtomicEthLen;
    }
    if (h & kAETH) {
        out.aeth.syndrome = p[0];
        out.aeth.msn = load_be24(p + 1);
        p += kAethLen;
    }
    if (h & kAtomicAckETH) {
        out.atomic_ack.orig = load_be64(p);
        p += kAtomicAckEthLen;
    }
    if (h & kImmDt) {
        out.imm = load_be32(p);
        p += kImmDtLen;
    }
    if (h & kIETH) {
        out.ieth = load_be32(p);
        p += kIethLen;
    }

    out.payload = buf + op->hdr_len;  // skips the CNP reserved bytes too
    out.payload_len = static_cast<uint32_t>(body - b.pad);
    return DropReason::kNone;
}

size_t encode_headers(const Packet& pk, uint8_t* out) {
    const OpInfo* op = op_info(pk.bth.opcode);
    if (op == nullptr) return 0;

    const Bth& b = pk.bth;
    out[0] = b.opcode;
    out[1] = static_cast<uint8_t>((b.se ? 0x80 : 0) | (b.mig ? 0x40 : 0) | (b.pad & 3) << 4 |
                                  (b.tver & 0x0f));
    store_be16(out + 2, b.pkey);
    out[4] = static_cast<uint8_t>((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
    store_be24(out + 5, b.dqpn & kQpnMask);
    out[8] = b.ackreq ? 0x80 : 0;
    store_be24(out + 9, b.psn & kPsnMask);

    uint8_t* p = out + kBthLen;
    const uint32_t h = op->hdrs;
    if (h & kDETH) {
        store_be32(p, pk.deth.qkey);
        p[4] = 0;
        store_be24(p + 5, pk.deth.src_qpn & kQpnMask);
        p += kDethLen;
    }
    if (h & kXRCETH) {
        p[0] = 0;
        store_be24(p + 1, pk.xrc.srqn & kQpnMask);
        p += kXrcethLen;
    }
    if (h & kFETH) {
        store_be32(p, (pk.feth.placement & feth::kPlacementMask) |
                          ((uint32_t(pk.feth.selectivity) << feth::kSelectivityShift) &
                           feth::kSelectivityMask));
        p += kFethLen;
    }
    if (h & kRETH) {
        store_be64(p, pk.reth.va);
        store_be32(p + 8, pk.reth.rkey);
        store_be32(p + 12, pk.reth.dma_len);
        p += kRethLen;
    }
    if (h & kAtomicETH) {
        store_be64(p, pk.atomic.va);
        store_be32(p + 8, pk.atomic.rkey);
        store_be64(p + 12, pk.atomic.swap_add);
        store_be64(p + 20, pk.atomic.compare);
        p += kAtomicEthLen;
    }
    if (h & kAETH) {
        p[0] = pk.aeth.syndrome;
        store_be24(p + 1, pk.aeth.msn & kPsnMask);
        p += kAethLen;
    }
    if (h & kAtomicAckETH) {
        store_be64(p, pk.atomic_ack.orig);
        p += kAtomicAckEthLen;
    }
    if (h & kImmDt) {
        store_be32(p, pk.imm);
        p += kImmDtLen;
    }
    if (h & kIETH) {
        store_be32(p, pk.ieth);
        p += kIethLen;
    }
    if (op->flags & kCnp) {
        for (size_t i = 0; i < kCnpReservedLen; ++i) p[i] = 0;
        p += kCnpReservedLen;
    }
    return static_cast<size_t>(p - out);
}

}  // namespace uroce::net
