// Partition: what migration needs of it (DESIGN §7). The target fills a fresh partition
// with copies of the source's records (Ingest, which applies them as recovery does); the
// source stops serving at the cutover (SetServing(false)), which also takes the valid bit
// off every record so that a one-sided reader with a cached address falls back to a
// request and hears MOVED.
#include <mutex>
#include <shared_mutex>

#include "store/memory/partition.h"
#include "store/memory/valid_bit.h"

namespace ramp::store {

uint32_t Partition::epoch() const {
  std::shared_lock lock(mu_);
  return epoch_;
}

void Partition::SetEpoch(uint32_t epoch) {
  std::unique_lock lock(mu_);
  if (epoch != epoch_) SetGroupVersion(serving_ ? NewGroupGeneration() : 0);
  epoch_ = epoch;
}

Timestamp Partition::Watermark() const {
  std::shared_lock lock(mu_);
  return watermark_;
}

bool Partition::serving() const {
  std::shared_lock lock(mu_);
  return serving_;
}

void Partition::SetServing(bool serving) {
  std::unique_lock lock(mu_);
  if (serving_ == serving || dropped_) {
    serving_ = serving;
    return;
  }
  serving_ = serving;
  SetGroupVersion(serving ? NewGroupGeneration() : 0);
  // RefreshValidBit gives the bit only to current versions of a serving partition.
  index_.ForEach([&](KeySlot& slot) {
    RefreshValidBit(&slot);
    return true;
  });
}

Status Partition::Ingest(const record::RecordView& v) {
  std::unique_lock lock(mu_);
  if (dropped_) return Status::NotFound("partition " + id_.ToString() + " was dropped");
  if (v.keyspace != id_.keyspace || v.bucket != id_.bucket) {
    return Status::Corruption("record of partition " +
                              PartitionId{v.keyspace, v.bucket}.ToString() +
                              " offered to partition " + id_.ToString());
  }
  record::RecordFields f{.kind = v.kind,
                         .flags = v.flags,
                         .keyspace = v.keyspace,
                         .bucket = v.bucket,
                         .epoch = epoch_,
                         .ts = v.ts,
                         .key = v.key,
                         .value = v.value,
                         .metadata = v.metadata};
  std::string segments;
  if (v.kind != record::kKindVersion) {
    // A mark names the segments of the versions it decides: ours, not the source's.
    if (sink_ != nullptr) {
      if (const PreparedTxn* txn = txns_.FindPrepared(v.ts)) segments = SegmentsOf(*txn, v.ts);
    }
    f.key = {};
    f.value = segments;
    f.metadata = {};
  }
  const size_t bytes = record::RecordBytes(f.key.size(), f.value.size(), f.metadata.size());
  Loc loc;
  uint8_t* dst = nullptr;
  RAMP_RETURN_IF_ERROR(log_.Append(
      bytes, v.kind == record::kKindVersion ? Arena::Use::kNormal : Arena::Use::kReserve, &loc,
      &dst));
  Dirty();
  record::EncodeRecord(f, dst);
  BumpGroupVersion();
  Replay(loc, dst);
  return Status::OK();
}

}  // namespace ramp::store
