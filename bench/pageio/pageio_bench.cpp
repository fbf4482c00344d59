// Remote page I/O benchmark (issue 5, DESIGN §6; paper 002's remote-vs-local IOPS).
//
// Starts real rampd processes (engine/testing), loads a keyspace so that its partitions'
// page files hold the data, and measures on the SAME page files:
//   local    random page reads with io_uring, O_DIRECT, one thread, the same number of
//            reads outstanding as the remote reader keeps
//   remote   the same reads through rampd's READ_PAGES (PageReader, pages served from the
//            page files with O_DIRECT: servers run --page-direct-io), shm and tcp providers
//   sweep    client connections x server I/O workers (8 KiB, shm)
//   static vs thread-per-request I/O service (8 KiB, shm, a server started --page-io=per-request)
//   scan     Client::OpenScan over the keyspace vs a local sequential O_DIRECT read of the
//            same page files; the server runs with a 4 MiB memory budget, so nearly every
//            page lives only on disk (evicted) and is read from there
//   replay   the page trace of that full partition scan replayed locally and remotely
//            (stand-in for the TPC-H Q3 trace until the table AM reads through page I/O)
// The page cache is bypassed (O_DIRECT) on both sides wherever a figure is about disk I/O;
// "resident" figures (pages copied from server memory) are reported separately.
//
// Prints RESULT lines; --csv writes every measurement.
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "protocol/page_messages.h"
#include "ramp/client.h"
#include "ramp/page_reader.h"
#include "test_cluster.h"

namespace {

using namespace ramp;
using Clock = std::chrono::steady_clock;
using transport::Provider;

constexpr KeyspaceId kKs = 0xBE7C;
constexpr uint32_t kBuckets = 8;

struct Config {
  bool quick = false;
  std::string csv;
  std::string dbgen;  // tpch_dbgen binary (TPC-H Q3 replay); empty: skipped
  double seconds = 3.0;
  size_t data_mb = 192;
  // --random-8k-only --seeds tcp://h:p --token-file F --page-dir D: only the 8 KiB random
  // reads, local vs tcp, against a rampd already running elsewhere (bench/pageio/run starts
  // it in a network namespace) whose page files are in D.
  bool random_8k_only = false;
  std::string seeds, token, page_dir;
};

FILE* g_csv = nullptr;

void Csv(const std::string& experiment, const std::string& variant, uint32_t size, int conns,
         int io_workers, double value, const char* unit) {
  if (g_csv) {
    std::fprintf(g_csv, "%s,%s,%u,%d,%d,%.3f,%s\n", experiment.c_str(), variant.c_str(), size,
                 conns, io_workers, value, unit);
    std::fflush(g_csv);
  }
}

[[noreturn]] void Die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "pageio_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  std::exit(1);
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A cluster of one rampd with the data loaded.
struct Server {
  std::unique_ptr<testing::TestCluster> cluster;
  std::unique_ptr<Client> client;  // shm
  std::vector<protocol::ScanOpenPartition> parts;
  std::vector<PageRef> pages;      // complete pages (in the page files)
  std::vector<std::string> files;  // page file per bucket
};

std::unique_ptr<Client> Open(const testing::TestCluster& c, Provider p) {
  std::unique_ptr<Client> client;
  ClientOptions o = c.ClientOptionsFor(p, ReadPath::kGetStar, WritePath::kPutPlus);
  o.timeout_ms = 60000;
  Status st = Client::Open(o, &client);
  if (!st.ok()) Die("open client", st);
  client->DefineKeyspace(kKs, kBuckets);
  return client;
}

void LoadAndList(size_t data_mb, const std::string& page_dir, Server* s);

void StartServer(const Config& cfg, size_t data_mb, std::vector<std::string> args, Server* s) {
  testing::TestClusterOptions o;
  o.nodes = 1;
  o.page_files = true;
  o.memory_mb = static_cast<int>(data_mb * 2 + 128);
  o.workers = 1;
  args.push_back("--page-direct-io");
  // Frames evicted by the memory budget are reused after the GC grace; loading faster than
  // the arena's headroom per grace would stall. Nothing here reads one-sided (GET*), which
  // is what the grace protects.
  args.push_back("--gc-grace-ms=200");
  o.extra_args = args;
  Status st = testing::TestCluster::Start(o, &s->cluster);
  if (!st.ok()) Die("start rampd", st);
  s->client = Open(*s->cluster, Provider::kShm);
  (void)cfg;
  LoadAndList(data_mb, s->cluster->dir() + "/pages0", s);
}

// Loads data_mb of rows through s->client and lists the pages of the page files in page_dir.
void LoadAndList(size_t data_mb, const std::string& page_dir, Server* s) {
  Status st;
  const size_t value_bytes = 1000;
  const size_t keys = data_mb * (1u << 20) / (value_bytes + 80);
  const auto t0 = Clock::now();
  std::string value(value_bytes, 'x');
  for (size_t i = 0; i < keys; i += 200) {
    auto t = s->client->Begin();
    for (size_t j = i; j < std::min(keys, i + 200); j++) {
      std::snprintf(value.data(), 20, "%019zu", j);
      st = t->Put(kKs, "key" + std::to_string(j), value);
      if (!st.ok()) Die("put", st);
    }
    st = t->Commit();
    if (!st.ok()) Die("commit", st);
  }
  std::fprintf(stderr, "loaded %zu keys (%zu MiB) in %.1f s\n", keys, data_mb, Since(t0));
  // Page counts (SCAN_OPEN at timestamp zero leaves the watermarks alone).
  Client::Impl& im = *s->client->impl();
  std::vector<PartitionId> ps;
  for (uint32_t b = 0; b < kBuckets; b++) ps.push_back({kKs, b});
  if (!(st = im.ResolveOwners(ps)).ok()) Die("lookup", st);
  protocol::ScanOpenRequest req{Timestamp{}, ps};
  std::string body;
  protocol::Encode(req, &body);
  PendingCall reply;
  st = im.CallAndWait(0, ChannelKind::kFast, protocol::Op::kScanOpen, kBuckets, body, &reply);
  protocol::ScanOpenReply r;
  if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &r);
  if (!st.ok()) Die("SCAN_OPEN", st);
  s->parts = r.partitions;
  for (uint32_t b = 0; b < kBuckets; b++) {
    // All but the head page (still being appended to, in memory only) are in the file;
    // one more page of slack for 16 KiB reads.
    for (uint32_t p = 0; p + 2 < s->parts[b].page_count; p++) {
      s->pages.push_back({{kKs, b}, p, s->parts[b].epoch, 8192});
    }
    s->files.push_back(page_dir + "/" + std::to_string(kKs) + "-" + std::to_string(b) +
                       ".pages");
  }
}

