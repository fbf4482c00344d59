// Store: the partitions of this server, created on demand, sharing one arena.
#include "store/store.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "ramp/log.h"
#include "store/durable/data_dir.h"
#include "store/durable/env.h"
#include "store/durable/log_reader.h"
#include "store/durable/log_writer.h"
#include "store/durable/wal.h"
#include "store/memory/arena.h"
#include "store/memory/partition.h"

namespace ramp::store {
namespace {

// Sealed segments with less than this share of live bytes are compacted by the periodic
// GC: relocating a segment then costs at most half a segment of copying per segment freed.
constexpr double kCompactionRatio = 0.5;
// When an allocation failed: compact more eagerly to get memory back.
constexpr double kReclaimCompactionRatio = 0.75;

// The write-ahead log of the group commit (a checkpoint when half of it is used).
constexpr uint64_t kWalBytes = uint64_t{16} << 20;

bool OutOfMemory(const Status& s) {
  return s.Is(Status::Code::kNoSpace) || s.Is(Status::Code::kBusy);
}

}  // namespace

struct Store::Impl {
  StoreOptions options;
  std::unique_ptr<Arena> arena;  // declared before the partitions, which use it
  // The group commit (null without a data directory); outlives the partitions it holds.
  std::unique_ptr<LogWriter> log;
  Store::RecoveryStats recovery;

  mutable std::shared_mutex map_mu;
  std::unordered_map<PartitionId, std::shared_ptr<Partition>, PartitionIdHash> partitions;

  std::mutex reclaim_mu;
  std::atomic<uint64_t> collected_versions{0};

  std::shared_ptr<Partition> Find(const PartitionId& id) const {
    std::shared_lock lock(map_mu);
    auto it = partitions.find(id);
    return it == partitions.end() ? nullptr : it->second;
  }

  std::shared_ptr<Partition> FindOrCreate(const PartitionId& id) {
    if (auto p = Find(id)) return p;
    std::unique_lock lock(map_mu);
    auto& slot = partitions[id];
    if (slot == nullptr) slot = std::make_shared<Partition>(id, arena.get(), options, log.get());
    return slot;
  }

  std::vector<std::shared_ptr<Partition>> All() const {
    std::shared_lock lock(map_mu);
    std::vector<std::shared_ptr<Partition>> all;
    all.reserve(partitions.size());
    for (const auto& [id, p] : partitions) {
      if (p != nullptr) all.push_back(p);
    }
    return all;
  }

  void CollectGarbage(double compaction_ratio) {
    Partition::GcResult total;
    for (const auto& p : All()) {
      const Partition::GcResult r = p->CollectGarbage(compaction_ratio);
      total.collected_versions += r.collected_versions;
      total.pages_retired += r.pages_retired;
    }
    arena->ReleaseRetired();
    collected_versions += total.collected_versions;
    if (total.collected_versions != 0 || total.pages_retired != 0) {
      RAMP_DEBUG("store gc: collected %llu versions, compaction retired %llu pages",
                 static_cast<unsigned long long>(total.collected_versions),
                 static_cast<unsigned long long>(total.pages_retired));
    }
  }

  // Runs an operation that appends to the log; when the arena is full, reclaims memory
  // (no partition lock held) and tries once more. The operation must be idempotent.
  template <typename F>
  Status WithMemory(F&& op) {
    Status s = op();
    if (!OutOfMemory(s)) return s;
    {
      std::lock_guard lock(reclaim_mu);
      CollectGarbage(kReclaimCompactionRatio);
    }
    return op();
  }

  // Writes are refused once the log cannot be made durable: the request gets the reason.
  Status Writable() const { return log == nullptr ? Status::OK() : log->health(); }

