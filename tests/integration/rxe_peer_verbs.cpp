// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The uroce side of interop.rxe_peer (rxe_peer_test.sh): one RC QP on the device, driven line
// by line from standard input by the scripted rxe-like peer (rxe_peer.py), which checks what
// it sees on the wire while this program checks what the verbs show. Built against the
// system's <infiniband/verbs.h>, run over the drop-in libibverbs.
//
// usage: rxe_peer_verbs PEER_IPV4
// Prints "info qpn Q psn P gid_index G addr A rkey R len L mtu M" (the QP, its first send PSN,
// the index of the device's IPv4-mapped GID, the MR), then reads "peer QPN PSN" and moves the
// QP to RTS towards that QP at ::ffff:PEER_IPV4 (path MTU 1024), answering "ready". Then one
// command a line, each answered "ok ..." or "fail WHY" (numbers in C notation, data in hex;
// offsets are into the MR, which starts zeroed):
//   post_recv WRID OFF LEN          a receive of LEN bytes at OFF
//   expect_recv WRID LEN HEX        the next receive completion (5 s) is WRID's, successful,
//                                   IBV_WC_RECV, of LEN bytes, and its buffer holds HEX
//   expect_no_recv MS               no receive completion comes in MS milliseconds
//   fill OFF HEX                    writes HEX into the MR at OFF
//   expect_mem OFF HEX              the MR holds HEX at OFF
//   post send|write|read|fadd WRID OFF LEN [VA RKEY [ADD]]
//                                   a signaled SEND of LEN bytes from OFF, RDMA WRITE from OFF
//                                   or READ into OFF (LEN bytes at the peer's VA, RKEY), or a
//                                   FETCH_ADD of ADD at VA whose original lands at OFF
//   expect_send WRID send|write|read|fadd LEN
//                                   the next send completion (5 s) is WRID's, successful, of
//                                   that opcode and byte_len LEN
//   quit                            tears everything down; exits 0 when nothing failed
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "verbs_checks.h"

namespace {

constexpr size_t kMrLen = 64 * 1024;
constexpr double kWaitS = 5;

struct Ctx {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* scq = nullptr;
    ibv_cq* rcq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_mr* mr = nullptr;
    uint8_t* buf = nullptr;
    std::map<uint64_t, size_t> recv_off;  // wr_id -> its buffer's offset
};

bool parse_hex(const std::string& hex, std::vector<uint8_t>* out) {
    if (hex.size() % 2) return false;
    out->clear();
    for (size_t i = 0; i < hex.size(); i += 2) {
        char* end = nullptr;
        std::string byte = hex.substr(i, 2);
        unsigned long v = std::strtoul(byte.c_str(), &end, 16);
        if (*end) return false;
        out->push_back(uint8_t(v));
    }
    return true;
}

uint64_t num(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 0); }

// "" when `want` is at `off` in the MR, else where they differ.
std::string compare_mem(const Ctx& c, size_t off, const std::vector<uint8_t>& want) {
    if (off + want.size() > kMrLen) return "beyond the MR";
    for (size_t i = 0; i < want.size(); ++i)
        if (c.buf[off + i] != want[i]) {
            char msg[96];
            std::snprintf(msg, sizeof msg, "byte %zu of %zu (MR offset %zu) is 0x%02x, not 0x%02x",
                          i, want.size(), off + i, c.buf[off + i], want[i]);
            return msg;
        }
    return "";
}

ibv_wc_opcode wc_opcode(const std::string& op) {
    if (op == "send") return IBV_WC_SEND;
    if (op == "write") return IBV_WC_RDMA_WRITE;
    if (op == "read") return IBV_WC_RDMA_READ;
    return IBV_WC_FETCH_ADD;
}

// What is wrong with completion `wc` for WR `wr_id` of `opcode` and `len` bytes ("" if
// nothing).
std::string wc_mismatch(const ibv_wc& wc, const std::string& wr_id, ibv_wc_opcode opcode,
                        const std::string& len) {
    std::ostringstream why;
    if (wc.wr_id != num(wr_id)) why << " wr_id " << wc.wr_id << ", not " << wr_id << ";";
    if (wc.status != IBV_WC_SUCCESS) why << " status " << ibv_wc_status_str(wc.status) << ";";
    if (wc.opcode != opcode) why << " opcode " << wc.opcode << ", not " << opcode << ";";
    if (wc.byte_len != num(len)) why << " byte_len " << wc.byte_len << ", not " << len << ";";
    return why.str();
}

