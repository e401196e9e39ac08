// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// DMA into the memory of the process that owns a QP: immediate reads and writes, and the
// deferred writes of received payloads (many packets, one system call; the ordering rules
// are at the top of dma.cpp). A failure because the process has exited marks its session
// dead: from then on its QPs neither answer nor report errors, as hardware whose QPs the
// kernel is tearing down.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "emu/engine/dma_write_batch.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

class Dma {
public:
    // Where a deferred write that failed is reported (the transport's error paths). Called
    // after the batch is cleared; it may write and flush again.
    using FailureSink = void (*)(void* ctx, const DmaWriteBatch::Failure& f);
    Dma(FailureSink on_failed, void* ctx) : on_failed_(on_failed), on_failed_ctx_(ctx) {}

    bool read(Session* s, void* dst, const iovec* remote, int n, size_t total);
    bool readv(Session* s, const iovec* local, int nlocal, const iovec* remote, int nremote,
               size_t total);
    bool write(Session* s, const void* src, const iovec* remote, int n, size_t total);
    bool store64(Session* s, uint64_t addr, uint64_t value);  // after every pending write
    // A received payload, written later. flush() lands what is pending (cheap when nothing
    // is); settle() too, and says whether `qp` is still fine (no write of its failed and
    // brought its error path).
    void write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                     uint32_t qpn, uint32_t psn, DmaWriteBatch::Path path);
    void flush() {
        if (!wb_.empty()) flush_now();
    }
    bool settle(Qp& qp);

private:
    void flush_now();

    DmaWriteBatch wb_;
    FailureSink on_failed_;
    void* on_failed_ctx_;
};

}  // namespace uroce::emu
