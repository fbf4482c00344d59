// transport_bench: figures of libramp_transport, measured in one run so ratios compare like
// with like (same machine state, same buffers).
//
//   one-sided read latency   one read outstanding, post -> completion, per size
//   one-sided read rate      `depth` reads outstanding, per size (ops/s and bytes/s)
//   memcpy                   the same sizes copied from the same kind of buffer: the ceiling
//                            a same-host read can approach
//   ring messages            small messages, one sender thread and one receiver thread per
//                            direction, on one connection and on several
//
// Both ends live in this process (server and client each with their own Memory); for shm the
// target does nothing during a read, for tcp its responder thread serves.
//
// The machine is shared (2 cores; other builds and servers run beside us), so every figure
// is the best of several short trials, and the trials of the things a ratio compares are
// interleaved (memcpy, shm, tcp, memcpy, shm, tcp, ...): a burst of foreign load then hits
// all sides alike, and a trial that lost the CPU does not become the figure.
//
// Output: human-readable lines, `RESULT <metric> <value>` lines, and a CSV (--csv) with
// provider,metric,size,value,unit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/epoll.h>
#include <unistd.h>

#include "ramp/log.h"
#include "ramp/transport/transport.h"

using namespace ramp;
using namespace ramp::transport;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
  bool quick = false;
  std::string csv;
  std::string only;            // run one provider's figures only (profiling)
  bool messages_only = false;  // only the ring message figures (profiling)
  double seconds = 0.4;        // per trial
  int trials = 5;
  int depth = 32;       // reads outstanding in the rate test
  int connections = 4;  // for the several-connections message test
  size_t message_bytes = 32;
};

struct Row {
  std::string provider, metric;
  size_t size;
  double value;
  std::string unit;
};
std::vector<Row> g_rows;

void Record(const std::string& provider, const std::string& metric, size_t size, double value,
            const std::string& unit) {
  g_rows.push_back({provider, metric, size, value, unit});
  printf("  %-6s %-28s %6zu B  %14.3f %s\n", provider.c_str(), metric.c_str(), size, value,
         unit.c_str());
  fflush(stdout);
}

