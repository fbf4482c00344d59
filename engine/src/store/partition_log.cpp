#include "store/partition_log.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "store/valid_bit.h"

namespace ramp::store {

PartitionLog::PartitionLog(Arena* arena, const PartitionId& id) : arena_(arena), id_(id) {}

Status PartitionLog::Append(size_t bytes, Arena::Use use, Loc* loc, uint8_t** dst) {
  if (bytes > kMaxRecordBytes) {
    return Status::TooLarge("record of " + std::to_string(bytes) + " bytes exceeds the " +
                            std::to_string(kMaxRecordBytes) + " a run of pages holds");
  }
  const bool large = bytes > record::kMaxRecordInPage;
  if (large) {
    const size_t run =
        (record::kPageHeaderBytes + bytes + record::kPageBytes - 1) / record::kPageBytes;
    RAMP_RETURN_IF_ERROR(OpenPages(static_cast<uint32_t>(run), use));
  } else if (head_data_ == nullptr || head_.used + bytes > record::kPageBytes) {
    RAMP_RETURN_IF_ERROR(OpenPages(1, use));
  }
  *loc = MakeLoc(head_.page_no, head_.used);
  *dst = head_data_ + head_.used;
  head_.used += static_cast<uint32_t>(bytes);
  record::WritePageHeader(head_, head_data_);
  // A run holds its one record only: the next append opens a fresh page.
  if (large) head_data_ = nullptr;
  return Status::OK();
}

Status PartitionLog::OpenPages(uint32_t run, Arena::Use use) {
  if (next_page_ > UINT32_MAX - run) {
    return Status::NoSpace("partition " + id_.ToString() + ": page numbers exhausted");
  }
  uint32_t frame = 0;
  RAMP_RETURN_IF_ERROR(arena_->Allocate(run, use, &frame));
  // The open segment is sealed when it is full and a new page is needed, so the head page
  // always lies in the open segment and compaction (sealed segments only) never moves it.
  if (!segments_.empty() && !segments_.back().sealed &&
      segments_.back().frames.size() >= kSegmentPages) {
    segments_.back().sealed = true;
  }
  if (segments_.empty() || segments_.back().sealed) {
    segments_.push_back(Segment{.first_page = next_page_});
  }
  Segment& open = segments_.back();
  for (uint32_t i = 0; i < run; ++i) open.frames.push_back(frame + i);
  head_ = record::PageHeader{.keyspace = id_.keyspace,
                             .bucket = id_.bucket,
                             .page_no = next_page_,
                             .run_pages = static_cast<uint16_t>(run)};
  head_data_ = arena_->frame_data(frame);
  record::WritePageHeader(head_, head_data_);
  next_page_ += run;
  pages_ += run;
  return Status::OK();
}

uint8_t* PartitionLog::Resolve(Loc loc) const {
  return PageData(MappedSegment(LocPage(loc)), LocPage(loc)) + LocOffset(loc);
}

void PartitionLog::AddLive(Loc loc, size_t bytes) {
  MappedSegment(LocPage(loc)).live_bytes += bytes;
}

void PartitionLog::RemoveLive(Loc loc, size_t bytes) {
  MappedSegment(LocPage(loc)).live_bytes -= bytes;
}

std::vector<uint32_t> PartitionLog::SegmentsBelow(double live_ratio) const {
  std::vector<std::pair<double, uint32_t>> found;
  for (const Segment& s : segments_) {
    const double ratio = static_cast<double>(s.live_bytes) / static_cast<double>(s.bytes());
    if (s.sealed && ratio < live_ratio) found.emplace_back(ratio, s.first_page);
  }
  std::sort(found.begin(), found.end());
  std::vector<uint32_t> out;
  out.reserve(found.size());
  for (const auto& f : found) out.push_back(f.second);
  return out;
}

uint64_t PartitionLog::RetireSegment(uint32_t segment) {
  auto it = FindSegment(segment);
  if (it == segments_.end()) return 0;
  ForEachRecord(segment, [](Loc, uint8_t* rec) { SetValidBit(rec, false); });
  RetireFrames(*it);
  retired_.push_back(segment);
  const uint64_t pages = it->frames.size();
  pages_ -= pages;
  segments_.erase(it);
  return pages;
}

void PartitionLog::RetireAll() {
  while (!segments_.empty()) RetireSegment(segments_.front().first_page);
  head_data_ = nullptr;
}

void PartitionLog::RetireFrames(const Segment& s) {
  // Consecutive frames go back as one extent.
  size_t start = 0;
  for (size_t i = 1; i <= s.frames.size(); ++i) {
    if (i == s.frames.size() || s.frames[i] != s.frames[i - 1] + 1) {
      arena_->Retire(s.frames[start], static_cast<uint32_t>(i - start));
      start = i;
    }
  }
}

std::vector<PartitionLog::Segment>::iterator PartitionLog::FindSegment(uint32_t first_page) {
  auto it = std::lower_bound(segments_.begin(), segments_.end(), first_page,
                             [](const Segment& s, uint32_t page) { return s.first_page < page; });
  return it != segments_.end() && it->first_page == first_page ? it : segments_.end();
}

const PartitionLog::Segment* PartitionLog::SegmentOf(uint32_t page_no) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), page_no,
                             [](uint32_t page, const Segment& s) { return page < s.first_page; });
  if (it == segments_.begin()) return nullptr;
  --it;
  return page_no - it->first_page < it->frames.size() ? &*it : nullptr;
}

