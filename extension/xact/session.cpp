#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "rows/keys.hpp"
#include "sql/guc.hpp"
#include "xact/session.hpp"

#include "common/record.h"
#include "ramp/hlc.h"

#include "boundary/boundary.hpp"

namespace pgramp {

namespace {

constexpr uint64_t kMaxRowIdChunk = 65536;
constexpr int kRowIdAttempts = 64;
constexpr auto kFailureQuiet = std::chrono::seconds(10);
constexpr size_t kMaxPrefetchedBytes = size_t{256} << 20;

bool NeedsReconnect(const ramp::Status& s) {
  using Code = ramp::Status::Code;
  switch (s.code()) {
    case Code::kUnavailable:
    case Code::kTimeout:
    case Code::kCancelled:
    case Code::kCorruption:
    case Code::kInternal:
    case Code::kPermissionDenied:
      return true;
    default:
      return false;
  }
}

std::string ReadTokenFile() {
  if (guc::token_file == nullptr || guc::token_file[0] == '\0') return {};
  std::ifstream in(guc::token_file, std::ios::binary);
  if (!in) {
    const int err = errno;
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                   std::string("could not read ramp.token_file \"") + guc::token_file + "\"",
                   strerror(err), "");
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                   std::string("ramp.token_file \"") + guc::token_file + "\" is empty");
  }
  return token;
}

}  // namespace

ramp::Status WaitHook() {
  if (InterruptPending && INTERRUPTS_CAN_BE_PROCESSED() && (QueryCancelPending || ProcDiePending)) {
    return ramp::Status::Cancelled("interrupted by PostgreSQL (cancel, timeout or termination)");
  }
  return ramp::Status::OK();
}

Session& Session::Get() {
  // Never destroyed: the backend exits without running into half-torn-down PostgreSQL state.
  static Session* session = new Session();
  return *session;
}

void Session::Reset() noexcept {
  reader_.reset();  // a Transaction must not outlive its Client
  client_.reset();
  defined_.clear();
  broken_ = false;
}

void Session::Open() {
  if (guc::nodes == nullptr || guc::nodes[0] == '\0') {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "ramp.nodes is not set",
                   "Ramp tables and indexes live on a ramp cluster; this session does not "
                   "know where it is.",
                   "Set ramp.nodes to the cluster's seed servers, for example "
                   "ALTER DATABASE ... SET ramp.nodes = 'tcp://10.0.0.5:7400'.");
  }
  ramp::ClientOptions options;
  ramp::Status s =
      ramp::ParseClientOptions(guc::nodes, guc::TransportName(), guc::ReadPathName(), &options);
  if (!s.ok()) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "invalid ramp client settings", s.message(),
                   "Check ramp.nodes, ramp.transport and ramp.read_path.");
  }
  options.timeout_ms = guc::timeout_ms;
  options.connect_timeout_ms = guc::connect_timeout_ms;
  options.token = ReadTokenFile();
  options.wait_hook = WaitHook;
  options.debug_commit_delay_us = guc::debug_commit_delay_us;
  std::unique_ptr<ramp::Client> client;
  s = ramp::Client::Open(options, &client);
  if (!s.ok()) {
    failed_at_ = std::chrono::steady_clock::now();
    throw RampError(s, "connecting to the ramp cluster");
  }
  client_ = std::move(client);
  client_generation_ = guc::ConfigGeneration();
  client_settings_ = SettingsFingerprint();
  failed_at_ = {};
}

// The settings a client is opened with. A ramp.* assignment bumps the generation (SET, and
// also SET LOCAL being undone, or a function's SET clause on every call); the client is
// reopened only when the settings really differ.
std::string Session::SettingsFingerprint() {
  std::string f;
  f.append(guc::nodes != nullptr ? guc::nodes : "").push_back('\n');
  f.append(guc::token_file != nullptr ? guc::token_file : "").push_back('\n');
  f.append(guc::TransportName()).push_back('\n');
  f.append(guc::ReadPathName()).push_back('\n');
  f.append(std::to_string(guc::timeout_ms)).push_back('\n');
  f.append(std::to_string(guc::connect_timeout_ms)).push_back('\n');
  f.append(std::to_string(guc::debug_commit_delay_us));
  return f;
}

ramp::Client& Session::client() {
  if (client_ != nullptr && client_generation_ != guc::ConfigGeneration()) {
    client_generation_ = guc::ConfigGeneration();
    if (SettingsFingerprint() != client_settings_) broken_ = true;
  }
  if (client_ != nullptr && broken_) Reset();
  if (client_ == nullptr) Open();
  return *client_;
}

