// The valid bit of a published record: the one byte of arena memory that changes after
// publication, read by one-sided (GET*) readers while we write it, hence atomic.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/record.h"

namespace ramp::store {

inline void SetValidBit(uint8_t* rec, bool valid) {
  // Release: a reader that sees the bit set also sees the record bytes written before.
  std::atomic_ref<uint8_t>(rec[record::kStateOffset])
      .store(valid ? record::kStateValid : 0, std::memory_order_release);
}

inline bool ValidBit(const uint8_t* rec) {
  return std::atomic_ref<uint8_t>(const_cast<uint8_t&>(rec[record::kStateOffset]))
             .load(std::memory_order_acquire) &
         record::kStateValid;
}

}  // namespace ramp::store
