// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// riomap / riounmap / riowrite: direct placement. A writable mapping takes a slot of the
// peer's target iomap; the entry (offset, SGE) is RDMA-written there, announced by an
// RS_OP_IOMAP_SGL immediate, before the next data the socket sends. riowrite then writes
// straight into the peer's mapped memory with plain RDMA WRITEs.
#include <byteswap.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {
namespace {

IomapMr* free_slot(Rsocket* rs) {
    if (rs->remote_iomappings.empty()) {
        rs->remote_iomappings.resize(rs->remote_iomap.length);
        for (uint32_t i = 0; i < rs->remote_iomap.length; ++i)
            rs->remote_iomappings[i].index = int(i);
    }
    for (IomapMr& m : rs->remote_iomappings)
        if (!m.mr) return &m;
    return nullptr;
}

int wait_send_room(Rsocket* rs, int flags) {
    if (!(rs->state & kWritable)) return fail(rs->state & kError ? rs->err : EPIPE);
    if (can_send(rs)) return 0;
    if (get_comp(rs, nonblocking(rs, flags), conn_can_send)) return -1;
    if (!(rs->state & kWritable)) return fail(rs->state & kError ? rs->err : EPIPE);
    return 0;
}

volatile IomapEntry* find_iomap(Rsocket* rs, uint64_t offset) {
    for (int i = 0; i < rs->target_iomap_size; ++i) {
        volatile IomapEntry& e = rs->target_iomap[i];
        if (offset >= e.offset && offset < e.offset + e.sge.length) return &e;
    }
    return nullptr;
}

}  // namespace

// Sends the queued mappings (called with slock held).
int send_iomaps(Rsocket* rs, int flags) {
    std::lock_guard<std::mutex> g(rs->map_lock);
    int ret = 0;
    while (!rs->iomap_queue.empty()) {
        if ((ret = wait_send_room(rs, flags))) break;
        IomapMr* m = rs->iomap_queue.front();
        IomapEntry e;
        e.offset = m->offset;
        e.sge = {uintptr_t(m->mr->addr), m->mr->rkey, uint32_t(m->mr->length)};
        if (rs->swap_sgl) {
            e.offset = bswap_64(e.offset);
            e.sge = {bswap_64(e.sge.addr), bswap_32(e.sge.key), bswap_32(e.sge.length)};
        }
        // Inline when it fits; the entry's room in the ring is accounted either way.
        ibv_sge sg{uintptr_t(&e), sizeof e, 0};
        int sflags = IBV_SEND_INLINE;
        if (rs->sq_inline < sizeof e) {
            uint32_t left = uint32_t(uintptr_t(rs->sbuf + rs->sbuf_size) - rs->ssgl[0].addr);
            if (left < sizeof e) rs->ssgl[0].addr = uintptr_t(rs->sbuf);
            memcpy(reinterpret_cast<void*>(rs->ssgl[0].addr), &e, sizeof e);
            sg = {rs->ssgl[0].addr, sizeof e, rs->smr->lkey};
            rs->ssgl[0].addr += sizeof e;
            sflags = 0;
        }
        rs->sseq_no++;
        rs->sqe_avail--;
        rs->sbuf_bytes_avail -= sizeof e;
        ret = post_write_msg(rs, &sg, 1, msg_set(kOpIomapSgl, uint32_t(m->index)), sflags,
                             rs->remote_iomap.addr + m->index * sizeof(IomapEntry),
                             rs->remote_iomap.key);
        rs->iomap_queue.pop_front();
        rs->iomap_list.push_back(m);
        if (ret) break;
    }
    rs->iomap_pending = !rs->iomap_queue.empty();
    return ret;
}

void free_iomaps(Rsocket* rs) {
    for (IomapMr& m : rs->remote_iomappings)
        if (m.mr) ibv_dereg_mr(m.mr);
    for (IomapMr& m : rs->local_iomaps) ibv_dereg_mr(m.mr);
    rs->remote_iomappings.clear();
    rs->local_iomaps.clear();
    rs->iomap_list.clear();
    rs->iomap_queue.clear();
}

}  // namespace uroce::rsock

