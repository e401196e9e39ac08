// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm learns that a device went away from libibverbs, through the private interface
// libibverbs exports for it (verbs_api/ibverbs/uroce_private.h): the verbs context's watcher
// sees the device's control socket hang up (verbs_api/ibverbs/device_gone.cpp) and, once the
// flush completions are written, runs this hook, which tells the ids (device_gone,
// cma_devices.cpp).
#include "verbs_api/ibverbs/uroce_private.h"
#include "verbs_api/rdmacm/internal.h"

namespace uroce::rdmacm {

void watch_device(DevConn* d) {
    uroce_on_device_gone(
        d->verbs, [](ibv_context*, void* arg) { device_gone(static_cast<DevConn*>(arg)); }, d);
}

}  // namespace uroce::rdmacm
