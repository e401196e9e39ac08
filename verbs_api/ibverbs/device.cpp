// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Device discovery, open/close and the query verbs.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "emu/abi/c_list.h"
#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/clock.h"
#include "emu/abi/runtime.h"
#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

#undef ibv_query_port

namespace {

std::mutex g_devices_mu;
// Kept for the life of the process, like rdma-core's: never destroyed, so the devices stay
// reachable (LeakSanitizer does not call them leaked) and usable from other exit handlers.
std::vector<Device*>& g_devices = *new std::vector<Device*>;

std::string lib_dir() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&lib_dir), &info) && info.dli_fname) {
        std::string p = info.dli_fname;
        auto slash = p.rfind('/');
        if (slash != std::string::npos) return p.substr(0, slash);
    }
    return ".";
}

// With no device running, start the default one (as `uroce start` would), unless
// UROCE_NO_AUTOSTART is set.
void autostart() {
    const char* off = getenv("UROCE_NO_AUTOSTART");
    if (off && *off && std::strcmp(off, "0") != 0) return;
    // Installed, the CLI is where the install rules put it relative to this library; in a
    // build tree, in build/bin beside build/lib (docs/install.md).
    std::string cli = lib_dir() + "/" UROCE_LIB_TO_BIN "/uroce";
    if (access(cli.c_str(), X_OK) != 0) cli = lib_dir() + "/../bin/uroce";
    if (const char* c = getenv("UROCE_CLI")) cli = c;
    if (access(cli.c_str(), X_OK) != 0) return;
    pid_t pid = fork();
    if (pid < 0) return;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execl(cli.c_str(), cli.c_str(), "start", static_cast<char*>(nullptr));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

// The names and paths the kernel gives a device (uverbs<N>, its class directories), which
// `uroce run` provides (docs/system-view.md); the library itself reads none of them.
Device* make_device(const abi::DeviceInfo& info, const std::vector<abi::DeviceInfo>& running) {
    auto* d = new Device();
    d->info = info;
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(d->dev.name, sizeof d->dev.name, "%s", info.name.c_str());
    std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs%d",
                  abi::uverbs_index(info.name, running));
    std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "/sys/class/infiniband_verbs/%s",
                  d->dev.dev_name);
    std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/sys/class/infiniband/%s",
                  info.name.c_str());
    return d;
}

// The GID table is the device's (its addresses, IPv4 ones IPv4-mapped): entry `i`, false
// past its end.
bool fill_gid(const Context* ctx, uint32_t i, ibv_gid* gid) {
    if (i >= ctx->open.gid_count || i >= abi::kGidTblLen) return false;
    std::memcpy(gid->raw, ctx->open.gids[i], 16);
    return true;
}

// The interface that holds an IPv6 address (a link-local one: its scope), 0 if none.
int ifindex_for6(const uint8_t* ip6, uint32_t scope) {
    if (scope) return int(scope);
    ifaddrs* ifa = nullptr;
    int idx = 0;
    if (getifaddrs(&ifa) != 0) return 0;
    for (ifaddrs* i = ifa; i && !idx; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
            std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, ip6, 16) == 0)
            idx = int(if_nametoindex(i->ifa_name));
    freeifaddrs(ifa);
    return idx;
}

int ifindex_for(uint32_t ip_be) {
    ifaddrs* ifa = nullptr;
    int idx = 0;
    if (getifaddrs(&ifa) != 0) return 0;
    for (ifaddrs* i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
        if (sin->sin_addr.s_addr == ip_be) {
            idx = int(if_nametoindex(i->ifa_name));
            break;
        }
    }
    freeifaddrs(ifa);
    // 127.0.0.0/8 is all on lo even where only 127.0.0.1 is listed.
    if (!idx && (ntohl(ip_be) >> 24) == 127) idx = int(if_nametoindex("lo"));
    return idx;
}

// The interface that holds GID entry `i`'s address.
int gid_ifindex(const Context* c, uint32_t i) {
    const uint8_t* g = c->open.gids[i];
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g, kMapped, 12) == 0) {
        uint32_t ip;
        std::memcpy(&ip, g + 12, 4);
        return ifindex_for(ip);
    }
    const bool link_local = g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
    return ifindex_for6(g, link_local ? c->open.ipv6_scope : 0);
}