[[noreturn]] void Die(const std::string& what, const Status& s) {
  fprintf(stderr, "transport_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  exit(1);
}

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Die(what, s);
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct Pair {
  std::shared_ptr<Memory> server_memory = Memory::Create();
  std::shared_ptr<Memory> client_memory = Memory::Create();
  std::unique_ptr<Listener> listener;
  std::vector<std::unique_ptr<Connection>> clients, servers;
};

std::string g_socket_dir;

Endpoint EndpointFor(Provider p) {
  Endpoint e;
  e.provider = p;
  if (p == Provider::kShm) {
    static int n = 0;
    e.path = g_socket_dir + "/bench" + std::to_string(n++) + ".sock";
  } else {
    e.host = "127.0.0.1";
  }
  return e;
}

TransportOptions Options() {
  TransportOptions o;
  o.token = "transport-bench";
  o.ring_bytes = 1 << 20;
  o.max_outstanding = 4096;
  o.responder_thread = true;
  return o;
}

void Connect(Provider provider, int n, Pair* p) {
  const TransportOptions o = Options();
  Check(Listen(EndpointFor(provider), o, p->server_memory, &p->listener), "listen");
  for (int i = 0; i < n; i++) {
    std::unique_ptr<Connection> server, client;
    Status accepted;
    std::thread t([&] { accepted = p->listener->Accept(10000, &server); });
    Status connected = transport::Connect(p->listener->endpoint(), o, p->client_memory, &client);
    t.join();
    Check(connected, "connect");
    Check(accepted, "accept");
    p->clients.push_back(std::move(client));
    p->servers.push_back(std::move(server));
  }
}

// The region reads come from: 4 MiB, larger than L2, read round-robin at `size` strides.
constexpr size_t kRegionBytes = 4 << 20;

RemoteRegion ShareRegion(Pair& p, uint8_t** base) {
  Check(p.server_memory->Allocate(kRegionBytes, kAccessRead, base), "allocate region");
  for (size_t i = 0; i < kRegionBytes; i++) (*base)[i] = static_cast<uint8_t>(i * 7);
  RemoteRegion r;
  Check(p.server_memory->Register(*base, kRegionBytes, kAccessRead, &r), "register");
  Check(p.servers[0]->Expose(r), "expose");
  return r;  // handed over in-process: the client is told through a message in real use
}

// Mean latency of one read at a time, in microseconds.
double ReadLatency(Connection* c, const RemoteRegion& r, uint8_t* local, size_t size,
                   double seconds) {
  const size_t slots = kRegionBytes / size;
  uint64_t n = 0;
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  Completion done;
  while (Clock::now() < stop) {
    for (int k = 0; k < 64; k++) {
      Check(c->PostRead(local, r, (n % slots) * size, size, n), "post read");
      while (c->Poll(&done, 1) == 0) {
      }
      if (!done.status.ok()) Die("read", done.status);
      n++;
    }
  }
  return Seconds(Clock::now() - start) / static_cast<double>(n) * 1e6;
}

// Reads per second with `depth` outstanding.
double ReadRate(Connection* c, const RemoteRegion& r, uint8_t* local, size_t size, int depth,
                double seconds) {
  const size_t slots = kRegionBytes / size;
  uint64_t posted = 0, completed = 0;
  Completion done[64];
  auto post = [&] {
    while (posted - completed < static_cast<uint64_t>(depth)) {
      Status s =
          c->PostRead(local + (posted % depth) * size, r, (posted % slots) * size, size, posted);
      if (s.Is(Status::Code::kBusy)) return;
      Check(s, "post read");
      posted++;
    }
  };
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  uint64_t at_start = 0;
  for (uint64_t loops = 0; (loops & 15) != 0 || Clock::now() < stop; loops++) {
    post();
    int n = c->Poll(done, 64);
    for (int i = 0; i < n; i++) {
      if (!done[i].status.ok()) Die("read", done[i].status);
    }
    completed += static_cast<uint64_t>(n);
  }
  const double elapsed = Seconds(Clock::now() - start);
  const uint64_t counted = completed - at_start;
  while (completed < posted) completed += static_cast<uint64_t>(c->Poll(done, 64));
  return static_cast<double>(counted) / elapsed;
}

// memcpy of the same sizes from the same kind of region into the same kind of slots.
struct CopyBuffers {
  std::shared_ptr<Memory> memory = Memory::Create();
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  CopyBuffers() {
    Check(memory->Allocate(kRegionBytes, kAccessRead, &src), "allocate");
    Check(memory->Allocate(64 * 8192, kAccessReadWrite, &dst), "allocate");
    for (size_t i = 0; i < kRegionBytes; i++) src[i] = static_cast<uint8_t>(i * 7);
  }
};

double MemcpyRate(const CopyBuffers& b, size_t size, int depth, double seconds) {
  const size_t slots = kRegionBytes / size;
  uint64_t n = 0;
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < stop) {
    for (int k = 0; k < 256; k++, n++) {
      std::memcpy(b.dst + (n % depth) * size, b.src + (n % slots) * size, size);
    }
    // Keep the compiler from proving the copies dead.
    asm volatile("" : : "r"(b.dst) : "memory");
  }
  return static_cast<double>(n) / Seconds(Clock::now() - start);
}

// Messages per second from senders to receivers over `pairs` connections: one thread sends
// round-robin on every client connection, one thread receives on every server connection.
double MessageRate(Pair& p, size_t bytes, double seconds) {
  const int n = static_cast<int>(p.clients.size());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0};
  std::vector<char> payload(bytes, 'm');
  // The receiver sleeps the way a server does: arm every connection, then wait on an epoll
  // set of their wait fds.
  int ep = epoll_create1(EPOLL_CLOEXEC);
  for (int i = 0; i < n; i++) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, p.servers[i]->wait_fd(), &ev);
  }
  std::thread receiver([&] {
    uint64_t got = 0;
    int idle = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      bool any = false;
      for (int i = 0; i < n; i++) {
        MessageView m;
        // Take what is there on this connection before moving on.
        for (int k = 0; k < 64 && p.servers[i]->Receive(&m); k++) {
          p.servers[i]->Release();
          got++;
          any = true;
        }
      }
      if (any) {
        idle = 0;
        continue;
      }
      // Spin a little, then sleep on the doorbells: two cores are shared with the sender.
      if (++idle > 200) {
        idle = 0;
        bool ready = false;
        for (int i = 0; i < n && !ready; i++) ready = !p.servers[i]->Arm();
        if (!ready) {
          epoll_event events[16];
          epoll_wait(ep, events, 16, 1);
        }
      }
    }
    received.store(got);
  });
  uint64_t sent = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (int k = 0; k < 256; k++) {
      Connection* c = p.clients[sent % n].get();
      Status s = c->Send(payload.data(), payload.size());
      if (s.Is(Status::Code::kBusy)) {
        c->Poll(nullptr, 0);
        continue;
      }
      Check(s, "send");
      sent++;
    }
    // Do not let the outgoing queues grow without bound: wait for credits.
    for (int i = 0; i < n; i++) {
      while (p.clients[i]->queued_bytes() > (1u << 20)) (void)p.clients[i]->Wait(1);
    }
  }
  // Everything sent must arrive; the rate counts what the receiver took in the window.
  for (int i = 0; i < n; i++) {
    while (p.clients[i]->queued_bytes() > 0) (void)p.clients[i]->Wait(1);
  }
  const double elapsed = Seconds(Clock::now() - start);
  stop = true;
  receiver.join();
  close(ep);
  // Drain what the receiver had not taken yet (not counted).
  return static_cast<double>(received.load()) / elapsed;
}

