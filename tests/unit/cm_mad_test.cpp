// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The IB CM MAD codec (emu/cm/cm_mad.*): field placement against IBTA vol. 1 chapter 12 (byte
// offsets within the 256-byte MAD, sub-byte fields packed from the most significant bit),
// and encode/decode round trips.
#include "emu/cm/cm_mad.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <cstring>

using namespace uroce::emu::cm;

namespace {

uint32_t be(const uint8_t* p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
    return v;
}

}  // namespace

TEST(CmMad, HeaderIsCmSend) {
    Short m;
    m.local_comm_id = 0x11223344;
    m.remote_comm_id = 0x55667788;
    uint8_t mad[kMadLen];
    encode_rtu(m, 0x0102030405060708ull, mad);
    EXPECT_EQ(mad[0], 1);     // base version
    EXPECT_EQ(mad[1], 0x07);  // CM class
    EXPECT_EQ(mad[2], 2);     // class version
    EXPECT_EQ(mad[3], 0x03);  // Send
    EXPECT_EQ(be(mad + 8, 4), 0x01020304u);
    EXPECT_EQ(be(mad + 12, 4), 0x05060708u);
    EXPECT_EQ(be(mad + 16, 2), kAttrRtu);
    MadHdr h;
    ASSERT_TRUE(parse_hdr(mad, &h));
    EXPECT_EQ(h.attr_id, kAttrRtu);
    EXPECT_EQ(h.tid, 0x0102030405060708ull);
    mad[1] = 0x03;  // another class
    EXPECT_FALSE(parse_hdr(mad, &h));
}

TEST(CmMad, ReqFieldsWhereTheSpecPutsThem) {
    Req m;
    m.local_comm_id = 0xa1b2c3d4;
    m.service_id = service_id(RDMA_PS_TCP, 7174);
    m.local_ca_guid = 0x0200'7fff'fe00'0001ull;
    m.local_qpn = 0x123456;
    m.responder_resources = 3;
    m.initiator_depth = 4;
    m.remote_cm_response_timeout = 17;
    m.transport = 1;
    m.flow_control = true;
    m.starting_psn = 0xabcdef;
    m.local_cm_response_timeout = 18;
    m.retry_count = 6;
    m.path_mtu = 5;
    m.rnr_retry_count = 7;
    m.max_cm_retries = 4;
    m.srq = true;
    m.local_gid[15] = 1;
    m.remote_gid[15] = 2;
    m.hop_limit = 64;
    m.sl = 3;
    m.local_ack_timeout = 14;
    m.private_data[0] = 0xee;
    m.private_data[91] = 0xef;
    uint8_t mad[kMadLen];
    encode(m, 7, mad);
    const uint8_t* d = mad + kMadHdrLen;
    EXPECT_EQ(be(d + 0, 4), 0xa1b2c3d4u);
    EXPECT_EQ(be(d + 8, 4), 0u);
    EXPECT_EQ(be(d + 12, 4), 0x01061c06u);  // RDMA_IB_IP_PS_TCP | 7174
    EXPECT_EQ(be(d + 32, 3), 0x123456u);
    EXPECT_EQ(d[35], 3);
    EXPECT_EQ(d[39], 4);
    EXPECT_EQ(d[43], (17 << 3) | (1 << 1) | 1);
    EXPECT_EQ(be(d + 44, 3), 0xabcdefu);
    EXPECT_EQ(d[47], (18 << 3) | 6);
    EXPECT_EQ(be(d + 48, 2), 0xffffu);
    EXPECT_EQ(d[50], (5 << 4) | 7);
    EXPECT_EQ(d[51], (4 << 4) | 0x08);
    EXPECT_EQ(be(d + 52, 2), 0xffffu);  // permissive LIDs: RoCE routes by GID
    EXPECT_EQ(d[56 + 15], 1);
    EXPECT_EQ(d[72 + 15], 2);
    EXPECT_EQ(d[93], 64);
    EXPECT_EQ(d[94], 3 << 4);
    EXPECT_EQ(d[95], 14 << 3);
    EXPECT_EQ(d[140], 0xee);
    EXPECT_EQ(d[231], 0xef);

    Req r;
    decode(mad, &r);
    EXPECT_EQ(r.local_comm_id, m.local_comm_id);
    EXPECT_EQ(r.service_id, m.service_id);
    EXPECT_EQ(r.local_ca_guid, m.local_ca_guid);
    EXPECT_EQ(r.local_qpn, m.local_qpn);
    EXPECT_EQ(r.responder_resources, 3);
    EXPECT_EQ(r.initiator_depth, 4);
    EXPECT_EQ(r.transport, 1);
    EXPECT_TRUE(r.flow_control);
    EXPECT_EQ(r.starting_psn, m.starting_psn);
    EXPECT_EQ(r.retry_count, 6);
    EXPECT_EQ(r.rnr_retry_count, 7);
    EXPECT_EQ(r.path_mtu, 5);
    EXPECT_TRUE(r.srq);
    EXPECT_EQ(r.local_ack_timeout, 14);
    EXPECT_EQ(service_ps(r.service_id), uint32_t(RDMA_PS_TCP));
    EXPECT_EQ(service_port(r.service_id), 7174);
    EXPECT_EQ(r.private_data[91], 0xef);
}

