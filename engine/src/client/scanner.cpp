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
// Per partition, batch by batch. The pages [0, page count) are read with the PageReader,
// one batch (a READ_PAGES request) at a time, while the next batches are in flight, and the
// rows a batch decides are handed out before the next batch is parsed (the executor works
// while the servers copy). A version decides its key from the pages when it is at or below
// S and carries the valid bit in a copy of its page taken after SCAN_OPEN closed S at the
// partition: the valid bit marks the key's current committed version (DESIGN §5); every
// transaction at or below S was then decided and applied there, and no later commit is at
// or below S, so the current committed version, when at or below S, is the newest at or
// below S: the answer. (A version relocated by compaction is valid in both places for a
// moment, the same version; Relocate clears the old copy's bit.) A per-partition set of
// the keys decided so far (a bitmap over the range of row ids) drops the second copy. Every
// key seen only with versions that cannot decide it (above S, or without the valid bit:
// overwritten, deleted, a newer transaction's version prepared) and every key of a record
// that spans pages (the parser does not reassemble them) is remembered, and those not
// decided by the end of the partition are repaired by a snapshot GET at S from its server.
// Commit marks are not used as evidence: garbage collection and compaction may remove a
// newer version (a tombstone) while an older version and its mark stay, and the scan would
// bring a deleted key back. Pages retired by compaction during the scan had their live
// records relocated past the page count first: the scanner then reads the new tail as well.
// A partition that moves while it is read is read again at its new owner, the keys already
// decided kept (their answers were handed out).
//
// Nothing is allocated per row: the rows of a batch are copied into one small arena (each
// value placed at the alignment the caller asked for; the page bytes are not), reused from
// one batch to the next, and handed out as views into it. Row keys (8 bytes: table
// keyspaces, ramp/keys.h RowKey) are numbers in the decided set; keys of other lengths (the
// row-id sequence, other layouts) are strings in a hash set.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <new>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "client/client_impl.h"
#include "common/record.h"
#include "protocol/page_messages.h"
#include "ramp/page_reader.h"

namespace ramp {

namespace {
constexpr int kMaxTailRounds = 16;
// A partition that moves while it is scanned is opened again at its new owner and read
// again from its first page, at most this many times.
constexpr int kMaxMoves = 64;
// Scanner::State::page_kind.
constexpr uint8_t kPageUnseen = 0, kPageParsed = 1, kPageContinues = 2;
constexpr size_t kRepairBatch = 256;

// The row keys of a partition decided so far: a bitmap over [lo, lo + 64 * words) for the
// dense row ids of a table, a hash set for keys outside it (sparse keys of other layouts).
class KeySet {
 public:
  void Clear() {
    words_.clear();
    other_.clear();
    have_lo_ = false;
    count_ = 0;
  }
  // Adds key; false when it was there already.
  bool Insert(uint64_t key) {
    if (!have_lo_) {
      // Room below the first key too: a partition's log is not in key order.
      lo_ = key > kSlack ? (key - kSlack) & ~uint64_t{63} : 0;
      have_lo_ = true;
    }
    if ((key >= lo_ && (key - lo_) / 64 < words_.size()) || Grow(key)) {
      const uint64_t w = (key - lo_) / 64;
      const uint64_t mask = uint64_t{1} << ((key - lo_) % 64);
      if (words_[w] & mask) return false;
      // A key put in the hash set before the bitmap grew over it.
      if (!other_.empty() && other_.count(key)) return false;
      words_[w] |= mask;
      count_++;
      return true;
    }
    if (!other_.insert(key).second) return false;
    count_++;
    return true;
  }
  bool Contains(uint64_t key) const {
    if (have_lo_ && key >= lo_ && (key - lo_) / 64 < words_.size() &&
        ((words_[(key - lo_) / 64] >> ((key - lo_) % 64)) & 1)) {
      return true;
    }
    return !other_.empty() && other_.count(key) != 0;
  }

