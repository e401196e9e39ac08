// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Plain helpers for everything in tests/ that drives the public verbs API: the transport_tests
// fixture (fixture.h) uses them, and so do the programs and GoogleTests that run against
// devices of their own (tests/integration, tests/bench), so each of these set-up steps is
// written once. No GoogleTest and no CHECK here: each caller reports a failure its own way.
#pragma once

#include <infiniband/verbs.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace uroce::verbs_util {

// The device called `name` (ibv_get_device_name) opened, or nullptr: not listed, or
// ibv_open_device failed (errno says why).
inline ibv_context* open_device(const char* name) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) return nullptr;
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n; ++i)
        if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    return ctx;
}

inline const char* qp_state_name(int s) {
    static const char* kStates[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return s >= 0 && s <= 6 ? kStates[s] : "?";
}

// The QP's state as the device reports it (ibv_query_qp), or -1 with the verb's answer in
// *err.
inline int query_qp_state(ibv_qp* qp, int* err) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    *err = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
    return *err ? -1 : int(attr.qp_state);
}

// Polls `cq` for one completion for up to `timeout` seconds: 1 (in *wc), 0 when none came,
// or ibv_poll_cq's negative answer. After a burst of empty polls it sleeps 50 us between
// them: the devices on the same host need the CPU more than the poller does.
inline int poll_one(ibv_cq* cq, ibv_wc* wc, double timeout) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (uint32_t empty = 0;; ++empty) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n != 0) return n;
        if (empty > 32) {
            timespec ts{0, 50000};
            nanosleep(&ts, nullptr);
            if (std::chrono::duration<double>(Clock::now() - start).count() > timeout) return 0;
        }
    }
}

// What shell command `cmd` writes to its standard output.
inline std::string command_output(const std::string& cmd) {
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
        pclose(f);
    }
    return out;
}

// In the output of `uroce res` or `uroce counters`: the number after word `key` on the first
// line that starts with `line_prefix`, or -1.
inline long counter(const std::string& dump, const std::string& line_prefix,
                    const std::string& key) {
    std::istringstream in(dump);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(line_prefix, 0) != 0) continue;
        std::istringstream words(line);
        std::string w;
        while (words >> w)
            if (w == key && (words >> w)) return std::atol(w.c_str());
        return -1;
    }
    return -1;
}

// The IPv4-mapped GID (::ffff:a.b.c.d) of an address in network order, as a uroce device
// reports its own at index 0.
inline ibv_gid ipv4_gid(uint32_t ip_be) {
    ibv_gid g{};
    g.raw[10] = g.raw[11] = 0xff;
    std::memcpy(&g.raw[12], &ip_be, 4);
    return g;
}

// The attributes RESET -> INIT -> RTR -> RTS sets that are not the peer's.
struct PathAttrs {
    int access = 0;  // qp_access_flags, as given (the caller decides what its type takes)
    ibv_mtu mtu = IBV_MTU_1024;
    uint8_t timeout = 14;  // 67 ms: a loaded host never makes a live peer look dead
    uint8_t retry_cnt = 7, rnr_retry = 7;
    uint8_t min_rnr_timer = 1;
    uint8_t max_rd_atomic = 1, max_dest_rd_atomic = 1;
};

// Moves an RC or UC QP, or an XRC INI or TGT QP, of type `type` through INIT and RTR to RTS
// (only to RTR when `to_rts` is false) towards QP `dest_qpn` at `dgid`, with the attribute
// masks each type takes (the IBTA's table: an RC QP and an XRC TGT QP are responders, an RC
// QP and an XRC INI QP requesters). Returns 0, or ibv_modify_qp's answer for the state in
// *failed.
inline int connect_qp(ibv_qp* qp, ibv_qp_type type, const ibv_gid& dgid, uint32_t dest_qpn,
                      uint32_t my_psn, uint32_t peer_psn, const PathAttrs& p, bool to_rts = true,
                      ibv_qp_state* failed = nullptr) {
    const bool rc = type == IBV_QPT_RC;
    const bool responder = rc || type == IBV_QPT_XRC_RECV;
    const bool requester = rc || type == IBV_QPT_XRC_SEND;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = p.access;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    int e = ibv_modify_qp(qp, &a, mask);
    if (!e) {
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = p.mtu;
        a.dest_qp_num = dest_qpn;
        a.rq_psn = peer_psn;
        a.max_dest_rd_atomic = p.max_dest_rd_atomic;
        a.min_rnr_timer = p.min_rnr_timer;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = dgid;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = 1;
        mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (responder) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        e = ibv_modify_qp(qp, &a, mask);
    }
    if (!e && to_rts) {
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = p.timeout;
        a.retry_cnt = p.retry_cnt;
        a.rnr_retry = p.rnr_retry;
        a.sq_psn = my_psn;
        a.max_rd_atomic = p.max_rd_atomic;
        mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (requester)
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        else if (responder)
            mask |= IBV_QP_TIMEOUT;  // XRC TGT
        e = ibv_modify_qp(qp, &a, mask);
    }
    if (e && failed) *failed = a.qp_state;
    return e;
}

// For ibv_create_srq_ex: an XRC SRQ of `max_wr` one-SGE receives in `xrcd` and `pd`, completing
// on `cq`.
inline ibv_srq_init_attr_ex xrc_srq_attr(ibv_xrcd* xrcd, ibv_cq* cq, ibv_pd* pd, uint32_t max_wr) {
    return {.attr = {.max_wr = max_wr, .max_sge = 1},
            .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
                         IBV_SRQ_INIT_ATTR_PD,
            .srq_type = IBV_SRQT_XRC,
            .pd = pd,
            .xrcd = xrcd,
            .cq = cq};
}

// For ibv_create_qp_ex: an XRC INI QP in `pd` of `max_send_wr` WRs of `max_send_sge` SGEs,
// completing on `cq`.
inline ibv_qp_init_attr_ex xrc_ini_attr(ibv_pd* pd, ibv_cq* cq, uint32_t max_send_wr,
                                        uint32_t max_send_sge) {
    return {.send_cq = cq,
            .cap = {.max_send_wr = max_send_wr, .max_send_sge = max_send_sge},
            .qp_type = IBV_QPT_XRC_SEND,
            .comp_mask = IBV_QP_INIT_ATTR_PD,
            .pd = pd};
}

// For ibv_create_qp_ex: an XRC TGT QP in `xrcd`.
inline ibv_qp_init_attr_ex xrc_tgt_attr(ibv_xrcd* xrcd) {
    return {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};
}

}  // namespace uroce::verbs_util
