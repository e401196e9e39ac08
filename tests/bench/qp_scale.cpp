// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Many connected RC QPs on one device, and what they cost it (docs/performance.md).
// Built against the system's <infiniband/verbs.h>, run over the drop-in libibverbs.
//
// usage: qp_scale DEVICE --pairs N [--pid PID] [--send-wr W] [--recv-wr W] [--probe N]
//                 [--exit-connected]
//   Creates N pairs of RC QPs on DEVICE (one process, one PD, one CQ), connects each pair
//   to each other (INIT, RTR, RTS; 2N connected QPs on the device), then:
//   - with --pid (the device's uroced): reads /proc/PID/status before the first QP and
//     once all are connected, and prints the device's resident memory per QP: VmRSS, and
//     its parts RssAnon (the device's own heap: QP contexts and their per-WQE shadows) and
//     RssShmem (the pages of the SQ/RQ rings shared with this process that the device has
//     touched: the queues);
//   - sends one 8-byte message over --probe pairs spread over the whole range (default
//     min(N, 500)) and checks each arrives on its peer, intact: the QPs are really
//     connected;
//   - destroys every QP (and reads the device's memory once more).
//   --exit-connected: exits (status 0) once every QP is connected, leaving the QPs to the
//   device's cleanup of a dead process.
// It drives a device of its own by design (scale_test.sh): it measures that uroced's memory
// and the cleanup of a dead process; the QP set-up is tests/transport/verbs_util.h's.
// Prints key=value lines; exits 0 when every step worked.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../integration/verbs_checks.h"

namespace {

using Clock = std::chrono::steady_clock;
double secs_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Mem {
    long rss = -1, anon = -1, shmem = -1;  // KiB
};

// The device's resident memory from /proc/PID/status (KiB), or -1s without a pid.
Mem read_mem(pid_t pid) {
    Mem m;
    if (pid <= 0) return m;
    std::string path = "/proc/" + std::to_string(pid) + "/status";
    FILE* f = std::fopen(path.c_str(), "r");
    REQUIRE(f, "cannot read %s", path.c_str());
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
        long v;
        if (std::sscanf(line, "VmRSS: %ld", &v) == 1) m.rss = v;
        if (std::sscanf(line, "RssAnon: %ld", &v) == 1) m.anon = v;
        if (std::sscanf(line, "RssShmem: %ld", &v) == 1) m.shmem = v;
    }
    std::fclose(f);
    return m;
}

void to_rts(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& gid) {
    uroce::verbs_util::PathAttrs p;
    p.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    p.mtu = IBV_MTU_4096;
    ibv_qp_state failed = IBV_QPS_RESET;
    int e = uroce::verbs_util::connect_qp(qp, IBV_QPT_RC, gid, dest_qpn, 0, 0, p, true, &failed);
    REQUIRE(e == 0, "QP 0x%x to %s: %s", qp->qp_num, uroce::verbs_util::qp_state_name(failed),
            std::strerror(e));
}

