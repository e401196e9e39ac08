// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The completions stage, instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/completions_impl.h"

namespace uroce::emu {

template class Completions<TransportEnv>;

}  // namespace uroce::emu
