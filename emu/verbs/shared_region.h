// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A memfd-backed mapping shared with one application (rings live here).
#pragma once

#include <cstddef>

namespace uroce::emu {

class SharedRegion {
public:
    SharedRegion() = default;
    SharedRegion(const SharedRegion&) = delete;
    SharedRegion& operator=(const SharedRegion&) = delete;
    ~SharedRegion();

    // Creates and maps `bytes` (zeroed), sealed against shrinking. Returns 0 or an errno.
    int create(const char* name, size_t bytes);
    // Maps the first `bytes` of an application's memfd (ibv_resize_cq's new ring). 0, or
    // EINVAL unless it is a memfd sealed against shrinking with at least `bytes`, or mmap's
    // errno (EPERM for one sealed against writing). `fd` stays the caller's.
    int adopt(int fd, size_t bytes);
    // The memfd, to pass to the application; the device closes it once sent.
    int take_fd();
    void swap(SharedRegion& other);
    void* data() const { return data_; }
    size_t size() const { return size_; }

private:
    void* data_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
};

}  // namespace uroce::emu
