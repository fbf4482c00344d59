// The YCSB reproduction of paper 000 §5: 4 rampd servers, 8 client threads in one process,
// 1 KB values, a table of 1000 keys, uniform or zipfian keys. A transaction is read-only
// (GET of txn-size keys) with probability read-ratio, write-only (PUT of txn-size keys)
// otherwise, as in Bailis's YCSB modification that the paper reuses.
//
// Modes (paper's names): S2PL over sockets, RAMP(GET,PUT) over sockets ("rpc", tcp),
// RAMP(GET+,PUT+) (rings over shm), RAMP(GET*,PUT+) (one-sided reads over shm).
//
// Prints one CSV row per measured point to --csv and RESULT lines for the ratios.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ramp/client.h"
#include "ramp/log.h"
#include "test_cluster.h"
#include "zipfian.h"

namespace ramp::bench {
namespace {

using transport::Provider;

struct Mode {
  const char* name;
  Protocol protocol;
  Provider provider;
  ReadPath read;
  WritePath write;
};

const Mode kModes[] = {
    {"s2pl", Protocol::kS2pl, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc},
    {"ramp_rpc", Protocol::kRamp, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc},
    {"ramp_getplus", Protocol::kRamp, Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus},
    {"ramp_getstar", Protocol::kRamp, Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus},
};

struct Config {
  int threads = 8;
  int keys = 1000;
  int value_bytes = 1000;
  int warmup_ms = 300;
  int measure_ms = 3000;
  bool quick = false;
  std::string csv = "bench/results/ycsb.csv";
  // --durable: servers get data directories (group commit, replies after fdatasync).
  bool durable = false;
  // --point MODE:DIST:READPCT:SIZE measures that one point only (bench/durability/run).
  std::string point;
  // --seeds LIST --token-file F: run against servers already running (bench/netns/run starts
  // them in network namespaces) instead of starting 4 on loopback; every mode then uses tcp.
  std::string seeds;
  std::string token;
  // --server-arg ARG (repeatable): passed to every rampd this process starts (A/B runs).
  std::vector<std::string> server_args;
};

// Client options for a mode: from the cluster this process started, or for the external
// servers of --seeds (tcp only).
struct Target {
  const testing::TestCluster* cluster = nullptr;
  std::vector<transport::Endpoint> seeds;
  std::string token;
  ClientOptions For(Provider provider, ReadPath read, WritePath write) const {
    if (cluster != nullptr) return cluster->ClientOptionsFor(provider, read, write);
    ClientOptions o;
    o.seeds = seeds;
    o.provider = Provider::kTcp;
    o.read_path = read;
    o.write_path = write;
    o.token = token;
    o.timeout_ms = 10000;
    return o;
  }
};

struct Point {
  const Mode* mode;
  std::string distribution;
  int read_pct;
  int txn_size;
  double tps = 0;
  uint64_t txns = 0, aborts = 0;
  ClientStats stats;
};

std::string KeyName(int i) {
  return "user" + std::to_string(i);
}
constexpr KeyspaceId kUsertable = 0x05E27AB1E;

Status Load(const Target& cluster, const Config& cfg) {
  std::unique_ptr<Client> c;
  RAMP_RETURN_IF_ERROR(
      Client::Open(cluster.For(Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus), &c));
  const std::string value(cfg.value_bytes, 'v');
  for (int i = 0; i < cfg.keys;) {
    auto t = c->Begin();
    for (int j = 0; j < 100 && i < cfg.keys; j++, i++) {
      RAMP_RETURN_IF_ERROR(t->Put(kUsertable, KeyName(i), value));
    }
    RAMP_RETURN_IF_ERROR(t->Commit());
  }
  return Status::OK();
}

void RunPoint(const Target& cluster, const Config& cfg, Point* p) {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> txns{0}, aborts{0};
  std::vector<ClientStats> stats(cfg.threads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string failure;
  std::mutex failure_mu;
  Zipfian zipf(cfg.keys);
  for (int t = 0; t < cfg.threads; t++) {
    threads.emplace_back([&, t] {
      ClientOptions o = cluster.For(p->mode->provider, p->mode->read, p->mode->write);
      o.protocol = p->mode->protocol;
      std::unique_ptr<Client> c;
      Status st = Client::Open(o, &c);
      if (!st.ok()) {
        std::lock_guard lock(failure_mu);
        failure = st.ToString();
        failures++;
        return;
      }
      std::mt19937_64 rng(t * 1000003 + p->txn_size * 31 + p->read_pct);
      const std::string value(cfg.value_bytes, static_cast<char>('a' + t));
      std::vector<int> picked;
      std::vector<std::string> keys;
      std::vector<ReadItem> items;
      std::vector<ReadResult> results;
      uint64_t local = 0, local_aborts = 0;
      bool counted = false;
      while (!stop.load(std::memory_order_relaxed)) {
        if (!counted && measuring.load(std::memory_order_relaxed)) {
          counted = true;
          local = local_aborts = 0;
        }
        picked.clear();
        while (static_cast<int>(picked.size()) < p->txn_size) {
          int k = p->distribution == "zipfian" ? static_cast<int>(zipf.Next(rng))
                                               : static_cast<int>(rng() % cfg.keys);
          if (std::find(picked.begin(), picked.end(), k) == picked.end()) picked.push_back(k);
        }
        keys.clear();
        for (int k : picked) keys.push_back(KeyName(k));
        const bool read_txn = static_cast<int>(rng() % 100) < p->read_pct;
        for (;;) {  // retried until it commits (S2PL no-wait conflicts)
          auto txn = c->Begin();
          Status s;
          if (read_txn) {
            items.clear();
            for (const auto& k : keys) items.push_back(ReadItem{kUsertable, k, {}});
            s = txn->GetAll(items, &results);
            if (s.ok()) s = txn->Commit();
          } else {
            for (const auto& k : keys) txn->Put(kUsertable, k, value);
            s = txn->Commit();
          }
          if (s.ok()) break;
          if (!s.Is(Status::Code::kConflict)) {
            std::lock_guard lock(failure_mu);
            failure = s.ToString();
            failures++;
            return;
          }
          local_aborts++;
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
          if (stop.load()) break;
        }
        local++;
      }
      if (counted) {
        txns += local;
        aborts += local_aborts;
      }
      stats[t] = c->stats();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(cfg.warmup_ms));
  measuring = true;
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(cfg.measure_ms));
  stop = true;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& th : threads) th.join();
  if (failures) {
    std::fprintf(stderr, "ycsb: %s r%d t%d failed: %s\n", p->mode->name, p->read_pct, p->txn_size,
                 failure.c_str());
  }
  p->txns = txns;
  p->aborts = aborts;
  p->tps = static_cast<double>(txns) / secs;
  for (const auto& s : stats) {
    p->stats.one_sided_hits += s.one_sided_hits;
    p->stats.one_sided_fallbacks += s.one_sided_fallbacks;
    p->stats.round2_reads += s.round2_reads;
  }
}

}  // namespace
}  // namespace ramp::bench

int main(int argc, char** argv) {
  using namespace ramp;
  using namespace ramp::bench;
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  Config cfg;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--quick") {
      cfg.quick = true;
      cfg.measure_ms = 800;
      cfg.warmup_ms = 200;
    } else if (a == "--csv" && i + 1 < argc) {
      cfg.csv = argv[++i];
    } else if (a == "--measure-ms" && i + 1 < argc) {
      cfg.measure_ms = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      cfg.threads = std::atoi(argv[++i]);
    } else if (a == "--durable") {
      cfg.durable = true;
    } else if (a == "--server-arg" && i + 1 < argc) {
      cfg.server_args.push_back(argv[++i]);
    } else if (a == "--point" && i + 1 < argc) {
      cfg.point = argv[++i];
    } else if (a == "--seeds" && i + 1 < argc) {
      cfg.seeds = argv[++i];
    } else if (a == "--token-file" && i + 1 < argc) {
      std::ifstream in(argv[++i]);
      std::getline(in, cfg.token);
      if (cfg.token.empty()) {
        std::fprintf(stderr, "ycsb: no token in %s\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: ycsb_bench [--quick] [--csv FILE] [--measure-ms N] [--threads N]\n"
          "                  [--durable] [--point MODE:DIST:READPCT:SIZE] [--server-arg ARG]\n"
          "                  [--seeds tcp://h:p,... --token-file F]\n");
      return 2;
    }
  }
  testing::TestClusterOptions co;
  co.nodes = 4;
  co.workers = 1;
  // 1 KB values written at tens of MB/s: the arena must hold the versions kept for the GC
  // grace with room to spare, or compaction runs all the time and skews later modes.
  co.memory_mb = 1024;
  co.extra_args = {"--gc-grace-ms", "1000"};
  for (const auto& a : cfg.server_args) co.extra_args.push_back(a);
  co.data = cfg.durable;
  std::unique_ptr<testing::TestCluster> cluster;
  Target target;
  Status st;
  if (!cfg.seeds.empty()) {
    st = transport::ParseEndpointList(cfg.seeds, &target.seeds);
    if (st.ok() && cfg.token.empty()) st = Status::InvalidArgument("--seeds needs --token-file");
    if (!st.ok() || cfg.point.empty() || cfg.durable) {
      std::fprintf(stderr, "ycsb: --seeds: %s\n",
                   st.ok() ? "only with --point, without --durable" : st.ToString().c_str());
      return 2;
    }
    target.token = cfg.token;
  } else {
    st = testing::TestCluster::Start(co, &cluster);
    if (!st.ok()) {
      std::fprintf(stderr, "ycsb: cannot start servers: %s\n", st.ToString().c_str());
      return 1;
    }
    target.cluster = cluster.get();
  }
  st = Load(target, cfg);
  if (!st.ok()) {
    std::fprintf(stderr, "ycsb: load failed: %s\n", st.ToString().c_str());
    return 1;
  }

