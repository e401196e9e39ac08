// rsockets (rdma/rsocket.h) are not implemented: every call fails with ENOSYS, so a
// program that uses them learns it at the first call instead of failing to load
// (docs/rdmacm-support.md). rping, ucmatose and the other CM examples import rpoll only
// through shared example code and never call it.
#include <rdma/rsocket.h>

#include <cerrno>

namespace {
template <typename T = int>
T nosys() {
    errno = ENOSYS;
    return T(-1);
}
}  // namespace

extern "C" {

int rsocket(int, int, int) { return nosys(); }
int rbind(int, const struct sockaddr*, socklen_t) { return nosys(); }
int rlisten(int, int) { return nosys(); }
int raccept(int, struct sockaddr*, socklen_t*) { return nosys(); }
int rconnect(int, const struct sockaddr*, socklen_t) { return nosys(); }
int rshutdown(int, int) { return nosys(); }
int rclose(int) { return nosys(); }
ssize_t rrecv(int, void*, size_t, int) { return nosys<ssize_t>(); }
ssize_t rrecvfrom(int, void*, size_t, int, struct sockaddr*, socklen_t*) {
    return nosys<ssize_t>();
}
ssize_t rrecvmsg(int, struct msghdr*, int) { return nosys<ssize_t>(); }
ssize_t rsend(int, const void*, size_t, int) { return nosys<ssize_t>(); }
ssize_t rsendto(int, const void*, size_t, int, const struct sockaddr*, socklen_t) {
    return nosys<ssize_t>();
}
ssize_t rsendmsg(int, const struct msghdr*, int) { return nosys<ssize_t>(); }
ssize_t rread(int, void*, size_t) { return nosys<ssize_t>(); }
ssize_t rreadv(int, const struct iovec*, int) { return nosys<ssize_t>(); }
ssize_t rwrite(int, const void*, size_t) { return nosys<ssize_t>(); }
ssize_t rwritev(int, const struct iovec*, int) { return nosys<ssize_t>(); }
int rpoll(struct pollfd*, nfds_t, int) { return nosys(); }
int rselect(int, fd_set*, fd_set*, fd_set*, struct timeval*) { return nosys(); }
int rgetpeername(int, struct sockaddr*, socklen_t*) { return nosys(); }
int rgetsockname(int, struct sockaddr*, socklen_t*) { return nosys(); }
int rsetsockopt(int, int, int, const void*, socklen_t) { return nosys(); }
int rgetsockopt(int, int, int, void*, socklen_t*) { return nosys(); }
int rfcntl(int, int, ...) { return nosys(); }
off_t riomap(int, void*, size_t, int, int, off_t) { return nosys<off_t>(); }
int riounmap(int, void*, size_t) { return nosys(); }
size_t riowrite(int, const void*, size_t, off_t, int) { return nosys<size_t>(); }

}  // extern "C"