  Status Recover();
};

Status Store::Impl::Recover() {
  Env* env = options.env != nullptr ? options.env : PosixEnv();
  const auto start = std::chrono::steady_clock::now();
  RAMP_RETURN_IF_ERROR(
      OpenDataDir(env, options.data_dir, {.cluster = options.cluster_id, .node = options.node}));
  std::unique_ptr<Wal> wal;
  std::vector<WalPatch> entries;
  RAMP_RETURN_IF_ERROR(Wal::Open(env, options.data_dir + "/wal", kWalBytes, &wal, &entries));
  std::map<PartitionId, std::vector<WalPatch>> patches;
  for (WalPatch& w : entries) patches[w.partition].push_back(std::move(w));
  entries.clear();
  std::vector<std::string> names;
  RAMP_RETURN_IF_ERROR(env->List(options.data_dir, &names));
  std::set<PartitionId> ids;
  for (const auto& n : names) {
    PartitionId id;
    if (ParsePartitionDirName(n, &id)) ids.insert(id);
  }
  for (const auto& [id, list] : patches) ids.insert(id);
  // Partitions are independent (their own files, their own index; the arena is
  // thread-safe): oneTBB reads and rebuilds them in parallel. Each slot is written by one
  // task; the first error in partition order is reported, as a sequential pass would.
  const std::vector<PartitionId> order(ids.begin(), ids.end());
  struct Recovered {
    std::shared_ptr<Partition> partition;
    ReadLogStats stats;
    Status status;
    double read_s = 0, replay_s = 0;
  };
  std::vector<Recovered> out(order.size());
  tbb::parallel_for(tbb::blocked_range<size_t>(0, order.size(), 1), [&](const auto& range) {
    for (size_t i = range.begin(); i != range.end(); ++i) {
      const PartitionId& id = order[i];
      Recovered& r = out[i];
      std::vector<LoadedSegment> segments;
      static const std::vector<WalPatch> kNone;
      auto pw = patches.find(id);
      const auto t_read = std::chrono::steady_clock::now();
      r.status = ReadPartitionLog(env, options.data_dir + "/" + PartitionDirName(id), id,
                                  pw == patches.end() ? kNone : pw->second, &segments, &r.stats);
      const auto t_replay = std::chrono::steady_clock::now();
      r.read_s = std::chrono::duration<double>(t_replay - t_read).count();
      if (!r.status.ok()) continue;
      // No sink yet: recovery appends nothing; the writer exists once the log is replayed.
      auto p = std::make_shared<Partition>(id, arena.get(), options, nullptr);
      r.status = p->Recover(&segments);
      r.replay_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_replay).count();
      if (r.status.ok()) r.partition = std::move(p);
    }
  });
  double read_s = 0, replay_s = 0;  // summed over the tasks
  for (size_t i = 0; i < order.size(); ++i) {
    Recovered& r = out[i];
    RAMP_RETURN_IF_ERROR(r.status);
    read_s += r.read_s;
    replay_s += r.replay_s;
    recovery.wal_bytes += r.stats.wal_bytes;
    partitions[order[i]] = std::move(r.partition);
    recovery.partitions++;
    recovery.bytes += r.stats.bytes;
    recovery.torn_cut += r.stats.torn_cut;
  }
  // What the log held is in the segment files now (synced): it starts over.
  RAMP_RETURN_IF_ERROR(env->SyncDir(options.data_dir));
  RAMP_RETURN_IF_ERROR(wal->Reset());
  log = std::make_unique<LogWriter>(env, options.data_dir, std::move(wal));
  for (auto& [id, p] : partitions) p->SetSink(log.get());
  recovery.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RAMP_INFO(
      "recovered %llu partitions (%.1f MiB of log, %.1f KiB from the write-ahead log) "
      "from %s in %.3f s (reading and checking %.3f s, rebuilding %.3f s, summed over threads)",
      static_cast<unsigned long long>(recovery.partitions),
      static_cast<double>(recovery.bytes) / (1 << 20),
      static_cast<double>(recovery.wal_bytes) / 1024, options.data_dir.c_str(), recovery.seconds,
      read_s, replay_s);
  log->Start();
  return Status::OK();
}

Store::Store() : impl_(std::make_unique<Impl>()) {}
Store::~Store() {
  // The last batch goes to disk before the partitions go away.
  if (impl_->log != nullptr) impl_->log->Stop();
}

