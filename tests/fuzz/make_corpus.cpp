// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Writes the seed corpora of the fuzz targets (docs/fuzzing.md), built with the codec itself
// so they stay valid when the opcode table changes:
//   OUT/decode/  one valid packet per defined opcode (BTH ... ICRC, correct ICRC for the
//                addresses fuzz_decode checks with), plus payload/pad variants;
//   OUT/device/  fuzz_device inputs: every opcode aimed at the QP of its transport, and the
//                multi-packet exchanges the QPs of fuzz_device.cpp expect (SEND and WRITE
//                sequences, READ and atomic requests, the ACK / read response / atomic ACK /
//                NAKs for the work the RC QP has outstanding, UC SENDs, a packet to the QP
//                still in INIT);
//   OUT/control/ fuzz_control inputs (control_seeds.cpp).
// usage: make_corpus OUT_DIR
#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "net/byteorder.h"
#include "net/headers.h"
#include "net/icrc.h"
#include "net/opcodes.h"
#include "tests/fuzz/control_ops.h"

using namespace uroce::net;

namespace {

// fuzz_decode.cpp's addresses: 10.0.0.1 -> 10.0.0.2, port 4791 both ways.
constexpr uint32_t kSrc = 0x0100000a;
constexpr uint32_t kDst = 0x0200000a;

std::string g_out;
int g_files = 0;

void write_file(const std::string& dir, const std::string& name, const std::vector<uint8_t>& b) {
    std::string path = g_out + "/" + dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
    ++g_files;
}

struct Spec {
    uint8_t opcode;
    uint32_t dqpn = 0;
    uint32_t psn = 0;
    uint32_t payload = 0;
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t dma_len = 0;
    uint8_t syndrome = aeth::ack(aeth::kCreditInvalid);
    bool ackreq = true;
};

// BTH ... ICRC. The ICRC is computed for (src, dst, 4791, dport); fuzz_device recomputes it.
std::vector<uint8_t> packet(const Spec& s, uint32_t src = kSrc, uint32_t dst = kDst,
                            uint16_t dport = kRoceUdpPort) {
    const OpInfo* op = op_info(s.opcode);
    Packet p{};
    p.bth.opcode = s.opcode;
    p.bth.pkey = kDefaultPkey;
    p.bth.dqpn = s.dqpn;
    p.bth.psn = s.psn;
    p.bth.ackreq = s.ackreq;
    uint32_t payload = (op->flags & kPayload) ? s.payload : 0;
    p.bth.pad = pad_for(payload);
    p.reth = {s.va, s.rkey, s.dma_len};
    p.atomic = {s.va, s.rkey, 1, 0};
    p.aeth = {s.syndrome, s.psn};
    p.deth = {0x11111111, 0x42};
    p.imm = 0x01020304;
    p.ieth = s.rkey;
    p.feth = {feth::kFlushGlobal, feth::kFlushRange};
    std::vector<uint8_t> b(op->hdr_len + payload + p.bth.pad + kIcrcLen);
    encode_headers(p, b.data());
    for (uint32_t i = 0; i < payload; ++i) b[op->hdr_len + i] = uint8_t(i * 7 + 1);
    icrc_store(src, dst, kRoceUdpPort, dport, b.data(), b.size());
    return b;
}

// A fuzz_device input: flags, then [u16 length][packet]...
std::vector<uint8_t> device_input(uint8_t flags, const std::vector<Spec>& specs) {
    std::vector<uint8_t> in{flags};
    for (const Spec& s : specs) {
        std::vector<uint8_t> p = packet(s);
        uint8_t len[2];
        store_be16(len, uint16_t(p.size()));
        in.insert(in.end(), len, len + 2);
        in.insert(in.end(), p.begin(), p.end());
    }
    return in;
}

// fuzz_device's QP indices (fix-up flag 2 maps dqpn % 3 to them) and fix-up flags.
constexpr uint32_t kRcQp = 0, kUcQp = 1, kInitQp = 2;
constexpr uint8_t kFixAll = 1 | 2 | 4;
constexpr uint32_t kMtu = 1024;

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_corpus OUT_DIR\n");
        return 2;
    }
    g_out = argv[1];
    for (const char* d : {"", "/decode", "/device", "/control"}) {
        std::string path = g_out + d;
        if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
            std::perror(path.c_str());
            return 1;
        }
    }

    for (unsigned o = 0; o < 256; ++o) {
        const OpInfo* op = op_info(uint8_t(o));
        if (!op) continue;
        char name[64];
        std::snprintf(name, sizeof name, "%02x_%s", o, op->name);
        bool payload = op->flags & kPayload;
        bool mid = op->flags & (kFirst | kMiddle) && !(op->flags & kLast);
        // Decoder seeds: the opcode with no payload, and with 1 and 8 bytes (pads 3 and 0).
        Spec s{uint8_t(o), 0x11, 0x123456, 0, 0x1000, 0x100, 8};
        write_file("decode", name, packet(s));
        if (payload) {
            for (uint32_t n : {1u, 8u}) {
                s.payload = n;
                write_file("decode", std::string(name) + "_p" + std::to_string(n), packet(s));
            }
        }

        // Device seeds: the opcode on the QP of its transport, PSN 0 (the RQ PSN), payload a
        // full MTU for First/Middle packets; RETH/AtomicETH aimed at the read-write MR.
        Spec d{uint8_t(o)};
        d.dqpn = op->cls == QpClass::UC ? kUcQp : kRcQp;
        d.payload = payload ? (mid ? kMtu : 8) : 0;
        d.dma_len = (op->flags & kFirst) && !(op->flags & kLast) ? 2 * kMtu + 8 : d.payload;
        if (op->flags & kReadReq) d.dma_len = 3000;
        if (op->flags & kResponse)
            d.psn = (op->flags & kAtomicAck) ? 3 : (op->flags & kReadResp) ? 1 : 0;
        write_file("device", name, device_input(kFixAll, {d}));
    }

    auto seq = [](uint8_t first, uint8_t middle, uint8_t last, uint32_t qp, bool reth) {
        std::vector<Spec> v;
        Spec f{first, qp, 0, kMtu};
        if (reth) f.dma_len = 2 * kMtu + 8;
        Spec m{middle, qp, 1, kMtu};
        Spec l{last, qp, 2, 8};
        v = {f, m, l};
        return v;
    };
    write_file("device", "rc_send_seq",
               device_input(kFixAll, seq(kRcSendFirst, kRcSendMiddle, kRcSendLast, kRcQp, false)));
    write_file(
        "device", "rc_write_seq",
        device_input(kFixAll, seq(kRcWriteFirst, kRcWriteMiddle, kRcWriteLastImm, kRcQp, true)));
    write_file(
        "device", "uc_send_seq",
        device_input(kFixAll, seq(kUcSendFirst, kUcSendMiddle, kUcSendLastImm, kUcQp, false)));
    write_file(
        "device", "uc_write_seq",
        device_input(kFixAll, seq(kUcWriteFirst, kUcWriteMiddle, kUcWriteLast, kUcQp, true)));
    // The completer: ACK the SEND (PSN 0), answer the 2048-byte READ (PSNs 1-2), ACK the
    // FETCH_ADD (PSN 3).
    write_file("device", "rc_complete_all",
               device_input(kFixAll,
                            {Spec{kRcAck, kRcQp, 0}, Spec{kRcReadRespFirst, kRcQp, 1, kMtu},
                             Spec{kRcReadRespLast, kRcQp, 2, kMtu}, Spec{kRcAtomicAck, kRcQp, 3}}));
    // NAKs and RNR NAK for the SEND; an ACK of everything at once (coalesced).
    write_file("device", "rc_nak_seq",
               device_input(kFixAll, {Spec{kRcAck, kRcQp, 0, 0, 0, 0, 0,
                                           aeth::nak(aeth::kNakPsnSeqError)}}));
    write_file("device", "rc_nak_access",
               device_input(kFixAll, {Spec{kRcAck, kRcQp, 0, 0, 0, 0, 0,
                                           aeth::nak(aeth::kNakRemoteAccessError)}}));
    write_file("device", "rc_rnr_nak",
               device_input(kFixAll, {Spec{kRcAck, kRcQp, 0, 0, 0, 0, 0, aeth::rnr_nak(1)}}));
    write_file("device", "rc_ack_coalesced", device_input(kFixAll, {Spec{kRcAck, kRcQp, 3}}));
    // Responder: READ and atomics, then the same again (duplicates: replayed, not re-run).
    Spec rd{kRcReadReq, kRcQp, 0};
    rd.dma_len = 3000;
    Spec fa{kRcFetchAdd, kRcQp, 1};
    Spec cs{kRcCmpSwap, kRcQp, 2, 0, 8};
    write_file("device", "rc_read_atomic_dup", device_input(kFixAll, {rd, fa, cs, fa, cs}));
    // ATOMIC WRITE, then again (answered from the replay state, not written twice).
    Spec aw{kRcAtomicWrite, kRcQp, 0, 8, 0, 0, 8};
    write_file("device", "rc_atomic_write_dup", device_input(kFixAll, {aw, aw}));
    // A FLUSH (global visibility, 8 bytes), then again (answered from the replay state).
    Spec fl{kRcFlush, kRcQp, 0, 0, 0, 0, 8};
    write_file("device", "rc_flush_dup", device_input(kFixAll, {fl, fl}));
    // Out of sequence (PSN 5 when 0 is expected), then the expected one.
    write_file(
        "device", "rc_psn_gap",
        device_input(kFixAll, {Spec{kRcSendOnly, kRcQp, 5, 8}, Spec{kRcSendOnly, kRcQp, 0, 8}}));
    write_file("device", "to_init_qp", device_input(kFixAll, {Spec{kRcSendOnly, kInitQp, 0, 8}}));
    // No fix-ups: the raw packet (its dqpn and ICRC are for fuzz_decode, so it is dropped).
    write_file("device", "raw", device_input(0, {Spec{kRcSendOnly, 0x11, 0, 8}}));
    for (const auto& [name, bytes] : uroce::fuzz::control_seeds())
        write_file("control", name, bytes);
    std::printf("make_corpus: %d seeds in %s\n", g_files, g_out.c_str());
    return 0;
}
