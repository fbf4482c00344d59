// The two CRC-32C implementations behind record::Crc32c, exposed so tests can check that
// both compute the same function (the portable one only runs on CPUs without SSE4.2).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ramp::record::crc32c {

// Both take and return the raw (non-inverted) register: Crc32c does the pre/post inversion.
uint32_t ExtendPortable(uint32_t crc, const uint8_t* data, size_t len);
uint32_t ExtendSse42(uint32_t crc, const uint8_t* data, size_t len);
bool HaveSse42();

}  // namespace ramp::record::crc32c
