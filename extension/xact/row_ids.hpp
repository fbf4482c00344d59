// Row ids of ramp tables: allocated in ranges from a per-table sequence key on the cluster,
// and the sequence's high water, which bounds every row id of the table (scans, estimates).
//
// May throw (RampError, SqlError): call inside a Boundary.
#pragma once

#include <chrono>
#include <cstdint>

#include "ramp/types.h"
#include "ramp/write_batch.h"

namespace pgramp {

// A fresh row id of the table (cluster-wide unique: ranges come from a sequence key updated
// with a conflict-checked PUT, so two PostgreSQL servers never hand out the same id).
uint64_t NextRowId(const ramp::KeyspaceRef& ks);
// The next row id the sequence would hand out (at the statement's snapshot): every row id of
// the table is below it.
uint64_t HighWater(const ramp::KeyspaceRef& ks);
// HighWater from a cache younger than max_age (no network); false when not cached.
bool CachedHighWater(ramp::KeyspaceId ks, std::chrono::milliseconds max_age, uint64_t* hw);

}  // namespace pgramp
