// Sequential, parallel, bitmap, sample and ANALYZE scans of ramp tables.
//
// Remote rows come from a RowSource (latest committed versions, ascending row id); the
// transaction's own buffered writes are overlaid: rows it deleted (visibly for the scan's
// command id) are skipped, rows it inserted follow the remote rows.
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "xact/row_ids.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "tableam/rescan_cache.hpp"
#include "tableam/tableam.hpp"

namespace pgramp::tam {

namespace {

constexpr uint64_t kSerialChunkBlocks = 32;  // 8192 row ids per probe request
// Serial scans of tables whose row ids go beyond one probe request use the partition scan
// (page I/O). With the page reader and arena kept from one scan to the next (the client's
// scan spares), a page scan costs about 1 ms more than the rows it reads: at 15 000 rows it
// took 2.8 ms against 12.3 ms of probes, at 1 000 rows 1.0 ms against 1.2 ms (SF 0.1
// customer and supplier, best of 10). Before, a scan opened its reader (connections,
// memory registration) and 4 probe requests were the break-even.
constexpr uint64_t kScannerMinRows = kProbeKeysPerRequest;
constexpr uint64_t kParallelChunkBlocks = 16;  // blocks a worker takes at a time

// Shared state of a parallel scan (in the DSM segment; the snapshot follows it).
struct ParallelScan {
  ParallelTableScanDescData base;
  uint64 nblocks;
  pg_atomic_uint64 next_block;
  // Page scans of large tables: each participant takes whole partitions and reads them at
  // the scan snapshot the leader drew, so that together they read one state of the table.
  bool pages;
  uint64 snapshot_time;
  uint64 snapshot_client;
  pg_atomic_uint32 next_partition;
};

class ParallelRanges : public BlockRanges {
 public:
  explicit ParallelRanges(ParallelScan* shared) : shared_(shared) {}
  bool Next(uint64_t* first, uint64_t* end) override {
    const uint64_t start = pg_atomic_fetch_add_u64(&shared_->next_block, kParallelChunkBlocks);
    if (start >= shared_->nblocks) return false;
    *first = start;
    *end = std::min<uint64_t>(start + kParallelChunkBlocks, shared_->nblocks);
    return true;
  }

 private:
  ParallelScan* shared_;
};

uint64_t BlocksBelow(uint64_t high_water) {
  return (high_water + kRowsPerBlock - 1) / kRowsPerBlock;
}

// C++ state of one scan.
struct TableScan {
  Relation rel;
  ramp::KeyspaceRef ks;
  ramp::Visibility vis;
  ParallelScan* parallel = nullptr;

  // sequential / parallel
  std::unique_ptr<RowSource> source;
  std::vector<RowView> batch;
  const std::vector<RowView>* rows = &batch;  // handed out from: the batch or the cache
  size_t pos = 0;
  bool remote_done = false;
  bool overlay_done = false;
  uint64_t overlay_next = 0;  // own inserts are visited from this row id on

  // block at a time (bitmap, analyze, sample)
  FetchedRows block;
  size_t block_pos = 0;
  uint32_t block_number = 0;

  // ANALYZE: the row ids it reads of each block (AnalyzeSample), several blocks per request.
  double analyze_fraction = 0;  // share of each block's row ids read; 0: not decided yet
  bool analyze_lookahead = false;
  FetchedRows analyze_ahead;  // rows of blocks [ahead_first, ahead_end), ascending row id
  size_t analyze_ahead_pos = 0;
  uint64_t analyze_ahead_first = 0;
  uint64_t analyze_ahead_end = 0;

  // blocks below the row-id high-water mark (sample scans, TID checks)
  bool nblocks_known = false;
  uint64_t nblocks = 0;

