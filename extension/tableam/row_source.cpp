#include "tableam/row_source.hpp"

#include <algorithm>
#include <utility>

#include "ramp/client.h"
#include "ramp/read_session.h"

#include "rows/keys.hpp"
#include "xact/session.hpp"

namespace pgramp::tam {

namespace {

class SerialRanges : public BlockRanges {
 public:
  SerialRanges(uint64_t first, uint64_t end, uint64_t chunk)
      : next_(first), end_(end), chunk_(std::max<uint64_t>(chunk, 1)) {}
  bool Next(uint64_t* first, uint64_t* end) override {
    if (next_ >= end_) return false;
    *first = next_;
    *end = std::min(next_ + chunk_, end_);
    next_ = *end;
    return true;
  }

 private:
  uint64_t next_, end_, chunk_;
};

class ProbeRowSource : public RowSource {
 public:
  ProbeRowSource(const ramp::KeyspaceRef& ks, std::unique_ptr<BlockRanges> ranges,
                 bool include_deleted)
      : ks_(ks), ranges_(std::move(ranges)), include_deleted_(include_deleted) {}

  bool NextBatch(std::vector<RowVersion>* out) override {
    out->clear();
    if (cursor_ >= end_) {
      uint64_t first_block = 0, end_block = 0;
      if (!ranges_->Next(&first_block, &end_block)) return false;
      cursor_ = first_block * kRowsPerBlock;
      end_ = end_block * kRowsPerBlock;
    }
    const uint64_t stop = std::min<uint64_t>(end_, cursor_ + kProbeKeysPerRequest);
    Session& session = Session::Get();
    session.Define(ks_);
    rows_.clear();
    for (uint64_t rowid = cursor_; rowid < stop; rowid++) {
      rows_.push_back(ramp::RowRequest{ks_.id, rowid, {}});
    }
    results_.clear();
    // kStatement: the statement's version bounds apply across its scans too, so a statement
    // scanning two tables never sees a transaction committed in one and not yet in the other
    // (a materialized view and its base table: regress/itest/immv_frontends.sh); it fails
    // with 40001 when it would (bounded: ramp::ReadSession stops tracking huge statements).
    session.Check(session.reads().ReadRows(rows_, ramp::RowReads::kStatement, &results_),
                  "scanning a ramp table");
    for (size_t i = 0; i < results_.size() && i < rows_.size(); i++) {
      ramp::RowResult& r = results_[i];
      const uint64_t rowid = cursor_ + i;
      if (r.found) {
        out->push_back(RowVersion{rowid, r.ts, true, std::move(r.value)});
      } else if (include_deleted_ && !r.ts.zero()) {
        out->push_back(RowVersion{rowid, r.ts, false, {}});
      }
    }
    cursor_ = stop;
    return true;
  }

 private:
  ramp::KeyspaceRef ks_;
  std::unique_ptr<BlockRanges> ranges_;
  bool include_deleted_;
  uint64_t cursor_ = 0;
  uint64_t end_ = 0;
  std::vector<ramp::RowRequest> rows_;
  std::vector<ramp::RowResult> results_;
};

}  // namespace

bool RowSource::NextViews(std::vector<RowView>* out) {
  out->clear();
  const bool more = NextBatch(&held_);
  for (const RowVersion& row : held_) {
    if (row.live) out->push_back(RowView{row.rowid, row.ts, row.value, false});
  }
  return more;
}

std::unique_ptr<BlockRanges> SerialBlockRanges(uint64_t first, uint64_t end, uint64_t chunk) {
  return std::make_unique<SerialRanges>(first, end, chunk);
}

std::unique_ptr<RowSource> MakeProbeRowSource(const ramp::KeyspaceRef& ks,
                                              std::unique_ptr<BlockRanges> ranges,
                                              bool include_deleted) {
  return std::make_unique<ProbeRowSource>(ks, std::move(ranges), include_deleted);
}

}  // namespace pgramp::tam
