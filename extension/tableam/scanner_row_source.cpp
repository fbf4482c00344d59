// The partition-scan RowSource: a sequential scan of a ramp table reads the pages of each of
// its keyspace's partitions through the engine's remote page I/O path (Client::OpenScan)
// instead of probing every row id below the high-water mark. Read-atomic by itself (one
// snapshot for the whole scan), and it pays for live rows only: holes left by deletions cost
// nothing. Versions read are not remembered per row (that map cost a third of a scan's
// CPU): an UPDATE or DELETE driven by this scan reads the row's version again before it
// writes (tableam/modify.cpp), and a version that changed since makes it fail with 40001.
#include <algorithm>
#include <span>
#include <utility>

#include "ramp/client.h"

#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "tableam/row_source.hpp"
#include "xact/session.hpp"

namespace pgramp::tam {

namespace {

// Rows handed out per batch: the executor consumes them one by one. A batch is a piece of
// one partition's rows, in the scanner's order (the order of the partition's log, nearly):
// not sorted by row id, which no consumer of this source needs.
// 1024 rows of a lineitem's size stay in a core's L2 cache until the executor takes them.
constexpr size_t kRowsPerBatch = 1024;
constexpr size_t kPrefetchAhead = 16;

class ScannerRowSource : public RowSource {
 public:
  ScannerRowSource(const ramp::KeyspaceRef& ks, const ramp::Timestamp& snapshot,
                   std::function<bool(uint32_t*)> take_partition)
      : ks_(ks), snapshot_(snapshot), take_partition_(std::move(take_partition)) {}

  bool NextViews(std::vector<RowView>* out) override {
    out->clear();
    Session& session = Session::Get();
    while (pos_ >= part_.size()) {
      if (done_) return false;
      if (scanner_ == nullptr) {
        session.Define(ks_);
        ramp::ScanOptions options;
        options.value_align_skip = 1;  // [format byte][MinimalTuple]: the tuple aligned
        // The statement's snapshot: every page scan and every point read of one statement
        // read the same state (two scans drawing their own snapshots could each see a
        // different side of a commit). The scan closes it at every partition first.
        options.snapshot = snapshot_;
        if (options.snapshot.zero() && !guc::debug_scan_own_snapshots) {
          options.snapshot = session.reads().snapshot();
        }
        options.take_partition = take_partition_;
        // 512 KiB per READ_PAGES request (the servers' limit), 4 in flight on one page
        // connection per server: 6 MiB of buffers and 3 connections per backend instead of
        // 12 MiB and 6, half the requests and wake-ups. Serial scan of SF 0.1 lineitem, CPU
        // per scan (perf stat, two runs each): with 2 connections, 64 x 4 took backend
        // 70-72 ms against 76-78 for 32 x 8, rampd 39-40 ms against 43-49; one connection
        // instead of 2 left the serial scan as it was (backend 73-75 ms, rampd 39 ms) and
        // cut rampd's CPU in a scan with 2 parallel workers from 66-78 ms to 53-57 (each
        // worker opens its own reader: fewer connections and buffers to set up and fault in).
        options.batch_pages = 64;
        options.batches_in_flight = 4;
        options.connections_per_node = 1;
        session.Check(session.client().OpenScan(ks_.id, options, &scanner_),
                      "opening a scan of a ramp table");
      }
      bool end = false;
      session.Check(scanner_->NextRows(&part_, &end), "scanning a ramp table");
      pos_ = 0;
      if (end) {
        done_ = true;
        part_ = {};
        scanner_.reset();
        return false;
      }
    }
    const size_t stop = std::min(part_.size(), pos_ + kRowsPerBatch);
    for (; pos_ < stop; pos_++) {
      // The partition's rows are larger than the caches: ask for the lines of rows ahead
      // (the key's, which holds the tuple's header, and the next), so that the misses of
      // several rows overlap instead of stalling the executor one row at a time.
      if (pos_ + kPrefetchAhead < part_.size()) {
        const ramp::ScanRow& ahead = part_[pos_ + kPrefetchAhead];
        __builtin_prefetch(ahead.key.data());
        __builtin_prefetch(ahead.value.data() + 64);
      }
      const ramp::ScanRow& row = part_[pos_];
      uint64_t rowid = 0;
      if (!DecodeRowKey(row.key, &rowid)) continue;  // the row-id sequence, not a row
      out->push_back(RowView{rowid, row.ts, row.value, true});
    }
    return true;
  }

  bool NextBatch(std::vector<RowVersion>* out) override {
    out->clear();
    const bool more = NextViews(&views_);
    for (const RowView& v : views_)
      out->push_back(RowVersion{v.rowid, v.ts, true, std::string(v.value)});
    return more;
  }

 private:
  ramp::KeyspaceRef ks_;
  ramp::Timestamp snapshot_;                       // zero: the scanner draws its own
  std::function<bool(uint32_t*)> take_partition_;  // empty: every partition
  std::unique_ptr<ramp::Scanner> scanner_;
  std::span<const ramp::ScanRow> part_;  // the current partition's rows (scanner memory)
  size_t pos_ = 0;
  bool done_ = false;
  std::vector<RowView> views_;
};

}  // namespace

std::unique_ptr<RowSource> MakeScannerRowSource(const ramp::KeyspaceRef& ks) {
  return std::make_unique<ScannerRowSource>(ks, ramp::Timestamp{}, nullptr);
}

std::unique_ptr<RowSource> MakeScannerRowSource(const ramp::KeyspaceRef& ks,
                                                const ramp::Timestamp& snapshot,
                                                std::function<bool(uint32_t*)> take_partition) {
  return std::make_unique<ScannerRowSource>(ks, snapshot, std::move(take_partition));
}

}  // namespace pgramp::tam