  // Rescans of a serial scan (rescan_cache.hpp): the first pass reads the cluster, the
  // second copies what it reads (most scans are never rescanned and copy nothing), later
  // passes replay the copy.
  enum class Cache { kFirstPass, kFilling, kReplaying, kOff };
  Cache cache_state = Cache::kFirstPass;
  RescanCache cache;
  // Only sequential scans replay. A bitmap scan's rescan reads other blocks (a nested
  // loop's next key): "the rest of the table" it read into the cache on its second rescan
  // was the whole table (TPC-H Q19: 52 rescans of lineitem's bitmap scan, 80 of 105 ms).
  bool sequential = false;

  void AddToCache(const std::vector<RowView>& views) {
    const size_t limit = static_cast<size_t>(work_mem) * 1024;
    for (const RowView& row : views) {
      if (!cache.Add(row, limit)) {
        cache_state = Cache::kOff;
        return;
      }
    }
  }

  void Restart() {
    if (parallel != nullptr || !sequential || ks.fresh || !guc::rescan_cache) {
      cache.Clear();
      cache_state = Cache::kOff;
    } else if (cache_state == Cache::kFirstPass) {
      cache_state = Cache::kFilling;
    } else if (cache_state == Cache::kFilling) {
      // The pass stopped early (a semi join's first match, a LIMIT): read the rest of the
      // table into the cache now, once, so that every later pass replays it.
      if (!remote_done) {
        if (source == nullptr) StartSource();
        while (cache_state == Cache::kFilling && source->NextViews(&batch)) AddToCache(batch);
      }
      if (cache_state == Cache::kFilling) cache_state = Cache::kReplaying;
    }
    source.reset();
    batch.clear();
    rows = &batch;
    pos = 0;
    remote_done = false;
    overlay_done = false;
    overlay_next = 0;
    block.rows.clear();
    block.dead = 0;
    block_pos = 0;
    kept.clear();
    kept_pos = -1;
  }

  uint64_t Blocks() {
    if (!nblocks_known) {
      nblocks = ks.fresh ? 0 : BlocksBelow(HighWater(ks));
      nblocks_known = true;
    }
    return nblocks;
  }

  void StartSource() {
    std::unique_ptr<BlockRanges> ranges;
    if (parallel != nullptr && parallel->pages) {
      ParallelScan* shared = parallel;
      source =
          MakeScannerRowSource(ks, ramp::Timestamp{shared->snapshot_time, shared->snapshot_client},
                               [shared](uint32_t* index) {
                                 *index = pg_atomic_fetch_add_u32(&shared->next_partition, 1);
                                 return true;
                               });
      return;
    }
    if (parallel != nullptr) {
      ranges = std::make_unique<ParallelRanges>(parallel);
    } else {
      // Serial scans of tables beyond a few probe requests read the partitions' pages
      // (remote page I/O); small ones are cheaper to probe by row id.
      if (SequentialScanReadsPages(Blocks()) && !ks.fresh) {
        source = MakeScannerRowSource(ks);
        return;
      }
      ranges = SerialBlockRanges(0, Blocks(), kSerialChunkBlocks);
    }
    source = MakeProbeRowSource(ks, std::move(ranges), false);
  }

