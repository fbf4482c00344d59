// Partition scans (Client::OpenScan, Scanner) built on remote page I/O.
//
// Snapshot. OpenScan draws a timestamp S above every server clock it asked and sends
// SCAN_OPEN(S) to the owner of every partition of the keyspace: each raises its watermark
// to S, so no transaction at or below S can PREPARE there any more (it aborts and, through
// Commit's retry, comes back above S), and says how many transactions at or below S are
// still prepared and undecided. The scanner repeats SCAN_OPEN until none is: from then on
// the set of transactions at or below S is closed and each is decided — committed at every
// partition it wrote, or at none — and their commit marks are in pages below the page
// count the last SCAN_OPEN returned. (This replaces RAMP's round 2 for scans: instead of
// repairing a fractured read after the fact, the scan waits for the few transactions in
// their commit phase to finish; the termination protocol bounds that wait.)
//
// Per partition. The pages [0, page count) are read with the PageReader and parsed. A key is
// decided from the pages when its newest version is at or below S and carries the valid bit:
// only the current committed version of a key has it, in memory (and in the page file for
// pages the memory budget evicted: they are rewritten when evicted; pages compacted away are
// not served). Every other key is repaired by a snapshot GET at S from its server: keys
// written after S (a version above S is in the pages), keys whose newest version lost its
// valid bit (deleted, or a newer transaction's version is prepared) and keys in records that
// span pages (the parser does not reassemble them). Commit marks are not used as evidence:
// garbage collection and compaction may remove a newer version (a tombstone) while an older
// version and its mark stay, and the scan would bring a deleted key back. Pages retired by
// compaction during the scan had their live records relocated past the page count first:
// the scanner then reads the new tail as well.
#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "client/client_impl.h"
#include "common/record.h"
#include "protocol/page_messages.h"
#include "ramp/page_reader.h"

namespace ramp {

namespace {
constexpr int kMaxTailRounds = 16;
constexpr size_t kRepairBatch = 256;

// The newest version of a key seen in the pages.
struct Newest {
  Timestamp ts;
  bool valid = false;
  bool tombstone = false;
  bool above = false;  // some version is newer than the snapshot
  std::string value;
};
}  // namespace

struct Scanner::State {
  Client* client = nullptr;
  KeyspaceId keyspace = 0;
  Timestamp snapshot;
  std::vector<PartitionId> parts;
  std::vector<protocol::ScanOpenPartition> info;
  std::unique_ptr<PageReader> reader;
  std::function<void(const PartitionId&, uint32_t)> on_page;
  size_t next_part = 0;
  std::vector<ScanRow> rows;
  size_t pos = 0;
  ScanStats stats;