void fill_device_attr(const Context* ctx, ibv_device_attr* a) {
    std::memset(a, 0, sizeof *a);
    std::snprintf(a->fw_ver, sizeof a->fw_ver, "%s", abi::kFwVer);
    a->node_guid = ctx->open.guid_be;
    a->sys_image_guid = ctx->open.guid_be;
    a->max_mr_size = abi::kMaxMrSize;
    a->page_size_cap = 0xfffff000;
    a->vendor_id = abi::kVendorId;
    a->vendor_part_id = abi::kVendorPartId;
    a->hw_ver = abi::kHwVer;
    a->max_qp = int(abi::kMaxQp);
    a->max_qp_wr = int(abi::kMaxQpWr);
    // Memory windows of type 1 and 2B, LOCAL_INV and SEND_WITH_INV, as ConnectX reports
    // them (docs/memory-windows.md).
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |
                          IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_XRC | IBV_DEVICE_MEM_WINDOW |
                          IBV_DEVICE_MEM_MGT_EXTENSIONS | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    a->max_sge = int(abi::kMaxSge);
    a->max_sge_rd = int(abi::kMaxSge);
    a->max_cq = int(abi::kMaxCq);
    a->max_cqe = int(abi::kMaxCqe);
    a->max_mr = int(abi::kMaxMr);
    a->max_mw = int(abi::kMaxMw);
    a->max_pd = int(abi::kMaxPd);
    a->max_qp_rd_atom = int(abi::kMaxQpRdAtom);
    a->max_qp_init_rd_atom = int(abi::kMaxQpRdAtom);
    a->max_res_rd_atom = int(abi::kMaxQpRdAtom * abi::kMaxQp);
    // Every atomic of a device runs on its one engine thread: atomic with respect to
    // all atomics through this device, not to CPU accesses (IBV_ATOMIC_HCA).
    a->atomic_cap = IBV_ATOMIC_HCA;
    a->max_ah = int(abi::kMaxAh);
    a->max_mcast_grp = int(abi::kMaxMcastGrp);
    a->max_mcast_qp_attach = int(abi::kMaxMcastQpAttach);
    a->max_total_mcast_qp_attach = int(abi::kMaxTotalMcastQpAttach);
    a->max_srq = int(abi::kMaxSrq);
    a->max_srq_wr = int(abi::kMaxSrqWr);
    a->max_srq_sge = int(abi::kMaxSge);
    a->max_pkeys = 1;
    a->local_ca_ack_delay = 15;
    a->phys_port_cnt = 1;
}

}  // namespace

namespace uroce::verbs {

namespace {
// One request: 0 or the device's verdict; *gone when there is no device to give one (it
// was gone already, or its end of the socket closed: abi::transact says ENODEV when the
// reply is missing). Other failures are the call's own, as an fd to pass that is not one
// (EBADF from sendmsg: ibv_open_xrcd).
int transact(Context* ctx, abi::Request& req, abi::Response& resp, int* fds, int* nfds, int send_fd,
             bool* gone) {
    *gone = ctx->gone.load(std::memory_order_acquire);
    if (*gone) return EIO;
    std::lock_guard<std::mutex> g(ctx->conn->mu);
    if (int e = abi::transact(ctx->sock, req, &resp, fds, nfds, send_fd)) {
        *gone = e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ENODEV;
        return *gone ? EIO : e;
    }
    return resp.err;
}
}  // namespace

int request(Context* ctx, abi::Request& req, abi::Response& resp, int* fds, int* nfds,
            int send_fd) {
    bool gone;
    return transact(ctx, req, resp, fds, nfds, send_fd, &gone);
}

int destroy_request(Context* ctx, abi::Request& req, abi::Response& resp) {
    bool gone;
    int e = transact(ctx, req, resp, nullptr, nullptr, -1, &gone);
    return gone ? 0 : e;
}

int destroy_handle(Context* ctx, abi::Op op, uint32_t handle) {
    abi::Request req{};
    req.op = op;
    req.u.handle.handle = handle;
    abi::Response resp{};
    return destroy_request(ctx, req, resp);
}

bool map_ring(int fd, size_t bytes, uint32_t slots, uint32_t stride, Ring* out) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return false;
    out->base = static_cast<uint8_t*>(p);
    out->bytes = bytes;
    out->mask = slots - 1;
    out->stride = stride;
    return true;
}

