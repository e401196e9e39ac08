// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// net/udp_sport.h: the UDP source ports rxe gives its QPs, worked out by hand from the
// kernel's definitions (hash_32 with GOLDEN_RATIO_32, rdma_calc_flow_label,
// rdma_flow_label_to_udp_sport).
#include <gtest/gtest.h>

#include "net/udp_sport.h"

using namespace uroce::net;

// A new QP: the top 14 bits of qpn * 0x61C88647. QP1 (the CM's MADs): 0x61C88647 >> 18 is
// 0x1872.
TEST(UdpSport, NewQpHashesItsNumber) {
    EXPECT_EQ(sport_for_qpn(1), 0xD872);
    EXPECT_EQ(sport_for_qpn(0), 0xC000);
    // 0x12 * 0x61C88647 mod 2^32 = 0xE01970FE, top 14 bits 0x3806.
    EXPECT_EQ(sport_for_qpn(0x12), 0xC000 + 0x3806);
    for (uint32_t q = 0; q < 100000; q += 7) EXPECT_GE(sport_for_qpn(q), 0xC000);
}

// Flow label 0: the label made of the two QP numbers, the same both ways, so both ends of an
// RC pair send from one port.
TEST(UdpSport, PathWithoutFlowLabelUsesBothQpNumbers) {
    EXPECT_EQ(flow_label_for_qpns(0x11, 0x12), 0x132u);  // 0x11 * 0x12, nothing above bit 20
    EXPECT_EQ(sport_for_path(0, 0x11, 0x12), 0xC132);
    // 0xABCDE * 0x54321 = 0x388126729E; >> 20 is 0x38812, >> 40 of that 0: the label is
    // the low 20 bits of 0x388126729E ^ 0x38812 = 0x...5FA8C.
    EXPECT_EQ(flow_label_for_qpns(0xABCDE, 0x54321), 0x5FA8Cu);
    for (uint32_t a = 1; a < 5000; a += 37)
        for (uint32_t b = 3; b < 900000; b += 99991)
            EXPECT_EQ(sport_for_path(0, a, b), sport_for_path(0, b, a)) << a << " " << b;
}

// A flow label's bits 14-19 are folded onto its low 14 bits.
TEST(UdpSport, FlowLabelFoldsInto14Bits) {
    EXPECT_EQ(sport_for_flow_label(0xABCDE), 0xFCF4);  // 0x3CDE ^ 0x2A
    EXPECT_EQ(sport_for_flow_label(0x3FFF), 0xFFFF);
    EXPECT_EQ(sport_for_flow_label(0x4000), 0xC001);
    EXPECT_EQ(sport_for_path(0xABCDE, 0x11, 0x12), 0xFCF4);  // a label wins over the QPNs
}
