// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The private interface uroce's libibverbs exports for uroce's librdmacm, its one other user:
// what librdmacm needs of a verbs context, without the context's layout (which stays
// libibverbs' own, verbs_api/ibverbs/internal.h). Version node UROCE_PRIVATE_1 in
// libibverbs.map; rdma-core's nodes and symbols are untouched (check_exports.sh leaves this
// node out of its comparisons). A change of what a function here means is a new node.
#pragma once

#include <infiniband/verbs.h>

extern "C" {

// fn(context, arg) is called exactly once when the context's device is gone: on the
// context's watcher thread (or whichever thread noticed), after the flush completions are
// written; at once, on the caller's thread, when it is gone already. `arg` must live until
// ibv_close_device(context); fn must not call ibv_close_device(context) (that joins the
// watcher thread it runs on) and should only record the fact and wake its own waiters.
void uroce_on_device_gone(ibv_context* context, void (*fn)(ibv_context* context, void* arg),
                          void* arg);

}  // extern "C"
