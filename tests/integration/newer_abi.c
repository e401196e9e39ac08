// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A program as built against a newer rdma-core than the system's (RELEASE, e.g. 64):
// it calls the verbs that release added since 44, declared here as that release's
// headers declare them, and is linked (newer_abi_test.sh) against libraries carrying
// that release's version nodes, with BIND_NOW. Run over uroce's libraries it must load
// and get the answers docs/verbs-support.md gives. Prints one line per check; exits 1
// on the first wrong answer.
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef RELEASE
#error "RELEASE: the rdma-core release this program is built for"
#endif

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
            printf(__VA_ARGS__);                                 \
            printf(" (errno %d: %s)\n", errno, strerror(errno)); \
            exit(1);                                             \
        }                                                        \
        printf("ok   " __VA_ARGS__);                             \
        printf("\n");                                            \
    } while (0)

// Each function from the release that added it on (RELEASE chooses).
// rdma-core 49: verbs.h (exported from the provider interface node, IBVERBS_PRIVATE_NN).
const char* ibv_wr_opcode_str(enum ibv_wr_opcode opcode);
// rdma-core 50 (EFA_1.3), 54 (MLX5_1.25).
int efadv_query_mr(struct ibv_mr* mr, void* attr, uint32_t inlen);
struct ibv_mr* mlx5dv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access, int mlx5_access);
int mlx5dv_get_data_direct_sysfs_path(struct ibv_context* context, char* buf, size_t buf_len);

#if RELEASE >= 59
// IBVERBS_1.15. The layout of struct ibv_mr_init_attr (buf: 64 on).
struct ibv_dmah;
struct ibv_mr_init_attr;
struct newer_mr_init_attr {
    size_t length;
    int access;
    uint64_t comp_mask;
    uint64_t iova;
    void* addr;
    int fd;
    uint64_t fd_offset;
    struct ibv_dmah* dmah;
    void* buf;
};
enum { MASK_IOVA = 1, MASK_ADDR = 2, MASK_FD = 4, MASK_FD_OFFSET = 8, MASK_DMAH = 16 };
struct ibv_dmah* ibv_alloc_dmah(struct ibv_context* context, void* attr);
int ibv_dealloc_dmah(struct ibv_dmah* dmah);
struct ibv_mr* ibv_reg_mr_ex(struct ibv_pd* pd, struct ibv_mr_init_attr* mr_init_attr);
int efadv_query_cq(struct ibv_cq* ibvcq, void* attr, uint32_t inlen);
#endif
#if RELEASE >= 60
int rdma_resolve_addrinfo(struct rdma_cm_id* id, const char* node, const char* service,
                          const struct rdma_addrinfo* hints);
int rdma_query_addrinfo(struct rdma_cm_id* id, struct rdma_addrinfo** info);
int rdma_write_cm_event(struct rdma_cm_id* id, enum rdma_cm_event_type event, int status,
                        uint64_t arg);
#endif
#if RELEASE >= 62
int ibv_query_port_speed(struct ibv_context* context, uint32_t port_num, uint64_t* port_speed);
int ibv_dm_export_dmabuf_fd(struct ibv_dm* dm);
#endif
#if RELEASE >= 63
int efadv_get_max_sq_depth(struct ibv_context* ibvctx, void* attr, uint32_t inlen);
#endif
#if RELEASE >= 64
struct ibv_buf;
void* ibv_alloc_buf(struct ibv_pd* pd, size_t size, struct ibv_buf** buf);
void ibv_free_buf(struct ibv_buf* buf);
struct ibv_mr* ibv_reg_buf_mr(struct ibv_pd* pd, struct ibv_buf* buf, void* addr, size_t length,
                              int access);
#endif

// rdma-core 50 appended active_speed_ex to struct ibv_port_attr; a newer header's
// ibv_query_port passes its larger size to verbs_context.query_port.
struct newer_port_attr {
    struct ibv_port_attr attr;
    uint32_t active_speed_ex;
    uint32_t more[3];  // and whatever a later release appends
};