  Status OpenAt(std::span<const size_t> which, bool wait_pending);
  Status LoadPartition(size_t index);
  Status Repair(const PartitionId& part, const std::vector<std::string>& keys);
};

Scanner::Scanner(std::unique_ptr<State> state) : state_(std::move(state)) {}
Scanner::~Scanner() = default;
Timestamp Scanner::snapshot() const {
  return state_->snapshot;
}
ScanStats Scanner::stats() const {
  return state_->stats;
}

Status Scanner::State::OpenAt(std::span<const size_t> which, bool wait_pending) {
  Client::Impl& c = *client->impl();
  const auto deadline = c.Deadline();
  std::vector<PartitionId> ps;
  for (size_t i : which) ps.push_back(parts[i]);
  RAMP_RETURN_IF_ERROR(c.ResolveOwners(ps));
  for (;;) {
    std::map<uint32_t, std::vector<size_t>> by_node;
    for (size_t i : which) by_node[c.OwnerOf(parts[i])].push_back(i);
    uint64_t pending = 0;
    for (auto& [node, idx] : by_node) {
      protocol::ScanOpenRequest req;
      req.snapshot = snapshot;
      for (size_t i : idx) req.partitions.push_back(parts[i]);
      std::string body;
      protocol::Encode(req, &body);
      PendingCall reply;
      RAMP_RETURN_IF_ERROR(c.CallAndWait(node, c.ReadChannel(), protocol::Op::kScanOpen,
                                         static_cast<uint32_t>(idx.size()), body, &reply)
                               .Annotate("SCAN_OPEN"));
      protocol::ScanOpenReply r;
      RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &r));
      if (r.partitions.size() != idx.size()) {
        return Status::Corruption("SCAN_OPEN reply does not match its request");
      }
      for (size_t k = 0; k < idx.size(); k++) {
        info[idx[k]] = r.partitions[k];
        pending += r.partitions[k].pending;
      }
    }
    if (!wait_pending || pending == 0) return Status::OK();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Timeout("scan: " + std::to_string(pending) +
                             " transactions at or below the snapshot stayed undecided for " +
                             std::to_string(c.options.timeout_ms) + " ms");
    }
    if (c.options.wait_hook) RAMP_RETURN_IF_ERROR(c.options.wait_hook());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status Client::OpenScan(KeyspaceId keyspace, const ScanOptions& options,
                        std::unique_ptr<Scanner>* out) {
  auto st = std::make_unique<Scanner::State>();
  st->client = this;
  st->keyspace = keyspace;
  const uint32_t buckets = BucketsOf(keyspace);
  for (uint32_t b = 0; b < buckets; b++) st->parts.push_back(PartitionId{keyspace, b});
  st->info.resize(buckets);
  Impl& c = *impl_;
  RAMP_RETURN_IF_ERROR(c.ResolveOwners(st->parts));
  // Every owner's clock is observed (replies carry it), so the snapshot lies above every
  // timestamp any of them has seen committed.
  std::unordered_set<uint32_t> owners;
  for (const auto& p : st->parts) owners.insert(c.OwnerOf(p));
  for (uint32_t node : owners) {
    PendingCall reply;
    RAMP_RETURN_IF_ERROR(c.CallAndWait(node, c.ReadChannel(), protocol::Op::kClock, 0, {}, &reply));
  }
  st->snapshot = Timestamp{c.clock.Now(), 0};
  std::vector<size_t> all(buckets);
  for (size_t i = 0; i < all.size(); i++) all[i] = i;
  RAMP_RETURN_IF_ERROR(st->OpenAt(all, true));
  PageReaderOptions ro;
  ro.connections_per_node = options.connections_per_node;
  ro.batch_pages = options.batch_pages;
  ro.batches_in_flight = options.batches_in_flight;
  // Never prefer_disk: the page file copy of a resident page may carry stale valid bits,
  // and the scan trusts valid bits (pages the memory budget evicted are read from disk all
  // the same, rewritten when they were evicted).
  st->on_page = options.on_page;
  RAMP_RETURN_IF_ERROR(PageReader::Open(this, ro, &st->reader));
  out->reset(new Scanner(std::move(st)));
  return Status::OK();
}

Status Scanner::State::Repair(const PartitionId& part, const std::vector<std::string>& keys) {
  Client::Impl& c = *client->impl();
  for (size_t from = 0; from < keys.size(); from += kRepairBatch) {
    const size_t n = std::min(kRepairBatch, keys.size() - from);
    protocol::GetRequest req;
    req.flags = protocol::kGetSnapshot;
    for (size_t i = 0; i < n; i++) req.items.push_back({part, keys[from + i], snapshot});
    std::string body;
    protocol::Encode(req, &body);
    PendingCall reply;
    RAMP_RETURN_IF_ERROR(c.CallAndWait(c.OwnerOf(part), c.ReadChannel(), protocol::Op::kGet,
                                       static_cast<uint32_t>(n), body, &reply));
    protocol::GetReply gr;
    RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &gr));
    if (gr.results.size() != n) return Status::Corruption("GET reply does not match its request");
    for (size_t i = 0; i < n; i++) {
      const auto& r = gr.results[i];
      stats.repaired++;
      if (r.status == protocol::ItemStatus::kNotFound) continue;
      if (r.status != protocol::ItemStatus::kOk) {
        return Status::Unavailable("scan: repairing a key of " + part.ToString() +
                                   " by snapshot read failed (item status " +
                                   std::to_string(static_cast<int>(r.status)) + ")");
      }
      if (r.flags & record::kRecordTombstone) continue;
      rows.push_back({keys[from + i], r.ts, std::string(r.value)});
    }
  }
  return Status::OK();
}