using namespace uroce::rsock;

extern "C" {

off_t riomap(int socket, void* buf, size_t len, int prot, int, off_t offset) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (rs->dg || !rs->cm_id || !rs->cm_id->qp || (prot & ~(PROT_WRITE | PROT_NONE)))
        return fail(EINVAL);
    std::lock_guard<std::mutex> g(rs->map_lock);
    int access = IBV_ACCESS_LOCAL_WRITE;
    IomapMr* m;
    if (prot & PROT_WRITE) {
        m = free_slot(rs);
        if (!m) return fail(ENOMEM);
        access |= IBV_ACCESS_REMOTE_WRITE;
    } else {
        m = &rs->local_iomaps.emplace_back();
    }
    m->mr = ibv_reg_mr(rs->cm_id->qp->pd, buf, len, access);
    if (!m->mr) {
        int e = errno;
        if (m->index < 0) rs->local_iomaps.pop_back();
        return fail(e);
    }
    if (offset == -1) offset = off_t(uintptr_t(buf));
    m->offset = uint64_t(offset);
    if (m->index >= 0) {
        rs->iomap_queue.push_back(m);
        rs->iomap_pending = true;
    }
    return offset;
}

int riounmap(int socket, void* buf, size_t len) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    std::lock_guard<std::mutex> g(rs->map_lock);
    auto match = [&](IomapMr* m) { return m->mr && m->mr->addr == buf && m->mr->length == len; };
    for (auto* lst : {&rs->iomap_list, &rs->iomap_queue}) {
        for (auto it = lst->begin(); it != lst->end(); ++it) {
            if (!match(*it)) continue;
            ibv_dereg_mr((*it)->mr);
            (*it)->mr = nullptr;  // the slot is free again
            lst->erase(it);
            return 0;
        }
    }
    for (auto it = rs->local_iomaps.begin(); it != rs->local_iomaps.end(); ++it) {
        if (!match(&*it)) continue;
        ibv_dereg_mr(it->mr);
        rs->local_iomaps.erase(it);
        return 0;
    }
    return fail(EINVAL);
}

size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
    Rsocket* rs = lookup(socket);
    if (!rs) return size_t(fail(EBADF));
    if (rs->dg) return size_t(fail(EINVAL));
    if (io_ready(rs, flags)) return size_t(-1);
    std::lock_guard<std::mutex> g(rs->slock);
    auto* src = static_cast<const uint8_t*>(buf);
    size_t left = count;
    uint32_t olen = kOlapStart;
    int ret = rs->iomap_pending ? send_iomaps(rs, flags) : 0;
    volatile IomapEntry* iom = nullptr;
    uint64_t off = uint64_t(offset);
    while (!ret && left) {
        if (!iom || off >= iom->offset + iom->sge.length) {
            iom = find_iomap(rs, off);
            if (!iom) {
                if (left == count) ret = fail(EINVAL);  // no mapping there
                break;
            }
        }
        if ((ret = wait_send_room(rs, flags))) break;
        uint32_t room = uint32_t(iom->offset + iom->sge.length - off);
        uint32_t x = next_xfer(rs, left, &olen, room);
        ibv_sge sg[2];
        int nsge, sflags = 0;
        if (x <= rs->sq_inline) {
            sg[0] = {uintptr_t(src), x, 0};
            nsge = 1;
            sflags = IBV_SEND_INLINE;
        } else {
            nsge = stage_copy(rs, src, x, sg);
        }
        rs->sqe_avail--;
        rs->sbuf_bytes_avail -= x;
        ret = post_write(rs, sg, nsge, msg_set(kOpWrite, x), sflags,
                         iom->sge.addr + off - iom->offset, iom->sge.key);
        if (ret) break;
        src += x;
        off += x;
        left -= x;
    }
    return (ret && left == count) ? size_t(ret) : count - left;
}

}  // extern "C"
