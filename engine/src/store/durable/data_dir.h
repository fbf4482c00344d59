// The data directory of one rampd: its identity file, checked at every start so that a
// server never replays another cluster's (or another node's) log, nor a log written in a
// format it does not read; and the layout of the partition logs inside it:
//
//   <data>/RAMP_DATA                 identity: format version, cluster id, node
//   <data>/p-<keyspace>-<bucket>/    one directory per partition
//       <first page>.seg             one file per log segment; page n of the segment at
//                                    byte offset (n - first page) * 8 KiB
#pragma once

#include <cstdint>
#include <string>

#include "ramp/status.h"
#include "ramp/types.h"
#include "store/durable/env.h"

namespace ramp::store {

// Version 1: the page and record format of common/record.h; marks carry the segments of
// the versions they decide (see log_format.h).
inline constexpr uint32_t kDataFormatVersion = 1;

struct DataDirIdentity {
  uint32_t format = kDataFormatVersion;
  uint64_t cluster = 0;  // derived from the cluster token (ClusterIdOf)
  uint32_t node = 0;
};

// A stable id for a cluster: a hash of its token (never the token itself).
uint64_t ClusterIdOf(const std::string& token);

// Creates the directory and its identity file when absent (or empty); otherwise checks that
// the identity matches `want`. Checks that the directory is writable. Errors name the
// directory and what is wrong with it.
Status OpenDataDir(Env* env, const std::string& dir, const DataDirIdentity& want);

std::string PartitionDirName(const PartitionId& id);
// Parses a PartitionDirName; false for other names.
bool ParsePartitionDirName(const std::string& name, PartitionId* out);
std::string SegmentFileName(uint32_t first_page);
bool ParseSegmentFileName(const std::string& name, uint32_t* first_page);

}  // namespace ramp::store
