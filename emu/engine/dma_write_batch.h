// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Received payloads on their way into one application's memory: copied here as packets
// arrive and written with a single process_vm_writev when the batch is flushed, instead of
// one system call (and one round of page pinning) per packet. Dma (emu/engine/dma.h) decides
// when to flush; this holds the bytes and remembers which QP each piece is for.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "emu/abi/caps.h"

namespace uroce::emu {

struct Session;

struct DmaWriteBatch {
    static constexpr uint32_t kMaxEntries = 128;
    static constexpr size_t kStageBytes = 256 * 1024;             // 64 packets of 4 KiB
    static constexpr uint32_t kMaxPieces = 4 * abi::kMaxSge * 4;  // well under IOV_MAX
    // Which path wrote it: what a failure to write it means (Completions::dma_write_failed).
    enum class Path : uint8_t { kRcWrite, kRcSend, kUcWrite, kUcSend, kUdRecv, kReadResp };
    struct Entry {
        uint32_t qpn, psn;
        Path path;
        uint32_t off, len;         // in `stage`
        uint32_t piece0, npieces;  // its remote ranges, in `piece`
    };
    // An entry that could not be written, kept once the batch is cleared.
    struct Failure {
        uint32_t qpn, psn;
        Path path;
        uint64_t addr;  // its first remote byte
    };

    Session* target = nullptr;  // every entry is for this process
    Entry entry[kMaxEntries];
    uint32_t nentries = 0;
    iovec piece[kMaxPieces];  // remote ranges, entry by entry, as given
    uint32_t npieces = 0;
    iovec merged[kMaxPieces];  // the same with adjacent ranges joined (merge())
    std::unique_ptr<uint8_t[]> stage{new uint8_t[kStageBytes]};
    size_t bytes = 0;

    bool empty() const { return nentries == 0; }
    bool fits(size_t len, int n) const {
        return nentries < kMaxEntries && bytes + len <= kStageBytes && npieces + n <= kMaxPieces;
    }
    // The caller checked fits().
    void add(const void* src, const iovec* remote, int n, size_t len, uint32_t qpn, uint32_t psn,
             Path path) {
        entry[nentries++] = {qpn, psn, path, uint32_t(bytes), uint32_t(len), npieces, uint32_t(n)};
        std::memcpy(stage.get() + bytes, src, len);
        bytes += len;
        for (int i = 0; i < n; ++i) piece[npieces++] = remote[i];
    }
    // Fills `merged` from `piece` (a 64 KiB WRITE's 16 packets become one range); returns
    // how many.
    int merge() {
        int m = 0;
        for (uint32_t i = 0; i < npieces; ++i) {
            if (piece[i].iov_len == 0) continue;
            if (m && static_cast<char*>(merged[m - 1].iov_base) + merged[m - 1].iov_len ==
                         piece[i].iov_base) {
                merged[m - 1].iov_len += piece[i].iov_len;
                continue;
            }
            merged[m++] = piece[i];
        }
        return m;
    }
    void clear() {
        target = nullptr;
        nentries = npieces = 0;
        bytes = 0;
    }
};

}  // namespace uroce::emu
