// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The `uroce` command's families (emu/programs/uroce_cli.cpp dispatches to them): a file each
// under emu/cli/, and what they share.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>
#include <vector>

#include "emu/abi/runtime.h"

namespace uroce::cli {

using Args = std::vector<std::string>;

// paths.cpp: the programs and libraries, found relative to this executable so that an
// installed prefix can be moved (docs/install.md).
std::string exe_dir();
std::string absolute(const std::string& path);
std::string lib_dir();
std::string path_with(const std::string& value, const char* list);
std::string tools_dir();
// The host's `tool`: the next one on PATH (then /usr/sbin, /sbin) that is not this program
// (rdma, modprobe and lsmod under `uroce run` are links to it); "" if none.
std::string next_on_path(const char* tool);
std::string daemon_path();

// usage.cpp: prints every command's usage; returns 2.
int usage();

// devices.cpp
// A device `uroce run` started for its command, and stops when the command ends.
struct OwnDevice {
    std::string name;
    pid_t pid = 0;
};
int cmd_start(std::vector<std::string> args, OwnDevice* own = nullptr);
// The running devices named in `args`, or every running device when it is empty.
std::vector<abi::DeviceInfo> select(const std::vector<std::string>& args);
// select, saying "uroce: no device NAME" (NAME the first of `args`, or "running") when it
// finds none: the caller then returns 1.
std::vector<abi::DeviceInfo> select_some(const std::vector<std::string>& args);
int cmd_stop(const Args& args);
int cmd_list();

int cmd_dump(const Args& all_args, bool counters_only);  // res.cpp: res and counters
int cmd_capture(const Args& args);                       // capture.cpp
int cmd_faults(const Args& args);                        // faults.cpp
int cmd_run(std::vector<std::string> args);              // run.cpp
int cmd_env(const Args& args);                           // run.cpp
int cmd_cluster(const Args& args);                       // cluster.cpp
// trace.cpp: the devices' trace lines to `out`; with `follow`, until every device stopped.
int write_trace(const std::vector<std::string>& names, bool follow, FILE* out);
int cmd_trace(const Args& args);

}  // namespace uroce::cli
