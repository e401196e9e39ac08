// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Tests for the QP state machine attribute-mask rules (emu/verbs/qp_state.h).
//
// The expectation is written independently of the implementation's table: the table is organised
// per transition with one cell per QP type, while the description here is organised per
// attribute ("where is QKEY required, where is it optional, for which types"), plus a separate
// list of legal state edges. A copying mistake would have to be made twice, transposed, to hide.
#include "emu/verbs/qp_state.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace uroce::emu {
namespace {

constexpr ibv_qp_state kStates[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                    IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};

struct TypeName {
    ibv_qp_type type;
    const char* name;
};
constexpr TypeName kTypes[] = {
    {IBV_QPT_RC, "RC"},
    {IBV_QPT_UC, "UC"},
    {IBV_QPT_UD, "UD"},
    {IBV_QPT_XRC_SEND, "XRC_SEND"},
    {IBV_QPT_XRC_RECV, "XRC_RECV"},
    {IBV_QPT_RAW_PACKET, "RAW"},
};

// ---------------------------------------------------------------------------------------------
// Independent description, part 1: which state edges exist at all (for every QP type).
// Everything can be reset; everything but RESET can be errored; the forward path is
// RESET>INIT>RTR>RTS, with RTS<>SQD for draining and SQE>RTS for recovery; INIT, RTS and SQD
// accept attribute changes in place.
const char* const kLegalEdges =
    "RESET>RESET RESET>INIT "
    "INIT>RESET INIT>ERR INIT>INIT INIT>RTR "
    "RTR>RESET RTR>ERR RTR>RTS "
    "RTS>RESET RTS>ERR RTS>RTS RTS>SQD "
    "SQD>RESET SQD>ERR SQD>RTS SQD>SQD "
    "SQE>RESET SQE>ERR SQE>RTS "
    "ERR>RESET ERR>ERR";

// Independent description, part 2: per attribute, which types require it on which edges and
// which types may optionally pass it on which edges. Edges not mentioned take no attributes.
struct AttrRule {
    uint64_t bit;
    const char* types;  // space-separated type names from kTypes
    const char* required_on;
    const char* optional_on;
};

const AttrRule kAttrRules[] = {
    // Addressing set up at INIT, revisable while INIT; P_Key also at RTR and while drained.
    {IBV_QP_PKEY_INDEX, "RC UC UD XRC_SEND XRC_RECV", "RESET>INIT", "INIT>INIT INIT>RTR SQD>SQD"},
    {IBV_QP_PORT, "RC UC UD XRC_SEND XRC_RECV", "RESET>INIT", "INIT>INIT"},
    {IBV_QP_PORT, "RC XRC_SEND XRC_RECV", "", "SQD>SQD"},
    {IBV_QP_PORT, "RAW", "RESET>INIT", ""},
    // Remote access rights: connected types only; UD uses a Q_Key instead.
    {IBV_QP_ACCESS_FLAGS, "RC UC XRC_SEND XRC_RECV", "RESET>INIT",
     "INIT>INIT INIT>RTR RTR>RTS RTS>RTS SQD>RTS SQD>SQD"},
    {IBV_QP_ACCESS_FLAGS, "UC", "", "SQE>RTS"},
    {IBV_QP_QKEY, "UD", "RESET>INIT", "INIT>INIT INIT>RTR RTR>RTS RTS>RTS SQD>RTS SQD>SQD SQE>RTS"},
    // The connection's peer and receive PSN are fixed at RTR.
    {IBV_QP_AV, "RC UC XRC_SEND XRC_RECV", "INIT>RTR", "SQD>SQD"},
    {IBV_QP_PATH_MTU, "RC UC XRC_SEND XRC_RECV", "INIT>RTR", ""},
    {IBV_QP_DEST_QPN, "RC UC XRC_SEND XRC_RECV", "INIT>RTR", ""},
    {IBV_QP_RQ_PSN, "RC UC XRC_SEND XRC_RECV", "INIT>RTR", ""},
    // Responder-side resources of a reliable receiver.
    {IBV_QP_MAX_DEST_RD_ATOMIC, "RC XRC_RECV", "INIT>RTR", "SQD>SQD"},
    {IBV_QP_MIN_RNR_TIMER, "RC XRC_RECV", "INIT>RTR", "RTR>RTS RTS>RTS SQD>RTS SQD>SQD"},
    // Requester side is fixed at RTS.
    {IBV_QP_SQ_PSN, "RC UC UD XRC_SEND XRC_RECV", "RTR>RTS", ""},
    {IBV_QP_TIMEOUT, "RC XRC_SEND XRC_RECV", "RTR>RTS", "SQD>SQD"},
    {IBV_QP_RETRY_CNT, "RC XRC_SEND", "RTR>RTS", "SQD>SQD"},
    {IBV_QP_RNR_RETRY, "RC XRC_SEND", "RTR>RTS", "SQD>SQD"},
    {IBV_QP_MAX_QP_RD_ATOMIC, "RC XRC_SEND", "RTR>RTS", "SQD>SQD"},
    // Automatic path migration.
    {IBV_QP_ALT_PATH, "RC UC XRC_SEND XRC_RECV", "", "INIT>RTR RTR>RTS RTS>RTS SQD>RTS SQD>SQD"},
    {IBV_QP_PATH_MIG_STATE, "RC UC XRC_SEND XRC_RECV", "", "RTR>RTS RTS>RTS SQD>RTS SQD>SQD"},
    // "I think the QP is in state X" guard, only on the ways into RTS.
    {IBV_QP_CUR_STATE, "RC UC UD XRC_SEND XRC_RECV", "", "RTR>RTS RTS>RTS SQD>RTS"},
    {IBV_QP_CUR_STATE, "UC UD", "", "SQE>RTS"},
    {IBV_QP_EN_SQD_ASYNC_NOTIFY, "RC UC UD XRC_SEND XRC_RECV", "", "RTS>SQD"},
    // Packet pacing exists for raw Ethernet QPs only.
    {IBV_QP_RATE_LIMIT, "RAW", "", "RTR>RTS RTS>RTS"},
};

std::vector<std::string> words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

int state_index(const std::string& name) {
    for (int i = 0; i < 7; ++i) {
        if (name == qp_state_name(kStates[i])) return i;
    }
    ADD_FAILURE() << "bad state name in test spec: " << name;
    return 0;
}

using Edge = std::pair<int, int>;  // indices into kStates

Edge parse_edge(const std::string& e) {
    const auto gt = e.find('>');
    return {state_index(e.substr(0, gt)), state_index(e.substr(gt + 1))};
}

struct Expect {
    bool legal = false;
    uint64_t req = 0;
    uint64_t opt = 0;
};

// expect[type_index][from][to], built once from the two descriptions above.
struct Model {
    Expect e[std::size(kTypes)][7][7];

