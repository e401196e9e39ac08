// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The NULL-terminated arrays that ibv_get_device_list and rdma_get_devices hand out, which
// the application gives back to free(3) (through ibv_free_device_list, rdma_free_devices).
#pragma once

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace uroce::abi {

// A calloc'd copy of `items` with a NULL after them, and *count (when asked for) their
// number; NULL with errno ENOMEM, *count untouched, when there is no memory.
template <typename T>
T** c_list(const std::vector<T*>& items, int* count) {
    auto** list = static_cast<T**>(calloc(items.size() + 1, sizeof(T*)));
    if (!list) {
        errno = ENOMEM;
        return nullptr;
    }
    for (size_t i = 0; i < items.size(); ++i) list[i] = items[i];
    if (count) *count = int(items.size());
    return list;
}

}  // namespace uroce::abi