  // Next visible row of a sequential scan: a remote row or one of the transaction's own.
  // *stable: the value stays where it is until the next call (a remote row of the source's
  // batch, its tuple aligned), so the slot may point at it. *writer: who wrote the version.
  struct Writer {
    bool own = false;
    uint32_t cid = 0;    // own
    ramp::Timestamp ts;  // committed
  };
  bool Next(uint64_t* rowid, std::string_view* value, bool* stable, Writer* writer) {
    const XactState* x = XactIfAny();
    while (!remote_done) {
      if (pos < rows->size()) {
        const RowView& row = (*rows)[pos++];
        if (x != nullptr) {
          const ramp::BatchEntry* own = x->writes.Find(ks.id, ramp::EntryKey{0, row.rowid});
          if (own != nullptr && vis.SeesDelete(*own)) continue;
          if (own != nullptr && own->in_place && vis.SeesInsert(*own)) {
            *rowid = row.rowid;  // updated in place by this transaction: its value
            *value = own->value;
            *stable = false;
            *writer = Writer{true, own->insert_cid, {}};
            return true;
          }
        }
        *rowid = row.rowid;
        *value = row.value;
        *stable = row.stable;
        *writer = Writer{false, 0, row.ts};
        return true;
      }
      if (ks.fresh) {
        remote_done = true;
        break;
      }
      pos = 0;
      if (cache_state == Cache::kReplaying) {
        if (rows == &batch) {
          rows = &cache.rows();  // the whole table, then done
        } else {
          remote_done = true;
        }
        continue;
      }
      if (source == nullptr) StartSource();
      if (!source->NextViews(&batch)) {
        remote_done = true;
        batch.clear();
      } else if (cache_state == Cache::kFilling) {
        AddToCache(batch);
      }
    }
    // Own inserts: none in parallel scans (workers cannot see the leader's buffer; the
    // planner hook keeps parallel plans away from tables with buffered writes).
    if (overlay_done || x == nullptr || parallel != nullptr) return false;
    const ramp::WriteBatch::Keyspace* own = x->writes.Of(ks.id);
    const std::string* next = nullptr;
    if (own != nullptr) {
      own->ForEachInGroup(0, overlay_next, [&](const ramp::EntryKey& k, const ramp::BatchEntry& w) {
        overlay_next = k.rowid + 1;
        // Rows updated in place come with the remote rows (above), not from the overlay.
        if (w.in_place || !vis.SeesInsert(w) || vis.SeesDelete(w)) return true;
        *rowid = k.rowid;
        next = &w.value;
        *writer = Writer{true, w.insert_cid, {}};
        return false;
      });
    }
    if (next == nullptr) {
      overlay_done = true;
      return false;
    }
    *value = *next;
    *stable = false;
    return true;
  }

  // Scrollable cursors (scroll_cursors.cpp begins their scans with kScanKeepsRows): the rows
  // handed out so far, copied, and the position among them (-1 before the first, kept.size()
  // after the last). A page scan's order is its own and a second pass need not repeat it, so
  // going back replays what went forward.
  struct KeptRow {
    uint64_t rowid;
    std::string value;
    Writer writer;
  };
  bool keep_rows = false;
  std::vector<KeptRow> kept;
  int64_t kept_pos = -1;

  // The row at position kept_pos after moving one step; false past either end.
  bool Step(bool forward) {
    const auto size = static_cast<int64_t>(kept.size());
    if (!forward) {
      if (kept_pos <= 0) {
        kept_pos = -1;
        return false;
      }
      kept_pos = std::min(kept_pos, size) - 1;
      return true;
    }
    if (kept_pos + 1 < size) {
      kept_pos++;
      return true;
    }
    uint64_t rowid = 0;
    std::string_view value;
    bool stable = false;
    Writer writer;
    if (!Next(&rowid, &value, &stable, &writer)) {
      kept_pos = size;
      return false;
    }
    kept.push_back(KeptRow{rowid, std::string(value), writer});
    kept_pos = size;
    return true;
  }

