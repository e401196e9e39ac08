// Every libibverbs.so.1 export that is not part of uroce's core verbs:
// device-free utilities implemented for real, and "not supported" answers
// for the rest, shaped exactly like rdma-core's answers when a provider
// lacks an operation, so applications take their normal fallback paths.
//
// How verbs.h's macros and inlines reach the exported symbols (ibv_query_port, ibv_reg_mr,
// _ibv_query_gid_ex, ...) is in docs/verbs-support.md, "Verbs that are not symbols".
//
// Error conventions reproduced here (from the man pages and rdma-core's
// behaviour with a provider that lacks the op):
//   - int verbs documented as "0 or the value of errno": return EOPNOTSUPP
//     (positive). errno is set as well; rdma-core leaves it alone for most of
//     them, and a stale errno helps nobody.
//   - pointer-returning verbs: NULL with errno = EOPNOTSUPP.
//   - functions with a -1/errno convention (ibv_init_ah_from_wc,
//     ibv_read_*sysfs_file, ibv_cmd_poll_cq): -1 with errno set.
//   - ibv_resolve_eth_l2_from_gid: negative errno, like its other failures.
//   - void functions: do nothing.

#include <fcntl.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "emu/abi/verbs_names.h"

namespace {

int unsupported() {
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

int unsupported_minus1() {
    errno = EOPNOTSUPP;
    return -1;
}

template <typename T>
T* unsupported_null() {
    errno = EOPNOTSUPP;
    return nullptr;
}

// One row per ibv_rate value. The multiplier (of the 2.5 Gb/s base rate) is
// -1 for the rates that are not a whole multiple of it (the 64b/66b-encoded
// FDR/EDR/HDR/NDR lane speeds), as in rdma-core; 28 Gb/s is the one inexact
// row (11 x 2.5), kept because rdma-core returns it. mbps is the signalled
// data rate, e.g. 100 Gb/s EDR = 4 x 25.78125 Gb/s = 103125 Mb/s.
struct RateRow {
    ibv_rate rate;
    int mult;
    int mbps;
};

// clang-format off
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},
    {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},
    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},
    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},
    {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},
    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},
    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},
    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},
    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};
// clang-format on

const RateRow* find_rate(ibv_rate rate) {
    for (const RateRow& row : kRates)
        if (row.rate == rate) return &row;
    return nullptr;
}

// Reads one sysfs-style attribute: a single read() (sysfs attributes are
// produced in one go), trailing newline removed, NUL-terminated. A value
// that fills the whole buffer cannot be terminated and is rejected rather
// than handed on as an unterminated string.
int read_attr_file(const char* path, char* buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;

    ssize_t len;
    do {
        len = read(fd, buf, size);
    } while (len < 0 && errno == EINTR);
    int saved_errno = errno;
    close(fd);
    if (len < 0) {
        errno = saved_errno;
        return -1;
    }

    if (len > 0 && buf[len - 1] == '\n') {
        buf[--len] = '\0';
    } else if (static_cast<size_t>(len) < size) {
        buf[len] = '\0';
    } else if (len > 0) {
        errno = EOVERFLOW;
        return -1;
    }
    return static_cast<int>(len);
}

}  // namespace

// Provider-private types. rdma-core's driver.h / kern-abi.h are not installed
// (Debian ships only the application headers), so the private entry points
// below are declared with incomplete structs of the same tags: only the C
// symbol name and the register-sized arguments matter for the ABI. Several
// kernel command layouts share their tag with a verb of the same name (e.g.
// struct ibv_alloc_pd vs. ibv_alloc_pd()); C++ allows that as long as the
// struct is always written with "struct".
struct verbs_xrcd;
struct verbs_srq;
struct verbs_qp;
struct verbs_cq;
struct verbs_mr;
struct verbs_dm;
struct verbs_counters;
struct verbs_flow_action;
struct verbs_context_ops;
struct ibv_command_buffer;
struct ibv_get_context;
struct ibv_query_port;
struct ibv_alloc_pd;
struct ibv_open_xrcd;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_alloc_mw;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_resize_cq;
struct ibv_modify_cq;
struct ibv_create_srq;
struct ibv_create_xsrq;
struct ibv_modify_srq;
struct ibv_query_srq;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_open_qp;
struct ibv_query_qp;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_create_wq;
struct ibv_modify_wq;