// One command; "ok ..." or "fail ..." for the peer.
std::string run(Ctx& c, const std::vector<std::string>& w) {
    const std::string& cmd = w[0];
    std::vector<uint8_t> data;
    if (cmd == "post_recv" && w.size() == 4) {
        uint64_t wr_id = num(w[1]);
        size_t off = num(w[2]), len = num(w[3]);
        if (off + len > kMrLen) return "fail beyond the MR";
        ibv_sge sge{reinterpret_cast<uintptr_t>(c.buf + off), uint32_t(len), c.mr->lkey};
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if (ibv_post_recv(c.qp, &wr, &bad)) return "fail ibv_post_recv: " + std::to_string(errno);
        c.recv_off[wr_id] = off;
        return "ok";
    }
    if (cmd == "expect_recv" && w.size() == 4 && parse_hex(w[3], &data)) {
        ibv_wc wc{};
        int n = uroce::verbs_util::poll_one(c.rcq, &wc, kWaitS);
        if (n != 1) return "fail no receive completion in 5 s";
        std::string why = wc_mismatch(wc, w[1], IBV_WC_RECV, w[2]);
        if (wc.qp_num != c.qp->qp_num) why += " qp_num " + std::to_string(wc.qp_num) + ";";
        auto it = c.recv_off.find(wc.wr_id);
        if (it == c.recv_off.end()) return "fail a completion for wr_id never posted";
        std::string diff = compare_mem(c, it->second, data);
        if (!diff.empty()) why += " data: " + diff + ";";
        if (!why.empty()) return "fail" + why;
        c.recv_off.erase(it);
        return "ok wr_id " + std::to_string(wc.wr_id) + " byte_len " + std::to_string(wc.byte_len);
    }
    if (cmd == "expect_no_recv" && w.size() == 2) {
        ibv_wc wc{};
        int n = uroce::verbs_util::poll_one(c.rcq, &wc, double(num(w[1])) / 1000);
        if (n != 0)
            return "fail a receive completion came: wr_id " + std::to_string(wc.wr_id) +
                   " byte_len " + std::to_string(wc.byte_len);
        return "ok";
    }
    if ((cmd == "fill" || cmd == "expect_mem") && w.size() == 3 && parse_hex(w[2], &data)) {
        size_t off = num(w[1]);
        if (off + data.size() > kMrLen) return "fail beyond the MR";
        if (cmd == "fill") {
            std::memcpy(c.buf + off, data.data(), data.size());
            return "ok";
        }
        std::string diff = compare_mem(c, off, data);
        return diff.empty() ? "ok" : "fail " + diff;
    }
    if (cmd == "post" && w.size() >= 5) {
        const std::string& op = w[1];
        size_t off = num(w[3]), len = num(w[4]);
        if (off + len > kMrLen) return "fail beyond the MR";
        ibv_sge sge{reinterpret_cast<uintptr_t>(c.buf + off), uint32_t(len), c.mr->lkey};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = num(w[2]);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        if (op == "send") {
            wr.opcode = IBV_WR_SEND;
        } else if ((op == "write" || op == "read") && w.size() == 7) {
            wr.opcode = op == "write" ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
            wr.wr.rdma.remote_addr = num(w[5]);
            wr.wr.rdma.rkey = uint32_t(num(w[6]));
        } else if (op == "fadd" && w.size() == 8 && len == 8) {
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.wr.atomic.remote_addr = num(w[5]);
            wr.wr.atomic.rkey = uint32_t(num(w[6]));
            wr.wr.atomic.compare_add = num(w[7]);
        } else {
            return "fail bad post command";
        }
        if (ibv_post_send(c.qp, &wr, &bad)) return "fail ibv_post_send: " + std::to_string(errno);
        return "ok";
    }
    if (cmd == "expect_send" && w.size() == 4) {
        ibv_wc wc{};
        int n = uroce::verbs_util::poll_one(c.scq, &wc, kWaitS);
        if (n != 1) return "fail no send completion in 5 s";
        std::string why = wc_mismatch(wc, w[1], wc_opcode(w[2]), w[3]);
        if (!why.empty()) return "fail" + why;
        return "ok wr_id " + std::to_string(wc.wr_id) + " byte_len " + std::to_string(wc.byte_len);
    }
    return "fail unknown command";
}

