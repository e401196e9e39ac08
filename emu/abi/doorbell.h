// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A session's doorbell page, shared by the verbs library and the device: which QPs want the
// device's attention. The session's eventfd only says "look"; the page says where,
// so a doorbell costs the device the QPs that rang, not every QP of the process.
//
// The library pushes an entry (a QPN) and then writes the eventfd. A QP is pushed at most
// once until the device has taken it: the SQ ring header's `arm` word (unused for send queues
// otherwise) says "queued", the library sets it with an exchange and the device clears it
// before it looks at the QP. When the page is full the
// library sets `overflow` instead, and the device then looks at all of the session's QPs,
// as it would without a page. The device trusts nothing here: an entry is a number it
// checks against its own tables, and it reads at most kDoorbellSlots entries per wake-up.
//
// `awake` (io_uring's NEED_WAKEUP, the other way round): while the device is busy it looks
// at the page of every session it served lately on each turn of its loop, and says so here;
// the library then pushes the entry without writing the eventfd (a system call, and a
// completion for the device to reap). Before the device sleeps it clears `awake` and reads
// the page once more. Each side fences between its store and its load (the library: the
// entry, then `awake`; the device: `awake`, then the entries), so an entry is either seen
// by that last read or the library sees 0 and writes the eventfd.
#pragma once

#include <atomic>
#include <cstdint>

#include "emu/abi/rings.h"

namespace uroce::abi {

constexpr uint32_t kDoorbellSlots = 4096;  // a power of two

struct DoorbellPage {
    alignas(kCacheLine) std::atomic<uint32_t> tail;      // library: the next slot to fill
    alignas(kCacheLine) std::atomic<uint32_t> head;      // device: the next slot it reads
    alignas(kCacheLine) std::atomic<uint32_t> overflow;  // library: an entry did not fit
    alignas(kCacheLine) std::atomic<uint32_t> awake;     // device: it will look without a wake-up
    // 0: empty. The device takes an entry by exchanging it with 0, so a slot reserved but not
    // yet written stops it there; the writer's eventfd write brings it back.
    alignas(kCacheLine) std::atomic<uint32_t> slots[kDoorbellSlots];
};

inline size_t doorbell_page_bytes() { return align_up(sizeof(DoorbellPage), 4096); }

// Library side: queues `entry` (non-zero), or sets overflow when the page is full.
inline void doorbell_push(DoorbellPage* p, uint32_t entry) {
    uint32_t t = p->tail.load(std::memory_order_relaxed);
    do {
        if (t - p->head.load(std::memory_order_acquire) >= kDoorbellSlots) {
            p->overflow.store(1, std::memory_order_release);
            return;
        }
    } while (!p->tail.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                            std::memory_order_relaxed));
    p->slots[t & (kDoorbellSlots - 1)].store(entry, std::memory_order_release);
}

}  // namespace uroce::abi