// Leading members of rdma-core's struct verbs_sysfs_dev (driver.h, private
// ABI 34), up to the one field ibv_read_ibdev_sysfs_file needs. The offset is
// part of the IBVERBS_PRIVATE_34 ABI; Debian's binary reads ibdev_path at
// +0xb0 on x86-64, checked below.
struct uroce_verbs_sysfs_dev_prefix {
    void* entry_next;
    void* entry_prev;
    void* provider_data;
    const void* match;
    unsigned int flags;
    char sysfs_name[IBV_SYSFS_NAME_MAX];
    dev_t sysfs_cdev;
    char ibdev_name[IBV_SYSFS_NAME_MAX];
    char ibdev_path[IBV_SYSFS_PATH_MAX];
};
#if defined(__x86_64__)
static_assert(offsetof(uroce_verbs_sysfs_dev_prefix, ibdev_path) == 0xb0,
              "verbs_sysfs_dev layout drifted from IBVERBS_PRIVATE_34");
#endif

extern "C" {

// ===========================================================================
// Utilities: need no device, implemented for real.
// ===========================================================================

const char* ibv_wc_status_str(enum ibv_wc_status status) {
    return uroce::abi::wc_status_text(status);
}

const char* ibv_event_type_str(enum ibv_event_type event) { return uroce::abi::event_text(event); }

// rdma-core's names (verbs.h declares it, rdma-core 49 on exports it from its provider
// interface node). Numbers, not enumerators: IBV_WR_FLUSH (14) is newer than 44's
// header. rdma-core's table has no entry for 12 and 13 and returns NULL for them;
// "unknown" here, as for any other value outside the enum.
const char* ibv_wr_opcode_str(enum ibv_wr_opcode opcode) {
    static const char* const names[] = {
        "rdma-write",
        "rdma-write-with-imm",
        "send",
        "send-with-imm",
        "rdma-read",
        "atomic-cmp-and-swp",
        "atomic-fetch-and-add",
        "local-inv",
        "bind-mw",
        "send-with-inv",
        "tso",
        "driver1",
        nullptr,
        nullptr,
        "flush",
        "atomic-write",
    };
    const auto i = static_cast<unsigned>(opcode);
    return i < std::size(names) && names[i] ? names[i] : "unknown";
}

const char* ibv_node_type_str(enum ibv_node_type node_type) {
    switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    case IBV_NODE_UNKNOWN: break;
    }
    return "unknown";
}

const char* ibv_port_state_str(enum ibv_port_state port_state) {
    switch (port_state) {
    case IBV_PORT_NOP: return "no state change (NOP)";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active defer";
    }
    return "unknown";
}

int ibv_rate_to_mult(enum ibv_rate rate) {
    const RateRow* row = find_rate(rate);
    return row ? row->mult : -1;
}

enum ibv_rate mult_to_ibv_rate(int mult) {
    if (mult > 0)
        for (const RateRow& row : kRates)
            if (row.mult == mult) return row.rate;
    return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate) {
    const RateRow* row = find_rate(rate);
    return row ? row->mbps : -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps) {
    for (const RateRow& row : kRates)
        if (row.mbps == mbps) return row.rate;
    return IBV_RATE_MAX;
}

// Fork safety: rdma-core's ibv_fork_init marks registered ranges
// MADV_DONTFORK because a kernel HCA keeps DMAing into the parent's physical
// pages while fork's copy-on-write moves the parent to new ones. uroce's
// device writes through process_vm_writev on the parent's virtual addresses,
// which always hit the parent's current pages, so nothing needs protecting.
int ibv_fork_init(void) { return 0; }

enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

