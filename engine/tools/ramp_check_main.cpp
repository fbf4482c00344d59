// ramp_check: runs the read-atomicity checker against a running cluster.
// Exit status: 0 no fractured read, 1 fractured reads seen, 2 error.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "checker/atomicity_checker.h"
#include "flags.h"
#include "ramp/log.h"
#include "ramp/transport/transport.h"

namespace {
// SIGINT/SIGTERM end the run early; the report (and the ledger) are still written.
std::atomic<bool> g_cancel{false};
void OnSignal(int) {
  g_cancel.store(true);
}

const char* kUsage = R"(usage: ramp_check --nodes URIS [options]

Writers write one tag to every key of a group spread over partitions and servers; readers
read whole groups and report fractured reads (tags that differ).

  --nodes URIS          servers (comma-separated tcp://..., shm://...)
  --token-file FILE     the cluster token
  --read-path P         rpc, get+, get* (default get*)
  --duration-ms N       (default 5000; SIGINT or SIGTERM ends the run early, with its report)
  --writers N --readers N --groups N --keys N
  --timeout-ms N        how long a request may wait for the cluster (default 10000)
  --tolerate-unavailable  retry through server restarts instead of failing
  --tolerate-faults     also count and retry conflicts, aborts, moved partitions (faults)
  --ledger FILE         every writer transaction also writes a key of its own; the keys and
                        tags of the acknowledged commits are written to FILE at the end
  --verify-ledger FILE  no run: read back every key of FILE (lost: missing or another
                        value), then write every group once more with the versions read as
                        expected ones (fails while a transaction still holds a key
                        prepared). Exit 1 when a commit is lost or a group cannot be written
  --no-round2           debug: disable RAMP's second round (must produce fractured reads)
  --commit-delay-us N   debug: stagger COMMIT between servers
  --migrate             move the partitions of the checker's keys between the servers, one
                        after the other, for the whole run (ramp.migrate_partition's path)
)";
}  // namespace

int main(int argc, char** argv) {
  using namespace ramp;
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  tools::Flags flags({"nodes", "token-file", "read-path", "duration-ms", "writers", "readers",
                      "groups", "keys", "commit-delay-us", "ledger", "verify-ledger", "timeout-ms"},
                     {"help", "no-round2", "tolerate-unavailable", "tolerate-faults", "migrate"});
  Status st = flags.Parse(argc, argv);
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "ramp_check: %s\n", s.ToString().c_str());
    return 2;
  };
  if (!st.ok()) return fail(st);
  if (flags.Has("help") || !flags.Has("nodes")) {
    std::fputs(kUsage, flags.Has("help") ? stdout : stderr);
    return flags.Has("help") ? 0 : 2;
  }
  checker::AtomicityCheckOptions o;
  st = transport::ParseEndpointList(flags.Get("nodes"), &o.client.seeds);
  if (!st.ok()) return fail(st);
  o.client.provider = o.client.seeds[0].provider;
  if (flags.Has("read-path") && !ParseReadPath(flags.Get("read-path"), &o.client.read_path)) {
    return fail(Status::InvalidArgument("unknown --read-path " + flags.Get("read-path")));
  }
  if (o.client.provider == transport::Provider::kTcp) o.client.write_path = WritePath::kRpc;
  if (flags.Has("token-file")) {
    st = transport::ReadTokenFile(flags.Get("token-file"), &o.client.token);
    if (!st.ok()) return fail(st);
  }
  long v = 0;
  if (!(st = flags.GetInt("duration-ms", 5000, 1, 86400000, &v)).ok()) return fail(st);
  o.duration_ms = static_cast<int>(v);
  if (!(st = flags.GetInt("writers", 2, 0, 255, &v)).ok()) return fail(st);
  o.writers = static_cast<int>(v);
  if (!(st = flags.GetInt("readers", 2, 0, 1024, &v)).ok()) return fail(st);
  o.readers = static_cast<int>(v);
  if (!(st = flags.GetInt("groups", 8, 1, 1 << 20, &v)).ok()) return fail(st);
  o.groups = static_cast<int>(v);
  if (!(st = flags.GetInt("keys", 6, 2, 64, &v)).ok()) return fail(st);
  o.keys_per_group = static_cast<int>(v);
  if (!(st = flags.GetInt("commit-delay-us", 0, 0, 10000000, &v)).ok()) return fail(st);
  o.client.debug_commit_delay_us = static_cast<int>(v);
  if (!(st = flags.GetInt("timeout-ms", 10000, 1, 3600000, &v)).ok()) return fail(st);
  o.client.timeout_ms = static_cast<int>(v);
  o.client.disable_round2 = flags.Has("no-round2");
  o.tolerate_unavailable = flags.Has("tolerate-unavailable") || flags.Has("tolerate-faults");
  o.tolerate_transient = flags.Has("tolerate-faults");
  // Under faults the client warns about every ABORT a dead server did not acknowledge.
  if (o.tolerate_transient) SetLogLevel(LogLevel::kError);

  if (flags.Has("verify-ledger")) {
    std::FILE* f = std::fopen(flags.Get("verify-ledger").c_str(), "r");
    if (f == nullptr) {
      return fail(Status::FromErrno("opening " + flags.Get("verify-ledger"), errno));
    }
    std::vector<std::pair<std::string, std::string>> ledger;
    char line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      std::string text(line);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      const size_t space = text.find(' ');
      if (text.empty()) continue;
      if (space == std::string::npos) {
        std::fclose(f);
        return fail(Status::InvalidArgument("ledger line without a tag: '" + text + "'"));
      }
      ledger.emplace_back(text.substr(0, space), text.substr(space + 1));
    }
    std::fclose(f);
    checker::LedgerReport lr = checker::VerifyLedger(o, ledger);
    std::printf("ramp_check: %s\n", lr.Summary().c_str());
    if (!lr.error.ok()) return 2;
    return lr.lost == 0 && lr.rewrite_error.empty() ? 0 : 1;
  }

  // The ledger of acknowledged commits: a prefix of this run's own, so that runs never
  // share ledger keys.
  std::mutex ledger_mu;
  std::vector<uint64_t> acknowledged;
  if (flags.Has("ledger")) {
    char prefix[40];
    std::snprintf(
        prefix, sizeof(prefix), "ledger/%016llx/",
        static_cast<unsigned long long>(std::random_device{}()) << 32 | std::random_device{}());
    o.ledger_prefix = prefix;
    o.on_commit = [&](int, uint64_t tag) {
      std::lock_guard lock(ledger_mu);
      acknowledged.push_back(tag);
    };
  }

  // Continuous migrations of the checker's partitions (DESIGN §7).
  std::atomic<bool> done{false};
  std::atomic<int> moves{0};
  Status move_error;
  std::thread mover;
  if (flags.Has("migrate")) {
    mover = std::thread([&] {
      std::unique_ptr<Client> c;
      ClientOptions co = o.client;
      if (!(move_error = Client::Open(co, &c)).ok()) return;
      std::vector<PartitionId> parts;
      for (int g = 0; g < o.groups; g++) {
        for (int m = 0; m < o.keys_per_group; m++) {
          const PartitionId p{o.keyspace, BucketOf(checker::GroupMemberKey(g, m), kDefaultBuckets)};
          if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.push_back(p);
        }
      }
      std::mt19937 rng(1);
      while (!done.load()) {
        const PartitionId p = parts[rng() % parts.size()];
        std::vector<PartitionStatus> all;
        if (!c->Partitions(&all).ok()) continue;
        uint32_t owner = UINT32_MAX;
        for (const auto& s : all) {
          if (s.id == p) owner = s.owner;
        }
        if (owner == UINT32_MAX || c->node_count() < 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          continue;
        }
        const uint32_t to = (owner + 1 + rng() % (c->node_count() - 1)) % c->node_count();
        Status st = c->MigratePartition(p, to);
        if (st.ok()) {
          moves++;
        } else if (!st.Is(Status::Code::kNotFound)) {
          move_error = st;
          return;
        }
      }
    });
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  o.cancel = &g_cancel;
  checker::AtomicityReport r = checker::RunAtomicityCheck(o);
  done.store(true);
  if (mover.joinable()) mover.join();
  std::printf("ramp_check: %s\n", r.Summary().c_str());
  if (flags.Has("ledger")) {
    std::FILE* f = std::fopen(flags.Get("ledger").c_str(), "w");
    if (f == nullptr) return fail(Status::FromErrno("creating " + flags.Get("ledger"), errno));
    for (uint64_t tag : acknowledged) {
      std::fprintf(f, "%s%llu %llu\n", o.ledger_prefix.c_str(),
                   static_cast<unsigned long long>(tag), static_cast<unsigned long long>(tag));
    }
    if (std::fclose(f) != 0) return fail(Status::FromErrno("writing the ledger", errno));
    std::printf("ramp_check: %zu acknowledged commits in the ledger %s\n", acknowledged.size(),
                flags.Get("ledger").c_str());
  }
  if (flags.Has("migrate")) {
    std::printf("ramp_check: %d migrations during the run\n", moves.load());
    if (!move_error.ok()) return fail(move_error.Annotate("migrating"));
  }
  if (!r.error.ok()) return 2;
  return r.fractured == 0 ? 0 : 1;
}