TEST(CmMad, RepRejMraDreqSidrRoundTrip) {
    uint8_t mad[kMadLen];
    Rep rep;
    rep.local_comm_id = 1;
    rep.remote_comm_id = 2;
    rep.local_qpn = 0x17;
    rep.starting_psn = 0x654321;
    rep.responder_resources = 1;
    rep.initiator_depth = 2;
    rep.target_ack_delay = 15;
    rep.rnr_retry_count = 5;
    rep.srq = true;
    rep.private_data[195] = 9;
    encode(rep, 1, mad);
    const uint8_t* d = mad + kMadHdrLen;
    EXPECT_EQ(be(d + 12, 3), 0x17u);
    EXPECT_EQ(be(d + 20, 3), 0x654321u);
    EXPECT_EQ(d[26], 15 << 3);
    EXPECT_EQ(d[27], (5 << 5) | 0x10);
    EXPECT_EQ(d[36 + 195], 9);
    Rep rep2;
    decode(mad, &rep2);
    EXPECT_EQ(rep2.remote_comm_id, 2u);
    EXPECT_EQ(rep2.starting_psn, 0x654321u);
    EXPECT_EQ(rep2.rnr_retry_count, 5);
    EXPECT_TRUE(rep2.srq);

    Rej rej;
    rej.remote_comm_id = 0x99;
    rej.msg_rejected = kMsgReq;
    rej.reason = kRejInvalidServiceId;
    rej.private_data[147] = 4;
    encode(rej, 1, mad);
    EXPECT_EQ(be(d + 10, 2), 8u);
    EXPECT_EQ(d[84 + 147], 4);
    Rej rej2;
    decode(mad, &rej2);
    EXPECT_EQ(rej2.reason, kRejInvalidServiceId);
    EXPECT_EQ(rej2.remote_comm_id, 0x99u);

    Mra mra;
    mra.msg_mraed = kMsgRep;
    mra.service_timeout = 20;
    encode(mra, 1, mad);
    EXPECT_EQ(d[8], kMsgRep << 6);
    EXPECT_EQ(d[9], 20 << 3);

    Short dreq;
    dreq.local_comm_id = 5;
    dreq.remote_comm_id = 6;
    dreq.remote_qpn = 0x42;
    encode_dreq(dreq, 1, mad);
    EXPECT_EQ(be(mad + 16, 2), kAttrDreq);
    EXPECT_EQ(be(d + 8, 3), 0x42u);
    Short dreq2;
    decode_dreq(mad, &dreq2);
    EXPECT_EQ(dreq2.remote_qpn, 0x42u);
    EXPECT_EQ(dreq2.local_comm_id, 5u);

    SidrRep sr;
    sr.request_id = 77;
    sr.status = kSidrOk;
    sr.qpn = 0x33;
    sr.qkey = RDMA_UDP_QKEY;
    sr.service_id = service_id(RDMA_PS_UDP, 7174);
    encode(sr, 1, mad);
    EXPECT_EQ(be(d + 8, 3), 0x33u);
    EXPECT_EQ(be(d + 20, 4), uint32_t(RDMA_UDP_QKEY));
    SidrRep sr2;
    decode(mad, &sr2);
    EXPECT_EQ(sr2.request_id, 77u);
    EXPECT_EQ(sr2.qkey, uint32_t(RDMA_UDP_QKEY));
}