ramp::Transaction& Session::reader() {
  ramp::Client& c = client();
  if (reader_ == nullptr) {
    reader_ = c.Begin();
    reader_->ReturnMetadata(true);  // NoteRead keeps a statement's reads atomic together
    statement_tag_ = {0, 0};
  }
  CurrentStatementTag();
  return *reader_;
}

void Session::Define(const KeyspaceRef& ks) {
  ramp::Client& c = client();
  if (defined_.count(ks.id) != 0) return;
  c.DefineKeyspace(ks.id, ks.buckets, ks.grouped);
  defined_.insert(ks.id);
}

void Session::Check(const ramp::Status& status, std::string_view context) {
  if (status.ok()) return;
  if (NeedsReconnect(status)) {
    broken_ = true;
    if (!status.Is(ramp::Status::Code::kCancelled)) failed_at_ = std::chrono::steady_clock::now();
  }
  throw RampError(status, std::string(context));
}

bool Session::RecentlyFailed() const {
  return failed_at_ != std::chrono::steady_clock::time_point{} &&
         std::chrono::steady_clock::now() - failed_at_ < kFailureQuiet;
}

void Session::EndTransaction() noexcept {
  reader_.reset();
  versions_.Clear();
  prefetched_.clear();
  prefetched_bytes_ = 0;
  prefetch_tag_ = {0, 0};
  if (broken_) Reset();
}

uint64_t Session::NextRowId(const KeyspaceRef& ks) {
  RowIdRange& range = row_ids_[ks.id];
  if (range.next == range.end) RefillRowIds(ks);
  return row_ids_[ks.id].next++;
}

