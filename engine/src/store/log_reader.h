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
#include "store/env.h"
#include "store/log_sink.h"

namespace ramp::store {

struct ReadLogStats {
  uint64_t bytes = 0;        // bytes of pages kept
  uint64_t torn_cut = 0;     // bytes cut from a torn tail
};

Status ReadPartitionLog(Env* env, const std::string& dir, const PartitionId& id,
                        std::vector<LoadedSegment>* out, ReadLogStats* stats);

}  // namespace ramp::store
