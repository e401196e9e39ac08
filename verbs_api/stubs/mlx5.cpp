// Stand-in for rdma-core's libmlx5.so.1 (the mlx5 "direct verbs" library).
//
// perftest's Debian binaries are linked against libmlx5.so.1 and libefa.so.1 and
// bind to a few of their functions with BIND_NOW, so the loader refuses to start them
// unless a library of that name defines those symbols with those version nodes.
// uroce is not an mlx5 device: every function answers "not supported" the way
// rdma-core's mlx5dv_* do for a device that is not mlx5 (int: EOPNOTSUPP; pointer:
// NULL with errno EOPNOTSUPP; mlx5dv_is_supported: false), so perftest keeps to the
// generic verbs paths. The library registers no driver, has no constructor and
// needs no other library, so loading it changes nothing else in the process (the
// real one pulls in libibverbs' provider interface and registers the mlx5 driver).
//
// Exported set and version nodes: verbs_api/stubs/libmlx5.map;
// tests/integration/check_stub_exports.sh checks them against perftest and Debian.
#include <infiniband/mlx5dv.h>

#include <cerrno>

namespace {
template <typename T>
T* unsupported_ptr() {
    errno = EOPNOTSUPP;
    return nullptr;
}
int unsupported_int() {
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}
}  // namespace

extern "C" {

// MLX5_1.3
struct ibv_qp* mlx5dv_create_qp(struct ibv_context*, struct ibv_qp_init_attr_ex*,
                                struct mlx5dv_qp_init_attr*) {
    return unsupported_ptr<ibv_qp>();
}

// MLX5_1.7
struct ibv_context* mlx5dv_open_device(struct ibv_device*, struct mlx5dv_context_attr*) {
    return unsupported_ptr<ibv_context>();
}

int mlx5dv_devx_general_cmd(struct ibv_context*, const void*, size_t, void*, size_t) {
    return unsupported_int();
}

// MLX5_1.8
bool mlx5dv_is_supported(struct ibv_device*) { return false; }

// MLX5_1.10
struct mlx5dv_mkey* mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr*) {
    return unsupported_ptr<mlx5dv_mkey>();
}

int mlx5dv_destroy_mkey(struct mlx5dv_mkey*) { return unsupported_int(); }

struct mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex*) {
    return unsupported_ptr<mlx5dv_qp_ex>();
}

// MLX5_1.21
int mlx5dv_crypto_login(struct ibv_context*, struct mlx5dv_crypto_login_attr*) {
    return unsupported_int();
}

struct mlx5dv_dek* mlx5dv_dek_create(struct ibv_context*, struct mlx5dv_dek_init_attr*) {
    return unsupported_ptr<mlx5dv_dek>();
}

int mlx5dv_dek_destroy(struct mlx5dv_dek*) { return unsupported_int(); }

}  // extern "C"
