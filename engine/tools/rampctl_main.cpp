// rampctl: operator's view of a running pg_ramp cluster.
#include <errno.h>
#include <signal.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "flags.h"
#include "ramp/client.h"
#include "ramp/keyspace_catalog.h"
#include "ramp/log.h"
#include "ramp/rebalance.h"
#include "ramp/transport/transport.h"

namespace {

const char* kUsage = R"(usage: rampctl --node URI [--token-file FILE] COMMAND

  status [--no-probe]
                every server: reachable, partitions, keys, bytes, requests served,
                transactions prepared and not yet decided there, the address it
                advertises (its line of its cluster file); whether all run the same
                cluster file; the reachability matrix (each server connects to every
                node's advertised address now: time, or FAILED with a sentence naming
                both ends); then the partition migrations in flight (and recently
                finished). Exit status 1 when a server is down or a probe failed
  partitions    every partition: owner, home, epoch, migrating, keys, bytes, ops/s
  migrate KEYSPACE BUCKET NODE
                moves a partition to a node while it stays readable and writable (writes
                pause only at the cutover); shows progress until it is done
  rebalance [--dry-run] [--threshold-pct N]
                the hot-partition rebalancer's plan (partitions' loads, max/mean load of
                the servers before and after) and, without --dry-run, its moves
  keyspaces     every keyspace: the cluster's keyspace catalog (database, schema, relation,
                creating PostgreSQL server and database, state) with the size on the
                cluster; keyspaces with data but no catalog entry show as "unregistered"
                (left by pg_ramp before the catalog existed, or raw key-value keyspaces)
  drop-keyspace ID
                marks the entry dropped and removes the keyspace's data from every server;
                a live entry (a table that still exists) needs --force

  Raw key-value keyspaces (read from PostgreSQL through the ramp foreign data wrapper):
  kv-register ID SCHEMA NAME [--buckets N]
                registers keyspace ID in the catalog as a raw key-value keyspace (kind k)
                named SCHEMA.NAME: IMPORT FOREIGN SCHEMA SCHEMA finds it
  kv-load ID COUNT [--value-bytes B] [--buckets N]
                writes keys user0 .. user<COUNT-1>, each a value of B bytes (default 1000),
                100 keys per transaction: what the YCSB benchmark's loader writes
  kv-put ID KEY VALUE [KEY VALUE ...] [--buckets N]
                writes the keys in one RAMP transaction
  kv-get ID KEY... [--buckets N]
                reads the keys in one read-atomic RAMP read: KEY<tab>VALUE per key found,
                KEY<tab>(not found) for the others
  The buckets of a keyspace come from its catalog entry, else --buckets (default 16).

  Keyspace ids are decimal, as ramp.keyspaces and ramp.partitions() show them.

  --node URI          a server of the cluster (tcp://host:port or shm:///path); repeatable
  --token-file FILE   the cluster token
  --timeout-ms N      how long to wait for answers (default 5000)
  --force             drop-keyspace: also a live keyspace
  --dry-run           rebalance: show the plan, move nothing
  --threshold-pct N   rebalance: act above N % of the mean load (default 125)
  --buckets N         kv-*: partitions of the keyspace (default: its catalog entry, else 16)
  --value-bytes B     kv-load: bytes per value (default 1000)
)";

int Fail(const ramp::Status& s) {
  std::fprintf(stderr, "rampctl: %s\n", s.ToString().c_str());
  return 2;
}

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", b / 1073741824.0);
  } else if (b >= (1ull << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  }
  return buf;
}