 private:
  // Extends the bitmap over key unless it would be too sparse (fewer keys than 1 in 1024
  // of its range, beyond kMinWords): false then.
  bool Grow(uint64_t key) {
    const uint64_t base = key & ~uint64_t{63};
    const uint64_t new_lo = std::min(lo_, base);
    const uint64_t words =
        std::max<uint64_t>((lo_ - new_lo) / 64 + words_.size(), (key - new_lo) / 64 + 1);
    if (words > kMinWords && words / 16 > count_) return false;
    if (new_lo < lo_) {
      // Downwards by at least the present size (amortized), not below 0.
      const uint64_t want = std::max<uint64_t>((lo_ - new_lo) / 64, words_.size());
      const uint64_t front = std::min<uint64_t>(want, lo_ / 64);
      words_.insert(words_.begin(), front, 0);
      lo_ -= front * 64;
    }
    const uint64_t need = (key - lo_) / 64 + 1;
    if (need > words_.size()) {
      words_.resize(
          std::max<uint64_t>(need, std::min<uint64_t>(words_.size() * 2, need + kMinWords)));
    }
    return true;
  }

  static constexpr uint64_t kMinWords = uint64_t{1} << 14;  // 1 M keys, 128 KiB
  static constexpr uint64_t kSlack = uint64_t{1} << 16;     // keys below the first
  std::vector<uint64_t> words_;
  std::unordered_set<uint64_t> other_;
  uint64_t lo_ = 0;
  bool have_lo_ = false;
  uint64_t count_ = 0;
};

// A row of the batch being loaded: arena offset of its key (the value follows).
struct RowRef {
  uint64_t at;
  uint32_t key_len;
  uint32_t value_len;
  Timestamp ts;
};

inline uint64_t LoadBigEndian64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}

}  // namespace

// Grows without initialising and without keeping pointers: rows refer to it by offset until
// the partition is complete. Kept from one scan to the next (ScanSpares): its pages are
// faulted in (and zeroed by the kernel) once, not per scan.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { Unmap(data_, capacity_); }
  void Swap(Arena& other) {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }
  uint64_t capacity() const { return capacity_; }
  uint64_t size() const { return size_; }
  uint8_t* data() { return data_; }
  void clear() { size_ = 0; }
  // Room for n bytes without moving (one allocation per partition instead of doublings).
  // Anonymous memory in 2 MiB pages where the kernel has them (transparent huge pages on
  // request): a partition's rows are tens of MiB, read back row by row; 4 KiB pages cost a
  // fault each when first written and a TLB miss for nearly every row read.
  void Reserve(uint64_t need) {
    if (need <= capacity_) return;
    uint64_t cap = std::max<uint64_t>(need, std::max<uint64_t>(capacity_ * 2, kHugePage));
    cap = (cap + kHugePage - 1) & ~(kHugePage - 1);
    void* p = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, cap, MADV_HUGEPAGE);  // advice: without it, 4 KiB pages
    auto* bigger = static_cast<uint8_t*>(p);
    if (size_ != 0) std::memcpy(bigger, data_, size_);
    Unmap(data_, capacity_);
    data_ = bigger;
    capacity_ = cap;
  }
  // Stores key and value (value placed so that value + skip is 8-byte aligned); returns the
  // offset of the key.
  uint64_t Add(std::string_view key, std::string_view value, uint32_t skip) {
    const uint64_t at = (size_ + 7) & ~uint64_t{7};
    const uint64_t vpos = ValueOffset(at, key.size(), skip);
    Reserve(vpos + value.size());
    if (!key.empty()) std::memcpy(data_ + at, key.data(), key.size());
    if (!value.empty()) std::memcpy(data_ + vpos, value.data(), value.size());
    size_ = vpos + value.size();
    return at;
  }
  static uint64_t ValueOffset(uint64_t at, size_t key_len, uint32_t skip) {
    const uint64_t after_key = at + key_len;
    return after_key + ((8 - (after_key + skip) % 8) % 8);
  }

 private:
  static constexpr uint64_t kHugePage = uint64_t{2} << 20;
  static void Unmap(uint8_t* p, uint64_t bytes) {
    if (p != nullptr) munmap(p, bytes);
  }
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t capacity_ = 0;
};

