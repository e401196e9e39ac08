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
#include <sstream>

namespace uroce::abi {

std::string runtime_dir(bool create) {
    std::string dir;
    if (const char* env = getenv("UROCE_RUNTIME_DIR"); env && *env)
        dir = env;
    else
        dir = "/tmp/uroce-" + std::to_string(getuid());
    if (create) {
        if (mkdir(dir.c_str(), 0700) != 0 && errno == ENOENT) {
            // Create parents for a custom path.
            std::string partial;
            std::stringstream ss(dir);
            std::string part;
            while (std::getline(ss, part, '/')) {
                partial += part + "/";
                mkdir(partial.c_str(), 0700);
            }
        }
        chmod(dir.c_str(), 0700);
    }
    return dir;
}

std::string socket_path(const std::string& name) { return runtime_dir() + "/" + name + ".sock"; }
std::string info_path(const std::string& name) { return runtime_dir() + "/" + name + ".info"; }

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
    std::string dir = runtime_dir();
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        std::string f = e->d_name;
        if (f.size() <= 5 || f.compare(f.size() - 5, 5, ".info") != 0) continue;
        std::string name = f.substr(0, f.size() - 5);
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

uint64_t guid_for(uint32_t ipv4_be) {
    const auto* b = reinterpret_cast<const uint8_t*>(&ipv4_be);
    // 02:00:a:b:c:d expanded to EUI-64 (ff:fe in the middle), locally administered.
    uint8_t g[8] = {0x02, 0x00, b[0], 0xff, 0xfe, b[1], b[2], b[3]};
    uint64_t v = 0;
    for (uint8_t x : g) v = (v << 8) | x;
    return v;
}

}  // namespace uroce::abi
