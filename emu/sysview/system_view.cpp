// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/sysview/system_view.h"

#include <dirent.h>
#include <dlfcn.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu/sysview/module_tools.h"

namespace uroce::sysview {

namespace {

constexpr int kMaxPorts = 2;
constexpr int kMaxGids = 128;

// What the library reports for one device: every value the view's files show comes from
// here, so the files agree with ibv_query_device/port/gid/pkey.
struct Facts {
    char name[IBV_SYSFS_NAME_MAX];
    char dev_name[IBV_SYSFS_NAME_MAX];  // uverbs<N>
    int node_type;
    uint64_t node_guid_be;
    uint64_t sys_image_guid_be;
    char fw_ver[64];
    uint32_t hw_ver;
    int ports;
    struct Port {
        int state, phys_state, active_width, active_speed, link_layer;
        unsigned lid, sm_lid, sm_sl, lmc;
        uint32_t cap_flags;
        uint16_t pkey0_be;
        int gids;
        struct Gid {
            uint8_t raw[16];
            int type;  // -1: an empty entry
            char ndev[IF_NAMESIZE];
        } gid[kMaxGids];
    } port[kMaxPorts];
};

struct Verbs {
    decltype(&ibv_get_device_list) get_device_list;
    decltype(&ibv_free_device_list) free_device_list;
    decltype(&ibv_open_device) open_device;
    decltype(&ibv_close_device) close_device;
    decltype(&ibv_query_device) query_device;
    int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*);  // the exported (compat) one
    decltype(&ibv_query_gid) query_gid;
    decltype(&ibv_query_pkey) query_pkey;
    decltype(&_ibv_query_gid_ex) query_gid_ex;
};

bool load(void* lib, Verbs* v) {
    auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
        return fn != nullptr;
    };
    return sym(v->get_device_list, "ibv_get_device_list") &&
           sym(v->free_device_list, "ibv_free_device_list") &&
           sym(v->open_device, "ibv_open_device") && sym(v->close_device, "ibv_close_device") &&
           sym(v->query_device, "ibv_query_device") && sym(v->query_port, "ibv_query_port") &&
           sym(v->query_gid, "ibv_query_gid") && sym(v->query_pkey, "ibv_query_pkey") &&
           sym(v->query_gid_ex, "_ibv_query_gid_ex");
}

bool query(const Verbs& v, ibv_device* dev, Facts* f) {
    std::memset(f, 0, sizeof *f);
    std::snprintf(f->name, sizeof f->name, "%s", dev->name);
    std::snprintf(f->dev_name, sizeof f->dev_name, "%s", dev->dev_name);
    f->node_type = dev->node_type;
    ibv_context* ctx = v.open_device(dev);
    if (!ctx) return false;
    ibv_device_attr da{};
    bool ok = v.query_device(ctx, &da) == 0;
    f->node_guid_be = da.node_guid;
    f->sys_image_guid_be = da.sys_image_guid;
    std::snprintf(f->fw_ver, sizeof f->fw_ver, "%s", da.fw_ver);
    f->hw_ver = da.hw_ver;
    f->ports = da.phys_port_cnt < kMaxPorts ? da.phys_port_cnt : kMaxPorts;
    for (int p = 1; ok && p <= f->ports; ++p) {
        Facts::Port& fp = f->port[p - 1];
        ibv_port_attr pa{};
        ok = v.query_port(ctx, uint8_t(p), &pa) == 0;
        fp.state = pa.state;
        fp.phys_state = pa.phys_state;
        fp.active_width = pa.active_width;
        fp.active_speed = pa.active_speed;
        fp.link_layer = pa.link_layer;
        fp.lid = pa.lid;
        fp.sm_lid = pa.sm_lid;
        fp.sm_sl = pa.sm_sl;
        fp.lmc = pa.lmc;
        fp.cap_flags = pa.port_cap_flags;
        fp.gids = pa.gid_tbl_len < kMaxGids ? pa.gid_tbl_len : kMaxGids;
        if (ok) ok = v.query_pkey(ctx, uint8_t(p), 0, &fp.pkey0_be) == 0;
        for (int i = 0; ok && i < fp.gids; ++i) {
            Facts::Port::Gid& g = fp.gid[i];
            ibv_gid gid{};
            ok = v.query_gid(ctx, uint8_t(p), i, &gid) == 0;
            std::memcpy(g.raw, gid.raw, 16);
            ibv_gid_entry e{};
            int r = v.query_gid_ex(ctx, uint32_t(p), uint32_t(i), &e, 0, sizeof e);
            g.type = r == 0 ? int(e.gid_type) : -1;
            if (r != 0 && r != ENODATA) ok = false;
            if (r == 0 && e.ndev_ifindex) if_indextoname(e.ndev_ifindex, g.ndev);
        }
    }
    v.close_device(ctx);
    return ok;
}