    Model() {
        std::set<Edge> legal;
        for (const auto& w : words(kLegalEdges)) legal.insert(parse_edge(w));
        for (auto& per_type : e) {
            for (const Edge& ed : legal) per_type[ed.first][ed.second].legal = true;
        }
        for (const AttrRule& r : kAttrRules) {
            for (const auto& tname : words(r.types)) {
                std::size_t ti = std::size(kTypes);
                for (std::size_t i = 0; i < std::size(kTypes); ++i) {
                    if (tname == kTypes[i].name) ti = i;
                }
                if (ti == std::size(kTypes)) {
                    ADD_FAILURE() << "bad type in test spec: " << tname;
                    continue;
                }
                for (const auto& w : words(r.required_on)) {
                    const Edge ed = parse_edge(w);
                    EXPECT_TRUE(legal.count(ed)) << "spec names attribute on illegal edge " << w;
                    e[ti][ed.first][ed.second].req |= r.bit;
                }
                for (const auto& w : words(r.optional_on)) {
                    const Edge ed = parse_edge(w);
                    EXPECT_TRUE(legal.count(ed)) << "spec names attribute on illegal edge " << w;
                    e[ti][ed.first][ed.second].opt |= r.bit;
                }
            }
        }
    }
};

const Model& model() {
    static const Model m;
    return m;
}

std::string where(const TypeName& t, ibv_qp_state cur, ibv_qp_state next) {
    return std::string(t.name) + " " + qp_state_name(cur) + "->" + qp_state_name(next);
}

// Calls f(type, index of the current state, of the next, what the model expects) for every
// QP type and pair of states, stopping at a fatal failure.
template <typename F>
void for_each_transition(F f) {
    const Model& m = model();
    for (std::size_t ti = 0; ti < std::size(kTypes); ++ti)
        for (int c = 0; c < 7; ++c)
            for (int n = 0; n < 7; ++n) {
                f(kTypes[ti], c, n, m.e[ti][c][n]);
                if (::testing::Test::HasFatalFailure()) return;
            }
}

// ---------------------------------------------------------------------------------------------

TEST(QpState, SpecItselfIsSane) {
    // Guard against a typo in the test's own description: required and optional never overlap,
    // and IBV_QP_STATE is never listed as an attribute.
    for_each_transition([&](const TypeName& t, int c, int n, const Expect& x) {
        EXPECT_EQ(x.req & x.opt, 0u) << where(t, kStates[c], kStates[n]);
        EXPECT_EQ((x.req | x.opt) & IBV_QP_STATE, 0u);
    });
}

TEST(QpState, EveryTransitionMatchesIndependentSpec) {
    for_each_transition([&](const TypeName& t, int c, int n, const Expect& x) {
        const ibv_qp_state cur = kStates[c];
        const ibv_qp_state next = kStates[n];
        SCOPED_TRACE(where(t, cur, next));
        const uint64_t base = IBV_QP_STATE | x.req;

        if (!x.legal) {
            EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, IBV_QP_STATE));
            for (int b = 0; b < 64; ++b) {
                EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, IBV_QP_STATE | (uint64_t{1} << b)))
                    << "bit " << b;
            }
            EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, ~uint64_t{0}));
            return;
        }

        // Exactly the required set is accepted.
        EXPECT_TRUE(qp_modify_is_ok(t.type, cur, next, base));
        // Required + all optional is accepted, and so is each optional bit alone.
        EXPECT_TRUE(qp_modify_is_ok(t.type, cur, next, base | x.opt));
        for (int b = 0; b < 64; ++b) {
            const uint64_t bit = uint64_t{1} << b;
            if (x.opt & bit) {
                EXPECT_TRUE(qp_modify_is_ok(t.type, cur, next, base | bit)) << "bit " << b;
            }
        }
        // Omitting any single required bit fails, even with all optional bits present.
        for (int b = 0; b < 64; ++b) {
            const uint64_t bit = uint64_t{1} << b;
            if (x.req & bit) {
                EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, base & ~bit))
                    << "missing bit " << b;
                EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, (base | x.opt) & ~bit))
                    << "missing bit " << b;
            }
        }
        // Any single bit outside required|optional|STATE fails, including bits verbs.h
        // does not define (the SMAC/VID era bits, high bits of the 64-bit mask).
        for (int b = 0; b < 64; ++b) {
            const uint64_t bit = uint64_t{1} << b;
            if ((x.req | x.opt | IBV_QP_STATE) & bit) continue;
            EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, base | bit)) << "extra bit " << b;
            EXPECT_FALSE(qp_modify_is_ok(t.type, cur, next, base | x.opt | bit))
                << "extra bit " << b;
        }
    });
}

