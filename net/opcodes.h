// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RoCEv2 / InfiniBand BTH opcodes (IBTA vol. 1, ch. 9.2 and table 38, plus the RoCEv2 annex
// A17 CNP and release 1.5's RDMA ATOMIC WRITE and FLUSH) and a per-opcode description table:
// which extension headers follow the BTH, where the packet sits in a message, and what kind of
// operation it carries. The transport engines and the codec look everything up here instead of
// switching on opcodes, so adding or auditing an opcode is a one-row change.
#pragma once

#include <cstdint>

namespace uroce::net {

// Extension-header presence bits (OpInfo::hdrs).
enum HdrBit : uint32_t {
    kRETH = 1u << 0,          // 16 B: VA, R_Key, DMA length
    kAETH = 1u << 1,          // 4 B: syndrome, MSN
    kDETH = 1u << 2,          // 8 B: Q_Key, source QPN
    kXRCETH = 1u << 3,        // 4 B: XRC SRQ number
    kAtomicETH = 1u << 4,     // 28 B: VA, R_Key, swap/add, compare
    kAtomicAckETH = 1u << 5,  // 8 B: original remote data
    kImmDt = 1u << 6,         // 4 B: immediate data
    kIETH = 1u << 7,          // 4 B: R_Key to invalidate
    kFETH = 1u << 8,          // 4 B: FLUSH placement type and selectivity level (IBTA 1.5)
};

// Sizes of the extension headers on the wire.
constexpr uint8_t kRethLen = 16;
constexpr uint8_t kAethLen = 4;
constexpr uint8_t kDethLen = 8;
constexpr uint8_t kXrcethLen = 4;
constexpr uint8_t kAtomicEthLen = 28;
constexpr uint8_t kAtomicAckEthLen = 8;
constexpr uint8_t kImmDtLen = 4;
constexpr uint8_t kIethLen = 4;
constexpr uint8_t kFethLen = 4;
// A CNP is BTH + 16 reserved bytes (annex A17.9.3). The codec treats those bytes as a fixed
// part of the CNP's header so that "no payload" stays true for it; they are sent as zeros.
constexpr uint8_t kCnpReservedLen = 16;

// Per-opcode properties (OpInfo::flags).
enum OpFlags : uint32_t {
    kFirst = 1u << 0,
    kMiddle = 1u << 1,
    kLast = 1u << 2,
    kOnly = 1u << 3,  // always set together with kFirst | kLast
    kPayload = 1u << 4,
    kRequest = 1u << 5,
    kResponse = 1u << 6,  // ACK, RDMA read response, atomic ACK
    kSendOp = 1u << 7,
    kWriteOp = 1u << 8,
    kReadReq = 1u << 9,
    kReadResp = 1u << 10,
    kAtomicOp = 1u << 11,
    kAckOp = 1u << 12,
    kImmOp = 1u << 13,
    kInvOp = 1u << 14,
    kAtomicAck = 1u << 15,
    kCnp = 1u << 16,
    // RDMA ATOMIC WRITE (IBTA 1.5): a RETH and 8 bytes of payload, written as one; answered
    // with a zero-length RDMA READ response, and like READ and ATOMIC it holds a responder
    // resource (replayed, not executed again, when it comes twice).
    kAtomicWriteOp = 1u << 17,
    // RDMA FLUSH (IBTA 1.5): a FETH and a RETH, no payload; answered as an ATOMIC WRITE is
    // (a zero-length RDMA READ response) and, like it, holding a responder resource.
    kFlushOp = 1u << 18,
};

enum class QpClass : uint8_t { RC, UC, RD, UD, CNP, XRC };

struct OpInfo {
    const char* name;  // IBTA-style, e.g. "RC_SEND_ONLY_WITH_IMMEDIATE"
    QpClass cls;
    uint32_t hdrs;    // HdrBit mask
    uint32_t flags;   // OpFlags mask
    uint8_t hdr_len;  // BTH + all extension headers, bytes
};

// nullptr for opcodes uroce does not define (reserved, RD, manufacturer-specific).
const OpInfo* op_info(uint8_t opcode);

// The opcode's top 3 bits select the transport; the low 5 bits the operation (same values for
// RC, UC, RD and XRC).
constexpr uint8_t kOpTransportMask = 0xe0;
constexpr uint8_t kOpCodeMask = 0x1f;
constexpr uint8_t kTransportRc = 0x00;
constexpr uint8_t kTransportUc = 0x20;
constexpr uint8_t kTransportRd = 0x40;
constexpr uint8_t kTransportUd = 0x60;
constexpr uint8_t kTransportCnp = 0x80;
constexpr uint8_t kTransportXrc = 0xa0;

// Operation codes within a transport (low 5 bits).
constexpr uint8_t kOpSendFirst = 0x00;
constexpr uint8_t kOpSendMiddle = 0x01;
constexpr uint8_t kOpSendLast = 0x02;
constexpr uint8_t kOpSendLastImm = 0x03;
constexpr uint8_t kOpSendOnly = 0x04;
constexpr uint8_t kOpSendOnlyImm = 0x05;
constexpr uint8_t kOpWriteFirst = 0x06;
constexpr uint8_t kOpWriteMiddle = 0x07;
constexpr uint8_t kOpWriteLast = 0x08;
constexpr uint8_t kOpWriteLastImm = 0x09;
constexpr uint8_t kOpWriteOnly = 0x0a;
constexpr uint8_t kOpWriteOnlyImm = 0x0b;
constexpr uint8_t kOpReadReq = 0x0c;
constexpr uint8_t kOpReadRespFirst = 0x0d;
constexpr uint8_t kOpReadRespMiddle = 0x0e;
constexpr uint8_t kOpReadRespLast = 0x0f;
constexpr uint8_t kOpReadRespOnly = 0x10;
constexpr uint8_t kOpAck = 0x11;
constexpr uint8_t kOpAtomicAck = 0x12;
constexpr uint8_t kOpCmpSwap = 0x13;
constexpr uint8_t kOpFetchAdd = 0x14;
constexpr uint8_t kOpSendLastInv = 0x16;
constexpr uint8_t kOpSendOnlyInv = 0x17;
constexpr uint8_t kOpFlush = 0x1c;        // RC only (as the kernel's ib_pack.h and rxe)
constexpr uint8_t kOpAtomicWrite = 0x1d;  // RC only (as the kernel's ib_pack.h and rxe)

// Reliable Connected.
constexpr uint8_t kRcSendFirst = kTransportRc | kOpSendFirst;
constexpr uint8_t kRcSendMiddle = kTransportRc | kOpSendMiddle;
constexpr uint8_t kRcSendLast = kTransportRc | kOpSendLast;
constexpr uint8_t kRcSendLastImm = kTransportRc | kOpSendLastImm;
constexpr uint8_t kRcSendOnly = kTransportRc | kOpSendOnly;
constexpr uint8_t kRcSendOnlyImm = kTransportRc | kOpSendOnlyImm;
constexpr uint8_t kRcWriteFirst = kTransportRc | kOpWriteFirst;
constexpr uint8_t kRcWriteMiddle = kTransportRc | kOpWriteMiddle;
constexpr uint8_t kRcWriteLast = kTransportRc | kOpWriteLast;
constexpr uint8_t kRcWriteLastImm = kTransportRc | kOpWriteLastImm;
constexpr uint8_t kRcWriteOnly = kTransportRc | kOpWriteOnly;
constexpr uint8_t kRcWriteOnlyImm = kTransportRc | kOpWriteOnlyImm;
constexpr uint8_t kRcReadReq = kTransportRc | kOpReadReq;
constexpr uint8_t kRcReadRespFirst = kTransportRc | kOpReadRespFirst;
constexpr uint8_t kRcReadRespMiddle = kTransportRc | kOpReadRespMiddle;
constexpr uint8_t kRcReadRespLast = kTransportRc | kOpReadRespLast;
constexpr uint8_t kRcReadRespOnly = kTransportRc | kOpReadRespOnly;
constexpr uint8_t kRcAck = kTransportRc | kOpAck;
constexpr uint8_t kRcAtomicAck = kTransportRc | kOpAtomicAck;
constexpr uint8_t kRcCmpSwap = kTransportRc | kOpCmpSwap;
constexpr uint8_t kRcFetchAdd = kTransportRc | kOpFetchAdd;
constexpr uint8_t kRcSendLastInv = kTransportRc | kOpSendLastInv;
constexpr uint8_t kRcSendOnlyInv = kTransportRc | kOpSendOnlyInv;
constexpr uint8_t kRcFlush = kTransportRc | kOpFlush;              // 0x1c
constexpr uint8_t kRcAtomicWrite = kTransportRc | kOpAtomicWrite;  // 0x1d

// Unreliable Connected: sends and writes only.
constexpr uint8_t kUcSendFirst = kTransportUc | kOpSendFirst;
constexpr uint8_t kUcSendMiddle = kTransportUc | kOpSendMiddle;
constexpr uint8_t kUcSendLast = kTransportUc | kOpSendLast;
constexpr uint8_t kUcSendLastImm = kTransportUc | kOpSendLastImm;
constexpr uint8_t kUcSendOnly = kTransportUc | kOpSendOnly;
constexpr uint8_t kUcSendOnlyImm = kTransportUc | kOpSendOnlyImm;
constexpr uint8_t kUcWriteFirst = kTransportUc | kOpWriteFirst;
constexpr uint8_t kUcWriteMiddle = kTransportUc | kOpWriteMiddle;
constexpr uint8_t kUcWriteLast = kTransportUc | kOpWriteLast;
constexpr uint8_t kUcWriteLastImm = kTransportUc | kOpWriteLastImm;
constexpr uint8_t kUcWriteOnly = kTransportUc | kOpWriteOnly;
constexpr uint8_t kUcWriteOnlyImm = kTransportUc | kOpWriteOnlyImm;

// Unreliable Datagram.
constexpr uint8_t kUdSendOnly = kTransportUd | kOpSendOnly;        // 0x64
constexpr uint8_t kUdSendOnlyImm = kTransportUd | kOpSendOnlyImm;  // 0x65

// Congestion Notification Packet. (Named kCnpOpcode because kCnp is the OpFlags bit.)
constexpr uint8_t kCnpOpcode = 0x81;

// Extended Reliable Connected: the RC set at 0xA0.
constexpr uint8_t kXrcSendFirst = kTransportXrc | kOpSendFirst;
constexpr uint8_t kXrcSendMiddle = kTransportXrc | kOpSendMiddle;
constexpr uint8_t kXrcSendLast = kTransportXrc | kOpSendLast;
constexpr uint8_t kXrcSendLastImm = kTransportXrc | kOpSendLastImm;
constexpr uint8_t kXrcSendOnly = kTransportXrc | kOpSendOnly;
constexpr uint8_t kXrcSendOnlyImm = kTransportXrc | kOpSendOnlyImm;
constexpr uint8_t kXrcWriteFirst = kTransportXrc | kOpWriteFirst;
constexpr uint8_t kXrcWriteMiddle = kTransportXrc | kOpWriteMiddle;
constexpr uint8_t kXrcWriteLast = kTransportXrc | kOpWriteLast;
constexpr uint8_t kXrcWriteLastImm = kTransportXrc | kOpWriteLastImm;
constexpr uint8_t kXrcWriteOnly = kTransportXrc | kOpWriteOnly;
constexpr uint8_t kXrcWriteOnlyImm = kTransportXrc | kOpWriteOnlyImm;
constexpr uint8_t kXrcReadReq = kTransportXrc | kOpReadReq;
constexpr uint8_t kXrcReadRespFirst = kTransportXrc | kOpReadRespFirst;
constexpr uint8_t kXrcReadRespMiddle = kTransportXrc | kOpReadRespMiddle;
constexpr uint8_t kXrcReadRespLast = kTransportXrc | kOpReadRespLast;
constexpr uint8_t kXrcReadRespOnly = kTransportXrc | kOpReadRespOnly;
constexpr uint8_t kXrcAck = kTransportXrc | kOpAck;
constexpr uint8_t kXrcAtomicAck = kTransportXrc | kOpAtomicAck;
constexpr uint8_t kXrcCmpSwap = kTransportXrc | kOpCmpSwap;
constexpr uint8_t kXrcFetchAdd = kTransportXrc | kOpFetchAdd;
constexpr uint8_t kXrcSendLastInv = kTransportXrc | kOpSendLastInv;
constexpr uint8_t kXrcSendOnlyInv = kTransportXrc | kOpSendOnlyInv;

// Same operation on another transport, e.g. op_on(kTransportXrc, kRcSendOnly) == kXrcSendOnly.
// Lets engines share RC/XRC code; check op_info() of the result before using it.
constexpr uint8_t op_on(uint8_t transport, uint8_t opcode) {
    return static_cast<uint8_t>((transport & kOpTransportMask) | (opcode & kOpCodeMask));
}

}  // namespace uroce::net