int take_ring(int e, const int* fds, int nfds, uint32_t slots, uint32_t stride, Ring* out) {
    if (!e && nfds != 1) e = EPROTO;
    if (!e) {
        nfds = 0;  // map_ring closes it
        if (!map_ring(fds[0], abi::ring_bytes(slots, stride), slots, stride, out)) e = ENOMEM;
    }
    if (e)
        for (int i = 0; i < nfds; ++i) close(fds[i]);
    return e;
}

void unmap_ring(Ring& r) {
    if (r.base) munmap(r.base, r.bytes);
    r.base = nullptr;
}

void give_back(Context* ctx, abi::Op destroy_op, uint32_t handle) {
    destroy_handle(ctx, destroy_op, handle);
}

int query_port(ibv_context* c, uint8_t port, ibv_port_attr* attr, size_t len) {
    if (device_is_gone(c)) return EIO;  // as the kernel's after disassociation
    if (port != 1) return EINVAL;
    // The active MTU is the device's, from its interface's MTU (emu/engine/port_mtu.h).
    abi::Request req{};
    req.op = abi::Op::kQueryPort;
    abi::Response resp{};
    if (int e = request(ctx_of(c), req, resp)) return e;
    ibv_port_attr a{};
    a.state = IBV_PORT_ACTIVE;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = ibv_mtu(resp.u.port.active_mtu);
    a.gid_tbl_len = int(abi::kGidTblLen);
    a.port_cap_flags = 0;
    a.max_msg_sz = abi::kMaxMsgSize;
    a.pkey_tbl_len = 1;
    a.max_vl_num = 1;
    a.active_width = 2;   // 4X
    a.active_speed = 32;  // EDR: reported as a 100 Gb/s link; see docs/device.md
    a.phys_state = 5;     // LinkUp
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    // len is sizeof(struct ibv_port_attr) in the caller's verbs.h (verbs.h's ibv_query_port
    // wrapper passes it). As rdma-core: a shorter structure gets its part, a longer one
    // (rdma-core 50 appended active_speed_ex) is zeroed past ours, and 0 there means "see
    // active_speed", which is how rdma-core's programs read it.
    if (len > sizeof a) std::memset(attr, 0, len);
    std::memcpy(attr, &a, len < sizeof a ? len : sizeof a);
    return 0;
}

int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr,
                    size_t len) {
    // len is sizeof(struct ibv_device_attr_ex) in the caller's verbs.h. As rdma-core
    // (ibv_cmd_query_device_any): at least orig_attr, the part we know copied, the rest of
    // a longer (newer) structure zeroed, so its newer fields read "not supported".
    if (in && in->comp_mask) return EINVAL;
    if (len < sizeof(ibv_device_attr)) return EINVAL;
    if (device_is_gone(c)) return EIO;
    ibv_device_attr_ex a{};
    fill_device_attr(ctx_of(c), &a.orig_attr);
    // Every CQE carries the device clock (emu/abi/clock.h).
    a.completion_timestamp_mask = ~uint64_t(0);
    a.hca_core_clock = abi::kHcaCoreClockKhz;
    a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;  // rdma-core fills it for every provider
    // As the kernel's uverbs: all the device's capability bits, the 32 of device_cap_flags and
    // those above, here RDMA ATOMIC WRITE and FLUSH of both placement types (rxe reports them
    // the same way; docs/verbs-support.md says what "persistent" means here).
    a.device_cap_flags_ex = a.orig_attr.device_cap_flags | abi::kDeviceAtomicWrite |
                            abi::kDeviceFlushGlobal | abi::kDeviceFlushPersistent;
    // On-demand paging (docs/verbs-support.md): per transport what rxe reports (FLUSH and
    // ATOMIC WRITE on RC since Linux 6.16), XRC (which rxe lacks) as ConnectX; implicit ODP
    // too, as ConnectX.
    a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    a.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                                IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV |
                                                abi::kOdpSupportFlush | abi::kOdpSupportAtomicWrite;
    a.odp_caps.per_transport_caps.ud_odp_caps =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
    a.xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                     IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
    if (len > sizeof a) std::memset(attr, 0, len);
    std::memcpy(attr, &a, len < sizeof a ? len : sizeof a);
    return 0;
}