int ibv_dontfork_range(void* base, size_t size) { return 0; }

int ibv_dofork_range(void* base, size_t size) { return 0; }

// Kernel uverbs <-> verbs struct conversions. Only rdma-core's own libraries
// (librdmacm) call them; they are plain field copies between the uapi
// layouts in <rdma/ib_user_verbs.h> / <rdma/ib_user_sa.h> and verbs.h / sa.h.

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src) {
    static_assert(sizeof(dst->grh.dgid.raw) == sizeof(src->grh.dgid));
    std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(src->grh.dgid));
    dst->grh.flow_label = src->grh.flow_label;
    dst->grh.sgid_index = src->grh.sgid_index;
    dst->grh.hop_limit = src->grh.hop_limit;
    dst->grh.traffic_class = src->grh.traffic_class;
    dst->dlid = src->dlid;
    dst->sl = src->sl;
    dst->src_path_bits = src->src_path_bits;
    dst->static_rate = src->static_rate;
    dst->is_global = src->is_global;
    dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src) {
    // qp_state is deliberately not copied: rdma-core leaves the caller's
    // value in place (rdma_init_qp_attr() sets it before asking the kernel),
    // and a drop-in must not change that.
    dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
    dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
    dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
    dst->qkey = src->qkey;
    dst->rq_psn = src->rq_psn;
    dst->sq_psn = src->sq_psn;
    dst->dest_qp_num = src->dest_qp_num;
    dst->qp_access_flags = static_cast<unsigned int>(src->qp_access_flags);

    dst->cap.max_send_wr = src->max_send_wr;
    dst->cap.max_recv_wr = src->max_recv_wr;
    dst->cap.max_send_sge = src->max_send_sge;
    dst->cap.max_recv_sge = src->max_recv_sge;
    dst->cap.max_inline_data = src->max_inline_data;

    ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
    ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

    dst->pkey_index = src->pkey_index;
    dst->alt_pkey_index = src->alt_pkey_index;
    dst->en_sqd_async_notify = src->en_sqd_async_notify;
    dst->sq_draining = src->sq_draining;
    dst->max_rd_atomic = src->max_rd_atomic;
    dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
    dst->min_rnr_timer = src->min_rnr_timer;
    dst->port_num = src->port_num;
    dst->timeout = src->timeout;
    dst->retry_cnt = src->retry_cnt;
    dst->rnr_retry = src->rnr_retry;
    dst->alt_port_num = src->alt_port_num;
    dst->alt_timeout = src->alt_timeout;
}

}  // extern "C"

namespace {

// The two path-record layouts have the same members in a different order and
// width; one template serves both directions. GIDs are raw bytes on both
// sides; everything else is assigned member by member, so byte order (the
// __be fields are big-endian on both sides) is preserved.
template <typename Dst, typename Src>
void copy_path_rec_fields(Dst* dst, const Src* src) {
    dst->dlid = src->dlid;
    dst->slid = src->slid;
    dst->raw_traffic = src->raw_traffic;
    dst->flow_label = src->flow_label;
    dst->hop_limit = src->hop_limit;
    dst->traffic_class = src->traffic_class;
    dst->reversible = src->reversible;
    dst->numb_path = src->numb_path;
    dst->pkey = src->pkey;
    dst->sl = src->sl;
    dst->mtu_selector = src->mtu_selector;
    dst->mtu = src->mtu;
    dst->rate_selector = src->rate_selector;
    dst->rate = src->rate;
    dst->packet_life_time_selector = src->packet_life_time_selector;
    dst->packet_life_time = src->packet_life_time;
    dst->preference = src->preference;
}

}  // namespace

extern "C" {

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src) {
    static_assert(sizeof(dst->dgid.raw) == sizeof(src->dgid));
    std::memcpy(dst->dgid.raw, src->dgid, sizeof(src->dgid));
    std::memcpy(dst->sgid.raw, src->sgid, sizeof(src->sgid));
    copy_path_rec_fields(dst, src);
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src) {
    std::memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
    std::memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
    copy_path_rec_fields(dst, src);
}