std::string Time(uint64_t ms) {
  if (ms == 0) return "-";
  const time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Size {
  uint64_t partitions = 0;
  uint64_t keys = 0;
  uint64_t bytes = 0;
};

int ListKeyspaces(ramp::Client* client) {
  using namespace ramp;
  std::vector<PartitionStatus> parts;
  Status st = client->Partitions(&parts);
  if (!st.ok()) return Fail(st);
  std::map<KeyspaceId, Size> sizes;
  for (const auto& p : parts) {
    Size& s = sizes[p.id.keyspace];
    s.partitions++;
    s.keys += p.keys;
    s.bytes += p.bytes;
  }
  KeyspaceCatalog catalog(client);
  std::vector<KeyspaceEntry> entries;
  if (!(st = catalog.List(&entries)).ok()) return Fail(st);
  std::printf("%-20s %-12s %-5s %-16s %-16s %-24s %-32s %-20s %-10s %-10s %s\n", "keyspace",
              "state", "kind", "database", "schema", "relation", "created by (system/db oid)",
              "created", "partitions", "keys", "bytes");
  auto size_columns = [&](KeyspaceId id) {
    const Size s = sizes.count(id) ? sizes[id] : Size{};
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%-10" PRIu64 " %-10" PRIu64 " %s", s.partitions, s.keys,
                  Bytes(s.bytes).c_str());
    return std::string(buf);
  };
  std::map<KeyspaceId, std::string> lines;
  for (const auto& e : entries) {
    const std::string creator = std::to_string(e.system_id) + "/" + std::to_string(e.database_oid);
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%-20" PRIu64 " %-12s %-5c %-16s %-16s %-24s %-32s %-20s %s",
                  e.id, KeyspaceStateName(e.state), e.kind, e.database.c_str(), e.schema.c_str(),
                  e.relation.c_str(), creator.c_str(), Time(e.created_ms).c_str(),
                  size_columns(e.id).c_str());
    lines[e.id] = buf;
  }
  for (const auto& [id, s] : sizes) {
    if (lines.count(id)) continue;
    const bool is_catalog = id == kCatalogKeyspace;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%-20" PRIu64 " %-12s %-5s %-16s %-16s %-24s %-32s %-20s %s",
                  id, is_catalog ? "catalog" : "unregistered", "-", "-", "-", "-", "-", "-",
                  size_columns(id).c_str());
    lines[id] = buf;
  }
  for (const auto& [id, line] : lines) std::printf("%s\n", line.c_str());
  return 0;
}

void PrintMigrations(const std::vector<ramp::MigrationStatus>& moves) {
  std::printf("\n%-20s %-6s %-6s %-6s %-6s %-12s %-24s %-20s %s\n", "keyspace", "bucket", "home",
              "source", "target", "phase", "copied", "started", "note");
  for (const auto& m : moves) {
    const std::string copied = Bytes(m.bytes_copied) + " of " + Bytes(m.bytes_total);
    std::printf("%-20" PRIu64 " %-6u %-6u %-6u %-6u %-12s %-24s %-20s %s\n", m.id.keyspace,
                m.id.bucket, m.home, m.source, m.target, m.phase.c_str(), copied.c_str(),
                Time(m.started_unix_ms).c_str(), m.error.c_str());
  }
}

bool ParseU64(const std::string& arg, uint64_t max, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(arg.c_str(), &end, 10);
  if (arg.empty() || arg[0] == '-' || *end != '\0' || errno != 0 || v > max) return false;
  *out = v;
  return true;
}

int Migrate(ramp::Client* client, const std::vector<std::string>& args) {
  using namespace ramp;
  if (args.size() != 4) {
    return Fail(Status::InvalidArgument("usage: rampctl migrate KEYSPACE BUCKET NODE"));
  }
  uint64_t keyspace = 0, bucket = 0, node = 0;
  if (!ParseU64(args[1], UINT64_MAX, &keyspace)) {
    return Fail(Status::InvalidArgument("keyspace id '" + args[1] + "' is not a decimal number"));
  }
  if (!ParseU64(args[2], UINT32_MAX, &bucket)) {
    return Fail(Status::InvalidArgument("bucket '" + args[2] + "' is not a decimal number"));
  }
  if (!ParseU64(args[3], UINT32_MAX, &node)) {
    return Fail(Status::InvalidArgument("node '" + args[3] + "' is not a decimal number"));
  }
  const PartitionId p{keyspace, static_cast<uint32_t>(bucket)};
  std::string last;
  Status st =
      client->MigratePartition(p, static_cast<uint32_t>(node), true, [&](const MigrationStatus& m) {
        const std::string line =
            m.phase + ": " + Bytes(m.bytes_copied) + " of " + Bytes(m.bytes_total) + " copied";
        if (line == last) return;
        last = line;
        std::printf("%s %s\n", p.ToString().c_str(), line.c_str());
        std::fflush(stdout);
      });
  if (!st.ok()) return Fail(st);
  std::printf("moved %s to node %llu\n", p.ToString().c_str(),
              static_cast<unsigned long long>(node));
  return 0;
}