  void LoadBlock(uint32_t blockno, const std::vector<uint64_t>& rowids) {
    block_number = blockno;
    block_pos = 0;
    FetchRows(ks, vis, rowids, &block);
  }
};

struct RampScanDesc {
  TableScanDescData base;
  ContextOwned<TableScan>* state;
  // sample scans (PostgreSQL side)
  BlockNumber sample_block;
  bool sample_started;
};

TableScan& StateOf(TableScanDesc scan) {
  auto* s = reinterpret_cast<RampScanDesc*>(scan);
  if (s->state == nullptr || s->state->object == nullptr) {
    throw SqlError(ERRCODE_INTERNAL_ERROR, "ramp scan used after its memory was released");
  }
  return *s->state->object;
}

std::vector<uint64_t> BlockRowIds(uint32_t blockno) {
  std::vector<uint64_t> ids(kRowsPerBlock);
  for (uint64_t i = 0; i < kRowsPerBlock; i++) ids[i] = uint64_t{blockno} * kRowsPerBlock + i;
  return ids;
}

// The slot's system columns: the transaction's own version, or a committed one.
void MarkWriter(TupleTableSlot* slot, const TableScan::Writer& writer) {
  if (writer.own) {
    MarkOwnVersion(slot, writer.cid);
  } else {
    MarkCommittedVersion(slot, writer.ts.time, writer.ts.client);
  }
}

bool StoreNextOfBlock(TableScan& s, TupleTableSlot* slot) {
  if (s.block_pos >= s.block.rows.size()) return false;
  const RowVersion& row = s.block.rows[s.block_pos++];
  StoreVersion(slot, s.rel, row);
  return true;
}

}  // namespace

bool SequentialScanReadsPages(uint64_t row_id_blocks) {
  return guc::scan_method == 2 ||
         (guc::scan_method == 0 && row_id_blocks * kRowsPerBlock > kScannerMinRows);
}

TableScanDesc ScanBegin(Relation rel, Snapshot snapshot, int nkeys, struct ScanKeyData* key,
                        ParallelTableScanDesc pscan, uint32 flags) {
  TableScanDesc result = Boundary([&] {
    if (nkeys > 0) {
      throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "scan keys are not supported by ramp tables");
    }
    auto state = std::make_unique<TableScan>();
    state->rel = rel;
    state->ks = RelationKeyspace(rel);
    state->vis = VisibilityOf(snapshot);
    state->keep_rows = (flags & kScanKeepsRows) != 0 && pscan == nullptr;
    state->sequential = (flags & SO_TYPE_SEQSCAN) != 0;
    if (pscan != nullptr) {
      state->parallel = reinterpret_cast<ParallelScan*>(pscan);
      state->nblocks = state->parallel->nblocks;
      state->nblocks_known = true;
    }
    auto* scan = static_cast<RampScanDesc*>(PgCall([] { return palloc0(sizeof(RampScanDesc)); }));
    scan->base.rs_rd = rel;
    scan->base.rs_snapshot = snapshot;
    scan->base.rs_nkeys = 0;
    scan->base.rs_key = nullptr;
    scan->base.rs_flags = flags;
    scan->base.rs_parallel = pscan;
    scan->state = OwnInCurrentContext(std::move(state));
    return reinterpret_cast<TableScanDesc>(scan);
  });
  // pg_stat_user_tables.seq_scan, as heap counts it (initscan: at the start and every rescan).
  if (flags & SO_TYPE_SEQSCAN) pgstat_count_heap_scan(rel);
  return result;
}

void ScanEnd(TableScanDesc scan) {
  auto* s = reinterpret_cast<RampScanDesc*>(scan);
  if (s->state != nullptr) s->state->Destroy();
  if (scan->rs_flags & SO_TEMP_SNAPSHOT) UnregisterSnapshot(scan->rs_snapshot);
  pfree(scan);
}

void ScanRescan(TableScanDesc scan, struct ScanKeyData* key, bool set_params, bool allow_strat,
                bool allow_sync, bool allow_pagemode) {
  Boundary([&] {
    TableScan& s = StateOf(scan);
    s.Restart();
    s.vis = VisibilityOf(scan->rs_snapshot);
  });
  if (scan->rs_flags & SO_TYPE_SEQSCAN) pgstat_count_heap_scan(scan->rs_rd);
  auto* r = reinterpret_cast<RampScanDesc*>(scan);
  r->sample_started = false;
}

