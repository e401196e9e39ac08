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
void put_bytes(uint8_t* mad, size_t off, const void* src, size_t n) {
    std::memcpy(mad + kMadHdrLen + off, src, n);
}
void get_bytes(const uint8_t* mad, size_t off, void* dst, size_t n) {
    std::memcpy(dst, mad + kMadHdrLen + off, n);
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

// Two comm IDs, then private data at `pd_off`.
void encode_short(uint16_t attr, const Short& m, uint64_t tid, uint8_t* mad, size_t pd_off,
                  size_t pd_len) {
    header(mad, attr, tid);
    put(mad, 0, 4, m.local_comm_id);
    put(mad, 4, 4, m.remote_comm_id);
    put_bytes(mad, pd_off, m.private_data, pd_len);
}
void decode_short(const uint8_t* mad, Short* m, size_t pd_off, size_t pd_len) {
    m->local_comm_id = uint32_t(get(mad, 0, 4));
    m->remote_comm_id = uint32_t(get(mad, 4, 4));
    std::memset(m->private_data, 0, sizeof m->private_data);
    get_bytes(mad, pd_off, m->private_data, pd_len);
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

void encode(const Req& m, uint64_t tid, uint8_t* mad) {
    header(mad, kAttrReq, tid);
    put(mad, 0, 4, m.local_comm_id);
    put(mad, 8, 8, m.service_id);
    put(mad, 16, 8, m.local_ca_guid);
    put(mad, 28, 4, m.local_qkey);
    put(mad, 32, 3, m.local_qpn);
    put(mad, 35, 1, m.responder_resources);
    put(mad, 39, 1, m.initiator_depth);
    put(mad, 43, 1,
        uint8_t((m.remote_cm_response_timeout & 31) << 3) | uint8_t((m.transport & 3) << 1) |
            (m.flow_control ? 1 : 0));
    put(mad, 44, 3, m.starting_psn);
    put(mad, 47, 1, uint8_t((m.local_cm_response_timeout & 31) << 3) | (m.retry_count & 7));
    put(mad, 48, 2, m.pkey);
    put(mad, 50, 1, uint8_t((m.path_mtu & 15) << 4) | (m.rnr_retry_count & 7));
    put(mad, 51, 1,
        uint8_t((m.max_cm_retries & 15) << 4) | (m.srq ? 0x08 : 0) | (m.ext_transport & 7));
    put(mad, 52, 2, m.local_lid);
    put(mad, 54, 2, m.remote_lid);
    put_bytes(mad, 56, m.local_gid, 16);
    put_bytes(mad, 72, m.remote_gid, 16);
    put(mad, 88, 4, (uint32_t(m.flow_label & 0xfffff) << 12) | (m.packet_rate & 63));
    put(mad, 92, 1, m.traffic_class);
    put(mad, 93, 1, m.hop_limit);
    put(mad, 94, 1, uint8_t((m.sl & 15) << 4));  // subnet local 0: the path uses a GRH
    put(mad, 95, 1, uint8_t((m.local_ack_timeout & 31) << 3));
    put_bytes(mad, 140, m.private_data, sizeof m.private_data);
}

void decode(const uint8_t* mad, Req* m) {
    m->local_comm_id = uint32_t(get(mad, 0, 4));
    m->service_id = get(mad, 8, 8);
    m->local_ca_guid = get(mad, 16, 8);
    m->local_qkey = uint32_t(get(mad, 28, 4));
    m->local_qpn = uint32_t(get(mad, 32, 3));
    m->responder_resources = uint8_t(get(mad, 35, 1));
    m->initiator_depth = uint8_t(get(mad, 39, 1));
    uint8_t b = uint8_t(get(mad, 43, 1));
    m->remote_cm_response_timeout = b >> 3;
    m->transport = (b >> 1) & 3;
    m->flow_control = b & 1;
    m->starting_psn = uint32_t(get(mad, 44, 3));
    b = uint8_t(get(mad, 47, 1));
    m->local_cm_response_timeout = b >> 3;
    m->retry_count = b & 7;
    m->pkey = uint16_t(get(mad, 48, 2));
    b = uint8_t(get(mad, 50, 1));
    m->path_mtu = b >> 4;
    m->rnr_retry_count = b & 7;
    b = uint8_t(get(mad, 51, 1));
    m->max_cm_retries = b >> 4;
    m->srq = (b & 0x08) != 0;
    m->ext_transport = b & 7;
    m->local_lid = uint16_t(get(mad, 52, 2));
    m->remote_lid = uint16_t(get(mad, 54, 2));
    get_bytes(mad, 56, m->local_gid, 16);
    get_bytes(mad, 72, m->remote_gid, 16);
    uint32_t fl = uint32_t(get(mad, 88, 4));
    m->flow_label = fl >> 12;
    m->packet_rate = fl & 63;
    m->traffic_class = uint8_t(get(mad, 92, 1));
    m->hop_limit = uint8_t(get(mad, 93, 1));
    m->sl = uint8_t(get(mad, 94, 1)) >> 4;
    m->local_ack_timeout = uint8_t(get(mad, 95, 1)) >> 3;
    get_bytes(mad, 140, m->private_data, sizeof m->private_data);
}

void encode(const Rep& m, uint64_t tid, uint8_t* mad) {
    header(mad, kAttrRep, tid);
    put(mad, 0, 4, m.local_comm_id);
    put(mad, 4, 4, m.remote_comm_id);
    put(mad, 8, 4, m.local_qkey);
    put(mad, 12, 3, m.local_qpn);
    put(mad, 16, 3, m.local_eecn);
    put(mad, 20, 3, m.starting_psn);
    put(mad, 24, 1, m.responder_resources);
    put(mad, 25, 1, m.initiator_depth);
    put(mad, 26, 1,
        uint8_t((m.target_ack_delay & 31) << 3) | uint8_t((m.failover_accepted & 3) << 1) |
            (m.flow_control ? 1 : 0));
    put(mad, 27, 1, uint8_t((m.rnr_retry_count & 7) << 5) | (m.srq ? 0x10 : 0));
    put(mad, 28, 8, m.local_ca_guid);
    put_bytes(mad, 36, m.private_data, sizeof m.private_data);
}

void decode(const uint8_t* mad, Rep* m) {
    m->local_comm_id = uint32_t(get(mad, 0, 4));
    m->remote_comm_id = uint32_t(get(mad, 4, 4));
    m->local_qkey = uint32_t(get(mad, 8, 4));
    m->local_qpn = uint32_t(get(mad, 12, 3));
    m->local_eecn = uint32_t(get(mad, 16, 3));
    m->starting_psn = uint32_t(get(mad, 20, 3));
    m->responder_resources = uint8_t(get(mad, 24, 1));
    m->initiator_depth = uint8_t(get(mad, 25, 1));
    uint8_t b = uint8_t(get(mad, 26, 1));
    m->target_ack_delay = b >> 3;
    m->failover_accepted = (b >> 1) & 3;
    m->flow_control = b & 1;
    b = uint8_t(get(mad, 27, 1));
    m->rnr_retry_count = b >> 5;
    m->srq = (b & 0x10) != 0;
    m->local_ca_guid = get(mad, 28, 8);
    get_bytes(mad, 36, m->private_data, sizeof m->private_data);
}

void encode(const Rej& m, uint64_t tid, uint8_t* mad) {
    header(mad, kAttrRej, tid);
    put(mad, 0, 4, m.local_comm_id);
    put(mad, 4, 4, m.remote_comm_id);
    put(mad, 8, 1, uint8_t((m.msg_rejected & 3) << 6));
    put(mad, 9, 1, uint8_t((m.ari_len & 127) << 1));
    put(mad, 10, 2, m.reason);
    put_bytes(mad, 12, m.ari, sizeof m.ari);
    put_bytes(mad, 84, m.private_data, sizeof m.private_data);
}

void decode(const uint8_t* mad, Rej* m) {
    m->local_comm_id = uint32_t(get(mad, 0, 4));
    m->remote_comm_id = uint32_t(get(mad, 4, 4));
    m->msg_rejected = uint8_t(get(mad, 8, 1)) >> 6;
    m->ari_len = uint8_t(get(mad, 9, 1)) >> 1;
    m->reason = uint16_t(get(mad, 10, 2));
    get_bytes(mad, 12, m->ari, sizeof m->ari);
    get_bytes(mad, 84, m->private_data, sizeof m->private_data);
}

void encode(const Mra& m, uint64_t tid, uint8_t* mad) {
    header(mad, kAttrMra, tid);
    put(mad, 0, 4, m.local_comm_id);
    put(mad, 4, 4, m.remote_comm_id);
    put(mad, 8, 1, uint8_t((m.msg_mraed & 3) << 6));
    put(mad, 9, 1, uint8_t((m.service_timeout & 31) << 3));
}

void decode(const uint8_t* mad, Mra* m) {
    m->local_comm_id = uint32_t(get(mad, 0, 4));
    m->remote_comm_id = uint32_t(get(mad, 4, 4));
    m->msg_mraed = uint8_t(get(mad, 8, 1)) >> 6;
    m->service_timeout = uint8_t(get(mad, 9, 1)) >> 3;
}

void encode_rtu(const Short& m, uint64_t tid, uint8_t* mad) {
    encode_short(kAttrRtu, m, tid, mad, 8, 224);
}
void encode_drep(const Short& m, uint64_t tid, uint8_t* mad) {
    encode_short(kAttrDrep, m, tid, mad, 8, 224);
}
void encode_dreq(const Short& m, uint64_t tid, uint8_t* mad) {
    encode_short(kAttrDreq, m, tid, mad, 12, 220);
    put(mad, 8, 3, m.remote_qpn);
}
void decode_rtu(const uint8_t* mad, Short* m) { decode_short(mad, m, 8, 224); }
void decode_drep(const uint8_t* mad, Short* m) { decode_short(mad, m, 8, 224); }
void decode_dreq(const uint8_t* mad, Short* m) {
    decode_short(mad, m, 12, 220);
    m->remote_qpn = uint32_t(get(mad, 8, 3));
}

void encode(const SidrReq& m, uint64_t tid, uint8_t* mad) {
    header(mad, kAttrSidrReq, tid);
    put(mad, 0, 4, m.request_id);
    put(mad, 4, 2, m.pkey);
    put(mad, 8, 8, m.service_id);
    put_bytes(mad, 16, m.private_data, sizeof m.private_data);
}

void decode(const uint8_t* mad, SidrReq* m) {
    m->request_id = uint32_t(get(mad, 0, 4));
    m->pkey = uint16_t(get(mad, 4, 2));
    m->service_id = get(mad, 8, 8);
    get_bytes(mad, 16, m->private_data, sizeof m->private_data);
}

void encode(const SidrRep& m, uint64_t tid, uint8_t* mad) {
    header(mad, kAttrSidrRep, tid);
    put(mad, 0, 4, m.request_id);
    put(mad, 4, 1, m.status);
    put(mad, 8, 3, m.qpn);
    put(mad, 12, 8, m.service_id);
    put(mad, 20, 4, m.qkey);
    put_bytes(mad, 96, m.private_data, sizeof m.private_data);
}

void decode(const uint8_t* mad, SidrRep* m) {
    m->request_id = uint32_t(get(mad, 0, 4));
    m->status = uint8_t(get(mad, 4, 1));
    m->qpn = uint32_t(get(mad, 8, 3));
    m->service_id = get(mad, 12, 8);
    m->qkey = uint32_t(get(mad, 20, 4));
    get_bytes(mad, 96, m->private_data, sizeof m->private_data);
}

}  // namespace uroce::emu::cm
