// Engine-level partition scan benchmark (bench/scan): a 3-node rampd cluster (engine/testing),
// N rows under row keys (ramp/keys.h RowKey, as table keyspaces store them) with values of
// a lineitem row's size, written in transactions of --txn rows; then full scans of the
// keyspace through Client::OpenScan / Scanner::NextRows, timed (best of --runs). No
// PostgreSQL: this is the scanner's part of a sequential scan of a ramp table.
//
//   scan_engine_bench [--rows N] [--value-bytes B] [--txn T] [--buckets P] [--runs R]
// Prints RESULT scan_engine_rows_per_sec <rate> (and pages, MB/s).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ramp/client.h"
#include "test_cluster.h"

using namespace ramp;

namespace {
using Clock = std::chrono::steady_clock;

// CPU time of this thread (the scanning client; the servers are other processes).
double ThreadCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

[[noreturn]] void Die(const char* what, const Status& st) {
  std::fprintf(stderr, "scan_engine_bench: %s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}
}  // namespace

int main(int argc, char** argv) {
  size_t rows = 1000000, value_bytes = 150, txn = 10000;  // value_bytes >= 22
  uint32_t buckets = 16;
  int runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const unsigned long long v = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--rows")
      rows = v;
    else if (a == "--value-bytes")
      value_bytes = v;
    else if (a == "--txn")
      txn = v;
    else if (a == "--buckets")
      buckets = static_cast<uint32_t>(v);
    else if (a == "--runs")
      runs = static_cast<int>(v);
    else {
      std::fprintf(stderr,
                   "usage: %s [--rows N] [--value-bytes B] [--txn T] [--buckets P] [--runs R]\n",
                   argv[0]);
      return 2;
    }
  }
  testing::TestClusterOptions o;
  o.nodes = 3;
  o.memory_mb = static_cast<int>(rows * (value_bytes + 300) * 2 / 3 / (1 << 20)) + 128;
  o.workers = 1;
  std::unique_ptr<testing::TestCluster> cluster;
  Status st = testing::TestCluster::Start(o, &cluster);
  if (!st.ok()) Die("start rampd", st);
  std::unique_ptr<Client> client;
  st = Client::Open(
      cluster->ClientOptionsFor(transport::Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus),
      &client);
  if (!st.ok()) Die("open client", st);
  const KeyspaceId ks = 0x5CA9;
  client->DefineKeyspace(ks, buckets);
  std::string value(value_bytes, 'x');
  value[0] = 1;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < rows; i += txn) {
    auto t = client->Begin();
    for (size_t j = i; j < std::min(rows, i + txn); j++) {
      std::snprintf(value.data() + 1, 21, "%019zu", j);
      if (!(st = t->Put(ks, RowKey(j), value)).ok()) Die("put", st);
    }
    if (!(st = t->Commit()).ok()) Die("commit", st);
  }
  std::fprintf(stderr, "loaded %zu rows in %.1f s\n", rows,
               std::chrono::duration<double>(Clock::now() - t0).count());
  double best = 0;
  double best_cpu = 0;
  ScanStats stats;
  for (int r = 0; r < runs + 1; r++) {
    const auto s0 = Clock::now();
    const double cpu0 = ThreadCpuSeconds();
    std::unique_ptr<Scanner> scan;
    ScanOptions so;
    so.value_align_skip = 1;
    if (!(st = client->OpenScan(ks, so, &scan)).ok()) Die("OpenScan", st);
    size_t n = 0;
    uint64_t check = 0;
    for (;;) {
      // What the table AM does with each row: the row id from the key, a byte of the value.
      std::span<const ScanRow> part;
      bool done = false;
      if (!(st = scan->NextRows(&part, &done)).ok()) Die("scan", st);
      if (done) break;
      for (const ScanRow& row : part) {
        uint64_t id = 0;
        if (!DecodeRowKey(row.key, &id)) continue;
        check += id + static_cast<unsigned char>(row.value[5]);
        n++;
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - s0).count();
    const double cpu = ThreadCpuSeconds() - cpu0;
    if (r > 0 && (best_cpu == 0 || cpu < best_cpu)) best_cpu = cpu;
    if (n != rows) {
      std::fprintf(stderr, "scan_engine_bench: scanned %zu rows, expected %zu\n", n, rows);
      return 1;
    }
    stats = scan->stats();
    std::fprintf(stderr, "run %d: %.3f s (%llu)\n", r, secs,
                 static_cast<unsigned long long>(check));
    if (r > 0 && (best == 0 || secs < best)) best = secs;
  }
  std::printf("RESULT scan_engine_rows_per_sec %.0f\n", rows / best);
  std::printf("RESULT scan_engine_client_cpu_ns_per_row %.1f\n", best_cpu * 1e9 / rows);
  std::printf("RESULT scan_engine_mb_per_sec %.1f\n", stats.bytes / best / 1e6);
  std::printf("scan: %zu rows, %llu pages, %llu partitions, %llu repaired, best %.3f s\n", rows,
              static_cast<unsigned long long>(stats.pages),
              static_cast<unsigned long long>(stats.partitions),
              static_cast<unsigned long long>(stats.repaired), best);
  return 0;
}
