// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/cm/cm_id_table.h"

#include <arpa/inet.h>

namespace uroce::emu {

uint32_t CmIdTable::new_comm_id() {
    for (;;) {
        uint32_t c = ++next_comm;
        if (c && !comm.count(c)) return c;
    }
}

std::unique_ptr<CmId> CmIdTable::make() {
    auto id = std::make_unique<CmId>();
    id->handle = next_handle++;
    if (next_handle == 0) next_handle = 1;
    return id;
}

CmId* CmIdTable::find(const Session& s, uint32_t handle) {
    auto it = ids.find(handle);
    if (it == ids.end() || it->second->owner != &s) return nullptr;
    return it->second.get();
}

CmId* CmIdTable::by_comm(uint32_t comm_id) {
    auto it = comm.find(comm_id);
    if (it == comm.end()) return nullptr;
    auto id = ids.find(it->second);
    return id == ids.end() ? nullptr : id->second.get();
}

void CmIdTable::erase(uint32_t handle) {
    auto it = ids.find(handle);
    if (it == ids.end()) return;
    CmId& id = *it->second;
    release_port(id);
    leave_pending(id);
    if (id.local_comm_id) {
        auto c = comm.find(id.local_comm_id);
        if (c != comm.end() && c->second == handle) comm.erase(c);
    }
    if (id.remote_comm_id) {
        auto r = remote.find({id.remote_addr, id.remote_comm_id});
        if (r != remote.end() && r->second == handle) remote.erase(r);
    }
    ids.erase(it);
}

void CmIdTable::release_port(CmId& id) {
    if (!id.bound) return;
    auto it = ports.find({id.ps, ntohs(id.local_port)});
    if (it != ports.end() && it->second == id.handle) ports.erase(it);
    id.bound = false;
}

// A connection request stops counting against its listener's backlog once it is answered.
void CmIdTable::leave_pending(CmId& id) {
    if (!id.listener) return;
    auto it = ids.find(id.listener);
    if (it != ids.end() && it->second->pending) --it->second->pending;
    id.listener = 0;
}

}  // namespace uroce::emu
