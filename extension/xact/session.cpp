// The connection to the ramp cluster, its errors, and the read session of the transaction.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "ramp/hlc.h"
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/shared_addresses.hpp"

#include "boundary/boundary.hpp"

namespace pgramp {

namespace {

constexpr auto kFailureQuiet = std::chrono::seconds(10);

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
  reads_.reset();  // a ReadSession must not outlive its Client
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
  options.address_cache = SharedAddressCache();
  // A commit brings back where its rows now live: the next read of them, by any backend of
  // this server, is one-sided.
  options.learn_commit_addresses = true;
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

ramp::ReadSession& Session::reads() {
  ramp::Client& c = client();
  if (reads_ == nullptr) reads_ = c.NewReadSession();
  // The statement: its start time and command id (a command that wrote makes the next one
  // see its writes; prefetched rows must not hide them).
  reads_->SetStatement(ramp::StatementTag{StatementStart(), GetCurrentCommandId(false)},
                       StatementSnapshot());
  return *reads_;
}

// One snapshot per statement: every row it reads, in however many requests, is the newest
// version committed before the statement started (or, by RAMP's repair, one of the same
// transaction). Like heap's statement snapshot in READ COMMITTED, a transaction committing
// meanwhile is invisible to the whole statement: an UPDATE then finds the old version and
// fails its commit with a conflict instead of finding neither version.
// (ramp.debug_unchecked_lookups, a test switch, reads the latest versions as before.)
// The snapshot is the statement's start, not the moment of its first read: an index scan
// may have loaded its batch of entries before that, and a transaction committing in
// between must not be visible (its new row's entry would be missing from the batch and its
// deletion of the old row visible: an UPDATE would find neither). HLC time carries the
// microsecond (ramp/hlc.h); the snapshot takes the whole start microsecond
// (HybridClock::SnapshotAtMicros). Commits of ramp writes get a timestamp in a microsecond
// after their last write (HybridClock::NextMicro) and are acknowledged only once the clock
// got there (HybridClock::Reached, xact.cpp): a commit acknowledged before this statement
// started is visible, one whose writes came after its start is not.
int64_t Session::StatementStart() const {
  return std::max<int64_t>(GetCurrentStatementStartTimestamp(), nested_start_);
}

ramp::Timestamp Session::StatementSnapshot() const {
  if (guc::debug_unchecked_lookups) return ramp::Timestamp();
  const int64_t unix_us =
      StatementStart() +
      (int64_t{POSTGRES_EPOCH_JDATE} - int64_t{UNIX_EPOCH_JDATE}) * SECS_PER_DAY * 1000000;
  ramp::Timestamp snapshot{ramp::HybridClock::SnapshotAtMicros(static_cast<uint64_t>(unix_us)),
                           ~uint64_t{0}};
  if (last_own_commit_ > snapshot) snapshot = last_own_commit_;
  return snapshot;
}

void Session::Define(const ramp::KeyspaceRef& ks) {
  ramp::Client& c = client();
  if (defined_.count(ks.id) != 0) return;
  c.DefineKeyspace(ks.id, ks.buckets, ks.grouped);
  defined_.insert(ks.id);
}

void Session::Check(const ramp::Status& status, std::string_view context, bool keep_on_cancel) {
  if (status.ok()) return;
  if (NeedsReconnect(status) && !(keep_on_cancel && status.Is(ramp::Status::Code::kCancelled))) {
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
  reads_.reset();  // its remembered versions, statement bounds and prefetched rows
  nested_start_ = 0;
  // A broken client is replaced at its next use (client()), not here: at an abort, scans
  // that functions and triggers opened through SPI still live in memory that PostgreSQL
  // frees only after the abort callbacks, and they read through the client (a backend
  // crashed freeing a scan's buffers into a client already gone).
}

Session::KeyspaceSize Session::SizeOf(ramp::KeyspaceId ks, std::chrono::milliseconds max_age) {
  const auto now = std::chrono::steady_clock::now();
  if (sizes_at_ == std::chrono::steady_clock::time_point{} || now - sizes_at_ > max_age) {
    std::vector<ramp::PartitionStatus> partitions;
    Check(client().Partitions(&partitions), "reading the partition table");
    std::unordered_map<ramp::KeyspaceId, KeyspaceSize> fresh;
    for (const ramp::PartitionStatus& p : partitions) {
      KeyspaceSize& size = fresh[p.id.keyspace];
      size.keys += p.keys;
      size.bytes += p.bytes;
    }
    // Own commits since the last refresh: at least the rows they committed (a load planned
    // right after it). Not the old cached figure, which would keep a table at its size
    // while others delete from it as long as this backend commits to it.
    for (const auto& [id, own] : own_since_refresh_) {
      KeyspaceSize& size = fresh[id];
      size.keys = std::max(size.keys, own.keys);
      size.bytes = std::max(size.bytes, own.bytes);
    }
    own_since_refresh_.clear();
    sizes_ = std::move(fresh);
    sizes_at_ = now;
  }
  auto it = sizes_.find(ks);
  return it == sizes_.end() ? KeyspaceSize{} : it->second;
}

}  // namespace pgramp
