// What the partitions and the log writer (the group commit) exchange: a partition that
// appended to its log or retired a segment tells its sink it is dirty; the writer later
// takes the pages to write (copies made under the partition's lock) and the segments
// whose files may go once those pages are durable. Recovery hands a partition the
// segments read back from its files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ramp/types.h"

namespace ramp::store {

class Partition;

// A page (or run of pages) as it goes to disk: the arena copy with every record's state
// byte zeroed (the valid bit is rebuilt by recovery and changes after publication) and the
// page checksum set over [8, used).
struct DirtyPage {
  uint32_t segment = 0;  // first page of the segment (names the file)
  uint32_t page_no = 0;
  uint32_t from = 0;  // bytes [32, from) are unchanged since the page was last taken
  uint32_t used = 0;  // bytes in use (header included)
  std::string bytes;  // run_pages * 8 KiB
};

struct DirtyPages {
  PartitionId partition;
  std::vector<DirtyPage> pages;
  std::vector<uint32_t> retired_segments;  // remove their files once `pages` are durable
  bool dropped = false;                    // the partition was dropped: remove every file
};

// Pages of one segment read back from its file, checked, torn tail cut.
struct LoadedSegment {
  uint32_t first_page = 0;
  std::string bytes;  // whole pages
};

class LogSink {
 public:
  virtual ~LogSink() = default;
  // Called under the partition's lock (any mode) whenever it has something to write.
  virtual void MarkDirty(std::shared_ptr<Partition> partition) = 0;
};

}  // namespace ramp::store
