// Zipfian key choice as YCSB does it (Gray et al., "Quickly generating billion-record
// synthetic databases"): item 0 most popular, theta 0.99 by default.
#pragma once

#include <cstdint>
#include <random>

namespace ramp::bench {

class Zipfian {
 public:
  Zipfian(uint64_t items, double theta = 0.99);
  uint64_t Next(std::mt19937_64& rng);

 private:
  uint64_t items_;
  double theta_, alpha_, zetan_, eta_, half_pow_theta_;
};

}  // namespace ramp::bench
