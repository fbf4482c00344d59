#include "store/memory/arena.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ramp::store {

namespace {
// Frames kept back for Use::kReserve: 1/64 of the arena, at least 8, at most 16 MiB, and
// never more than a quarter of a small arena.
uint32_t ReserveFor(uint32_t frames) {
  const uint32_t want = std::clamp<uint32_t>(frames / 64, 8, 2048);
  return std::min(want, frames / 4);
}
}  // namespace

Status Arena::Create(std::shared_ptr<transport::Memory> memory, size_t bytes, int grace_ms,
                     std::function<uint64_t()> now_ms, std::unique_ptr<Arena>* out) {
  const size_t frames = bytes / record::kPageBytes;
  if (frames == 0 || frames > UINT32_MAX) {
    return Status::InvalidArgument("arena of " + std::to_string(bytes) +
                                   " bytes: need at least one 8 KiB page and at most 2^32");
  }
  uint8_t* base = nullptr;
  const size_t len = frames * record::kPageBytes;
  RAMP_RETURN_IF_ERROR(memory->Allocate(len, transport::kAccessRead, &base).Annotate("arena"));
  std::unique_ptr<Arena> arena(
      new Arena(memory, base, static_cast<uint32_t>(frames), grace_ms, std::move(now_ms)));
  RAMP_RETURN_IF_ERROR(memory->Register(base, len, transport::kAccessRead, &arena->region_)
                           .Annotate("arena registration"));
  *out = std::move(arena);
  return Status::OK();
}

Arena::Arena(std::shared_ptr<transport::Memory> memory, uint8_t* base, uint32_t frames,
             int grace_ms, std::function<uint64_t()> now_ms)
    : memory_(std::move(memory)),
      base_(base),
      frames_(frames),
      reserve_(ReserveFor(frames)),
      grace_ms_(grace_ms),
      now_ms_(std::move(now_ms)) {
  FreeLocked(0, frames);
}

Arena::~Arena() {
  // Free removes the registrations inside the allocation too.
  memory_->Free(base_);
}

Status Arena::Allocate(uint32_t pages, Use use, uint32_t* frame) {
  std::lock_guard lock(mu_);
  ReleaseRetiredLocked(now_ms_());
  const uint64_t keep = use == Use::kReserve ? 0 : reserve_;
  if (free_frames_ >= keep + pages && TakeLocked(pages, frame)) return Status::OK();
  const std::string budget = bytes() >= (size_t{1} << 20) ? std::to_string(bytes() >> 20) + " MiB"
                                                          : std::to_string(bytes() >> 10) + " KiB";
  const std::string exhausted = "memory budget of " + budget + " exhausted";
  if (retired_frames_ > 0) {
    // Memory is on its way back: compaction retired it and readers' grace is running.
    return Status::Busy(exhausted + "; " + std::to_string(retired_frames_) +
                        " pages are waiting out the GC grace, retry");
  }
  return Status::NoSpace(exhausted);
}

Status Arena::AllocateWord(uint64_t** out) {
  std::lock_guard lock(mu_);
  constexpr size_t kWordsPerFrame = record::kPageBytes / sizeof(uint64_t);
  if (words_frame_ == nullptr || words_used_ >= kWordsPerFrame) {
    ReleaseRetiredLocked(now_ms_());
    uint32_t frame = 0;
    if (free_frames_ < reserve_ + 1 || !TakeLocked(1, &frame)) {
      return Status::NoSpace("no arena page for group versions");
    }
    words_frame_ = frame_data(frame);
    std::memset(words_frame_, 0, record::kPageBytes);
    words_used_ = 0;
  }
  *out = reinterpret_cast<uint64_t*>(words_frame_) + words_used_++;
  return Status::OK();
}

void Arena::Retire(uint32_t frame, uint32_t pages) {
  std::lock_guard lock(mu_);
  retired_.push_back({frame, pages, now_ms_() + static_cast<uint64_t>(grace_ms_)});
  retired_frames_ += pages;
}

void Arena::ReleaseRetired() {
  std::lock_guard lock(mu_);
  ReleaseRetiredLocked(now_ms_());
}

Arena::Counts Arena::counts() const {
  std::lock_guard lock(mu_);
  return {frames_, free_frames_, retired_frames_};
}

void Arena::ReleaseRetiredLocked(uint64_t now) {
  while (!retired_.empty() && retired_.front().free_at_ms <= now) {
    const Retired r = retired_.front();
    retired_.pop_front();
    retired_frames_ -= r.pages;
    FreeLocked(r.frame, r.pages);
  }
}

void Arena::FreeLocked(uint32_t frame, uint32_t pages) {
  free_frames_ += pages;
  uint32_t start = frame;
  uint32_t len = pages;
  // Merge with the extent that ends where this one starts, and the one that starts where
  // this one ends, so runs of pages can be found again.
  auto next = free_by_start_.lower_bound(start);
  if (next != free_by_start_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      free_by_size_.erase({prev->second, prev->first});
      free_by_start_.erase(prev);
    }
  }
  if (next != free_by_start_.end() && next->first == frame + pages) {
    len += next->second;
    free_by_size_.erase({next->second, next->first});
    free_by_start_.erase(next);
  }
  free_by_start_.emplace(start, len);
  free_by_size_.emplace(len, start);
}

bool Arena::TakeLocked(uint32_t pages, uint32_t* frame) {
  // Best fit: the shortest extent that holds the run keeps long extents for long runs.
  auto it = free_by_size_.lower_bound({pages, 0});
  if (it == free_by_size_.end()) return false;
  const auto [len, start] = *it;
  free_by_size_.erase(it);
  free_by_start_.erase(start);
  if (len > pages) {
    free_by_start_.emplace(start + pages, len - pages);
    free_by_size_.emplace(len - pages, start + pages);
  }
  free_frames_ -= pages;
  *frame = start;
  return true;
}

}  // namespace ramp::store