namespace {

// The common case of a sequential scan, outside any boundary: the next remote row of the
// batch in hand, whose tuple stays where it is (a page scan's), stored without a copy, when
// the transaction has no write of that row to overlay. It does what TableScan::Next and
// ScanGetNextSlot do for such a row; nothing here throws or ereports. Anything else (the
// next batch, the transaction's own writes, rows kept for a scrollable cursor, a tuple to
// copy or to report as corrupt) is left to the full path. False: nothing was consumed.
bool NextStableRow(RampScanDesc* r, TupleTableSlot* slot) noexcept {
  if (r->state == nullptr || r->state->object == nullptr) return false;
  TableScan& s = *r->state->object;
  // remote_done: the replay of a rescan cache leaves rows at the cache and pos at 0 when it
  // ends; what follows (own inserts) is the full path's.
  if (s.keep_rows || s.remote_done || s.pos >= s.rows->size()) return false;
  const RowView& row = (*s.rows)[s.pos];
  if (!row.stable) return false;
  const XactState* x = XactIfAny();
  if (x != nullptr && x->writes.Find(s.ks.id, ramp::EntryKey{0, row.rowid}) != nullptr) {
    return false;
  }
  if (!TryStoreScannedRow(slot, s.rel, row.rowid, row.value)) return false;
  s.pos++;
  MarkCommittedVersion(slot, row.ts.time, row.ts.client);
  return true;
}

}  // namespace

bool ScanGetNextSlot(TableScanDesc scan, ScanDirection direction, TupleTableSlot* slot) {
  if (direction != BackwardScanDirection && !guc::debug_scan_full_path &&
      NextStableRow(reinterpret_cast<RampScanDesc*>(scan), slot)) {
    pgstat_count_heap_getnext(scan->rs_rd);  // seq_tup_read, as below
    return true;
  }
  const bool found = Boundary([&] {
    TableScan& s = StateOf(scan);
    if (s.keep_rows) {
      if (!s.Step(direction != BackwardScanDirection)) return false;
      const TableScan::KeptRow& row = s.kept[s.kept_pos];
      StoreRow(slot, s.rel, row.rowid, row.value);
      MarkWriter(slot, row.writer);
      return true;
    }
    if (direction == BackwardScanDirection) {
      throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "ramp tables cannot be scanned backward",
                     "Only scans of scrollable cursors can go backward.");
    }
    uint64_t rowid = 0;
    std::string_view value;
    bool stable = false;
    TableScan::Writer writer;
    if (!s.Next(&rowid, &value, &stable, &writer)) return false;
    if (stable) {
      StoreScannedRow(slot, s.rel, rowid, value);
    } else {
      StoreRow(slot, s.rel, rowid, value);
    }
    MarkWriter(slot, writer);
    return true;
  });
  if (!found) {
    ExecClearTuple(slot);
    return false;
  }
  // pg_stat_user_tables.seq_tup_read (heap counts every row its scans hand out).
  pgstat_count_heap_getnext(scan->rs_rd);
  return true;
}

Size ParallelScanEstimate(Relation rel) {
  return sizeof(ParallelScan);
}

Size ParallelScanInitialize(Relation rel, ParallelTableScanDesc pscan) {
  auto* shared = reinterpret_cast<ParallelScan*>(pscan);
  ramp::Timestamp snapshot;
  bool pages = false;
  const uint64 nblocks = Boundary([&] {
    ramp::KeyspaceRef ks = RelationKeyspace(rel);
    const XactState* x = XactIfAny();
    if (x != nullptr && x->writes.HasWritesTo(ks.id)) {
      throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                     std::string("cannot scan ramp table \"") + RelationGetRelationName(rel) +
                         "\" in parallel after writing to it in the same transaction",
                     "Parallel workers cannot see the transaction's uncommitted ramp writes.",
                     "SET max_parallel_workers_per_gather = 0 for this transaction.");
    }
    if (ks.fresh) return uint64_t{0};
    const uint64_t blocks = BlocksBelow(HighWater(ks));
    if (SequentialScanReadsPages(blocks)) {
      // The statement's snapshot (each participant's scan closes it at every partition), or
      // one drawn and closed here when the statement has none.
      Session& session = Session::Get();
      session.Define(ks);
      snapshot = session.reads().snapshot();
      if (snapshot.zero()) {
        session.Check(session.client().OpenScanSnapshot(ks.id, &snapshot),
                      "opening a parallel scan of a ramp table");
      }
      pages = true;
    }
    return blocks;
  });
  shared->base.phs_relid = RelationGetRelid(rel);
  shared->base.phs_syncscan = false;
  shared->nblocks = nblocks;
  pg_atomic_init_u64(&shared->next_block, 0);
  shared->pages = pages;
  shared->snapshot_time = snapshot.time;
  shared->snapshot_client = snapshot.client;
  pg_atomic_init_u32(&shared->next_partition, 0);
  return sizeof(ParallelScan);
}

