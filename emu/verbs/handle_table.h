// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Fixed-capacity object table: handles are small integers used directly as indices,
// so a lookup on the packet path is an array access, not a map search.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace uroce::emu {

template <typename T>
class HandleTable {
public:
    explicit HandleTable(uint32_t capacity, uint32_t first = 1) : first_(first), slots_(capacity) {
        free_.reserve(capacity);
        for (uint32_t i = capacity; i-- > 0;) free_.push_back(i);
    }

    // Returns 0 when full (0 is never a valid handle unless first == 0).
    T* add(std::unique_ptr<T> obj, uint32_t* handle) {
        if (free_.empty()) return nullptr;
        uint32_t i = free_.back();
        free_.pop_back();
        slots_[i] = std::move(obj);
        *handle = i + first_;
        ++count_;
        return slots_[i].get();
    }

    T* get(uint32_t handle) const {
        uint32_t i = handle - first_;
        if (handle < first_ || i >= slots_.size()) return nullptr;
        return slots_[i].get();
    }

    std::unique_ptr<T> remove(uint32_t handle) {
        uint32_t i = handle - first_;
        if (handle < first_ || i >= slots_.size() || !slots_[i]) return nullptr;
        free_.push_back(i);
        --count_;
        return std::move(slots_[i]);
    }

    uint32_t count() const { return count_; }
    uint32_t capacity() const { return uint32_t(slots_.size()); }

    template <typename F>
    void for_each(F&& f) const {
        for (uint32_t i = 0; i < slots_.size(); ++i)
            if (slots_[i]) f(i + first_, *slots_[i]);
    }

private:
    uint32_t first_;
    uint32_t count_ = 0;
    std::vector<std::unique_ptr<T>> slots_;
    std::vector<uint32_t> free_;
};

}  // namespace uroce::emu
