// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/verbs/qp_state.h"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdio>

namespace uroce::emu {
namespace {

// Columns of the per-type masks below. XRC_SEND is the initiator half of an XRC connection and
// XRC_RECV the target half, so their cells differ from RC exactly where a half has no use for an
// attribute (e.g. XRC_RECV never sends requests, so it has no retry counters).
enum TypeCol : std::size_t { kRc, kUc, kUd, kXrcSend, kXrcRecv, kRaw, kNumTypeCols };

constexpr int type_col(ibv_qp_type type) {
    switch (type) {
    case IBV_QPT_RC: return kRc;
    case IBV_QPT_UC: return kUc;
    case IBV_QPT_UD: return kUd;
    case IBV_QPT_XRC_SEND: return kXrcSend;
    case IBV_QPT_XRC_RECV: return kXrcRecv;
    case IBV_QPT_RAW_PACKET: return kRaw;
    default: return -1;
    }
}

struct Masks {
    uint32_t req = 0;  // every one of these must be in the mask
    uint32_t opt = 0;  // any of these may be in the mask
};

struct Transition {
    ibv_qp_state from;
    ibv_qp_state to;
    std::array<Masks, kNumTypeCols> by_type;  // indexed by TypeCol
};

// Short aliases so each table cell fits on a line; they are the verbs.h bits unchanged.
constexpr uint32_t CUR = IBV_QP_CUR_STATE;
constexpr uint32_t SQD_NOTIFY = IBV_QP_EN_SQD_ASYNC_NOTIFY;
constexpr uint32_t ACCESS = IBV_QP_ACCESS_FLAGS;
constexpr uint32_t PKEY = IBV_QP_PKEY_INDEX;
constexpr uint32_t PORT = IBV_QP_PORT;
constexpr uint32_t QKEY = IBV_QP_QKEY;
constexpr uint32_t AV = IBV_QP_AV;
constexpr uint32_t MTU = IBV_QP_PATH_MTU;
constexpr uint32_t TIMEOUT = IBV_QP_TIMEOUT;
constexpr uint32_t RETRY = IBV_QP_RETRY_CNT;
constexpr uint32_t RNR_RETRY = IBV_QP_RNR_RETRY;
constexpr uint32_t RQ_PSN = IBV_QP_RQ_PSN;
constexpr uint32_t RD_ATOMIC = IBV_QP_MAX_QP_RD_ATOMIC;
constexpr uint32_t ALT = IBV_QP_ALT_PATH;
constexpr uint32_t MIN_RNR = IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t SQ_PSN = IBV_QP_SQ_PSN;
constexpr uint32_t DEST_RD_ATOMIC = IBV_QP_MAX_DEST_RD_ATOMIC;
constexpr uint32_t MIG = IBV_QP_PATH_MIG_STATE;
constexpr uint32_t DQPN = IBV_QP_DEST_QPN;
constexpr uint32_t RATE = IBV_QP_RATE_LIMIT;

// Transitions into RESET/ERR (and staying in RESET/ERR) carry no attributes for any type.
constexpr std::array<Masks, kNumTypeCols> kNoAttrs{};

// The legal transitions. A (from, to) pair absent from this list is illegal for every type; a
// listed pair is legal for every supported type, with that type's required/optional bits.
// Cells follow the per-transition attribute lists of IBTA vol. 1 as the Linux kernel enforces
// them (ib_modify_qp_is_ok), so a mask that fails on a real RoCE NIC fails here too. Notable quirks
// kept on purpose for parity: RESET -> ERR is not legal; XRC_SEND must still pass RQ_PSN to RTR;
// RATE_LIMIT is only accepted for RAW_PACKET; SQE -> RTS for RC/XRC (which never enter SQE,
// they go straight to ERR) is legal with no attributes.
// clang-format off
constexpr Transition kTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_RESET, IBV_QPS_INIT, {{
        /* RC       */ {PKEY | PORT | ACCESS, 0},
        /* UC       */ {PKEY | PORT | ACCESS, 0},
        /* UD       */ {PKEY | PORT | QKEY, 0},
        /* XRC_SEND */ {PKEY | PORT | ACCESS, 0},
        /* XRC_RECV */ {PKEY | PORT | ACCESS, 0},
        /* RAW      */ {PORT, 0},
    }}},

