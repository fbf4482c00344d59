#include "store/memory/partition_log.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "store/memory/valid_bit.h"

namespace ramp::store {

namespace {
// Pages evicted at most per page opened by an append (spreads the work).
constexpr uint64_t kEvictPerAppend = 16;
// How long reading an evicted page back waits for a frame (longer than any GC grace).
constexpr int kPageInWaitMs = 60000;
}  // namespace

PartitionLog::PartitionLog(Arena* arena, const PartitionId& id) : arena_(arena), id_(id) {}

Status PartitionLog::Append(size_t bytes, Arena::Use use, Loc* loc, uint8_t** dst) {
  if (bytes > kMaxRecordBytes) {
    return Status::TooLarge("record of " + std::to_string(bytes) + " bytes exceeds the " +
                            std::to_string(kMaxRecordBytes) + " a run of pages holds");
  }
  const bool large = bytes > record::kMaxRecordInPage;
  // Ordinary appends are where the memory budget is enforced: their callers hold no record
  // pointer across them (relocation and marks append with the reserve and may).
  const bool opens = large || head_data_ == nullptr || head_.used + bytes > record::kPageBytes;
  if (opens && use == Arena::Use::kNormal && budget_frames_ != 0) EnforceBudget(kEvictPerAppend);
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
  // The previous head page (or run) is complete now: nothing is appended to it any more.
  if (page_file_ != nullptr && next_page_ > 0) {
    if (const uint8_t* prev = ResidentPage(head_.page_no)) {
      page_file_->Write(head_.page_no, head_.run_pages, prev);
    }
  }
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

const uint8_t* PartitionLog::ResidentPage(uint32_t page_no) const {
  const Segment* s = SegmentOf(page_no);
  if (s == nullptr) return nullptr;
  const uint32_t frame = FrameOf(*s, page_no);
  return frame == kEvicted ? nullptr : arena_->frame_data(frame);
}

uint8_t* PartitionLog::PageIn(uint32_t page_no) const {
  std::lock_guard lock(page_in_mu_);
  const Segment& s = MappedSegment(page_no);
  uint32_t frame = FrameOf(s, page_no);
  if (frame != kEvicted) return arena_->frame_data(frame);  // another reader was first
  Status st = arena_->Allocate(1, Arena::Use::kReserve, &frame);
  // Busy: frames evicted or retired lately are waiting out the GC grace and will be free
  // after it. Waiting here holds the partition's shared lock (writers wait too), which is
  // better than failing a read that the index promises can be served.
  for (int waited_ms = 0; st.Is(Status::Code::kBusy) && waited_ms < kPageInWaitMs; waited_ms++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    st = arena_->Allocate(1, Arena::Use::kReserve, &frame);
  }
  if (st.ok()) {
    st = page_file_->ReadPage(page_no, arena_->frame_data(frame));
    record::PageHeader h;
    if (st.ok() &&
        (!record::ReadPageHeader(arena_->frame_data(frame), record::kPageBytes, &h).ok() ||
         h.page_no != page_no || h.keyspace != id_.keyspace || h.bucket != id_.bucket)) {
      st = Status::Corruption(page_file_->path() + ": page " + std::to_string(page_no) +
                              " read back is not that page");
    }
  }
  if (!st.ok()) {
    // The index refers to records on this page and the page cannot be had: serving anything
    // else would be wrong data, and there is no way to answer "unavailable" from here.
    RAMP_ERROR("partition %s: cannot read evicted page %u back: %s", id_.ToString().c_str(),
               page_no, st.ToString().c_str());
    std::abort();
  }
  std::atomic_ref<uint32_t>(const_cast<uint32_t&>(s.frames[page_no - s.first_page]))
      .store(frame, std::memory_order_release);
  page_ins_.fetch_add(1, std::memory_order_relaxed);
  return arena_->frame_data(frame);
}

uint64_t PartitionLog::EnforceBudget(uint64_t max_pages) {
  if (budget_frames_ == 0 || page_file_ == nullptr || segments_.empty()) return 0;
  const Arena::Counts c = arena_->counts();
  const uint64_t used = c.frames - c.free - c.retired;
  if (used <= budget_frames_) return 0;
  const uint64_t want = std::min<uint64_t>(max_pages, used - budget_frames_);
  // The head page (or run) is still appended to; never evicted.
  const uint32_t head_first = head_data_ != nullptr ? head_.page_no : next_page_;
  uint64_t evicted = 0;
  uint64_t looked = 0;
  const uint64_t total = next_page_;
  uint32_t page = evict_cursor_;
  while (evicted < want && looked < total) {
    if (page >= head_first) page = 0;  // wrap: the oldest pages again
    looked++;
    const uint32_t this_page = page++;
    Segment* s = const_cast<Segment*>(SegmentOf(this_page));
    if (s == nullptr) continue;
    uint32_t& slot = s->frames[this_page - s->first_page];
    if (slot == kEvicted || !page_file_->OnDisk(this_page, 1)) continue;
    uint8_t* data = arena_->frame_data(slot);
    uint32_t magic = 0;
    std::memcpy(&magic, data, sizeof(magic));
    record::PageHeader h;
    // Only whole single pages: a run is evicted never (its record must stay contiguous).
    if (magic != record::kPageMagic || !record::ReadPageHeader(data, record::kPageBytes, &h).ok() ||
        h.run_pages != 1) {
      continue;
    }
    // The file gets the page as it is now (valid bits changed since it was written), then
    // the frame loses its valid bits: a GET* reader holding an address into it falls back.
    if (Status st = page_file_->Rewrite(this_page, data); !st.ok()) {
      RAMP_WARN("partition %s: cannot evict page %u: %s", id_.ToString().c_str(), this_page,
                st.ToString().c_str());
      break;
    }
    for (uint32_t off = record::kPageHeaderBytes; off < h.used;) {
      const uint32_t len = record::PeekRecord(data + off).total_len;
      SetValidBit(data + off, false);
      off += len;
    }
    const uint32_t frame = slot;
    std::atomic_ref<uint32_t>(slot).store(kEvicted, std::memory_order_release);
    arena_->Retire(frame, 1);
    evicted++;
  }
  evict_cursor_ = page;
  evictions_ += evicted;
  return evicted;
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
  // Evicted pages have no memory to clear; their file copies are history.
  ForEachRecord(
      segment, [](Loc, uint8_t* rec) { SetValidBit(rec, false); }, true);
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
  // Consecutive frames go back as one extent; evicted pages have none.
  size_t start = 0;
  for (size_t i = 1; i <= s.frames.size(); ++i) {
    if (i == s.frames.size() || s.frames[i] != s.frames[i - 1] + 1 || s.frames[i - 1] == kEvicted) {
      if (s.frames[start] != kEvicted) {
        arena_->Retire(s.frames[start], static_cast<uint32_t>(i - start));
      }
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
      return Status::NoSpace(
          "partition " + id_.ToString() +
          ": its log does not fit in page memory (raise --memory-mb): " + st.message());
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
  const uint32_t frame = FrameOf(s, page_no);
  return frame != kEvicted ? arena_->frame_data(frame) : PageIn(page_no);
}

}  // namespace ramp::store