int Rebalance(ramp::Client* client, bool dry_run, long threshold_pct) {
  using namespace ramp;
  RebalanceOptions o;
  o.threshold = static_cast<double>(threshold_pct) / 100.0;
  RebalancePlan plan;
  Status st = client->PlanRebalance(o, &plan);
  if (!st.ok()) return Fail(st);
  std::printf("load per node (ops/s):");
  for (size_t n = 0; n < plan.load_before.size(); n++) {
    std::printf(" %zu: %.1f -> %.1f", n, plan.load_before[n], plan.load_after[n]);
  }
  std::printf("\nmax/mean load: %.2f -> %.2f (threshold %.2f)\n", plan.imbalance_before,
              plan.imbalance_after, o.threshold);
  for (const auto& m : plan.moves) {
    std::printf("%s %s (%.1f ops/s) from node %u to node %u\n", dry_run ? "would move" : "moving",
                m.id.ToString().c_str(), m.load, m.from, m.to);
    if (dry_run) continue;
    if (!(st = client->MigratePartition(m.id, m.to)).ok()) return Fail(st);
  }
  std::printf("%s\n", plan.why.c_str());
  return 0;
}

int DropKeyspace(ramp::Client* client, const std::string& arg, bool force) {
  using namespace ramp;
  char* end = nullptr;
  errno = 0;
  const unsigned long long id = std::strtoull(arg.c_str(), &end, 10);
  if (arg.empty() || *end != '\0' || errno != 0) {
    return Fail(Status::InvalidArgument("keyspace id '" + arg + "' is not a decimal number"));
  }
  if (id == kCatalogKeyspace) {
    return Fail(Status::InvalidArgument("keyspace " + arg + " is the keyspace catalog"));
  }
  KeyspaceCatalog catalog(client);
  KeyspaceEntry e;
  bool found = false;
  Status st = catalog.Get(id, &e, &found);
  if (!st.ok()) return Fail(st);
  if (found && e.live() && !force) {
    return Fail(Status::InvalidArgument("keyspace " + arg + " is live (" + e.database + "." +
                                        e.schema + "." + e.relation +
                                        "): drop the relation in PostgreSQL, or use --force"));
  }
  if (!(st = catalog.Drop(id)).ok()) return Fail(st);
  std::printf("dropped keyspace %llu%s\n", id,
              found ? (" (" + e.database + "." + e.schema + "." + e.relation + ")").c_str()
                    : " (unregistered)");
  return 0;
}

// ---- raw key-value keyspaces (kv-*) --------------------------------------------------------

// The keyspace of a kv-* command, defined on the client with its buckets: --buckets, else
// its catalog entry's, else the default.
ramp::Status KvKeyspace(ramp::Client* client, const ramp::tools::Flags& flags,
                        const std::string& arg, ramp::KeyspaceId* id) {
  using namespace ramp;
  uint64_t v = 0;
  if (!ParseU64(arg, UINT64_MAX, &v)) {
    return Status::InvalidArgument("keyspace id '" + arg + "' is not a decimal number");
  }
  if (v < kFirstUserKeyspace)
    return Status::InvalidArgument("keyspace ids below 65536 are reserved");
  long buckets = 0;
  Status st = flags.GetInt("buckets", 0, 1, 65536, &buckets);
  if (!st.ok()) return st;
  if (buckets == 0) {
    KeyspaceCatalog catalog(client);
    KeyspaceEntry e;
    bool found = false;
    if (!(st = catalog.Get(v, &e, &found)).ok()) return st;
    buckets = found ? e.buckets : kDefaultBuckets;
  }
  client->DefineKeyspace(v, static_cast<uint32_t>(buckets));
  *id = v;
  return Status::OK();
}

