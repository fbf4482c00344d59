// Hybrid logical clock: timestamps close to wall-clock time that never go backwards and
// advance past every timestamp observed from peers. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace ramp {

class HybridClock {
 public:
  // Current physical time in the clock's unit: milliseconds << 16, and in the low 16 bits the
  // microsecond within the millisecond << kMicroShift (at most 999 << 6 = 63 936). The
  // bits below kMicroShift are the logical counter within a microsecond; it carries into
  // them as any logical counter does, so every ordering of timestamps and every `>> 16`
  // (milliseconds) stays as it was.
  static uint64_t PhysicalNow();
  static constexpr int kMicroShift = 6;
  static constexpr uint64_t kMicroMask = (uint64_t{1} << kMicroShift) - 1;
  // The clock reading of a wall-clock time in microseconds since the Unix epoch, with the
  // whole microsecond's logical range: a statement snapshot taken at that time.
  static constexpr uint64_t SnapshotAtMicros(uint64_t unix_us) {
    return ((unix_us / 1000) << 16) | ((unix_us % 1000) << kMicroShift) | kMicroMask;
  }
  // The first reading of the microsecond after the one `physical` falls in: a commit drawn
  // at or after it is later than every snapshot taken up to `physical`.
  static constexpr uint64_t NextMicro(uint64_t physical) { return (physical | kMicroMask) + 1; }
  // True once the wall clock has reached the microsecond of `ts`: every snapshot taken from
  // then on (SnapshotAtMicros of a later time) includes ts.
  static bool Reached(uint64_t ts) { return PhysicalNow() >= (ts & ~kMicroMask); }
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
