// rampd: the pg_ramp partition server.
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flags.h"
#include "ramp/log.h"
#include "ramp/transport/transport.h"
#include "server/server.h"

namespace {

const char* kUsage = R"(usage: rampd [options]

Serves pg_ramp partitions: RAMP-Fast transactions, one-sided reads, page I/O.

  --listen URI        endpoint to listen on (repeatable): tcp://host:port, shm:///path,
                      verbs://host:port. Default tcp://127.0.0.1:7400 (loopback only).
  --cluster FILE      cluster file: one "node <endpoints>" line per server, in node order
                      (default: a cluster of this server alone); read again on SIGHUP and
                      when it changes: nodes added at its end join the running cluster
                      (keep "homes N" in it), other changes are applied or refused as
                      README "Servers on several hosts" says
  --node N            this server's index in the cluster file (default: found by endpoint)
  --token-file FILE   the cluster token; peers must prove they know it. Required unless
                      every listen endpoint is on loopback or a unix socket.
  --data DIR          data directory: the partitions' logs live there and every write is
                      acknowledged once it is on disk (group commit); a restart recovers
                      from it. Without it the server keeps everything in memory only.
  --workers N         worker threads (default 2)
  --spin-rounds N     idle polling rounds of a worker before it sleeps (default 200)
  --log-flush-thread  with --data: the log writer's thread writes every group commit batch
                      (default: a worker whose replies wait for a batch writes it itself
                      when no batch is being written: fewer thread wake-ups per write)
  --memory-mb N       page memory in MiB (default 1024)
  --ring-kb N         receive ring size per connection in KiB (default 1024)
  --gc-grace-ms N     how long overwritten versions stay readable (default 5000)
  --txn-timeout-ms N  a transaction left prepared this long is resolved by the servers
                      (termination protocol; default 30000, must exceed client timeouts)
  --max-connections N (default 1024)
  --handshake-timeout-ms N  a connection that has not authenticated within this is closed
                      and logged (default 3000)
  --max-pending-handshakes N  connections still authenticating, at most (default 512);
                      beyond it new ones are refused and logged, except that a source
                      address with fewer of them takes the place of the busiest source's
                      oldest
  --max-pending-handshakes-per-source N  the same from one source address (tcp; default 64)
  --max-value-kb N    largest value accepted (default 32768)
  --shm-socket-mode M  permission bits of the shm socket files, octal (e.g. 0660), set on
                      every start (default: as the umask leaves them); whoever may open
                      the file may connect, the token still decides who gets in
  --shm-socket-group G  group (name or number) of the shm socket files, e.g. the group of
                      the PostgreSQL server's user
  --page-dir DIR      page files of remote page I/O (default none: every page is served
                      from memory)
  --memory-budget-mb N  pages kept in memory at most (at most half of --memory-mb; needs
                      --page-dir, not with --data yet): complete pages beyond it live only
                      on disk and are read back when needed, so data sets larger than the
                      budget are served
  --io-workers N      static I/O worker threads of the page-read service (default 2)
  --page-io MODE      static (default: batches of resident pages served by the worker
                      that received them, disk reads by the I/O workers), pool (every
                      batch through the I/O workers) or per-request (a thread per batch:
                      benchmark baseline)
  --page-direct-io    read page files with O_DIRECT (bypass the page cache)
  --no-io-uring       read page files with pread instead of io_uring
  --debug-page-fault F  inject page read faults (tests): eio:<page> or short:<page> (disk
                      reads), moved:<page> (a resident page's re-check after its write;
                      moved-once:<page> only its first)
  --rebalance-interval-ms N  the hot-partition rebalancer looks at the partitions' loads
                      every N ms and moves the hottest off the most loaded server (0, the
                      default: off); every server runs it, the lowest-numbered one that
                      answers acts
  --rebalance-threshold-pct N  it acts when the most loaded server carries more than N %
                      of the mean load (default 125)
  --rebalance-cooldown-ms N  a moved partition stays put this long (default 60000)
  --test-crash-at STEP  tests: SIGKILL this process at a migration step (home-after-begin,
                      home-after-cutover, home-after-release, home-after-commit,
                      source-after-release, target-during-copy, target-after-finish)
  --test-ack-before-durable  tests: a deliberate bug for the fault harness
                      (bench/nemesis/run): with --data, answer PREPARE, ABORT and 2PL
                      writes before they are on disk; a SIGKILL then loses acknowledged
                      commits. Never in production.
  --log-level LEVEL   debug, info, warning, error (default info)
  --config FILE       read "name = value" settings (the names of these options)
  --help              this text
)";

