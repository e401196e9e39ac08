// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the libFuzzer targets that run a device (fuzz_device, fuzz_control) share.
#pragma once

#include <cstdint>

#include "emu/engine/device.h"

namespace uroce::fuzz {

// The device `cfg` describes, started by `start` (Device::start or start_manual) on the first
// UDP port in [first, end) that binds, which cfg.port then names; nullptr when none did. A
// fuzzer's device lives for the whole session, on a port nothing else on the host is likely
// to use.
template <typename Start>
emu::Device* start_on_free_port(emu::DeviceConfig cfg, uint16_t first, uint16_t end, Start start) {
    for (uint16_t port = first; port < end; ++port) {
        cfg.port = port;
        auto* d = new emu::Device(cfg);
        if (start(*d) == 0) return d;
        delete d;
    }
    return nullptr;
}

}  // namespace uroce::fuzz