// Arenas up to this size are kept for the client's next scan; larger ones (a partition of a
// big table) are unmapped when their scan ends, and their scan's own faults are a small share
// of reading that many rows. Kept small: every backend that scanned holds its spare (with
// the reader's 12 MiB of buffers) while idle, and a server has hundreds of backends.
constexpr uint64_t kSpareArenaBytes = uint64_t{16} << 20;

struct ScanSpares {
  std::unique_ptr<PageReader> reader;  // intact (PageReader::intact)
  PageReaderOptions reader_options;
  Arena arena;
};

void ScanSparesDeleter::operator()(ScanSpares* spares) const {
  delete spares;
}

namespace {
bool SameReaderOptions(const PageReaderOptions& a, const PageReaderOptions& b) {
  return a.connections_per_node == b.connections_per_node && a.batch_pages == b.batch_pages &&
         a.batches_in_flight == b.batches_in_flight && a.max_page_bytes == b.max_page_bytes &&
         a.prefer_disk == b.prefer_disk && a.migration == b.migration;
}
}  // namespace

struct Scanner::State {
  Client* client = nullptr;
  KeyspaceId keyspace = 0;
  Timestamp snapshot;
  std::vector<PartitionId> parts;
  std::vector<protocol::ScanOpenPartition> info;
  std::unique_ptr<PageReader> reader;
  PageReaderOptions reader_options;
  std::function<void(const PartitionId&, uint32_t)> on_page;
  uint32_t value_align_skip = 0;
  size_t next_part = 0;
  std::function<bool(uint32_t*)> take_partition;  // parallel scans: see ScanOptions
  std::vector<ScanRow> rows;
  size_t pos = 0;
  ScanStats stats;

  // Working memory, kept from one batch (and partition) to the next.
  Arena arena;
  std::vector<RowRef> refs;

  // The partition being read (when reading): its page range of this round, the keys
  // decided so far and those seen undecided.
  bool reading = false;
  size_t cur = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  // Pages below the head page SCAN_OPEN saw hold complete records only (see BeginRound).
  uint32_t complete_below = 0;
  int round = 0;
  int moves = 0;
  bool retired = false;  // a page of this round was compacted away
  std::vector<PageRef> page_refs;
  KeySet decided;                                 // row keys
  std::vector<uint64_t> undecided;                // row keys, with repeats
  std::unordered_set<std::string> decided_other;  // keys that are not row keys
  std::unordered_set<std::string> undecided_other;
  // Per page of the partition: kPageParsed (read as a page), kPageContinues (inside the run
  // of a record larger than a page: its bytes are the record's, whatever they look like).
  std::vector<uint8_t> page_kind;
  // The partition taken next, its pages prefetched by the reader (when it still has them).
  bool have_next = false;
  size_t next_index = 0;
  std::vector<PageRef> next_refs;

  // The client's spare page reader (when its options match) and arena, or new ones.
  Status TakeSpares(const PageReaderOptions& ro);
  // Leaves the reader (when intact) and the arena (when not too large) to the client's next
  // scan.
  void GiveBackSpares();
  Status OpenAt(std::span<const size_t> which, bool wait_pending);
  // The index of the next partition to read into *index; false when none is left.
  bool TakePartition(size_t* index);
  // Reads batches until rows are left to hand out; *done when none is left.
  Status FillRows(bool* done);
  // Starts reading partition `index` from its first page.
  Status StartPartition(size_t index);
  // Once every page of the current partition was asked for, takes the next partition and
  // has the reader prefetch its pages (no pause between partitions). Serial scans only.
  Status MaybePrefetch();
  // Asks the reader for the pages [from, to) of the current partition.
  Status BeginRound();
  // The rows one page decides, into the arena (refs).
  Status ParsePage(size_t i, const Status& ps, const uint8_t* data, uint32_t len);
  // Repairs the keys left undecided at the end of the partition.
  Status FinishPartition();
  Status Repair(const PartitionId& part, const std::vector<std::string>& keys);
};