int KvRegister(ramp::Client* client, const ramp::tools::Flags& flags) {
  using namespace ramp;
  const auto& args = flags.positional();
  if (args.size() != 4) {
    return Fail(Status::InvalidArgument("usage: rampctl kv-register ID SCHEMA NAME [--buckets N]"));
  }
  KeyspaceEntry e;
  if (!ParseU64(args[1], UINT64_MAX, &e.id)) {
    return Fail(Status::InvalidArgument("keyspace id '" + args[1] + "' is not a decimal number"));
  }
  long buckets = 0;
  Status st = flags.GetInt("buckets", kDefaultBuckets, 1, 65536, &buckets);
  if (!st.ok()) return Fail(st);
  e.kind = 'k';
  e.buckets = static_cast<uint32_t>(buckets);
  e.schema = args[2];
  e.relation = args[3];
  KeyspaceCatalog catalog(client);
  bool attached = false, taken = false;
  if (!(st = catalog.Register(&e, &attached, &taken, false)).ok()) return Fail(st);
  if (taken) {
    return Fail(Status::InvalidArgument("keyspace " + args[1] + " is already registered"));
  }
  std::printf("registered keyspace %s as %s.%s (key-value, %ld buckets)\n", args[1].c_str(),
              e.schema.c_str(), e.relation.c_str(), buckets);
  return 0;
}

int KvLoad(ramp::Client* client, const ramp::tools::Flags& flags) {
  using namespace ramp;
  const auto& args = flags.positional();
  if (args.size() != 3) {
    return Fail(Status::InvalidArgument("usage: rampctl kv-load ID COUNT [--value-bytes B]"));
  }
  KeyspaceId ks = 0;
  Status st = KvKeyspace(client, flags, args[1], &ks);
  if (!st.ok()) return Fail(st);
  uint64_t count = 0;
  if (!ParseU64(args[2], UINT32_MAX, &count)) {
    return Fail(Status::InvalidArgument("count '" + args[2] + "' is not a decimal number"));
  }
  long value_bytes = 0;
  if (!(st = flags.GetInt("value-bytes", 1000, 0, 1 << 24, &value_bytes)).ok()) return Fail(st);
  // As bench/ycsb/ycsb_bench.cpp's Load: keys "user<i>", one value of 'v's, 100 per PUT.
  const std::string value(static_cast<size_t>(value_bytes), 'v');
  for (uint64_t i = 0; i < count;) {
    auto t = client->Begin();
    for (int j = 0; j < 100 && i < count; j++, i++) {
      if (!(st = t->Put(ks, "user" + std::to_string(i), value)).ok()) return Fail(st);
    }
    if (!(st = t->Commit()).ok()) return Fail(st);
  }
  std::printf("loaded %llu keys into keyspace %llu\n", static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(ks));
  return 0;
}

int KvPut(ramp::Client* client, const ramp::tools::Flags& flags) {
  using namespace ramp;
  const auto& args = flags.positional();
  if (args.size() < 4 || args.size() % 2 != 0) {
    return Fail(Status::InvalidArgument(
        "usage: rampctl kv-put ID KEY VALUE [KEY VALUE ...] [--buckets N]"));
  }
  KeyspaceId ks = 0;
  Status st = KvKeyspace(client, flags, args[1], &ks);
  if (!st.ok()) return Fail(st);
  auto t = client->Begin();
  for (size_t i = 2; i + 1 < args.size(); i += 2) {
    if (!(st = t->Put(ks, args[i], args[i + 1])).ok()) return Fail(st);
  }
  if (!(st = t->Commit()).ok()) return Fail(st);
  return 0;
}