// XRC (IBTA vol. 1 annex A14, as the kernel's cm_req_set_qp_type/cm_format_rep): the REQ
// says transport service type 3 with extended transport type 1, and carries no responder
// resources, retry counts or SRQ bit; the REP names the TGT QP in the local EE context
// number field, with the SRQ bit set, and leaves the local QPN at 0.
TEST(CmMad, XrcReqAndRep) {
    uint8_t mad[kMadLen];
    const uint8_t* d = mad + kMadHdrLen;
    Req m;
    m.local_qpn = 0x000abc;
    m.remote_cm_response_timeout = 17;
    m.transport = kTransportExtended;
    m.ext_transport = kExtTransportXrc;
    m.max_cm_retries = 4;
    encode(m, 1, mad);
    EXPECT_EQ(d[43], (17 << 3) | (3 << 1));
    EXPECT_EQ(d[51], (4 << 4) | 1);
    EXPECT_EQ(d[35], 0);
    Req r;
    decode(mad, &r);
    EXPECT_EQ(r.transport, kTransportExtended);
    EXPECT_EQ(r.ext_transport, kExtTransportXrc);
    EXPECT_FALSE(r.srq);
    EXPECT_EQ(r.max_cm_retries, 4);

    Rep rep;
    rep.local_eecn = 0x00f00d;
    rep.srq = true;
    rep.rnr_retry_count = 7;
    encode(rep, 1, mad);
    EXPECT_EQ(be(d + 12, 3), 0u);
    EXPECT_EQ(be(d + 16, 3), 0x00f00du);
    EXPECT_EQ(d[27], (7 << 5) | 0x10);
    Rep rep2;
    decode(mad, &rep2);
    EXPECT_EQ(rep2.local_eecn, 0x00f00du);
    EXPECT_EQ(rep2.local_qpn, 0u);
    EXPECT_TRUE(rep2.srq);
}

namespace {

uroce::emu::CmAddr v4(uint32_t ip_host) {
    uroce::emu::CmAddr a{};
    a[10] = a[11] = 0xff;
    uint32_t be_ip = htonl(ip_host);
    std::memcpy(a.data() + 12, &be_ip, 4);
    return a;
}

uroce::emu::CmAddr v6(const char* s) {
    uroce::emu::CmAddr a{};
    EXPECT_EQ(inet_pton(AF_INET6, s, a.data()), 1) << s;
    return a;
}

}  // namespace

// The kernel's struct cma_hdr: version 0, IP version 4 in the high nibble, the port, each
// IPv4 address in the last 4 bytes of its 16 with the 12 before them zero.
TEST(CmMad, IpHeader) {
    uint8_t pd[kIpHdrLen + 4];
    std::memset(pd, 0xee, sizeof pd);
    IpHdr h;
    h.src_port = htons(4000);
    h.src = v4(0x7f000002);
    h.dst = v4(0x7f000003);
    put_ip_hdr(h, pd);
    EXPECT_EQ(pd[0], 0);
    EXPECT_EQ(pd[1], 0x40);
    EXPECT_EQ(be(pd + 2, 2), 4000u);
    for (int i = 4; i < 16; ++i) EXPECT_EQ(pd[i], 0) << i;
    EXPECT_EQ(be(pd + 16, 4), 0x7f000002u);
    for (int i = 20; i < 32; ++i) EXPECT_EQ(pd[i], 0) << i;
    EXPECT_EQ(be(pd + 32, 4), 0x7f000003u);
    EXPECT_EQ(pd[kIpHdrLen], 0xee);  // the application's private data is not touched
    IpHdr g;
    ASSERT_TRUE(get_ip_hdr(pd, &g));
    EXPECT_EQ(g.version, 4);
    EXPECT_EQ(g.src, h.src);
    EXPECT_EQ(g.dst, h.dst);
    EXPECT_EQ(g.src_port, h.src_port);
    pd[1] = 0x50;  // neither IPv4 nor IPv6
    EXPECT_FALSE(get_ip_hdr(pd, &g));
    pd[1] = 0x40;
    pd[0] = 1;  // a CMA version we do not know
    EXPECT_FALSE(get_ip_hdr(pd, &g));
}