TEST(QpState, RandomMasksAgreeWithSpec) {
    // Mixed masks (several optional bits, some required bits missing, a stray bit) are where an
    // implementation that only handles one deviation at a time would slip.
    std::mt19937_64 rng(0x5eed'0ce5);
    for_each_transition([&](const TypeName& t, int c, int n, const Expect& x) {
        const uint64_t relevant = x.req | x.opt;
        for (int i = 0; i < 200; ++i) {
            uint64_t mask = IBV_QP_STATE | (rng() & relevant);
            if (rng() % 4 == 0) mask |= uint64_t{1} << (rng() % 64);
            const bool expected =
                x.legal && (mask & x.req) == x.req && (mask & ~(x.req | x.opt | IBV_QP_STATE)) == 0;
            ASSERT_EQ(qp_modify_is_ok(t.type, kStates[c], kStates[n], mask), expected)
                << where(t, kStates[c], kStates[n]) << " mask 0x" << std::hex << mask;
        }
    });
}

TEST(QpState, ResetAndErrTakeOnlyState) {
    for (const TypeName& t : kTypes) {
        for (ibv_qp_state cur : kStates) {
            SCOPED_TRACE(std::string(t.name) + " from " + qp_state_name(cur));
            EXPECT_TRUE(qp_modify_is_ok(t.type, cur, IBV_QPS_RESET, IBV_QP_STATE));
            // The kernel (and so every RoCE NIC) rejects RESET -> ERR; parity over symmetry.
            EXPECT_EQ(qp_modify_is_ok(t.type, cur, IBV_QPS_ERR, IBV_QP_STATE),
                      cur != IBV_QPS_RESET);
            for (int b = 1; b < 64; ++b) {
                const uint64_t mask = IBV_QP_STATE | (uint64_t{1} << b);
                EXPECT_FALSE(qp_modify_is_ok(t.type, cur, IBV_QPS_RESET, mask)) << "bit " << b;
                EXPECT_FALSE(qp_modify_is_ok(t.type, cur, IBV_QPS_ERR, mask)) << "bit " << b;
            }
        }
    }
}

TEST(QpState, AttributeOnlyModifyIgnoresNext) {
    // Without IBV_QP_STATE the caller's qp_state field is garbage, so `next` must not matter.
    const Model& m = model();
    for (std::size_t ti = 0; ti < std::size(kTypes); ++ti) {
        const TypeName& t = kTypes[ti];
        for (int c = 0; c < 7; ++c) {
            const Expect& stay = m.e[ti][c][c];
            for (ibv_qp_state next : kStates) {
                SCOPED_TRACE(where(t, kStates[c], next) + " without IBV_QP_STATE");
                EXPECT_EQ(qp_modify_is_ok(t.type, kStates[c], next, stay.req), stay.legal);
                for (int b = 1; b < 64; ++b) {
                    const uint64_t bit = uint64_t{1} << b;
                    const bool expected =
                        stay.legal && ((stay.req | bit) & ~(stay.req | stay.opt)) == 0;
                    EXPECT_EQ(qp_modify_is_ok(t.type, kStates[c], next, stay.req | bit), expected)
                        << "bit " << b;
                }
            }
            EXPECT_EQ(qp_modify_is_ok(t.type, kStates[c], IBV_QPS_UNKNOWN, stay.req), stay.legal);
        }
    }
    // Spot checks that read like the man page.
    EXPECT_TRUE(qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RESET, IBV_QP_ACCESS_FLAGS));
    EXPECT_TRUE(qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTS, IBV_QP_PORT));
    EXPECT_TRUE(qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, 0));
    EXPECT_FALSE(qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER));
    EXPECT_FALSE(qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTR, 0));
    EXPECT_FALSE(qp_modify_is_ok(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_QKEY));
}