bool Store::durable() const {
  return impl_->log != nullptr;
}

uint64_t Store::DurableTicket() {
  return impl_->log == nullptr ? 0 : impl_->log->Ticket();
}

void Store::WhenDurable(uint64_t ticket, std::function<void(const Status&)> done,
                        bool caller_flushes) {
  if (impl_->log == nullptr) {
    done(Status::OK());
    return;
  }
  impl_->log->WhenDurable(ticket, std::move(done), caller_flushes);
}

void Store::SetInlineLogFlush(bool on) {
  if (impl_->log != nullptr) impl_->log->SetInlineFlush(on);
}

void Store::FlushLogInline() {
  if (impl_->log != nullptr) impl_->log->FlushInline();
}

Status Store::SyncLog() {
  return impl_->log == nullptr ? Status::OK() : impl_->log->Sync();
}

Store::RecoveryStats Store::recovery() const {
  return impl_->recovery;
}

Status Store::Open(const StoreOptions& options, std::shared_ptr<transport::Memory> memory,
                   std::unique_ptr<Store>* out) {
  if (options.gc_grace_ms < 0 || options.decided_retention_ms < 0) {
    return Status::InvalidArgument("gc_grace_ms and decided_retention_ms must not be negative");
  }
  std::unique_ptr<Store> store(new Store());
  Impl& impl = *store->impl_;
  impl.options = options;
  if (!impl.options.now_ms) {
    impl.options.now_ms = [] {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
    };
  }
  RAMP_RETURN_IF_ERROR(Arena::Create(std::move(memory), options.memory_bytes, options.gc_grace_ms,
                                     impl.options.now_ms, &impl.arena));
  if (!impl.options.data_dir.empty()) RAMP_RETURN_IF_ERROR(impl.Recover());
  *out = std::move(store);
  return Status::OK();
}

transport::RemoteRegion Store::arena_region() const {
  return impl_->arena->region();
}
const uint8_t* Store::arena_base() const {
  return impl_->arena->base();
}

Status Store::Prepare(const Timestamp& ts, std::span<const WriteItem> items, WriteError* err) {
  *err = WriteError();
  if (ts.zero()) return Status::InvalidArgument("PREPARE with a zero timestamp");
  RAMP_RETURN_IF_ERROR(impl_->Writable());
  // Consecutive items of one partition are prepared under one lock acquisition.
  for (size_t begin = 0; begin < items.size();) {
    size_t end = begin + 1;
    while (end < items.size() && items[end].part == items[begin].part) ++end;
    const auto group = items.subspan(begin, end - begin);
    std::shared_ptr<Partition> p = impl_->FindOrCreate(group.front().part);
    RAMP_RETURN_IF_ERROR(impl_->WithMemory(
        [&] { return p->Prepare(ts, group, static_cast<uint32_t>(begin), err); }));
    begin = end;
  }
  return Status::OK();
}

