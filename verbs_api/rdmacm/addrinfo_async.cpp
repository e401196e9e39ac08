// RDMACM_1.4 (rdma-core 60): asynchronous address resolution and user events written
// into an id's event channel. rdma-core does both through a kernel command
// (RDMA_USER_CM_CMD_WRITE_CM_EVENT, Linux 6.12) that the id's channel forwards; uroce's
// CM agent has no such path yet, so these answer as rdma-core does over a kernel that
// lacks the command: the request fails (-1, errno ENOSYS), and nothing is ever resolved
// for rdma_query_addrinfo to return (ENOENT). Argument errors come first, as in
// rdma-core. rdma_getaddrinfo (synchronous) works: addrinfo.cpp.

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>

namespace {

// enum rdma_cm_event_type's RDMA_CM_EVENT_USER, newer than rdma-core 44's header.
constexpr int kEventUser = RDMA_CM_EVENT_TIMEWAIT_EXIT + 3;

int fail(int err) {
    errno = err;
    return -1;
}

}  // namespace

extern "C" {

int rdma_resolve_addrinfo(rdma_cm_id* id, const char* node, const char* service,
                          const rdma_addrinfo* hints) {
    return fail(id ? ENOSYS : EINVAL);
}

int rdma_query_addrinfo(rdma_cm_id* id, rdma_addrinfo** info) {
    return fail(id && info ? ENOENT : EINVAL);
}

int rdma_write_cm_event(rdma_cm_id* id, rdma_cm_event_type event, int status, uint64_t arg) {
    return fail(static_cast<int>(event) == kEventUser ? ENOSYS : EINVAL);
}

}  // extern "C"
