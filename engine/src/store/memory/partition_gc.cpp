// Partition: garbage collection (versions past the grace, old decisions), compaction of
// the log (live records of sparse segments move to the head, the segments are retired),
// and dropping the partition.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "store/memory/partition.h"
#include "store/memory/valid_bit.h"

namespace ramp::store {

Partition::GcResult Partition::CollectGarbage(double compaction_ratio) {
  GcResult result;
  {
    std::unique_lock lock(mu_);
    // A partition that does not serve is being copied, or was copied away: it stays as it
    // is until it serves or is dropped.
    if (dropped_ || !serving_) return result;
    const uint64_t now_ms = now();
    // Reads may have brought evicted pages back beyond the budget since the last pass.
    log_.EnforceBudget(UINT64_MAX);
    result.collected_versions = ExpireVersions(now_ms);
    const auto retention = static_cast<uint64_t>(options_.decided_retention_ms);
    if (now_ms > retention) txns_.ForgetDecidedBefore(now_ms - retention);
    result.pages_retired = Compact(compaction_ratio);
  }
  // Sampled on every GC pass so that the average decays even when nobody asks for it.
  hotness_.Rate(now());
  return result;
}

uint64_t Partition::ExpireVersions(uint64_t now_ms) {
  const auto grace = static_cast<uint64_t>(options_.gc_grace_ms);
  uint64_t collected = 0;
  // Backwards: releasing a KeyVersions moves the last entry into its place, which this
  // loop has already visited.
  for (size_t i = with_versions_.size(); i-- > 0;) {
    KeyVersions* extra = with_versions_[i];
    extra->versions.erase_if([&](const Version& v) {
      if (!v.committed || v.since_ms + grace > now_ms) return false;
      log_.RemoveLive(v.loc, RecordLen(v.loc));
      collected_horizon_ = std::max(collected_horizon_, v.ts);
      ++collected;
      --versions_;
      return true;
    });
    if (!extra->versions.empty()) continue;
    KeySlot* slot = index_.FindByExtra(extra);
    if (extra->tombstone_since_ms != 0 && extra->tombstone_since_ms + grace <= now_ms &&
        sink_ != nullptr) {
      // With a log on disk, an older version of the key may still lie in a segment that
      // compaction has not rewritten yet; forgetting the tombstone would let recovery bring
      // that version back. The tombstone stays the current version (a slot, no extra).
      extra->tombstone_since_ms = 0;
      Trim(slot);
    } else if (extra->tombstone_since_ms != 0 && extra->tombstone_since_ms + grace <= now_ms) {
      // A deletion older than the grace, with nothing left before it: forget the key. A
      // writer that still expects the tombstone's timestamp gets a (retryable) conflict.
      ForgetKey(slot);
      ++collected;
    } else {
      Trim(slot);
    }
  }
  return collected;
}

uint64_t Partition::Compact(double ratio) {
  // Bounds the time one pass holds the partition's lock (about 16 MiB of copying); the
  // next pass continues where this one stopped.
  constexpr size_t kMaxSegmentsPerPass = 16;
  std::vector<uint32_t> segments = log_.SegmentsBelow(ratio);
  if (segments.size() > kMaxSegmentsPerPass) segments.resize(kMaxSegmentsPerPass);
  uint64_t retired = 0;
  for (uint32_t segment : segments) {
    bool moved_all = true;
    log_.ForEachRecord(segment, [&](Loc loc, uint8_t* rec) {
      if (moved_all) moved_all = Relocate(loc, rec);
    });
    // Out of memory even for the reserve: what moved stays moved, the rest waits.
    if (!moved_all) break;
    retired += log_.RetireSegment(segment);
  }
  if (retired != 0) Dirty();
  return retired;
}

bool Partition::Relocate(Loc loc, uint8_t* rec) {
  const record::RecordView view = record::PeekRecord(rec);
  if (view.kind != record::kKindVersion) return RelocateMark(loc, rec, view);
  KeySlot* slot = FindKey(KeyHash(view.key), view.key);
  if (slot == nullptr) return true;
  Loc* ref = nullptr;
  if (slot->current == loc) {
    ref = &slot->current;
  } else if (slot->extra != nullptr) {
    for (Version& v : slot->extra->versions) {
      if (v.loc == loc) ref = &v.loc;
    }
  }
  if (ref == nullptr) return true;  // garbage
  const bool committed = ref == &slot->current || FindVersion(slot, view.ts)->committed;
  Loc to;
  uint8_t* dst = nullptr;
  if (!log_.Append(view.total_len, Arena::Use::kReserve, &to, &dst).ok()) return false;
  // The copy keeps the state byte: a current version is valid in its new place before it
  // stops being valid in the old one (which may outlive this pass if compaction stops).
  std::memcpy(dst, rec, view.total_len);
  SetValidBit(rec, false);
  log_.AddLive(to, view.total_len);
  log_.RemoveLive(loc, view.total_len);
  *ref = to;
  Dirty();
  if (committed && sink_ != nullptr) {
    // Its commit mark may be in a segment compacted before this copy's: a fresh mark
    // naming the copy's segment keeps it committed for recovery.
    uint32_t first = 0;
    log_.SegmentStart(LocPage(to), &first);
    std::string segments(4, '\0');
    std::memcpy(segments.data(), &first, 4);
    if (!AppendMark(record::kKindCommitMark, view.ts, segments).ok()) return false;
  }
  return true;
}

void Partition::Drop() {
  std::unique_lock lock(mu_);
  dropped_ = true;
  SetGroupVersion(0);
  log_.RetireAll();
  if (page_file_ != nullptr) page_file_->Unlink();
  Dirty();
  with_versions_.clear();
  index_.Clear();
  txns_.Clear();
  versions_ = 0;
}

}  // namespace ramp::store