int KvGet(ramp::Client* client, const ramp::tools::Flags& flags) {
  using namespace ramp;
  const auto& args = flags.positional();
  if (args.size() < 3) {
    return Fail(Status::InvalidArgument("usage: rampctl kv-get ID KEY... [--buckets N]"));
  }
  KeyspaceId ks = 0;
  Status st = KvKeyspace(client, flags, args[1], &ks);
  if (!st.ok()) return Fail(st);
  std::vector<ReadItem> items;
  for (size_t i = 2; i < args.size(); i++) items.push_back(ReadItem{ks, args[i], {}});
  std::vector<ReadResult> got;
  auto t = client->Begin();
  if (!(st = t->GetAll(items, &got)).ok()) return Fail(st);
  for (size_t i = 0; i < items.size(); i++) {
    std::printf("%s\t%s\n", args[i + 2].c_str(),
                got[i].found ? got[i].value.c_str() : "(not found)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ramp;
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  tools::Flags flags(
      {"node", "token-file", "timeout-ms", "threshold-pct", "buckets", "value-bytes"},
      {"help", "force", "dry-run", "no-probe"});
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) return Fail(st);
  if (flags.Has("help") || flags.positional().empty()) {
    std::fputs(kUsage, flags.Has("help") ? stdout : stderr);
    return flags.Has("help") ? 0 : 2;
  }
  ClientOptions o;
  for (const auto& n : flags.GetAll("node")) {
    st = transport::ParseEndpointList(n, &o.seeds);
    if (!st.ok()) return Fail(st.Annotate("--node"));
  }
  if (o.seeds.empty()) return Fail(Status::InvalidArgument("--node is required"));
  o.provider = o.seeds[0].provider;
  o.read_path = o.provider == transport::Provider::kTcp ? ReadPath::kRpc : ReadPath::kGetPlus;
  o.write_path = o.provider == transport::Provider::kTcp ? WritePath::kRpc : WritePath::kPutPlus;
  long timeout = 0;
  if (!(st = flags.GetInt("timeout-ms", 5000, 1, 3600000, &timeout)).ok()) return Fail(st);
  o.timeout_ms = static_cast<int>(timeout);
  o.connect_timeout_ms = static_cast<int>(timeout);
  if (flags.Has("token-file")) {
    st = transport::ReadTokenFile(flags.Get("token-file"), &o.token);
    if (!st.ok()) return Fail(st);
  }
  std::unique_ptr<Client> client;
  st = Client::Open(o, &client);
  if (!st.ok()) return Fail(st);

  const std::string& cmd = flags.positional()[0];
  if (cmd == "status") {
    std::vector<ServerStatus> servers;
    st = client->ClusterStatus(&servers);
    if (!st.ok()) return Fail(st);
    std::printf("%-4s %-10s %-11s %-12s %-12s %-12s %-9s %s\n", "node", "state", "partitions",
                "keys", "bytes", "requests", "prepared", "advertises");
    int down = 0;
    for (const auto& s : servers) {
      if (!s.reachable) down++;
      // What the server says it advertises (its line of its own cluster file); the
      // client's list when it cannot be asked.
      const std::string& adv = s.advertised.empty() ? s.endpoints : s.advertised;
      std::printf("%-4u %-10s %-11llu %-12llu %-12s %-12llu %-9llu %s%s%s\n", s.node,
                  s.reachable ? "up" : "DOWN", static_cast<unsigned long long>(s.partitions),
                  static_cast<unsigned long long>(s.keys), Bytes(s.bytes).c_str(),
                  static_cast<unsigned long long>(s.ops),
                  static_cast<unsigned long long>(s.prepared_txns), adv.c_str(),
                  s.reachable ? "" : "  ", s.error.c_str());
    }
    int trouble = down;
    // Every server should run the same cluster file.
    std::map<uint64_t, std::vector<uint32_t>> files;
    for (const auto& s : servers) {
      if (s.reachable && s.config_digest != 0) files[s.config_digest].push_back(s.node);
    }
    if (files.size() > 1) {
      trouble++;
      std::printf("\nthe servers run different cluster files:\n");
      for (const auto& s : servers) {
        if (!s.reachable || s.config_digest == 0) continue;
        std::printf("  node %u: %u nodes, digest %016llx\n", s.node, s.config_nodes,
                    static_cast<unsigned long long>(s.config_digest));
      }
    }
    if (!flags.Has("no-probe")) {
      // The reachability matrix: every server connects to every node as its own file
      // lists it (token handshake and HELLO) and says how long it took.
      std::vector<std::string> errors;
      std::vector<std::vector<std::string>> cells(servers.size());
      for (const auto& s : servers) {
        cells[s.node].assign(servers.size(), "-");
        if (!s.reachable) continue;
        std::vector<NodeProbe> seen;
        Status ps = client->Probe(s.node, {}, &seen);
        if (!ps.ok()) {
          errors.push_back("node " + std::to_string(s.node) + " could not probe: " + ps.ToString());
          continue;
        }
        for (const auto& p : seen) {
          if (p.to >= cells[s.node].size()) cells[s.node].resize(p.to + 1, "-");
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%.1fms", p.latency_us / 1000.0);
          cells[s.node][p.to] = p.ok ? buf : "FAILED";
          if (!p.ok) errors.push_back(p.error);
        }
      }
      std::printf(
          "\nreachability (row: the server that connects, column: the node it reaches; "
          "connect, token handshake and HELLO):\n%-9s",
          "from\\to");
      for (size_t n = 0; n < servers.size(); n++) std::printf(" %-9zu", n);
      std::printf("\n");
      for (size_t r = 0; r < servers.size(); r++) {
        std::printf("%-9zu", r);
        for (const std::string& c : cells[r]) std::printf(" %-9s", c.c_str());
        std::printf("\n");
      }
      for (const std::string& e : errors) std::printf("  %s\n", e.c_str());
      trouble += static_cast<int>(errors.size());
    }
    std::vector<MigrationStatus> moves;
    if (down == 0 && client->Migrations(&moves).ok() && !moves.empty()) PrintMigrations(moves);
    return trouble == 0 ? 0 : 1;
  }
  if (cmd == "migrate") return Migrate(client.get(), flags.positional());
  if (cmd == "rebalance") {
    long pct = 0;
    if (!(st = flags.GetInt("threshold-pct", 125, 101, 1000, &pct)).ok()) return Fail(st);
    return Rebalance(client.get(), flags.Has("dry-run"), pct);
  }
  if (cmd == "partitions") {
    std::vector<PartitionStatus> parts;
    st = client->Partitions(&parts);
    if (!st.ok()) return Fail(st);
    std::printf("%-20s %-6s %-6s %-5s %-6s %-9s %-12s %-12s %s\n", "keyspace", "bucket", "owner",
                "home", "epoch", "migrating", "keys", "bytes", "ops/s");
    for (const auto& p : parts) {
      std::printf("%-20" PRIu64 " %-6u %-6u %-5u %-6llu %-9s %-12llu %-12s %.1f\n", p.id.keyspace,
                  p.id.bucket, p.owner, p.home, static_cast<unsigned long long>(p.epoch),
                  p.migrating ? "yes" : "no", static_cast<unsigned long long>(p.keys),
                  Bytes(p.bytes).c_str(), p.ops_per_sec);
    }
    return 0;
  }
  if (cmd == "keyspaces") return ListKeyspaces(client.get());
  if (cmd == "drop-keyspace") {
    if (flags.positional().size() != 2) {
      return Fail(Status::InvalidArgument("usage: rampctl drop-keyspace ID"));
    }
    return DropKeyspace(client.get(), flags.positional()[1], flags.Has("force"));
  }
  if (cmd == "kv-register") return KvRegister(client.get(), flags);
  if (cmd == "kv-load") return KvLoad(client.get(), flags);
  if (cmd == "kv-put") return KvPut(client.get(), flags);
  if (cmd == "kv-get") return KvGet(client.get(), flags);
  return Fail(Status::InvalidArgument("unknown command '" + cmd +
                                      "' (status, partitions, migrate, rebalance, keyspaces, "
                                      "drop-keyspace, kv-register, kv-load, kv-put, kv-get)"));
}
