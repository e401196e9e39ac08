// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The RC and UC requester stage, instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/rc_requester_impl.h"

namespace uroce::emu {

template class RcRequester<TransportEnv>;

}  // namespace uroce::emu