Status Scanner::State::LoadPartition(size_t index) {
  const PartitionId part = parts[index];
  std::unordered_map<std::string, Newest> newest;
  std::unordered_set<std::string> undecidable;  // keys in multi-page records
  uint32_t from = 0;
  uint32_t to = info[index].page_count;
  for (int round = 0;; round++) {
    std::vector<PageRef> refs;
    for (uint32_t p = from; p < to; p++) {
      refs.push_back({part, p, info[index].epoch, 8192});
      if (on_page) on_page(part, p);
    }
    bool retired = false;
    Status st = reader->Read(
        refs, [&](size_t, const Status& ps, const uint8_t* data, uint32_t len) -> Status {
          if (ps.Is(Status::Code::kNotFound)) {
            retired = true;  // compacted away: its live records are past the page count now
            return Status::OK();
          }
          if (!ps.ok()) return ps;
          stats.pages++;
          stats.bytes += len;
          record::PageHeader h;
          // A page without a header continues a multi-page record, handled at its head page.
          if (!record::ReadPageHeader(data, len, &h).ok()) return Status::OK();
          if (h.run_pages > 1) {
            // One record larger than a page: its key is in the first page, the rest is not
            // reassembled here; the key is read by snapshot GET instead.
            const record::RecordView v = record::PeekRecord(data + record::kPageHeaderBytes);
            if (v.kind == record::kKindVersion &&
                record::kRecordHeaderBytes + v.key.size() <= len) {
              undecidable.insert(std::string(v.key));
            }
            return Status::OK();
          }
          const uint32_t used = std::min<uint32_t>(h.used, len);
          for (uint32_t off = record::kPageHeaderBytes; off < used;) {
            record::RecordView v;
            // A record that fails its checksum is being written at the head of the log (the
            // page was copied meanwhile): it and what follows are newer than the page count.
            if (!record::DecodeRecord(data + off, used - off, &v).ok()) break;
            off += v.total_len;
            if (v.kind != record::kKindVersion || v.keyspace != part.keyspace ||
                v.bucket != part.bucket) {
              continue;
            }
            Newest& n = newest[std::string(v.key)];
            if (v.ts > snapshot) {
              n.above = true;
            } else if (v.ts > n.ts || (v.ts == n.ts && v.valid())) {
              // The same version twice (relocated by compaction): the valid copy counts.
              n.ts = v.ts;
              n.valid = v.valid();
              n.tombstone = v.tombstone();
              n.value.assign(v.tombstone() ? std::string_view() : v.value);
            }
          }
          return Status::OK();
        });
    RAMP_RETURN_IF_ERROR(st.Annotate("scan of " + part.ToString()));
    if (!retired) break;
    if (round >= kMaxTailRounds) {
      return Status::Busy("scan of " + part.ToString() + ": compaction kept moving pages");
    }
    const size_t one[] = {index};
    RAMP_RETURN_IF_ERROR(OpenAt(one, false));
    from = to;
    to = info[index].page_count;
  }

  std::vector<std::string> repair(undecidable.begin(), undecidable.end());
  for (auto& [key, n] : newest) {
    if (undecidable.count(key)) continue;
    if (n.above || !n.valid) {
      repair.push_back(key);
    } else if (!n.tombstone) {
      rows.push_back({key, n.ts, std::move(n.value)});
    }
  }
  RAMP_RETURN_IF_ERROR(Repair(part, repair));
  stats.partitions++;
  return Status::OK();
}

Status Scanner::Next(ScanRow* row, bool* done) {
  State& s = *state_;
  while (s.pos >= s.rows.size()) {
    if (s.next_part >= s.parts.size()) {
      *done = true;
      return Status::OK();
    }
    s.rows.clear();
    s.pos = 0;
    RAMP_RETURN_IF_ERROR(s.LoadPartition(s.next_part++));
  }
  *row = std::move(s.rows[s.pos++]);
  s.stats.rows++;
  *done = false;
  return Status::OK();
}

}  // namespace ramp
