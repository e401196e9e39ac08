// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The RC completer stage, instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/rc_completer_impl.h"

namespace uroce::emu {

template class RcCompleter<TransportEnv>;

}  // namespace uroce::emu
