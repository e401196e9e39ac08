// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Names of completion statuses and async events, one table each: the enum's own name (for
// `uroce trace`) and rdma-core's text (ibv_wc_status_str, ibv_event_type_str).
#pragma once

#include <infiniband/verbs.h>

namespace uroce::abi {

const char* wc_status_id(ibv_wc_status s);    // "REM_ACCESS_ERR"; "UNKNOWN_STATUS"
const char* wc_status_text(ibv_wc_status s);  // "remote access error"; "unknown"
const char* event_id(ibv_event_type e);       // "QP_ACCESS_ERR"; "UNKNOWN_EVENT"
const char* event_text(ibv_event_type e);     // "local access violation ..."; "unknown"

}  // namespace uroce::abi
