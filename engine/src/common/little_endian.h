// Unaligned little-endian loads and stores for the on-page and on-wire formats.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace ramp::le {

static_assert(std::endian::native == std::endian::little,
              "the record, page and wire formats are little endian; add byte swaps here");

template <typename T>
inline T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
inline void Store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

inline uint16_t Load16(const uint8_t* p) {
  return Load<uint16_t>(p);
}
inline uint32_t Load32(const uint8_t* p) {
  return Load<uint32_t>(p);
}
inline uint64_t Load64(const uint8_t* p) {
  return Load<uint64_t>(p);
}
inline void Store16(uint8_t* p, uint16_t v) {
  Store(p, v);
}
inline void Store32(uint8_t* p, uint32_t v) {
  Store(p, v);
}
inline void Store64(uint8_t* p, uint64_t v) {
  Store(p, v);
}

}  // namespace ramp::le
