// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Every libibverbs.so.1 export that is not part of uroce's core verbs and needs a device
// uroce does not have: "not supported" answers shaped exactly like rdma-core's answers when a
// provider lacks an operation, so applications take their normal fallback paths (the
// device-free utilities, implemented for real, are in utilities.cpp).
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

extern "C" {

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
