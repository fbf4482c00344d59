// Restart time of a durable rampd against the size of its log (issue 4): loads --mib of
// live data (3800-byte values, two per page; transactions of 8 keys over all partitions of
// one keyspace), kills the server with
// SIGKILL (so the last batches are replayed from the write-ahead log too), restarts it and
// measures the time until it serves again; then checks a sample of the keys.
//   recovery_bench [--mib N]
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include "ramp/client.h"
#include "ramp/log.h"
#include "test_cluster.h"

using namespace ramp;

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  int mib = 1024;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      mib = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: recovery_bench [--mib N]\n");
      return 2;
    }
  }
  testing::TestClusterOptions co;
  co.nodes = 1;
  co.shm = false;
  co.data = true;
  co.memory_mb = mib + mib / 2 + 256;
  std::unique_ptr<testing::TestCluster> cluster;
  Status st = testing::TestCluster::Start(co, &cluster);
  if (!st.ok()) {
    std::fprintf(stderr, "recovery: cannot start: %s\n", st.ToString().c_str());
    return 1;
  }
  const KeyspaceId ks = 0x2EC0;
  const std::string value(3800, 'r');
  const int keys = static_cast<int>((uint64_t{static_cast<uint64_t>(mib)} << 20) / 4096);
  {
    std::unique_ptr<Client> c;
    st = Client::Open(cluster->ClientOptionsFor(transport::Provider::kTcp, ReadPath::kRpc,
                                                WritePath::kRpc),
                      &c);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; st.ok() && i < keys;) {
      auto t = c->Begin();
      for (int j = 0; j < 8 && i < keys; ++j, ++i) {
        st = t->Put(ks, "r" + std::to_string(i), value + std::to_string(i));
        if (!st.ok()) break;
      }
      if (st.ok()) st = t->Commit();
    }
    if (!st.ok()) {
      std::fprintf(stderr, "recovery: load failed: %s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("loaded %d keys (%d MiB of values) in %.1f s\n", keys, mib,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!(st = cluster->Kill(0, SIGKILL)).ok()) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  st = cluster->Restart(0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    std::fprintf(stderr, "recovery: restart failed: %s\n", st.ToString().c_str());
    return 1;
  }
  // The server's own account: bytes of log and time inside recovery.
  const std::string log = cluster->ReadLog(0);
  std::smatch m;
  double log_mib = 0, inner = 0, wal_kib = 0;
  // The last "recovered" line is the restart's.
  const std::regex re(R"(recovered \d+ partitions \(([\d.]+) MiB of log, ([\d.]+) KiB from the write-ahead log\) from \S+ in ([\d.]+) s)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    m = *it;
    log_mib = std::stod(m[1]);
    wal_kib = std::stod(m[2]);
    inner = std::stod(m[3]);
  }
  // Spot check: the last key and a few others are there.
  std::unique_ptr<Client> c;
  st = Client::Open(cluster->ClientOptionsFor(transport::Provider::kTcp, ReadPath::kRpc,
                                              WritePath::kRpc),
                    &c);
  int bad = 0;
  for (int i = 0; st.ok() && i < keys; i += std::max(1, keys / 97)) {
    ReadResult r;
    st = c->Begin()->Get(ks, "r" + std::to_string(i), &r);
    if (!r.found || r.value != value + std::to_string(i)) ++bad;
  }
  ReadResult r;
  if (st.ok()) st = c->Begin()->Get(ks, "r" + std::to_string(keys - 1), &r);
  if (!st.ok() || !r.found || bad != 0) {
    std::fprintf(stderr, "recovery: data missing after restart (%d bad): %s\n", bad,
                 st.ToString().c_str());
    return 1;
  }
  const double gib = log_mib / 1024;
  std::printf("restart to ready: %.2f s; recovery inside rampd: %.2f s for %.0f MiB of log "
              "(%.0f KiB replayed from the write-ahead log)\n",
              seconds, inner, log_mib, wal_kib);
  std::printf("RESULT recovery_log_mib %.0f\n", log_mib);
  std::printf("RESULT recovery_restart_seconds %.2f\n", seconds);
  std::printf("RESULT recovery_seconds_per_gib %.2f\n", gib > 0 ? seconds / gib : 0.0);
  return 0;
}
