// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/abi/runtime.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

namespace uroce::abi {

namespace {

bool owned_directory(const char* path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

// Makes `dir` (0700) and, for a custom path, its missing parents (0700 too). Returns 0 when
// `dir` was made or something already has its name (the caller judges what), else errno.
int make_dir(const std::string& dir) {
    if (mkdir(dir.c_str(), 0700) != 0) {
        if (errno == EEXIST) return 0;
        if (errno != ENOENT) return errno;
        for (size_t slash = dir.find('/', 1); slash != std::string::npos;
             slash = dir.find('/', slash + 1))
            mkdir(dir.substr(0, slash).c_str(), 0700);
        if (mkdir(dir.c_str(), 0700) != 0) return errno == EEXIST ? 0 : errno;
    }
    // The umask may have taken bits off 0700 that the owner needs. We made it, so the name
    // is still ours: nobody else can rename an entry of a sticky /tmp or of our own parent.
    chmod(dir.c_str(), 0700);
    return 0;
}

// Why the runtime directory `dir`, lstat()ed into `st`, must not be used; "" if it may.
std::string refusal(const std::string& dir, const struct stat& st) {
    const std::string head = "uroce: runtime directory " + dir;
    const std::string elsewhere = "set UROCE_RUNTIME_DIR to a directory of your own";
    if (S_ISLNK(st.st_mode)) return head + " is a symbolic link; remove it or " + elsewhere;
    if (!S_ISDIR(st.st_mode)) return head + " is not a directory; remove it or " + elsewhere;
    if (st.st_uid != geteuid())
        return head + " is owned by uid " + std::to_string(st.st_uid) + ", not you (uid " +
               std::to_string(geteuid()) + "); remove it or " + elsewhere;
    if (st.st_mode & 077) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
        return head + " has group or other permissions (mode " + mode + "); chmod 700 " + dir +
               ", or " + elsewhere;
    }
    return "";
}

}  // namespace

std::string runtime_dir() {
    std::string dir = runtime_base_dir();
    struct stat ns;
    if (stat("/proc/self/ns/net", &ns) == 0) {
        std::string own = dir + "/net-" + std::to_string(ns.st_ino);
        if (owned_directory(own.c_str())) return own;
    }
    return dir;
}

std::string runtime_base_dir() {
    std::string dir;
    if (const char* env = getenv("UROCE_RUNTIME_DIR"); env && *env)
        dir = env;
    else if (const char* xdg = getenv("XDG_RUNTIME_DIR");
             xdg && xdg[0] == '/' && owned_directory(xdg))
        // Not another user's (`su` keeps the caller's XDG_RUNTIME_DIR).
        dir = std::string(xdg) + "/uroce";
    else
        dir = "/tmp/uroce-" + std::to_string(geteuid());
    // "dir/" would make lstat() follow a symbolic link named dir.
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir;
}

std::string check_runtime_dir(bool create) {
    const std::string dir = runtime_dir();
    if (create) {
        if (int e = make_dir(dir))
            return "uroce: cannot create runtime directory " + dir + ": " + std::strerror(e) +
                   "; set UROCE_RUNTIME_DIR to a directory of your own";
    }
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT && !create) return "";  // no device has run there yet
        return "uroce: runtime directory " + dir + ": " + std::strerror(errno) +
               "; set UROCE_RUNTIME_DIR to a directory of your own";
    }
    return refusal(dir, st);
}

void report_once(const std::string& line) {
    static std::mutex mu;
    // Never destroyed, so a report from an exit handler still works.
    static auto& reported = *new std::set<std::string>;
    std::lock_guard<std::mutex> g(mu);
    if (reported.insert(line).second) std::fprintf(stderr, "%s\n", line.c_str());
}

std::string socket_path(const std::string& name) { return runtime_dir() + "/" + name + ".sock"; }
std::string info_path(const std::string& name) { return runtime_dir() + "/" + name + ".info"; }

