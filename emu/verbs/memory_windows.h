// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Memory windows (IBTA 10.6.7) and invalidation on the device side
// (docs/memory-windows.md): allocating windows, binding them through a send queue,
// LOCAL_INV and the invalidation a SEND_WITH_INV asks of its responder, and resolving a
// window's R_Key for remote access. Engine thread only. It needs no more of the device than
// the MW and PD tables and, through the control verbs, MR lookup and key generations.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/abi/protocol.h"
#include "emu/verbs/control_verbs.h"
#include "emu/verbs/handle_table.h"
#include "emu/verbs/objects.h"

namespace uroce::emu {

class MemoryWindows {
public:
    MemoryWindows(HandleTable<Mw>& mws, HandleTable<Pd>& pds, ControlVerbs& verbs)
        : mws_(mws), pds_(pds), verbs_(verbs) {}

    int alloc_mw(Session& s, const abi::MwReq& r, abi::MwResp* out);
    int dealloc_mw(Session& s, uint32_t handle);
    void unbind(Mw& mw);
    void unbind_qp_windows(const Qp& qp);
    Mw* mw_for_key(uint32_t rkey) const;
    ibv_wc_status bind_mw(Qp& qp, uint32_t index);
    ibv_wc_status local_invalidate(Qp& qp, uint32_t rkey);
    Mw* remote_invalidatable(const Qp& qp, uint32_t rkey) const;
    uint64_t mw_target(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                       Session** owner) const;

private:
    HandleTable<Mw>& mws_;
    HandleTable<Pd>& pds_;
    ControlVerbs& verbs_;  // MR lookup, the next key generation
};

}  // namespace uroce::emu
