// "<prefix><n>" for test keys. (g++ 12 warns falsely, -Wrestrict, on "literal" + to_string.)
#pragma once

#include <cstdint>
#include <string>

namespace ramp::testing {

inline std::string Numbered(std::string prefix, uint64_t n) {
  prefix += std::to_string(n);
  return prefix;
}

}  // namespace ramp::testing