Scanner::Scanner(std::unique_ptr<State> state) : state_(std::move(state)) {}
Scanner::~Scanner() {
  if (state_ == nullptr) return;
  // A scan stopped early (LIMIT, an error) may have batches in flight: End waits for them,
  // so that the reader stays intact for the client's next scan.
  if (state_->reader != nullptr) state_->reader->End();
  state_->GiveBackSpares();
}

Status Scanner::State::TakeSpares(const PageReaderOptions& ro) {
  Client::Impl& c = *client->impl();
  if (c.scan_spares != nullptr) {
    ScanSpares& sp = *c.scan_spares;
    if (sp.reader != nullptr && SameReaderOptions(sp.reader_options, ro)) {
      reader = std::move(sp.reader);
      stats.reused_reader = true;
    }
    arena.Swap(sp.arena);  // ours is empty
    arena.clear();
  }
  reader_options = ro;
  if (reader == nullptr) RAMP_RETURN_IF_ERROR(PageReader::Open(client, ro, &reader));
  return Status::OK();
}

void Scanner::State::GiveBackSpares() {
  Client::Impl& c = *client->impl();
  if (c.scan_spares == nullptr) c.scan_spares.reset(new ScanSpares);
  ScanSpares& sp = *c.scan_spares;
  // Another scan of this client may be open at the same time and have taken the spares:
  // the first to end leaves its own.
  if (reader != nullptr && sp.reader == nullptr && reader->intact()) {
    sp.reader = std::move(reader);
    sp.reader_options = reader_options;
  }
  if (arena.capacity() <= kSpareArenaBytes && arena.capacity() > sp.arena.capacity()) {
    arena.clear();
    sp.arena.Swap(arena);
  }
}
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
  int moves = 0;
  for (;;) {
    std::map<uint32_t, std::vector<size_t>> by_node;
    for (size_t i : which) by_node[c.OwnerOf(parts[i])].push_back(i);
    uint64_t pending = 0;
    bool moved = false;
    // One SCAN_OPEN per node, all in flight at once (a scan of a small table is mostly
    // these round trips).
    std::vector<uint64_t> ids;
    std::vector<const std::vector<size_t>*> sent;
    for (auto& [node, idx] : by_node) {
      protocol::ScanOpenRequest req;
      req.snapshot = snapshot;
      for (size_t i : idx) req.partitions.push_back(parts[i]);
      std::string body;
      protocol::Encode(req, &body);
      uint64_t id = 0;
      Status st = c.Call(node, c.ReadChannel(), protocol::Op::kScanOpen,
                         static_cast<uint32_t>(idx.size()), body, &id);
      if (!st.ok()) {
        for (uint64_t i : ids) c.calls.erase(i);
        return st.Annotate("SCAN_OPEN");
      }
      ids.push_back(id);
      sent.push_back(&idx);
    }
    RAMP_RETURN_IF_ERROR(c.Wait(ids).Annotate("SCAN_OPEN"));
    Status failed;
    for (size_t n = 0; n < ids.size(); n++) {
      const std::vector<size_t>& idx = *sent[n];
      PendingCall reply;
      Status st = c.TakeReply(ids[n], &reply);
      if (st.Is(Status::Code::kMoved) && ++moves < kMaxMoves) {
        // A partition moved (migration): ask its home again, then the new owner.
        for (size_t i : idx) c.placements.erase(parts[i]);
        moved = true;
        continue;
      }
      protocol::ScanOpenReply r;
      if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &r);
      if (st.ok() && r.partitions.size() != idx.size()) {
        st = Status::Corruption("SCAN_OPEN reply does not match its request");
      }
      if (!st.ok()) {
        if (failed.ok()) failed = st.Annotate("SCAN_OPEN");
        continue;  // the other replies are still taken
      }
      for (size_t k = 0; k < idx.size(); k++) {
        info[idx[k]] = r.partitions[k];
        pending += r.partitions[k].pending;
      }
    }
    RAMP_RETURN_IF_ERROR(failed);
    if (moved) {
      c.MoveBackoff(moves);
      RAMP_RETURN_IF_ERROR(c.ResolveOwners(ps));
      continue;
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

bool Scanner::State::TakePartition(size_t* index) {
  if (!take_partition) {
    if (next_part >= parts.size()) return false;
    *index = next_part++;
    return true;
  }
  uint32_t i = 0;
  if (!take_partition(&i) || i >= parts.size()) return false;
  *index = i;
  return true;
}

namespace {

// A scan of every partition of a keyspace, its snapshot not drawn yet.
std::unique_ptr<Scanner::State> NewScanState(Client* client, KeyspaceId keyspace,
                                             uint32_t buckets) {
  auto st = std::make_unique<Scanner::State>();
  st->client = client;
  st->keyspace = keyspace;
  for (uint32_t b = 0; b < buckets; b++) st->parts.push_back(PartitionId{keyspace, b});
  st->info.resize(buckets);
  return st;
}

}  // namespace

// Draws st's snapshot above every owner's clock and closes it at every partition (OpenAt).
static Status DrawScanSnapshot(Client::Impl& c, Scanner::State* st) {
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
  std::vector<size_t> all(st->parts.size());
  for (size_t i = 0; i < all.size(); i++) all[i] = i;
  return st->OpenAt(all, true);
}

Status Client::OpenScanSnapshot(KeyspaceId keyspace, Timestamp* snapshot) {
  auto st = NewScanState(this, keyspace, BucketsOf(keyspace));
  RAMP_RETURN_IF_ERROR(DrawScanSnapshot(*impl_, st.get()));
  *snapshot = st->snapshot;
  return Status::OK();
}

Status Client::OpenScan(KeyspaceId keyspace, const ScanOptions& options,
                        std::unique_ptr<Scanner>* out) {
  auto st = NewScanState(this, keyspace, BucketsOf(keyspace));
  Impl& c = *impl_;
  if (options.snapshot.zero()) {
    RAMP_RETURN_IF_ERROR(DrawScanSnapshot(c, st.get()));
  } else {
    // Another Scanner's snapshot: already closed at every partition (OpenScanSnapshot), so
    // this SCAN_OPEN only learns the page counts (the watermark is at or above it already).
    st->snapshot = options.snapshot;
    c.clock.Observe(options.snapshot.time);
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(st->parts));
    std::vector<size_t> all(st->parts.size());
    for (size_t i = 0; i < all.size(); i++) all[i] = i;
    RAMP_RETURN_IF_ERROR(st->OpenAt(all, true));
  }
  st->take_partition = options.take_partition;
  PageReaderOptions ro;
  ro.connections_per_node = options.connections_per_node;
  ro.batch_pages = options.batch_pages;
  ro.batches_in_flight = options.batches_in_flight;
  // Never prefer_disk: the page file copy of a resident page may carry stale valid bits,
  // and the scan trusts valid bits (pages the memory budget evicted are read from disk all
  // the same, rewritten when they were evicted).
  st->on_page = options.on_page;
  st->value_align_skip = options.value_align_skip;
  RAMP_RETURN_IF_ERROR(st->TakeSpares(ro));
  out->reset(new Scanner(std::move(st)));
  return Status::OK();
}

