#include "checker/atomicity_checker.h"

#include <chrono>
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
  if (!first_fracture.empty()) s += "; first fractured read: " + first_fracture;
  if (!error.ok()) s += "; error: " + error.ToString();
  return s;
}

namespace {

struct Shared {
  const AtomicityCheckOptions* options;
  std::atomic<bool> stop{false};
  std::mutex mu;
  AtomicityReport report;

  void Fail(const Status& s) {
    std::lock_guard lock(mu);
    if (report.error.ok()) report.error = s;
    stop = true;
  }
  bool Tolerated(const Status& s) {
    if (options->tolerate_unavailable &&
        (s.Is(Status::Code::kUnavailable) || s.Is(Status::Code::kTimeout))) {
      std::lock_guard lock(mu);
      report.errors_tolerated++;
      return true;
    }
    return false;
  }
};

bool OpenClient(Shared& sh, uint64_t id, std::unique_ptr<Client>* client) {
  ClientOptions o = sh.options->client;
  o.client_id = id;
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
  if (!OpenClient(sh, 0x1000 + index, &client)) return;
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
    Status st = txn->Commit();
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
  if (!OpenClient(sh, 0x2000 + index, &client)) return;
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
    Status st = txn->GetAll(items, &results);
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
        sh.report.first_fracture = seen;
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
  while (!sh.stop && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sh.stop = true;
  for (auto& t : threads) t.join();
  return sh.report;
}

}  // namespace ramp::checker
