// The partition store of one rampd (DESIGN §5): partitions created on demand, version
// records in 8 KiB pages inside one registered arena (so GET* clients read them one-sided),
// a hash index per partition, RAMP state per key, garbage collection of overwritten
// versions after a grace period.
//
// Thread-safety: every method may be called from any worker thread. Partitions are
// independent (one lock each); no call holds two partition locks.
//
// Layout: store.h and store_types.h are the API (the store's own types; it includes no
// protocol header); memory/ holds the in-memory structures (arena, partitions, their logs
// and key indexes, transaction tables); durable/ holds everything that touches files (the
// Env seam, data directory, write-ahead log, group commit, log reader, page files).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "ramp/status.h"
#include "ramp/transport/memory.h"
#include "ramp/types.h"
#include "store/store_types.h"

namespace ramp::store {

class Env;
class File;

struct StoreOptions {
  // Bytes of page memory (the arena). Pages are 8 KiB.
  size_t memory_bytes = size_t{1} << 30;
  // An overwritten version stays readable by timestamp this long (round-2 reads need it).
  int gc_grace_ms = 5000;
  // How long a partition remembers that a transaction committed or aborted (QueryTxn
  // answers, the fence against a late PREPARE of an aborted timestamp). Must exceed the
  // time termination may take to ask about a transaction.
  int decided_retention_ms = 60000;
  // Paper 000 clears the valid bit of the committed version already at PREPARE; we clear it
  // when the version is replaced at COMMIT (fewer GET* fallbacks). Kept as an experiment.
  bool invalidate_at_prepare = false;
  // This server's node index, written into nothing but statistics.
  uint32_t node = 0;
  // Page I/O: where partitions keep page files (empty: none, every page read is served
  // from memory), and whether reads of them bypass the page cache (O_DIRECT).
  std::string page_dir;
  bool page_direct_io = false;
  // Pages kept in memory at most (bytes, 0: no limit); needs page_dir. Complete pages
  // beyond it live only in the page files (partition_log.h).
  size_t memory_budget_bytes = 0;
  // Clock used for GC and hotness (milliseconds); tests may replace it.
  std::function<uint64_t()> now_ms;
  // The data directory (empty: memory only). With one, the store recovers from it at Open
  // and writes its log there; replies wait for DurableTicket/WhenDurable.
  std::string data_dir;
  uint64_t cluster_id = 0;  // written into / checked against the data directory
  Env* env = nullptr;       // null: the POSIX file system (tests inject faults here)
};

struct StoreStats {
  uint64_t partitions = 0;
  uint64_t keys = 0;
  uint64_t versions = 0;
  uint64_t bytes = 0;  // bytes of pages in use
  uint64_t pages = 0;
  uint64_t free_pages = 0;
  uint64_t prepared_txns = 0;  // transactions prepared and not yet decided
  uint64_t collected_versions = 0;
};

// A transaction left prepared (for the termination protocol of the durability issue).
struct PendingTxn {
  Timestamp ts;
  PartitionId partition;
  uint64_t prepared_at_ms = 0;
  std::vector<PartitionId> siblings;  // every partition the transaction wrote, this one too
};

class Store {
 public:
  // Allocates the arena from memory (read-only for peers) and registers it.
  static Status Open(const StoreOptions& options, std::shared_ptr<transport::Memory> memory,
                     std::unique_ptr<Store>* out);
  ~Store();

  // The handle peers use to read records one-sided (sent in HELLO replies).
  transport::RemoteRegion arena_region() const;
  const uint8_t* arena_base() const;

