// CRC-32C (Castagnoli polynomial, reflected 0x82F63B78): the checksum of records and pages.
// SSE4.2 has an instruction for exactly this polynomial; the table-driven fallback keeps the
// code correct on CPUs without it.
#include "common/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

#include "common/record.h"

namespace ramp::record {
namespace crc32c {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const uint8_t* data, size_t len) {
  for (size_t i = 0; i < len; ++i) crc = kTable[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* data,
                                                       size_t len) {
  uint64_t c = crc;
  for (; len >= 8; len -= 8, data += 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; len > 0; --len, ++data) c32 = _mm_crc32_u8(c32, *data);
  return c32;
}

bool HaveSse42() {
  // Function-local static: evaluated once, after the CPU model is initialised.
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return have;
}

}  // namespace crc32c

uint32_t Crc32c(const void* data, size_t len, uint32_t seed) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint32_t crc = ~seed;
  crc = crc32c::HaveSse42() ? crc32c::ExtendSse42(crc, bytes, len)
                            : crc32c::ExtendPortable(crc, bytes, len);
  return ~crc;
}

}  // namespace ramp::record
