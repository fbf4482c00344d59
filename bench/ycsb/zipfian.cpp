#include "zipfian.h"

#include <cmath>

namespace ramp::bench {
namespace {
double Zeta(uint64_t n, double theta) {
  double sum = 0;
  for (uint64_t i = 1; i <= n; i++) sum += 1.0 / std::pow(static_cast<double>(i), theta);
  return sum;
}
}  // namespace

Zipfian::Zipfian(uint64_t items, double theta) : items_(items), theta_(theta) {
  zetan_ = Zeta(items, theta);
  const double zeta2 = Zeta(2, theta);
  alpha_ = 1.0 / (1.0 - theta);
  eta_ = (1 - std::pow(2.0 / static_cast<double>(items), 1 - theta)) / (1 - zeta2 / zetan_);
  half_pow_theta_ = 1 + std::pow(0.5, theta);
}

uint64_t Zipfian::Next(std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  const double uz = u * zetan_;
  if (uz < 1) return 0;
  if (uz < half_pow_theta_) return 1;
  uint64_t v = static_cast<uint64_t>(static_cast<double>(items_) *
                                     std::pow(eta_ * u - eta_ + 1, alpha_));
  return v >= items_ ? items_ - 1 : v;
}

}  // namespace ramp::bench