void ParallelScanReinitialize(Relation rel, ParallelTableScanDesc pscan) {
  auto* shared = reinterpret_cast<ParallelScan*>(pscan);
  pg_atomic_write_u64(&shared->next_block, 0);
  pg_atomic_write_u32(&shared->next_partition, 0);
}

bool ScanBitmapNextBlock(TableScanDesc scan, struct TBMIterateResult* tbmres) {
  return Boundary([&] {
    TableScan& s = StateOf(scan);
    std::vector<uint64_t> rowids;
    if (tbmres->ntuples >= 0) {
      for (int i = 0; i < tbmres->ntuples; i++) {
        uint64_t rowid = 0;
        if (RowIdOf(tbmres->blockno, tbmres->offsets[i], &rowid)) rowids.push_back(rowid);
      }
    } else {
      rowids = BlockRowIds(tbmres->blockno);  // lossy page: every row of the block
    }
    s.LoadBlock(tbmres->blockno, rowids);
    return !s.block.rows.empty();
  });
}

bool ScanBitmapNextTuple(TableScanDesc scan, struct TBMIterateResult* tbmres,
                         TupleTableSlot* slot) {
  const bool found = Boundary([&] { return StoreNextOfBlock(StateOf(scan), slot); });
  if (!found) ExecClearTuple(slot);
  return found;
}

namespace {

// The rows ANALYZE asks for. Its sample needs 300 x statistics target rows; it reads that many
// blocks, and all of a block's rows (heap's pages hold ~60 rows, ours 256 row ids). A table
// with fewer row-id blocks than that was read whole, by row-id probes: 7x heap's time. Here
// each block gives a random share of its row ids, large enough for twice the sample, and
// ScanAnalyzeNextTuple counts each row it returns as 1/share live rows, so ANALYZE's
// estimate of the table's rows stays unbiased. When ANALYZE visits every block in order (fewer
// blocks than it needs rows), the ids of several blocks go in one request.
constexpr size_t kAnalyzeIdsPerRequest = 8192;
// A page scan reads every row; probes only the share drawn. Measured (pgbench_accounts,
// default target: 60 000 ids drawn): 200 000 rows, share 0.3, pages 48-64 ms against probes
// 110-118 ms; 1 000 000 rows, share 0.06, pages 114-122 ms against 160-165 ms. A row costs
// the page scan a tenth to a twentieth of what a probed id costs: below this share, probes.
constexpr double kAnalyzePagesMinShare = 0.05;

int AnalyzeTargetRows(Relation rel) {
  int target = default_statistics_target;
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; i++) {
    const Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    target = std::max(target, att->attstattarget < 0 ? default_statistics_target
                                                     : static_cast<int>(att->attstattarget));
  }
  return 300 * std::max(target, 1);
}

void AnalyzeSampleIds(uint64_t block, double fraction, std::vector<uint64_t>* ids) {
  for (uint64_t i = 0; i < kRowsPerBlock; i++) {
    if (fraction >= 1 || pg_prng_double(&pg_global_prng_state) < fraction) {
      ids->push_back(block * kRowsPerBlock + i);
    }
  }
}