int query_rt_values(ibv_context* c, ibv_values_ex* values) {
    (void)c;
    if (values->comp_mask & ~uint32_t(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;  // as mlx5
    if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
        // As mlx5: the clock's count in tv_nsec (here it is nanoseconds anyway).
        values->raw_clock.tv_sec = 0;
        values->raw_clock.tv_nsec = long(abi::device_clock_ns());
    }
    return 0;
}

Conn::~Conn() {
    if (doorbell >= 0) close(doorbell);
    if (db) munmap(db, abi::doorbell_page_bytes());
}

ibv_context* make_context(const std::shared_ptr<Conn>& conn, int sock, int async_fd) {
    auto* ctx = new Context();
    ctx->sock = sock;
    ctx->conn = conn;
    ctx->doorbell = conn->doorbell;
    ctx->db = conn->db;
    ctx->device = conn->device;
    ctx->open = conn->open;
    verbs_context& v = ctx->vctx;
    v.sz = sizeof(verbs_context);
    v.query_port = query_port;
    v.query_device_ex = query_device_ex;
    v.open_xrcd = open_xrcd;
    v.close_xrcd = close_xrcd;
    v.create_srq_ex = create_srq_ex;
    v.get_srq_num = get_srq_num;
    v.create_qp_ex = create_qp_ex;
    v.open_qp = open_qp;
    v.create_cq_ex = create_cq_ex;
    v.query_rt_values = query_rt_values;
    v.advise_mr = advise_mr;
    v.alloc_td = alloc_td;
    v.dealloc_td = dealloc_td;
    v.alloc_parent_domain = alloc_parent_domain;
    ibv_context& c = v.context;
    c.device = &conn->device->dev;
    c.cmd_fd = sock;
    c.async_fd = async_fd;
    c.num_comp_vectors = 1;
    pthread_mutex_init(&c.mutex, nullptr);
    c.abi_compat = __VERBS_ABI_IS_EXTENDED;
    c.ops.poll_cq = poll_cq;
    c.ops.req_notify_cq = req_notify_cq;
    c.ops.post_send = post_send;
    c.ops.post_recv = post_recv;
    c.ops.post_srq_recv = post_srq_recv;
    c.ops.alloc_mw = alloc_mw;
    c.ops.dealloc_mw = dealloc_mw;
    c.ops.bind_mw = bind_mw;
    if (int e = start_watcher(ctx)) {
        ibv_close_device(&c);
        errno = e;
        return nullptr;
    }
    return &c;
}

}  // namespace uroce::verbs

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
    // A runtime directory someone else controls lists no device (and starts none), as a
    // host without RDMA hardware lists none; the reason goes to stderr once.
    if (std::string why = abi::check_runtime_dir(false); !why.empty()) {
        abi::report_once(why);
        if (num_devices) *num_devices = 0;
        return static_cast<ibv_device**>(calloc(1, sizeof(ibv_device*)));
    }
    auto infos = abi::list_devices();
    if (infos.empty()) {
        autostart();
        infos = abi::list_devices();
    }
    std::lock_guard<std::mutex> g(g_devices_mu);
    std::vector<ibv_device*> out;
    for (auto& info : infos) {
        Device* d = nullptr;
        for (Device* known : g_devices)
            if (known->info.name == info.name && known->info.pid == info.pid) d = known;
        if (!d) {
            d = make_device(info, infos);
            g_devices.push_back(d);
        }
        d->index = int(out.size());
        out.push_back(&d->dev);
    }
    return abi::c_list(out, num_devices);
}

void ibv_free_device_list(ibv_device** list) { free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device->name; }

__be64 ibv_get_device_guid(ibv_device* device) {
    return htobe64(reinterpret_cast<Device*>(device)->info.guid);
}

int ibv_get_device_index(ibv_device* device) { return reinterpret_cast<Device*>(device)->index; }