int main(void) {
    printf("built for rdma-core %d\n", RELEASE);
    CHECK(strcmp(ibv_wr_opcode_str(IBV_WR_SEND), "send") == 0, "ibv_wr_opcode_str(SEND)");
    CHECK(strcmp(ibv_wr_opcode_str((enum ibv_wr_opcode)14), "flush") == 0,
          "ibv_wr_opcode_str(FLUSH)");
    CHECK(strcmp(ibv_wr_opcode_str((enum ibv_wr_opcode)99), "unknown") == 0,
          "ibv_wr_opcode_str(99) is unknown");

    int n = 0;
    struct ibv_device** list = ibv_get_device_list(&n);
    CHECK(list && n > 0, "a device");
    struct ibv_context* ctx = ibv_open_device(list[0]);
    CHECK(ctx, "ibv_open_device");
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    CHECK(pd, "ibv_alloc_pd");

    // Structures larger than uroce's (built on rdma-core 44): the tail reads zero.
    struct verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
    CHECK(vctx, "verbs_context.query_port is there (sz %zu)", vctx ? vctx->sz : 0);
    struct newer_port_attr pa;
    memset(&pa, 0xa5, sizeof pa);
    CHECK(vctx->query_port(ctx, 1, &pa.attr, sizeof pa) == 0, "query_port, %zu bytes", sizeof pa);
    CHECK(pa.attr.state == IBV_PORT_ACTIVE && pa.attr.active_speed == 32 &&
              pa.active_speed_ex == 0 && pa.more[2] == 0,
          "port attributes, active_speed_ex 0 (see active_speed)");
    struct {
        struct ibv_device_attr_ex attr;
        uint64_t more[4];
    } da;
    memset(&da, 0xa5, sizeof da);
    vctx = verbs_get_ctx_op(ctx, query_device_ex);
    CHECK(vctx && vctx->query_device_ex(ctx, NULL, &da.attr, sizeof da) == 0 &&
              da.attr.orig_attr.phys_port_cnt == 1 && da.more[3] == 0,
          "query_device_ex, %zu bytes: the tail zeroed", sizeof da);
    CHECK(vctx->query_device_ex(ctx, NULL, &da.attr, 8) == EINVAL,
          "query_device_ex, 8 bytes: EINVAL");

    char buf[8192];
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr, "ibv_reg_mr");
#if RELEASE >= 50
    CHECK(efadv_query_mr(mr, buf, 16) == EOPNOTSUPP, "efadv_query_mr: EOPNOTSUPP");
#endif
#if RELEASE >= 54
    errno = 0;
    CHECK(!mlx5dv_reg_dmabuf_mr(pd, 0, 4096, 0, 3, 0, 0) && errno == EOPNOTSUPP,
          "mlx5dv_reg_dmabuf_mr: NULL, EOPNOTSUPP");
    CHECK(mlx5dv_get_data_direct_sysfs_path(ctx, buf, sizeof buf) == EOPNOTSUPP,
          "mlx5dv_get_data_direct_sysfs_path: EOPNOTSUPP");
#endif

#if RELEASE >= 59
    errno = 0;
    uint32_t dmah_attr[4] = {0};
    CHECK(!ibv_alloc_dmah(ctx, dmah_attr) && errno == EOPNOTSUPP,
          "ibv_alloc_dmah: NULL, EOPNOTSUPP");
    struct newer_mr_init_attr in;
    memset(&in, 0, sizeof in);
    in.length = 4096;
    in.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    in.comp_mask = MASK_ADDR | MASK_IOVA;
    in.addr = buf;
    in.iova = 0x10000;
    struct ibv_mr* mr2 = ibv_reg_mr_ex(pd, (struct ibv_mr_init_attr*)&in);
    CHECK(mr2 && mr2->addr == buf && mr2->length == 4096 && mr2->pd == pd,
          "ibv_reg_mr_ex by address and iova: registered");
    CHECK(ibv_dereg_mr(mr2) == 0, "ibv_dereg_mr of it");
    in.comp_mask = MASK_ADDR | MASK_DMAH;
    errno = 0;
    CHECK(!ibv_reg_mr_ex(pd, (struct ibv_mr_init_attr*)&in) && errno == EOPNOTSUPP,
          "ibv_reg_mr_ex with a DMA handle: NULL, EOPNOTSUPP");
    in.comp_mask = MASK_FD | MASK_FD_OFFSET | MASK_IOVA;
    in.fd = 0;
    errno = 0;
    CHECK(!ibv_reg_mr_ex(pd, (struct ibv_mr_init_attr*)&in) && errno == EOPNOTSUPP,
          "ibv_reg_mr_ex of a dma-buf: NULL, EOPNOTSUPP");
    in.comp_mask = MASK_IOVA;
    errno = 0;
    CHECK(!ibv_reg_mr_ex(pd, (struct ibv_mr_init_attr*)&in) && errno == EINVAL,
          "ibv_reg_mr_ex without an address: NULL, EINVAL");
