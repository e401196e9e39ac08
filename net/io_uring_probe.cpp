#include "net/io_uring_probe.h"

#include <liburing.h>

namespace uroce::net {

int io_uring_probe() {
    io_uring ring;
    if (int r = io_uring_queue_init(1, &ring, 0); r < 0) return -r;
    io_uring_queue_exit(&ring);
    return 0;
}

}  // namespace uroce::net