void Session::RefillRowIds(const KeyspaceRef& ks) {
  Define(ks);
  std::minstd_rand jitter(static_cast<unsigned>(ks.id ^ reinterpret_cast<uintptr_t>(this)));
  for (int attempt = 0; attempt < kRowIdAttempts; attempt++) {
    RowIdRange& range = row_ids_[ks.id];
    std::unique_ptr<ramp::Transaction> txn = client().Begin();
    ramp::ReadResult current;
    Check(txn->Get(ks.id, RowIdSequenceKey(), &current), "reading the row-id sequence");
    uint64_t next = 0;
    if (current.found && !DecodeU64(current.value, &next)) {
      throw RampError(
          ramp::Status::Corruption("the row-id sequence holds " +
                                   std::to_string(current.value.size()) + " bytes instead of 8"),
          "allocating row ids");
    }
    const uint64_t want = range.chunk;
    if (next > kMaxRowId || kMaxRowId - next < want) {
      throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "the row ids of a ramp table are exhausted",
                     "Row ids are limited to the TID space (2^40).", "");
    }
    // Expected = the version just read (zero when the sequence was never written): two
    // allocators that read the same value cannot both commit.
    Check(txn->Put(ks.id, RowIdSequenceKey(), EncodeU64(next + want), &current.ts),
          "allocating row ids");
    ramp::Status s = txn->Commit();
    if (s.ok()) {
      range.next = next;
      range.end = next + want;
      range.chunk = std::min(range.chunk * 2, kMaxRowIdChunk);
      high_water_[ks.id] = HighWaterEntry{next + want, std::chrono::steady_clock::now()};
      return;
    }
    if (!s.Is(ramp::Status::Code::kConflict)) Check(s, "allocating row ids");
    txn.reset();
    // Another allocator won the race: back off a little (random, growing) and retry.
    const int max_ms = 1 << std::min(attempt, 6);
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(jitter() % (max_ms * 1000 + 1));
    while (std::chrono::steady_clock::now() < until) {
      Check(WaitHook(), "allocating row ids");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  throw RampError(ramp::Status::Conflict("too many concurrent allocations of the row-id sequence"),
                  "allocating row ids");
}

uint64_t Session::HighWater(const KeyspaceRef& ks) {
  Define(ks);
  ramp::ReadResult current;
  Check(reader().Get(ks.id, RowIdSequenceKey(), &current), "reading the row-id sequence");
  uint64_t hw = 0;
  if (current.found && !DecodeU64(current.value, &hw)) {
    throw RampError(ramp::Status::Corruption("the row-id sequence is not 8 bytes"),
                    "reading the row-id sequence");
  }
  high_water_[ks.id] = HighWaterEntry{hw, std::chrono::steady_clock::now()};
  return hw;
}

bool Session::CachedHighWater(ramp::KeyspaceId ks, std::chrono::milliseconds max_age,
                              uint64_t* hw) {
  auto it = high_water_.find(ks);
  if (it == high_water_.end() || std::chrono::steady_clock::now() - it->second.at > max_age) {
    return false;
  }
  *hw = it->second.hw;
  return true;
}

Session::KeyspaceSize Session::SizeOf(ramp::KeyspaceId ks, std::chrono::milliseconds max_age) {
  const auto now = std::chrono::steady_clock::now();
  if (sizes_at_ == std::chrono::steady_clock::time_point{} || now - sizes_at_ > max_age) {
    std::vector<ramp::PartitionStatus> partitions;
    Check(client().Partitions(&partitions), "reading the partition table");
    sizes_.clear();
    for (const ramp::PartitionStatus& p : partitions) {
      KeyspaceSize& size = sizes_[p.id.keyspace];
      size.keys += p.keys;
      size.bytes += p.bytes;
    }
    sizes_at_ = now;
  }
  auto it = sizes_.find(ks);
  return it == sizes_.end() ? KeyspaceSize{} : it->second;
}

void Session::RememberVersion(ramp::KeyspaceId ks, uint64_t rowid, const ramp::Timestamp& ts) {
  versions_.Put(RowRef{ks, rowid}, ts);
}

bool Session::RecallVersion(ramp::KeyspaceId ks, uint64_t rowid, ramp::Timestamp* ts) const {
  const ramp::Timestamp* found = versions_.Find(RowRef{ks, rowid});
  if (found == nullptr) return false;
  *ts = *found;
  return true;
}

// The statement whose prefetched rows are kept: its start time and command id (a command
// that wrote makes the next one see its writes; prefetched rows must not hide them).
bool Session::CurrentPrefetchTag() {
  const std::pair<int64_t, uint32_t> tag{GetCurrentStatementStartTimestamp(),
                                         GetCurrentCommandId(false)};
  if (tag == prefetch_tag_) return true;
  prefetched_.clear();
  prefetched_bytes_ = 0;
  prefetch_tag_ = tag;
  return false;
}

void Session::Prefetch(ramp::KeyspaceId ks, uint64_t rowid, const ramp::Timestamp& ts, bool live,
                       std::string value) {
  CurrentPrefetchTag();
  const size_t bytes = value.size() + 64;
  if (prefetched_bytes_ + bytes > kMaxPrefetchedBytes) {
    // Only the rows of the lookups just made matter (their fetches follow them): start over
    // rather than stop keeping them.
    prefetched_.clear();
    prefetched_bytes_ = 0;
  }
  prefetched_bytes_ += bytes;
  prefetched_[RowRef{ks, rowid}] = PrefetchedRow{ts, live, std::move(value)};
}

const Session::PrefetchedRow* Session::Prefetched(ramp::KeyspaceId ks, uint64_t rowid) {
  if (prefetched_.empty() || !CurrentPrefetchTag()) return nullptr;
  auto it = prefetched_.find(RowRef{ks, rowid});
  return it == prefetched_.end() ? nullptr : &it->second;
}

// Rows tracked per statement at most (reads beyond it are read-atomic per request only).
constexpr size_t kMaxStatementRows = size_t{1} << 20;
// How long a RAMP commit may take to reach every partition (generously).
constexpr uint64_t kInFlightCommitMs = 2000;

void Session::CurrentStatementTag() {
  const std::pair<int64_t, uint32_t> tag{GetCurrentStatementStartTimestamp(),
                                         GetCurrentCommandId(false)};
  if (tag == statement_tag_) return;
  statement_tag_ = tag;
  // One snapshot per statement: every row it reads, in however many requests, is the newest
  // version committed before the statement started (or, by RAMP's repair, one of the same
  // transaction). Like heap's statement snapshot in READ COMMITTED, a transaction committing
  // meanwhile is invisible to the whole statement: an UPDATE then finds the old version and
  // fails its commit with a conflict instead of finding neither version.
  // (ramp.debug_unchecked_lookups, a test switch, reads the latest versions as before.)
  // The snapshot is the statement's start, not the moment of its first read: an index scan
  // may have loaded its batch of entries before that, and a transaction committing in
  // between must not be visible (its new row's entry would be missing from the batch and its
  // deletion of the old row visible: an UPDATE would find neither). HLC time is
  // milliseconds << 16; the snapshot takes the whole start millisecond. Commits of ramp
  // writes get a timestamp in the millisecond after their last write and are acknowledged
  // only once the clock got there (xact.cpp): a commit acknowledged before this statement
  // started is visible, one whose writes came after its start is not.
  if (reader_ != nullptr) {
    ramp::Timestamp snapshot;
    if (!guc::debug_unchecked_lookups) {
      const int64_t unix_ms =
          GetCurrentStatementStartTimestamp() / 1000 +
          (int64_t{POSTGRES_EPOCH_JDATE} - int64_t{UNIX_EPOCH_JDATE}) * SECS_PER_DAY * 1000;
      snapshot = ramp::Timestamp{(static_cast<uint64_t>(unix_ms) << 16) | 0xFFFF, ~uint64_t{0}};
      if (last_own_commit_ > snapshot) snapshot = last_own_commit_;
    }
    reader_->SetReadSnapshot(snapshot);
  }
  statement_need_.clear();
  statement_read_.clear();
  statement_tracking_ = true;
}

ramp::Timestamp Session::RequiredVersion(ramp::KeyspaceId ks, uint64_t rowid) {
  CurrentStatementTag();
  if (statement_need_.empty()) return ramp::Timestamp();
  auto it = statement_need_.find(RowRef{ks, rowid});
  return it == statement_need_.end() ? ramp::Timestamp() : it->second;
}

void Session::NoteRead(ramp::KeyspaceId ks, uint64_t rowid, const ramp::Timestamp& ts,
                       std::string_view metadata) {
  CurrentStatementTag();
  if (!statement_tracking_) return;
  if (statement_need_.size() + statement_read_.size() > kMaxStatementRows) {
    statement_tracking_ = false;
    statement_need_.clear();
    statement_read_.clear();
    return;
  }
  statement_read_[RowRef{ks, rowid}] = ts;
  // Bulk writes name partitions, not keys: nothing per row to check. Their mode byte says so
  // without decoding the partition list of every row a scan-sized fetch reads.
  if (metadata.empty() || ts.zero() ||
      static_cast<uint8_t>(metadata[0]) !=
          static_cast<uint8_t>(ramp::record::Metadata::Mode::kKeys)) {
    return;
  }
  ramp::record::Metadata md;
  if (!ramp::record::DecodeMetadata(metadata, &md).ok()) return;
  // A commit younger than this may still be on its way to some partitions; older ones
  // are complete (unless their client died mid-commit), and their deletions may have been
  // forgotten by the servers' GC (a row then reads as never written: not a fracture).
  const bool recent = ts.time + (kInFlightCommitMs << 16) > ramp::HybridClock::PhysicalNow();
  for (const auto& sib : md.keys) {
    uint64_t sib_rowid = 0;
    if (!DecodeRowKey(sib.key, &sib_rowid)) continue;  // index entries, sequences
    const RowRef ref{sib.keyspace, sib_rowid};
    if (ref == RowRef{ks, rowid}) continue;
    auto read = statement_read_.find(ref);
    if (read != statement_read_.end() && read->second < ts && (!read->second.zero() || recent)) {
      // Read earlier at an older version (or not at all, while the commit was in flight):
      // this statement saw the transaction half committed -- e.g. an UPDATE's new row not
      // yet committed at its partition and then the old row deleted at its own. Going on
      // could miss both versions of a row. 40001: the statement can be retried.
      throw RampError(ramp::Status::Conflict(
                          "this statement read a row before and another row after the commit "
                          "of the transaction that wrote both (" +
                          ts.ToString() + ")"),
                      "reading rows of a ramp table");
    }
    auto [need, inserted] = statement_need_.emplace(ref, ts);
    if (!inserted && need->second < ts) need->second = ts;
  }
}

void Session::RowTimestamps::Put(const RowRef& r, const ramp::Timestamp& ts) {
  auto [it, inserted] = map_.insert_or_assign(r, ts);
  if (!inserted) return;
  order_.push_back(r);
  if (order_.size() > capacity_) {
    map_.erase(order_.front());
    order_.pop_front();
  }
}

const ramp::Timestamp* Session::RowTimestamps::Find(const RowRef& r) const {
  auto it = map_.find(r);
  return it == map_.end() ? nullptr : &it->second;
}

void Session::RowTimestamps::Clear() {
  map_.clear();
  order_.clear();
}

}  // namespace pgramp
