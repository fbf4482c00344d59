#include "checker/atomicity_checker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace ramp::checker {

std::string GroupMemberKey(int group, int member) {
  return "group" + std::to_string(group) + "/member" + std::to_string(member);
}

std::string AtomicityReport::Summary() const {
  std::string s = std::to_string(commits) + " commits, " + std::to_string(reads) + " reads, " +
                  std::to_string(fractured) + " fractured";
  if (errors_tolerated) s += ", " + std::to_string(errors_tolerated) + " errors tolerated";
  s += ", longest wait " + std::to_string(max_wait_us / 1000) + " ms";
  if (!first_fracture.empty()) s += "; first fractured read: " + first_fracture;
  if (!error.ok()) s += "; error: " + error.ToString();
  return s;
}

namespace {

uint64_t NowUs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct Shared {
  const AtomicityCheckOptions* options;
  std::atomic<bool> stop{false};
  std::mutex mu;
  AtomicityReport report;

  void Waited(uint64_t started_us) {
    const uint64_t w = NowUs() - started_us;
    std::lock_guard lock(mu);
    report.max_wait_us = std::max(report.max_wait_us, w);
  }
  void Fail(const Status& s) {
    std::lock_guard lock(mu);
    if (report.error.ok()) report.error = s;
    stop = true;
  }
  bool Tolerated(const Status& s) {
    const bool unavailable = s.Is(Status::Code::kUnavailable) || s.Is(Status::Code::kTimeout);
    const bool transient = s.Is(Status::Code::kConflict) || s.Is(Status::Code::kAborted) ||
                           s.Is(Status::Code::kBusy) || s.Is(Status::Code::kMoved);
    if ((options->tolerate_unavailable && unavailable) ||
        (options->tolerate_transient && (unavailable || transient))) {
      {
        std::lock_guard lock(mu);
        report.errors_tolerated++;
      }
      // A server that refuses at once (down, recovering) must not make the threads spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return true;
    }
    return false;
  }
};

// Every client draws its own random id (ClientOptions::client_id = 0): commit timestamps are
// (clock, client id), and two clients with one id (two checkers at once, e.g. a probe of the
// fault harness beside its workload) would give two transactions the same timestamp.
bool OpenClient(Shared& sh, std::unique_ptr<Client>* client) {
  ClientOptions o = sh.options->client;
  o.client_id = 0;
  for (;;) {
    Status st = Client::Open(o, client);
    if (st.ok()) return true;
    if (!sh.Tolerated(st) || sh.stop) {
      if (!sh.stop) sh.Fail(st.Annotate("open client"));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Writer(Shared& sh, int index) {
  const auto& o = *sh.options;
  std::unique_ptr<Client> client;
  if (!OpenClient(sh, &client)) return;
  {
    std::lock_guard lock(sh.mu);
    sh.report.writer_client_ids.push_back(client->client_id());
  }
  std::mt19937_64 rng(index * 7919 + 1);
  uint64_t counter = 0;
  std::vector<std::string> keys(o.keys_per_group);
  while (!sh.stop) {
    const int g = static_cast<int>(rng() % o.groups);
    // Tags are unique across writers: writer index in the low bits.
    const uint64_t tag = (++counter << 8) | static_cast<uint64_t>(index);
    const std::string value = std::to_string(tag);
    auto txn = client->Begin();
    for (int m = 0; m < o.keys_per_group; m++) {
      Status st = txn->Put(o.keyspace, GroupMemberKey(g, m), value);
      if (!st.ok()) return sh.Fail(st);
    }
    if (!o.ledger_prefix.empty()) {
      Status st = txn->Put(o.keyspace, o.ledger_prefix + value, value);
      if (!st.ok()) return sh.Fail(st);
    }
    const uint64_t started = NowUs();
    Status st = txn->Commit();
    sh.Waited(started);
    if (!st.ok()) {
      if (sh.Tolerated(st)) continue;
      return sh.Fail(st.Annotate("writer commit"));
    }
    if (o.on_commit) o.on_commit(g, tag);
    std::lock_guard lock(sh.mu);
    sh.report.commits++;
  }
}

void Reader(Shared& sh, int index) {
  const auto& o = *sh.options;
  std::unique_ptr<Client> client;
  if (!OpenClient(sh, &client)) return;
  std::mt19937_64 rng(index * 104729 + 3);
  std::vector<std::string> keys(o.keys_per_group);
  std::vector<ReadItem> items(o.keys_per_group);
  std::vector<ReadResult> results;
  while (!sh.stop) {
    const int g = static_cast<int>(rng() % o.groups);
    for (int m = 0; m < o.keys_per_group; m++) {
      keys[m] = GroupMemberKey(g, m);
      items[m] = ReadItem{o.keyspace, keys[m], Timestamp()};
    }
    auto txn = client->Begin();
    const uint64_t started = NowUs();
    Status st = txn->GetAll(items, &results);
    sh.Waited(started);
    if (!st.ok()) {
      if (sh.Tolerated(st)) continue;
      return sh.Fail(st.Annotate("reader"));
    }
    bool fractured = false;
    for (int m = 1; m < o.keys_per_group; m++) {
      if (results[m].found != results[0].found || results[m].value != results[0].value) {
        fractured = true;
      }
    }
    std::lock_guard lock(sh.mu);
    sh.report.reads++;
    if (fractured) {
      sh.report.fractured++;
      if (sh.report.first_fracture.empty()) {
        std::string seen = "group " + std::to_string(g) + ":";
        for (int m = 0; m < o.keys_per_group; m++) {
          seen.append(" ").append(results[m].found ? results[m].value : std::string("-"));
        }
        // When (UTC), to line it up with the faults of a harness and the servers' logs.
        const auto now = std::chrono::system_clock::now();
        const time_t secs = std::chrono::system_clock::to_time_t(now);
        const long ms = static_cast<long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
            1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        char when[48];
        std::snprintf(when, sizeof(when), " at %02d:%02d:%02d.%03ld UTC", tm.tm_hour, tm.tm_min,
                      tm.tm_sec, ms);
        sh.report.first_fracture = seen + when;
      }
      if (o.stop_at_first_fracture) sh.stop = true;
    }
  }
}

}  // namespace

AtomicityReport RunAtomicityCheck(const AtomicityCheckOptions& options) {
  Shared sh;
  sh.options = &options;
  std::vector<std::thread> threads;
  for (int i = 0; i < options.writers; i++) threads.emplace_back(Writer, std::ref(sh), i);
  for (int i = 0; i < options.readers; i++) threads.emplace_back(Reader, std::ref(sh), i);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.duration_ms);
  while (!sh.stop && std::chrono::steady_clock::now() < deadline &&
         (options.cancel == nullptr || !options.cancel->load())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sh.stop = true;
  for (auto& t : threads) t.join();
  return sh.report;
}

std::string LedgerReport::Summary() const {
  std::string s = "ledger: " + std::to_string(acknowledged) + " acknowledged commits, " +
                  std::to_string(lost) + " lost";
  if (!first_lost.empty()) s += " (first: " + first_lost + ")";
  s += "; " + std::to_string(groups_rewritten) + " groups rewritten";
  if (!rewrite_error.empty()) s += ", a group could not be written: " + rewrite_error;
  if (!error.ok()) s += "; error: " + error.ToString();
  return s;
}

LedgerReport VerifyLedger(const AtomicityCheckOptions& options,
                          const std::vector<std::pair<std::string, std::string>>& ledger) {
  LedgerReport r;
  r.acknowledged = ledger.size();
  std::unique_ptr<Client> client;
  ClientOptions co = options.client;
  co.client_id = 0;  // a random one (see OpenClient)
  if (!(r.error = Client::Open(co, &client)).ok()) return r;
  // Reads in batches: every read is a RAMP read of the latest committed versions.
  constexpr size_t kBatch = 256;
  std::vector<ReadItem> items;
  std::vector<ReadResult> results;
  for (size_t at = 0; at < ledger.size(); at += kBatch) {
    const size_t n = std::min(kBatch, ledger.size() - at);
    items.clear();
    for (size_t i = 0; i < n; i++) {
      items.push_back(ReadItem{options.keyspace, ledger[at + i].first, Timestamp()});
    }
    auto txn = client->Begin();
    if (!(r.error = txn->GetAll(items, &results)).ok()) return r;
    for (size_t i = 0; i < n; i++) {
      const auto& [key, tag] = ledger[at + i];
      if (results[i].found && results[i].value == tag) continue;
      r.lost++;
      if (r.first_lost.empty()) {
        r.first_lost = key + " read " + (results[i].found ? results[i].value : std::string("-")) +
                       ", acknowledged " + tag;
      }
    }
  }
  // No transaction of the run may still hold a key prepared: write every group again, each
  // key with the version just read as the expected one (a key another transaction holds
  // prepared fails the commit with Conflict).
  std::vector<std::string> keys(options.keys_per_group);
  for (int g = 0; g < options.groups; g++) {
    items.clear();
    for (int m = 0; m < options.keys_per_group; m++) {
      keys[m] = GroupMemberKey(g, m);
      items.push_back(ReadItem{options.keyspace, keys[m], Timestamp()});
    }
    auto txn = client->Begin();
    Status st = txn->GetAll(items, &results);
    for (int m = 0; m < options.keys_per_group && st.ok(); m++) {
      st = txn->Put(options.keyspace, keys[m], "final", &results[m].ts);
    }
    if (st.ok()) st = txn->Commit();
    if (!st.ok()) {
      if (r.rewrite_error.empty()) {
        r.rewrite_error = "group " + std::to_string(g) + ": " + st.ToString();
      }
      continue;
    }
    r.groups_rewritten++;
  }
  return r;
}

}  // namespace ramp::checker
