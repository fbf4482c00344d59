// RowSource: how the table AM reads a table's contents (sequential, parallel and analyze
// scans, VACUUM). A small internal interface so that the phase-1 implementation (row-id
// probing over client.h) can be replaced by the engine's snapshot scan of a keyspace,
// partition by partition through the remote-I/O path (see NOTES.md), without touching the
// table AM.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/types.h"

#include "ramp/write_batch.h"

namespace pgramp::tam {

// One version of a row as the cluster returned it.
struct RowVersion {
  uint64_t rowid = 0;
  ramp::Timestamp ts;
  bool live = true;  // false: a deletion (only when the source was asked for them)
  std::string value;
  bool own = false;      // this transaction's buffered write (ts is zero)
  uint32_t own_cid = 0;  // its command id
};

// A live row as a view: valid until the next call of the RowSource that returned it.
struct RowView {
  uint64_t rowid = 0;
  ramp::Timestamp ts;
  std::string_view value;
  // The value's bytes after the format byte (the MinimalTuple) are 8-byte aligned and stay
  // where they are until the next call: a slot may point at them instead of a copy.
  bool stable = false;
};

// Hands out ranges of row-id blocks [first, end) (256 row ids per block). The serial one
// walks a fixed range; the parallel one (scan.cpp) draws from a counter in shared memory.
class BlockRanges {
 public:
  virtual ~BlockRanges() = default;
  virtual bool Next(uint64_t* first, uint64_t* end) = 0;
};

std::unique_ptr<BlockRanges> SerialBlockRanges(uint64_t first, uint64_t end, uint64_t chunk);

class RowSource {
 public:
  virtual ~RowSource() = default;
  // Replaces *out with the next batch of versions, in ascending row-id order within the
  // batch (except the partition scan's: see MakeScannerRowSource); false when the source is
  // exhausted. A batch may be empty. Reads of one batch are
  // read-atomic.
  virtual bool NextBatch(std::vector<RowVersion>* out) = 0;
  // The same batch as views of the live rows, valid until the next call of NextViews or
  // NextBatch. By default the rows of NextBatch, held by the source.
  virtual bool NextViews(std::vector<RowView>* out);

 private:
  std::vector<RowVersion> held_;
};

// Phase 1: every row id of each block range is read with ramp::ReadSession::ReadRows
// (kProbeKeysPerRequest keys per request). Correct for any table, efficient for dense row
// ids; sparse tables (many deletions) pay for the holes. Latest committed versions; own
// buffered writes are overlaid by the caller. Remembers each version read (ReadSession).
std::unique_ptr<RowSource> MakeProbeRowSource(const ramp::KeyspaceRef& ks,
                                              std::unique_ptr<BlockRanges> ranges,
                                              bool include_deleted);

inline constexpr size_t kProbeKeysPerRequest = 8192;

// The engine's read-atomic partition scan (Client::OpenScan: pages of every partition of the
// keyspace through remote page I/O, one snapshot for the whole scan). Live rows only, in no
// particular order (sequential scans need none); NextViews allocates
// nothing per row (views into the scanner's memory, values aligned); does not remember
// the versions read (writes re-read them). Pays for live rows, not for the holes of a row-id range,
// but opens its own connections and buffers: the probe source stays cheaper for small tables.
std::unique_ptr<RowSource> MakeScannerRowSource(const ramp::KeyspaceRef& ks);
// One participant of a parallel partition scan: reads the partitions take_partition hands
// it, at a snapshot drawn by Client::OpenScanSnapshot (ramp::ScanOptions).
std::unique_ptr<RowSource> MakeScannerRowSource(const ramp::KeyspaceRef& ks,
                                                const ramp::Timestamp& snapshot,
                                                std::function<bool(uint32_t*)> take_partition);

}  // namespace pgramp::tam
