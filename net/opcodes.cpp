// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The opcode table. Rows are written once, in IBTA order; the 256-entry lookup array is built
// from them at compile time, with hdr_len derived from the header bits so the two can't disagree.
#include "net/opcodes.h"

#include <array>

namespace uroce::net {
namespace {

struct Row {
    uint8_t opcode;
    const char* name;
    QpClass cls;
    uint32_t hdrs;
    uint32_t flags;
};

// Shorthands for the flag sets that repeat across transports.
constexpr uint32_t kOnlyF = kOnly | kFirst | kLast;
constexpr uint32_t kSend = kRequest | kSendOp | kPayload;
constexpr uint32_t kWrite = kRequest | kWriteOp | kPayload;
constexpr uint32_t kRResp = kResponse | kReadResp | kPayload;
constexpr uint32_t kAtom = kRequest | kAtomicOp | kOnlyF;

using enum QpClass;

// clang-format off
constexpr Row kRows[] = {
    // Reliable Connected
    {kRcSendFirst,       "RC_SEND_FIRST",                      RC, 0,                  kSend | kFirst},
    {kRcSendMiddle,      "RC_SEND_MIDDLE",                     RC, 0,                  kSend | kMiddle},
    {kRcSendLast,        "RC_SEND_LAST",                       RC, 0,                  kSend | kLast},
    {kRcSendLastImm,     "RC_SEND_LAST_WITH_IMMEDIATE",        RC, kImmDt,             kSend | kLast | kImmOp},
    {kRcSendOnly,        "RC_SEND_ONLY",                       RC, 0,                  kSend | kOnlyF},
    {kRcSendOnlyImm,     "RC_SEND_ONLY_WITH_IMMEDIATE",        RC, kImmDt,             kSend | kOnlyF | kImmOp},
    {kRcWriteFirst,      "RC_RDMA_WRITE_FIRST",                RC, kRETH,              kWrite | kFirst},
    {kRcWriteMiddle,     "RC_RDMA_WRITE_MIDDLE",               RC, 0,                  kWrite | kMiddle},
    {kRcWriteLast,       "RC_RDMA_WRITE_LAST",                 RC, 0,                  kWrite | kLast},
    {kRcWriteLastImm,    "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",  RC, kImmDt,             kWrite | kLast | kImmOp},
    {kRcWriteOnly,       "RC_RDMA_WRITE_ONLY",                 RC, kRETH,              kWrite | kOnlyF},
    {kRcWriteOnlyImm,    "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",  RC, kRETH | kImmDt,     kWrite | kOnlyF | kImmOp},
    {kRcReadReq,         "RC_RDMA_READ_REQUEST",               RC, kRETH,              kRequest | kReadReq | kOnlyF},
    {kRcReadRespFirst,   "RC_RDMA_READ_RESPONSE_FIRST",        RC, kAETH,              kRResp | kFirst},
    {kRcReadRespMiddle,  "RC_RDMA_READ_RESPONSE_MIDDLE",       RC, 0,                  kRResp | kMiddle},
    {kRcReadRespLast,    "RC_RDMA_READ_RESPONSE_LAST",         RC, kAETH,              kRResp | kLast},
    {kRcReadRespOnly,    "RC_RDMA_READ_RESPONSE_ONLY",         RC, kAETH,              kRResp | kOnlyF},
    {kRcAck,             "RC_ACKNOWLEDGE",                     RC, kAETH,              kResponse | kAckOp | kOnlyF},
    {kRcAtomicAck,       "RC_ATOMIC_ACKNOWLEDGE",              RC, kAETH | kAtomicAckETH, kResponse | kAtomicAck | kOnlyF},
    {kRcCmpSwap,         "RC_CMP_SWAP",                        RC, kAtomicETH,         kAtom},
    {kRcFetchAdd,        "RC_FETCH_ADD",                       RC, kAtomicETH,         kAtom},
    {kRcSendLastInv,     "RC_SEND_LAST_WITH_INVALIDATE",       RC, kIETH,              kSend | kLast | kInvOp},
    {kRcSendOnlyInv,     "RC_SEND_ONLY_WITH_INVALIDATE",       RC, kIETH,              kSend | kOnlyF | kInvOp},
    {kRcFlush,           "RC_FLUSH",                           RC, kFETH | kRETH,      kRequest | kFlushOp | kOnlyF},
    {kRcAtomicWrite,     "RC_ATOMIC_WRITE",                    RC, kRETH,              kRequest | kAtomicWriteOp | kPayload | kOnlyF},

    // Unreliable Connected
    {kUcSendFirst,       "UC_SEND_FIRST",                      UC, 0,                  kSend | kFirst},
    {kUcSendMiddle,      "UC_SEND_MIDDLE",                     UC, 0,                  kSend | kMiddle},
    {kUcSendLast,        "UC_SEND_LAST",                       UC, 0,                  kSend | kLast},
    {kUcSendLastImm,     "UC_SEND_LAST_WITH_IMMEDIATE",        UC, kImmDt,             kSend | kLast | kImmOp},
    {kUcSendOnly,        "UC_SEND_ONLY",                       UC, 0,                  kSend | kOnlyF},
    {kUcSendOnlyImm,     "UC_SEND_ONLY_WITH_IMMEDIATE",        UC, kImmDt,             kSend | kOnlyF | kImmOp},
    {kUcWriteFirst,      "UC_RDMA_WRITE_FIRST",                UC, kRETH,              kWrite | kFirst},
    {kUcWriteMiddle,     "UC_RDMA_WRITE_MIDDLE",               UC, 0,                  kWrite | kMiddle},
    {kUcWriteLast,       "UC_RDMA_WRITE_LAST",                 UC, 0,                  kWrite | kLast},
    {kUcWriteLastImm,    "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",  UC, kImmDt,             kWrite | kLast | kImmOp},
    {kUcWriteOnly,       "UC_RDMA_WRITE_ONLY",                 UC, kRETH,              kWrite | kOnlyF},
    {kUcWriteOnlyImm,    "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",  UC, kRETH | kImmDt,     kWrite | kOnlyF | kImmOp},

    // Unreliable Datagram
    {kUdSendOnly,        "UD_SEND_ONLY",                       UD, kDETH,              kSend | kOnlyF},
    {kUdSendOnlyImm,     "UD_SEND_ONLY_WITH_IMMEDIATE",        UD, kDETH | kImmDt,     kSend | kOnlyF | kImmOp},

    // Congestion Notification (RoCEv2 annex A17)
    {kCnpOpcode,         "CNP",                                CNP, 0,                 kCnp},

    // Extended Reliable Connected: every request carries an XRCETH right after the BTH;
    // responses go back to the INI QP and look exactly like RC responses.
    {kXrcSendFirst,      "XRC_SEND_FIRST",                     XRC, kXRCETH,           kSend | kFirst},
    {kXrcSendMiddle,     "XRC_SEND_MIDDLE",                    XRC, kXRCETH,           kSend | kMiddle},
    {kXrcSendLast,       "XRC_SEND_LAST",                      XRC, kXRCETH,           kSend | kLast},
    {kXrcSendLastImm,    "XRC_SEND_LAST_WITH_IMMEDIATE",       XRC, kXRCETH | kImmDt,  kSend | kLast | kImmOp},
    {kXrcSendOnly,       "XRC_SEND_ONLY",                      XRC, kXRCETH,           kSend | kOnlyF},
    {kXrcSendOnlyImm,    "XRC_SEND_ONLY_WITH_IMMEDIATE",       XRC, kXRCETH | kImmDt,  kSend | kOnlyF | kImmOp},
    {kXrcWriteFirst,     "XRC_RDMA_WRITE_FIRST",               XRC, kXRCETH | kRETH,   kWrite | kFirst},
    {kXrcWriteMiddle,    "XRC_RDMA_WRITE_MIDDLE",              XRC, kXRCETH,           kWrite | kMiddle},
    {kXrcWriteLast,      "XRC_RDMA_WRITE_LAST",                XRC, kXRCETH,           kWrite | kLast},
    {kXrcWriteLastImm,   "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", XRC, kXRCETH | kImmDt,  kWrite | kLast | kImmOp},
    {kXrcWriteOnly,      "XRC_RDMA_WRITE_ONLY",                XRC, kXRCETH | kRETH,   kWrite | kOnlyF},
    {kXrcWriteOnlyImm,   "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", XRC, kXRCETH | kRETH | kImmDt, kWrite | kOnlyF | kImmOp},
    {kXrcReadReq,        "XRC_RDMA_READ_REQUEST",              XRC, kXRCETH | kRETH,   kRequest | kReadReq | kOnlyF},
    {kXrcReadRespFirst,  "XRC_RDMA_READ_RESPONSE_FIRST",       XRC, kAETH,             kRResp | kFirst},
    {kXrcReadRespMiddle, "XRC_RDMA_READ_RESPONSE_MIDDLE",      XRC, 0,                 kRResp | kMiddle},
    {kXrcReadRespLast,   "XRC_RDMA_READ_RESPONSE_LAST",        XRC, kAETH,             kRResp | kLast},
    {kXrcReadRespOnly,   "XRC_RDMA_READ_RESPONSE_ONLY",        XRC, kAETH,             kRResp | kOnlyF},
    {kXrcAck,            "XRC_ACKNOWLEDGE",                    XRC, kAETH,             kResponse | kAckOp | kOnlyF},
    {kXrcAtomicAck,      "XRC_ATOMIC_ACKNOWLEDGE",             XRC, kAETH | kAtomicAckETH, kResponse | kAtomicAck | kOnlyF},
    {kXrcCmpSwap,        "XRC_CMP_SWAP",                       XRC, kXRCETH | kAtomicETH, kAtom},
    {kXrcFetchAdd,       "XRC_FETCH_ADD",                      XRC, kXRCETH | kAtomicETH, kAtom},
    {kXrcSendLastInv,    "XRC_SEND_LAST_WITH_INVALIDATE",      XRC, kXRCETH | kIETH,   kSend | kLast | kInvOp},
    {kXrcSendOnlyInv,    "XRC_SEND_ONLY_WITH_INVALIDATE",      XRC, kXRCETH | kIETH,   kSend | kOnlyF | kInvOp},
};
// clang-format on

constexpr uint8_t header_len(const Row& r) {
    unsigned n = 12;  // BTH
    if (r.hdrs & kRETH) n += kRethLen;
    if (r.hdrs & kAETH) n += kAethLen;
    if (r.hdrs & kDETH) n += kDethLen;
    if (r.hdrs & kXRCETH) n += kXrcethLen;
    if (r.hdrs & kAtomicETH) n += kAtomicEthLen;
    if (r.hdrs & kAtomicAckETH) n += kAtomicAckEthLen;
    if (r.hdrs & kImmDt) n += kImmDtLen;
    if (r.hdrs & kIETH) n += kIethLen;
    if (r.hdrs & kFETH) n += kFethLen;
    if (r.flags & kCnp) n += kCnpReservedLen;
    return static_cast<uint8_t>(n);
}

constexpr std::array<OpInfo, 256> build_table() {
    std::array<OpInfo, 256> t{};
    for (const Row& r : kRows) {
        t[r.opcode] = OpInfo{r.name, r.cls, r.hdrs, r.flags, header_len(r)};
    }
    return t;
}

constexpr std::array<OpInfo, 256> kTable = build_table();

// Compile-time sanity: a duplicate or mistyped row shows up as a wrong count or length.
constexpr int defined_count() {
    int n = 0;
    for (const OpInfo& o : kTable) n += o.name != nullptr;
    return n;
}
static_assert(defined_count() == 25 + 12 + 2 + 1 + 23, "opcode rows must be unique");
static_assert(kTable[kRcWriteOnlyImm].hdr_len == 32);
static_assert(kTable[kRcAtomicAck].hdr_len == 24);
static_assert(kTable[kRcAtomicWrite].hdr_len == 28);
static_assert(kTable[kRcFlush].hdr_len == 32);
static_assert(kTable[kXrcCmpSwap].hdr_len == 44);
static_assert(kTable[kUdSendOnlyImm].hdr_len == 24);
static_assert(kTable[kCnpOpcode].hdr_len == 28);

}  // namespace

const OpInfo* op_info(uint8_t opcode) {
    const OpInfo* o = &kTable[opcode];
    return o->name ? o : nullptr;
}

}  // namespace uroce::net
