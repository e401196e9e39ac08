// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The libmlx5.so.1 / libefa.so.1 stand-ins (verbs_api/stubs/) answer every call the way
// rdma-core's direct-verbs libraries answer for a device that is not theirs: int
// functions return EOPNOTSUPP (and set errno), pointer functions return NULL with errno
// EOPNOTSUPP, mlx5dv_is_supported is false; the few documented otherwise answer as
// documented (verbs_api/stubs/mlx5.symbols). perftest relies on these answers to stay on
// its generic verbs paths. The test is linked against the stand-ins themselves.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstdint>

namespace {

// Any non-null pointer: the stand-ins must not touch their arguments.
template <typename T>
T* bogus() {
    return reinterpret_cast<T*>(uintptr_t(0x10));
}

// `call` answers `answer` and sets errno to EOPNOTSUPP.
#define EXPECT_UNSUPPORTED_AS(call, answer) \
    do {                                    \
        errno = 0;                          \
        EXPECT_EQ((call), answer);          \
        EXPECT_EQ(errno, EOPNOTSUPP);       \
    } while (0)
#define EXPECT_INT_UNSUPPORTED(call) EXPECT_UNSUPPORTED_AS(call, EOPNOTSUPP)
#define EXPECT_PTR_UNSUPPORTED(call) EXPECT_UNSUPPORTED_AS(call, nullptr)

TEST(Mlx5Stub, IsSupportedIsFalse) {
    EXPECT_FALSE(mlx5dv_is_supported(bogus<ibv_device>()));
    EXPECT_FALSE(mlx5dv_is_supported(nullptr));
}

TEST(Mlx5Stub, PointerFunctionsReturnNullWithEopnotsupp) {
    EXPECT_PTR_UNSUPPORTED(mlx5dv_open_device(bogus<ibv_device>(), bogus<mlx5dv_context_attr>()));
    EXPECT_PTR_UNSUPPORTED(mlx5dv_create_qp(bogus<ibv_context>(), bogus<ibv_qp_init_attr_ex>(),
                                            bogus<mlx5dv_qp_init_attr>()));
    EXPECT_PTR_UNSUPPORTED(mlx5dv_create_mkey(bogus<mlx5dv_mkey_init_attr>()));
    EXPECT_PTR_UNSUPPORTED(mlx5dv_qp_ex_from_ibv_qp_ex(bogus<ibv_qp_ex>()));
    EXPECT_PTR_UNSUPPORTED(mlx5dv_dek_create(bogus<ibv_context>(), bogus<mlx5dv_dek_init_attr>()));
}

TEST(Mlx5Stub, IntFunctionsReturnEopnotsupp) {
    uint32_t in[4] = {}, out[4] = {};
    EXPECT_INT_UNSUPPORTED(
        mlx5dv_devx_general_cmd(bogus<ibv_context>(), in, sizeof in, out, sizeof out));
    EXPECT_INT_UNSUPPORTED(mlx5dv_destroy_mkey(bogus<mlx5dv_mkey>()));
    EXPECT_INT_UNSUPPORTED(
        mlx5dv_crypto_login(bogus<ibv_context>(), bogus<mlx5dv_crypto_login_attr>()));
    EXPECT_INT_UNSUPPORTED(mlx5dv_dek_destroy(bogus<mlx5dv_dek>()));
    // A failed command leaves the output alone (perftest then uses ibv_query_device).
    EXPECT_EQ(out[0], 0u);
}

TEST(Mlx5Stub, FunctionsBeyondPerftestsAnswerAsDocumented) {
    uint32_t qpn = 7;
    EXPECT_INT_UNSUPPORTED(mlx5dv_reserved_qpn_alloc(bogus<ibv_context>(), &qpn));
    EXPECT_EQ(qpn, 7u);
    EXPECT_INT_UNSUPPORTED(mlx5dv_init_obj(bogus<mlx5dv_obj>(), MLX5DV_OBJ_QP));
    EXPECT_PTR_UNSUPPORTED(
        mlx5dv_dr_domain_create(bogus<ibv_context>(), MLX5DV_DR_DOMAIN_TYPE_NIC_RX));
    // "-1 and errno": a ssize_t, so all 64 bits must say -1.
    char buf[64];
    errno = 0;
    EXPECT_EQ(
        mlx5dv_devx_get_event(bogus<mlx5dv_devx_event_channel>(),
                              reinterpret_cast<mlx5dv_devx_async_event_hdr*>(buf), sizeof buf),
        ssize_t(-1));
    EXPECT_EQ(errno, EOPNOTSUPP);
    errno = 0;
    EXPECT_EQ(mlx5dv_vfio_get_events_fd(bogus<ibv_context>()), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
    EXPECT_EQ(mlx5dv_qp_cancel_posted_send_wrs(bogus<mlx5dv_qp_ex>(), 1), -EOPNOTSUPP);
    mlx5dv_pp_free(bogus<mlx5dv_pp>());  // void: does nothing with its argument
}

// mlx5dv_init_obj has two versions, as in rdma-core: the old ABI (MLX5_1.0) and the
// default (MLX5_1.2); both are defined and fail.
TEST(Mlx5Stub, InitObjHasBothVersions) {
    using InitObj = int (*)(mlx5dv_obj*, uint64_t);
    auto v10 = reinterpret_cast<InitObj>(dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.0"));
    auto v12 = reinterpret_cast<InitObj>(dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.2"));
    ASSERT_NE(v10, nullptr);
    ASSERT_NE(v12, nullptr);
    EXPECT_NE(reinterpret_cast<void*>(v10), reinterpret_cast<void*>(v12));
    EXPECT_INT_UNSUPPORTED(v10(bogus<mlx5dv_obj>(), MLX5DV_OBJ_QP));
    EXPECT_INT_UNSUPPORTED(v12(bogus<mlx5dv_obj>(), MLX5DV_OBJ_QP));
}

TEST(EfaStub, QueryDeviceReturnsEopnotsupp) {
    efadv_device_attr attr{};
    attr.max_sq_wr = 12345;
    EXPECT_INT_UNSUPPORTED(efadv_query_device(bogus<ibv_context>(), &attr, sizeof attr));
    EXPECT_EQ(attr.max_sq_wr, 12345u);
}

TEST(EfaStub, CreateQpReturnsNullWithEopnotsupp) {
    EXPECT_PTR_UNSUPPORTED(efadv_create_qp_ex(bogus<ibv_context>(), bogus<ibv_qp_init_attr_ex>(),
                                              bogus<efadv_qp_init_attr>(),
                                              sizeof(efadv_qp_init_attr)));
}

TEST(EfaStub, OtherFunctionsAnswerNotSupported) {
    efadv_cq_init_attr cq_attr{};
    EXPECT_PTR_UNSUPPORTED(efadv_create_cq(bogus<ibv_context>(), bogus<ibv_cq_init_attr_ex>(),
                                           &cq_attr, sizeof cq_attr));
    EXPECT_PTR_UNSUPPORTED(efadv_create_driver_qp(bogus<ibv_pd>(), bogus<ibv_qp_init_attr>(), 0));
    EXPECT_PTR_UNSUPPORTED(efadv_cq_from_ibv_cq_ex(bogus<ibv_cq_ex>()));
    efadv_ah_attr ah_attr{};
    EXPECT_INT_UNSUPPORTED(efadv_query_ah(bogus<ibv_ah>(), &ah_attr, sizeof ah_attr));
}

}  // namespace