    {IBV_QPS_INIT, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_INIT, IBV_QPS_ERR, kNoAttrs},
    // INIT -> INIT lets the application revise what it set on RESET -> INIT, nothing more.
    {IBV_QPS_INIT, IBV_QPS_INIT, {{
        /* RC       */ {0, PKEY | PORT | ACCESS},
        /* UC       */ {0, PKEY | PORT | ACCESS},
        /* UD       */ {0, PKEY | PORT | QKEY},
        /* XRC_SEND */ {0, PKEY | PORT | ACCESS},
        /* XRC_RECV */ {0, PKEY | PORT | ACCESS},
        /* RAW      */ {0, 0},
    }}},
    // Entering RTR fixes the receive side: the peer (AV, DEST_QPN), MTU and expected PSN, plus
    // for a responder of RDMA reads/atomics its resources and RNR NAK timer.
    {IBV_QPS_INIT, IBV_QPS_RTR, {{
        /* RC       */ {AV | MTU | DQPN | RQ_PSN | DEST_RD_ATOMIC | MIN_RNR, ALT | ACCESS | PKEY},
        /* UC       */ {AV | MTU | DQPN | RQ_PSN, ALT | ACCESS | PKEY},
        /* UD       */ {0, PKEY | QKEY},
        /* XRC_SEND */ {AV | MTU | DQPN | RQ_PSN, ALT | ACCESS | PKEY},
        /* XRC_RECV */ {AV | MTU | DQPN | RQ_PSN | DEST_RD_ATOMIC | MIN_RNR, ALT | ACCESS | PKEY},
        /* RAW      */ {0, 0},
    }}},

    {IBV_QPS_RTR, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_RTR, IBV_QPS_ERR, kNoAttrs},
    // Entering RTS fixes the send side: first PSN and, for a reliable requester, the ACK
    // timeout, retry budgets and outstanding read/atomic depth.
    {IBV_QPS_RTR, IBV_QPS_RTS, {{
        /* RC       */ {TIMEOUT | RETRY | RNR_RETRY | SQ_PSN | RD_ATOMIC,
                        CUR | ALT | ACCESS | MIN_RNR | MIG},
        /* UC       */ {SQ_PSN, CUR | ALT | ACCESS | MIG},
        /* UD       */ {SQ_PSN, CUR | QKEY},
        /* XRC_SEND */ {TIMEOUT | RETRY | RNR_RETRY | SQ_PSN | RD_ATOMIC,
                        CUR | ALT | ACCESS | MIG},
        /* XRC_RECV */ {TIMEOUT | SQ_PSN, CUR | ALT | ACCESS | MIN_RNR | MIG},
        /* RAW      */ {0, RATE},
    }}},

    {IBV_QPS_RTS, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_RTS, IBV_QPS_ERR, kNoAttrs},
    // Live tuning of a running QP: only attributes that can change without renegotiating PSNs.
    {IBV_QPS_RTS, IBV_QPS_RTS, {{
        /* RC       */ {0, CUR | ACCESS | ALT | MIG | MIN_RNR},
        /* UC       */ {0, CUR | ACCESS | ALT | MIG},
        /* UD       */ {0, CUR | QKEY},
        /* XRC_SEND */ {0, CUR | ACCESS | ALT | MIG},
        /* XRC_RECV */ {0, CUR | ACCESS | ALT | MIG | MIN_RNR},
        /* RAW      */ {0, RATE},
    }}},
    {IBV_QPS_RTS, IBV_QPS_SQD, {{
        /* RC       */ {0, SQD_NOTIFY},
        /* UC       */ {0, SQD_NOTIFY},
        /* UD       */ {0, SQD_NOTIFY},
        /* XRC_SEND */ {0, SQD_NOTIFY},
        /* XRC_RECV */ {0, SQD_NOTIFY},
        /* RAW      */ {0, 0},
    }}},

