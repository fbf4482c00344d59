// Sizes for the planner, ANALYZE and RelationGetNumberOfBlocks().
//
// RelationGetNumberOfBlocks() (ANALYZE's block sample, TABLESAMPLE, TID checks) counts row-id
// blocks (256 row ids each) below the high-water mark of the table's row-id sequence. The
// planner's estimate comes from the cluster itself: rows = keys of the table's keyspace,
// pages = its bytes / BLCKSZ (Client::Partitions, cached for a few seconds), so row counts
// are right after a load without ANALYZE. It never waits on an unreachable cluster: it falls
// back to pg_class (relpages/reltuples of the last ANALYZE or VACUUM).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "rows/keys.hpp"
#include "xact/row_ids.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "tableam/tableam.hpp"

namespace pgramp::tam {

namespace {

// How old the cluster's figures (keys and bytes per keyspace, row-id high-water marks) may
// be when a plan uses them.
constexpr auto kSizeCacheAge = std::chrono::milliseconds(5000);
// Bytes counted per row this transaction inserted and has not committed yet.
constexpr double kOwnRowBytes = 100;

uint64_t BlocksOf(uint64_t high_water) {
  return (high_water + kRowsPerBlock - 1) / kRowsPerBlock;
}

// Rows inserted by this transaction (fresh keyspaces have nothing else).
uint64_t OwnInsertedRows(ramp::KeyspaceId ks) {
  const XactState* x = XactIfAny();
  if (x == nullptr) return 0;
  const ramp::WriteBatch::Keyspace* own = x->writes.Of(ks);
  if (own == nullptr) return 0;
  uint64_t n = 0;
  for (const auto& [key, w] : own->entries()) {
    if (w.inserted && !w.deleted) n++;
  }
  return n;
}

}  // namespace

uint64 RelationSize(Relation rel, ForkNumber forkNumber) {
  if (forkNumber != MAIN_FORKNUM) return 0;
  return Boundary([&] {
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    const uint64_t hw = ks.fresh ? OwnInsertedRows(ks.id) : HighWater(ks);
    return static_cast<uint64>(BlocksOf(hw) * BLCKSZ);
  });
}

bool RelationNeedsToastTable(Relation rel) {
  // Values are detoasted into the row (the cluster limits row size instead).
  return false;
}

void RelationEstimateSize(Relation rel, int32* attr_widths, BlockNumber* pages, double* tuples,
                          double* allvisfrac) {
  struct Estimate {
    bool known;
    double tuples;
    double bytes;
  };
  const Estimate e = Boundary([&] {
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    const double own = static_cast<double>(OwnInsertedRows(ks.id));
    if (ks.fresh) return Estimate{true, own, own * kOwnRowBytes};
    Session& session = Session::Get();
    if (session.RecentlyFailed()) return Estimate{false, 0, 0};
    try {
      const Session::KeyspaceSize size = session.SizeOf(ks.id, kSizeCacheAge);
      // Row-id blocks (RelationGetNumberOfBlocks, the planner hook's bitmap check) come from
      // the row-id sequence: cache it with the same age.
      uint64_t hw = 0;
      if (!CachedHighWater(ks.id, kSizeCacheAge, &hw)) HighWater(ks);
      // Every key but the row-id sequence is a row (or, for a few seconds, a deleted one).
      const double rows = size.keys > 0 ? static_cast<double>(size.keys - 1) : 0;
      return Estimate{true, rows + own, static_cast<double>(size.bytes) + own * kOwnRowBytes};
    } catch (const RampError& error) {
      // Unreachable or slow cluster: plan from pg_class; the query itself reports the error.
      if (error.status().Is(ramp::Status::Code::kCancelled)) throw;
      return Estimate{false, 0, 0};
    } catch (const SqlError&) {
      return Estimate{false, 0, 0};  // e.g. ramp.nodes not set: same
    }
  });
  double npages;
  double ntuples;
  if (e.known) {
    // The cluster's own figures: right after a load, without ANALYZE.
    ntuples = e.tuples;
    npages = std::ceil(e.bytes / BLCKSZ);
    if (ntuples > 0 && npages < 1) npages = 1;
  } else if (rel->rd_rel->relpages > 0 && rel->rd_rel->reltuples >= 0) {
    npages = rel->rd_rel->relpages;  // the last ANALYZE or VACUUM
    ntuples = rel->rd_rel->reltuples;
  } else {
    npages = 10;  // heap's guess for a table never analyzed
    ntuples = npages * kRowsPerBlock;
  }
  // Heap's guess for a table never vacuumed or analyzed that looks nearly empty
  // (table_block_relation_estimate_size): plan for 10 pages of rows of its columns' widths. A
  // table empty at plan time is often filled before a cached plan runs again, and heap users
  // get the same plans for such tables (a TID scan, not a sequential one, for ctid = ...).
  if (npages < 10 && rel->rd_rel->relpages == 0 && !rel->rd_rel->relhassubclass) {
    npages = 10;
    const double tuple_width =
        get_rel_data_width(rel, attr_widths) + MAXALIGN(SizeofHeapTupleHeader) + sizeof(ItemIdData);
    // Whole rows per page, as heap's integer division.
    const double density = std::floor((BLCKSZ - SizeOfPageHeaderData) / tuple_width);
    ntuples = std::max(1.0, density) * npages;
  }
  *pages = static_cast<BlockNumber>(std::min(npages, static_cast<double>(MaxBlockNumber)));
  *tuples = std::rint(ntuples);
  *allvisfrac = 0;
}

uint64_t CachedRowIdBlocks(Relation rel) {
  return Boundary([&] {
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    uint64_t hw = 0;
    if (ks.fresh)
      hw = OwnInsertedRows(ks.id);
    else if (!CachedHighWater(ks.id, std::chrono::hours(1), &hw))
      return uint64_t{0};
    return static_cast<uint64_t>(BlocksOf(hw));
  });
}

}  // namespace pgramp::tam