ibv_context* ibv_open_device(ibv_device* device) {
    Device* d = reinterpret_cast<Device*>(device);
    int sock = abi::connect_device(d->info.name);
    if (sock < 0) {
        errno = -sock == ENOENT || -sock == ECONNREFUSED ? ENODEV : -sock;
        return nullptr;
    }
    abi::Request req{};
    req.op = abi::Op::kOpen;
    req.u.open.version = abi::kProtocolVersion;
    req.u.open.pid = getpid();
    abi::Response resp{};
    int fds[abi::kMaxFds];
    int nfds = 0;
    int err = abi::transact(sock, req, &resp, fds, &nfds);
    if (!err) err = resp.err;
    if (!err && nfds != 3) err = EPROTO;
    void* db = MAP_FAILED;
    if (!err) {
        db = mmap(nullptr, abi::doorbell_page_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fds[2],
                  0);
        if (db == MAP_FAILED) err = errno;
    }
    if (err) {
        for (int i = 0; i < nfds; ++i) close(fds[i]);
        close(sock);
        errno = err;
        return nullptr;
    }
    close(fds[2]);
    // Let the device reach our registered memory where Yama restricts ptrace: the process
    // at the other end of the socket, not whatever pid the answer names.
    abi::allow_device_ptrace(sock);

    auto conn = std::make_shared<Conn>();
    conn->doorbell = fds[0];
    conn->db = static_cast<abi::DoorbellPage*>(db);
    conn->device = d;
    conn->open = resp.u.open;
    conn->pid = getpid();
    ibv_context* c = make_context(conn, sock, fds[1]);
    if (c) share_conn(conn, sock);
    return c;
}

int ibv_close_device(ibv_context* context) {
    Context* ctx = ctx_of(context);
    stop_watcher(ctx);
    // Closing the session makes the device destroy whatever is left, as uverbs does, once
    // no other context shares it (an imported one holds a dup of the socket).
    close(ctx->sock);
    if (context->async_fd >= 0) close(context->async_fd);
    pthread_mutex_destroy(&context->mutex);
    delete ctx;
    return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
    if (device_is_gone(context)) return EIO;
    fill_device_attr(ctx_of(context), attr);
    return 0;
}

int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* attr) {
    // The exported symbol serves binaries that predate verbs_context.query_port; they
    // pass the older, shorter struct, which ends before `flags`.
    return query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                      offsetof(ibv_port_attr, flags));
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
    if (device_is_gone(context)) {
        errno = EIO;
        return -1;
    }
    if (port_num != 1 || index < 0 || uint32_t(index) >= abi::kGidTblLen) {
        errno = EINVAL;
        return -1;
    }
    if (!fill_gid(ctx_of(context), uint32_t(index), gid))
        std::memset(gid, 0, sizeof *gid);  // an empty entry reads as zero, as the kernel's do
    return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
    if (device_is_gone(context)) {
        errno = EIO;
        return -1;
    }
    if (port_num != 1 || index != 0) {
        errno = EINVAL;
        return -1;
    }
    *pkey = htobe16(0xffff);
    return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
    (void)context;
    if (port_num != 1) {
        errno = EINVAL;
        return -1;
    }
    if ((be16toh(pkey) & 0x7fff) == 0x7fff) return 0;
    errno = ENOENT;
    return -1;
}

// enum ibv_gid_type_sysfs from rdma-core's private driver.h: 0 = RoCE v1, 1 = RoCE v2.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
    if (port_num != 1 || index >= ctx_of(context)->open.gid_count) {
        errno = EINVAL;
        return -1;
    }
    *type = 1;
    return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
    if (flags) return EINVAL;
    if (device_is_gone(context)) return EIO;
    if (port_num != 1 || gid_index >= abi::kGidTblLen) return EINVAL;
    ibv_gid_entry e{};
    const Context* c = ctx_of(context);
    if (!fill_gid(c, gid_index, &e.gid)) return ENODATA;  // an empty entry (rdma-core's answer)
    e.gid_index = gid_index;
    e.port_num = 1;
    e.gid_type = IBV_GID_TYPE_ROCE_V2;
    e.ndev_ifindex = uint32_t(gid_ifindex(c, gid_index));
    std::memcpy(entry, &e, entry_size < sizeof e ? entry_size : sizeof e);
    return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
    if (flags) return -EINVAL;
    const uint32_t n = ctx_of(context)->open.gid_count;
    if (max_entries < n || max_entries < 1) return -EINVAL;  // as the kernel's
    auto* at = reinterpret_cast<uint8_t*>(entries);
    for (uint32_t i = 0; i < n; ++i)
        if (int r = _ibv_query_gid_ex(context, 1, i,
                                      reinterpret_cast<ibv_gid_entry*>(at + size_t(i) * entry_size),
                                      0, entry_size))
            return -r;
    return ssize_t(n);
}

}  // extern "C"
