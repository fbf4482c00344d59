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

namespace {

// Three streams of kStripe bytes are checksummed at once (the instruction's latency is three
// times its throughput), then combined: the register after A||B is Shift(reg(A)) ^ reg0(B),
// where Shift runs the register over kStripe zero bytes (linear in its bits: four tables of
// 256 entries) and reg0(B) is B's register from zero.
constexpr size_t kStripe = 64;

struct ShiftTables {
  uint32_t t[4][256];
};

constexpr ShiftTables MakeShiftTables() {
  ShiftTables z{};
  for (uint32_t k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b << (8 * k);
      for (size_t i = 0; i < kStripe; ++i) c = kTable[c & 0xFF] ^ (c >> 8);
      z.t[k][b] = c;
    }
  }
  return z;
}
constexpr ShiftTables kShift = MakeShiftTables();

inline uint32_t ShiftStripe(uint32_t c) {
  return kShift.t[0][c & 0xFF] ^ kShift.t[1][(c >> 8) & 0xFF] ^ kShift.t[2][(c >> 16) & 0xFF] ^
         kShift.t[3][c >> 24];
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* data,
                                                       size_t len) {
  uint64_t c = crc;
  for (; len >= 3 * kStripe; len -= 3 * kStripe, data += 3 * kStripe) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < kStripe; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, data + i, 8);
      std::memcpy(&w1, data + kStripe + i, 8);
      std::memcpy(&w2, data + 2 * kStripe + i, 8);
      c = _mm_crc32_u64(c, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    c = ShiftStripe(ShiftStripe(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^
        static_cast<uint32_t>(c2);
  }
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