// sysfs helpers. uroce devices do not appear in sysfs, but these are part of
// the exported ABI (librdmacm and providers use them for generic sysfs reads)
// and work on any path, so they behave exactly as documented in rdma-core.

const char* ibv_get_sysfs_path(void) {
    // Resolved once, thread-safely (a function-local static), into a plain
    // static buffer that stays valid until the process is gone, even for
    // callers in other libraries' destructors. SYSFS_PATH is honoured only
    // when not running set-uid, so an unprivileged caller cannot redirect a
    // privileged program's sysfs reads.
    static char path[IBV_SYSFS_PATH_MAX + 1];
    static const bool resolved = [] {
        const char* env = nullptr;
        if (getuid() == geteuid()) env = std::getenv("SYSFS_PATH");
        if (!env) env = "/sys";
        size_t len = strnlen(env, IBV_SYSFS_PATH_MAX);
        std::memcpy(path, env, len);
        while (len > 0 && path[len - 1] == '/') --len;
        path[len] = '\0';
        return true;
    }();
    (void)resolved;
    return path;
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
    char* path = nullptr;
    if (asprintf(&path, "%s/%s", dir, file) < 0) return -1;
    int ret = read_attr_file(path, buf, size);
    int saved_errno = errno;
    std::free(path);
    errno = saved_errno;
    return ret;
}

// Private ABI: the device argument is rdma-core's struct verbs_sysfs_dev,
// which only rdma-core's device discovery creates. uroce never hands one out,
// but a caller holding one still gets the documented result.
int ibv_read_ibdev_sysfs_file(char* buf, size_t size, void* sysfs_dev, const char* fnfmt, ...) {
    if (!sysfs_dev) {
        errno = EINVAL;
        return -1;
    }
    const auto* dev = static_cast<const uroce_verbs_sysfs_dev_prefix*>(sysfs_dev);

    va_list ap;
    va_start(ap, fnfmt);
    char* file = nullptr;
    int n = vasprintf(&file, fnfmt, ap);
    va_end(ap);
    if (n < 0) return -1;

    int ret = ibv_read_sysfs_file(dev->ibdev_path, file, buf, size);
    int saved_errno = errno;
    std::free(file);
    errno = saved_errno;
    return ret;
}

// Provider diagnostics sink. Providers only log through a verbs_context they
// created, and uroce runs none, so there is nothing to print.
void __verbs_log(struct verbs_context* ctx, uint32_t level, const char* fmt, ...) {}

// ===========================================================================
// Public verbs uroce does not support. Each one answers like rdma-core
// with a provider that lacks the operation.
// ===========================================================================

// Resolves a GID to a MAC/VLAN through the kernel neighbour table for
// providers that build Ethernet headers themselves; uroce's device sends UDP
// through the host stack and never needs it. Its failures are negative
// errno values.
int ibv_resolve_eth_l2_from_gid(struct ibv_context* context, struct ibv_ah_attr* attr,
                                uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t* vid) {
    errno = EOPNOTSUPP;
    return -EOPNOTSUPP;
}

// No device memory (ibv_alloc_dm) to import.
struct ibv_dm* ibv_import_dm(struct ibv_context* context, uint32_t dm_handle) {
    return unsupported_null<ibv_dm>();
}

void ibv_unimport_dm(struct ibv_dm* dm) {}

int ibv_set_ece(struct ibv_qp* qp, struct ibv_ece* ece) { return unsupported(); }

int ibv_query_ece(struct ibv_qp* qp, struct ibv_ece* ece) { return unsupported(); }

struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                 int fd, int access) {
    return unsupported_null<ibv_mr>();
}

// Newer verbs (rdma-core 59-64) over operations uroce's device does not have; rdma-core
// answers so for a provider without them (its dummy ops): DMA handles (TPH steering
// hints), device memory as a dma-buf, the port's effective speed.
struct ibv_dmah* ibv_alloc_dmah(struct ibv_context* context, struct ibv_dmah_init_attr* attr) {
    return unsupported_null<ibv_dmah>();
}

