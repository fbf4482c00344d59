// The partition-scan RowSource: a sequential scan of a ramp table reads the pages of each of
// its keyspace's partitions through the engine's remote page I/O path (Client::OpenScan)
// instead of probing every row id below the high-water mark. Read-atomic by itself (one
// snapshot for the whole scan), and it pays for live rows only: holes left by deletions cost
// nothing. Versions read are not remembered per row (that map cost a third of a scan's
// CPU): an UPDATE or DELETE driven by this scan reads the row's version again before it
// writes (tableam/modify.cpp), and a version that changed since makes it fail with 40001.
#include <algorithm>
#include <utility>

#include "ramp/client.h"

#include "rows/keys.hpp"
#include "tableam/row_source.hpp"
#include "xact/session.hpp"

namespace pgramp::tam {

namespace {

// Rows handed out per batch: the executor consumes them one by one; a batch is sorted by
// row id (the RowSource contract) and bounds the memory a scan holds at the extension level.
constexpr size_t kRowsPerBatch = 4096;

class ScannerRowSource : public RowSource {
 public:
  explicit ScannerRowSource(const ramp::KeyspaceRef& ks) : ks_(ks) {}

  bool NextBatch(std::vector<RowVersion>* out) override {
    out->clear();
    if (done_) return false;
    Session& session = Session::Get();
    if (scanner_ == nullptr) {
      session.Define(ks_);
      session.Check(session.client().OpenScan(ks_.id, ramp::ScanOptions(), &scanner_),
                    "opening a scan of a ramp table");
    }
    ramp::ScanRow row;
    while (out->size() < kRowsPerBatch) {
      bool end = false;
      session.Check(scanner_->Next(&row, &end), "scanning a ramp table");
      if (end) {
        done_ = true;
        scanner_.reset();
        break;
      }
      uint64_t rowid = 0;
      if (!DecodeRowKey(row.key, &rowid)) continue;  // the row-id sequence, not a row
      out->push_back(RowVersion{rowid, row.ts, true, std::move(row.value)});
    }
    std::sort(out->begin(), out->end(),
              [](const RowVersion& a, const RowVersion& b) { return a.rowid < b.rowid; });
    return !out->empty() || !done_;
  }

 private:
  ramp::KeyspaceRef ks_;
  std::unique_ptr<ramp::Scanner> scanner_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<RowSource> MakeScannerRowSource(const ramp::KeyspaceRef& ks) {
  return std::make_unique<ScannerRowSource>(ks);
}

}  // namespace pgramp::tam