  // ---- RAMP-Fast ------------------------------------------------------------------------
  // PREPARE: appends a version record (state prepared) per item. Refused (no item of the
  // call applied... items before the failing one stay prepared; the caller aborts ts):
  //  - Conflict: an item with kWriteHasExpected whose key's latest committed timestamp differs
  //    from expected, or whose key has another transaction's version prepared and undecided;
  //  - Aborted: ts is at or below the partition's scan watermark, or ts was already decided
  //    aborted (termination fence), or ts is not above the expected version of an item with
  //    kWriteHasExpected (it would never become current); err->watermark says what to exceed;
  //  - TooLarge: a key over 65535 bytes, a version over 32 MiB (kMaxRecordBytes);
  //  - Corruption: malformed metadata;
  //  - NoSpace: the memory budget is exhausted and nothing can be reclaimed; Busy: it is
  //    exhausted but compaction freed pages that come back after the GC grace (retry).
  // Preparing the same (ts, key) twice is idempotent.
  Status Prepare(const Timestamp& ts, std::span<const WriteItem> items, WriteError* err);
  // COMMIT ts in the given partitions: latestCommit advances where ts is newer, the new
  // committed version gets the valid bit and the one it replaces loses it. Idempotent; a ts
  // never prepared here is a no-op (OK), a ts aborted here is Internal. With `addresses`,
  // each key this commit made current is appended with its record's address (for GET*).
  Status Commit(const Timestamp& ts, std::span<const PartitionId> partitions,
                std::vector<CommittedRecord>* addresses = nullptr);
  // ABORT ts: its prepared versions are dropped and ts is fenced (a late PREPARE of it is
  // refused). Committed versions are never aborted (returns Internal if asked to).
  Status Abort(const Timestamp& ts, std::span<const PartitionId> partitions);

  // GET of one item. item.at zero: the latest committed version; otherwise the version with
  // exactly that timestamp, prepared or committed (round 2); with kReadSnapshot, the newest
  // committed version with ts <= item.at (scans). out->value / out->metadata point into
  // arena memory that stays valid for at least StoreOptions::gc_grace_ms.
  //  - A tombstone comes back as kOk with flags = kRecordTombstone, its ts and metadata and
  //    an empty value (RAMP round 1 needs its metadata; callers treat it as not found).
  //    Deleted keys are forgotten entirely once the deletion is older than the grace.
  //  - kCollected: no such version, but the partition's GC dropped a committed version
  //    with a timestamp >= item.at and the key has a newer committed version, so the one
  //    asked for may have existed: the reader retries. kNotFound: it never existed here.
  //  - kReadWantAddress: out->address is set when the version returned is the key's current
  //    committed one (the only record that carries the valid bit).
  void Get(const ReadItem& item, uint8_t flags, ReadResult* out);

  // GET_GROUP: the latest committed, non-deleted version of every grouped key of `group`
  // (keys prepared with kWriteGrouped, laid out as EncodeGroupKey: u16 big-endian group
  // length, group, suffix) in the partition, in key order. Views as for Get.
  // version (optional): the partition's group version with these entries (GroupVersion).
  void GetGroup(const PartitionId& partition, std::string_view group, std::vector<GroupEntry>* out,
                GroupVersion* version = nullptr) const;

  // ---- strict 2PL baseline -------------------------------------------------------------
  // Installs a committed version directly (the caller holds the write lock). grouped: the
  // key is a grouped key (GetGroup finds it).
  Status WriteCommitted(const PartitionId& part, std::string_view key, std::string_view value,
                        bool tombstone, const Timestamp& ts, bool grouped = false);

  // ---- termination ---------------------------------------------------------------------
  // What partition knows of ts. With fence, an unknown ts is recorded as aborted so that a
  // later PREPARE of it is refused.
  TxnState QueryTxn(const Timestamp& ts, const PartitionId& partition, bool fence);
  // Transactions prepared before cutoff_ms and still undecided.
  std::vector<PendingTxn> PendingOlderThan(uint64_t cutoff_ms) const;

  // ---- scans ----------------------------------------------------------------------------
  // Raises the partition's scan watermark to at least ts (PREPAREs at or below it are then
  // refused) and returns the transactions prepared at or below ts that are still undecided.
  std::vector<Timestamp> RaiseWatermark(const PartitionId& partition, const Timestamp& ts);
  // Visits every key of a partition with its newest version committed at or before `at`
  // (zero: latest committed), skipping tombstones. Stops when visit returns false.
  void ScanPartition(
      const PartitionId& partition, const Timestamp& at,
      const std::function<bool(std::string_view key, const Timestamp& ts, std::string_view value,
                               std::string_view metadata)>& visit) const;