int ibv_dealloc_dmah(struct ibv_dmah* dmah) { return unsupported(); }

int ibv_dm_export_dmabuf_fd(struct ibv_dm* dm) { return unsupported_minus1(); }

int ibv_query_port_speed(struct ibv_context* context, uint32_t port_num, uint64_t* port_speed) {
    return unsupported();
}

// 0 means "not guaranteed in order", the conservative answer rdma-core gives
// when the provider does not implement the query (with
// IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS, rdma-core 54 on: no capability bits).
int ibv_query_qp_data_in_order(struct ibv_qp* qp, enum ibv_wr_opcode op, uint32_t flags) {
    return 0;
}

// ===========================================================================
// IBVERBS_PRIVATE_NN: the interface between rdma-core and its provider
// plug-ins (libmlx5.so.1, libefa.so.1, ...). Those libraries import these
// symbols, so they must exist for such a library to load next to ours, but
// uroce has no plug-in providers and no kernel uverbs file descriptor for the
// ibv_cmd_* helpers to talk to. Each release's node: libibverbs.map.
// verbs_allow_disassociate_destroy, the one variable: private_abi.cpp.
// ===========================================================================

// Providers register from a constructor as soon as their library is loaded
// (perftest links libmlx5.so.1 and libefa.so.1 directly), so registration
// must succeed silently; the registration is ignored because uroce's devices
// are not rdma-core providers. One name per provider ABI (rdma-core 44-56, 57-58,
// 59-63, 64); the older ones get their node from private_abi_older.cpp.
void verbs_register_driver_34(const struct verbs_device_ops* ops) {}
void verbs_register_driver_57(const struct verbs_device_ops* ops) {}
void verbs_register_driver_59(const struct verbs_device_ops* ops) {}
void verbs_register_driver_64(const struct verbs_device_ops* ops) {}

// Counts the attributes of a chain of ioctl command buffers. uroce never
// builds chains (nobody can call execute_ioctl usefully), so only the
// caller's own count is returned.
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer* link) {
    return num_attrs;
}

int execute_ioctl(struct ibv_context* context, struct ibv_command_buffer* cmd) {
    return unsupported();
}

void* _verbs_init_and_alloc_context(struct ibv_device* device, int cmd_fd, size_t alloc_size,
                                    struct verbs_context* context_offset, uint32_t driver_id) {
    return unsupported_null<void>();
}

struct ibv_context* verbs_open_device(struct ibv_device* device, void* private_data) {
    return unsupported_null<ibv_context>();
}

// The three below only ever receive objects built by
// _verbs_init_and_alloc_context() / a provider's create_cq, which fail
// above, so there is nothing to initialise or tear down.
void verbs_uninit_context(struct verbs_context* context) {}

void verbs_set_ops(struct verbs_context* vctx, const struct verbs_context_ops* ops) {}

void verbs_init_cq(struct ibv_cq* cq, struct ibv_context* context, struct ibv_comp_channel* channel,
                   void* cq_context) {}

// --- ibv_cmd_*: kernel uverbs command wrappers; errno-value convention. ---