Status Store::Commit(const Timestamp& ts, std::span<const PartitionId> partitions,
                     std::vector<CommittedRecord>* addresses) {
  // Every partition is committed even if one fails: the caller retries the whole COMMIT,
  // which is idempotent.
  RAMP_RETURN_IF_ERROR(impl_->Writable());
  Status first_error;
  for (const PartitionId& id : partitions) {
    std::shared_ptr<Partition> p = impl_->Find(id);
    if (p == nullptr) continue;
    Status s = impl_->WithMemory([&] { return p->Commit(ts, addresses); });
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

Status Store::Abort(const Timestamp& ts, std::span<const PartitionId> partitions) {
  Status first_error;
  for (const PartitionId& id : partitions) {
    // Created when missing: the abort fences ts against a PREPARE still on its way.
    std::shared_ptr<Partition> p = impl_->FindOrCreate(id);
    Status s = impl_->WithMemory([&] { return p->Abort(ts); });
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

void Store::Get(const ReadItem& item, uint8_t flags, ReadResult* out) {
  std::shared_ptr<Partition> p = impl_->Find(item.part);
  if (p == nullptr) {
    *out = ReadResult();
    out->status = ReadStatus::kNotFound;
    return;
  }
  p->Get(item, flags, out);
}

void Store::GetGroup(const PartitionId& partition, std::string_view group,
                     std::vector<GroupEntry>* out, GroupVersion* version) const {
  out->clear();
  if (version != nullptr) *version = GroupVersion();
  if (std::shared_ptr<Partition> p = impl_->Find(partition)) p->GetGroup(group, out, version);
}

Status Store::WriteCommitted(const PartitionId& part, std::string_view key, std::string_view value,
                             bool tombstone, const Timestamp& ts, bool grouped) {
  if (ts.zero()) return Status::InvalidArgument("write with a zero timestamp");
  RAMP_RETURN_IF_ERROR(impl_->Writable());
  std::shared_ptr<Partition> p = impl_->FindOrCreate(part);
  return impl_->WithMemory([&] { return p->WriteCommitted(key, value, tombstone, ts, grouped); });
}

TxnState Store::QueryTxn(const Timestamp& ts, const PartitionId& partition, bool fence) {
  std::shared_ptr<Partition> p = fence ? impl_->FindOrCreate(partition) : impl_->Find(partition);
  return p == nullptr ? TxnState::kUnknown : p->QueryTxn(ts, fence);
}

std::vector<PendingTxn> Store::PendingOlderThan(uint64_t cutoff_ms) const {
  std::vector<PendingTxn> out;
  for (const auto& p : impl_->All()) p->AppendPending(cutoff_ms, &out);
  return out;
}

std::vector<Timestamp> Store::RaiseWatermark(const PartitionId& partition, const Timestamp& ts) {
  return impl_->FindOrCreate(partition)->RaiseWatermark(ts);
}

Status Store::LocatePage(const PartitionId& partition, uint32_t page_no, PageLocation* out) const {
  std::shared_ptr<Partition> p = impl_->Find(partition);
  if (p == nullptr) {
    *out = PageLocation();
    return Status::NotFound("partition " + partition.ToString() + " has no pages here");
  }
  return p->LocatePage(page_no, out);
}

uint32_t Store::PageCount(const PartitionId& partition) const {
  std::shared_ptr<Partition> p = impl_->Find(partition);
  return p == nullptr ? 0 : p->PageCount();
}

void Store::ScanPartition(
    const PartitionId& partition, const Timestamp& at,
    const std::function<bool(std::string_view key, const Timestamp& ts, std::string_view value,
                             std::string_view metadata)>& visit) const {
  if (std::shared_ptr<Partition> p = impl_->Find(partition)) p->Scan(at, visit);
}

void Store::CollectGarbage() {
  impl_->CollectGarbage(kCompactionRatio);
}

Status Store::DropKeyspace(KeyspaceId keyspace) {
  std::vector<std::shared_ptr<Partition>> dropped;
  {
    std::unique_lock lock(impl_->map_mu);
    std::erase_if(impl_->partitions, [&](const auto& entry) {
      if (entry.first.keyspace != keyspace) return false;
      dropped.push_back(entry.second);
      return true;
    });
  }
  // Operations that found a partition before it left the map see it dropped.
  for (const auto& p : dropped) p->Drop();
  return Status::OK();
}

Status Store::BeginCopy(const PartitionId& partition, uint32_t epoch, double load) {
  RAMP_RETURN_IF_ERROR(impl_->Writable());
  std::shared_ptr<Partition> old;
  auto fresh =
      std::make_shared<Partition>(partition, impl_->arena.get(), impl_->options, impl_->log.get());
  fresh->SetEpoch(epoch);
  fresh->SetServing(false);
  fresh->SeedLoad(load);
  {
    // find(), not operator[]: a null entry left in the map would reach every loop over the
    // partitions (garbage collection, stats) between here and the insertion below.
    std::unique_lock lock(impl_->map_mu);
    auto it = impl_->partitions.find(partition);
    if (it != impl_->partitions.end()) {
      // The old copy's drop must reach the log writer before the new copy's pages do
      // (they share the partition's directory).
      old = std::move(it->second);
      impl_->partitions.erase(it);
    }
  }
  if (old != nullptr) {
    old->Drop();
    RAMP_RETURN_IF_ERROR(SyncLog());
  }
  std::unique_lock lock(impl_->map_mu);
  impl_->partitions[partition] = std::move(fresh);
  return Status::OK();
}

Status Store::IngestPage(const PartitionId& partition, const uint8_t* page, size_t len,
                         uint32_t from, uint32_t* used, uint32_t* run, bool* torn) {
  std::shared_ptr<Partition> p = impl_->Find(partition);
  if (p == nullptr) return Status::NotFound("no copy of partition " + partition.ToString());
  record::PageHeader h;
  RAMP_RETURN_IF_ERROR(record::ReadPageHeader(page, len, &h));
  if (h.keyspace != partition.keyspace || h.bucket != partition.bucket) {
    return Status::Corruption("page of partition " + PartitionId{h.keyspace, h.bucket}.ToString() +
                              " offered to " + partition.ToString());
  }
  *run = h.run_pages;
  uint32_t off = std::max<uint32_t>(from, record::kPageHeaderBytes);
  while (off < h.used) {
    record::RecordView v;
    if (!record::DecodeRecord(page + off, h.used - off, &v).ok()) break;
    RAMP_RETURN_IF_ERROR(impl_->WithMemory([&] { return p->Ingest(v); }));
    off += v.total_len;
  }
  *used = off;
  *torn = off < h.used;
  return Status::OK();
}

Status Store::SetServing(const PartitionId& partition, bool serving) {
  std::shared_ptr<Partition> p = impl_->Find(partition);
  if (p == nullptr) return Status::NotFound("no copy of partition " + partition.ToString());
  p->SetServing(serving);
  return Status::OK();
}

void Store::DropPartition(const PartitionId& partition) {
  std::shared_ptr<Partition> p;
  {
    std::unique_lock lock(impl_->map_mu);
    auto it = impl_->partitions.find(partition);
    if (it == impl_->partitions.end()) return;
    p = std::move(it->second);
    impl_->partitions.erase(it);
  }
  p->Drop();
}

Timestamp Store::Watermark(const PartitionId& partition) const {
  std::shared_ptr<Partition> p = impl_->Find(partition);
  return p == nullptr ? Timestamp() : p->Watermark();
}

void Store::CountLoad(const PartitionId& partition, uint64_t ops) {
  if (std::shared_ptr<Partition> p = impl_->Find(partition)) p->CountLoad(ops);
}

bool Store::HasPartition(const PartitionId& partition) const {
  return impl_->Find(partition) != nullptr;
}

uint32_t Store::PartitionEpoch(const PartitionId& partition) const {
  std::shared_ptr<Partition> p = impl_->Find(partition);
  return p == nullptr ? 0 : p->epoch();
}

StoreStats Store::stats() const {
  StoreStats s;
  for (const auto& p : impl_->All()) {
    const Partition::Counts c = p->counts();
    ++s.partitions;
    s.keys += c.keys;
    s.versions += c.versions;
    s.pages += c.pages;
    s.prepared_txns += c.prepared_txns;
  }
  s.bytes = s.pages * record::kPageBytes;
  s.free_pages = impl_->arena->counts().free;
  s.collected_versions = impl_->collected_versions.load();
  return s;
}

std::vector<PartitionInfo> Store::PartitionInfos() const {
  std::vector<PartitionInfo> out;
  for (const auto& p : impl_->All()) {
    const Partition::Counts c = p->counts();
    out.push_back({.id = p->id(),
                   .keys = c.keys,
                   .bytes = c.pages * record::kPageBytes,
                   .ops_per_sec = p->OpsPerSec()});
  }
  return out;
}

std::vector<PartitionId> Store::PartitionIds() const {
  std::shared_lock lock(impl_->map_mu);
  std::vector<PartitionId> ids;
  ids.reserve(impl_->partitions.size());
  for (const auto& [id, p] : impl_->partitions) ids.push_back(id);
  return ids;
}

}  // namespace ramp::store
