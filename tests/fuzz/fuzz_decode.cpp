// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// libFuzzer target: the RoCEv2 packet decoder path (docs/fuzzing.md).
//
// The input is one UDP payload (BTH ... ICRC), exactly what Wire::on_packet hands to the
// codec. Besides "no crash, no sanitizer report", the target checks properties that a decoder
// bug would break, and traps (a crash libFuzzer reports) when one fails:
//   - op_info() agrees with decode(): an undefined opcode is kUnknownOpcode, a defined one is
//     never, and the table row is self-consistent (hdr_len within bounds, only flags it knows);
//   - on success the payload lies inside the input, and headers + payload + pad + ICRC add up
//     to the input length;
//   - encode_headers() of the decoded packet gives back the input's headers (modulo reserved
//     bits, which the encoder zeroes) and decodes to the same fields;
//   - the ICRC: icrc_store() then icrc_check() succeed; flipping a covered bit makes
//     icrc_check() fail; the masked BTH byte 4 (FECN/BECN) does not change the ICRC; moved to
//     another IPv4 ID (icrc_set_id) it is the ICRC over a header with that ID, and
//     icrc_check_ids() finds that ID, and so does the receiver's solver for any ID
//     (icrc_check_any_id), which still rejects a flipped bit;
//   - the IPv4-datagram entry points (icrc_compute_ipv4, icrc_check_ipv4) on the raw input
//     and on a well-formed IPv4/UDP datagram built around it agree with icrc_compute().
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "net/byteorder.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/icrc_id.h"
#include "net/opcodes.h"

using namespace uroce::net;