TEST(QpState, CurStateOnlyOnTheWaysIntoRts) {
    // Whatever else is in the mask, IBV_QP_CUR_STATE must never make it through on a transition
    // other than RTR/RTS/SQD/SQE -> RTS (the kernel's global rule, checked against the
    // implementation directly rather than via the spec above).
    for_each_transition([&](const TypeName& t, int c, int n, const Expect& x) {
        for (uint64_t attrs : {x.req, x.req | x.opt}) {
            const uint64_t mask = IBV_QP_STATE | IBV_QP_CUR_STATE | attrs;
            if (!qp_modify_is_ok(t.type, kStates[c], kStates[n], mask)) continue;
            EXPECT_EQ(kStates[n], IBV_QPS_RTS) << where(t, kStates[c], kStates[n]);
            EXPECT_TRUE(c == IBV_QPS_RTR || c == IBV_QPS_RTS || c == IBV_QPS_SQD ||
                        c == IBV_QPS_SQE)
                << where(t, kStates[c], kStates[n]);
        }
    });
    EXPECT_TRUE(
        qp_modify_is_ok(IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE));
    EXPECT_FALSE(
        qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE));
    EXPECT_FALSE(
        qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_CUR_STATE));
    EXPECT_FALSE(
        qp_modify_is_ok(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_CUR_STATE));
}

// The exact masks rdma-core's example programs pass; these must work as on hardware.
TEST(QpState, RdmaCoreExampleProgramsBringUp) {
    const uint64_t S = IBV_QP_STATE;
    // What RC, UC and XRC QPs take to INIT and RTR, a responder (RC, XRC target) more to RTR,
    // and a requester that retries (RC, XRC initiator) to RTS.
    const uint64_t kInit = S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    const uint64_t kRtr = S | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    const uint64_t kResponderRtr = kRtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    const uint64_t kRetryingRts = S | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    // ibv_rc_pingpong / ibv_srq_pingpong
    EXPECT_EQ(qp_modify_check(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kInit), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kResponderRtr), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRetryingRts), 0);
    // ibv_uc_pingpong
    EXPECT_EQ(qp_modify_check(IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, kInit), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, kRtr), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, S | IBV_QP_SQ_PSN), 0);
    // ibv_ud_pingpong
    EXPECT_EQ(qp_modify_check(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT,
                              S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
              0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, S), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, S | IBV_QP_SQ_PSN), 0);
    // ibv_xsrq_pingpong: target (recv) and initiator (send) halves
    for (ibv_qp_type t : {IBV_QPT_XRC_RECV, IBV_QPT_XRC_SEND}) {
        EXPECT_EQ(qp_modify_check(t, IBV_QPS_RESET, IBV_QPS_INIT, kInit), 0);
    }
    EXPECT_EQ(qp_modify_check(IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, kResponderRtr), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS,
                              S | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN),
              0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR, kRtr), 0);
    EXPECT_EQ(qp_modify_check(IBV_QPT_XRC_SEND, IBV_QPS_RTR, IBV_QPS_RTS, kRetryingRts), 0);
}