bool write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= size_t(w);
    }
    return true;
}

// The facts of every device uroce's library lists, asked in a child process: loading the
// library starts threads, and a process with more than one may not enter a user namespace.
std::string gather(const std::string& libdir, std::vector<Facts>* out) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
    pid_t child = fork();
    if (child < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return std::string("fork: ") + std::strerror(errno);
    }
    if (child == 0) {
        close(pipefd[0]);
        setenv("UROCE_NO_AUTOSTART", "1", 1);  // `uroce run` has started one if none ran
        void* lib = dlopen((libdir + "/libibverbs.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
        Verbs v{};
        if (!lib || !load(lib, &v)) _exit(2);
        int n = 0;
        ibv_device** list = v.get_device_list(&n);
        if (!list) _exit(3);
        auto* f = new Facts;
        for (int i = 0; i < n; ++i) {
            if (!query(v, list[i], f)) _exit(4);
            if (!write_all(pipefd[1], f, sizeof *f)) _exit(5);
        }
        _exit(0);
    }
    close(pipefd[1]);
    std::vector<char> buf;
    char chunk[65536];
    for (;;) {
        ssize_t r = read(pipefd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        buf.insert(buf.end(), chunk, chunk + r);
    }
    close(pipefd[0]);
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return "cannot query the devices through " + libdir + "/libibverbs.so.1";
    size_t n = buf.size() / sizeof(Facts);
    out->resize(n);
    if (n) std::memcpy(out->data(), buf.data(), n * sizeof(Facts));
    return "";
}

bool put(const std::string& path, const std::string& content) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd < 0) return false;
    bool ok = write_all(fd, content.data(), content.size());
    close(fd);
    return ok;
}

// Makes `path` and its missing parents.
bool mkdirs(const std::string& path) {
    for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
        std::string d = path.substr(0, slash);
        if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return false;
        if (slash == std::string::npos) return true;
    }
}

bool exists(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// A tmpfs over `dir` holding what `dir` held: each entry bound back (a directory with what is
// mounted below it), symbolic links copied. Undone on failure.
std::string overlay(const std::string& dir, unsigned long flags) {
    int fd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno_text(dir);
    struct Entry {
        std::string name, link;
        mode_t mode;
    };
    std::vector<Entry> entries;
    DIR* d = opendir(dir.c_str());
    if (!d) {
        close(fd);
        return errno_text(dir);
    }
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
        Entry en{name, "", st.st_mode};
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
            if (n < 0) continue;
            en.link.assign(target, size_t(n));
        }
        entries.push_back(en);
    }
    closedir(d);
    struct stat top;
    if (fstat(fd, &top) != 0) {
        close(fd);
        return errno_text(dir);
    }
    char opts[32];
    std::snprintf(opts, sizeof opts, "mode=%04o", unsigned(top.st_mode & 07777));
    if (mount("tmpfs", dir.c_str(), "tmpfs", flags, opts) != 0) {
        std::string why = errno_text("mount tmpfs on " + dir);
        close(fd);
        return why;
    }
    std::string why;
    for (const Entry& e : entries) {
        std::string src = "/proc/self/fd/" + std::to_string(fd) + "/" + e.name;
        std::string dst = dir + "/" + e.name;
        if (S_ISLNK(e.mode)) {
            if (symlink(e.link.c_str(), dst.c_str()) != 0) why = errno_text("symlink " + dst);
        } else if (S_ISDIR(e.mode)) {
            if (mkdir(dst.c_str(), e.mode & 07777) != 0 ||
                mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
                why = errno_text("bind " + dst);
        } else {
            int f = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (f < 0 || close(f) != 0 ||
                mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0)
                why = errno_text("bind " + dst);
        }
        if (!why.empty()) break;
    }
    close(fd);
    if (!why.empty()) umount2(dir.c_str(), MNT_DETACH);
    return why;
}

