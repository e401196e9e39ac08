// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Non-default ("compat") symbol versions of libibverbs.so.1.
//
// Debian's rdma-core exports 33 verbs twice: name@@IBVERBS_1.1 (the default,
// what every binary linked since 2006 references) and name@IBVERBS_1.0 (a
// hidden version, kept so binaries linked against libibverbs 1.0 still load).
// It also exports ibv_register_driver only as the hidden ibv_register_driver@IBVERBS_1.1.
// The default versions come from libibverbs.map; this file adds the hidden
// ones with .symver, which needs nothing in the map beyond the node itself.
//
// IBVERBS_1.0 COMPAT SYMBOLS MAP TO THE CURRENT ABI. In rdma-core the 1.0
// versions take and return the old structure layouts (struct ibv_device_1_0,
// ibv_qp_1_0, ... which wrap the real objects) and translate. uroce does not
// implement that translation: each name@IBVERBS_1.0 below forwards to the
// current function with the current argument types. The symbols exist so that
// the set of exported (name, version) pairs is identical to Debian's and a
// binary carrying a stray 1.0 reference still links; a binary actually built
// against the 2006 libibverbs 1.0 headers would not work (none is packaged by
// any current distribution).
//
// Mechanics: a .symver alias has to name a symbol defined in the same
// assembly file, and the default implementations live in other translation
// units, so every compat version is a one-line forwarding wrapper (compiled to
// a single jmp). The wrapper's own name (uroce_compat_*) is hidden by the
// "local: *" in the version script; the wrapper must not be given hidden
// visibility itself, or the versioned alias would be hidden too.

#include <infiniband/verbs.h>

#include <type_traits>

// GCC's symver attribute survives LTO; a toplevel asm(".symver") does not, but
// clang (which lacks the attribute) only has the asm form. Without LTO both
// produce identical objects.
#if defined(__has_attribute)
#if __has_attribute(symver) && !defined(__clang__)
#define UROCE_HAVE_SYMVER_ATTR 1
#endif
#endif

#ifdef UROCE_HAVE_SYMVER_ATTR
#define UROCE_SYMVER_ATTR(versioned) __attribute__((symver(versioned)))
#define UROCE_SYMVER_ASM(internal, versioned)
#else
#define UROCE_SYMVER_ATTR(versioned)
#define UROCE_SYMVER_ASM(internal, versioned) __asm__(".symver " internal ", " versioned);
#endif

