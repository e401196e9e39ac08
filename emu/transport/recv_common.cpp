// The shared receive path (recv_common.h), instantiated for the device.
#include "emu/engine/device.h"
#include "emu/transport/recv_common_impl.h"

namespace uroce::emu {

template class RecvPath<Device>;

}  // namespace uroce::emu
