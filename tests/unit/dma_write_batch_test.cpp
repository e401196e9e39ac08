// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The receive-side write batch (emu/engine/dma_write_batch.h): payload bytes staged in order, one
// entry per packet, adjacent remote ranges joined into one iovec, and the limits that make
// the device flush before it adds more.
#include "emu/engine/dma_write_batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace uroce::emu {
namespace {

iovec at(std::vector<char>& mem, size_t off, size_t len) { return {mem.data() + off, len}; }

TEST(DmaWriteBatch, StagesBytesAndJoinsAdjacentRanges) {
    DmaWriteBatch b;
    std::vector<char> mem(64 * 1024);
    char p1[100], p2[50], p3[10];
    std::memset(p1, 1, sizeof p1);
    std::memset(p2, 2, sizeof p2);
    std::memset(p3, 3, sizeof p3);
    iovec r1 = at(mem, 0, 100);
    iovec r2[2] = {at(mem, 100, 20), at(mem, 500, 30)};  // continues r1, then a gap
    iovec r3 = at(mem, 530, 10);                         // continues r2's second piece
    b.add(p1, &r1, 1, 100, 7, 1, DmaWriteBatch::Path::kRcWrite);
    b.add(p2, r2, 2, 50, 7, 2, DmaWriteBatch::Path::kRcWrite);
    b.add(p3, &r3, 1, 10, 9, 5, DmaWriteBatch::Path::kUdRecv);
    EXPECT_EQ(b.nentries, 3u);
    EXPECT_EQ(b.bytes, 160u);
    EXPECT_EQ(b.entry[1].off, 100u);
    EXPECT_EQ(b.entry[1].piece0, 1u);
    EXPECT_EQ(b.entry[1].npieces, 2u);
    EXPECT_EQ(b.entry[2].qpn, 9u);
    EXPECT_EQ(b.stage[99], 1);
    EXPECT_EQ(b.stage[100], 2);
    EXPECT_EQ(b.stage[159], 3);
    ASSERT_EQ(b.merge(), 2);
    EXPECT_EQ(b.merged[0].iov_base, mem.data());
    EXPECT_EQ(b.merged[0].iov_len, 120u);
    EXPECT_EQ(b.merged[1].iov_base, mem.data() + 500);
    EXPECT_EQ(b.merged[1].iov_len, 40u);
    b.clear();
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(b.target, nullptr);
}

TEST(DmaWriteBatch, SixteenPacketsOfAWriteAreOneRange) {
    DmaWriteBatch b;
    std::vector<char> mem(64 * 1024), pkt(4096, 'x');
    for (size_t i = 0; i < 16; ++i) {
        iovec r = at(mem, i * 4096, 4096);
        ASSERT_TRUE(b.fits(4096, 1));
        b.add(pkt.data(), &r, 1, 4096, 1, uint32_t(i), DmaWriteBatch::Path::kRcWrite);
    }
    ASSERT_EQ(b.merge(), 1);
    EXPECT_EQ(b.merged[0].iov_len, 64u * 1024);
}

TEST(DmaWriteBatch, FullWhenStageEntriesOrPiecesRunOut) {
    DmaWriteBatch b;
    std::vector<char> mem(DmaWriteBatch::kStageBytes), pkt(4096);
    iovec r = at(mem, 0, 4096);
    for (size_t i = 0; i < DmaWriteBatch::kStageBytes / 4096; ++i) {
        ASSERT_TRUE(b.fits(4096, 1)) << i;
        b.add(pkt.data(), &r, 1, 4096, 1, 0, DmaWriteBatch::Path::kRcSend);
    }
    EXPECT_FALSE(b.fits(1, 1));  // the stage is full
    b.clear();
    for (uint32_t i = 0; i < DmaWriteBatch::kMaxEntries; ++i) {
        ASSERT_TRUE(b.fits(1, 1));
        b.add(pkt.data(), &r, 1, 1, 1, 0, DmaWriteBatch::Path::kRcSend);
    }
    EXPECT_FALSE(b.fits(1, 1));  // no entry left
    b.clear();
    EXPECT_TRUE(b.fits(1, int(DmaWriteBatch::kMaxPieces)));
    EXPECT_FALSE(b.fits(1, int(DmaWriteBatch::kMaxPieces) + 1));  // too many ranges
}

}  // namespace
}  // namespace uroce::emu