Status Scanner::State::Repair(const PartitionId& part, const std::vector<std::string>& keys) {
  Client::Impl& c = *client->impl();
  int moves = 0;
  for (size_t from = 0; from < keys.size(); from += kRepairBatch) {
    const size_t n = std::min(kRepairBatch, keys.size() - from);
  again:
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
    if (!gr.results.empty() && gr.results[0].status == protocol::ItemStatus::kMoved &&
        ++moves < kMaxMoves) {
      // The partition moved since its pages were read: the same snapshot read at the new owner
      // (the move carried the scan's watermark along).
      c.NoteMoved(part, gr.results[0].owner, gr.results[0].epoch);
      c.MoveBackoff(moves);
      const PartitionId one[] = {part};
      RAMP_RETURN_IF_ERROR(c.ResolveOwners(one));
      goto again;
    }
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
      const std::string& key = keys[from + i];
      refs.push_back({arena.Add(key, r.value, value_align_skip), static_cast<uint32_t>(key.size()),
                      static_cast<uint32_t>(r.value.size()), r.ts});
    }
  }
  return Status::OK();
}

Status Scanner::State::StartPartition(size_t index) {
  reading = true;
  cur = index;
  moves = 0;
  round = 0;
  decided.Clear();
  undecided.clear();
  decided_other.clear();
  undecided_other.clear();
  page_kind.clear();
  from = 0;
  to = info[index].page_count;
  // Pages below the head page SCAN_OPEN saw hold complete records only: the owner appends
  // and writes a record under the partition's lock, which PageCount takes as well, and
  // appends only to the head page and beyond. Their records change nothing but the state
  // byte (outside the checksum), so their checksums are not computed again here (CRC-32C
  // was 9 % of the backend's CPU in a serial scan of lineitem). Relocation by compaction
  // appends at the head too. The head page and the pages after it may hold a record still
  // being written: theirs are checked, and a mismatch ends the page as before.
  complete_below = to == 0 ? 0 : to - 1;
  if (have_next && next_index == index && reader->prefetched()) {
    // The reader asked for these pages while the partition before was read.
    have_next = false;
    retired = false;
    page_refs = std::move(next_refs);
    next_refs.clear();
    stats.prefetched++;
    return reader->BeginPrefetched();
  }
  have_next = false;
  return BeginRound();
}