bool IsLocal(const ramp::transport::Endpoint& e) {
  if (e.provider == ramp::transport::Provider::kShm) return true;
  return e.host == "127.0.0.1" || e.host == "localhost" || e.host == "::1";
}

// An octal mode of permission bits only (no file type, setuid or sticky bits).
ramp::Status ParseSocketMode(const std::string& text, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 8);
  if (text.empty() || errno != 0 || *end != '\0' || v < 0 || v > 0777) {
    return ramp::Status::InvalidArgument("'" + text + "' is not an octal mode between 0 and 0777");
  }
  *out = static_cast<int>(v);
  return ramp::Status::OK();
}

ramp::Status LookUpGroup(const std::string& name, int64_t* gid) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(name.c_str(), &end, 10);
  if (!name.empty() && errno == 0 && *end == '\0' && v >= 0) {
    *gid = v;
    return ramp::Status::OK();
  }
  group g;
  group* found = nullptr;
  std::vector<char> buf(16384);
  const int rc = getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found);
  if (rc != 0) return ramp::Status::FromErrno("looking up group '" + name + "'", rc);
  if (found == nullptr) return ramp::Status::NotFound("no group '" + name + "'");
  *gid = found->gr_gid;
  return ramp::Status::OK();
}

int Fail(const ramp::Status& s) {
  std::fprintf(stderr, "rampd: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ramp;
  // One name a line would be longer than the usage text.
  // clang-format off
  tools::Flags flags(
      {"listen", "cluster", "node", "token-file", "data", "workers", "memory-mb", "ring-kb",
       "gc-grace-ms", "txn-timeout-ms", "max-connections", "max-value-kb", "log-level", "config",
       "page-dir", "memory-budget-mb", "io-workers", "page-io", "debug-page-fault",
       "handshake-timeout-ms", "max-pending-handshakes", "max-pending-handshakes-per-source",
       "shm-socket-mode", "shm-socket-group", "test-crash-at", "rebalance-interval-ms",
       "rebalance-threshold-pct", "rebalance-cooldown-ms", "spin-rounds"},
      {"help", "page-direct-io", "no-io-uring", "test-ack-before-durable", "log-flush-thread"});
  // clang-format on
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) return Fail(st);
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!flags.positional().empty()) {
    return Fail(Status::InvalidArgument("unexpected argument '" + flags.positional()[0] + "'"));
  }
  if (flags.Has("config")) {
    st = flags.LoadConfig(flags.Get("config"));
    if (!st.ok()) return Fail(st);
  }
  LogLevel level = LogLevel::kInfo;
  if (!ParseLogLevel(flags.Get("log-level", "info"), &level)) {
    return Fail(Status::InvalidArgument("unknown log level '" + flags.Get("log-level") + "'"));
  }
  SetLogLevel(level);

  server::ServerOptions o;
  std::vector<std::string> listen = flags.GetAll("listen");
  if (listen.empty()) listen.push_back("tcp://127.0.0.1:7400");
  for (const auto& uri : listen) {
    std::vector<transport::Endpoint> eps;
    st = transport::ParseEndpointList(uri, &eps);
    if (!st.ok()) return Fail(st.Annotate("--listen"));
    o.listen.insert(o.listen.end(), eps.begin(), eps.end());
  }
  if (flags.Has("cluster")) {
    st = server::ClusterConfig::Load(flags.Get("cluster"), &o.cluster);
    if (!st.ok()) return Fail(st);
  }
  long v = 0;
  if (!(st = flags.GetInt("node", -1, -1, 65535, &v)).ok()) return Fail(st);
  o.node = static_cast<int>(v);
  if (!(st = flags.GetInt("workers", 2, 1, 256, &v)).ok()) return Fail(st);
  o.workers = static_cast<int>(v);
  if (!(st = flags.GetInt("spin-rounds", 200, 1, 100000000, &v)).ok()) return Fail(st);
  o.spin_rounds = static_cast<int>(v);
  if (!(st = flags.GetInt("memory-mb", 1024, 16, 1 << 22, &v)).ok()) return Fail(st);
  o.memory_bytes = static_cast<size_t>(v) << 20;
  if (!(st = flags.GetInt("ring-kb", 1024, 64, 1 << 20, &v)).ok()) return Fail(st);
  o.ring_bytes = static_cast<size_t>(v) << 10;
  if (!(st = flags.GetInt("gc-grace-ms", 5000, 10, 3600000, &v)).ok()) return Fail(st);
  o.gc_grace_ms = static_cast<int>(v);
  if (!(st = flags.GetInt("txn-timeout-ms", 30000, 100, 3600000, &v)).ok()) return Fail(st);
  o.txn_timeout_ms = static_cast<int>(v);
  if (!(st = flags.GetInt("max-connections", 1024, 1, 1 << 20, &v)).ok()) return Fail(st);
  o.limits.max_connections = static_cast<size_t>(v);
  if (!(st = flags.GetInt("handshake-timeout-ms", 3000, 10, 600000, &v)).ok()) return Fail(st);
  o.handshake_timeout_ms = static_cast<int>(v);
  if (!(st = flags.GetInt("max-pending-handshakes", 512, 1, 1 << 20, &v)).ok()) return Fail(st);
  o.max_pending_handshakes = static_cast<size_t>(v);
  if (!(st = flags.GetInt("max-pending-handshakes-per-source", 64, 1, 1 << 20, &v)).ok()) {
    return Fail(st);
  }
  o.max_pending_handshakes_per_source = static_cast<size_t>(v);
  if (flags.Has("shm-socket-mode")) {
    st = ParseSocketMode(flags.Get("shm-socket-mode"), &o.shm_socket_mode);
    if (!st.ok()) return Fail(st.Annotate("--shm-socket-mode"));
  }
  if (flags.Has("shm-socket-group")) {
    st = LookUpGroup(flags.Get("shm-socket-group"), &o.shm_socket_gid);
    if (!st.ok()) return Fail(st.Annotate("--shm-socket-group"));
  }
  if (!(st = flags.GetInt("max-value-kb", 32768, 1, 1 << 20, &v)).ok()) return Fail(st);
  o.limits.max_value_bytes = static_cast<size_t>(v) << 10;
  o.data_dir = flags.Get("data");
  o.page_dir = flags.Get("page-dir");
  o.test_crash_at = flags.Get("test-crash-at");
  o.test_ack_before_durable = flags.Has("test-ack-before-durable");
  o.inline_log_flush = !flags.Has("log-flush-thread");
  if (!(st = flags.GetInt("rebalance-interval-ms", 0, 0, 3600000, &v)).ok()) return Fail(st);
  o.rebalance_interval_ms = static_cast<int>(v);
  if (!(st = flags.GetInt("rebalance-threshold-pct", 125, 101, 1000, &v)).ok()) return Fail(st);
  o.rebalance_threshold = static_cast<double>(v) / 100.0;
  if (!(st = flags.GetInt("rebalance-cooldown-ms", 60000, 0, 86400000, &v)).ok()) return Fail(st);
  o.rebalance_cooldown_ms = static_cast<int>(v);
  if (flags.Has("memory-budget-mb")) {
    // The budget evicts complete pages to the page files of remote page I/O; the durable
    // log keeps its own segment files, written at checkpoints from the pages in memory.
    // The two are not joined yet: a durable server keeps every page in memory.
    if (!o.data_dir.empty()) {
      return Fail(Status::InvalidArgument(
          "--memory-budget-mb cannot be combined with --data yet (the durable log reads every "
          "page from memory at checkpoints); give the server more --memory-mb instead"));
    }
    // Evicted pages are read back into fresh frames before the next eviction pass: the
    // arena keeps the other half as headroom for that.
    if (!(st = flags.GetInt("memory-budget-mb", 0, 1, static_cast<int64_t>(o.memory_bytes >> 21),
                            &v))
             .ok()) {
      return Fail(st.Annotate("--memory-budget-mb is at most half of --memory-mb"));
    }
    if (o.page_dir.empty()) {
      return Fail(Status::InvalidArgument("--memory-budget-mb needs page files (--page-dir)"));
    }
    o.memory_budget_bytes = static_cast<size_t>(v) << 20;
  }
  if (!(st = flags.GetInt("io-workers", 2, 1, 256, &v)).ok()) return Fail(st);
  o.pages.io_workers = static_cast<int>(v);
  const std::string page_io = flags.Get("page-io", "static");
  if (page_io != "static" && page_io != "pool" && page_io != "per-request") {
    return Fail(Status::InvalidArgument("--page-io: expected static, pool or per-request, got '" +
                                        page_io + "'"));
  }
  o.pages.per_request_threads = page_io == "per-request";
  o.pages.serve_resident_inline = page_io == "static";
  o.page_direct_io = flags.Has("page-direct-io");
  o.pages.use_io_uring = !flags.Has("no-io-uring");
  o.pages.debug_fault = flags.Get("debug-page-fault");
  if (flags.Has("token-file")) {
    st = transport::ReadTokenFile(flags.Get("token-file"), &o.token);
    if (!st.ok()) return Fail(st);
  } else {
    for (const auto& e : o.listen) {
      if (!IsLocal(e)) {
        return Fail(Status::InvalidArgument("refusing to listen on " + e.ToString() +
                                            " without --token-file: only loopback and unix "
                                            "sockets may go without the cluster token"));
      }
    }
    RAMP_WARN("no --token-file: peers are not authenticated (loopback only)");
  }
  for (const std::string& dir : {o.data_dir, o.page_dir}) {
    struct stat sb;
    if (!dir.empty() && stat(dir.c_str(), &sb) != 0 && mkdir(dir.c_str(), 0700) != 0) {
      return Fail(Status::FromErrno("cannot create directory " + dir, errno));
    }
  }

  // Connections, pending handshakes and shared-memory segments are descriptors: take what
  // the hard limit allows.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, rlim_t{1} << 20);
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) RAMP_DEBUG("cannot raise RLIMIT_NOFILE");
  }

  // Signals go to this thread only (sigwait below); every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  SetLogTag("rampd[" + std::to_string(getpid()) + "]");

  std::unique_ptr<server::Server> server;
  st = server::Server::Start(o, &server);
  if (!st.ok()) return Fail(st);
  SetLogTag("rampd/" + std::to_string(server->node()));
  // Tests and scripts wait for this line to know the server is up.
  RAMP_INFO("ready");
  // The cluster file is read again on SIGHUP and when it changes (looked at every second):
  // nodes added at its end join without restarting anyone (Server::ReloadCluster).
  const std::string cluster_file = flags.Get("cluster");
  auto file_stamp = [&cluster_file] {
    struct stat sb {};
    if (cluster_file.empty() || stat(cluster_file.c_str(), &sb) != 0) return std::string();
    return std::to_string(sb.st_ino) + ":" + std::to_string(sb.st_size) + ":" +
           std::to_string(sb.st_mtim.tv_sec) + "." + std::to_string(sb.st_mtim.tv_nsec);
  };
  std::string stamp = file_stamp();
  auto reload = [&](const char* why) {
    stamp = file_stamp();
    server::ClusterConfig next;
    Status rs = server::ClusterConfig::Load(cluster_file, &next);
    if (rs.ok()) rs = server->ReloadCluster(next);
    if (rs.ok()) {
      RAMP_INFO("cluster file %s applied (%s)", cluster_file.c_str(), why);
    } else {
      RAMP_ERROR("cluster file %s not applied (%s), keeping the one in use: %s",
                 cluster_file.c_str(), why, rs.ToString().c_str());
    }
  };
  int sig = 0;
  for (;;) {
    timespec second{1, 0};
    sig = sigtimedwait(&signals, nullptr, &second);
    if (sig < 0) {
      if (errno != EAGAIN && errno != EINTR) break;
      if (!cluster_file.empty() && file_stamp() != stamp) reload("the file changed");
      continue;
    }
    if (sig == SIGHUP) {
      if (cluster_file.empty()) {
        RAMP_INFO("SIGHUP: no --cluster file to read again");
      } else {
        reload("SIGHUP");
      }
      continue;
    }
    break;
  }
  RAMP_INFO("%s received, shutting down", strsignal(sig));
  server->Stop();
  RAMP_INFO("stopped");
  return 0;
}