namespace {

constexpr uint32_t kSrc = 0x0100000a;  // 10.0.0.1 in network order (little-endian host)
constexpr uint32_t kDst = 0x0200000a;  // 10.0.0.2
constexpr uint16_t kPort = kRoceUdpPort;

#define CHECK(cond)                    \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

constexpr uint32_t kKnownHdrs =
    kRETH | kAETH | kDETH | kXRCETH | kAtomicETH | kAtomicAckETH | kImmDt | kIETH | kFETH;

bool same_fields(const Packet& a, const Packet& b) {
    const Bth &x = a.bth, &y = b.bth;
    if (x.opcode != y.opcode || x.se != y.se || x.mig != y.mig || x.pad != y.pad ||
        x.tver != y.tver || x.pkey != y.pkey || x.fecn != y.fecn || x.becn != y.becn ||
        x.dqpn != y.dqpn || x.ackreq != y.ackreq || x.psn != y.psn)
        return false;
    return a.reth.va == b.reth.va && a.reth.rkey == b.reth.rkey &&
           a.reth.dma_len == b.reth.dma_len && a.aeth.syndrome == b.aeth.syndrome &&
           a.aeth.msn == b.aeth.msn && a.deth.qkey == b.deth.qkey &&
           a.deth.src_qpn == b.deth.src_qpn && a.xrc.srqn == b.xrc.srqn &&
           a.atomic.va == b.atomic.va && a.atomic.rkey == b.atomic.rkey &&
           a.atomic.swap_add == b.atomic.swap_add && a.atomic.compare == b.atomic.compare &&
           a.atomic_ack.orig == b.atomic_ack.orig && a.imm == b.imm && a.ieth == b.ieth &&
           a.feth.placement == b.feth.placement && a.feth.selectivity == b.feth.selectivity &&
           a.payload_len == b.payload_len;
}

void check_op_table(uint8_t opcode) {
    const OpInfo* op = op_info(opcode);
    if (!op) return;
    CHECK(op->name != nullptr);
    CHECK(op->hdr_len >= kBthLen && op->hdr_len <= kMaxHdrLen);
    CHECK((op->hdrs & ~kKnownHdrs) == 0);
    // First/Middle/Last placement: Only implies First and Last; Middle excludes both.
    if (op->flags & kOnly) CHECK((op->flags & (kFirst | kLast)) == (kFirst | kLast));
    if (op->flags & kMiddle) CHECK(!(op->flags & (kFirst | kLast)));
}

// The datagram as the device would see it on the wire: IPv4 (DF, IPv4 ID `id`) + UDP +
// payload.
std::vector<uint8_t> datagram(const uint8_t* data, size_t len, uint16_t id) {
    std::vector<uint8_t> ip(20 + 8 + len);
    ip[0] = 0x45;
    ip[1] = 0x02;  // ECN bits: masked, must not matter
    store_be16(&ip[2], uint16_t(ip.size()));
    store_be16(&ip[4], id);
    store_be16(&ip[6], 0x4000);
    ip[8] = 17;  // a TTL other than 64: masked too
    ip[9] = 17;
    std::memcpy(&ip[12], &kSrc, 4);
    std::memcpy(&ip[16], &kDst, 4);
    store_be16(&ip[20], kPort);
    store_be16(&ip[22], kPort);
    store_be16(&ip[24], uint16_t(8 + len));
    std::memcpy(&ip[28], data, len);
    return ip;
}

void check_ipv4(const uint8_t* data, size_t len) {
    // Raw input as a datagram: must be safe whatever it holds.
    uint32_t c = 0;
    if (icrc_compute_ipv4(data, len, &c)) (void)icrc_check_ipv4(data, len);
    if (len < kBthLen + kIcrcLen || len > 2000) return;
    std::vector<uint8_t> ip = datagram(data, len, 0);
    CHECK(icrc_compute_ipv4(ip.data(), ip.size(), &c));
    CHECK(c == icrc_compute(kSrc, kDst, kPort, kPort, data, len));
    CHECK(icrc_check_ipv4(ip.data(), ip.size()) == icrc_check(kSrc, kDst, kPort, kPort, data, len));
    // A length field that disagrees with the buffer is refused, never read past.
    CHECK(!icrc_compute_ipv4(ip.data(), ip.size() - 1, &c));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
    // Exact-size heap copy so ASan sees any read past the end.
    std::vector<uint8_t> buf(data, data + len);
    const uint8_t* b = buf.data();

    if (len > 0) check_op_table(b[0]);
    Packet p;
    DropReason why = decode(len ? b : nullptr, len, p);
    CHECK(why < DropReason::kCount);
    CHECK(drop_reason_name(why) != nullptr);
    if (len >= kBthLen + kIcrcLen) CHECK((why == DropReason::kUnknownOpcode) == !op_info(b[0]));
    if (len < kBthLen + kIcrcLen) CHECK(why == DropReason::kTooShort);

    // The ICRC over the raw input, as the receive path computes it.
    bool icrc_ok = icrc_check(kSrc, kDst, kPort, kPort, b, len);
    (void)icrc_ok;
    check_ipv4(b, len);

    if (why != DropReason::kNone) return 0;

    const OpInfo* op = op_info(p.bth.opcode);
    CHECK(op != nullptr && p.bth.opcode == b[0]);
    CHECK(p.payload == b + op->hdr_len);
    CHECK(size_t(op->hdr_len) + p.payload_len + p.bth.pad + kIcrcLen == len);
    if (!(op->flags & kPayload)) CHECK(p.payload_len == 0 && p.bth.pad == 0);
    CHECK(p.bth.dqpn <= 0xffffff && p.bth.psn <= 0xffffff && p.bth.tver == 0);

    // Re-encode: same headers (reserved bits aside), same fields after a second decode.
    std::vector<uint8_t> re(len);
    size_t hl = encode_headers(p, re.data());
    CHECK(hl == op->hdr_len);
    std::memcpy(re.data() + hl, b + hl, len - hl);
    // Reserved bits the encoder writes as 0: BTH byte 4 low 6 bits, byte 8 low 7 bits; DETH
    // byte 4; XRCETH byte 0; the FETH's upper 26 bits; the CNP's reserved bytes.
    std::vector<uint8_t> want(b, b + len);
    want[4] &= 0xc0;
    want[8] &= 0x80;
    size_t off = kBthLen;
    if (op->hdrs & kDETH) {
        want[off + 4] = 0;
        off += kDethLen;
    }
    if (op->hdrs & kXRCETH) want[off] = 0;
    if (op->hdrs & kFETH) {  // right after the BTH (RC only): all but 6 bits reserved
        want[off] = want[off + 1] = want[off + 2] = 0;
        want[off + 3] &= feth::kPlacementMask | feth::kSelectivityMask;
    }
    if (op->flags & kCnp)
        std::memset(want.data() + op->hdr_len - kCnpReservedLen, 0, kCnpReservedLen);
    CHECK(std::memcmp(re.data(), want.data(), len) == 0);
    Packet q;
    CHECK(decode(re.data(), len, q) == DropReason::kNone);
    CHECK(same_fields(p, q));

    // ICRC: a stored ICRC checks; a flipped covered bit does not; FECN/BECN are masked.
    icrc_store(kSrc, kDst, kPort, kPort, re.data(), len);
    CHECK(icrc_check(kSrc, kDst, kPort, kPort, re.data(), len));
    re[4] ^= 0xc0;
    CHECK(icrc_check(kSrc, kDst, kPort, kPort, re.data(), len));
    re[4] ^= 0xc0;
    // Another IPv4 ID (a GSO segment's, icrc_id.h): the ICRC moved to it is the one over a
    // real header with that ID; icrc_check_ids finds the ID without the hint, and the ID-0
    // check refuses it.
    static IcrcIdDelta ids;
    uint16_t id = uint16_t(1 + p.bth.psn % 127);
    icrc_set_id(re.data(), len, 0, id, ids);
    if (len <= 60000) {
        std::vector<uint8_t> ip = datagram(re.data(), len, id);
        CHECK(icrc_check_ipv4(ip.data(), ip.size()));
    }
    CHECK(!icrc_check(kSrc, kDst, kPort, kPort, re.data(), len));
    uint16_t found = 0;
    CHECK(icrc_check_ids(kSrc, kDst, kPort, kPort, re.data(), len, 0, 128, ids, &found));
    CHECK(found == id);
    // Any ID, as rxe or a NIC sends it: the receiver's solver finds it from the ICRC alone.
    static const IcrcIdSolver solver;
    const uint16_t any = uint16_t(p.bth.psn * 40503u);
    icrc_set_id(re.data(), len, id, any, ids);
    bool df = false;
    CHECK(icrc_check_any_id(kSrc, kDst, kPort, kPort, re.data(), len, 0, false, ids, solver, &found,
                            &df) == (any ? IcrcWay::kSolved : IcrcWay::kId0));
    CHECK(found == any && df);
    icrc_set_id(re.data(), len, any, 0, ids);
    size_t bit = (size_t(p.bth.psn) * 7919u) % ((len - kIcrcLen) * 8);
    if (bit / 8 != 4) {
        re[bit / 8] ^= uint8_t(1u << (bit % 8));
        CHECK(!icrc_check(kSrc, kDst, kPort, kPort, re.data(), len));
        // ... and for no ID at all: a single-bit error always fails the solver (DF required;
        // packets below about 26 KB, net/icrc_id.h).
        if (len < 26000)
            CHECK(icrc_check_any_id(kSrc, kDst, kPort, kPort, re.data(), len, 0, false, ids, solver,
                                    nullptr, nullptr) == IcrcWay::kBad);
    }
    return 0;
}
