// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RoCEv2 packet codec: the UDP payload from the BTH to the ICRC. Decoding is a bounds-checked
// parse into plain structs (it is a fuzz target: any byte string must be safe); encoding writes
// exactly the extension headers the opcode table lists. Transport rules (PSN windows, QP state,
// keys, MTU) belong to the engines, not here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/ip_marks.h"
#include "net/opcodes.h"
#include "net/psn.h"

namespace uroce::net {

struct Bth {
    uint8_t opcode;
    bool se;       // solicited event
    bool mig;      // MigReq
    uint8_t pad;   // 0..3 pad bytes after the payload
    uint8_t tver;  // transport header version, must be 0
    uint16_t pkey;
    bool fecn;
    bool becn;
    uint32_t dqpn;  // 24 bits
    bool ackreq;
    uint32_t psn;  // 24 bits
};

struct Reth {
    uint64_t va;
    uint32_t rkey;
    uint32_t dma_len;
};

struct Aeth {
    uint8_t syndrome;
    uint32_t msn;  // 24 bits
};

struct Deth {
    uint32_t qkey;
    uint32_t src_qpn;  // 24 bits
};

struct Xrceth {
    uint32_t srqn;  // 24 bits
};

struct AtomicEth {
    uint64_t va;
    uint32_t rkey;
    uint64_t swap_add;
    uint64_t compare;
};

// FLUSH Extended Transport Header (IBTA 1.5; rxe's rxe_feth): one 32-bit word, the placement
// type in bits 3..0 and the selectivity level in bits 5..4, the rest reserved.
struct Feth {
    uint8_t placement;    // kFlushGlobal | kFlushPersistent (4 bits on the wire)
    uint8_t selectivity;  // kFlushRange or kFlushMr (2 bits on the wire)
};
namespace feth {
constexpr uint8_t kFlushGlobal = 1u << 0;      // IBV_FLUSH_GLOBAL: global visibility
constexpr uint8_t kFlushPersistent = 1u << 1;  // IBV_FLUSH_PERSISTENT: persistence
constexpr uint8_t kFlushRange = 0;             // IBV_FLUSH_RANGE: the RETH's range
constexpr uint8_t kFlushMr = 1;                // IBV_FLUSH_MR: the whole memory region
constexpr uint32_t kPlacementMask = 0x0f;
constexpr uint32_t kSelectivityMask = 0x30;
constexpr uint32_t kSelectivityShift = 4;
}  // namespace feth

struct AtomicAckEth {
    uint64_t orig;
};

// Only the headers present for bth.opcode are meaningful; decode() zeroes the rest.
struct Packet {
    Bth bth;
    Reth reth;
    Aeth aeth;
    Deth deth;
    Xrceth xrc;
    AtomicEth atomic;
    AtomicAckEth atomic_ack;
    Feth feth;
    uint32_t imm;   // ImmDt as the host-order value of the big-endian field
    uint32_t ieth;  // R_Key to invalidate
    const uint8_t* payload;
    uint32_t payload_len;  // excluding pad and ICRC
    IpMarks ip;            // the IPv4 TOS and TTL it arrived with (the receiver sets them)
};

enum class DropReason : uint8_t {
    kNone,
    kTooShort,
    kUnknownOpcode,
    kBadVersion,
    kBadPad,
    kBadLength,
    kBadIcrc,
    kBadPkey,
    kBadQp,
    kOpNotForQp,
    kBadQkey,       // UD: the DETH Q_Key is not the QP's
    kNoRecv,        // UD/UC: no receive posted, the message is discarded
    kNoMcastGroup,  // UD multicast: no QP of this device is attached to the group
    kBadRkey,       // UC: an RDMA WRITE its R_Key, bounds or access do not allow (no NAK on UC)
    kCount
};

// Stable lower-case names for counters and traces ("too_short", ...); "unknown" if out of range.
const char* drop_reason_name(DropReason);

constexpr size_t kIcrcLen = 4;
constexpr size_t kBthLen = 12;
constexpr uint16_t kRoceUdpPort = 4791;
constexpr uint16_t kDefaultPkey = 0xffff;
constexpr uint32_t kMcastQpn = 0xffffff;  // the destination QP of every multicast packet
// 224.0.0.0/4, network order.
inline bool is_ipv4_multicast(uint32_t ip_be) {
    return (reinterpret_cast<const uint8_t*>(&ip_be)[0] & 0xf0) == 0xe0;
}
// Largest BTH + extension headers of any opcode (XRC atomic: BTH + XRCETH + AtomicETH).
constexpr size_t kMaxHdrLen = 44;

// Decode a UDP payload (BTH ... ICRC). Checks, in order: room for a BTH and ICRC (kTooShort),
// opcode known (kUnknownOpcode), room for the opcode's extension headers (kTooShort), tver == 0
// (kBadVersion); for payload opcodes pad <= remaining bytes (kBadPad); for the others pad == 0
// (kBadPad) and no bytes between the headers and the ICRC (kBadLength). Does not check the ICRC
// (see icrc.h; it needs the IP addresses). On success out.payload points into buf.
DropReason decode(const uint8_t* buf, size_t len, Packet& out);

// Write BTH + the extension headers op_info(p.bth.opcode) lists, from p, into out (which must
// hold op_info(p.bth.opcode)->hdr_len bytes). Fields are masked to their wire widths and
// reserved bits are written as 0; p.bth.pad is written as given. Returns the bytes written, or 0
// for an undefined opcode.
size_t encode_headers(const Packet& p, uint8_t* out);

// Pad bytes needed to make payload_len a multiple of 4.
inline uint8_t pad_for(uint32_t payload_len) { return (4 - (payload_len & 3)) & 3; }

// AETH syndrome layout (IBTA 9.7.5.1): bit 7 reserved, bits 6..5 type, bits 4..0 a credit
// count (ACK), an RNR timer code (RNR NAK) or a NAK code.
namespace aeth {
constexpr uint8_t kTypeMask = 0x60;
constexpr uint8_t kValueMask = 0x1f;
constexpr uint8_t kAck = 0x00;
constexpr uint8_t kRnrNak = 0x20;
constexpr uint8_t kNak = 0x60;
constexpr uint8_t kCreditInvalid = 0x1f;  // "no credit count" in an ACK
constexpr uint8_t kNakPsnSeqError = 0;
constexpr uint8_t kNakInvalidRequest = 1;
constexpr uint8_t kNakRemoteAccessError = 2;
constexpr uint8_t kNakRemoteOpError = 3;
constexpr uint8_t kNakInvalidRdRequest = 4;

constexpr uint8_t ack(uint8_t credits) { return kAck | (credits & kValueMask); }
constexpr uint8_t rnr_nak(uint8_t timer) { return kRnrNak | (timer & kValueMask); }
constexpr uint8_t nak(uint8_t code) { return kNak | (code & kValueMask); }
constexpr uint8_t type(uint8_t syndrome) { return syndrome & kTypeMask; }
constexpr uint8_t value(uint8_t syndrome) { return syndrome & kValueMask; }
}  // namespace aeth

}  // namespace uroce::net