int ibv_cmd_get_context(struct verbs_context* context, struct ibv_get_context* cmd, size_t cmd_size,
                        struct ib_uverbs_get_context_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_query_context(struct ibv_context* ctx, struct ibv_command_buffer* driver) {
    return unsupported();
}

int ibv_cmd_query_device_any(struct ibv_context* context,
                             const struct ibv_query_device_ex_input* input,
                             struct ibv_device_attr_ex* attr, size_t attr_size,
                             struct ib_uverbs_ex_query_device_resp* resp, size_t* resp_size) {
    return unsupported();
}

int ibv_cmd_query_port(struct ibv_context* context, uint8_t port_num,
                       struct ibv_port_attr* port_attr, struct ibv_query_port* cmd,
                       size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_alloc_pd(struct ibv_context* context, struct ibv_pd* pd, struct ibv_alloc_pd* cmd,
                     size_t cmd_size, struct ib_uverbs_alloc_pd_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_dealloc_pd(struct ibv_pd* pd) { return unsupported(); }

int ibv_cmd_open_xrcd(struct ibv_context* context, struct verbs_xrcd* xrcd, int vxrcd_size,
                      struct ibv_xrcd_init_attr* attr, struct ibv_open_xrcd* cmd, size_t cmd_size,
                      struct ib_uverbs_open_xrcd_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_close_xrcd(struct verbs_xrcd* xrcd) { return unsupported(); }

int ibv_cmd_reg_mr(struct ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access,
                   struct verbs_mr* vmr, struct ibv_reg_mr* cmd, size_t cmd_size,
                   struct ib_uverbs_reg_mr_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_rereg_mr(struct verbs_mr* vmr, uint32_t flags, void* addr, size_t length,
                     uint64_t hca_va, int access, struct ibv_pd* pd, struct ibv_rereg_mr* cmd,
                     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp* resp, size_t resp_sz) {
    return unsupported();
}

int ibv_cmd_dereg_mr(struct verbs_mr* vmr) { return unsupported(); }

int ibv_cmd_query_mr(struct ibv_pd* pd, struct verbs_mr* vmr, uint32_t mr_handle) {
    return unsupported();
}

int ibv_cmd_advise_mr(struct ibv_pd* pd, enum ibv_advise_mr_advice advice, uint32_t flags,
                      struct ibv_sge* sg_list, uint32_t num_sge) {
    return unsupported();
}

int ibv_cmd_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                          int access, struct verbs_mr* vmr) {
    return unsupported();
}

int ibv_cmd_alloc_mw(struct ibv_pd* pd, enum ibv_mw_type type, struct ibv_mw* mw,
                     struct ibv_alloc_mw* cmd, size_t cmd_size,
                     struct ib_uverbs_alloc_mw_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_dealloc_mw(struct ibv_mw* mw) { return unsupported(); }

int ibv_cmd_create_cq(struct ibv_context* context, int cqe, struct ibv_comp_channel* channel,
                      int comp_vector, struct ibv_cq* cq, struct ibv_create_cq* cmd,
                      size_t cmd_size, struct ib_uverbs_create_cq_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_create_cq_ex(struct ibv_context* context, const struct ibv_cq_init_attr_ex* cq_attr,
                         struct verbs_cq* cq, struct ibv_create_cq_ex* cmd, size_t cmd_size,
                         struct ib_uverbs_ex_create_cq_resp* resp, size_t resp_size,
                         uint32_t cmd_flags) {
    return unsupported();
}

// ibv_poll_cq's convention: a negative count on error.
int ibv_cmd_poll_cq(struct ibv_cq* cq, int ne, struct ibv_wc* wc) { return unsupported_minus1(); }

int ibv_cmd_req_notify_cq(struct ibv_cq* cq, int solicited_only) { return unsupported(); }

int ibv_cmd_resize_cq(struct ibv_cq* cq, int cqe, struct ibv_resize_cq* cmd, size_t cmd_size,
                      struct ib_uverbs_resize_cq_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_destroy_cq(struct ibv_cq* cq) { return unsupported(); }

int ibv_cmd_modify_cq(struct ibv_cq* cq, struct ibv_modify_cq_attr* attr, struct ibv_modify_cq* cmd,
                      size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_create_srq(struct ibv_pd* pd, struct ibv_srq* srq, struct ibv_srq_init_attr* attr,
                       struct ibv_create_srq* cmd, size_t cmd_size,
                       struct ib_uverbs_create_srq_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_create_srq_ex(struct ibv_context* context, struct verbs_srq* srq,
                          struct ibv_srq_init_attr_ex* attr_ex, struct ibv_create_xsrq* cmd,
                          size_t cmd_size, struct ib_uverbs_create_srq_resp* resp,
                          size_t resp_size) {
    return unsupported();
}

int ibv_cmd_modify_srq(struct ibv_srq* srq, struct ibv_srq_attr* srq_attr, int srq_attr_mask,
                       struct ibv_modify_srq* cmd, size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_query_srq(struct ibv_srq* srq, struct ibv_srq_attr* srq_attr, struct ibv_query_srq* cmd,
                      size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_destroy_srq(struct ibv_srq* srq) { return unsupported(); }

int ibv_cmd_create_qp(struct ibv_pd* pd, struct ibv_qp* qp, struct ibv_qp_init_attr* attr,
                      struct ibv_create_qp* cmd, size_t cmd_size,
                      struct ib_uverbs_create_qp_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_create_qp_ex(struct ibv_context* context, struct verbs_qp* qp,
                         struct ibv_qp_init_attr_ex* attr_ex, struct ibv_create_qp* cmd,
                         size_t cmd_size, struct ib_uverbs_create_qp_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_create_qp_ex2(struct ibv_context* context, struct verbs_qp* qp,
                          struct ibv_qp_init_attr_ex* qp_attr, struct ibv_create_qp_ex* cmd,
                          size_t cmd_size, struct ib_uverbs_ex_create_qp_resp* resp,
                          size_t resp_size) {
    return unsupported();
}

int ibv_cmd_open_qp(struct ibv_context* context, struct verbs_qp* qp, int vqp_sz,
                    struct ibv_qp_open_attr* attr, struct ibv_open_qp* cmd, size_t cmd_size,
                    struct ib_uverbs_create_qp_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_query_qp(struct ibv_qp* qp, struct ibv_qp_attr* qp_attr, int attr_mask,
                     struct ibv_qp_init_attr* qp_init_attr, struct ibv_query_qp* cmd,
                     size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask,
                      struct ibv_modify_qp* cmd, size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_modify_qp_ex(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask,
                         struct ibv_modify_qp_ex* cmd, size_t cmd_size,
                         struct ib_uverbs_ex_modify_qp_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_destroy_qp(struct ibv_qp* qp) { return unsupported(); }

int ibv_cmd_post_send(struct ibv_qp* ibqp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr) {
    if (bad_wr) *bad_wr = wr;
    return unsupported();
}

int ibv_cmd_post_recv(struct ibv_qp* ibqp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr) {
    if (bad_wr) *bad_wr = wr;
    return unsupported();
}

int ibv_cmd_post_srq_recv(struct ibv_srq* srq, struct ibv_recv_wr* wr,
                          struct ibv_recv_wr** bad_wr) {
    if (bad_wr) *bad_wr = wr;
    return unsupported();
}

int ibv_cmd_create_ah(struct ibv_pd* pd, struct ibv_ah* ah, struct ibv_ah_attr* attr,
                      struct ib_uverbs_create_ah_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_destroy_ah(struct ibv_ah* ah) { return unsupported(); }

int ibv_cmd_attach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
    return unsupported();
}

int ibv_cmd_detach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
    return unsupported();
}

int ibv_cmd_create_flow(struct ibv_qp* qp, struct ibv_flow* flow_id,
                        struct ibv_flow_attr* flow_attr, void* ucmd, size_t ucmd_size) {
    return unsupported();
}

int ibv_cmd_destroy_flow(struct ibv_flow* flow_id) { return unsupported(); }

int ibv_cmd_create_flow_action_esp(struct ibv_context* ctx, struct ibv_flow_action_esp_attr* attr,
                                   struct verbs_flow_action* flow_action,
                                   struct ibv_command_buffer* driver) {
    return unsupported();
}

int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action* flow_action,
                                   struct ibv_flow_action_esp_attr* attr,
                                   struct ibv_command_buffer* driver) {
    return unsupported();
}

int ibv_cmd_destroy_flow_action(struct verbs_flow_action* action) { return unsupported(); }

int ibv_cmd_create_wq(struct ibv_context* context, struct ibv_wq_init_attr* wq_init_attr,
                      struct ibv_wq* wq, struct ibv_create_wq* cmd, size_t cmd_size,
                      struct ib_uverbs_ex_create_wq_resp* resp, size_t resp_size) {
    return unsupported();
}

int ibv_cmd_modify_wq(struct ibv_wq* wq, struct ibv_wq_attr* attr, struct ibv_modify_wq* cmd,
                      size_t cmd_size) {
    return unsupported();
}

int ibv_cmd_destroy_wq(struct ibv_wq* wq) { return unsupported(); }

int ibv_cmd_create_rwq_ind_table(struct ibv_context* context,
                                 struct ibv_rwq_ind_table_init_attr* init_attr,
                                 struct ibv_rwq_ind_table* rwq_ind_table,
                                 struct ib_uverbs_ex_create_rwq_ind_table_resp* resp,
                                 size_t resp_size) {
    return unsupported();
}

int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table* rwq_ind_table) { return unsupported(); }

int ibv_cmd_create_counters(struct ibv_context* context, struct ibv_counters_init_attr* init_attr,
                            struct verbs_counters* vcounters, struct ibv_command_buffer* link) {
    return unsupported();
}

int ibv_cmd_destroy_counters(struct verbs_counters* vcounters) { return unsupported(); }

int ibv_cmd_read_counters(struct verbs_counters* vcounters, uint64_t* counters_value,
                          uint32_t ncounters, uint32_t flags, struct ibv_command_buffer* link) {
    return unsupported();
}

int ibv_cmd_alloc_dm(struct ibv_context* ctx, const struct ibv_alloc_dm_attr* dm_attr,
                     struct verbs_dm* dm, struct ibv_command_buffer* link) {
    return unsupported();
}

int ibv_cmd_free_dm(struct verbs_dm* dm) { return unsupported(); }

int ibv_cmd_reg_dm_mr(struct ibv_pd* pd, struct verbs_dm* dm, uint64_t offset, size_t length,
                      unsigned int access, struct verbs_mr* vmr, struct ibv_command_buffer* link) {
    return unsupported();
}

// Added to the provider interface by rdma-core 53-64 (prototypes as in the newest).
int ibv_cmd_create_cq_ex2(struct ibv_context* context, const struct ibv_cq_init_attr_ex* cq_attr,
                          struct verbs_create_cq_prov_attr* prov_attr, struct verbs_cq* cq,
                          struct ibv_create_cq_ex* cmd, size_t cmd_size,
                          struct ib_uverbs_ex_create_cq_resp* resp, size_t resp_size,
                          uint32_t cmd_flags, struct ibv_command_buffer* driver) {
    return unsupported();
}

int ibv_cmd_alloc_dmah(struct ibv_context* ctx, struct verbs_dmah* st,
                       struct ibv_dmah_init_attr* attr) {
    return unsupported();
}

int ibv_cmd_free_dmah(struct verbs_dmah* dmah) { return unsupported(); }

int ibv_cmd_reg_mr_ex(struct ibv_pd* pd, struct verbs_mr* vmr,
                      struct ibv_mr_init_attr* mr_init_attr) {
    return unsupported();
}

int ibv_cmd_export_dmabuf_fd(struct ibv_context* ctx, off_t pg_off) { return unsupported_minus1(); }

int ibv_cmd_query_port_speed(struct ibv_context* context, uint32_t port_num, uint64_t* speed) {
    return unsupported();
}

// The dma-buf heap (confidential-computing shared memory) rdma-core 64's mlx5 allocates from.
struct ibv_dmabuf_heap* ibv_dmabuf_heap_cc_shared_init(void) {
    return unsupported_null<ibv_dmabuf_heap>();
}

void ibv_dmabuf_heap_destroy(struct ibv_dmabuf_heap* heap) {}

void* ibv_dmabuf_heap_alloc(struct ibv_dmabuf_heap* heap, size_t size, int* dmabuf_fd) {
    return unsupported_null<void>();
}

void ibv_dmabuf_heap_free(void* buf, size_t size, int dmabuf_fd) {}

}  // extern "C"
