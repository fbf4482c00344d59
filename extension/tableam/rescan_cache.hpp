// RescanCache: the remote rows of one pass of a sequential scan, kept so that later passes
// (rescans: the inner side of a nested loop, a rewound cursor) replay them from memory
// instead of reading the table from the cluster again.
//
// Why it is correct: a scan's rescans use the scan's one snapshot, and heap returns the same
// rows for the same snapshot; the transaction's own writes are not part of the cache (the
// scan overlays them on every pass, for the command id of that pass). Replaying is therefore
// at least as consistent as reading again, which could see transactions committed since.
//
// Why it matters: a nested loop rescans its inner table once per outer row. Heap rescans a
// 10 000-row table from shared buffers in well under a millisecond; reading it from the
// cluster took 24 ms, and TPC-H Q21 at SF 1 (338 241 rescans of supplier) never finished.
//
// Bounded by work_mem: a table larger than that is read again on every pass, as before.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "tableam/row_source.hpp"

namespace pgramp::tam {

class RescanCache {
 public:
  // Appends a copy of a row; false (and the cache emptied) once the copies would pass
  // limit_bytes.
  bool Add(const RowView& row, size_t limit_bytes) {
    // The value's bytes after its format byte start 8-byte aligned, like the partition
    // scanner's (RowView::stable): a replayed row's tuple can be stored without a copy.
    const size_t need = row.value.size() + kAlign;
    bytes_ += need + sizeof(RowView);
    if (bytes_ > limit_bytes) {
      Clear();
      return false;
    }
    if (blocks_.empty() || used_ + need > block_size_) {
      block_size_ = std::max(kBlockBytes, need);
      blocks_.push_back(std::make_unique<char[]>(block_size_));
      used_ = 0;
    }
    char* base = blocks_.back().get();
    // Place the value so that value.data() + 1 is aligned.
    const uintptr_t at = reinterpret_cast<uintptr_t>(base + used_) + 1;
    const size_t pad = (kAlign - at % kAlign) % kAlign;
    char* dest = base + used_ + pad;
    std::memcpy(dest, row.value.data(), row.value.size());
    used_ += pad + row.value.size();
    rows_.push_back(RowView{row.rowid, row.ts, std::string_view(dest, row.value.size()), true});
    return true;
  }

  void Clear() {
    blocks_.clear();
    rows_.clear();
    rows_.shrink_to_fit();
    used_ = 0;
    block_size_ = 0;
    bytes_ = 0;
  }

  // The rows, in the order they were added; they stay where they are until Clear.
  const std::vector<RowView>& rows() const { return rows_; }

 private:
  static constexpr size_t kAlign = 8;
  static constexpr size_t kBlockBytes = 256 * 1024;

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t used_ = 0;
  size_t block_size_ = 0;
  size_t bytes_ = 0;
  std::vector<RowView> rows_;
};

}  // namespace pgramp::tam
