// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// RDMA ATOMIC WRITE between two processes on two devices, through the public verbs API (built
// against the system's <infiniband/verbs.h>, run over the drop-in libibverbs).
//
// usage: atomic_write_pair DEV_A DEV_B
//   The program forks. The child (responder) opens DEV_B and registers a 64-byte buffer of
//   0xE7 with LOCAL_WRITE | REMOTE_WRITE only; the parent (requester) opens DEV_A and writes
//   into its word at offset 16 with ibv_wr_atomic_write (kFirst), then with ibv_post_send's
//   IBV_WR_ATOMIC_WRITE from a registered 8-byte SGE (kSecond). Each must complete with
//   IBV_WC_ATOMIC_WRITE, 8 bytes. The child then checks that the word holds kSecond and that
//   no other byte changed. The two talk over pipes (QP numbers, GIDs, the key and address).
// Exits 0 when every check holds; prints each mismatch and exits 1 otherwise.
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

#include "rc_pair.h"
#include "verbs_objects.h"

namespace {

using namespace rc_pair;

constexpr size_t kLen = 64, kWordOff = 16;
constexpr uint8_t kPoison = 0xE7;
constexpr uint64_t kFirst = 0x1122334455667788ull, kSecond = 0x0a0b0c0d0e0f1011ull;
constexpr uint32_t kPsn = 0x777;

// What each side tells the other.
struct Hello {
    uint32_t qpn;
    ibv_gid gid;
    uint32_t rkey;
    uint64_t addr;
};

// An RC QP created with IBV_QP_EX_WITH_ATOMIC_WRITE (the ibv_wr_* interface).
void open_atomic_write_side(Side& s, const char* dev) {
    open_side(s, dev, IBV_QP_EX_WITH_ATOMIC_WRITE, "IBV_QP_EX_WITH_ATOMIC_WRITE");
}

void responder(Side& s, const char* dev) {
    open_atomic_write_side(s, dev);
    alignas(8) static uint8_t buf[kLen];
    std::memset(buf, kPoison, kLen);
    ibv_mr* mr = s.reg(buf, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    Hello me{s.qp->qp_num, s.gid, mr->rkey, reinterpret_cast<uintptr_t>(buf + kWordOff)};
    meet(s, true, me, kPsn, IBV_ACCESS_REMOTE_WRITE);
    char done;
    get(s.from_peer, &done, 1);  // the requester's writes completed
    uint64_t word;
    std::memcpy(&word, buf + kWordOff, 8);
    CHECK(word == kSecond, "the word holds 0x%016llx, want 0x%016llx",
          static_cast<unsigned long long>(word), static_cast<unsigned long long>(kSecond));
    for (size_t i = 0; i < kLen; ++i)
        if (i < kWordOff || i >= kWordOff + 8)
            CHECK(buf[i] == kPoison, "byte %zu changed to 0x%02x", i, buf[i]);
}

void requester(Side& s, const char* dev) {
    open_atomic_write_side(s, dev);
    Hello peer = meet(s, false, Hello{s.qp->qp_num, s.gid, 0, 0}, kPsn, IBV_ACCESS_REMOTE_WRITE);

    ibv_qp_ex* x = ibv_qp_to_qp_ex(s.qp);
    REQUIRE(x && x->wr_atomic_write, "no ibv_wr_atomic_write on an RC QP");
    uint64_t v = kFirst;
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, peer.rkey, peer.addr, &v);
    REQUIRE(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    expect_done(s.cq, 1, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE, 8);

    alignas(8) static uint64_t src = kSecond;
    ibv_mr* mr = s.reg(&src, 8, 0);
    ibv_sge sge{reinterpret_cast<uintptr_t>(&src), 8, mr->lkey};
    ibv_send_wr w = verbs_objects::send_wr(2, IBV_WR_ATOMIC_WRITE, &sge);
    w.wr.rdma.remote_addr = peer.addr;
    w.wr.rdma.rkey = peer.rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(s.qp, &w, &bad) == 0, "ibv_post_send IBV_WR_ATOMIC_WRITE");
    expect_done(s.cq, 2, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE, 8);
    put(s.to_peer, "d", 1);
}

}  // namespace

int main(int argc, char** argv) { return rc_pair::run(argc, argv, requester, responder); }
