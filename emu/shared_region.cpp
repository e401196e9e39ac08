#include "emu/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace uroce::emu {

SharedRegion::~SharedRegion() {
    if (data_) munmap(data_, size_);
    if (fd_ >= 0) close(fd_);
}

int SharedRegion::create(const char* name, size_t bytes) {
    fd_ = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_ < 0) return errno;
    if (ftruncate(fd_, off_t(bytes)) != 0) return errno;
    // The application gets this fd. Shrunk, the device's next access past the new end would
    // be a SIGBUS that kills the device for every process: the size is sealed.
    if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) return errno;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return errno;
    data_ = p;
    size_ = bytes;
    return 0;
}

int SharedRegion::take_fd() {
    int fd = fd_;
    fd_ = -1;
    return fd;
}

}  // namespace uroce::emu
