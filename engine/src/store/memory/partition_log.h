// The log of one partition: an append-only sequence of 8 KiB pages numbered 0, 1, 2, ...
// holding version records, commit marks and abort marks (record.h). Page numbers never
// change and are never reused; a page table maps each page number to the arena frame that
// holds it. This is the structure the durability layer writes to files and remote page
// I/O reads by page number.
//
// Pages are grouped into segments of kSegmentPages consecutive page numbers, the unit of
// compaction: the log tracks the bytes still referenced ("live") per segment, and a sealed
// segment whose live records have been relocated is retired whole.
//
// A record larger than a page gets a run of contiguous frames under consecutive page
// numbers (the page header of its first page says how many), and nothing else is placed in
// that run. Not thread-safe: the partition's lock guards it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common/record.h"
#include "ramp/log.h"
#include "ramp/status.h"
#include "ramp/types.h"
#include "store/durable/page_file.h"
#include "store/memory/arena.h"

namespace ramp::store {

// Where a record starts: page number << 32 | byte offset inside that page (or run).
using Loc = uint64_t;
inline constexpr Loc kNoLoc = ~Loc{0};
inline constexpr Loc MakeLoc(uint32_t page_no, uint32_t offset) {
  return Loc{page_no} << 32 | offset;
}
inline constexpr uint32_t LocPage(Loc loc) {
  return static_cast<uint32_t>(loc >> 32);
}
inline constexpr uint32_t LocOffset(Loc loc) {
  return static_cast<uint32_t>(loc);
}

inline constexpr uint32_t kSegmentPages = 128;
// The longest run of pages one record may take (32 MiB), which bounds value sizes.
inline constexpr uint32_t kMaxRunPages = 4096;
inline constexpr size_t kMaxRecordBytes =
    size_t{kMaxRunPages} * record::kPageBytes - record::kPageHeaderBytes;

class PartitionLog {
 public:
  PartitionLog(Arena* arena, const PartitionId& id);
  PartitionLog(const PartitionLog&) = delete;
  PartitionLog& operator=(const PartitionLog&) = delete;

  // Reserves `bytes` (a RecordBytes() size, at most kMaxRecordBytes) at the head of the
  // log; the caller encodes the record into *dst at once.
  Status Append(size_t bytes, Arena::Use use, Loc* loc, uint8_t** dst);
  uint8_t* Resolve(Loc loc) const;
  uint64_t arena_offset(const uint8_t* p) const { return arena_->offset_of(p); }

  // Live-byte accounting: a record is live while the index refers to it.
  void AddLive(Loc loc, size_t bytes);
  void RemoveLive(Loc loc, size_t bytes);

  // Sealed segments whose live bytes are below live_ratio of their size, emptiest first;
  // a segment is named by its first page number.
  std::vector<uint32_t> SegmentsBelow(double live_ratio) const;
  // Calls f(loc, record) for every record of a segment, in log order. f may append.
  // resident_only: pages evicted by the memory budget are skipped instead of read back.
  template <typename F>
  void ForEachRecord(uint32_t segment, F&& f, bool resident_only = false);
  // Clears the valid bit of every record in the segment and hands its frames back to the
  // arena (reused after the grace). Its page numbers stay unmapped for good. Returns the
  // number of pages retired.
  uint64_t RetireSegment(uint32_t segment);
  void RetireAll();

  uint64_t pages() const { return pages_; }
  // Page numbers handed out so far: pages are numbered [0, next_page()).
  uint32_t next_page() const { return next_page_; }
  // Page I/O (page_file.h): complete pages are copied to the file, if one is set.
  void set_page_file(PageFile* file) { page_file_ = file; }
  // The memory of page_no when it is resident (mapped and not evicted), otherwise null.
  const uint8_t* ResidentPage(uint32_t page_no) const;
  // The page is part of the log (resident or evicted by the memory budget), not retired.
  bool Mapped(uint32_t page_no) const { return SegmentOf(page_no) != nullptr; }

  // Memory budget (with a page file): while the arena holds more than budget_frames frames
  // (server-wide), complete single pages of this log that have a copy in the page file are
  // evicted from memory, oldest first; Resolve reads an evicted page back (into a fresh
  // frame) when a record on it is needed. Eviction runs at the start of an ordinary append
  // and in GC passes (the partition's exclusive lock held and no record pointer alive);
  // reading a page back never evicts, so reads may overshoot the budget until the next
  // append or GC pass. 0: no budget.
  void set_memory_budget(size_t budget_frames) { budget_frames_ = budget_frames; }
  uint64_t EnforceBudget(uint64_t max_pages);
  uint64_t evictions() const { return evictions_; }
  uint64_t page_ins() const { return page_ins_.load(std::memory_order_relaxed); }

