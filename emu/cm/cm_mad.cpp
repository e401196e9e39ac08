// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/cm/cm_mad.h"

namespace uroce::emu::cm {

namespace {

// Big-endian fields of `n` bytes at `off` of the CM message (after the MAD header).
void put(uint8_t* mad, size_t off, int n, uint64_t v) {
    uint8_t* p = mad + kMadHdrLen + off;
    for (int i = n - 1; i >= 0; --i) {
        p[i] = uint8_t(v);
        v >>= 8;
    }
}
uint64_t get(const uint8_t* mad, size_t off, int n) {
    const uint8_t* p = mad + kMadHdrLen + off;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
    return v;
}

void header(uint8_t* mad, uint16_t attr, uint64_t tid) {
    std::memset(mad, 0, kMadLen);
    mad[0] = kBaseVersion;
    mad[1] = kMgmtClassCm;
    mad[2] = kClassVersion;
    mad[3] = kMethodSend;
    for (int i = 0; i < 8; ++i) mad[8 + i] = uint8_t(tid >> (56 - 8 * i));
    mad[16] = uint8_t(attr >> 8);
    mad[17] = uint8_t(attr);
}

// Each message's layout is written once, as a function over a Writer (encode) or a Reader
// (decode), so that the two directions cannot disagree. field: `n` bytes at `off`; bits:
// `width` bits from bit `shift` of the `n` bytes at `off` (sub-byte fields); bytes: an array.
class Writer {
public:
    // Starts the MAD: its header, the message zero.
    Writer(uint8_t* mad, uint16_t attr, uint64_t tid) : mad_(mad) { header(mad, attr, tid); }
    template <class T>
    void field(size_t off, int n, const T& v) {
        put(mad_, off, n, uint64_t(v));
    }
    template <class T>
    void bits(size_t off, int n, int shift, int width, const T& v) {
        const uint64_t mask = (uint64_t(1) << width) - 1;
        put(mad_, off, n, get(mad_, off, n) | ((uint64_t(v) & mask) << shift));
    }
    void bytes(size_t off, const void* src, size_t len) {
        std::memcpy(mad_ + kMadHdrLen + off, src, len);
    }

private:
    uint8_t* mad_;
};

class Reader {
public:
    explicit Reader(const uint8_t* mad) : mad_(mad) {}
    template <class T>
    void field(size_t off, int n, T& v) {
        v = T(get(mad_, off, n));
    }
    template <class T>
    void bits(size_t off, int n, int shift, int width, T& v) {
        const uint64_t mask = (uint64_t(1) << width) - 1;
        v = T((get(mad_, off, n) >> shift) & mask);
    }
    void bytes(size_t off, void* dst, size_t len) {
        std::memcpy(dst, mad_ + kMadHdrLen + off, len);
    }

private:
    const uint8_t* mad_;
};

// The layouts (IBTA vol. 1, chapter 12). M: the message, const for a Writer.
template <class Io, class M>
void req_fields(Io&& io, M& m) {
    io.field(0, 4, m.local_comm_id);
    io.field(8, 8, m.service_id);
    io.field(16, 8, m.local_ca_guid);
    io.field(28, 4, m.local_qkey);
    io.field(32, 3, m.local_qpn);
    io.field(35, 1, m.responder_resources);
    io.field(39, 1, m.initiator_depth);
    io.bits(43, 1, 3, 5, m.remote_cm_response_timeout);
    io.bits(43, 1, 1, 2, m.transport);
    io.bits(43, 1, 0, 1, m.flow_control);
    io.field(44, 3, m.starting_psn);
    io.bits(47, 1, 3, 5, m.local_cm_response_timeout);
    io.bits(47, 1, 0, 3, m.retry_count);
    io.field(48, 2, m.pkey);
    io.bits(50, 1, 4, 4, m.path_mtu);
    io.bits(50, 1, 0, 3, m.rnr_retry_count);
    io.bits(51, 1, 4, 4, m.max_cm_retries);
    io.bits(51, 1, 3, 1, m.srq);
    io.bits(51, 1, 0, 3, m.ext_transport);
    io.field(52, 2, m.local_lid);
    io.field(54, 2, m.remote_lid);
    io.bytes(56, m.local_gid, 16);
    io.bytes(72, m.remote_gid, 16);
    io.bits(88, 4, 12, 20, m.flow_label);
    io.bits(88, 4, 0, 6, m.packet_rate);
    io.field(92, 1, m.traffic_class);
    io.field(93, 1, m.hop_limit);
    io.bits(94, 1, 4, 4, m.sl);  // subnet local 0: the path uses a GRH
    io.bits(95, 1, 3, 5, m.local_ack_timeout);
    io.bytes(140, m.private_data, sizeof m.private_data);
}

template <class Io, class M>
void rep_fields(Io&& io, M& m) {
    io.field(0, 4, m.local_comm_id);
    io.field(4, 4, m.remote_comm_id);
    io.field(8, 4, m.local_qkey);
    io.field(12, 3, m.local_qpn);
    io.field(16, 3, m.local_eecn);
    io.field(20, 3, m.starting_psn);
    io.field(24, 1, m.responder_resources);
    io.field(25, 1, m.initiator_depth);
    io.bits(26, 1, 3, 5, m.target_ack_delay);
    io.bits(26, 1, 1, 2, m.failover_accepted);
    io.bits(26, 1, 0, 1, m.flow_control);
    io.bits(27, 1, 5, 3, m.rnr_retry_count);
    io.bits(27, 1, 4, 1, m.srq);
    io.field(28, 8, m.local_ca_guid);
    io.bytes(36, m.private_data, sizeof m.private_data);
}

template <class Io, class M>
void rej_fields(Io&& io, M& m) {
    io.field(0, 4, m.local_comm_id);
    io.field(4, 4, m.remote_comm_id);
    io.bits(8, 1, 6, 2, m.msg_rejected);
    io.bits(9, 1, 1, 7, m.ari_len);
    io.field(10, 2, m.reason);
    io.bytes(12, m.ari, sizeof m.ari);
    io.bytes(84, m.private_data, sizeof m.private_data);
}

template <class Io, class M>
void mra_fields(Io&& io, M& m) {
    io.field(0, 4, m.local_comm_id);
    io.field(4, 4, m.remote_comm_id);
    io.bits(8, 1, 6, 2, m.msg_mraed);
    io.bits(9, 1, 3, 5, m.service_timeout);
}

// RTU, DREP (private data at 8, 224 bytes) and DREQ (the remote QPN at 8, then 220 bytes).
template <class Io, class M>
void short_fields(Io&& io, M& m, bool dreq) {
    io.field(0, 4, m.local_comm_id);
    io.field(4, 4, m.remote_comm_id);
    if (dreq) io.field(8, 3, m.remote_qpn);
    io.bytes(dreq ? 12 : 8, m.private_data, dreq ? 220 : 224);
}

template <class Io, class M>
void sidr_req_fields(Io&& io, M& m) {
    io.field(0, 4, m.request_id);
    io.field(4, 2, m.pkey);
    io.field(8, 8, m.service_id);
    io.bytes(16, m.private_data, sizeof m.private_data);
}

template <class Io, class M>
void sidr_rep_fields(Io&& io, M& m) {
    io.field(0, 4, m.request_id);
    io.field(4, 1, m.status);
    io.field(8, 3, m.qpn);
    io.field(12, 8, m.service_id);
    io.field(20, 4, m.qkey);
    io.bytes(96, m.private_data, sizeof m.private_data);
}

void decode_short(const uint8_t* mad, Short* m, bool dreq) {
    std::memset(m->private_data, 0, sizeof m->private_data);  // a DREQ's is 4 bytes shorter
    short_fields(Reader(mad), *m, dreq);
}

}  // namespace

void put_ip_hdr(const IpHdr& h, uint8_t* pd) {
    std::memset(pd, 0, kIpHdrLen);
    bool v4 = cm_addr_v4(h.src);
    pd[0] = 0;                           // cma_version
    pd[1] = uint8_t((v4 ? 4 : 6) << 4);  // IP version in the high nibble
    std::memcpy(pd + 2, &h.src_port, 2);
    if (v4) {
        std::memcpy(pd + 4 + 12, h.src.data() + 12, 4);
        std::memcpy(pd + 20 + 12, h.dst.data() + 12, 4);
    } else {
        std::memcpy(pd + 4, h.src.data(), 16);
        std::memcpy(pd + 20, h.dst.data(), 16);
    }
}

bool get_ip_hdr(const uint8_t* pd, IpHdr* h) {
    uint8_t version = pd[1] >> 4;
    if (pd[0] != 0 || (version != 4 && version != 6)) return false;
    h->version = version;
    std::memcpy(&h->src_port, pd + 2, 2);
    if (version == 4) {
        static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        std::memcpy(h->src.data(), kMapped, 12);
        std::memcpy(h->dst.data(), kMapped, 12);
        std::memcpy(h->src.data() + 12, pd + 4 + 12, 4);
        std::memcpy(h->dst.data() + 12, pd + 20 + 12, 4);
    } else {
        std::memcpy(h->src.data(), pd + 4, 16);
        std::memcpy(h->dst.data(), pd + 20, 16);
    }
    return true;
}

bool parse_hdr(const uint8_t* mad, MadHdr* h) {
    if (mad[0] != kBaseVersion || mad[1] != kMgmtClassCm || mad[2] != kClassVersion ||
        mad[3] != kMethodSend)
        return false;
    h->tid = 0;
    for (int i = 0; i < 8; ++i) h->tid = (h->tid << 8) | mad[8 + i];
    h->attr_id = uint16_t((mad[16] << 8) | mad[17]);
    return true;
}

void encode(const Req& m, uint64_t tid, uint8_t* mad) { req_fields(Writer(mad, kAttrReq, tid), m); }
void decode(const uint8_t* mad, Req* m) { req_fields(Reader(mad), *m); }

void encode(const Rep& m, uint64_t tid, uint8_t* mad) { rep_fields(Writer(mad, kAttrRep, tid), m); }
void decode(const uint8_t* mad, Rep* m) { rep_fields(Reader(mad), *m); }

void encode(const Rej& m, uint64_t tid, uint8_t* mad) { rej_fields(Writer(mad, kAttrRej, tid), m); }
void decode(const uint8_t* mad, Rej* m) { rej_fields(Reader(mad), *m); }

void encode(const Mra& m, uint64_t tid, uint8_t* mad) { mra_fields(Writer(mad, kAttrMra, tid), m); }
void decode(const uint8_t* mad, Mra* m) { mra_fields(Reader(mad), *m); }

void encode_rtu(const Short& m, uint64_t tid, uint8_t* mad) {
    short_fields(Writer(mad, kAttrRtu, tid), m, false);
}
void encode_drep(const Short& m, uint64_t tid, uint8_t* mad) {
    short_fields(Writer(mad, kAttrDrep, tid), m, false);
}
void encode_dreq(const Short& m, uint64_t tid, uint8_t* mad) {
    short_fields(Writer(mad, kAttrDreq, tid), m, true);
}
void decode_rtu(const uint8_t* mad, Short* m) { decode_short(mad, m, false); }
void decode_drep(const uint8_t* mad, Short* m) { decode_short(mad, m, false); }
void decode_dreq(const uint8_t* mad, Short* m) { decode_short(mad, m, true); }

void encode(const SidrReq& m, uint64_t tid, uint8_t* mad) {
    sidr_req_fields(Writer(mad, kAttrSidrReq, tid), m);
}
void decode(const uint8_t* mad, SidrReq* m) { sidr_req_fields(Reader(mad), *m); }

void encode(const SidrRep& m, uint64_t tid, uint8_t* mad) {
    sidr_rep_fields(Writer(mad, kAttrSidrRep, tid), m);
}
void decode(const uint8_t* mad, SidrRep* m) { sidr_rep_fields(Reader(mad), *m); }

}  // namespace uroce::emu::cm