// ---- local io_uring -------------------------------------------------------------------------

struct LocalFiles {
  std::vector<int> fds;
  explicit LocalFiles(const std::vector<std::string>& files) {
    for (const auto& f : files) {
      int fd = open(f.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      if (fd < 0) Die("open " + f + " O_DIRECT", Status::FromErrno("open", errno));
      fds.push_back(fd);
    }
  }
  ~LocalFiles() {
    for (int fd : fds) close(fd);
  }
};

// Reads the listed pages (cycling through them) with `depth` reads outstanding until
// `seconds` passed (or once through the list when once). Returns reads per second.
double LocalReads(const LocalFiles& files, const std::vector<PageRef>& pages, uint32_t size,
                  unsigned depth, double seconds, bool once, uint64_t* bytes_out = nullptr) {
  io_uring ring;
  if (io_uring_queue_init(depth * 2, &ring, 0) != 0) Die("io_uring", Status::IOError("init"));
  std::vector<uint8_t*> bufs(depth);
  for (auto& b : bufs) {
    if (posix_memalign(reinterpret_cast<void**>(&b), 4096, size) != 0) std::abort();
  }
  std::vector<unsigned> free_slots;
  for (unsigned i = 0; i < depth; i++) free_slots.push_back(i);
  size_t next = 0;
  uint64_t done = 0;
  const auto t0 = Clock::now();
  bool stop = false;
  unsigned inflight = 0;
  while (!stop || inflight > 0) {
    while (!stop && !free_slots.empty()) {
      if (once && next >= pages.size()) {
        stop = true;
        break;
      }
      const PageRef& p = pages[next++ % pages.size()];
      const unsigned slot = free_slots.back();
      free_slots.pop_back();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, files.fds[p.part.bucket], bufs[slot], size,
                         uint64_t{p.page_no} * 8192);
      io_uring_sqe_set_data64(sqe, slot);
      inflight++;
    }
    io_uring_submit(&ring);
    if (inflight == 0) break;
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) continue;
    do {
      if (cqe->res != static_cast<int>(size))
        Die("local read", Status::IOError(std::to_string(cqe->res)));
      free_slots.push_back(static_cast<unsigned>(io_uring_cqe_get_data64(cqe)));
      io_uring_cqe_seen(&ring, cqe);
      inflight--;
      done++;
    } while (io_uring_peek_cqe(&ring, &cqe) == 0);
    if (!once && Since(t0) >= seconds) stop = true;
  }
  const double secs = Since(t0);
  io_uring_queue_exit(&ring);
  for (auto* b : bufs) free(b);
  if (bytes_out) *bytes_out = done * size;
  return static_cast<double>(done) / secs;
}