void print_mem(const char* what, const Mem& m) {
    std::printf("%s_rss_kib=%ld %s_anon_kib=%ld %s_shmem_kib=%ld\n", what, m.rss, what, m.anon,
                what, m.shmem);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: qp_scale DEVICE --pairs N [--pid PID] [--send-wr W] [--recv-wr W]"
                     " [--probe N] [--exit-connected]\n");
        return 2;
    }
    const char* dev = argv[1];
    uint32_t pairs = 0, send_wr = 16, recv_wr = 16;
    long probe = -1;
    pid_t pid = 0;
    bool exit_connected = false;
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> long {
            REQUIRE(i + 1 < argc, "%s needs a value", a.c_str());
            return std::strtol(argv[++i], nullptr, 0);
        };
        if (a == "--pairs")
            pairs = uint32_t(next());
        else if (a == "--pid")
            pid = pid_t(next());
        else if (a == "--send-wr")
            send_wr = uint32_t(next());
        else if (a == "--recv-wr")
            recv_wr = uint32_t(next());
        else if (a == "--probe")
            probe = next();
        else if (a == "--exit-connected")
            exit_connected = true;
        else
            REQUIRE(false, "unknown argument %s", a.c_str());
    }
    REQUIRE(pairs > 0, "--pairs N is required");
    if (probe < 0) probe = pairs < 500 ? long(pairs) : 500;
    if (probe > long(pairs)) probe = long(pairs);

    ibv_context* ctx = open_by_name(dev);
    ibv_gid gid{};
    REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0, "query_gid");
    ibv_pd* pd = ibv_alloc_pd(ctx);
    REQUIRE(pd, "alloc_pd: %s", std::strerror(errno));
    // Per probe: 8 bytes sent from and 8 received into their own slots.
    std::vector<uint64_t> buf(2 * size_t(probe) + 2, 0);
    ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size() * sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr, "reg_mr: %s", std::strerror(errno));
    ibv_cq* cq = ibv_create_cq(ctx, int(2 * probe + 16), nullptr, nullptr, 0);
    REQUIRE(cq, "create_cq: %s", std::strerror(errno));

    Mem before = read_mem(pid);
    auto t0 = Clock::now();
    std::vector<ibv_qp*> qps(2 * size_t(pairs));
    for (auto& qp : qps) {
        ibv_qp_init_attr ia{};
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = send_wr;
        ia.cap.max_recv_wr = recv_wr;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        qp = ibv_create_qp(pd, &ia);
        REQUIRE(qp, "create_qp number %zu: %s", size_t(&qp - qps.data()), std::strerror(errno));
    }
    double create_s = secs_since(t0);
    t0 = Clock::now();
    for (uint32_t i = 0; i < pairs; ++i) {
        to_rts(qps[2 * i], qps[2 * i + 1]->qp_num, gid);
        to_rts(qps[2 * i + 1], qps[2 * i]->qp_num, gid);
    }
    double connect_s = secs_since(t0);
    // Let the device settle (it looks at each QP's rings once after RTS).
    usleep(200000);
    Mem connected = read_mem(pid);
    size_t nqp = qps.size();
    std::printf("qps=%zu pairs=%u send_wr=%u recv_wr=%u create_s=%.2f connect_s=%.2f\n", nqp, pairs,
                send_wr, recv_wr, create_s, connect_s);
    print_mem("before", before);
    print_mem("connected", connected);
    if (pid > 0)
        std::printf("per_qp_rss_bytes=%.0f per_qp_anon_bytes=%.0f per_qp_shmem_bytes=%.0f\n",
                    double(connected.rss - before.rss) * 1024 / double(nqp),
                    double(connected.anon - before.anon) * 1024 / double(nqp),
                    double(connected.shmem - before.shmem) * 1024 / double(nqp));
    std::fflush(stdout);
    if (exit_connected) _exit(0);

    // Probes: pair p (spread over the range) sends its index from the even QP to the odd one.
    t0 = Clock::now();
    for (long k = 0; k < probe; ++k) {
        uint32_t p = uint32_t(uint64_t(k) * pairs / uint64_t(probe));
        uint64_t* out = &buf[2 * size_t(k)];
        uint64_t* in = out + 1;
        *out = 0x5ca1e00000000000ull | p;
        *in = 0;
        ibv_sge rs{reinterpret_cast<uintptr_t>(in), 8, mr->lkey};
        ibv_recv_wr rw{};
        rw.wr_id = uint64_t(k) << 1 | 1;
        rw.sg_list = &rs;
        rw.num_sge = 1;
        ibv_recv_wr* rbad = nullptr;
        REQUIRE(ibv_post_recv(qps[2 * p + 1], &rw, &rbad) == 0, "post_recv pair %u", p);
        ibv_sge ss{reinterpret_cast<uintptr_t>(out), 8, mr->lkey};
        ibv_send_wr sw{};
        sw.wr_id = uint64_t(k) << 1;
        sw.sg_list = &ss;
        sw.num_sge = 1;
        sw.opcode = IBV_WR_SEND;
        sw.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* sbad = nullptr;
        REQUIRE(ibv_post_send(qps[2 * p], &sw, &sbad) == 0, "post_send pair %u", p);
    }
    long want = 2 * probe, got = 0;
    while (got < want) {
        ibv_wc wc[32];
        int n = ibv_poll_cq(cq, 32, wc);
        REQUIRE(n >= 0, "poll_cq: %d", n);
        for (int j = 0; j < n; ++j) {
            REQUIRE(wc[j].status == IBV_WC_SUCCESS, "probe wr_id %llu: %s",
                    (unsigned long long)wc[j].wr_id, ibv_wc_status_str(wc[j].status));
            if (wc[j].wr_id & 1) {
                long k = long(wc[j].wr_id >> 1);
                uint32_t p = uint32_t(uint64_t(k) * pairs / uint64_t(probe));
                REQUIRE(wc[j].byte_len == 8 && buf[2 * size_t(k) + 1] == buf[2 * size_t(k)],
                        "pair %u: received %u bytes 0x%llx, sent 0x%llx", p, wc[j].byte_len,
                        (unsigned long long)buf[2 * size_t(k) + 1],
                        (unsigned long long)buf[2 * size_t(k)]);
                REQUIRE(wc[j].qp_num == qps[2 * p + 1]->qp_num, "pair %u: receive on QP 0x%x", p,
                        wc[j].qp_num);
            }
        }
        got += n;
        REQUIRE(secs_since(t0) < 60, "probes: %ld of %ld completions in 60 s", got, want);
        if (n == 0) usleep(100);
    }
    std::printf("probes=%ld probe_s=%.2f\n", probe, secs_since(t0));

    t0 = Clock::now();
    for (ibv_qp* qp : qps) REQUIRE(ibv_destroy_qp(qp) == 0, "destroy_qp 0x%x", qp->qp_num);
    double destroy_s = secs_since(t0);
    Mem after = read_mem(pid);
    std::printf("destroy_s=%.2f\n", destroy_s);
    print_mem("destroyed", after);
    REQUIRE(ibv_destroy_cq(cq) == 0, "destroy_cq");
    REQUIRE(ibv_dereg_mr(mr) == 0, "dereg_mr");
    REQUIRE(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
    REQUIRE(ibv_close_device(ctx) == 0, "close_device");
    std::printf("all checks passed\n");
    return 0;
}
