// Deferred writes of received payloads into application memory (emu/engine/dma_write_batch.h).
//
// Writing each packet's payload with its own process_vm_writev cost a quarter of the
// device's CPU under ib_write_bw (a system call and a round of page pinning per 4 KiB).
// Instead the payload is copied into the batch and all of it goes out with one call. That
// is only correct if nobody can tell the data is late. The rules:
//  - Before anything that lets the application (or its peer) learn that data arrived, the
//    batch is flushed: every CQE (push_cqe, and complete_send, which frees send slots),
//    every packet the device transmits (an ACK or a READ response must never overtake the
//    data it vouches for; requests and NAKs are flushed too, to keep the rule simple), every
//    read of application memory (dma_read/dma_readv: a READ, an atomic or a SEND of a
//    buffer a WRITE just filled sees the new bytes), and every immediate dma_write (atomics,
//    which must not be overwritten by older data).
//  - A control request (run_commands) flushes first: a QP destroyed, an MR deregistered or
//    a session closed never has writes pending that name it.
//  - It is flushed when the target process changes, when it is full, and at the end of
//    each engine loop turn, before the engine may sleep.
//  - A write that fails gets the error of the path that asked for it, as it did when the
//    write was immediate: an RC WRITE's REM_ACCESS_ERR NAK, a receive's LOC_PROT_ERR, a
//    READ's LOC_PROT_ERR. The paths check dma_settle() before their own completion or
//    ACK, so a failed write is never followed by a success for that QP. Later writes of a
//    QP whose write failed are not made (its QP is in error, as it would have been).
//    ESRCH (the process is gone) marks the session dead, as dma_write does.
#include <cerrno>

#include "emu/engine/device.h"
#include "emu/engine/process_memory.h"
#include "net/opcodes.h"

namespace uroce::emu {

namespace {
constexpr uint8_t kNakRemAccess = 0x62;  // AETH NAK: remote access error (rc_responder.cpp)
using Path = DmaWriteBatch::Path;
}  // namespace

void Device::dma_write_later(Session* s, const void* src, const iovec* remote, int n, size_t total,
                             uint32_t qpn, uint32_t psn, Path path) {
    if (!total) return;
    // A packet's payload (at most a datagram, 64 KiB) always fits an empty batch.
    if (wb_.target != s || !wb_.fits(total, n)) dma_flush();
    wb_.target = s;
    wb_.add(src, remote, n, total, qpn, psn, path);
}

void Device::dma_flush_now() {
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
    for (uint32_t k = 0; k < nfailed; ++k) dma_write_failed(failed[k]);
}

bool Device::dma_settle(Qp& qp) {
    uint32_t before = qp.dma_errors;
    dma_flush();
    return qp.dma_errors == before;
}

// What the path that wrote the entry did when its write failed. It counts in the QP's
// dma_errors, so that dma_settle() stops the path that is waiting for it.
void Device::dma_write_failed(const DmaWriteBatch::Failure& f) {
    Qp* qp = qps_.get(f.qpn);
    if (!qp) return;
    if (f.path == Path::kUcWrite) {
        // UC reports nothing: the rest of the message it belongs to (if that is still the
        // one in progress) is discarded, and a WRITE_WITH_IMM does not complete.
        uint64_t start = qp->write_va - (qp->write_total - qp->write_left);
        if (!qp->have_write || f.addr < start || f.addr >= qp->write_va) return;
        qp->have_write = false;
        ++qp->dma_errors;
        return;
    }
    ++qp->dma_errors;
    bool gone = qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET;
    switch (f.path) {
    case Path::kRcWrite:
    case Path::kRcSend:
        if (gone) return;
        return responder_error(
            *qp, f.path == Path::kRcWrite ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR,
            kNakRemAccess, f.psn, IBV_EVENT_QP_ACCESS_ERR);
    case Path::kUcSend:
        if (gone || qp->owner->dead) return;
        if (qp->have_rwr) complete_recv(*qp, net::Packet{}, IBV_WC_LOC_PROT_ERR);
        post_qp_async(*qp, IBV_EVENT_QP_ACCESS_ERR);
        return qp_to_error(*qp);
    case Path::kUdRecv:
        if (!qp->owner->dead && qp->have_rwr)
            complete_recv(*qp, net::Packet{}, IBV_WC_LOC_PROT_ERR);
        qp->have_rwr = false;
        return;
    case Path::kReadResp:
        if (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD)
            fail_oldest(*qp, IBV_WC_LOC_PROT_ERR);
        return;
    case Path::kUcWrite: return;
    }
}

}  // namespace uroce::emu
