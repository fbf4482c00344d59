// Operations per second of a partition as an exponentially decaying average (time constant
// 10 s), for the rebalancer: counting is one relaxed atomic add on the hot path, the
// average is brought up to date whenever someone asks for it. Thread-safe.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>

namespace ramp::store {

class Hotness {
 public:
  explicit Hotness(uint64_t now_ms) : sampled_ms_(now_ms) {}

  void Count(uint64_t ops = 1) { ops_.fetch_add(ops, std::memory_order_relaxed); }
  // Starts the average at a rate measured elsewhere (a migrated partition keeps its load).
  void Seed(double rate) {
    std::lock_guard lock(mu_);
    rate_ = rate;
  }

  double Rate(uint64_t now_ms) {
    std::lock_guard lock(mu_);
    if (now_ms <= sampled_ms_) return rate_;
    const uint64_t ops = ops_.load(std::memory_order_relaxed);
    const double dt_ms = static_cast<double>(now_ms - sampled_ms_);
    const double recent = static_cast<double>(ops - sampled_ops_) * 1000.0 / dt_ms;
    // Weighting by elapsed time makes the average independent of how often it is sampled.
    rate_ += (1.0 - std::exp(-dt_ms / kTimeConstantMs)) * (recent - rate_);
    sampled_ops_ = ops;
    sampled_ms_ = now_ms;
    return rate_;
  }

 private:
  static constexpr double kTimeConstantMs = 10000.0;
  std::atomic<uint64_t> ops_{0};
  std::mutex mu_;
  uint64_t sampled_ops_ = 0;
  uint64_t sampled_ms_;
  double rate_ = 0;
};

}  // namespace ramp::store
