// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Scatter/gather: the iovec list covering bytes [off, off + len) of an SGE list whose
// addresses were already translated to process addresses (check_local_sges).
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "emu/abi/rings.h"

namespace uroce::emu {

inline int sge_iov(const abi::Sge* sge, uint32_t n, uint32_t off, uint32_t len, iovec* iov) {
    int k = 0;
    for (uint32_t i = 0; i < n && len; ++i) {
        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        uint32_t take = sge[i].length - off;
        if (take > len) take = len;
        iov[k].iov_base = reinterpret_cast<void*>(sge[i].addr + off);
        iov[k].iov_len = take;
        ++k;
        len -= take;
        off = 0;
    }
    return k;
}

}  // namespace uroce::emu
