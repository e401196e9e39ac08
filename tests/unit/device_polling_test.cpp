// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The engine's polling budget (DeviceConfig::poll_us, `uroce start --poll-us`): after work
// it keeps polling instead of sleeping, and the session's doorbell page says it is awake, so
// the library rings without a system call (emu/abi/doorbell.h) until the budget runs out.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "device_test_support.h"

namespace uroce::emu::device_test {
namespace {

// How long the page's `awake` flag stays set after one doorbell, up to `limit`.
milliseconds awake_after_doorbell(Client& c, milliseconds limit) {
    abi::DoorbellPage* db = c.doorbell_page();
    c.ring_doorbell();
    auto rung = steady_clock::now();
    // Taken (the engine clears the page's overflow flag, ring_doorbell()'s entry) ...
    while (db->overflow.load(std::memory_order_acquire) && steady_clock::now() - rung < limit)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    // ... after setting `awake`, which it clears when it goes to sleep.
    while (db->awake.load(std::memory_order_relaxed) && steady_clock::now() - rung < limit)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    return std::chrono::duration_cast<milliseconds>(steady_clock::now() - rung);
}

TEST(DevicePolling, WithoutBudgetTheEngineSleepsRightAfterWork) {
    auto devs = start_devices(1);
    ASSERT_EQ(devs.size(), 1u);
    Client c(*devs[0]);
    ASSERT_TRUE(c.ok());
    EXPECT_LT(awake_after_doorbell(c, milliseconds(3000)), milliseconds(500));
}

TEST(DevicePolling, WithBudgetTheEngineStaysAwakeThatLong) {
    constexpr uint32_t kBudgetUs = 800000;
    auto devs = start_devices(1, kBudgetUs);
    ASSERT_EQ(devs.size(), 1u);
    Client c(*devs[0]);
    ASSERT_TRUE(c.ok());
    milliseconds awake = awake_after_doorbell(c, milliseconds(5000));
    EXPECT_GE(awake, milliseconds(kBudgetUs / 1000));
    EXPECT_LT(awake, milliseconds(5000)) << "the engine never went to sleep";
    // Asleep again, it wakes for the next doorbell and polls as long once more.
    EXPECT_GE(awake_after_doorbell(c, milliseconds(5000)), milliseconds(kBudgetUs / 1000));
}

}  // namespace
}  // namespace uroce::emu::device_test
