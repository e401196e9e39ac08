// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The RC responder stage (rc_responder.h), instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/rc_responder_impl.h"

namespace uroce::emu {

template class RcResponder<TransportEnv>;

}  // namespace uroce::emu
