// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The UD stage, instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/ud_transport_impl.h"

namespace uroce::emu {

template class UdTransport<TransportEnv>;

}  // namespace uroce::emu
