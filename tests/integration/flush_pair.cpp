// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA FLUSH between two processes on two devices, through the verbs API: ibv_wr_flush where
// the system's headers have it (UROCE_HAVE_WR_FLUSH), else the same member of ibv_qp_ex as
// rdma-core 56 lays it out (emu/abi/flush.h), which a program built on Debian 13 calls.
//
// usage: flush_pair DEV_A DEV_B
//   The program forks. The child (responder) opens DEV_B and registers a 256-byte buffer with
//   LOCAL_WRITE | REMOTE_WRITE | FLUSH_GLOBAL | FLUSH_PERSISTENT and a 64-byte one without the
//   flush flags. The parent (requester) opens DEV_A and posts, in one ibv_wr_* batch, an RDMA
//   WRITE of 128 bytes and a global-visibility FLUSH of that range; then a persistent FLUSH of
//   the whole MR; each must complete (IBV_WC_RDMA_WRITE 128, IBV_WC_FLUSH 128, IBV_WC_FLUSH 0)
//   and the child then finds the bytes. Last, a FLUSH to the MR without the flags must
//   complete with IBV_WC_REM_ACCESS_ERR and the child's QP report IBV_EVENT_QP_ACCESS_ERR.
// On the wire: 1 RC_RDMA_WRITE_ONLY and 3 RC_FLUSH one way, 2 zero-length
// RC_RDMA_READ_RESPONSE_ONLY and the NAK the other (flush_test.sh checks the capture).
// Exits 0 when every check holds; prints each mismatch and exits 1 otherwise.
#include <infiniband/verbs.h>
#include <poll.h>

#include <cstdint>
#include <cstring>

#include "emu/abi/flush.h"
#include "rc_pair.h"

namespace {

using namespace uroce;
using namespace rc_pair;

constexpr size_t kLen = 256, kPlainLen = 64, kWriteLen = 128;
constexpr uint8_t kPoison = 0xE7;
constexpr uint32_t kPsn = 0x1c1c;
constexpr int kFlushAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             int(abi::kAccessFlushGlobal | abi::kAccessFlushPersistent);

// What each side tells the other.
struct Hello {
    uint32_t qpn;
    ibv_gid gid;
    uint32_t rkey, plain_rkey;
    uint64_t addr, plain_addr;
};

uint8_t pattern(size_t i) { return uint8_t(0x30 + i * 5); }

// An RC QP created with IBV_QP_EX_WITH_FLUSH and RDMA_WRITE (the ibv_wr_* interface).
void open_flush_side(Side& s, const char* dev) {
    open_side(s, dev, abi::kQpExWithFlush | IBV_QP_EX_WITH_RDMA_WRITE, "IBV_QP_EX_WITH_FLUSH");
}

constexpr int kQpAccess = IBV_ACCESS_REMOTE_WRITE | int(abi::kAccessFlush);  // as rxe wants

void wr_flush(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, size_t len, uint8_t type, uint8_t level) {
#ifdef UROCE_HAVE_WR_FLUSH
    ibv_wr_flush(x, rkey, addr, len, type, level);
#else
    static_cast<abi::QpEx*>(x)->wr_flush(x, rkey, addr, len, type, level);
#endif
}

void responder(Side& s, const char* dev) {
    open_flush_side(s, dev);
    alignas(64) static uint8_t buf[kLen], plain[kPlainLen];
    std::memset(buf, kPoison, kLen);
    std::memset(plain, kPoison, kPlainLen);
    ibv_mr* mr = s.reg(buf, kLen, kFlushAccess, "reg_mr with the flush flags");
    ibv_mr* pmr = s.reg(plain, kPlainLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    Hello me{s.qp->qp_num,
             s.gid,
             mr->rkey,
             pmr->rkey,
             reinterpret_cast<uintptr_t>(buf),
             reinterpret_cast<uintptr_t>(plain)};
    meet(s, true, me, kPsn, kQpAccess);
    char done;
    get(s.from_peer, &done, 1);  // the WRITE and the FLUSHes completed
    for (size_t i = 0; i < kLen; ++i) {
        uint8_t want = i < kWriteLen ? pattern(i) : kPoison;
        CHECK(buf[i] == want, "byte %zu is 0x%02x, want 0x%02x", i, buf[i], want);
    }
    put(s.to_peer, "c", 1);
    get(s.from_peer, &done, 1);  // the refused FLUSH completed
    pollfd pf{s.ctx->async_fd, POLLIN, 0};
    REQUIRE(poll(&pf, 1, 10000) == 1, "no async event for the refused FLUSH");
    ibv_async_event ev;
    REQUIRE(ibv_get_async_event(s.ctx, &ev) == 0, "ibv_get_async_event");
    CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == s.qp,
          "async event %s, want QP_ACCESS_ERR on the QP", ibv_event_type_str(ev.event_type));
    ibv_ack_async_event(&ev);
    for (size_t i = 0; i < kPlainLen; ++i)
        CHECK(plain[i] == kPoison, "plain byte %zu changed to 0x%02x", i, plain[i]);
}

void requester(Side& s, const char* dev) {
    open_flush_side(s, dev);
    Hello peer = meet(s, false, Hello{s.qp->qp_num, s.gid, 0, 0, 0, 0}, kPsn, kQpAccess);

    ibv_device_attr_ex attr{};
    REQUIRE(ibv_query_device_ex(s.ctx, nullptr, &attr) == 0, "ibv_query_device_ex");
    CHECK((attr.device_cap_flags_ex & abi::kDeviceFlushGlobal) &&
              (attr.device_cap_flags_ex & abi::kDeviceFlushPersistent),
          "device_cap_flags_ex 0x%llx lacks the flush bits",
          static_cast<unsigned long long>(attr.device_cap_flags_ex));

    static uint8_t src[kWriteLen];
    for (size_t i = 0; i < kWriteLen; ++i) src[i] = pattern(i);
    ibv_mr* mr = s.reg(src, kWriteLen, 0);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(s.qp);
    REQUIRE(x && static_cast<abi::QpEx*>(x)->wr_flush, "no wr_flush on an RC QP");
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, peer.rkey, peer.addr);
    ibv_wr_set_sge(x, mr->lkey, reinterpret_cast<uintptr_t>(src), kWriteLen);
    x->wr_id = 2;
    wr_flush(x, peer.rkey, peer.addr, kWriteLen, abi::kFlushGlobal, abi::kFlushRange);
    x->wr_id = 3;
    wr_flush(x, peer.rkey, 0, 0, abi::kFlushPersistent, abi::kFlushMr);
    REQUIRE(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    expect_done(s.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, kWriteLen);
    expect_done(s.cq, 2, IBV_WC_SUCCESS, abi::kWcFlush, kWriteLen);
    expect_done(s.cq, 3, IBV_WC_SUCCESS, abi::kWcFlush, 0);
    put(s.to_peer, "d", 1);
    char checked;
    get(s.from_peer, &checked, 1);

    ibv_wr_start(x);
    x->wr_id = 4;
    x->wr_flags = IBV_SEND_SIGNALED;
    wr_flush(x, peer.plain_rkey, peer.plain_addr, kPlainLen, abi::kFlushGlobal, abi::kFlushRange);
    REQUIRE(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    expect_done(s.cq, 4, IBV_WC_REM_ACCESS_ERR, 0, 0);
    put(s.to_peer, "e", 1);
}

}  // namespace

int main(int argc, char** argv) { return rc_pair::run(argc, argv, requester, responder); }
