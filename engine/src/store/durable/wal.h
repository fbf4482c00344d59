// The server's write-ahead log: what makes the group commit cost one sync per batch
// whatever the number of partitions it touched. Each batch writes the changed bytes of
// every dirty page (the page header and the records appended since the last batch) to this
// one preallocated file and syncs it; the partitions' segment files get the full pages too,
// but are synced only at checkpoints, after which the log starts over (a new generation in
// its header makes older entries stale). Recovery lays the entries of the current
// generation over the segment files.
//
// File layout (little endian):
//   [0, 4096)   header: magic "RWAL" u32, version u32, generation u64, crc32c of [0,16) u32
//   [4096, ...) entries, back to back:
//     magic "RWE1" u32 | crc32c of [8, 44 + len) u32 | generation u64 | keyspace u64 |
//     bucket u32 | segment u32 | file offset u32 | zero u32 | len u32 | bytes
//   A zero magic (preallocated space) or a bad checksum ends the log (a torn last batch).
//   An entry of another generation ends it too: after a checkpoint the log is written
//   again from its start, over the entries of earlier generations, which are never replayed.
//
// Appends go through a second descriptor opened O_DIRECT | O_DSYNC where the file system
// allows it (Env::OpenSyncWrites): each batch is one aligned device write with its cache
// flush, rewriting the log's last partial block (kept in memory) and zero-padding the rest
// of the block. Where it is refused, a buffered write and an fdatasync.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"
#include "store/durable/env.h"

namespace ramp::store {

// Bytes to put at `offset` of a segment file of a partition.
struct WalPatch {
  PartitionId partition;
  uint32_t segment = 0;
  uint32_t offset = 0;
  std::string bytes;
};

class Wal {
 public:
  static constexpr uint64_t kHeaderBytes = 4096;
  static constexpr uint64_t kEntryHeaderBytes = 44;

  // Opens (creating and preallocating when absent) the log and reads the entries of its
  // current generation, in order.
  static Status Open(Env* env, const std::string& path, uint64_t bytes, std::unique_ptr<Wal>* out,
                     std::vector<WalPatch>* entries);

  // Bytes left before a checkpoint is needed.
  uint64_t room() const { return bytes_ - offset_; }
  // Appends entries (buffered into one write) and syncs.
  Status Append(const std::vector<WalPatch>& entries);
  // Starts a new generation: the entries written so far are no longer replayed. The caller
  // made their bytes durable in the segment files first.
  Status Reset();
  uint64_t used() const { return offset_ - kHeaderBytes; }
  uint64_t sync_us() const { return sync_us_; }               // time spent in fdatasync by Append
  bool sync_writes() const { return sync_file_ != nullptr; }  // O_DIRECT | O_DSYNC appends

 private:
  Wal(std::unique_ptr<File> file, uint64_t bytes) : file_(std::move(file)), bytes_(bytes) {}
  Status WriteHeader();
  void OpenSyncWrites(Env* env, const std::string& path);
  Status AppendSyncWrite();

  std::unique_ptr<File> file_;
  const uint64_t bytes_;
  uint64_t generation_ = 1;
  uint64_t offset_ = kHeaderBytes;
  std::string buffer_;
  uint64_t sync_us_ = 0;
  // O_DIRECT | O_DSYNC appends: the descriptor, the bytes of the log's last block before
  // offset_ (rewritten with the next batch), and an aligned staging buffer.
  std::unique_ptr<File> sync_file_;
  std::string tail_;
  struct FreeAligned {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeAligned> staging_;
  size_t staging_bytes_ = 0;
};

}  // namespace ramp::store