// Defines uroce_compat_1_0_<name> forwarding to the current <name> and exports
// it as <name>@IBVERBS_1.0. "(name)args" keeps the function-like macros that
// verbs.h defines for some verbs (ibv_reg_mr, ibv_query_port, and
// ibv_get_device_list under RDMA_STATIC_PROVIDERS) from expanding, so the call
// goes to the exported symbol and not to the header's inline wrapper. The
// static_assert pins the wrapper to the exact prototype from <infiniband/verbs.h>.
#define UROCE_COMPAT_1_0(ret, name, params, args)                                           \
    extern "C" UROCE_SYMVER_ATTR(#name "@IBVERBS_1.0") ret uroce_compat_1_0_##name params { \
        return (name)args;                                                                  \
    }                                                                                       \
    UROCE_SYMVER_ASM("uroce_compat_1_0_" #name, #name "@IBVERBS_1.0")                       \
    static_assert(std::is_same_v<decltype(&uroce_compat_1_0_##name), decltype(&(name))>,    \
                  "compat wrapper for " #name " differs from verbs.h")

// clang-format off
// Devices and contexts.
UROCE_COMPAT_1_0(struct ibv_device**, ibv_get_device_list,
                 (int* num_devices), (num_devices));
UROCE_COMPAT_1_0(void, ibv_free_device_list,
                 (struct ibv_device** list), (list));
UROCE_COMPAT_1_0(const char*, ibv_get_device_name,
                 (struct ibv_device* device), (device));
UROCE_COMPAT_1_0(__be64, ibv_get_device_guid,
                 (struct ibv_device* device), (device));
UROCE_COMPAT_1_0(struct ibv_context*, ibv_open_device,
                 (struct ibv_device* device), (device));
UROCE_COMPAT_1_0(int, ibv_close_device,
                 (struct ibv_context* context), (context));
UROCE_COMPAT_1_0(int, ibv_get_async_event,
                 (struct ibv_context* context, struct ibv_async_event* event),
                 (context, event));
UROCE_COMPAT_1_0(void, ibv_ack_async_event,
                 (struct ibv_async_event* event), (event));

// Queries.
UROCE_COMPAT_1_0(int, ibv_query_device,
                 (struct ibv_context* context,
                  struct ibv_device_attr* device_attr),
                 (context, device_attr));
UROCE_COMPAT_1_0(int, ibv_query_port,
                 (struct ibv_context* context, uint8_t port_num,
                  struct _compat_ibv_port_attr* port_attr),
                 (context, port_num, port_attr));
UROCE_COMPAT_1_0(int, ibv_query_gid,
                 (struct ibv_context* context, uint8_t port_num, int index,
                  union ibv_gid* gid),
                 (context, port_num, index, gid));
UROCE_COMPAT_1_0(int, ibv_query_pkey,
                 (struct ibv_context* context, uint8_t port_num, int index,
                  __be16* pkey),
                 (context, port_num, index, pkey));

// PDs and MRs.
UROCE_COMPAT_1_0(struct ibv_pd*, ibv_alloc_pd,
                 (struct ibv_context* context), (context));
UROCE_COMPAT_1_0(int, ibv_dealloc_pd, (struct ibv_pd* pd), (pd));
UROCE_COMPAT_1_0(struct ibv_mr*, ibv_reg_mr,
                 (struct ibv_pd* pd, void* addr, size_t length, int access),
                 (pd, addr, length, access));
UROCE_COMPAT_1_0(int, ibv_dereg_mr, (struct ibv_mr* mr), (mr));

// CQs.
UROCE_COMPAT_1_0(struct ibv_cq*, ibv_create_cq,
                 (struct ibv_context* context, int cqe, void* cq_context,
                  struct ibv_comp_channel* channel, int comp_vector),
                 (context, cqe, cq_context, channel, comp_vector));
UROCE_COMPAT_1_0(int, ibv_resize_cq, (struct ibv_cq* cq, int cqe), (cq, cqe));
UROCE_COMPAT_1_0(int, ibv_destroy_cq, (struct ibv_cq* cq), (cq));
UROCE_COMPAT_1_0(int, ibv_get_cq_event,
                 (struct ibv_comp_channel* channel, struct ibv_cq** cq,
                  void** cq_context),
                 (channel, cq, cq_context));
UROCE_COMPAT_1_0(void, ibv_ack_cq_events,
                 (struct ibv_cq* cq, unsigned int nevents), (cq, nevents));

// SRQs.
UROCE_COMPAT_1_0(struct ibv_srq*, ibv_create_srq,
                 (struct ibv_pd* pd, struct ibv_srq_init_attr* srq_init_attr),
                 (pd, srq_init_attr));
UROCE_COMPAT_1_0(int, ibv_modify_srq,
                 (struct ibv_srq* srq, struct ibv_srq_attr* srq_attr,
                  int srq_attr_mask),
                 (srq, srq_attr, srq_attr_mask));
UROCE_COMPAT_1_0(int, ibv_query_srq,
                 (struct ibv_srq* srq, struct ibv_srq_attr* srq_attr),
                 (srq, srq_attr));
UROCE_COMPAT_1_0(int, ibv_destroy_srq, (struct ibv_srq* srq), (srq));

// QPs.
UROCE_COMPAT_1_0(struct ibv_qp*, ibv_create_qp,
                 (struct ibv_pd* pd, struct ibv_qp_init_attr* qp_init_attr),
                 (pd, qp_init_attr));
UROCE_COMPAT_1_0(int, ibv_query_qp,
                 (struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask,
                  struct ibv_qp_init_attr* init_attr),
                 (qp, attr, attr_mask, init_attr));
UROCE_COMPAT_1_0(int, ibv_modify_qp,
                 (struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask),
                 (qp, attr, attr_mask));
UROCE_COMPAT_1_0(int, ibv_destroy_qp, (struct ibv_qp* qp), (qp));

// Address handles and multicast.
UROCE_COMPAT_1_0(struct ibv_ah*, ibv_create_ah,
                 (struct ibv_pd* pd, struct ibv_ah_attr* attr), (pd, attr));
UROCE_COMPAT_1_0(int, ibv_destroy_ah, (struct ibv_ah* ah), (ah));
UROCE_COMPAT_1_0(int, ibv_attach_mcast,
                 (struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid),
                 (qp, gid, lid));
UROCE_COMPAT_1_0(int, ibv_detach_mcast,
                 (struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid),
                 (qp, gid, lid));
// clang-format on

// ibv_register_driver@IBVERBS_1.1 (hidden version only, as in rdma-core).
// It was the provider registration entry point before providers became
// private (rdma-core 13); a few old out-of-tree libraries still reference it.
// uroce has no plug-in providers, so registration is accepted and ignored.
// The init-function type is spelled as void* because the historical
// ibv_driver_init_func typedef is not in the installed headers; only the C
// symbol and the pointer-sized argument matter.
// clang-format off
extern "C" UROCE_SYMVER_ATTR("ibv_register_driver@IBVERBS_1.1")
void uroce_compat_1_1_ibv_register_driver(const char* name, void* init_func) {
    (void)name;
    (void)init_func;
}
// clang-format on
UROCE_SYMVER_ASM("uroce_compat_1_1_ibv_register_driver", "ibv_register_driver@IBVERBS_1.1")