// ANALYZE of a table whose every block it visits (analyze_lookahead) and which a sequential
// scan reads by pages: one scan as a sequential scan makes it (pages, the transaction's own
// writes overlaid), keeping each row with the probability the probes would have drawn its
// id with. Probing 30 % of a 200 000-row table's ids cost 2.5x a page scan of all of it.
// The rows kept are handed out block by block, ascending row id, as AnalyzeLoadBlock's
// probes return them. Ids whose latest version is a deletion are not seen (dead rows: 0).
void AnalyzeSampleByPages(TableScan& s) {
  FetchedRows& out = s.analyze_ahead;
  out.rows.clear();
  out.dead = 0;
  const uint64_t end = s.Blocks() * kRowsPerBlock;  // ANALYZE asks for no block beyond
  uint64_t rowid = 0;
  std::string_view value;
  bool stable = false;
  TableScan::Writer writer;
  for (uint64_t n = 1; s.Next(&rowid, &value, &stable, &writer); n++) {
    if (n % 4096 == 0) PgCall([] { CHECK_FOR_INTERRUPTS(); });
    if (rowid >= end || pg_prng_double(&pg_global_prng_state) >= s.analyze_fraction) continue;
    RowVersion& row = out.rows.emplace_back();
    row.rowid = rowid;
    row.value.assign(value);
    row.own = writer.own;
    row.own_cid = writer.cid;
    row.ts = writer.ts;
  }
  // A page scan returns rows partition by partition.
  std::sort(out.rows.begin(), out.rows.end(),
            [](const RowVersion& a, const RowVersion& b) { return a.rowid < b.rowid; });
  s.source.reset();  // its pages and connections
  s.batch.clear();
  s.analyze_ahead_pos = 0;
  s.analyze_ahead_first = 0;
  s.analyze_ahead_end = s.Blocks();
}

void AnalyzeLoadBlock(TableScan& s, uint32_t blockno) {
  if (s.analyze_fraction == 0) {
    const double target = AnalyzeTargetRows(s.rel);
    const double ids = static_cast<double>(std::max<uint64_t>(s.Blocks(), 1)) * kRowsPerBlock;
    s.analyze_fraction = std::min(1.0, 2 * target / ids);
    s.analyze_lookahead = static_cast<double>(s.Blocks()) <= target;
    if (s.analyze_lookahead && s.analyze_fraction < 1 &&
        s.analyze_fraction >= kAnalyzePagesMinShare && !s.ks.fresh &&
        SequentialScanReadsPages(s.Blocks())) {
      AnalyzeSampleByPages(s);
    }
  }
  s.block_number = blockno;
  s.block_pos = 0;
  s.block.rows.clear();
  s.block.dead = 0;
  if (blockno < s.analyze_ahead_first || blockno >= s.analyze_ahead_end) {
    std::vector<uint64_t> ids;
    uint64_t end = blockno;
    do {
      AnalyzeSampleIds(end++, s.analyze_fraction, &ids);
    } while (s.analyze_lookahead && end < s.Blocks() && ids.size() < kAnalyzeIdsPerRequest);
    FetchRows(s.ks, s.vis, ids, &s.analyze_ahead);
    s.analyze_ahead_pos = 0;
    s.analyze_ahead_first = blockno;
    s.analyze_ahead_end = end;
    s.block.dead = s.analyze_ahead.dead;  // counted once, with the first block
  }
  const std::vector<RowVersion>& rows = s.analyze_ahead.rows;
  size_t& pos = s.analyze_ahead_pos;
  while (pos < rows.size() && rows[pos].rowid / kRowsPerBlock < blockno) pos++;
  while (pos < rows.size() && rows[pos].rowid / kRowsPerBlock == blockno) {
    s.block.rows.push_back(std::move(s.analyze_ahead.rows[pos++]));
  }
}

}  // namespace

bool ScanAnalyzeNextBlock(TableScanDesc scan, BlockNumber blockno, BufferAccessStrategy bstrategy) {
  return Boundary([&] {
    AnalyzeLoadBlock(StateOf(scan), blockno);
    return true;
  });
}