Status Scanner::State::MaybePrefetch() {
  // Not in parallel scans: a participant that took a partition ahead would keep it from an
  // idle one at the end of the scan (measured: 2 workers 70-81 ms against 68-73 without).
  if (have_next || take_partition || !reader->all_sent()) return Status::OK();
  size_t index = 0;
  if (!TakePartition(&index)) return Status::OK();
  have_next = true;
  next_index = index;
  const PartitionId part = parts[index];
  next_refs.clear();
  next_refs.reserve(info[index].page_count);
  for (uint32_t p = 0; p < info[index].page_count; p++) {
    next_refs.push_back({part, p, info[index].epoch, 8192});
    if (on_page) on_page(part, p);
  }
  return reader->Prefetch(next_refs);
}

Status Scanner::State::BeginRound() {
  const PartitionId part = parts[cur];
  page_refs.clear();
  page_refs.reserve(to - from);
  for (uint32_t p = from; p < to; p++) {
    page_refs.push_back({part, p, info[cur].epoch, 8192});
    if (on_page) on_page(part, p);
  }
  retired = false;
  return reader->Begin(page_refs);
}

Status Scanner::State::ParsePage(size_t i, const Status& ps, const uint8_t* data, uint32_t len) {
  const PartitionId part = parts[cur];
  if (ps.Is(Status::Code::kNotFound)) {
    retired = true;  // compacted away: its live records are past the page count now
    return Status::OK();
  }
  if (!ps.ok()) return ps;
  stats.pages++;
  stats.bytes += len;
  record::PageHeader h;
  // A page without a header continues a multi-page record, handled at its head page; so
  // does one inside a run seen before, whatever its bytes (a value can hold a page header).
  const uint32_t page_no = page_refs[i].page_no;
  if (page_no >= page_kind.size()) page_kind.resize(size_t{page_no} + 1, kPageUnseen);
  if (page_kind[page_no] == kPageContinues) return Status::OK();
  if (!record::ReadPageHeader(data, len, &h).ok() || h.page_no != page_no ||
      h.keyspace != part.keyspace || h.bucket != part.bucket) {
    return Status::OK();
  }
  if (h.run_pages > 1) {
    // Pages arrive in completion order: one of the run read as a page before its head would
    // have handed out rows made of a value's bytes. Refused rather than answered wrong.
    const uint32_t end = page_no + std::min<uint32_t>(h.run_pages, UINT32_MAX - page_no);
    if (end > page_kind.size()) page_kind.resize(end, kPageUnseen);
    for (uint32_t q = page_no + 1; q < end; q++) {
      if (page_kind[q] == kPageParsed) {
        return Status::Corruption("scan of " + part.ToString() + ": page " + std::to_string(q) +
                                  " was read as a page, but continues the record of page " +
                                  std::to_string(page_no));
      }
      page_kind[q] = kPageContinues;
    }
    // One record larger than a page: its key is in the first page, the rest is not
    // reassembled here; the key is read by snapshot GET (unless the pages decide it).
    const record::RecordView v = record::PeekRecord(data + record::kPageHeaderBytes);
    if (v.kind == record::kKindVersion && record::kRecordHeaderBytes + v.key.size() <= len) {
      if (v.key.size() == kRowKeyBytes) {
        undecided.push_back(LoadBigEndian64(v.key.data()));
      } else {
        undecided_other.insert(std::string(v.key));
      }
    }
    return Status::OK();
  }
  page_kind[page_no] = kPageParsed;
  const uint32_t skip = value_align_skip;
  const uint32_t used = std::min<uint32_t>(h.used, len);
  const bool complete = page_refs[i].page_no < complete_below;
  if (complete) stats.pages_complete++;
  // Declared once: its constructor zeroes 88 bytes (rep stos), a quarter of this loop's time
  // when it ran per record; Decode sets every field.
  record::RecordView v;
  for (uint32_t off = record::kPageHeaderBytes; off < used;) {
    // A record that fails its checksum is being written at the head of the log (the page
    // was copied meanwhile): it and what follows are newer than the page count.
    if (complete) {
      if (!record::DecodeCompleteRecord(data + off, used - off, &v).ok()) break;
    } else if (!record::DecodeRecord(data + off, used - off, &v).ok()) {
      break;
    }
    off += v.total_len;
    if (v.kind != record::kKindVersion || v.keyspace != part.keyspace || v.bucket != part.bucket) {
      continue;
    }
    const bool decides = v.ts <= snapshot && v.valid();
    if (v.key.size() == kRowKeyBytes) {
      const uint64_t key = LoadBigEndian64(v.key.data());
      if (!decides) {
        undecided.push_back(key);
        continue;
      }
      if (!decided.Insert(key)) continue;  // a relocated copy of the version handed out
    } else {
      if (!decides) {
        undecided_other.insert(std::string(v.key));
        continue;
      }
      if (!decided_other.insert(std::string(v.key)).second) continue;
    }
    if (v.tombstone()) continue;  // deleted at the snapshot
    refs.push_back({arena.Add(v.key, v.value, skip), static_cast<uint32_t>(v.key.size()),
                    static_cast<uint32_t>(v.value.size()), v.ts});
  }
  return Status::OK();
}

