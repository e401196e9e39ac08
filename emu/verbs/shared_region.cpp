// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/verbs/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

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

int SharedRegion::adopt(int fd, size_t bytes) {
    // The application made it: without the seal it could shrink the file under the device's
    // mapping, and the device's next write there would be a SIGBUS (as in create). Only a
    // memfd can carry F_SEAL_SHRINK; other files answer EINVAL or have no such seal.
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) return EINVAL;
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || size_t(st.st_size) < bytes) return EINVAL;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return errno;
    data_ = p;
    size_ = bytes;
    return 0;
}

void SharedRegion::swap(SharedRegion& other) {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(fd_, other.fd_);
}

int SharedRegion::take_fd() {
    int fd = fd_;
    fd_ = -1;
    return fd;
}

}  // namespace uroce::emu