  // The points: Fig. 5 (throughput vs transaction size at 95 % reads) and Figs. 6/7
  // (throughput vs read ratio at transaction size 8), uniform; the zipfian variant of Fig. 7.
  std::vector<Point> points;
  const std::vector<int> sizes =
      cfg.quick ? std::vector<int>{1, 4, 16} : std::vector<int>{1, 2, 4, 8, 16};
  const std::vector<int> ratios =
      cfg.quick ? std::vector<int>{0, 50, 95, 100} : std::vector<int>{0, 25, 50, 75, 95, 100};
  if (!cfg.point.empty()) {
    char mode[32] = {0}, dist[16] = {0};
    int r = 0, t = 0;
    const Mode* found = nullptr;
    if (std::sscanf(cfg.point.c_str(), "%31[^:]:%15[^:]:%d:%d", mode, dist, &r, &t) == 4) {
      for (const auto& m : kModes) {
        if (std::strcmp(m.name, mode) == 0) found = &m;
      }
    }
    if (found == nullptr) {
      std::fprintf(stderr, "ycsb: bad --point '%s'\n", cfg.point.c_str());
      return 2;
    }
    Point p{found, dist, r, t};
    RunPoint(target, cfg, &p);
    std::printf("%-14s %-8s read %3d%% size %2d%s: %10.0f txn/s (aborts %llu)\n", p.mode->name,
                p.distribution.c_str(), p.read_pct, p.txn_size, cfg.durable ? " durable" : "",
                p.tps, static_cast<unsigned long long>(p.aborts));
    std::printf("RESULT ycsb_point_tps %.0f\n", p.tps);
    if (cfg.durable) {
      // What the group commit did on each server (logged when it stops).
      for (int n = 0; n < cluster->size(); n++) {
        (void)cluster->Kill(n, SIGTERM);
        const std::string log = cluster->ReadLog(n);
        const size_t at = log.rfind("log writer:");
        if (at != std::string::npos) {
          std::printf("node %d %s\n", n, log.substr(at, log.find('\n', at) - at).c_str());
        }
      }
    }
    return 0;
  }
  for (const auto& m : kModes) {
    for (int s : sizes) points.push_back(Point{&m, "uniform", 95, s});
    for (int r : ratios) points.push_back(Point{&m, "uniform", r, 8});
    for (int r : ratios) points.push_back(Point{&m, "zipfian", r, 8});
  }
  std::ofstream csv(cfg.csv);
  csv << "mode,distribution,read_pct,txn_size,threads,tps,txns,aborts,one_sided_hits,"
         "one_sided_fallbacks,round2_reads\n";
  std::map<std::string, double> tps;
  for (auto& p : points) {
    // The uniform r95 points of the size sweep and the ratio sweep at t8 coincide at
    // (95, 8): measure once.
    std::string id = std::string(p.mode->name) + "/" + p.distribution + "/r" +
                     std::to_string(p.read_pct) + "/t" + std::to_string(p.txn_size);
    if (tps.count(id)) continue;
    RunPoint(target, cfg, &p);
    tps[id] = p.tps;
    std::printf(
        "%-14s %-8s read %3d%% size %2d: %10.0f txn/s (aborts %llu, GET* hits %llu, "
        "fallbacks %llu, round-2 %llu)\n",
        p.mode->name, p.distribution.c_str(), p.read_pct, p.txn_size, p.tps,
        static_cast<unsigned long long>(p.aborts),
        static_cast<unsigned long long>(p.stats.one_sided_hits),
        static_cast<unsigned long long>(p.stats.one_sided_fallbacks),
        static_cast<unsigned long long>(p.stats.round2_reads));
    std::fflush(stdout);
    csv << p.mode->name << ',' << p.distribution << ',' << p.read_pct << ',' << p.txn_size << ','
        << cfg.threads << ',' << p.tps << ',' << p.txns << ',' << p.aborts << ','
        << p.stats.one_sided_hits << ',' << p.stats.one_sided_fallbacks << ','
        << p.stats.round2_reads << '\n';
  }
  csv.close();
  auto get = [&](const char* mode, int r, int t) {
    return tps[std::string(mode) + "/uniform/r" + std::to_string(r) + "/t" + std::to_string(t)];
  };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const int t4 = std::find(sizes.begin(), sizes.end(), 4) != sizes.end() ? 4 : sizes[1];
  std::printf("RESULT ycsb_getstar_tps_r95_t%d %.0f\n", t4, get("ramp_getstar", 95, t4));
  std::printf("RESULT ycsb_getplus_tps_r95_t%d %.0f\n", t4, get("ramp_getplus", 95, t4));
  std::printf("RESULT ycsb_rpc_tps_r95_t%d %.0f\n", t4, get("ramp_rpc", 95, t4));
  std::printf("RESULT ycsb_s2pl_tps_r95_t%d %.0f\n", t4, get("s2pl", 95, t4));
  std::printf("RESULT ratio_getstar_vs_rpc_r95_t4 %.2f\n",
              ratio(get("ramp_getstar", 95, t4), get("ramp_rpc", 95, t4)));
  std::printf("RESULT ratio_getstar_vs_getplus_r95_t4 %.2f\n",
              ratio(get("ramp_getstar", 95, t4), get("ramp_getplus", 95, t4)));
  std::printf("RESULT ratio_getplus_vs_rpc_r95_t4 %.2f\n",
              ratio(get("ramp_getplus", 95, t4), get("ramp_rpc", 95, t4)));
  std::printf("RESULT ratio_getstar_vs_rpc_r100_t8 %.2f\n",
              ratio(get("ramp_getstar", 100, 8), get("ramp_rpc", 100, 8)));
  std::printf("RESULT ratio_ramp_rpc_vs_s2pl_r95_t4 %.2f\n",
              ratio(get("ramp_rpc", 95, t4), get("s2pl", 95, t4)));
  return 0;
}