std::string write_proc(const char* path, const std::string& text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno_text(path);
    bool ok = write_all(fd, text.data(), text.size());
    int e = errno;
    close(fd);
    errno = e;
    return ok ? "" : errno_text(path);
}

// A mount namespace of our own: alone where the process may (root), else inside a user
// namespace that maps the caller's uid and gid to themselves, so that paths, file owners
// and SO_PEERCRED read as outside. Mounts of the host do not propagate out of it.
std::string unshare_mounts() {
    std::string why;
    if (unshare(CLONE_NEWNS) != 0) {
        int alone = errno;
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
            return std::string("cannot make a mount namespace (") + std::strerror(alone) +
                   ") nor a user namespace (" + std::strerror(errno) + ")";
        if (std::string w = write_proc("/proc/self/setgroups", "deny");
            !w.empty() && errno != ENOENT)
            return w;
        if (std::string w = write_proc("/proc/self/uid_map",
                                       std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
            !w.empty())
            return w;
        if (std::string w = write_proc("/proc/self/gid_map",
                                       std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
            !w.empty())
            return w;
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
        return errno_text("making / a slave mount");
    return "";
}

std::string hex_guid(uint64_t be) {
    uint64_t g = be64toh(be);
    char s[24];
    std::snprintf(s, sizeof s, "%04x:%04x:%04x:%04x\n", unsigned(g >> 48),
                  unsigned(g >> 32) & 0xffff, unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
    return s;
}

// As the kernel's sysfs: "%pI6", eight groups of four digits.
std::string gid_text(const uint8_t* raw) {
    std::string s;
    char g[8];
    for (int i = 0; i < 16; i += 2) {
        std::snprintf(g, sizeof g, "%s%02x%02x", i ? ":" : "", raw[i], raw[i + 1]);
        s += g;
    }
    return s + "\n";
}

const char* named(const char* const* names, size_t n, int v) {
    return v >= 0 && size_t(v) < n && names[v] ? names[v] : "";
}

// The kernel's ports/N/rate: "100 Gb/sec (4X EDR)".
std::string rate_text(int width, int speed) {
    struct Speed {
        int code, tenths;
        const char* name;
    };
    static const Speed kSpeeds[] = {{1, 25, ""},        {2, 50, " DDR"},     {4, 100, " QDR"},
                                    {8, 100, " FDR10"}, {16, 140, " FDR"},   {32, 250, " EDR"},
                                    {64, 500, " HDR"},  {128, 1000, " NDR"}, {256, 2000, " XDR"}};
    int lanes = width == 1    ? 1
                : width == 2  ? 4
                : width == 4  ? 8
                : width == 8  ? 12
                : width == 16 ? 2
                              : 0;
    const Speed* sp = nullptr;
    for (const Speed& s : kSpeeds)
        if (s.code == speed) sp = &s;
    if (!lanes || !sp) return "0 GB/sec (0X)\n";  // the kernel's text for an unknown one
    int tenths = sp->tenths * lanes;
    char s[64];
    std::snprintf(s, sizeof s, "%d%s Gb/sec (%dX%s)\n", tenths / 10, tenths % 10 ? ".5" : "", lanes,
                  sp->name);
    return s;
}

std::string read_line(const std::string& path) {
    char buf[4096] = {};
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? std::string(buf, size_t(n)) : "";
}

// device/numa_node and device/local_cpus: those of the network device under the address,
// where it is hardware; a virtual one (lo, a bridge) has none, and the kernel's answer for a
// device without affinity is node -1 and every CPU.
void device_locality(const std::string& ifname, std::string* numa, std::string* cpus) {
    std::string base = "/sys/class/net/" + ifname + "/device/";
    *numa = read_line(base + "numa_node");
    *cpus = read_line(base + "local_cpus");
    if (!numa->empty() && !cpus->empty()) return;
    *numa = "-1\n";
    int last = 0;
    std::string possible = read_line("/sys/devices/system/cpu/possible");  // "0-N"
    size_t dash = possible.rfind('-');
    last = std::atoi(possible.c_str() + (dash == std::string::npos ? 0 : dash + 1));
    int bits = last + 1;
    // "%*pb": 32-bit words, most significant first, comma-separated; the first one as
    // wide as the bits it holds.
    std::string s;
    for (int word = (bits - 1) / 32; word >= 0; --word) {
        int n = bits - word * 32 > 32 ? 32 : bits - word * 32;
        uint32_t v = n == 32 ? 0xffffffffu : (1u << n) - 1;
        char w[16];
        if (s.empty())
            std::snprintf(w, sizeof w, "%0*x", (n + 3) / 4, v);
        else
            std::snprintf(w, sizeof w, ",%08x", v);
        s += w;
    }
    *cpus = s + "\n";
}

std::string make_tree(const Facts& f, dev_t node) {
    static const char* const kNodeTypes[] = {nullptr, "CA",    "switch",   "router",
                                             "RNIC",  "usNIC", "usNIC UDP"};
    static const char* const kStates[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    static const char* const kPhys[] = {nullptr,
                                        "Sleep",
                                        "Polling",
                                        "Disabled",
                                        "PortConfigurationTraining",
                                        "LinkUp",
                                        "LinkErrorRecovery",
                                        "Phy Test"};
    const std::string ib = "/sys/class/infiniband/" + std::string(f.name);
    const std::string uv = "/sys/class/infiniband_verbs/" + std::string(f.dev_name);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    char hw[16];
    std::snprintf(hw, sizeof hw, "0x%x\n", f.hw_ver);
    bool ok = mkdirs(ib + "/device/net") && mkdirs(uv) &&
              put(ib + "/node_type",
                  std::to_string(f.node_type) + ": " + named(kNodeTypes, 7, f.node_type) + "\n") &&
              put(ib + "/node_guid", hex_guid(f.node_guid_be)) &&
              put(ib + "/sys_image_guid", hex_guid(f.sys_image_guid_be)) &&
              put(ib + "/node_desc", std::string(host) + " " + f.name + "\n") &&
              put(ib + "/fw_ver", std::string(f.fw_ver) + "\n") && put(ib + "/hw_rev", hw) &&
              put(ib + "/hca_type", "uroce\n");
    std::string ifname;
    for (int p = 1; ok && p <= f.ports; ++p) {
        const Facts::Port& fp = f.port[p - 1];
        std::string pd = ib + "/ports/" + std::to_string(p);
        char lid[16], sm_lid[16], cap[16], pkey[16];
        std::snprintf(lid, sizeof lid, "0x%x\n", fp.lid);
        std::snprintf(sm_lid, sizeof sm_lid, "0x%x\n", fp.sm_lid);
        std::snprintf(cap, sizeof cap, "0x%08x\n", fp.cap_flags);
        std::snprintf(pkey, sizeof pkey, "0x%04x\n", be16toh(fp.pkey0_be));
        ok = mkdirs(pd + "/gids") && mkdirs(pd + "/gid_attrs/types") &&
             mkdirs(pd + "/gid_attrs/ndevs") && mkdirs(pd + "/pkeys") &&
             put(pd + "/state",
                 std::to_string(fp.state) + ": " + named(kStates, 6, fp.state) + "\n") &&
             put(pd + "/phys_state",
                 std::to_string(fp.phys_state) + ": " + named(kPhys, 8, fp.phys_state) + "\n") &&
             put(pd + "/rate", rate_text(fp.active_width, fp.active_speed)) &&
             put(pd + "/link_layer",
                 fp.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet\n" : "InfiniBand\n") &&
             put(pd + "/lid", lid) && put(pd + "/sm_lid", sm_lid) &&
             put(pd + "/sm_sl", std::to_string(fp.sm_sl) + "\n") &&
             put(pd + "/lid_mask_count", std::to_string(fp.lmc) + "\n") &&
             put(pd + "/cap_mask", cap) && put(pd + "/pkeys/0", pkey);
        for (int i = 0; ok && i < fp.gids; ++i) {
            const Facts::Port::Gid& g = fp.gid[i];
            std::string n = std::to_string(i);
            ok = put(pd + "/gids/" + n, gid_text(g.raw));
            // The kernel's files of an empty entry fail to read; here they are absent.
            if (ok && g.type >= 0)
                ok = put(pd + "/gid_attrs/types/" + n,
                         g.type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2\n" : "IB/RoCE v1\n") &&
                     put(pd + "/gid_attrs/ndevs/" + n, std::string(g.ndev) + "\n");
            if (ifname.empty() && g.type >= 0) ifname = g.ndev;
        }
    }
    if (!ok) return errno_text("writing " + ib);
    std::string numa, cpus;
    device_locality(ifname.empty() ? "lo" : ifname, &numa, &cpus);
    ok = put(ib + "/device/numa_node", numa) && put(ib + "/device/local_cpus", cpus) &&
         (ifname.empty() || symlink(("/sys/class/net/" + ifname).c_str(),
                                    (ib + "/device/net/" + ifname).c_str()) == 0) &&
         put(uv + "/ibdev", std::string(f.name) + "\n") && put(uv + "/abi_version", "1\n") &&
         put(uv + "/dev", std::to_string(major(node)) + ":" + std::to_string(minor(node)) + "\n") &&
         symlink((ib + "/device").c_str(), (uv + "/device").c_str()) == 0;
    if (!ok) return errno_text("writing " + uv);
    return "";
}

// What enter() made, for resync(): the /sys mounts (read-only between changes), the node
// the device files are bound from, and the devices in the view (name, uverbs name).
struct State {
    std::vector<std::string> sys_mounts;
    dev_t null_rdev = 0;
    std::vector<std::pair<std::string, std::string>> devices;
};
State g_view;

// A device file of the view gone (a host entry of that name, bound back, too).
void remove_node(const std::string& n) {
    umount2(n.c_str(), MNT_DETACH);
    unlink(n.c_str());
}

// The files of one device in the view: /dev/infiniband/<dev_name> (/dev/null, bound).
std::string bind_node(const std::string& n) {
    remove_node(n);  // ours replaces a host entry of that name
    int fd = open(n.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 || close(fd) != 0 || mount("/dev/null", n.c_str(), nullptr, MS_BIND, nullptr) != 0)
        return errno_text("bind /dev/null on " + n);
    return "";
}

// Removes a tree of the view's tmpfs (no mount below it).
void remove_tree(const std::string& path) {
    DIR* d = opendir(path.c_str());
    if (!d) {
        unlink(path.c_str());
        return;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
            names.push_back(e->d_name);
    closedir(d);
    for (const auto& n : names) {
        std::string p = path + "/" + n;
        struct stat st;
        if (lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p.c_str());
    }
    rmdir(path.c_str());
}

void set_sys_writable(bool writable) {
    for (const auto& m : g_view.sys_mounts)
        (void)mount(
            nullptr, m.c_str(), nullptr,
            MS_REMOUNT | MS_BIND | (writable ? 0 : MS_RDONLY) | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            nullptr);
}

}  // namespace

std::string resync(const std::string& libdir) {
    std::vector<Facts> now;
    if (std::string why = gather(libdir, &now); !why.empty()) return why;
    std::vector<std::pair<std::string, std::string>> want;
    for (const Facts& f : now) want.emplace_back(f.name, f.dev_name);
    if (want == g_view.devices) return "";
    auto has = [](const auto& v, const auto& x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    };
    set_sys_writable(true);
    std::string why;
    for (const auto& d : g_view.devices) {
        if (has(want, d)) continue;
        remove_tree("/sys/class/infiniband/" + d.first);
        remove_tree("/sys/class/infiniband_verbs/" + d.second);
        remove_node("/dev/infiniband/" + d.second);
    }
    for (const Facts& f : now) {
        if (has(g_view.devices, std::make_pair(std::string(f.name), std::string(f.dev_name))))
            continue;
        why = bind_node(std::string("/dev/infiniband/") + f.dev_name);
        if (why.empty()) why = make_tree(f, g_view.null_rdev);
        if (!why.empty()) break;
    }
    set_sys_writable(false);
    g_view.devices = want;
    return why;
}

std::string enter(const std::string& libdir) {
    std::vector<Facts> devices;
    if (std::string why = gather(libdir, &devices); !why.empty()) return why;
    struct stat null_st;
    if (stat("/dev/null", &null_st) != 0) return errno_text("/dev/null");
    if (std::string why = unshare_mounts(); !why.empty()) return why;

    // What to add, and where a tmpfs goes: over the directory itself where the host has one,
    // else over its parent (which then holds the host's entries again, and the new one).
    static const char* const kAdd[] = {"/dev/infiniband", "/sys/class/infiniband",
                                       "/sys/class/infiniband_verbs"};
    std::vector<std::string> mounted;
    auto fail = [&](const std::string& why) {
        for (auto it = mounted.rbegin(); it != mounted.rend(); ++it)
            umount2(it->c_str(), MNT_DETACH);
        return why;
    };
    auto flags_for = [](const std::string& dir) -> unsigned long {
        return dir.rfind("/sys", 0) == 0 ? MS_NOSUID | MS_NODEV | MS_NOEXEC : MS_NOSUID;
    };
    bool host_has[3];
    for (int i = 0; i < 3; ++i) host_has[i] = exists(kAdd[i]);
    for (int i = 0; i < 3; ++i) {
        if (host_has[i]) continue;
        std::string parent = std::string(kAdd[i]).substr(0, std::string(kAdd[i]).rfind('/'));
        bool done = false;
        for (const auto& m : mounted) done |= m == parent;
        if (!done) {
            if (std::string why = overlay(parent, flags_for(parent)); !why.empty())
                return fail(why);
            mounted.push_back(parent);
        }
        if (mkdir(kAdd[i], 0755) != 0) return fail(errno_text(std::string("mkdir ") + kAdd[i]));
    }
    for (int i = 0; i < 3; ++i) {
        if (!host_has[i]) continue;
        if (std::string why = overlay(kAdd[i], flags_for(kAdd[i])); !why.empty()) return fail(why);
        mounted.push_back(kAdd[i]);
    }

    // The device files: /dev/null under the kernel's names. uroce's library opens neither (it
    // reaches the device through its socket); a program that checks it may open them does.
    std::vector<std::string> nodes;
    for (const Facts& f : devices) nodes.push_back(std::string("/dev/infiniband/") + f.dev_name);
    if (!exists("/dev/infiniband/rdma_cm")) nodes.push_back("/dev/infiniband/rdma_cm");
    for (const auto& n : nodes)
        if (std::string why = bind_node(n); !why.empty()) return fail(why);
    if (!exists("/sys/class/infiniband_verbs/abi_version") &&
        !put("/sys/class/infiniband_verbs/abi_version", "6\n"))
        return fail(errno_text("/sys/class/infiniband_verbs/abi_version"));
    for (const Facts& f : devices)
        if (std::string why = make_tree(f, null_st.st_rdev); !why.empty()) return fail(why);
    // The RDMA modules as loaded (module_tools.cpp answers modprobe and lsmod for them), where
    // /sys/module may be covered; without them the view still stands.
    std::vector<std::string> missing;
    for (const auto& m : modtools::rdma_modules())
        if (!exists("/sys/module/" + m)) missing.push_back(m);
    if (!missing.empty() && exists("/sys/module") &&
        overlay("/sys/module", flags_for("/sys/module")).empty()) {
        mounted.push_back("/sys/module");
        for (const auto& m : missing)
            if (mkdirs("/sys/module/" + m)) {
                put("/sys/module/" + m + "/initstate", "live\n");
                put("/sys/module/" + m + "/refcnt", "0\n");
            }
    }
    // sysfs is read-only to its readers, and so is the view's (resync makes it writable
    // while it changes it).
    g_view.null_rdev = null_st.st_rdev;
    for (const auto& m : mounted)
        if (m.rfind("/sys", 0) == 0) g_view.sys_mounts.push_back(m);
    for (const Facts& f : devices) g_view.devices.emplace_back(f.name, f.dev_name);
    set_sys_writable(false);
    return "";
}

}  // namespace uroce::sysview
