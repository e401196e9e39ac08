// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the CM agent uses of the device, part by part: its packet I/O for QP1's MADs, its
// counters and trace, and its address, GUID and port MTU. The device builds one from
// references to its members (emu/engine/device.h), so the agent needs no Device.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace uroce::emu {

class Wire;
class Trace;
struct DeviceCounters;
struct DeviceConfig;

struct CmEnv {
    Wire& wire;                  // tx_begin, transmit: the MADs out
    DeviceCounters& counters;    // drops of MADs that fail the checks
    Trace& trace;                // the cm lines
    const DeviceConfig& config;  // the device's address and UDP port
    const uint64_t& guid;        // set in Device's constructor body: read it, never copy it
    const ibv_mtu& port_mtu;     // the port's active MTU, which refresh_port_mtu changes
};

}  // namespace uroce::emu