bool ScanAnalyzeNextTuple(TableScanDesc scan, TransactionId OldestXmin, double* liverows,
                          double* deadrows, TupleTableSlot* slot) {
  const bool found = Boundary([&] {
    TableScan& s = StateOf(scan);
    // Each row read stands for 1/fraction rows of the block (AnalyzeLoadBlock).
    const double weight = s.analyze_fraction > 0 ? 1 / s.analyze_fraction : 1;
    if (StoreNextOfBlock(s, slot)) {
      *liverows += weight;
      return true;
    }
    *deadrows += static_cast<double>(s.block.dead) * weight;
    s.block.dead = 0;
    return false;
  });
  if (!found) ExecClearTuple(slot);
  return found;
}

// TABLESAMPLE: blocks are row-id blocks below the high-water mark; the sampling method picks
// blocks (or we walk them in order) and offsets 1..256 within them.
bool ScanSampleNextBlock(TableScanDesc scan, struct SampleScanState* scanstate) {
  auto* r = reinterpret_cast<RampScanDesc*>(scan);
  TsmRoutine* tsm = scanstate->tsmroutine;
  const uint64_t nblocks_total = Boundary([&] { return StateOf(scan).Blocks(); });
  const BlockNumber nblocks =
      static_cast<BlockNumber>(std::min<uint64_t>(nblocks_total, MaxBlockNumber));
  BlockNumber blockno;
  if (tsm->NextSampleBlock != nullptr) {
    blockno = tsm->NextSampleBlock(scanstate, nblocks);
    if (!BlockNumberIsValid(blockno)) return false;
  } else {
    blockno = r->sample_started ? r->sample_block + 1 : 0;
    if (blockno >= nblocks) return false;
  }
  r->sample_started = true;
  r->sample_block = blockno;
  Boundary([&] { StateOf(scan).LoadBlock(blockno, BlockRowIds(blockno)); });
  return true;
}

bool ScanSampleNextTuple(TableScanDesc scan, struct SampleScanState* scanstate,
                         TupleTableSlot* slot) {
  auto* r = reinterpret_cast<RampScanDesc*>(scan);
  TsmRoutine* tsm = scanstate->tsmroutine;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    const OffsetNumber offset =
        tsm->NextSampleTuple(scanstate, r->sample_block, static_cast<OffsetNumber>(kRowsPerBlock));
    if (!OffsetNumberIsValid(offset)) {
      ExecClearTuple(slot);
      return false;
    }
    const bool stored = Boundary([&] {
      TableScan& s = StateOf(scan);
      uint64_t rowid = 0;
      if (!RowIdOf(r->sample_block, offset, &rowid)) return false;
      auto it = std::lower_bound(s.block.rows.begin(), s.block.rows.end(), rowid,
                                 [](const RowVersion& row, uint64_t id) { return row.rowid < id; });
      if (it == s.block.rows.end() || it->rowid != rowid) return false;
      StoreVersion(slot, s.rel, *it);
      return true;
    });
    if (stored) return true;
  }
}

// As heap's: a TID of a block below the table's end (here: below the row-id high-water mark,
// which covers the transaction's own inserts); currtid2() and TID scans check with it.
bool TupleTidValid(TableScanDesc scan, ItemPointer tid) {
  uint64_t rowid = 0;
  if (!RowIdOfTid(tid, &rowid)) return false;
  return Boundary([&] {
    TableScan& s = StateOf(scan);
    // A table created by this transaction holds only its own rows, which a scan reads from
    // the transaction (Blocks() is 0 for it); their ids come from the same sequence, whose
    // high-water mark covers them (WHERE CURRENT OF on such a table checks its TID here).
    // This backend allocated every id of such a table and noted the mark then: no read.
    uint64_t hw = 0;
    if (s.ks.fresh && !CachedHighWater(s.ks.id, std::chrono::hours(24), &hw)) hw = HighWater(s.ks);
    const uint64_t blocks = s.ks.fresh ? BlocksBelow(hw) : s.Blocks();
    return rowid / kRowsPerBlock < blocks;
  });
}

void TupleGetLatestTid(TableScanDesc scan, ItemPointer tid) {
  // Rows are never updated in place and UPDATE makes a new row id without a forward link:
  // the given TID is the latest we know.
}

}  // namespace pgramp::tam