// Sequential read of whole page files (O_DIRECT, 1 MiB chunks, 4 outstanding).
double LocalSequential(const LocalFiles& files, const std::vector<uint64_t>& sizes,
                       uint64_t* bytes) {
  constexpr unsigned kDepth = 4;
  constexpr size_t kChunk = 1u << 20;
  io_uring ring;
  if (io_uring_queue_init(kDepth, &ring, 0) != 0) Die("io_uring", Status::IOError("init"));
  std::vector<uint8_t*> bufs(kDepth);
  for (auto& b : bufs) {
    if (posix_memalign(reinterpret_cast<void**>(&b), 4096, kChunk) != 0) std::abort();
  }
  struct Piece {
    int fd;
    uint64_t off;
    uint32_t len;
  };
  std::vector<Piece> pieces;
  for (size_t f = 0; f < files.fds.size(); f++) {
    for (uint64_t off = 0; off < sizes[f]; off += kChunk) {
      pieces.push_back(
          {files.fds[f], off, static_cast<uint32_t>(std::min<uint64_t>(kChunk, sizes[f] - off))});
    }
  }
  *bytes = 0;
  const auto t0 = Clock::now();
  size_t next = 0;
  unsigned inflight = 0;
  std::vector<unsigned> free_slots = {0, 1, 2, 3};
  while (next < pieces.size() || inflight > 0) {
    while (next < pieces.size() && !free_slots.empty()) {
      const unsigned slot = free_slots.back();
      free_slots.pop_back();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, pieces[next].fd, bufs[slot], pieces[next].len, pieces[next].off);
      io_uring_sqe_set_data64(sqe, slot);
      next++;
      inflight++;
    }
    io_uring_submit(&ring);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) continue;
    if (cqe->res < 0) Die("sequential read", Status::IOError(std::strerror(-cqe->res)));
    *bytes += static_cast<uint64_t>(cqe->res);
    free_slots.push_back(static_cast<unsigned>(io_uring_cqe_get_data64(cqe)));
    io_uring_cqe_seen(&ring, cqe);
    inflight--;
  }
  const double secs = Since(t0);
  io_uring_queue_exit(&ring);
  for (auto* b : bufs) free(b);
  return static_cast<double>(*bytes) / secs;
}

// ---- remote ---------------------------------------------------------------------------------

struct RemoteShape {
  int conns = 2;
  int batch = 8;
  int inflight = 2;
  unsigned outstanding() const { return static_cast<unsigned>(conns * batch * inflight); }
};

// Random (or, with once, listed in order) page reads through rampd; reads per second.
double RemoteReads(Client* c, const std::vector<PageRef>& pages, uint32_t size,
                   const RemoteShape& shape, bool disk, double seconds, bool once) {
  PageReaderOptions o;
  o.connections_per_node = shape.conns;
  o.batch_pages = shape.batch;
  o.batches_in_flight = shape.inflight;
  o.prefer_disk = disk;
  o.max_page_bytes = 16384;
  std::unique_ptr<PageReader> r;
  Status st = PageReader::Open(c, o, &r);
  if (!st.ok()) Die("PageReader", st);
  std::vector<PageRef> chunk;
  const size_t kChunk = 4096;
  size_t next = 0;
  uint64_t done = 0;
  const auto t0 = Clock::now();
  auto sink = [&](size_t, const Status& ps, const uint8_t*, uint32_t) {
    if (!ps.ok()) return ps;
    done++;
    return Status::OK();
  };
  for (;;) {
    chunk.clear();
    for (size_t i = 0; i < kChunk && (!once || next < pages.size()); i++) {
      chunk.push_back(pages[next++ % pages.size()]);
      chunk.back().length = size;
    }
    if (chunk.empty()) break;
    st = r->Read(chunk, sink);
    if (!st.ok()) Die("remote read", st);
    if (!once && Since(t0) >= seconds) break;
  }
  return static_cast<double>(done) / Since(t0);
}