    {IBV_QPS_SQD, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_SQD, IBV_QPS_ERR, kNoAttrs},
    {IBV_QPS_SQD, IBV_QPS_RTS, {{
        /* RC       */ {0, CUR | ALT | ACCESS | MIN_RNR | MIG},
        /* UC       */ {0, CUR | ALT | ACCESS | MIG},
        /* UD       */ {0, CUR | QKEY},
        /* XRC_SEND */ {0, CUR | ALT | ACCESS | MIG},
        /* XRC_RECV */ {0, CUR | ALT | ACCESS | MIN_RNR | MIG},
        /* RAW      */ {0, 0},
    }}},
    // A drained send queue is the one point where path and requester parameters may be
    // rewritten in place, hence the widest optional sets in the table.
    {IBV_QPS_SQD, IBV_QPS_SQD, {{
        /* RC       */ {0, PORT | AV | TIMEOUT | RETRY | RNR_RETRY | RD_ATOMIC | DEST_RD_ATOMIC |
                           ALT | ACCESS | PKEY | MIN_RNR | MIG},
        /* UC       */ {0, AV | ALT | ACCESS | PKEY | MIG},
        /* UD       */ {0, PKEY | QKEY},
        /* XRC_SEND */ {0, PORT | AV | TIMEOUT | RETRY | RNR_RETRY | RD_ATOMIC |
                           ALT | ACCESS | PKEY | MIG},
        /* XRC_RECV */ {0, PORT | AV | TIMEOUT | DEST_RD_ATOMIC |
                           ALT | ACCESS | PKEY | MIN_RNR | MIG},
        /* RAW      */ {0, 0},
    }}},

    {IBV_QPS_SQE, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_SQE, IBV_QPS_ERR, kNoAttrs},
    // Recovering an unreliable QP after a send error.
    {IBV_QPS_SQE, IBV_QPS_RTS, {{
        /* RC       */ {0, 0},
        /* UC       */ {0, CUR | ACCESS},
        /* UD       */ {0, CUR | QKEY},
        /* XRC_SEND */ {0, 0},
        /* XRC_RECV */ {0, 0},
        /* RAW      */ {0, 0},
    }}},

    {IBV_QPS_ERR, IBV_QPS_RESET, kNoAttrs},
    {IBV_QPS_ERR, IBV_QPS_ERR, kNoAttrs},
};
// clang-format on

constexpr bool is_state(int s) { return s >= IBV_QPS_RESET && s <= IBV_QPS_ERR; }

// Compile-time checks of the table's own consistency, so an edit cannot silently produce a
// cell the lookup would misread.
constexpr bool table_is_consistent() {
    constexpr std::size_t n = sizeof(kTransitions) / sizeof(kTransitions[0]);
    for (std::size_t i = 0; i < n; ++i) {
        const Transition& t = kTransitions[i];
        if (!is_state(t.from) || !is_state(t.to)) return false;
        for (std::size_t j = i + 1; j < n; ++j) {
            if (kTransitions[j].from == t.from && kTransitions[j].to == t.to) return false;
        }
        // IBV_QP_CUR_STATE only makes sense where the caller might be unsure whether the QP
        // already moved on (RTR/RTS/SQD/SQE, e.g. after an async SQ drain or error).
        const bool cur_allowed = t.from == IBV_QPS_RTR || t.from == IBV_QPS_RTS ||
                                 t.from == IBV_QPS_SQD || t.from == IBV_QPS_SQE;
        for (const Masks& m : t.by_type) {
            if ((m.req | m.opt) & IBV_QP_STATE) return false;
            if (m.req & m.opt) return false;
            if (m.req & CUR) return false;
            if ((m.opt & CUR) && !cur_allowed) return false;
        }
    }
    return true;
}
static_assert(table_is_consistent());

const Transition* find_transition(ibv_qp_state from, ibv_qp_state to) {
    for (const Transition& t : kTransitions) {
        if (t.from == from && t.to == to) return &t;
    }
    return nullptr;
}

}  // namespace

bool qp_modify_is_ok(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint64_t attr_mask) {
    const int col = type_col(type);
    if (col < 0) return false;
    if (!(attr_mask & IBV_QP_STATE)) next = cur;
    if (!is_state(cur) || !is_state(next)) return false;

    const Transition* t = find_transition(cur, next);
    if (t == nullptr) return false;

    const Masks& m = t->by_type[static_cast<std::size_t>(col)];
    if ((attr_mask & m.req) != m.req) return false;
    const uint64_t allowed = uint64_t{m.req} | m.opt | IBV_QP_STATE;
    return (attr_mask & ~allowed) == 0;
}

