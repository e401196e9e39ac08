// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The libibverbs.so.1 exports that need no device, implemented for real: the enum-to-string
// functions, rate conversions, kernel struct conversions, fork safety, sysfs reads and the
// providers' log sink (the verbs uroce does not support are in unsupported.cpp).

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

}  // extern "C"