// The first GID of port 1 that is IPv4-mapped (::ffff:a.b.c.d): the device's address.
int ipv4_gid_index(ibv_context* ctx, ibv_gid* gid) {
    ibv_port_attr pa{};
    REQUIRE(!ibv_query_port(ctx, 1, &pa), "ibv_query_port: %s", std::strerror(errno));
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        if (ibv_query_gid(ctx, 1, i, gid)) continue;
        static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(gid->raw, kPrefix, sizeof kPrefix) == 0) return i;
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    REQUIRE(argc == 2, "usage: rxe_peer_verbs PEER_IPV4");
    in_addr peer{};
    REQUIRE(inet_pton(AF_INET, argv[1], &peer) == 1, "bad address %s", argv[1]);
    const ibv_gid dgid = uroce::verbs_util::ipv4_gid(peer.s_addr);

    Ctx c;
    c.ctx = open_by_name("uroce0");
    ibv_gid sgid{};
    int gid_index = ipv4_gid_index(c.ctx, &sgid);
    // (verbs_util::connect_qp's address vector takes source GID index 0.)
    REQUIRE(gid_index == 0, "the device's IPv4-mapped GID is at index %d, not 0", gid_index);
    ibv_port_attr pa{};
    REQUIRE(!ibv_query_port(c.ctx, 1, &pa), "ibv_query_port");
    c.pd = ibv_alloc_pd(c.ctx);
    c.scq = ibv_create_cq(c.ctx, 64, nullptr, nullptr, 0);
    c.rcq = ibv_create_cq(c.ctx, 64, nullptr, nullptr, 0);
    REQUIRE(c.pd && c.scq && c.rcq, "PD/CQ: %s", std::strerror(errno));
    c.buf = static_cast<uint8_t*>(std::aligned_alloc(4096, kMrLen));
    REQUIRE(c.buf, "aligned_alloc");
    std::memset(c.buf, 0, kMrLen);
    c.mr = ibv_reg_mr(c.pd, c.buf, kMrLen,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC);
    REQUIRE(c.mr, "ibv_reg_mr: %s", std::strerror(errno));
    ibv_qp_init_attr ia{};
    ia.send_cq = c.scq;
    ia.recv_cq = c.rcq;
    ia.cap = {16, 16, 1, 1, 0};
    ia.qp_type = IBV_QPT_RC;
    c.qp = ibv_create_qp(c.pd, &ia);
    REQUIRE(c.qp, "ibv_create_qp: %s", std::strerror(errno));

    srand48(long(time(nullptr)) ^ long(c.qp->qp_num));
    const uint32_t sq_psn = uint32_t(lrand48()) & 0xffffff;
    std::printf("info qpn 0x%x psn 0x%x gid_index %d addr 0x%llx rkey 0x%x len %zu mtu %d\n",
                c.qp->qp_num, sq_psn, gid_index,
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(c.buf)), c.mr->rkey,
                kMrLen, 128 << pa.active_mtu);
    std::fflush(stdout);

    std::string line;
    REQUIRE(std::getline(std::cin, line), "no peer line");
    std::istringstream in(line);
    std::string tag, qpn_s, psn_s;
    in >> tag >> qpn_s >> psn_s;
    REQUIRE(tag == "peer", "expected \"peer QPN PSN\", got \"%s\"", line.c_str());
    uroce::verbs_util::PathAttrs path;
    path.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    path.mtu = IBV_MTU_1024;
    // About a second: the peer is a Python script on a shared machine, and a retransmission
    // would only blur what it checks (it answers each one again, and counts it).
    path.timeout = 18;
    path.min_rnr_timer = 12;
    path.max_rd_atomic = path.max_dest_rd_atomic = 4;
    ibv_qp_state failed{};
    REQUIRE(!uroce::verbs_util::connect_qp(c.qp, IBV_QPT_RC, dgid, uint32_t(num(qpn_s)), sq_psn,
                                           uint32_t(num(psn_s)), path, true, &failed),
            "to %s: %s", uroce::verbs_util::qp_state_name(failed), std::strerror(errno));
    std::printf("ready\n");
    std::fflush(stdout);

    while (std::getline(std::cin, line)) {
        std::istringstream words(line);
        std::vector<std::string> w;
        for (std::string s; words >> s;) w.push_back(s);
        if (w.empty()) continue;
        if (w[0] == "quit") break;
        std::string answer = run(c, w);
        if (answer.rfind("fail", 0) == 0) {
            ++g_failures;
            std::fprintf(stderr, "FAIL %s: %s\n", w[0].c_str(), answer.c_str());
        }
        std::printf("%s\n", answer.c_str());
        std::fflush(stdout);
    }

    CHECK(!ibv_destroy_qp(c.qp), "ibv_destroy_qp");
    CHECK(!ibv_dereg_mr(c.mr), "ibv_dereg_mr");
    CHECK(!ibv_destroy_cq(c.scq) && !ibv_destroy_cq(c.rcq), "ibv_destroy_cq");
    CHECK(!ibv_dealloc_pd(c.pd), "ibv_dealloc_pd");
    CHECK(!ibv_close_device(c.ctx), "ibv_close_device");
    std::free(c.buf);
    return g_failures ? 1 : 0;
}