std::vector<PageRef> Shuffled(std::vector<PageRef> pages, uint32_t seed) {
  std::mt19937 rng(seed);
  std::shuffle(pages.begin(), pages.end(), rng);
  return pages;
}

void Result(const char* name, double v) {
  std::printf("RESULT %s %.3f\n", name, v);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--quick") {
      cfg.quick = true;
    } else if (a == "--csv" && i + 1 < argc) {
      cfg.csv = argv[++i];
    } else if (a == "--dbgen" && i + 1 < argc) {
      cfg.dbgen = argv[++i];
    } else if (a == "--random-8k-only") {
      cfg.random_8k_only = true;
    } else if (a == "--seeds" && i + 1 < argc) {
      cfg.seeds = argv[++i];
    } else if (a == "--page-dir" && i + 1 < argc) {
      cfg.page_dir = argv[++i];
    } else if (a == "--token-file" && i + 1 < argc) {
      std::FILE* f = std::fopen(argv[++i], "r");
      char buf[512] = {0};
      if (f == nullptr || std::fgets(buf, sizeof(buf), f) == nullptr) {
        std::fprintf(stderr, "pageio_bench: cannot read a token from %s\n", argv[i]);
        return 2;
      }
      std::fclose(f);
      cfg.token = buf;
      while (!cfg.token.empty() && (cfg.token.back() == '\n' || cfg.token.back() == '\r')) {
        cfg.token.pop_back();
      }
    } else {
      std::fprintf(stderr, "usage: pageio_bench [--quick] [--csv FILE] [--dbgen tpch_dbgen]\n"
                   "       pageio_bench [--quick] --random-8k-only --seeds tcp://H:P "
                   "--token-file F --page-dir D\n");
      return 2;
    }
  }
  if (cfg.quick) {
    cfg.seconds = 1.0;
    cfg.data_mb = 48;
  }
  if (!cfg.csv.empty()) {
    g_csv = std::fopen(cfg.csv.c_str(), "w");
    if (!g_csv) Die("open " + cfg.csv, Status::FromErrno("fopen", errno));
    std::fprintf(g_csv, "experiment,variant,size,connections,io_workers,value,unit\n");
  }
  const RemoteShape shape;  // 2 connections x 2 batches x 8 pages = 32 outstanding

  if (cfg.random_8k_only) {
    // Against an external rampd (its page files in --page-dir): local io_uring vs tcp.
    ClientOptions o;
    Status st = transport::ParseEndpointList(cfg.seeds, &o.seeds);
    if (!st.ok() || cfg.token.empty() || cfg.page_dir.empty()) {
      std::fprintf(stderr, "pageio_bench: --random-8k-only needs --seeds, --token-file and "
                           "--page-dir\n");
      return 2;
    }
    o.provider = Provider::kTcp;
    o.read_path = ReadPath::kGetStar;
    o.write_path = WritePath::kPutPlus;
    o.token = cfg.token;
    o.timeout_ms = 60000;
    Server x;
    if (!(st = Client::Open(o, &x.client)).ok()) Die("open client", st);
    x.client->DefineKeyspace(kKs, kBuckets);
    LoadAndList(cfg.data_mb, cfg.page_dir, &x);
    const auto pages = Shuffled(x.pages, 1);
    LocalFiles lf(x.files);
    double local = 0, tc = 0;
    // Interleaved, best of three each: the machine is shared.
    for (int round = 0; round < 3; round++) {
      local = std::max(local, LocalReads(lf, pages, 8192, shape.outstanding(), cfg.seconds, false));
      tc = std::max(tc, RemoteReads(x.client.get(), pages, 8192, shape, true, cfg.seconds, false));
    }
    std::fprintf(stderr, "random 8192 B: local %.0f  tcp (%s) %.0f reads/s\n", local,
                 cfg.seeds.c_str(), tc);
    Result("local_iops_8k", local);
    Result("remote_tcp_iops_8k", tc);
    Result("remote_tcp_vs_local_iops_8k", tc / local);
    return 0;
  }

  // ---- 1. random reads: local vs remote (shm, tcp), 4 sizes ----------------------------
  Server s;
  // A memory budget far below the data: the pages live on disk, as for a table larger than
  // the servers' memory (the scan reads them from the page files, O_DIRECT).
  StartServer(cfg, cfg.data_mb, {"--io-workers=2", "--memory-budget-mb=4"}, &s);
  std::fprintf(stderr, "%zu pages in the page files\n", s.pages.size());
  const auto random = Shuffled(s.pages, 1);
  LocalFiles files(s.files);
  auto tcp = Open(*s.cluster, Provider::kTcp);
  double local8 = 0, shm8 = 0, tcp8 = 0;
  for (uint32_t size : {512u, 4096u, 8192u, 16384u}) {
    const double local = LocalReads(files, random, size, shape.outstanding(), cfg.seconds, false);
    const double shm = RemoteReads(s.client.get(), random, size, shape, true, cfg.seconds, false);
    const double tc = RemoteReads(tcp.get(), random, size, shape, true, cfg.seconds, false);
    std::fprintf(stderr, "random %5u B: local %.0f  shm %.0f  tcp %.0f reads/s\n", size, local, shm,
                 tc);
    Csv("random_read", "local", size, 0, 0, local, "reads/s");
    Csv("random_read", "shm", size, shape.conns, 2, shm, "reads/s");
    Csv("random_read", "tcp", size, shape.conns, 2, tc, "reads/s");
    if (size == 8192) {
      local8 = local;
      shm8 = shm;
      tcp8 = tc;
    }
  }

  // ---- 2. scan vs local sequential read; scan trace replay -------------------------------
  std::vector<PageRef> trace;
  ScanOptions so;
  so.on_page = [&](const PartitionId& p, uint32_t page) { trace.push_back({p, page, 0, 8192}); };
  std::unique_ptr<Scanner> scan;
  auto t0 = Clock::now();
  Status st = s.client->OpenScan(kKs, so, &scan);
  if (!st.ok()) Die("OpenScan", st);
  uint64_t rows = 0;
  for (;;) {
    ScanRow row;
    bool done = false;
    st = scan->Next(&row, &done);
    if (!st.ok()) Die("scan", st);
    if (done) break;
    rows++;
  }
  const double scan_secs = Since(t0);
  const ScanStats ss = scan->stats();
  const double scan_rate = static_cast<double>(ss.bytes) / scan_secs;
  std::vector<uint64_t> sizes;
  for (const auto& p : s.parts)
    sizes.push_back(uint64_t{p.page_count > 1 ? p.page_count - 1 : 0} * 8192);
  uint64_t seq_bytes = 0;
  const double seq_rate = LocalSequential(files, sizes, &seq_bytes);
  std::fprintf(stderr,
               "scan: %lu rows, %lu pages, %.1f MB/s (repaired %lu); local sequential %.1f MB/s\n",
               static_cast<unsigned long>(rows), static_cast<unsigned long>(ss.pages),
               scan_rate / 1e6, static_cast<unsigned long>(ss.repaired), seq_rate / 1e6);
  Csv("scan", "scan_shm_evicted", 8192, 2, 2, scan_rate / 1e6, "MB/s");
  Csv("scan", "local_sequential", 0, 0, 0, seq_rate / 1e6, "MB/s");
  // Replay of the scan's page trace (complete pages only: the head pages are not in the
  // files), in order, 32 outstanding on both sides.
  std::vector<PageRef> replay;
  for (const auto& p : trace) {
    if (p.page_no + 1 < s.parts[p.part.bucket].page_count) {
      replay.push_back(p);
      replay.back().epoch = s.parts[p.part.bucket].epoch;
    }
  }
  const double replay_local = LocalReads(files, replay, 8192, shape.outstanding(), 0, true);
  const double replay_remote = RemoteReads(s.client.get(), replay, 8192, shape, true, 0, true);
  Csv("scan_trace_replay", "local", 8192, 0, 0, replay_local, "reads/s");
  Csv("scan_trace_replay", "shm", 8192, shape.conns, 2, replay_remote, "reads/s");
  tcp.reset();
  scan.reset();  // before its client
  s = Server();

  // ---- 3. connections x I/O workers (8 KiB, shm) ---------------------------------------
  const size_t sweep_mb = cfg.quick ? 16 : 48;
  const double sweep_secs = cfg.quick ? 0.5 : 1.5;
  double best_sweep = 0;
  for (int io : {1, 2, 4}) {
    Server v;
    StartServer(cfg, sweep_mb, {"--io-workers=" + std::to_string(io)}, &v);
    const auto pages = Shuffled(v.pages, 2);
    for (int conns : {1, 2, 4}) {
      RemoteShape sh;
      sh.conns = conns;
      const double iops = RemoteReads(v.client.get(), pages, 8192, sh, true, sweep_secs, false);
      std::fprintf(stderr, "sweep: io_workers %d connections %d: %.0f reads/s\n", io, conns, iops);
      Csv("sweep", "shm", 8192, conns, io, iops, "reads/s");
      best_sweep = std::max(best_sweep, iops);
    }
  }

  // ---- 4. static pool vs thread per request (8 KiB, shm) ----------------------------------
  // One page per request: the request is the unit a thread-per-request server spawns a
  // thread for. Both servers run side by side and are measured in turns (three each, the
  // median counts): the development machine is shared, so load changes during a run.
  double static8 = 0, per_request8 = 0, resident8 = 0;
  {
    Server st_server, pr_server;
    StartServer(cfg, sweep_mb, {"--io-workers=2", "--page-io=static"}, &st_server);
    StartServer(cfg, sweep_mb, {"--io-workers=2", "--page-io=per-request"}, &pr_server);
    RemoteShape sh;
    sh.batch = 1;
    sh.inflight = 16;
    std::vector<double> a, b;
    for (int round = 0; round < 3; round++) {
      for (bool per_request : {false, true}) {
        Server& v = per_request ? pr_server : st_server;
        const double iops = RemoteReads(v.client.get(), Shuffled(v.pages, 3 + round), 8192, sh,
                                        true, sweep_secs, false);
        std::fprintf(stderr, "%s: %.0f reads/s\n",
                     per_request ? "thread per request" : "static pool", iops);
        Csv("io_service", per_request ? "per_request" : "static", 8192, sh.conns, 2, iops,
            "reads/s");
        (per_request ? b : a).push_back(iops);
      }
    }
    // Pages copied from memory (no budget on this server): the service without the disk.
    resident8 = RemoteReads(st_server.client.get(), Shuffled(st_server.pages, 9), 8192, shape,
                            false, sweep_secs, false);
    Csv("random_read", "shm_resident", 8192, shape.conns, 2, resident8, "reads/s");
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    static8 = a[1];
    per_request8 = b[1];
  }

  // ---- 5. TPC-H Q3 I/O replay ------------------------------------------------------------
  // Q3 (customer, orders, lineitem; hash joins) reads its three tables whole. Until the
  // table AM's sequential scan reads through page I/O, its trace is recorded from the
  // scanner reading the three tables (rows from our dbgen, one ramp row per TPC-H row, as
  // the table AM stores them), and replayed: locally with io_uring on the same page files,
  // and through rampd.
  double q3_local = 0, q3_remote = 0;
  if (!cfg.dbgen.empty()) {
    Server q;
    StartServer(cfg, 1, {"--io-workers=2", "--memory-budget-mb=4"}, &q);
    const double sf = cfg.quick ? 0.02 : 0.05;
    const char* tables[] = {"customer", "orders", "lineitem"};
    std::vector<PageRef> q3_trace;
    std::vector<std::string> q3_files;
    std::vector<KeyspaceId> q3_ks;
    for (int t = 0; t < 3; t++) {
      const KeyspaceId ks = 0x9300 + static_cast<KeyspaceId>(t);
      q.client->DefineKeyspace(ks, kBuckets);
      const std::string cmd =
          cfg.dbgen + " -s " + std::to_string(sf) + " -T " + tables[t] + " --stdout";
      FILE* in = popen(cmd.c_str(), "r");
      if (!in) Die(cmd, Status::FromErrno("popen", errno));
      char line[4096];
      uint64_t row = 0;
      auto txn = q.client->Begin();
      while (std::fgets(line, sizeof(line), in)) {
        std::string v(line);
        if (!v.empty() && v.back() == '\n') v.pop_back();
        Status st = txn->Put(ks, std::to_string(row++), v);
        if (!st.ok()) Die("put", st);
        if (row % 500 == 0) {
          if (!(st = txn->Commit()).ok()) Die("commit", st);
          txn = q.client->Begin();
        }
      }
      Status st = txn->Commit();
      if (!st.ok()) Die("commit", st);
      if (pclose(in) != 0) Die(cmd, Status::IOError("tpch_dbgen failed"));
      std::fprintf(stderr, "q3: %s: %lu rows\n", tables[t], static_cast<unsigned long>(row));
      ScanOptions qo;
      std::vector<PageRef> tr;
      qo.on_page = [&](const PartitionId& p, uint32_t page) { tr.push_back({p, page, 0, 8192}); };
      std::unique_ptr<Scanner> sc;
      if (!(st = q.client->OpenScan(ks, qo, &sc)).ok()) Die("OpenScan", st);
      for (;;) {
        ScanRow r;
        bool done = false;
        if (!(st = sc->Next(&r, &done)).ok()) Die("scan", st);
        if (done) break;
      }
      // Page counts for epochs and the head pages (in memory only: not replayed).
      Client::Impl& im = *q.client->impl();
      std::vector<PartitionId> ps;
      for (uint32_t b = 0; b < kBuckets; b++) ps.push_back({ks, b});
      protocol::ScanOpenRequest req{Timestamp{}, ps};
      std::string body;
      protocol::Encode(req, &body);
      PendingCall reply;
      st = im.CallAndWait(0, ChannelKind::kFast, protocol::Op::kScanOpen, kBuckets, body, &reply);
      protocol::ScanOpenReply r;
      if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &r);
      if (!st.ok()) Die("SCAN_OPEN", st);
      for (auto p : tr) {
        if (p.page_no + 1 >= r.partitions[p.part.bucket].page_count) continue;
        p.epoch = r.partitions[p.part.bucket].epoch;
        // Local replay addresses files by index: remember which.
        q3_trace.push_back(p);
      }
      for (uint32_t b = 0; b < kBuckets; b++) {
        q3_files.push_back(q.cluster->dir() + "/pages0/" + std::to_string(ks) + "-" +
                           std::to_string(b) + ".pages");
      }
      q3_ks.push_back(ks);
    }
    // Local replay: files indexed by (table, bucket).
    std::vector<PageRef> local_trace = q3_trace;
    for (auto& p : local_trace) {
      const size_t t = static_cast<size_t>(std::find(q3_ks.begin(), q3_ks.end(), p.part.keyspace) -
                                           q3_ks.begin());
      p.part.bucket = static_cast<uint32_t>(t * kBuckets + p.part.bucket);
    }
    LocalFiles qf(q3_files);
    q3_local = LocalReads(qf, local_trace, 8192, shape.outstanding(), 0, true);
    q3_remote = RemoteReads(q.client.get(), q3_trace, 8192, shape, true, 0, true);
    std::fprintf(stderr, "q3 replay: %zu pages: local %.0f, remote shm %.0f reads/s\n",
                 q3_trace.size(), q3_local, q3_remote);
    Csv("q3_replay", "local", 8192, 0, 0, q3_local, "reads/s");
    Csv("q3_replay", "shm", 8192, shape.conns, 2, q3_remote, "reads/s");
  }

  std::printf("RESULT page_cache bypassed_with_O_DIRECT\n");
  Result("local_iops_8k", local8);
  Result("remote_shm_iops_8k", shm8);
  Result("remote_tcp_iops_8k", tcp8);
  Result("remote_vs_local_iops_8k", shm8 / local8);
  // On loopback; bench/pageio/run measures remote_tcp_vs_local_iops_8k across namespaces.
  Result("remote_tcp_vs_local_iops_8k_loopback", tcp8 / local8);
  Result("remote_resident_iops_8k", resident8);
  Result("static_vs_per_request_8k", static8 / per_request8);
  Result("scan_mb_per_sec", scan_rate / 1e6);
  Result("local_seq_read_mb_per_sec", seq_rate / 1e6);
  Result("scan_vs_local_seq_read", scan_rate / seq_rate);
  Result("scan_trace_replay_remote_vs_local", replay_remote / replay_local);
  Result("sweep_best_iops_8k", best_sweep);
  if (q3_local > 0) Result("q3_replay_remote_vs_local", q3_remote / q3_local);
  if (g_csv) std::fclose(g_csv);
  return 0;
}
