// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/engine/process_memory.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace uroce::emu {

namespace {
const pid_t self_pid = getpid();

// Within this process: the same bytes as process_vm_readv/writev would move, local iovecs
// filled (or drained) in order from the remote ones.
bool local_copy(const iovec* local, int nlocal, const iovec* remote, int nremote, bool to_remote) {
    int li = 0, ri = 0;
    size_t loff = 0, roff = 0;
    while (li < nlocal && ri < nremote) {
        size_t n = std::min(local[li].iov_len - loff, remote[ri].iov_len - roff);
        char* l = static_cast<char*>(local[li].iov_base) + loff;
        char* r = static_cast<char*>(remote[ri].iov_base) + roff;
        if (n) std::memcpy(to_remote ? r : l, to_remote ? l : r, n);
        loff += n;
        roff += n;
        if (loff == local[li].iov_len) ++li, loff = 0;
        if (roff == remote[ri].iov_len) ++ri, roff = 0;
    }
    return true;
}
}  // namespace

bool mem_readv(pid_t pid, const iovec* local, int nlocal, const iovec* remote, int nremote,
               size_t total) {
    if (total == 0) return true;
    if (pid == self_pid) return local_copy(local, nlocal, remote, nremote, false);
    return process_vm_readv(pid, local, nlocal, remote, nremote, 0) == ssize_t(total);
}

ssize_t mem_writev_some(pid_t pid, const iovec* local, int nlocal, const iovec* remote, int nremote,
                        size_t total) {
    if (total == 0) return 0;
    if (pid == self_pid) {
        local_copy(local, nlocal, remote, nremote, true);
        return ssize_t(total);
    }
    return process_vm_writev(pid, local, nlocal, remote, nremote, 0);
}

bool mem_writev(pid_t pid, const iovec* local, int nlocal, const iovec* remote, int nremote,
                size_t total) {
    return mem_writev_some(pid, local, nlocal, remote, nremote, total) == ssize_t(total);
}

bool mem_store64(pid_t pid, uint64_t addr, uint64_t value) {
    if (pid == self_pid) {
        std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(addr))
            .store(value, std::memory_order_release);
        return true;
    }
    iovec local{&value, 8}, remote{reinterpret_cast<void*>(addr), 8};
    return process_vm_writev(pid, &local, 1, &remote, 1, 0) == 8;
}

bool mem_read(pid_t pid, void* dst, const iovec* remote, int nremote, size_t total) {
    iovec local{dst, total};
    return mem_readv(pid, &local, 1, remote, nremote, total);
}

bool mem_write(pid_t pid, const void* src, const iovec* remote, int nremote, size_t total) {
    iovec local{const_cast<void*>(src), total};
    return mem_writev(pid, &local, 1, remote, nremote, total);
}

}  // namespace uroce::emu
