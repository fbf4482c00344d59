#include "store/durable/log_reader.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/record.h"
#include "ramp/log.h"
#include "store/durable/data_dir.h"

namespace ramp::store {
namespace {

constexpr size_t kPage = record::kPageBytes;

// Checks one page (run) of a segment file at `at`; *run gets its length in pages.
Status CheckPage(const uint8_t* p, size_t avail, const PartitionId& id, uint32_t page_no,
                 uint32_t* run) {
  record::PageHeader h;
  RAMP_RETURN_IF_ERROR(record::ReadPageHeader(p, avail, &h));
  if (h.keyspace != id.keyspace || h.bucket != id.bucket) {
    return Status::Corruption("page of another partition");
  }
  if (h.page_no != page_no) {
    return Status::Corruption("page number " + std::to_string(h.page_no) + " where " +
                              std::to_string(page_no) + " belongs");
  }
  if (size_t{h.run_pages} * kPage > avail) return Status::Corruption("run past the end of file");
  if (record::Crc32c(p + 8, h.used - 8) != h.checksum) {
    return Status::Corruption("page checksum mismatch");
  }
  for (uint32_t off = record::kPageHeaderBytes; off < h.used;) {
    record::RecordView v;
    Status st = record::DecodeRecord(p + off, h.used - off, &v);
    if (!st.ok()) return st.Annotate("record at offset " + std::to_string(off));
    if (v.keyspace != id.keyspace || v.bucket != id.bucket) {
      return Status::Corruption("record of another partition at offset " + std::to_string(off));
    }
    off += v.total_len;
  }
  *run = h.run_pages;
  return Status::OK();
}

// The longest prefix of whole, valid records of a damaged single page (a torn write of
// the head page keeps what an earlier write made durable: those bytes did not change).
uint32_t SalvagePrefix(const uint8_t* p, const PartitionId& id) {
  uint32_t off = record::kPageHeaderBytes;
  while (off < kPage) {
    record::RecordView v;
    if (!record::DecodeRecord(p + off, kPage - off, &v).ok()) break;
    if (v.keyspace != id.keyspace || v.bucket != id.bucket) break;
    off += v.total_len;
  }
  return off;
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// Lays the log entries of one segment over its file's bytes and writes them back.
Status ApplyPatches(Env* env, const std::string& dir, uint32_t segment,
                    const std::vector<const WalPatch*>& patches, std::string* bytes,
                    ReadLogStats* stats) {
  if (patches.empty()) return Status::OK();
  RAMP_RETURN_IF_ERROR(env->CreateDir(dir));
  std::unique_ptr<File> file;
  RAMP_RETURN_IF_ERROR(env->Open(dir + "/" + SegmentFileName(segment), true, &file));
  for (const WalPatch* w : patches) {
    const size_t end = size_t{w->offset} + w->bytes.size();
    if (bytes->size() < end) bytes->resize((end + kPage - 1) / kPage * kPage, '\0');
    std::memcpy(bytes->data() + w->offset, w->bytes.data(), w->bytes.size());
    RAMP_RETURN_IF_ERROR(file->Write(w->offset, w->bytes.data(), w->bytes.size()));
    stats->wal_bytes += w->bytes.size();
  }
  // Whole pages on disk too (a patch may end inside a page whose tail is zeros).
  uint64_t size = 0;
  RAMP_RETURN_IF_ERROR(file->Size(&size));
  if (size < bytes->size()) RAMP_RETURN_IF_ERROR(file->Truncate(bytes->size()));
  RAMP_RETURN_IF_ERROR(file->Sync());
  return env->SyncDir(dir);
}

}  // namespace

Status ReadPartitionLog(Env* env, const std::string& dir, const PartitionId& id,
                        const std::vector<WalPatch>& patches, std::vector<LoadedSegment>* out,
                        ReadLogStats* stats) {
  out->clear();
  std::vector<std::string> names;
  Status listed = env->List(dir, &names);
  if (!listed.ok() && !(listed.Is(Status::Code::kNotFound) && !patches.empty())) return listed;
  std::map<uint32_t, std::vector<const WalPatch*>> by_segment;
  for (const WalPatch& w : patches) by_segment[w.segment].push_back(&w);
  std::vector<uint32_t> firsts;
  for (const auto& n : names) {
    uint32_t first = 0;
    if (ParseSegmentFileName(n, &first) && !by_segment.count(first)) firsts.push_back(first);
  }
  for (const auto& [segment, list] : by_segment) firsts.push_back(segment);
  std::sort(firsts.begin(), firsts.end());
  for (size_t f = 0; f < firsts.size(); ++f) {
    const bool newest = f + 1 == firsts.size();
    const std::string path = dir + "/" + SegmentFileName(firsts[f]);
    LoadedSegment seg;
    seg.first_page = firsts[f];
    if (env->Exists(path)) RAMP_RETURN_IF_ERROR(env->ReadFile(path, &seg.bytes));
    auto found = by_segment.find(firsts[f]);
    if (found != by_segment.end()) {
      RAMP_RETURN_IF_ERROR(ApplyPatches(env, dir, firsts[f], found->second, &seg.bytes, stats));
    }
    auto* data = reinterpret_cast<uint8_t*>(seg.bytes.data());
    const size_t size = seg.bytes.size();
    size_t good = 0;  // bytes of whole valid pages
    Status damage;
    while (good < size) {
      uint32_t run = 0;
      const uint32_t page_no = firsts[f] + static_cast<uint32_t>(good / kPage);
      damage = size - good < kPage ? Status::Corruption("partial page")
                                   : CheckPage(data + good, size - good, id, page_no, &run);
      if (!damage.ok()) break;
      good += size_t{run} * kPage;
    }
    // Zeroes after the last page are preallocated space never written: the normal end.
    if (good < size && AllZero(data + good, size - good)) seg.bytes.resize(good);
    if (good < seg.bytes.size()) {
      const uint32_t page_no = firsts[f] + static_cast<uint32_t>(good / kPage);
      const std::string where =
          path + " page " + std::to_string(page_no) + " (offset " + std::to_string(good) + ")";
      // A torn tail: only in the newest file, and nothing valid after the damage. A page
      // that checks out after it means damage in the middle of the log.
      bool later_valid = false;
      for (size_t at = good + kPage; at + kPage <= size; at += kPage) {
        uint32_t run = 0;
        if (CheckPage(data + at, size - at, id, firsts[f] + static_cast<uint32_t>(at / kPage), &run)
                .ok()) {
          later_valid = true;
        }
      }
      if (!newest || later_valid) {
        return Status::Corruption(where + ": " + damage.message() +
                                  "; this is not the torn tail of the log, refusing to start "
                                  "(restore the partition's files or move them away)");
      }
      size_t keep = good;
      if (size - good >= kPage && !AllZero(data + good, kPage)) {
        record::PageHeader h;
        const uint32_t prefix = SalvagePrefix(data + good, id);
        if (prefix > record::kPageHeaderBytes &&
            record::ReadPageHeader(data + good, kPage, &h).ok() && h.run_pages == 1 &&
            h.page_no == page_no) {
          h.used = prefix;
          std::memset(data + good + prefix, 0, kPage - prefix);
          record::WritePageHeader(h, data + good);  // the checksum covers `used`
          h.checksum = record::Crc32c(data + good + 8, prefix - 8);
          record::WritePageHeader(h, data + good);
          keep = good + kPage;
        }
      }
      RAMP_WARN("partition %s: torn tail of the log in %s cut: %zu bytes kept of the last %zu",
                id.ToString().c_str(), where.c_str(), keep - good, size - good);
      stats->torn_cut += size - keep;
      seg.bytes.resize(keep);
      // Cut on disk too: the next write goes where the damage was.
      std::unique_ptr<File> file;
      RAMP_RETURN_IF_ERROR(env->Open(path, false, &file));
      if (keep > good) RAMP_RETURN_IF_ERROR(file->Write(good, data + good, kPage));
      RAMP_RETURN_IF_ERROR(file->Truncate(keep));
      RAMP_RETURN_IF_ERROR(file->Sync());
    }
    stats->bytes += seg.bytes.size();
    if (!seg.bytes.empty()) out->push_back(std::move(seg));
  }
  return Status::OK();
}

}  // namespace ramp::store
