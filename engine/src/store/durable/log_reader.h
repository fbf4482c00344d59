// Reads a partition's log back from its segment files for recovery, checking every page
// (magic, identity, page number, page checksum) and every record (its own checksum). The
// tail of the newest file may be torn by a crash in the middle of a write: there the valid
// prefix is kept and the rest cut (also on disk). Damage anywhere else is Corruption, with
// the file and page named: it is never skipped silently.
#pragma once

#include <string>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"
#include "store/durable/env.h"
#include "store/durable/log_sink.h"
#include "store/durable/wal.h"

namespace ramp::store {

struct ReadLogStats {
  uint64_t bytes = 0;      // bytes of pages kept
  uint64_t torn_cut = 0;   // bytes cut from a torn tail
  uint64_t wal_bytes = 0;  // bytes laid over the segment files from the write-ahead log
};

// patches: the write-ahead log's entries of this partition, in log order; they are laid
// over the segment files (creating missing ones) and written back to them (synced) before
// the pages are checked.
Status ReadPartitionLog(Env* env, const std::string& dir, const PartitionId& id,
                        const std::vector<WalPatch>& patches, std::vector<LoadedSegment>* out,
                        ReadLogStats* stats);

}  // namespace ramp::store
