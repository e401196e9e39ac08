// The libmlx5.so.1 / libefa.so.1 stand-ins (verbs_api/stubs/) answer every call the way
// rdma-core's direct-verbs libraries answer for a device that is not theirs: int
// functions return EOPNOTSUPP (and set errno), pointer functions return NULL with errno
// EOPNOTSUPP, mlx5dv_is_supported is false. perftest relies on these answers to stay on
// its generic verbs paths. The test is linked against the stand-ins themselves.
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

#define EXPECT_INT_UNSUPPORTED(call)   \
    do {                               \
        errno = 0;                     \
        EXPECT_EQ((call), EOPNOTSUPP); \
        EXPECT_EQ(errno, EOPNOTSUPP);  \
    } while (0)

#define EXPECT_PTR_UNSUPPORTED(call)  \
    do {                              \
        errno = 0;                    \
        EXPECT_EQ((call), nullptr);   \
        EXPECT_EQ(errno, EOPNOTSUPP); \
    } while (0)

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

}  // namespace
