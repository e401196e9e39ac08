// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's "DMA engine": moves bytes between its buffers and an application's
// registered memory. Callers check keys, PDs and bounds first; this only copies.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace uroce::emu {

// Copies between local buffers and another process's memory with
// process_vm_readv/writev. Within the device's own process (the in-process engine
// used by unit tests) it is a plain memcpy. Returns false if any byte could not be
// moved (the application unmapped the memory, or the process is gone).
bool mem_read(pid_t pid, void* dst, const iovec* remote, int nremote, size_t total);
bool mem_write(pid_t pid, const void* src, const iovec* remote, int nremote, size_t total);
// The same with several local buffers, filled (or drained) in order: one system call for a
// burst of packets.
bool mem_readv(pid_t pid, const iovec* local, int nlocal, const iovec* remote, int nremote,
               size_t total);
bool mem_writev(pid_t pid, const iovec* local, int nlocal, const iovec* remote, int nremote,
                size_t total);
// Stores 8 bytes at an 8-byte aligned address, as one: within this process a single 64-bit
// store (release: what the device wrote before is visible first); in another process one
// process_vm_writev of the 8 bytes, which the kernel copies as it copies any user data
// (docs/verbs-support.md, "RDMA ATOMIC WRITE").
bool mem_store64(pid_t pid, uint64_t addr, uint64_t value);
// mem_writev that says how far it got: the bytes written (in order: everything before that
// offset landed), or -1 with errno (ESRCH: the process is gone) when none were.
ssize_t mem_writev_some(pid_t pid, const iovec* local, int nlocal, const iovec* remote, int nremote,
                        size_t total);

}  // namespace uroce::emu