const PartitionLog::Segment& PartitionLog::MappedSegment(uint32_t page_no) const {
  const Segment* s = SegmentOf(page_no);
  if (s == nullptr) {
    // The index refers to a page that is gone: going on would serve whatever lies in that
    // memory now as if it were this partition's data.
    RAMP_ERROR("partition %s: bug: page %u is not mapped", id_.ToString().c_str(), page_no);
    std::abort();
  }
  return *s;
}

PartitionLog::Segment& PartitionLog::MappedSegment(uint32_t page_no) {
  return const_cast<Segment&>(std::as_const(*this).MappedSegment(page_no));
}

bool PartitionLog::SegmentStart(uint32_t page_no, uint32_t* first_page) const {
  const Segment* s = SegmentOf(page_no);
  if (s == nullptr) return false;
  *first_page = s->first_page;
  return true;
}

Status PartitionLog::Load(uint32_t first_page, const uint8_t* data, uint32_t pages) {
  if (first_page < next_page_) {
    return Status::Corruption("partition " + id_.ToString() + ": segment " +
                              std::to_string(first_page) + " overlaps the pages before it");
  }
  if (!segments_.empty()) segments_.back().sealed = true;
  segments_.push_back(Segment{.first_page = first_page});
  for (uint32_t i = 0; i < pages;) {
    record::PageHeader h;
    RAMP_RETURN_IF_ERROR(record::ReadPageHeader(data + size_t{i} * record::kPageBytes,
                                                size_t{pages - i} * record::kPageBytes, &h));
    uint32_t frame = 0;
    Status st = arena_->Allocate(h.run_pages, Arena::Use::kNormal, &frame);
    if (!st.ok()) {
      return Status::NoSpace("partition " + id_.ToString() +
                             ": its log does not fit in page memory (raise --memory-mb): " +
                             st.message());
    }
    std::memcpy(arena_->frame_data(frame), data + size_t{i} * record::kPageBytes,
                size_t{h.run_pages} * record::kPageBytes);
    for (uint32_t k = 0; k < h.run_pages; ++k) segments_.back().frames.push_back(frame + k);
    i += h.run_pages;
  }
  segments_.back().sealed = segments_.back().frames.size() >= kSegmentPages;
  next_page_ = first_page + pages;
  pages_ += pages;
  unflushed_from_ = next_page_;
  unflushed_offset_ = record::kPageHeaderBytes;
  head_data_ = nullptr;  // appends start on a fresh page
  return Status::OK();
}

uint8_t* PartitionLog::PageData(const Segment& s, uint32_t page_no) const {
  return arena_->frame_data(s.frames[page_no - s.first_page]);
}

}  // namespace ramp::store
