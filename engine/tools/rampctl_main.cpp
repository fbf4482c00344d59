// rampctl: operator's view of a running pg_ramp cluster.
#include <signal.h>

#include <cstdio>
#include <string>

#include "flags.h"
#include "ramp/client.h"
#include "ramp/log.h"
#include "ramp/transport/transport.h"

namespace {

const char* kUsage = R"(usage: rampctl --node URI [--token-file FILE] COMMAND

  status        every server: reachable, partitions, keys, bytes, requests served
  partitions    every partition: owner, home, epoch, keys, bytes, ops/s

  --node URI          a server of the cluster (tcp://host:port or shm:///path); repeatable
  --token-file FILE   the cluster token
  --timeout-ms N      how long to wait for answers (default 5000)
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

}  // namespace

int main(int argc, char** argv) {
  using namespace ramp;
  signal(SIGPIPE, SIG_IGN);
  SetLogLevel(LogLevel::kWarning);
  tools::Flags flags({"node", "token-file", "timeout-ms"}, {"help"});
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
    std::printf("%-4s %-10s %-11s %-12s %-12s %-12s %s\n", "node", "state", "partitions", "keys",
                "bytes", "requests", "endpoints");
    int down = 0;
    for (const auto& s : servers) {
      if (!s.reachable) down++;
      std::printf("%-4u %-10s %-11llu %-12llu %-12s %-12llu %s%s%s\n", s.node,
                  s.reachable ? "up" : "DOWN", static_cast<unsigned long long>(s.partitions),
                  static_cast<unsigned long long>(s.keys), Bytes(s.bytes).c_str(),
                  static_cast<unsigned long long>(s.ops), s.endpoints.c_str(),
                  s.reachable ? "" : "  ", s.error.c_str());
    }
    return down == 0 ? 0 : 1;
  }
  if (cmd == "partitions") {
    std::vector<PartitionStatus> parts;
    st = client->Partitions(&parts);
    if (!st.ok()) return Fail(st);
    std::printf("%-24s %-6s %-5s %-6s %-12s %-12s %s\n", "partition", "owner", "home", "epoch",
                "keys", "bytes", "ops/s");
    for (const auto& p : parts) {
      std::printf("%-24s %-6u %-5u %-6llu %-12llu %-12s %.1f\n", p.id.ToString().c_str(), p.owner,
                  p.home, static_cast<unsigned long long>(p.epoch),
                  static_cast<unsigned long long>(p.keys), Bytes(p.bytes).c_str(), p.ops_per_sec);
    }
    return 0;
  }
  return Fail(Status::InvalidArgument("unknown command '" + cmd + "' (status, partitions)"));
}
