// Partition: page access for remote page I/O (Store::LocatePage) and its page file.
#include <mutex>
#include <shared_mutex>

#include "store/memory/partition.h"

namespace ramp::store {

Status Partition::LocatePage(uint32_t page_no, Store::PageLocation* out) const {
  std::shared_lock lock(mu_);
  *out = Store::PageLocation();
  out->epoch = epoch_;
  if (dropped_) return Status::NotFound("partition " + id_.ToString() + " was dropped");
  if (page_no >= log_.next_page()) {
    return Status::NotFound("page " + std::to_string(page_no) + " is outside partition " +
                            id_.ToString() + " (" + std::to_string(log_.next_page()) + " pages)");
  }
  // A page compacted away is gone, although the page file still holds its bytes: the file
  // copy keeps the valid bits the page had when it was written, and readers of pages trust
  // valid bits (the memory copy's, or an evicted page's, which was rewritten at eviction).
  if (!log_.Mapped(page_no)) {
    return Status::NotFound("page " + std::to_string(page_no) + " of partition " + id_.ToString() +
                            " was retired by compaction");
  }
  out->frame = log_.ResidentPage(page_no);
  if (out->frame != nullptr) {
    record::PageHeader h;
    // Only the first page of a run has a header; the others are its continuation.
    if (record::ReadPageHeader(out->frame, record::kPageBytes, &h).ok() && h.page_no == page_no) {
      out->pages = h.run_pages;
    }
  }
  // A complete page has a copy in the page file; an evicted page only that.
  if (page_file_ != nullptr && page_file_->OnDisk(page_no, 1)) {
    out->file = page_file_->reader();
    out->file_offset = PageFile::OffsetOf(page_no);
    out->direct = page_file_->direct();
  }
  if (out->frame == nullptr && out->file == nullptr) {
    return Status::Internal("page " + std::to_string(page_no) + " of partition " + id_.ToString() +
                            " is neither in memory nor in the page file");
  }
  return Status::OK();
}

uint32_t Partition::PageCount() const {
  std::shared_lock lock(mu_);
  return log_.next_page();
}

}  // namespace ramp::store