std::string info_file_device(const std::string& file) {
    constexpr size_t kSuffix = 5;  // ".info"
    if (file.size() <= kSuffix || file.compare(file.size() - kSuffix, kSuffix, ".info") != 0)
        return "";
    return file.substr(0, file.size() - kSuffix);
}

bool write_info(const DeviceInfo& info) {
    std::string tmp = info_path(info.name) + ".tmp";
    {
        std::ofstream f(tmp);
        if (!f) return false;
        f << "name=" << info.name << "\naddr=" << info.addr << "\nport=" << info.port
          << "\npid=" << info.pid << "\nguid=" << info.guid << "\npcap=" << info.pcap << "\n";
        if (!f) return false;
    }
    return rename(tmp.c_str(), info_path(info.name).c_str()) == 0;
}

bool read_info(const std::string& name, DeviceInfo* out) {
    std::ifstream f(info_path(name));
    if (!f) return false;
    DeviceInfo d;
    std::string line;
    while (std::getline(f, line)) {
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string k = line.substr(0, eq), v = line.substr(eq + 1);
        if (k == "name")
            d.name = v;
        else if (k == "addr")
            d.addr = v;
        else if (k == "port")
            d.port = uint16_t(strtoul(v.c_str(), nullptr, 10));
        else if (k == "pid")
            d.pid = pid_t(strtol(v.c_str(), nullptr, 10));
        else if (k == "guid")
            d.guid = strtoull(v.c_str(), nullptr, 10);
        else if (k == "pcap")
            d.pcap = v;
    }
    if (d.name.empty() || d.pid <= 0) return false;
    *out = d;
    return true;
}

bool process_alive(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(f, stat);
    auto paren = stat.rfind(')');  // the state follows the command, which may hold spaces
    return !(paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> out;
    // Info files in a directory someone else controls name whatever pids they like.
    if (!check_runtime_dir(false).empty()) return out;
    std::string dir = runtime_dir();
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        std::string f = e->d_name;
        std::string name = info_file_device(f);
        if (name.empty()) continue;
        DeviceInfo info;
        if (!read_info(name, &info)) continue;
        if (!process_alive(info.pid)) {
            unlink(info_path(name).c_str());
            unlink(socket_path(name).c_str());
            continue;
        }
        out.push_back(info);
    }
    closedir(d);
    std::sort(out.begin(), out.end(),
              [](const DeviceInfo& a, const DeviceInfo& b) { return a.name < b.name; });
    return out;
}

namespace {
// N of a name uroce<N> (decimal, no leading zero), else -1.
int default_index(const std::string& name) {
    if (name.size() < 6 || name.compare(0, 5, "uroce") != 0 || name.size() > 14) return -1;
    if (name[5] == '0' && name.size() > 6) return -1;
    int n = 0;
    for (size_t i = 5; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return -1;
        n = n * 10 + (name[i] - '0');
    }
    return n;
}
}  // namespace

int uverbs_index(const std::string& name, const std::vector<DeviceInfo>& running) {
    if (int n = default_index(name); n >= 0) return n;
    std::set<int> taken;
    for (const auto& d : running)
        if (int n = default_index(d.name); n >= 0) taken.insert(n);
    std::vector<std::string> others;
    for (const auto& d : running)
        if (default_index(d.name) < 0 && d.name != name) others.push_back(d.name);
    others.push_back(name);
    std::sort(others.begin(), others.end());
    int next = 0;
    for (const auto& o : others) {
        while (taken.count(next)) ++next;
        if (o == name) return next;
        taken.insert(next);
    }
    return next;  // not reached: `name` is in `others`
}

uint64_t guid_for(uint32_t ipv4_be) {
    const auto* b = reinterpret_cast<const uint8_t*>(&ipv4_be);
    // 02:00:a:b:c:d expanded to EUI-64 (ff:fe in the middle), locally administered.
    uint8_t g[8] = {0x02, 0x00, b[0], 0xff, 0xfe, b[1], b[2], b[3]};
    uint64_t v = 0;
    for (uint8_t x : g) v = (v << 8) | x;
    return v;
}

}  // namespace uroce::abi
