// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The engine's two lists of QPs: those with send work to push (run each turn), and those
// with a deadline (retransmit, RNR wait). A QP is on each at most once; its flags say so.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "emu/verbs/objects.h"

namespace uroce::emu {

// The engine's clock: CLOCK_MONOTONIC in nanoseconds (device.cpp), for deadlines.
uint64_t now_ns();

class Schedule {
public:
    Schedule() {
        ready_.reserve(1024);
        timers_.reserve(1024);
    }

    void mark_ready(Qp& qp) {
        if (qp.on_ready_list) return;
        qp.on_ready_list = true;
        ready_.push_back(&qp);
    }
    // deadline 0 disarms; the QP leaves the list at the next expire().
    void arm_timer(Qp& qp, uint64_t deadline) {
        qp.deadline_ns = deadline;
        qp.rx_at_arm = qp.resp_rx;
        if (deadline && !qp.on_timer_list) {
            qp.on_timer_list = true;
            timers_.push_back(&qp);
        }
    }
    // A QP being destroyed leaves both lists.
    void forget(Qp& qp) {
        if (qp.on_ready_list) ready_.erase(std::find(ready_.begin(), ready_.end(), &qp));
        if (qp.on_timer_list) timers_.erase(std::find(timers_.begin(), timers_.end(), &qp));
        qp.on_ready_list = qp.on_timer_list = false;
    }

    bool ready_empty() const { return ready_.empty(); }
    size_t ready_size() const { return ready_.size(); }
    size_t timers_size() const { return timers_.size(); }
    // Swaps the ready list into `work` (both keep their capacity: no allocation) and clears
    // the QPs' flags, so that what runs may mark them again.
    void take_ready(std::vector<Qp*>& work) {
        work.clear();
        work.swap(ready_);
        for (Qp* qp : work) qp->on_ready_list = false;
    }
    // Calls on_timeout(qp) for each QP whose deadline has passed (disarmed first).
    template <class Fn>
    void expire(uint64_t now, Fn&& on_timeout) {
        for (size_t i = 0; i < timers_.size();) {
            Qp* qp = timers_[i];
            if (qp->deadline_ns == 0) {
                qp->on_timer_list = false;
                timers_[i] = timers_.back();
                timers_.pop_back();
                continue;
            }
            if (qp->deadline_ns <= now) {
                qp->deadline_ns = 0;
                on_timeout(*qp);
            }
            ++i;
        }
    }
    // Nanoseconds until the first deadline, at most `cap` (1 if one has passed).
    uint64_t next_deadline(uint64_t now, uint64_t cap) const {
        uint64_t best = cap;
        for (const Qp* qp : timers_)
            if (qp->deadline_ns)
                best = std::min(best, qp->deadline_ns > now ? qp->deadline_ns - now : 1);
        return best;
    }

private:
    std::vector<Qp*> ready_;
    std::vector<Qp*> timers_;
};

}  // namespace uroce::emu
