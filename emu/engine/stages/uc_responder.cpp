// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UC responder stage (uc_responder.h), instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/uc_responder_impl.h"

namespace uroce::emu {

template class UcResponder<TransportEnv>;

}  // namespace uroce::emu
