// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/abi/verbs_names.h"

namespace uroce::abi {
namespace {

template <typename E>
struct Name {
    E value;
    const char* id;
    const char* text;  // what rdma-core prints: scripts grep for it, so kept verbatim
};

constexpr Name<ibv_wc_status> kWcStatus[] = {
    {IBV_WC_SUCCESS, "SUCCESS", "success"},
    {IBV_WC_LOC_LEN_ERR, "LOC_LEN_ERR", "local length error"},
    {IBV_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR", "local QP operation error"},
    {IBV_WC_LOC_EEC_OP_ERR, "LOC_EEC_OP_ERR", "local EE context operation error"},
    {IBV_WC_LOC_PROT_ERR, "LOC_PROT_ERR", "local protection error"},
    {IBV_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR", "Work Request Flushed Error"},
    {IBV_WC_MW_BIND_ERR, "MW_BIND_ERR", "memory management operation error"},
    {IBV_WC_BAD_RESP_ERR, "BAD_RESP_ERR", "bad response error"},
    {IBV_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR", "local access error"},
    {IBV_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR", "remote invalid request error"},
    {IBV_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR", "remote access error"},
    {IBV_WC_REM_OP_ERR, "REM_OP_ERR", "remote operation error"},
    {IBV_WC_RETRY_EXC_ERR, "RETRY_EXC_ERR", "transport retry counter exceeded"},
    {IBV_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR", "RNR retry counter exceeded"},
    {IBV_WC_LOC_RDD_VIOL_ERR, "LOC_RDD_VIOL_ERR", "local RDD violation error"},
    {IBV_WC_REM_INV_RD_REQ_ERR, "REM_INV_RD_REQ_ERR", "remote invalid RD request"},
    {IBV_WC_REM_ABORT_ERR, "REM_ABORT_ERR", "aborted error"},
    {IBV_WC_INV_EECN_ERR, "INV_EECN_ERR", "invalid EE context number"},
    {IBV_WC_INV_EEC_STATE_ERR, "INV_EEC_STATE_ERR", "invalid EE context state"},
    {IBV_WC_FATAL_ERR, "FATAL_ERR", "fatal error"},
    {IBV_WC_RESP_TIMEOUT_ERR, "RESP_TIMEOUT_ERR", "response timeout error"},
    {IBV_WC_GENERAL_ERR, "GENERAL_ERR", "general error"},
    {IBV_WC_TM_ERR, "TM_ERR", "TM error"},
    {IBV_WC_TM_RNDV_INCOMPLETE, "TM_RNDV_INCOMPLETE", "TM software rendezvous"},
};

constexpr Name<ibv_event_type> kEvent[] = {
    {IBV_EVENT_CQ_ERR, "CQ_ERR", "CQ error"},
    {IBV_EVENT_QP_FATAL, "QP_FATAL", "local work queue catastrophic error"},
    {IBV_EVENT_QP_REQ_ERR, "QP_REQ_ERR", "invalid request local work queue error"},
    {IBV_EVENT_QP_ACCESS_ERR, "QP_ACCESS_ERR", "local access violation work queue error"},
    {IBV_EVENT_COMM_EST, "COMM_EST", "communication established"},
    {IBV_EVENT_SQ_DRAINED, "SQ_DRAINED", "send queue drained"},
    {IBV_EVENT_PATH_MIG, "PATH_MIG", "path migrated"},
    {IBV_EVENT_PATH_MIG_ERR, "PATH_MIG_ERR", "path migration request error"},
    {IBV_EVENT_DEVICE_FATAL, "DEVICE_FATAL", "local catastrophic error"},
    {IBV_EVENT_PORT_ACTIVE, "PORT_ACTIVE", "port active"},
    {IBV_EVENT_PORT_ERR, "PORT_ERR", "port error"},
    {IBV_EVENT_LID_CHANGE, "LID_CHANGE", "LID change"},
    {IBV_EVENT_PKEY_CHANGE, "PKEY_CHANGE", "P_Key change"},
    {IBV_EVENT_SM_CHANGE, "SM_CHANGE", "SM change"},
    {IBV_EVENT_SRQ_ERR, "SRQ_ERR", "SRQ catastrophic error"},
    {IBV_EVENT_SRQ_LIMIT_REACHED, "SRQ_LIMIT_REACHED", "SRQ limit reached"},
    {IBV_EVENT_QP_LAST_WQE_REACHED, "QP_LAST_WQE_REACHED", "last WQE reached"},
    {IBV_EVENT_CLIENT_REREGISTER, "CLIENT_REREGISTER", "client reregistration"},
    {IBV_EVENT_GID_CHANGE, "GID_CHANGE", "GID table change"},
    {IBV_EVENT_WQ_FATAL, "WQ_FATAL", "WQ fatal"},
};

// What a value outside a table is called.
constexpr Name<ibv_wc_status> kUnknownStatus = {{}, "UNKNOWN_STATUS", "unknown"};
constexpr Name<ibv_event_type> kUnknownEvent = {{}, "UNKNOWN_EVENT", "unknown"};

template <typename E, size_t N>
const Name<E>& find(const Name<E> (&table)[N], E v, const Name<E>& unknown) {
    for (const auto& n : table)
        if (n.value == v) return n;
    return unknown;
}

}  // namespace

const char* wc_status_id(ibv_wc_status s) { return find(kWcStatus, s, kUnknownStatus).id; }
const char* wc_status_text(ibv_wc_status s) { return find(kWcStatus, s, kUnknownStatus).text; }
const char* event_id(ibv_event_type e) { return find(kEvent, e, kUnknownEvent).id; }
const char* event_text(ibv_event_type e) { return find(kEvent, e, kUnknownEvent).text; }

}  // namespace uroce::abi