  // ---- durability ----------------------------------------------------------------------
  // The first page of the segment holding page_no; false when it is not mapped.
  bool SegmentStart(uint32_t page_no, uint32_t* first_page) const;
  bool HasSegment(uint32_t first_page) const { return SegmentOf(first_page) != nullptr; }
  // Calls f(segment, page_no, data, run_pages, from) for every mapped page (run) changed
  // since the last call, in page order; bytes before `from` (past the page header) did not
  // change since the last call. The head page stays pending while it is open.
  template <typename F>
  void TakeUnflushed(F&& f);
  // Segments retired since the last call (their files may go once the relocated records
  // are durable).
  std::vector<uint32_t> TakeRetired() { return std::exchange(retired_, {}); }
  // Recovery: appends a segment read back from disk (whole pages, checked). Pages must
  // follow the pages loaded so far. The last loaded segment stays open for appends unless
  // full. NoSpace when the arena cannot hold it.
  Status Load(uint32_t first_page, const uint8_t* data, uint32_t pages);

 private:
  struct Segment {
    uint32_t first_page = 0;
    std::vector<uint32_t> frames;  // frame of page first_page + i
    uint64_t live_bytes = 0;
    bool sealed = false;
    uint64_t bytes() const { return frames.size() * record::kPageBytes; }
  };

  Status OpenPages(uint32_t run, Arena::Use use);
  const Segment* SegmentOf(uint32_t page_no) const;
  // SegmentOf for pages the index refers to, which must be mapped.
  const Segment& MappedSegment(uint32_t page_no) const;
  Segment& MappedSegment(uint32_t page_no);
  std::vector<Segment>::iterator FindSegment(uint32_t first_page);
  // The page's memory, read back from the page file first when it was evicted.
  uint8_t* PageData(const Segment& s, uint32_t page_no) const;
  uint8_t* PageIn(uint32_t page_no) const;
  static uint32_t FrameOf(const Segment& s, uint32_t page_no) {
    return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(s.frames[page_no - s.first_page]))
        .load(std::memory_order_acquire);
  }
  static constexpr uint32_t kEvicted = ~uint32_t{0};
  void RetireFrames(const Segment& s);

  Arena* const arena_;
  const PartitionId id_;
  std::vector<Segment> segments_;  // ascending first_page; the last one may be open
  uint32_t next_page_ = 0;
  uint64_t pages_ = 0;
  // The page (or run) records are appended to; head_data_ null when none is open.
  record::PageHeader head_;
  uint8_t* head_data_ = nullptr;
  PageFile* page_file_ = nullptr;
  size_t budget_frames_ = 0;
  uint32_t evict_cursor_ = 0;  // page number eviction resumes from
  uint64_t evictions_ = 0;
  mutable std::atomic<uint64_t> page_ins_{0};
  // Readers under the partition's shared lock read evicted pages back concurrently.
  mutable std::mutex page_in_mu_;
  uint32_t unflushed_from_ = 0;  // pages before it are written (durability)
  // Bytes of page unflushed_from_ written already (records are only appended).
  uint32_t unflushed_offset_ = record::kPageHeaderBytes;
  std::vector<uint32_t> retired_;  // segments retired and not yet taken
};

template <typename F>
void PartitionLog::TakeUnflushed(F&& f) {
  for (const Segment& s : segments_) {
    const uint32_t end = s.first_page + static_cast<uint32_t>(s.frames.size());
    if (end <= unflushed_from_) continue;
    for (uint32_t page = s.first_page; page < end;) {
      const uint8_t* data = PageData(s, page);
      record::PageHeader h;
      if (!record::ReadPageHeader(data, size_t{end - page} * record::kPageBytes, &h).ok()) break;
      if (page >= unflushed_from_) {
        const uint32_t from =
            page == unflushed_from_ ? unflushed_offset_ : record::kPageHeaderBytes;
        f(s.first_page, page, data, h.run_pages, from);
      }
      page += h.run_pages;
    }
  }
  unflushed_from_ = head_data_ != nullptr ? head_.page_no : next_page_;
  unflushed_offset_ = head_data_ != nullptr ? head_.used : record::kPageHeaderBytes;
}

template <typename F>
void PartitionLog::ForEachRecord(uint32_t segment, F&& f, bool resident_only) {
  const Segment* s = SegmentOf(segment);
  if (s == nullptr) return;
  // A copy: f may append to the log, which may move the segment table.
  const Segment walked = *s;
  const uint32_t end = walked.first_page + static_cast<uint32_t>(walked.frames.size());
  for (uint32_t page = walked.first_page; page < end;) {
    if (resident_only && FrameOf(walked, page) == kEvicted) {
      page++;  // evicted pages are single pages
      continue;
    }
    uint8_t* data = PageData(walked, page);
    record::PageHeader h;
    const Status st = record::ReadPageHeader(data, size_t{end - page} * record::kPageBytes, &h);
    if (!st.ok()) {
      // Only a bug of ours can get here (peers cannot write the arena).
      RAMP_ERROR("partition %s page %u: %s", id_.ToString().c_str(), page, st.ToString().c_str());
      return;
    }
    for (uint32_t off = record::kPageHeaderBytes; off < h.used;) {
      const uint32_t len = record::PeekRecord(data + off).total_len;
      f(MakeLoc(page, off), data + off);
      off += len;
    }
    page += h.run_pages;
  }
}

}  // namespace ramp::store
