#include "emu/process_memory.h"

#include <unistd.h>

#include <cstring>

namespace uroce::emu {

namespace {
const pid_t self_pid = getpid();

bool local_copy(void* local, const iovec* remote, int n, bool to_remote) {
    auto* p = static_cast<char*>(local);
    for (int i = 0; i < n; ++i) {
        if (to_remote)
            std::memcpy(remote[i].iov_base, p, remote[i].iov_len);
        else
            std::memcpy(p, remote[i].iov_base, remote[i].iov_len);
        p += remote[i].iov_len;
    }
    return true;
}
}  // namespace

bool mem_read(pid_t pid, void* dst, const iovec* remote, int nremote, size_t total) {
    if (total == 0) return true;
    if (pid == self_pid) return local_copy(dst, remote, nremote, false);
    iovec local{dst, total};
    return process_vm_readv(pid, &local, 1, remote, nremote, 0) == ssize_t(total);
}

bool mem_write(pid_t pid, const void* src, const iovec* remote, int nremote, size_t total) {
    if (total == 0) return true;
    if (pid == self_pid) return local_copy(const_cast<void*>(src), remote, nremote, true);
    iovec local{const_cast<void*>(src), total};
    return process_vm_writev(pid, &local, 1, remote, nremote, 0) == ssize_t(total);
}

}  // namespace uroce::emu
