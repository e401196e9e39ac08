// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// IB Communication Management MADs (IBTA vol. 1, chapter 12) as uroce's CM agent sends and
// receives them on QP1: 256-byte MADs, base version 1, management class 0x07, class version 2,
// method Send. Pure encode/decode, no state: the agent (cm_agent.h) holds the protocol.
//
// Field offsets are within the CM message, which follows the 24-byte MAD header. Sub-byte
// fields are packed from the most significant bit, as the spec draws them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "emu/cm/cm_addr.h"

namespace uroce::emu::cm {

constexpr size_t kMadLen = 256;
constexpr size_t kMadHdrLen = 24;
constexpr size_t kMsgLen = kMadLen - kMadHdrLen;  // 232
constexpr uint8_t kBaseVersion = 1;
constexpr uint8_t kMgmtClassCm = 0x07;
constexpr uint8_t kClassVersion = 2;
constexpr uint8_t kMethodSend = 0x03;
constexpr uint32_t kGsiQkey = 0x80010000;
constexpr uint32_t kGsiQpn = 1;

enum AttrId : uint16_t {
    kAttrClassPortInfo = 0x0001,
    kAttrReq = 0x0010,
    kAttrMra = 0x0011,
    kAttrRej = 0x0012,
    kAttrRep = 0x0013,
    kAttrRtu = 0x0014,
    kAttrDreq = 0x0015,
    kAttrDrep = 0x0016,
    kAttrSidrReq = 0x0017,
    kAttrSidrRep = 0x0018,
};

// REJ reasons used here (IBTA table 112).
enum RejReason : uint16_t {
    kRejTimeout = 1,
    kRejInvalidServiceId = 8,
    kRejConsumer = 28,
};
// REQ transport service types (2 bits; 3 = look at the extended transport type).
enum Transport : uint8_t { kTransportRc = 0, kTransportUc = 1, kTransportExtended = 3 };
constexpr uint8_t kExtTransportXrc = 1;

// "Message REJected" / "Message MRAed".
enum MsgKind : uint8_t { kMsgReq = 0, kMsgRep = 1, kMsgOther = 2 };

// SIDR_REP status.
enum SidrStatus : uint8_t { kSidrOk = 0, kSidrNoService = 1, kSidrReject = 2 };

// The RDMA CM IP header at the start of REQ / SIDR_REQ private data (36 bytes; the kernel's
// struct cma_hdr): CMA version 0, the IP version in the high nibble of byte 1, the source
// port, then the source and destination addresses in 16 bytes each (an IPv4 one in the
// last 4, the rest zero).
struct IpHdr {
    uint16_t src_port = 0;  // network order
    uint8_t version = 4;    // 4 or 6, from the addresses (put_ip_hdr)
    CmAddr src{}, dst{};    // IPv4 ones IPv4-mapped
};
constexpr size_t kIpHdrLen = 36;
void put_ip_hdr(const IpHdr& h, uint8_t* pd);  // the version: IPv4 if src is IPv4-mapped
bool get_ip_hdr(const uint8_t* pd, IpHdr* h);  // false: not an RDMA CM header of IPv4 or IPv6

struct Req {
    uint32_t local_comm_id = 0;
    uint64_t service_id = 0;
    uint64_t local_ca_guid = 0;
    uint32_t local_qkey = 0;
    uint32_t local_qpn = 0;
    uint8_t responder_resources = 0, initiator_depth = 0;
    uint8_t remote_cm_response_timeout = 0;
    uint8_t transport = 0;  // 0 RC, 1 UC, 3 extended (see ext_transport)
    bool flow_control = false;
    uint32_t starting_psn = 0;
    uint8_t local_cm_response_timeout = 0;
    uint8_t retry_count = 0, rnr_retry_count = 0;
    uint16_t pkey = 0xffff;
    uint8_t path_mtu = 3;
    uint8_t max_cm_retries = 0;
    bool srq = false;
    uint8_t ext_transport = 0;  // with transport 3: 1 = XRC (IBTA vol. 1 annex A14)
    uint16_t local_lid = 0xffff, remote_lid = 0xffff;
    uint8_t local_gid[16] = {}, remote_gid[16] = {};
    uint32_t flow_label = 0;
    uint8_t packet_rate = 0, traffic_class = 0, hop_limit = 0, sl = 0;
    uint8_t local_ack_timeout = 0;
    uint8_t private_data[92] = {};
};

struct Rep {
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint32_t local_qkey = 0, local_qpn = 0, starting_psn = 0;
    uint32_t local_eecn = 0;  // XRC: the TGT QP's number goes here, not in local_qpn
    uint8_t responder_resources = 0, initiator_depth = 0;
    uint8_t target_ack_delay = 0, failover_accepted = 0;
    bool flow_control = false;
    uint8_t rnr_retry_count = 0;
    bool srq = false;
    uint64_t local_ca_guid = 0;
    uint8_t private_data[196] = {};
};

struct Rej {
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint8_t msg_rejected = kMsgReq;
    uint8_t ari_len = 0;
    uint16_t reason = 0;
    uint8_t ari[72] = {};
    uint8_t private_data[148] = {};
};

struct Mra {
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint8_t msg_mraed = kMsgReq;
    uint8_t service_timeout = 0;
};

// RTU, DREP (and DREQ, which adds the remote QPN): two comm IDs and private data.
struct Short {
    uint32_t local_comm_id = 0, remote_comm_id = 0;
    uint32_t remote_qpn = 0;  // DREQ only
    uint8_t private_data[224] = {};
};

struct SidrReq {
    uint32_t request_id = 0;
    uint16_t pkey = 0xffff;
    uint64_t service_id = 0;
    uint8_t private_data[216] = {};
};

struct SidrRep {
    uint32_t request_id = 0;
    uint8_t status = 0;
    uint32_t qpn = 0;
    uint64_t service_id = 0;
    uint32_t qkey = 0;
    uint8_t private_data[136] = {};
};

// The MAD header fields this agent uses. attr_id 0 when the MAD is not a CM Send MAD.
struct MadHdr {
    uint16_t attr_id = 0;
    uint64_t tid = 0;
};
// Parses the header of a received MAD; false unless it is a base version 1, class 0x07,
// class version 2, method Send MAD.
bool parse_hdr(const uint8_t* mad, MadHdr* h);

void encode(const Req& m, uint64_t tid, uint8_t* mad);
void encode(const Rep& m, uint64_t tid, uint8_t* mad);
void encode(const Rej& m, uint64_t tid, uint8_t* mad);
void encode(const Mra& m, uint64_t tid, uint8_t* mad);
void encode_rtu(const Short& m, uint64_t tid, uint8_t* mad);
void encode_dreq(const Short& m, uint64_t tid, uint8_t* mad);
void encode_drep(const Short& m, uint64_t tid, uint8_t* mad);
void encode(const SidrReq& m, uint64_t tid, uint8_t* mad);
void encode(const SidrRep& m, uint64_t tid, uint8_t* mad);

void decode(const uint8_t* mad, Req* m);
void decode(const uint8_t* mad, Rep* m);
void decode(const uint8_t* mad, Rej* m);
void decode(const uint8_t* mad, Mra* m);
void decode_rtu(const uint8_t* mad, Short* m);
void decode_dreq(const uint8_t* mad, Short* m);
void decode_drep(const uint8_t* mad, Short* m);
void decode(const uint8_t* mad, SidrReq* m);
void decode(const uint8_t* mad, SidrRep* m);

// RDMA CM service IDs: port space in bits 31..16, port in 15..0 (RDMA_IB_IP_PS_*).
constexpr uint64_t service_id(uint32_t ps, uint16_t port_host) {
    return (uint64_t(ps & 0xffff) << 16) | port_host;
}
constexpr uint32_t service_ps(uint64_t sid) { return uint32_t(sid >> 16) & 0xffff; }
constexpr uint16_t service_port(uint64_t sid) { return uint16_t(sid & 0xffff); }
constexpr bool is_rdma_cm_service(uint64_t sid) { return (sid >> 32) == 0; }

// 4.096 us * 2^code, the encoding of CM response timeouts, MRA service timeouts and local
// ACK timeouts.
inline uint64_t timeout_ns(uint8_t code) { return 4096ull << (code > 31 ? 31 : code); }

}  // namespace uroce::emu::cm
