// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Checks for the test programs that drive the verbs API (built against the system's
// <infiniband/verbs.h>, run over the drop-in library): CHECK reports a mismatch and goes on,
// so one run shows every broken rule; REQUIRE ends the program when the following steps make
// no sense (a NULL object, a stuck transport).
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/transport/verbs_util.h"

inline int g_failures = 0;              // CHECKs that failed
inline const char* g_role = nullptr;    // shown in each message when set (a forked role)
inline void (*g_on_fatal)() = nullptr;  // runs before a failed REQUIRE exits

inline void check_report(const char* kind, const char* file, int line, const char* cond) {
    if (g_role)
        std::fprintf(stderr, "%s [%s] %s:%d: %s: ", kind, g_role, file, line, cond);
    else
        std::fprintf(stderr, "%s %s:%d: %s: ", kind, file, line, cond);
}

// A failed REQUIRE, after its message: g_on_fatal, then the end of the program.
[[noreturn]] inline void require_failed() {
    if (g_on_fatal) g_on_fatal();
    std::exit(1);
}

// The message of a failed check (KIND, where, the condition's text, then the caller's printf
// arguments), then `on_fail`. (The text is made by CHECK and REQUIRE, before the condition's
// macros expand.)
#define VERBS_CHECK_(kind, on_fail, ok, text, ...)        \
    do {                                                  \
        if (!(ok)) {                                      \
            check_report(kind, __FILE__, __LINE__, text); \
            std::fprintf(stderr, __VA_ARGS__);            \
            std::fputc('\n', stderr);                     \
            on_fail;                                      \
        }                                                 \
    } while (0)

#define CHECK(cond, ...) VERBS_CHECK_("FAIL", ++g_failures, cond, #cond, __VA_ARGS__)
#define REQUIRE(cond, ...) VERBS_CHECK_("FATAL", require_failed(), cond, #cond, __VA_ARGS__)

// Opens the device called `want` (ibv_get_device_name), or ends the program.
inline ibv_context* open_by_name(const char* want) {
    ibv_context* ctx = uroce::verbs_util::open_device(want);
    REQUIRE(ctx, "cannot open device %s: %s", want, std::strerror(errno));
    return ctx;
}

// Moves the RC QP `qp` through INIT and RTR to RTS towards QP `dest_qpn` at `dgid`, PSN `psn`
// both ways (verbs_util::connect_qp), or ends the program naming the state refused; `who`,
// when given, starts the message.
inline void rc_to_rts(ibv_qp* qp, const ibv_gid& dgid, uint32_t dest_qpn, uint32_t psn,
                      const uroce::verbs_util::PathAttrs& p, const char* who = nullptr) {
    ibv_qp_state failed = IBV_QPS_RESET;
    int e =
        uroce::verbs_util::connect_qp(qp, IBV_QPT_RC, dgid, dest_qpn, psn, psn, p, true, &failed);
    REQUIRE(e == 0, "%s%s%s: %s", who ? who : "", who ? ": " : "",
            uroce::verbs_util::qp_state_name(failed), std::strerror(e));
}
