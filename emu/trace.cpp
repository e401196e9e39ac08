#include "emu/trace.h"

#include <time.h>

#include <cstdarg>
#include <cstdio>

namespace uroce::emu {

Trace::Trace() : ring_(new Entry[kEntries]) {}

void Trace::add(const char* fmt, ...) {
    Entry& e = ring_[next_ % kEntries];
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);  // wall clock: lines up with capture timestamps
    e.realtime_ns = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(e.text, sizeof e.text, fmt, ap);
    va_end(ap);
    ++next_;
}

uint64_t Trace::read(uint64_t since, std::string* out, size_t max_bytes) const {
    uint64_t first = since + 1;
    const uint64_t oldest = next_ > kEntries ? next_ - kEntries : 1;
    char line[kText + 64];
    if (first < oldest) {
        int n = std::snprintf(line, sizeof line, "%llu lost %llu\n",
                              static_cast<unsigned long long>(oldest - 1),
                              static_cast<unsigned long long>(oldest - first));
        if (out->size() + size_t(n) > max_bytes) return since;
        out->append(line, size_t(n));
        since = oldest - 1;
        first = oldest;
    }
    for (uint64_t seq = first; seq < next_; ++seq) {
        const Entry& e = ring_[seq % kEntries];
        time_t secs = time_t(e.realtime_ns / 1000000000u);
        tm t;
        gmtime_r(&secs, &t);
        int n = std::snprintf(line, sizeof line, "%llu %02d:%02d:%02d.%06u %s\n",
                              static_cast<unsigned long long>(seq), t.tm_hour, t.tm_min, t.tm_sec,
                              unsigned(e.realtime_ns % 1000000000u / 1000u), e.text);
        if (n < 0) break;
        if (size_t(n) >= sizeof line) n = int(sizeof line - 1);
        if (out->size() + size_t(n) > max_bytes) break;
        out->append(line, size_t(n));
        since = seq;
    }
    return since;
}

const char* wc_status_name(ibv_wc_status s) {
    switch (s) {
    case IBV_WC_SUCCESS: return "SUCCESS";
    case IBV_WC_LOC_LEN_ERR: return "LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR: return "LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR: return "LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR: return "LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR: return "WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR: return "MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR: return "BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR: return "LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR: return "REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR: return "REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR: return "REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR: return "RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR: return "REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR: return "INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR: return "INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR: return "FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR: return "RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR: return "GENERAL_ERR";
    case IBV_WC_TM_ERR: return "TM_ERR";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "TM_RNDV_INCOMPLETE";
    }
    return "UNKNOWN_STATUS";
}

const char* event_name(ibv_event_type e) {
    switch (e) {
    case IBV_EVENT_CQ_ERR: return "CQ_ERR";
    case IBV_EVENT_QP_FATAL: return "QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR: return "QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST: return "COMM_EST";
    case IBV_EVENT_SQ_DRAINED: return "SQ_DRAINED";
    case IBV_EVENT_PATH_MIG: return "PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR: return "PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL: return "DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR: return "PORT_ERR";
    case IBV_EVENT_LID_CHANGE: return "LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE: return "PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE: return "SM_CHANGE";
    case IBV_EVENT_SRQ_ERR: return "SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER: return "CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE: return "GID_CHANGE";
    case IBV_EVENT_WQ_FATAL: return "WQ_FATAL";
    }
    return "UNKNOWN_EVENT";
}

}  // namespace uroce::emu
