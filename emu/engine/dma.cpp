// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// DMA into application memory (emu/engine/dma.h), and the deferred writes of received
// payloads (emu/engine/dma_write_batch.h).
//
// Writing each packet's payload with its own process_vm_writev cost a quarter of the
// device's CPU under ib_write_bw (a system call and a round of page pinning per 4 KiB).
// Instead the payload is copied into the batch and all of it goes out with one call. That
// is only correct if nobody can tell the data is late. The rules:
//  - Before anything that lets the application (or its peer) learn that data arrived, the
//    batch is flushed: every CQE (push_cqe, and complete_send, which frees send slots),
//    every packet the device transmits (an ACK or a READ response must never overtake the
//    data it vouches for; requests and NAKs are flushed too, to keep the rule simple), every
//    read of application memory (Dma::read/readv: a READ, an atomic or a SEND of a
//    buffer a WRITE just filled sees the new bytes), and every immediate Dma::write (atomics,
//    which must not be overwritten by older data).
//  - A control request (run_commands) flushes first: a QP destroyed, an MR deregistered or
//    a session closed never has writes pending that name it.
//  - It is flushed when the target process changes, when it is full, and at the end of
//    each engine loop turn, before the engine may sleep.
//  - A write that fails gets the error of the path that asked for it, as it did when the
//    write was immediate: an RC WRITE's REM_ACCESS_ERR NAK, a receive's LOC_PROT_ERR, a
//    READ's LOC_PROT_ERR. The paths check Dma::settle() before their own completion or
//    ACK, so a failed write is never followed by a success for that QP. Later writes of a
//    QP whose write failed are not made (its QP is in error, as it would have been).
//    ESRCH (the process is gone) marks the session dead, as Dma::write does.
#include "emu/engine/dma.h"

#include <cerrno>

#include "emu/engine/process_memory.h"

namespace uroce::emu {

using Path = DmaWriteBatch::Path;

// Reads and immediate writes of application memory come after every deferred write.
bool Dma::read(Session* s, void* dst, const iovec* remote, int n, size_t total) {
    flush();
    if (mem_read(s->pid, dst, remote, n, total)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

bool Dma::readv(Session* s, const iovec* local, int nlocal, const iovec* remote, int nremote,
                size_t total) {
    flush();
    if (mem_readv(s->pid, local, nlocal, remote, nremote, total)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

bool Dma::write(Session* s, const void* src, const iovec* remote, int n, size_t total) {
    flush();
    if (mem_write(s->pid, src, remote, n, total)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

bool Dma::store64(Session* s, uint64_t addr, uint64_t value) {
    flush();  // the earlier writes land first, as rxe's store-release orders them
    if (mem_store64(s->pid, addr, value)) return true;
    if (errno == ESRCH) s->dead = true;
    return false;
}

void Dma::write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                      uint32_t qpn, uint32_t psn, Path path) {
    if (!total) return;
    // A packet's payload (at most a datagram, 64 KiB) always fits an empty batch.
    if (wb_.target != s || !wb_.fits(total, n)) flush();
    wb_.target = s;
    wb_.add(src, remote, n, total, qpn, psn, path);
}

void Dma::flush_now() {
    DmaWriteBatch& b = wb_;
    Session* s = b.target;
    iovec local{b.stage.get(), b.bytes};
    ssize_t w = s->dead ? -1 : mem_writev_some(s->pid, &local, 1, b.merged, b.merge(), b.bytes);
    if (w == ssize_t(b.bytes)) return b.clear();
    // Everything before byte w landed. From the entry holding it on, each entry alone, to
    // find which failed; a QP whose write failed gets no more of its writes.
    bool gone = s->dead || (w < 0 && errno == ESRCH);
    size_t done = w > 0 ? size_t(w) : 0;
    DmaWriteBatch::Failure failed[DmaWriteBatch::kMaxEntries];
    uint32_t nfailed = 0;
    for (uint32_t i = 0; i < b.nentries; ++i) {
        const DmaWriteBatch::Entry& e = b.entry[i];
        if (e.off + e.len <= done) continue;
        bool skip = false;
        for (uint32_t k = 0; k < nfailed && !skip; ++k) skip = failed[k].qpn == e.qpn;
        if (skip) continue;
        if (!gone) {
            iovec l{b.stage.get() + e.off, e.len};
            ssize_t r = mem_writev_some(s->pid, &l, 1, &b.piece[e.piece0], int(e.npieces), e.len);
            if (r == ssize_t(e.len)) continue;
            gone = r < 0 && errno == ESRCH;
        }
        failed[nfailed++] = {e.qpn, e.psn, e.path,
                             reinterpret_cast<uint64_t>(b.piece[e.piece0].iov_base)};
    }
    if (gone) s->dead = true;
    b.clear();  // before the error paths, which may flush (push_cqe) or write again
    for (uint32_t k = 0; k < nfailed; ++k) on_failed_(on_failed_ctx_, failed[k]);
}

bool Dma::settle(Qp& qp) {
    uint32_t before = qp.dma_errors;
    flush();
    return qp.dma_errors == before;
}

}  // namespace uroce::emu
