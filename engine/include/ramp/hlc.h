// Hybrid logical clock: timestamps close to wall-clock time that never go backwards and
// advance past every timestamp observed from peers. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace ramp {

class HybridClock {
 public:
  // Current physical time in the clock's unit (milliseconds << 16).
  static uint64_t PhysicalNow();
  // A reading strictly greater than every earlier Now() and every Observe()d value.
  uint64_t Now();
  // Merges a timestamp seen from a peer.
  void Observe(uint64_t remote);
  // The last reading handed out or observed (no advance).
  uint64_t Peek() const { return last_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> last_{0};
};

}  // namespace ramp
