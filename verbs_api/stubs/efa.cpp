// Stand-in for rdma-core's libefa.so.1 (AWS EFA direct verbs); see mlx5.cpp for why
// it exists. uroce is not an EFA device: every function answers "not supported" as
// rdma-core's efadv_* do for a non-EFA device (int: EOPNOTSUPP; pointer: NULL with
// errno EOPNOTSUPP). No driver registration, no constructor, no dependencies.
// Exported set and version nodes: verbs_api/stubs/libefa.map.
#include <infiniband/efadv.h>

#include <cerrno>

extern "C" {

// EFA_1.1
int efadv_query_device(struct ibv_context*, struct efadv_device_attr*, uint32_t) {
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

struct ibv_qp* efadv_create_qp_ex(struct ibv_context*, struct ibv_qp_init_attr_ex*,
                                  struct efadv_qp_init_attr*, uint32_t) {
    errno = EOPNOTSUPP;
    return nullptr;
}

}  // extern "C"
