// Hybrid logical clock (hlc.h): physical milliseconds in the high bits, the microsecond
// within it and a logical counter in the low 16 bits (the counter breaks ties within a
// microsecond and absorbs clock skew).
#include "ramp/hlc.h"

#include <algorithm>
#include <chrono>

namespace ramp {

namespace {
constexpr int kLogicalBits = 16;
}

uint64_t HybridClock::PhysicalNow() {
  const auto us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  return ((us / 1000) << kLogicalBits) | ((us % 1000) << kMicroShift);
}

uint64_t HybridClock::Now() {
  const uint64_t physical = PhysicalNow();
  uint64_t last = last_.load(std::memory_order_acquire);
  uint64_t next;
  do {
    next = std::max(physical, last + 1);
  } while (!last_.compare_exchange_weak(last, next, std::memory_order_acq_rel,
                                        std::memory_order_acquire));
  return next;
}

void HybridClock::Observe(uint64_t remote) {
  uint64_t last = last_.load(std::memory_order_acquire);
  while (remote > last && !last_.compare_exchange_weak(last, remote, std::memory_order_acq_rel,
                                                       std::memory_order_acquire)) {
  }
}

}  // namespace ramp
