// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the librdmacm GoogleTests (rdmacm_events_tests, rdmacm_srq_tests) wait for: an event
// on a channel's fd, the next one of a type.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

namespace uroce::cmtest {

// Whether an event waits on ch within ms (the fd is what an application polls).
inline bool readable(rdma_event_channel* ch, int ms) {
    pollfd p{ch->fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
}

// The next event on ch within 10 s; it must be `type`, for `id` (nullptr: any id). A failure
// is added, and nullptr returned, when none comes.
inline rdma_cm_event* next_event(rdma_event_channel* ch, rdma_cm_event_type type,
                                 rdma_cm_id* id = nullptr) {
    if (!readable(ch, 10000)) {
        ADD_FAILURE() << "no event within 10 s, expected " << rdma_event_str(type);
        return nullptr;
    }
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) {
        ADD_FAILURE() << "rdma_get_cm_event: " << std::strerror(errno);
        return nullptr;
    }
    EXPECT_EQ(ev->event, type) << "got " << rdma_event_str(ev->event) << " status " << ev->status
                               << ", expected " << rdma_event_str(type);
    if (id) {
        EXPECT_EQ(ev->id, id);
    }
    return ev;
}

}  // namespace uroce::cmtest
