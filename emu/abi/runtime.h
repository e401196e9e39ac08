// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Where running devices are found: a per-user runtime directory holding, for each
// device NAME, NAME.sock (the control socket) and NAME.info (its description).
// This plays the role sysfs plays for kernel RDMA devices.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace uroce::abi {

struct DeviceInfo {
    std::string name;
    std::string addr;  // dotted IPv4
    uint16_t port = 4791;
    pid_t pid = 0;
    uint64_t guid = 0;  // host order
    std::string pcap;   // capture file, empty when off
};

// UROCE_RUNTIME_DIR, else $XDG_RUNTIME_DIR/uroce (when that directory is the user's), else
// /tmp/uroce-<uid>: the base. Within it, a directory `net-INODE` of the user's for this
// process's network namespace (INODE: /proc/self/ns/net's) is that namespace's own, and
// runtime_dir() is that one: the hosts of `uroce cluster` (docs/cluster.md) share one
// base, so a process on a host finds its host's devices whatever UROCE_RUNTIME_DIR it
// inherited (an MPI launcher hands its environment to every host's processes). Only the
// path: check_runtime_dir says whether it may be used.
std::string runtime_base_dir();
std::string runtime_dir();

// Whoever controls the runtime directory can put a socket of their own where a device's
// should be, or make the device write through a symbolic link; so the directory is used
// only if it is a real directory (not a symbolic link) owned by this user with no group or
// other permission bits. With `create`, a missing one is made (mode 0700, with parents);
// without, a missing one is fine (no device runs there). Returns "" when it may be used,
// else a one-line message that names the path and the fix.
std::string check_runtime_dir(bool create);

// Prints `line` on stderr, once per process for each distinct line (the library must not
// repeat a complaint on every ibv_get_device_list).
void report_once(const std::string& line);

std::string socket_path(const std::string& name);
std::string info_path(const std::string& name);
// The device a file of the runtime directory is the info file of (NAME.info), "" if none:
// what a watcher of the directory sees come and go as devices start and stop.
std::string info_file_device(const std::string& file);

bool write_info(const DeviceInfo& info);
bool read_info(const std::string& name, DeviceInfo* out);
// The process exists and has not died: a zombie (dead, not yet reaped; a detached uroced
// belongs to init, which may reap it late) counts as dead, so that a killed device's name
// can be used again at once.
bool process_alive(pid_t pid);
// Devices whose info file names a live process, sorted by name. Stale files (the
// process is gone) are removed. None when check_runtime_dir(false) refuses the directory.
std::vector<DeviceInfo> list_devices();

// The N of the device's uverbs<N> (ibv_device.dev_name, /dev/infiniband/uverbs<N>): N for a
// device named uroce<N> (every name `uroce start` picks), else the lowest number that no
// running uroce<N> and no other such device before it (by name) takes. A function of the
// running set, so the library and `uroce run`'s view (docs/system-view.md) agree.
int uverbs_index(const std::string& name, const std::vector<DeviceInfo>& running);

// GUID derived from the IPv4 address, like a MAC-derived EUI-64.
uint64_t guid_for(uint32_t ipv4_be);

}  // namespace uroce::abi
