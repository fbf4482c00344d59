// The directory and live migration (issue 11; paper 004's figures beside ours in RESULTS.md):
//  1. GET* through a cached directory entry and address vs a raw one-sided read of the same
//     bytes, and a first access through the home vs a cached one;
//  2. a partition of --mib MiB moved while readers (GET*) and a writer work on it: copy rate,
//     read availability, p99 read latency during the move vs before, the longest write stall;
//  3. the rebalancer on 4 servers under a Zipfian hot set: max/mean load before and after,
//     time to reach <= 1.25, and how often any partition moved during --steady-s seconds.
// Prints RESULT lines; writes a CSV of the migration's timeline (--csv).
//   gas_bench [--mib N] [--steady-s N] [--reads N] [--csv FILE]
//             [--only lookups|migration|rebalance]      (--reads: GET*s timed, 20000)
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client_impl.h"
#include "itest_util.h"
#include "ramp/client.h"
#include "ramp/log.h"
#include "ramp/rebalance.h"
#include "test_cluster.h"

using namespace ramp;
using Clock = std::chrono::steady_clock;

namespace {

double Us(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::unique_ptr<Client> Open(const testing::TestCluster& tc, transport::Provider p, ReadPath r,
                             WritePath w) {
  std::unique_ptr<Client> c;
  Status st = Client::Open(tc.ClientOptionsFor(p, r, w), &c);
  if (!st.ok()) {
    std::fprintf(stderr, "gas: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  return c;
}

bool Read(Client* c, KeyspaceId ks, const std::string& k) {
  auto t = c->Begin();
  ReadResult r;
  return t->Get(ks, k, &r).ok() && r.found;
}

// ---- 1. lookups ----------------------------------------------------------------------------
// The RESULT compares the median of reads-many GET*s through the cache with the median of
// as many raw one-sided reads taken after them, each timed alone by the same clock reads.
// Two cross-checks are printed beside it (not RESULTs): the same pair of reads alternated
// in one loop (both then meet the same load of a shared machine), and the cost of the two
// clock reads alone, taken off both sides.
void Lookups(const testing::TestCluster& tc, int reads) {
  const KeyspaceId ks = 0x6A50;
  auto c = Open(tc, transport::Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  const std::string k = testing::KeyOnNode(ks, 1, 3);
  auto t = c->Begin();
  t->Put(ks, k, std::string(100, 'g'));
  (void)t->Commit();
  for (int i = 0; i < 2000; i++) Read(c.get(), ks, k);
  const int kN = reads;
  std::vector<double> cached, raw, uncached;
  for (int i = 0; i < kN; i++) {
    const auto t0 = Clock::now();
    Read(c.get(), ks, k);
    cached.push_back(Us(Clock::now() - t0));
  }
  // The same bytes (the whole record, header included), one-sided, with nothing around it.
  Client::Impl& im = *c->impl();
  OneSidedAddress a;
  if (!im.addresses->Lookup(ks, k, &a)) std::exit(1);
  NodeChannel* ch = nullptr;
  if (!im.Connected(a.node, ChannelKind::kFast, &ch).ok()) std::exit(1);
  std::string buf(a.length, '\0');
  const uint32_t nodes[1] = {a.node};
  auto raw_read = [&] {
    bool done = false;
    if (!ch->conn()
             ->PostRead(buf.data(), ch->hello().arena, a.offset, a.length,
                        [&](const Status&) { done = true; })
             .ok() ||
        !im.WaitOneSided(nodes).ok() || !done) {
      std::exit(1);
    }
  };
  for (int i = 0; i < kN; i++) {
    const auto t0 = Clock::now();
    raw_read();
    raw.push_back(Us(Clock::now() - t0));
  }
  for (int i = 0; i < 2000; i++) {
    im.placements.clear();
    im.addresses = NewLocalAddressCache();
    const auto t0 = Clock::now();
    Read(c.get(), ks, k);
    uncached.push_back(Us(Clock::now() - t0));
  }
  // Cross-checks: alternated, and the timer alone.
  std::vector<double> alt_cached, alt_raw, timer;
  for (int i = 0; i < kN; i++) {
    auto t0 = Clock::now();
    Read(c.get(), ks, k);
    alt_cached.push_back(Us(Clock::now() - t0));
    t0 = Clock::now();
    raw_read();
    alt_raw.push_back(Us(Clock::now() - t0));
    t0 = Clock::now();
    timer.push_back(Us(Clock::now() - t0));
  }
  const double mc = Percentile(cached, 0.5), mr = Percentile(raw, 0.5),
               mu = Percentile(uncached, 0.5);
  const double ac = Percentile(alt_cached, 0.5), ar = Percentile(alt_raw, 0.5),
               mt = Percentile(timer, 0.5);
  // Batches of reads timed as a whole (no clock read per read, no rounding to the clock's
  // step), GET* and raw batches alternated: the median batch's time per read.
  constexpr int kBatch = 100;
  std::vector<double> batch_cached, batch_raw;
  for (int i = 0; i < std::max(1, kN / kBatch); i++) {
    auto t0 = Clock::now();
    for (int j = 0; j < kBatch; j++) Read(c.get(), ks, k);
    batch_cached.push_back(Us(Clock::now() - t0) / kBatch);
    t0 = Clock::now();
    for (int j = 0; j < kBatch; j++) raw_read();
    batch_raw.push_back(Us(Clock::now() - t0) / kBatch);
  }
  const double bc = Percentile(batch_cached, 0.5), br = Percentile(batch_raw, 0.5);
  std::printf(
      "lookups: median GET* through the cache %.3f us, raw one-sided read %.3f us (%d each), "
      "first access through the home %.2f us\n",
      mc, mr, kN, mu);
  std::printf(
      "lookups: alternated in one loop: GET* %.3f us, raw %.3f us, ratio %.2f; the clock "
      "reads alone %.3f us, ratio without them %.2f\n",
      ac, ar, ac / ar, mt, ar > mt ? (ac - mt) / (ar - mt) : 0.0);
  std::printf(
      "lookups: in alternated batches of %d (no clock read per read): GET* %.3f us, raw %.3f "
      "us, ratio %.2f\n",
      kBatch, bc, br, bc / br);
  std::printf("RESULT gas_cached_lookup_vs_raw_read_latency %.2f\n", mc / mr);
  std::printf("RESULT gas_uncached_vs_cached_latency %.2f\n", mu / mc);
}

// ---- 2. a migration under load -----------------------------------------------------------
struct Op {
  double t_s;  // since the start
  double us;
  bool ok;
  bool write;
};

void MigrationUnderLoad(const testing::TestCluster& tc, int mib, const std::string& csv) {
  const KeyspaceId ks = 0x6A60;
  auto admin = Open(tc, transport::Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  const std::string k0 = testing::KeyOnNode(ks, 0, 3);
  const PartitionId p{ks, BucketOf(k0, kDefaultBuckets)};
  std::vector<std::string> keys;  // small keys of the partition, read and written
  std::vector<std::string> bulk;
  for (int i = 0; keys.size() < 200 || bulk.size() * 65536 < (uint64_t{1} << 20) * mib; i++) {
    std::string k = "m" + std::to_string(i);
    if (BucketOf(k, kDefaultBuckets) != p.bucket) continue;
    (keys.size() < 200 ? keys : bulk).push_back(k);
  }
  for (const auto& k : keys) {
    auto t = admin->Begin();
    t->Put(ks, k, std::string(100, 'v'));
    (void)t->Commit();
  }
  const std::string big(65000, 'b');
  for (size_t i = 0; i < bulk.size(); i += 8) {
    auto t = admin->Begin();
    for (size_t j = i; j < std::min(bulk.size(), i + 8); j++) t->Put(ks, bulk[j], big);
    (void)t->Commit();
  }
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Op> ops;
  const auto start = Clock::now();
  auto worker = [&](bool writer, int seed) {
    auto c = Open(tc, transport::Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
    std::mt19937 rng(seed);
    std::vector<Op> mine;
    while (!stop.load()) {
      const std::string& k = keys[rng() % keys.size()];
      const auto t0 = Clock::now();
      bool ok;
      if (writer) {
        auto t = c->Begin();
        t->Put(ks, k, std::string(100, static_cast<char>('a' + rng() % 26)));
        ok = t->Commit().ok();
      } else {
        ok = Read(c.get(), ks, k);
      }
      const auto t1 = Clock::now();
      mine.push_back(
          Op{std::chrono::duration<double>(t0 - start).count(), Us(t1 - t0), ok, writer});
    }
    std::lock_guard lock(mu);
    ops.insert(ops.end(), mine.begin(), mine.end());
  };
  std::vector<std::thread> threads;
  threads.emplace_back(worker, false, 1);
  threads.emplace_back(worker, false, 2);
  threads.emplace_back(worker, true, 3);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double m0 = std::chrono::duration<double>(Clock::now() - start).count();
  Status st = admin->MigratePartition(p, 1);
  const double m1 = std::chrono::duration<double>(Clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop.store(true);
  for (auto& t : threads) t.join();
  if (!st.ok()) {
    std::fprintf(stderr, "gas: migration failed: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  std::vector<MigrationStatus> moves;
  (void)admin->Migrations(&moves);
  uint64_t bytes = 0;
  for (const auto& m : moves) {
    if (m.id == p) bytes = std::max(bytes, m.bytes_copied);
  }
  std::vector<double> before, during;
  uint64_t reads_during = 0, ok_during = 0;
  double max_write_ms = 0, max_write_before_ms = 0;
  for (const Op& o : ops) {
    const bool in = o.t_s >= m0 && o.t_s <= m1;
    if (o.write) {
      (in ? max_write_ms : max_write_before_ms) =
          std::max(in ? max_write_ms : max_write_before_ms, o.us / 1000);
      continue;
    }
    if (o.t_s < m0) before.push_back(o.us);
    if (in) {
      reads_during++;
      ok_during += o.ok;
      if (o.ok) during.push_back(o.us);
    }
  }
  const double p99b = Percentile(before, 0.99), p99d = Percentile(during, 0.99);
  std::printf(
      "migration: %.1f MiB of records (%d MiB loaded, the rest the writer's versions) moved in "
      "%.3f s under load; "
      "reads p99 %.1f us before, %.1f us during (%llu reads); longest write %.2f ms "
      "(%.2f ms before)\n",
      bytes / 1048576.0, mib, m1 - m0, p99b, p99d, static_cast<unsigned long long>(reads_during),
      max_write_ms, max_write_before_ms);
  std::printf("RESULT migration_mb_per_sec %.1f\n", bytes / 1048576.0 / (m1 - m0));
  std::printf("RESULT migration_read_availability %.4f\n",
              reads_during ? static_cast<double>(ok_during) / reads_during : 1.0);
  std::printf("RESULT migration_p99_read_latency_ratio %.2f\n", p99b > 0 ? p99d / p99b : 0);
  std::printf("RESULT migration_write_pause_ms %.2f\n", max_write_ms);
  if (!csv.empty()) {
    FILE* f = std::fopen(csv.c_str(), "w");
    if (f != nullptr) {
      std::fprintf(f, "t_s,reads_per_s,p99_read_us,writes_per_s,max_write_ms,migrating\n");
      std::map<int, std::vector<const Op*>> by;
      for (const Op& o : ops) by[static_cast<int>(o.t_s * 10)].push_back(&o);
      for (const auto& [slot, list] : by) {
        std::vector<double> r;
        double w = 0, maxw = 0;
        for (const Op* o : list) {
          if (o->write) {
            w++;
            maxw = std::max(maxw, o->us / 1000);
          } else {
            r.push_back(o->us);
          }
        }
        const double t = slot / 10.0;
        std::fprintf(f, "%.1f,%.0f,%.1f,%.0f,%.2f,%d\n", t, r.size() * 10.0, Percentile(r, 0.99),
                     w * 10, maxw, t + 0.1 >= m0 && t <= m1 ? 1 : 0);
      }
      std::fclose(f);
    }
  }
}

// ---- 3. the rebalancer -------------------------------------------------------------------
void Rebalance(int steady_s) {
  testing::TestClusterOptions o;
  o.nodes = 4;
  o.memory_mb = 128;
  o.extra_args = {"--rebalance-interval-ms", "3000", "--rebalance-cooldown-ms", "600000"};
  std::unique_ptr<testing::TestCluster> tc;
  if (!testing::TestCluster::Start(o, &tc).ok()) std::exit(1);
  const KeyspaceId ks = 0x6A70;
  auto admin = Open(*tc, transport::Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  // One key per bucket; bucket b is read with Zipfian popularity (theta 0.99) of rank b.
  std::vector<std::string> keys(kDefaultBuckets);
  for (int i = 0, found = 0; found < static_cast<int>(kDefaultBuckets); i++) {
    std::string k = "z" + std::to_string(i);
    std::string& slot = keys[BucketOf(k, kDefaultBuckets)];
    if (slot.empty()) {
      slot = k;
      found++;
      auto t = admin->Begin();
      t->Put(ks, k, "z");
      (void)t->Commit();
    }
  }
  std::vector<double> cdf;
  double sum = 0;
  for (size_t i = 0; i < keys.size(); i++) cdf.push_back(sum += 1.0 / std::pow(i + 1.0, 0.99));
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; r++) {
    readers.emplace_back([&, r] {
      auto c = Open(*tc, transport::Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
      std::mt19937 rng(r);
      std::uniform_real_distribution<double> u(0, sum);
      while (!stop.load()) {
        const size_t b = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
        Read(c.get(), ks, keys[std::min(b, keys.size() - 1)]);
      }
    });
  }
  const auto start = Clock::now();
  RebalancePlan plan;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // loads build, no move yet
  (void)admin->PlanRebalance(RebalanceOptions(), &plan);
  const double before = plan.imbalance_before;
  double reached_s = -1, now_imbalance = before;
  const auto deadline = start + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (!admin->PlanRebalance(RebalanceOptions(), &plan).ok()) continue;
    now_imbalance = plan.imbalance_before;
    if (now_imbalance <= 1.25) {
      reached_s = std::chrono::duration<double>(Clock::now() - start).count();
      break;
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(steady_s));
  if (admin->PlanRebalance(RebalanceOptions(), &plan).ok()) now_imbalance = plan.imbalance_before;
  stop.store(true);
  for (auto& t : readers) t.join();
  std::vector<MigrationStatus> moves;
  (void)admin->Migrations(&moves);
  std::map<PartitionId, int> per;
  int most = 0;
  for (const auto& m : moves) most = std::max(most, ++per[m.id]);
  std::printf(
      "rebalance: 4 servers, Zipfian (0.99) reads over %zu partitions: max/mean %.2f -> "
      "%.2f with %zu moves; %d s of steady load after\n",
      keys.size(), before, now_imbalance, moves.size(), steady_s);
  std::printf("RESULT rebalance_imbalance_before %.2f\n", before);
  std::printf("RESULT rebalance_imbalance_after %.2f\n", now_imbalance);
  std::printf("RESULT rebalance_seconds %.1f\n", reached_s);
  std::printf("RESULT rebalance_max_moves_per_partition %d\n", most);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  int mib = 64, steady_s = 60, reads = 20000;
  std::string csv, only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      mib = std::atoi(argv[++i]);
    } else if (a == "--steady-s" && i + 1 < argc) {
      steady_s = std::atoi(argv[++i]);
    } else if (a == "--reads" && i + 1 < argc) {
      reads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--csv" && i + 1 < argc) {
      csv = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: gas_bench [--mib N] [--steady-s N] [--reads N] [--csv FILE] [--only "
                   "lookups|migration|rebalance]\n");
      return 2;
    }
  }
  testing::TestClusterOptions o;
  o.nodes = 3;
  o.memory_mb = 2 * mib + 256;
  std::unique_ptr<testing::TestCluster> tc;
  Status st = testing::TestCluster::Start(o, &tc);
  if (!st.ok()) {
    std::fprintf(stderr, "gas: cannot start: %s\n", st.ToString().c_str());
    return 1;
  }
  if (only.empty() || only == "lookups") Lookups(*tc, reads);
  if (only.empty() || only == "migration") {
    MigrationUnderLoad(*tc, mib, csv);
    // The home's account of the move (copy rate, how long writes were paused).
    // The home's account of the move: how long it held the partition's writes (from the
    // source's release to the target's adoption), beside the longest write clients saw.
    const std::string log = tc->ReadLog(0);
    for (size_t at = log.find("writes paused"); at != std::string::npos;
         at = log.find("writes paused", at + 1)) {
      const size_t e = log.find('\n', at);
      std::printf("migration: the home held writes for %s\n",
                  log.substr(at + 14, e - at - 14).c_str());
    }
  }
  tc.reset();
  if (only.empty() || only == "rebalance") Rebalance(steady_s);
  return 0;
}
