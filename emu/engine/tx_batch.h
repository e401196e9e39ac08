// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Request packets one RcRequester::progress() call builds, sent together once their payloads
// are read from the application with a single process_vm_readv (an iovec per packet and
// per SGE piece) instead of one system call per packet (emu/transport/rc_requester_impl.h).
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "emu/abi/caps.h"

namespace uroce::emu {

struct TxBatch {
    static constexpr uint32_t kMaxPkts = 32;
    static constexpr uint32_t kMaxRemote = 8 * abi::kMaxSge;  // room for the worst packet
    struct Pkt {
        uint32_t slot;       // transmit buffer
        uint32_t frame_len;  // headers + payload + pad, without the ICRC
        bool has_payload;    // one local iovec (in order) covers its payload
        // The requester's position before this packet, to resume from it if its payload
        // cannot be read.
        uint32_t sq_send, sq_send_off, psn;
    };
    Pkt pkt[kMaxPkts];
    uint32_t npkt = 0;
    iovec local[kMaxPkts];
    uint32_t nlocal = 0;
    iovec remote[kMaxRemote];
    uint32_t nremote = 0;
    uint64_t bytes = 0;  // payload bytes to read

    bool full() const { return npkt == kMaxPkts || nremote + abi::kMaxSge > kMaxRemote; }
    void clear() { npkt = nlocal = nremote = 0, bytes = 0; }
};

}  // namespace uroce::emu
