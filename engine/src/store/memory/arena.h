// The arena: one registered memory region cut into 8 KiB page frames that partitions take
// for their log pages. Peers may read it one-sided (GET*), so a frame given back is not
// reused at once: readers may still be copying it, and Store::Get hands out views into it
// that must stay intact for the GC grace. Retired frames wait out that grace first.
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "common/record.h"
#include "ramp/status.h"
#include "ramp/transport/memory.h"

namespace ramp::store {

class Arena {
 public:
  // Who is asking for frames: ordinary appends must leave a small reserve free, so that
  // commit and abort marks (which must not fail) and compaction (which frees memory)
  // can still proceed when the budget is exhausted.
  enum class Use { kNormal, kReserve };

  static Status Create(std::shared_ptr<transport::Memory> memory, size_t bytes, int grace_ms,
                       std::function<uint64_t()> now_ms, std::unique_ptr<Arena>* out);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A run of `pages` contiguous frames; returns the first frame number. Retired frames
  // whose grace has passed are freed first. Busy when no run is free but retired
  // frames will be after their grace, NoSpace when none will.
  Status Allocate(uint32_t pages, Use use, uint32_t* frame);
  // Gives back `pages` frames starting at frame; they become free after the grace.
  void Retire(uint32_t frame, uint32_t pages);
  // Frees retired frames whose grace has passed (Allocate does it too when it must).
  void ReleaseRetired();
  // An 8-byte word of the arena (zeroed) that peers may read one-sided: a partition's
  // group version (Partition::GetGroup). Words are never given back (a peer may hold the
  // address for as long as it likes); they are cut from frames taken for them.
  Status AllocateWord(uint64_t** out);

  uint8_t* frame_data(uint32_t frame) const { return base_ + size_t{frame} * record::kPageBytes; }
  uint64_t offset_of(const uint8_t* p) const { return static_cast<uint64_t>(p - base_); }
  const uint8_t* base() const { return base_; }
  const transport::RemoteRegion& region() const { return region_; }
  size_t bytes() const { return size_t{frames_} * record::kPageBytes; }

  struct Counts {
    uint64_t frames = 0;
    uint64_t free = 0;
    uint64_t retired = 0;  // waiting out the grace
  };
  Counts counts() const;

 private:
  Arena(std::shared_ptr<transport::Memory> memory, uint8_t* base, uint32_t frames, int grace_ms,
        std::function<uint64_t()> now_ms);
  void ReleaseRetiredLocked(uint64_t now);
  void FreeLocked(uint32_t frame, uint32_t pages);
  bool TakeLocked(uint32_t pages, uint32_t* frame);

  struct Retired {
    uint32_t frame;
    uint32_t pages;
    uint64_t free_at_ms;
  };

  const std::shared_ptr<transport::Memory> memory_;
  uint8_t* const base_;
  const uint32_t frames_;
  const uint32_t reserve_;
  const int grace_ms_;
  const std::function<uint64_t()> now_ms_;
  transport::RemoteRegion region_;

  mutable std::mutex mu_;
  // Free extents, by start (to merge neighbours) and by (length, start) (best fit).
  std::map<uint32_t, uint32_t> free_by_start_;
  std::set<std::pair<uint32_t, uint32_t>> free_by_size_;
  uint64_t free_frames_ = 0;
  // In retirement order; the clock is monotonic, so also in free_at order.
  std::deque<Retired> retired_;
  uint64_t retired_frames_ = 0;
  // AllocateWord's current frame and the words of it handed out.
  uint8_t* words_frame_ = nullptr;
  size_t words_used_ = 0;
};

}  // namespace ramp::store
