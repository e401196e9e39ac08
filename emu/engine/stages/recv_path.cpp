// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The shared receive path (recv_path.h), instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/recv_path_impl.h"

namespace uroce::emu {

template class RecvPath<TransportEnv>;

}  // namespace uroce::emu