// IPv6: IP version 6 and the two 16-byte addresses as they are (cma_format_hdr's ip6).
TEST(CmMad, IpHeaderIpv6) {
    uint8_t pd[kIpHdrLen];
    IpHdr h;
    h.src_port = htons(7174);
    h.src = v6("fd77::2");
    h.dst = v6("fe80::1:2:3:4");
    put_ip_hdr(h, pd);
    EXPECT_EQ(pd[0], 0);
    EXPECT_EQ(pd[1], 0x60);
    EXPECT_EQ(be(pd + 2, 2), 7174u);
    EXPECT_EQ(std::memcmp(pd + 4, h.src.data(), 16), 0);
    EXPECT_EQ(std::memcmp(pd + 20, h.dst.data(), 16), 0);
    EXPECT_EQ(be(pd + 4, 2), 0xfd77u);
    EXPECT_EQ(be(pd + 34, 2), 4u);
    IpHdr g;
    ASSERT_TRUE(get_ip_hdr(pd, &g));
    EXPECT_EQ(g.version, 6);
    EXPECT_EQ(g.src, h.src);
    EXPECT_EQ(g.dst, h.dst);
    EXPECT_EQ(g.src_port, h.src_port);
}

// Which listener takes a request, as the kernel's cma_match_private_data.
TEST(CmAddr, ListenerTakes) {
    using uroce::emu::CmAddr;
    using uroce::emu::listener_takes;
    const CmAddr any{}, a4 = v4(0x0a4d0001), b4 = v4(0x0a4d0002), a6 = v6("fd77::1"),
                        b6 = v6("fd77::2");
    // An IPv6 wildcard with IPV6_V6ONLY off takes both versions; with it, IPv6 only.
    EXPECT_TRUE(listener_takes(any, AF_INET6, false, 6, a6));
    EXPECT_TRUE(listener_takes(any, AF_INET6, false, 4, a4));
    EXPECT_TRUE(listener_takes(any, AF_INET6, true, 6, a6));
    EXPECT_FALSE(listener_takes(any, AF_INET6, true, 4, a4));
    // An IPv4 wildcard is always afonly.
    EXPECT_TRUE(listener_takes(any, AF_INET, true, 4, a4));
    EXPECT_FALSE(listener_takes(any, AF_INET, true, 6, a6));
    // A bound address: its version and itself.
    EXPECT_TRUE(listener_takes(a6, AF_INET6, false, 6, a6));
    EXPECT_FALSE(listener_takes(a6, AF_INET6, false, 6, b6));
    EXPECT_FALSE(listener_takes(a6, AF_INET6, false, 4, a4));
    EXPECT_TRUE(listener_takes(a4, AF_INET, true, 4, a4));
    EXPECT_FALSE(listener_takes(a4, AF_INET, true, 4, b4));
    EXPECT_FALSE(listener_takes(a4, AF_INET, true, 6, a6));
    EXPECT_FALSE(listener_takes(any, AF_INET6, false, 5, a6));
}

TEST(CmAddr, Printed) {
    using uroce::emu::cm_addr_port;
    EXPECT_EQ(cm_addr_port(v4(0x0a4d0001), htons(7174)), "10.77.0.1:7174");
    EXPECT_EQ(cm_addr_port(v6("fd77::1"), htons(7174)), "[fd77::1]:7174");
    EXPECT_EQ(cm_addr_port({}, htons(1), false), "0.0.0.0:1");
    EXPECT_EQ(cm_addr_port({}, htons(1), true), "[::]:1");
    // A link-local address with its interface (1: lo); the scope means nothing to others.
    EXPECT_EQ(cm_addr_port(v6("fe80::1"), htons(1), false, 1), "[fe80::1%lo]:1");
    EXPECT_EQ(cm_addr_port(v6("fd77::1"), htons(1), false, 1), "[fd77::1]:1");
}
