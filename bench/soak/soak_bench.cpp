// Update-heavy soak of durable servers (issue 4): 3 rampd with --data, client threads
// overwriting a fixed set of keys (pgbench-like: the live data stays constant, every update
// makes the previous version garbage) for --seconds. Every --sample-ms the bytes the data
// directories take on disk are sampled: with compaction they must stay bounded.
// Prints CSV (elapsed_s, disk_mib, updates) to --csv and RESULT lines.
//   soak_bench [--seconds N] [--csv FILE] [--threads N]
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ramp/client.h"
#include "ramp/log.h"
#include "test_cluster.h"

using namespace ramp;

namespace {

// Bytes allocated on disk under dir (st_blocks: preallocated zeros count, holes do not).
uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (stat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  int seconds = 600, threads = 4, sample_ms = 5000;
  std::string csv = "bench/results/soak.csv";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--sample-ms" && i + 1 < argc) {
      sample_ms = std::atoi(argv[++i]);
    } else if (a == "--csv" && i + 1 < argc) {
      csv = argv[++i];
    } else {
      std::fprintf(stderr, "usage: soak_bench [--seconds N] [--threads N] [--sample-ms N] [--csv FILE]\n");
      return 2;
    }
  }
  testing::TestClusterOptions co;
  co.nodes = 3;
  co.shm = false;
  co.data = true;
  co.memory_mb = 512;
  co.workers = 1;
  co.extra_args = {"--gc-grace-ms", "1000"};
  std::unique_ptr<testing::TestCluster> cluster;
  Status st = testing::TestCluster::Start(co, &cluster);
  if (!st.ok()) {
    std::fprintf(stderr, "soak: cannot start: %s\n", st.ToString().c_str());
    return 1;
  }
  const KeyspaceId ks = 0x50A4;
  constexpr int kKeys = 20000;       // live: 20000 x ~500 B, about 10 MiB
  constexpr int kValueBytes = 500;
  const ClientOptions copt =
      cluster->ClientOptionsFor(transport::Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  {
    std::unique_ptr<Client> c;
    st = Client::Open(copt, &c);
    for (int i = 0; st.ok() && i < kKeys;) {
      auto t = c->Begin();
      for (int j = 0; j < 50 && i < kKeys; ++j, ++i) {
        st = t->Put(ks, "acct" + std::to_string(i), std::string(kValueBytes, 'a'));
      }
      if (st.ok()) st = t->Commit();
    }
    if (!st.ok()) {
      std::fprintf(stderr, "soak: load failed: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> updates{0}, errors{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::unique_ptr<Client> c;
      if (!Client::Open(copt, &c).ok()) {
        errors++;
        return;
      }
      std::mt19937_64 rng(t * 7919 + 17);
      uint64_t n = 0;
      while (!stop) {
        // A pgbench-like transaction: a few accounts updated together.
        auto txn = c->Begin();
        for (int k = 0; k < 3; ++k) {
          const int key = static_cast<int>(rng() % kKeys);
          txn->Put(ks, "acct" + std::to_string(key),
                   std::string(kValueBytes, static_cast<char>('b' + (n++ % 20))));
        }
        if (txn->Commit().ok()) {
          updates += 3;
        } else {
          errors++;
        }
      }
    });
  }
  std::ofstream out(csv);
  out << "elapsed_s,disk_mib,updates\n";
  const auto start = std::chrono::steady_clock::now();
  double max_mib = 0, last_mib = 0, second_half_max = 0, first_half_max = 0;
  for (;;) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    uint64_t bytes = 0;
    for (int n = 0; n < cluster->size(); ++n) {
      bytes += DiskBytes(cluster->dir() + "/data" + std::to_string(n));
    }
    last_mib = static_cast<double>(bytes) / (1 << 20);
    max_mib = std::max(max_mib, last_mib);
    if (elapsed < seconds / 2.0) {
      first_half_max = std::max(first_half_max, last_mib);
    } else {
      second_half_max = std::max(second_half_max, last_mib);
    }
    out << static_cast<int>(elapsed) << ',' << last_mib << ',' << updates.load() << '\n';
    out.flush();
    std::printf("%5.0f s  disk %7.1f MiB  updates %llu\n", elapsed, last_mib,
                static_cast<unsigned long long>(updates.load()));
    std::fflush(stdout);
    if (elapsed >= seconds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(sample_ms));
  }
  stop = true;
  for (auto& w : workers) w.join();
  const double written_mib =
      static_cast<double>(updates.load()) * (kValueBytes + 100) / (1 << 20);
  std::printf("RESULT soak_seconds %d\n", seconds);
  std::printf("RESULT soak_updates %llu\n", static_cast<unsigned long long>(updates.load()));
  std::printf("RESULT soak_written_mib %.0f\n", written_mib);
  std::printf("RESULT soak_disk_mib_max %.1f\n", max_mib);
  std::printf("RESULT soak_disk_mib_final %.1f\n", last_mib);
  std::printf("RESULT soak_disk_max_second_half_over_first_half %.2f\n",
              first_half_max > 0 ? second_half_max / first_half_max : 0.0);
  std::printf("RESULT soak_errors %llu\n", static_cast<unsigned long long>(errors.load()));
  return 0;
}