Status Scanner::State::FinishPartition() {
  reading = false;
  std::vector<std::string> repair;
  std::sort(undecided.begin(), undecided.end());
  undecided.erase(std::unique(undecided.begin(), undecided.end()), undecided.end());
  for (uint64_t key : undecided) {
    if (!decided.Contains(key)) repair.push_back(RowKey(key));
  }
  for (const std::string& key : undecided_other) {
    if (!decided_other.count(key)) repair.push_back(key);
  }
  RAMP_RETURN_IF_ERROR(Repair(parts[cur], repair));
  stats.partitions++;
  return Status::OK();
}

Status Scanner::State::FillRows(bool* done) {
  *done = false;
  if (pos < rows.size()) return Status::OK();
  arena.clear();
  refs.clear();
  rows.clear();
  pos = 0;
  arena.Reserve(uint64_t(reader_options.batch_pages) * record::kPageBytes / 4 * 5);
  PageReader::Sink sink = [this](size_t i, const Status& ps, const uint8_t* data, uint32_t len) {
    return ParsePage(i, ps, data, len);
  };
  while (refs.empty()) {
    if (!reading) {
      size_t index = 0;
      if (have_next) {
        index = next_index;  // taken already (prefetched, or dropped with a failed read)
      } else if (!TakePartition(&index)) {
        *done = true;
        return Status::OK();
      }
      RAMP_RETURN_IF_ERROR(StartPartition(index));
    }
    bool end = false;
    Status st = reader->NextBatch(sink, &end);
    // Aborted: a page the owner wrote from its memory frame left that frame (evicted or
    // compacted) before the owner's re-check; read like a move: again from the start, the
    // pages before were answers and their keys stay decided.
    if ((st.Is(Status::Code::kMoved) || st.Is(Status::Code::kAborted)) && ++moves < kMaxMoves) {
      // The partition moved (its owner stopped serving it, or its epoch changed): open it
      // at the new owner (same snapshot) and read it again from the start. The rows of the
      // pages that came before are answers (copied while the owner served the partition)
      // and handed out; the keys decided stay decided.
      Client::Impl& c = *client->impl();
      const PartitionId part = parts[cur];
      c.placements.erase(part);
      c.MoveBackoff(moves);
      const size_t one[] = {cur};
      RAMP_RETURN_IF_ERROR(OpenAt(one, true));
      page_kind.clear();  // the new owner's log numbers its pages its own way
      from = 0;
      to = info[cur].page_count;
      complete_below = to == 0 ? 0 : to - 1;
      round = 0;
      RAMP_RETURN_IF_ERROR(BeginRound());
      continue;
    }
    RAMP_RETURN_IF_ERROR(st.Annotate("scan of " + parts[cur].ToString()));
    if (!end) {
      if (round == 0) RAMP_RETURN_IF_ERROR(MaybePrefetch());
      continue;
    }
    if (retired) {
      if (++round > kMaxTailRounds) {
        return Status::Busy("scan of " + parts[cur].ToString() + ": compaction kept moving pages");
      }
      const size_t one[] = {cur};
      RAMP_RETURN_IF_ERROR(OpenAt(one, false));
      // From the last round's head page on: compaction appends its relocated records to the
      // open head page while it has room, and that page may have been copied before them
      // (batches complete out of order; the head page was read before the retired one).
      // Keys read twice are dropped by the decided set.
      from = to == 0 ? 0 : to - 1;
      to = info[cur].page_count;
      RAMP_RETURN_IF_ERROR(BeginRound());
      continue;
    }
    RAMP_RETURN_IF_ERROR(FinishPartition());
  }

  // The batch is complete: views into the arena.
  rows.reserve(refs.size());
  const uint32_t skip = value_align_skip;
  const uint8_t* base = arena.data();
  for (const RowRef& r : refs) {
    const char* k = reinterpret_cast<const char*>(base + r.at);
    const char* v = reinterpret_cast<const char*>(base + Arena::ValueOffset(r.at, r.key_len, skip));
    rows.push_back({std::string_view(k, r.key_len), r.ts, std::string_view(v, r.value_len)});
  }
  return Status::OK();
}

Status Scanner::Next(ScanRow* row, bool* done) {
  State& s = *state_;
  RAMP_RETURN_IF_ERROR(s.FillRows(done));
  if (*done) return Status::OK();
  *row = s.rows[s.pos++];
  s.stats.rows++;
  *done = false;
  return Status::OK();
}

Status Scanner::NextRows(std::span<const ScanRow>* rows, bool* done) {
  State& s = *state_;
  RAMP_RETURN_IF_ERROR(s.FillRows(done));
  if (*done) {
    *rows = {};
    return Status::OK();
  }
  *rows = std::span<const ScanRow>(s.rows.data() + s.pos, s.rows.size() - s.pos);
  s.stats.rows += s.rows.size() - s.pos;
  s.pos = s.rows.size();
  *done = false;
  return Status::OK();
}

}  // namespace ramp