int qp_modify_check(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint64_t attr_mask) {
    return qp_modify_is_ok(type, cur, next, attr_mask) ? 0 : EINVAL;
}

uint64_t qp_ignored_attrs(ibv_qp_type type) {
    switch (type) {
    case IBV_QPT_XRC_SEND: return IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    case IBV_QPT_XRC_RECV: return IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
    default: return 0;
    }
}

namespace {
// Appends the names of the mask bits in `bits` ("DEST_QPN|RQ_PSN").
void append_mask_names(uint64_t bits, char* buf, size_t len, size_t* n) {
    static constexpr struct {
        uint64_t bit;
        const char* name;
    } kNames[] = {
        {IBV_QP_STATE, "STATE"},
        {CUR, "CUR_STATE"},
        {SQD_NOTIFY, "EN_SQD_ASYNC_NOTIFY"},
        {ACCESS, "ACCESS_FLAGS"},
        {PKEY, "PKEY_INDEX"},
        {PORT, "PORT"},
        {QKEY, "QKEY"},
        {AV, "AV"},
        {MTU, "PATH_MTU"},
        {TIMEOUT, "TIMEOUT"},
        {RETRY, "RETRY_CNT"},
        {RNR_RETRY, "RNR_RETRY"},
        {RQ_PSN, "RQ_PSN"},
        {RD_ATOMIC, "MAX_QP_RD_ATOMIC"},
        {ALT, "ALT_PATH"},
        {MIN_RNR, "MIN_RNR_TIMER"},
        {SQ_PSN, "SQ_PSN"},
        {DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"},
        {MIG, "PATH_MIG_STATE"},
        {IBV_QP_CAP, "CAP"},
        {DQPN, "DEST_QPN"},
        {RATE, "RATE_LIMIT"},
    };
    bool first = true;
    for (const auto& e : kNames) {
        if (!(bits & e.bit) || *n >= len) continue;
        *n += size_t(std::snprintf(buf + *n, len - *n, "%s%s", first ? "" : "|", e.name));
        first = false;
        bits &= ~e.bit;
    }
    if (bits && *n < len)
        *n += size_t(std::snprintf(buf + *n, len - *n, "%s0x%llx", first ? "" : "|",
                                   static_cast<unsigned long long>(bits)));
}
}  // namespace

void qp_modify_explain(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint64_t attr_mask,
                       char* buf, size_t len) {
    if (!len) return;
    buf[0] = 0;
    const int col = type_col(type);
    if (!(attr_mask & IBV_QP_STATE)) next = cur;
    if (col < 0 || !is_state(cur) || !is_state(next)) return;
    const Transition* t = find_transition(cur, next);
    if (!t) {
        std::snprintf(buf, len, "%s -> %s is not a legal transition", qp_state_name(cur),
                      qp_state_name(next));
        return;
    }
    const Masks& m = t->by_type[static_cast<std::size_t>(col)];
    const uint64_t missing = m.req & ~attr_mask;
    const uint64_t extra = attr_mask & ~(uint64_t{m.req} | m.opt | IBV_QP_STATE);
    if (!missing && !extra) return;
    size_t n = size_t(
        std::snprintf(buf, len, "%s -> %s of a%s %s QP", qp_state_name(cur), qp_state_name(next),
                      type == IBV_QPT_UD || type == IBV_QPT_UC ? "" : "n", qp_type_name(type)));
    if (missing && n < len) {
        n += size_t(std::snprintf(buf + n, len - n, " needs "));
        append_mask_names(missing, buf, len, &n);
    }
    if (extra && n < len) {
        n += size_t(std::snprintf(buf + n, len - n, "%s does not take ", missing ? "," : ""));
        append_mask_names(extra, buf, len, &n);
    }
}

const char* qp_state_name(ibv_qp_state s) {
    switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "UNKNOWN";
    }
}

const char* qp_type_name(ibv_qp_type t) {
    switch (t) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    case IBV_QPT_XRC_SEND: return "XRC_INI";
    case IBV_QPT_XRC_RECV: return "XRC_TGT";
    default: return "?";
    }
}

}  // namespace uroce::emu