// One provider's set-up: a pair with a shared region, a one-connection pair and a
// several-connections pair for messages.
struct ProviderRig {
  Provider provider;
  std::string name;
  Pair reads, one, several;
  RemoteRegion region;
  uint8_t* region_base = nullptr;
  uint8_t* local = nullptr;
  ProviderRig(Provider p, const Config& cfg) : provider(p), name(ProviderName(p)) {
    Connect(p, 1, &reads);
    region = ShareRegion(reads, &region_base);
    Check(reads.client_memory->Allocate(64 * 8192, kAccessReadWrite, &local), "allocate local");
    Connect(p, 1, &one);
    Connect(p, cfg.connections, &several);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--quick") {
      cfg.quick = true;
    } else if (a == "--csv" && i + 1 < argc) {
      cfg.csv = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      cfg.only = argv[++i];
    } else if (a == "--connections" && i + 1 < argc) {
      cfg.connections = std::max(1, atoi(argv[++i]));
    } else if (a == "--messages-only") {
      cfg.messages_only = true;
    } else {
      fprintf(
          stderr,
          "usage: %s [--quick] [--csv file] [--only shm|tcp] [--messages-only] [--connections N]\n",
          argv[0]);
      return 2;
    }
  }
  cfg.seconds = cfg.quick ? 0.1 : 0.4;
  cfg.trials = cfg.quick ? 3 : 5;
  SetLogLevel(LogLevel::kWarning);
  char tmpl[] = "/tmp/ramp-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    perror("mkdtemp");
    return 1;
  }
  g_socket_dir = tmpl;

  printf(
      "transport_bench: %s, best of %d trials of %.1f s (interleaved), %d reads "
      "outstanding, %zu-byte messages\n",
      cfg.quick ? "quick" : "full", cfg.trials, cfg.seconds, cfg.depth, cfg.message_bytes);
  std::vector<std::unique_ptr<ProviderRig>> rigs;
  if (cfg.only.empty() || cfg.only == "shm") {
    rigs.push_back(std::make_unique<ProviderRig>(Provider::kShm, cfg));
  }
  if (cfg.only.empty() || cfg.only == "tcp") {
    rigs.push_back(std::make_unique<ProviderRig>(Provider::kTcp, cfg));
  }
  CopyBuffers copy;
  double memcpy_8k = 0;
  double shm_1k = 0, shm_8k = 0, shm_msgs = 0, tcp_1k = 0, tcp_msgs = 0;
  double shm_msgs_several = 0, tcp_msgs_several = 0;
  for (size_t size : {size_t{64}, size_t{1024}, size_t{8192}}) {
    if (cfg.messages_only) break;
    double best_copy = 0;
    std::vector<double> best_rate(rigs.size(), 0), best_latency(rigs.size(), 1e30);
    for (int t = 0; t < cfg.trials; t++) {
      best_copy = std::max(best_copy, MemcpyRate(copy, size, cfg.depth, cfg.seconds));
      for (size_t k = 0; k < rigs.size(); k++) {
        ProviderRig& r = *rigs[k];
        Connection* c = r.reads.clients[0].get();
        best_rate[k] =
            std::max(best_rate[k], ReadRate(c, r.region, r.local, size, cfg.depth, cfg.seconds));
        best_latency[k] =
            std::min(best_latency[k], ReadLatency(c, r.region, r.local, size, cfg.seconds / 2));
      }
    }
    Record("memcpy", "copy_ops", size, best_copy, "ops/s");
    Record("memcpy", "copy_bandwidth", size, best_copy * static_cast<double>(size) / 1e9, "GB/s");
    if (size == 8192) memcpy_8k = best_copy;
    for (size_t k = 0; k < rigs.size(); k++) {
      const std::string& name = rigs[k]->name;
      Record(name, "read_latency", size, best_latency[k], "us");
      Record(name, "read_ops", size, best_rate[k], "ops/s");
      Record(name, "read_bandwidth", size, best_rate[k] * static_cast<double>(size) / 1e9, "GB/s");
      if (name == "shm" && size == 1024) shm_1k = best_rate[k];
      if (name == "shm" && size == 8192) shm_8k = best_rate[k];
      if (name == "tcp" && size == 1024) tcp_1k = best_rate[k];
    }
  }
  {
    std::vector<double> one(rigs.size(), 0), several(rigs.size(), 0);
    for (int t = 0; t < cfg.trials; t++) {
      for (size_t k = 0; k < rigs.size(); k++) {
        one[k] = std::max(one[k], MessageRate(rigs[k]->one, cfg.message_bytes, cfg.seconds));
        several[k] =
            std::max(several[k], MessageRate(rigs[k]->several, cfg.message_bytes, cfg.seconds));
      }
    }
    for (size_t k = 0; k < rigs.size(); k++) {
      const std::string& name = rigs[k]->name;
      Record(name, "ring_msgs_1conn", cfg.message_bytes, one[k], "msg/s");
      Record(name, "ring_msgs_" + std::to_string(cfg.connections) + "conn", cfg.message_bytes,
             several[k], "msg/s");
      (name == "shm" ? shm_msgs : tcp_msgs) = one[k];
      (name == "shm" ? shm_msgs_several : tcp_msgs_several) = several[k];
    }
  }
  const std::string n = std::to_string(cfg.connections) + "conn";
  if (tcp_msgs > 0) {
    // Does the tcp provider scale with connections (issue 15)? One sender thread, one
    // receiver thread, the messages spread over n connections vs all on one.
    printf("RESULT tcp_ring_%s_vs_1conn %.2f\n", n.c_str(), tcp_msgs_several / tcp_msgs);
  }
  if (!cfg.only.empty() || cfg.messages_only) return 0;

  double shm_lat_1k = 0, tcp_lat_1k = 0;
  for (const Row& row : g_rows) {
    if (row.metric == "read_latency" && row.size == 1024) {
      (row.provider == "shm" ? shm_lat_1k : tcp_lat_1k) = row.value;
    }
  }
  printf("RESULT shm_read_8k_vs_memcpy %.3f\n", shm_8k / memcpy_8k);
  printf("RESULT shm_read_vs_tcp_read_1k %.1f\n", shm_1k / tcp_1k);
  printf("RESULT shm_read_vs_tcp_read_1k_latency %.1f\n", tcp_lat_1k / shm_lat_1k);
  printf("RESULT shm_ring_msgs_per_sec_1conn %.0f\n", shm_msgs);
  printf("RESULT tcp_ring_msgs_per_sec_1conn %.0f\n", tcp_msgs);
  printf("RESULT shm_ring_msgs_per_sec_%s %.0f\n", n.c_str(), shm_msgs_several);
  printf("RESULT tcp_ring_msgs_per_sec_%s %.0f\n", n.c_str(), tcp_msgs_several);
  printf("RESULT shm_read_1k_ops_per_sec %.0f\n", shm_1k);
  printf("RESULT tcp_read_1k_ops_per_sec %.0f\n", tcp_1k);
  printf("RESULT shm_read_latency_1k_us %.3f\n", shm_lat_1k);
  printf("RESULT tcp_read_latency_1k_us %.3f\n", tcp_lat_1k);

  if (!cfg.csv.empty()) {
    std::ofstream out(cfg.csv);
    out << "provider,metric,size,value,unit\n";
    for (const Row& r : g_rows) {
      out << r.provider << "," << r.metric << "," << r.size << "," << r.value << "," << r.unit
          << "\n";
    }
  }
  rmdir(g_socket_dir.c_str());
  return 0;
}