  // ---- page access (remote page I/O, scans, migration) ---------------------------------
  // Where page `page_no` of a partition's log is now. frame: its bytes in the arena (null
  // when evicted to disk); file/file_offset: where it is on disk (file null while it is only
  // in memory, e.g. without a page directory). The File comes from the store's Env: read
  // it through file->fd() (io_uring) or, when that is -1, file->Read; holding it keeps it
  // open after the partition is gone. A frame stays readable for at least the GC grace
  // after the page is retired, which is what an I/O worker needs to copy it. NotFound for a
  // page number past the end of the log or a page compacted away; epoch is the partition's
  // placement epoch, which callers compare with the one the client asked for.
  struct PageLocation {
    const uint8_t* frame = nullptr;
    std::shared_ptr<File> file;
    uint64_t file_offset = 0;
    uint32_t pages = 1;  // run length (a record larger than a page spans a run)
    uint64_t epoch = 0;
    bool direct = false;  // file was opened with O_DIRECT (aligned buffers and lengths)
  };
  Status LocatePage(const PartitionId& partition, uint32_t page_no, PageLocation* out) const;
  // Pages in the partition's log so far (page numbers run from 0; compacted pages are gone).
  uint32_t PageCount(const PartitionId& partition) const;

  // ---- migration (DESIGN §7) -----------------------------------------------------------
  // Starts an empty copy of a partition at placement `epoch` that does not serve yet (the
  // target of a migration); any copy this server kept of the partition is dropped first.
  // load: the partition's operations per second where it comes from (its load here starts
  // there).
  Status BeginCopy(const PartitionId& partition, uint32_t epoch, double load = 0);
  // Ingests the records of one page (or run) image of the partition, as READ_PAGES returns
  // it, from byte `from` on (0: the first record). *used: where its records end (the `from`
  // of the next call for the same page while it is the source's open page); *run: the
  // pages it takes. A record that does not check (read while it was being written) stops
  // the call: *used is then where to resume, and *torn says so.
  Status IngestPage(const PartitionId& partition, const uint8_t* page, size_t len, uint32_t from,
                    uint32_t* used, uint32_t* run, bool* torn);
  // Whether this server's copy serves (see Partition::serving); NotFound without a copy.
  Status SetServing(const PartitionId& partition, bool serving);
  // Forgets the partition's copy here (its memory is reused after the GC grace, so that
  // one-sided readers and page reads in flight drain first).
  void DropPartition(const PartitionId& partition);
  bool HasPartition(const PartitionId& partition) const;
  // Operations the server did not see (clients' one-sided reads), counted into the
  // partition's load.
  void CountLoad(const PartitionId& partition, uint64_t ops);
  // The partition's scan watermark (zero without a copy).
  Timestamp Watermark(const PartitionId& partition) const;
  uint32_t PartitionEpoch(const PartitionId& partition) const;  // 0 without a copy

  // ---- durability ----------------------------------------------------------------------
  bool durable() const;
  // A ticket for everything this thread appended so far, and a callback (any thread) when
  // it is on disk, or with the error that kept it from getting there. Without a data
  // directory the callback runs at once with OK.
  uint64_t DurableTicket();
  // caller_flushes: the caller calls FlushLogInline() soon (LogWriter::WhenDurable).
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done,
                   bool caller_flushes = false);
  // The group commit's inline mode (LogWriter::SetInlineFlush, FlushInline): server workers
  // write the batches their parked replies wait for. No-op without a data directory.
  void SetInlineLogFlush(bool on);
  void FlushLogInline();
  // Waits until everything appended so far is durable.
  Status SyncLog();
  struct RecoveryStats {
    uint64_t partitions = 0;
    uint64_t bytes = 0;
    uint64_t torn_cut = 0;
    uint64_t wal_bytes = 0;
    double seconds = 0;
  };
  RecoveryStats recovery() const;

  // ---- administration ------------------------------------------------------------------
  // Drops versions overwritten more than gc_grace_ms ago and decided-transaction records.
  void CollectGarbage();
  Status DropKeyspace(KeyspaceId keyspace);
  StoreStats stats() const;
  std::vector<PartitionInfo> PartitionInfos() const;
  std::vector<PartitionId> PartitionIds() const;

 private:
  Store();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ramp::store