TEST(QpState, CommonMistakesAreEinval) {
    const uint64_t S = IBV_QP_STATE;
    // UD with RC-style INIT attributes (ACCESS_FLAGS instead of QKEY).
    EXPECT_EQ(qp_modify_check(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT,
                              S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
              EINVAL);
    // RC RTS forgetting MAX_QP_RD_ATOMIC.
    EXPECT_EQ(
        qp_modify_check(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS,
                        S | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN),
        EINVAL);
    // The XRC target has no requester, so requester retry counters are not accepted.
    EXPECT_EQ(qp_modify_check(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS,
                              S | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT),
              EINVAL);
    // Skipping a state.
    EXPECT_EQ(qp_modify_check(IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTS, S | IBV_QP_SQ_PSN), EINVAL);
    EXPECT_EQ(qp_modify_check(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_RTR, S), EINVAL);
    // Rate limit is a raw-packet feature only.
    EXPECT_EQ(qp_modify_check(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, S | IBV_QP_RATE_LIMIT), EINVAL);
    EXPECT_EQ(qp_modify_check(IBV_QPT_RAW_PACKET, IBV_QPS_RTS, IBV_QPS_RTS, S | IBV_QP_RATE_LIMIT),
              0);
    // CAP (resizing queues) is never accepted through modify.
    EXPECT_EQ(qp_modify_check(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, S | IBV_QP_CAP), EINVAL);
}

TEST(QpState, UnknownTypesAndStatesAreRejected) {
    const auto bad_type = [](int v) { return static_cast<ibv_qp_type>(v); };
    for (int v : {0, 1, 5, 6, 7, 11, static_cast<int>(IBV_QPT_DRIVER), -1}) {
        for (ibv_qp_state cur : kStates) {
            for (ibv_qp_state next : kStates) {
                EXPECT_FALSE(qp_modify_is_ok(bad_type(v), cur, next, IBV_QP_STATE)) << v;
                EXPECT_FALSE(qp_modify_is_ok(bad_type(v), cur, next, 0)) << v;
            }
        }
    }
    const ibv_qp_state bad_states[] = {IBV_QPS_UNKNOWN, static_cast<ibv_qp_state>(-1),
                                       static_cast<ibv_qp_state>(100)};
    for (const TypeName& t : kTypes) {
        for (ibv_qp_state bad : bad_states) {
            for (ibv_qp_state good : kStates) {
                EXPECT_FALSE(qp_modify_is_ok(t.type, bad, good, IBV_QP_STATE));
                EXPECT_FALSE(qp_modify_is_ok(t.type, good, bad, IBV_QP_STATE));
                EXPECT_FALSE(qp_modify_is_ok(t.type, bad, good, 0));
            }
        }
    }
}

TEST(QpState, CheckIsZeroOrEinval) {
    for (const TypeName& t : kTypes) {
        for (ibv_qp_state cur : kStates) {
            for (ibv_qp_state next : kStates) {
                for (uint64_t mask :
                     {uint64_t{0}, uint64_t{IBV_QP_STATE}, uint64_t{IBV_QP_STATE | IBV_QP_PORT}}) {
                    const int rc = qp_modify_check(t.type, cur, next, mask);
                    EXPECT_EQ(rc, qp_modify_is_ok(t.type, cur, next, mask) ? 0 : EINVAL);
                }
            }
        }
    }
}

TEST(QpState, StateNames) {
    EXPECT_STREQ(qp_state_name(IBV_QPS_RESET), "RESET");
    EXPECT_STREQ(qp_state_name(IBV_QPS_INIT), "INIT");
    EXPECT_STREQ(qp_state_name(IBV_QPS_RTR), "RTR");
    EXPECT_STREQ(qp_state_name(IBV_QPS_RTS), "RTS");
    EXPECT_STREQ(qp_state_name(IBV_QPS_SQD), "SQD");
    EXPECT_STREQ(qp_state_name(IBV_QPS_SQE), "SQE");
    EXPECT_STREQ(qp_state_name(IBV_QPS_ERR), "ERR");
    EXPECT_STREQ(qp_state_name(IBV_QPS_UNKNOWN), "UNKNOWN");
    EXPECT_STREQ(qp_state_name(static_cast<ibv_qp_state>(-3)), "UNKNOWN");
}

}  // namespace
}  // namespace uroce::emu