#endif
#if RELEASE >= 60
    errno = 0;
    CHECK(rdma_write_cm_event(NULL, (enum rdma_cm_event_type)18, 0, 1) == -1 && errno == EINVAL,
          "rdma_write_cm_event(USER) without an id: -1, EINVAL");
    errno = 0;
    CHECK(rdma_write_cm_event(NULL, RDMA_CM_EVENT_ESTABLISHED, 0, 1) == -1 && errno == EINVAL,
          "rdma_write_cm_event(ESTABLISHED): -1, EINVAL");
    errno = 0;
    CHECK(rdma_query_addrinfo(NULL, NULL) == -1 && errno == EINVAL, "rdma_query_addrinfo: EINVAL");
    struct rdma_cm_id* cm = NULL;
    CHECK(rdma_create_id(NULL, &cm, NULL, RDMA_PS_TCP) == 0, "rdma_create_id (synchronous)");
    CHECK(rdma_resolve_addrinfo(cm, "127.0.0.1", "7471", NULL) == 0,
          "rdma_resolve_addrinfo: resolved");
    struct rdma_addrinfo* ai = NULL;
    CHECK(rdma_query_addrinfo(cm, &ai) == 0 && ai && ai->ai_dst_addr,
          "rdma_query_addrinfo: the result");
    rdma_freeaddrinfo(ai);
    CHECK(rdma_destroy_id(cm) == 0, "rdma_destroy_id");
#endif
#if RELEASE >= 62
    uint64_t speed = 0;
    CHECK(ibv_query_port_speed(ctx, 1, &speed) == EOPNOTSUPP, "ibv_query_port_speed: EOPNOTSUPP");
    errno = 0;
    CHECK(ibv_dm_export_dmabuf_fd(NULL) == -1 && errno == EOPNOTSUPP,
          "ibv_dm_export_dmabuf_fd: -1, EOPNOTSUPP");
#endif
#if RELEASE >= 63
    CHECK(efadv_get_max_sq_depth(ctx, buf, 16) == -EOPNOTSUPP,
          "efadv_get_max_sq_depth: -EOPNOTSUPP");
#endif
#if RELEASE >= 64
    struct ibv_buf* b = NULL;
    char* p = ibv_alloc_buf(pd, 3 * 4096, &b);
    CHECK(p && b && ((uintptr_t)p & 4095) == 0, "ibv_alloc_buf: page aligned");
    struct ibv_mr* mr3 = ibv_reg_buf_mr(pd, b, p + 4096, 8192, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr3 && mr3->addr == p + 4096 && mr3->length == 8192, "ibv_reg_buf_mr inside the buffer");
    CHECK(ibv_dereg_mr(mr3) == 0, "ibv_dereg_mr of it");
    errno = 0;
    CHECK(!ibv_reg_buf_mr(pd, b, p + 4096, 3 * 4096, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL,
          "ibv_reg_buf_mr past the buffer: NULL, EINVAL");
    ibv_free_buf(b);
#endif

    CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
    CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
    CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
    ibv_free_device_list(list);
    printf("PASS rdma-core %d program\n", RELEASE);
    return 0;
}
