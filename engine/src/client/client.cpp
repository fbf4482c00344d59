// Client set-up, routing (buckets, directory cache) and administration calls.
#include "ramp/client.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "client/client_impl.h"
#include "ramp/log.h"
#include "ramp/transport/auth.h"

namespace ramp {

using protocol::Op;

std::string AddressKey(KeyspaceId keyspace, std::string_view key) {
  std::string k(8 + key.size(), '\0');
  std::memcpy(k.data(), &keyspace, 8);
  std::memcpy(k.data() + 8, key.data(), key.size());
  return k;
}

std::string EncodeGroupKey(std::string_view group, std::string_view suffix) {
  std::string k;
  k.reserve(2 + group.size() + suffix.size());
  k.push_back(static_cast<char>((group.size() >> 8) & 0xff));
  k.push_back(static_cast<char>(group.size() & 0xff));
  k.append(group);
  k.append(suffix);
  return k;
}

bool DecodeGroupKey(std::string_view key, std::string_view* group, std::string_view* suffix) {
  if (key.size() < 2) return false;
  const size_t n = (static_cast<uint8_t>(key[0]) << 8) | static_cast<uint8_t>(key[1]);
  if (key.size() < 2 + n) return false;
  *group = key.substr(2, n);
  *suffix = key.substr(2 + n);
  return true;
}

// ---- set-up ------------------------------------------------------------------------------

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Status Client::Open(const ClientOptions& options, std::unique_ptr<Client>* out) {
  if (options.seeds.empty()) {
    return Status::InvalidArgument("no ramp server given (set ramp.nodes / --nodes)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->addresses = options.address_cache != nullptr ? options.address_cache
                                                     : std::shared_ptr(NewLocalAddressCache());
  impl->client_id = options.client_id != 0 ? options.client_id : (transport::RandomU64() | 1);
  impl->memory = transport::Memory::Create();
  RAMP_RETURN_IF_ERROR(impl->doorbells.Init());
  impl->doorbells.CountInto(&impl->stats.sleeps, &impl->stats.sleep_timeouts);
  RAMP_RETURN_IF_ERROR(impl->Bootstrap());
  out->reset(new Client(std::move(impl)));
  return Status::OK();
}

namespace {
void SetChannels(Node* node, const std::vector<transport::Endpoint>& eps,
                 transport::Provider preferred) {
  for (const auto& ep : eps) {
    if (ep.provider == transport::Provider::kTcp && !node->channels[0].has_endpoint()) {
      node->channels[0].SetEndpoint(ep);
    }
    if (ep.provider == preferred && preferred != transport::Provider::kTcp &&
        !node->channels[1].has_endpoint()) {
      node->channels[1].SetEndpoint(ep);
    }
  }
}
}  // namespace

ClusterView* ClusterViewOf(Client* client) {
  return client->impl();
}

Status Client::Impl::Bootstrap() {
  std::string errors;
  Status refused;  // a server that rejected our token: say so rather than "unreachable"
  for (const auto& seed : options.seeds) {
    const ChannelKind kind =
        seed.provider == transport::Provider::kTcp ? ChannelKind::kRpc : ChannelKind::kFast;
    // The seed's own index is unknown until it answers: accept whatever it says once.
    NodeChannel ch;
    ch.Setup(this, &doorbells, NodeChannel::kAnyNode, "the server at " + seed.ToString());
    ch.SetEndpoint(seed);
    Status st = ch.Connect();
    if (!st.ok()) {
      if (st.Is(Status::Code::kCancelled)) return st;
      if (st.Is(Status::Code::kPermissionDenied) && refused.ok()) refused = st;
      errors += (errors.empty() ? "" : "; ") + seed.ToString() + ": " + st.message();
      continue;
    }
    st = ch.SayHello();
    if (!st.ok()) {
      if (st.Is(Status::Code::kPermissionDenied) || st.Is(Status::Code::kCancelled)) return st;
      errors += (errors.empty() ? "" : "; ") + seed.ToString() + ": " + st.message();
      continue;
    }
    // The cluster as the seed knows it.
    const protocol::HelloReply& hr = ch.hello();
    std::deque<Node> cluster(hr.node_count);
    for (uint32_t i = 0; i < hr.node_count; i++) {
      cluster[i].index = i;
      cluster[i].endpoints = hr.nodes[i];
      std::vector<transport::Endpoint> eps;
      Status ps = transport::ParseEndpointList(hr.nodes[i], &eps);
      if (!ps.ok()) return ps.Annotate("cluster node list from " + seed.ToString());
      SetChannels(&cluster[i], eps, options.provider);
    }
    default_buckets = hr.default_buckets;
    homes = hr.homes;
    // Keep the seed's connection as node hr.node's channel of the seed's kind.
    NodeChannel& mine = cluster[hr.node].channels[static_cast<int>(kind)];
    mine = std::move(ch);
    nodes = std::move(cluster);
    for (uint32_t i = 0; i < nodes.size(); i++) {
      for (NodeChannel& c : nodes[i].channels) c.Setup(this, &doorbells, i, NodeName(i));
    }
    return Status::OK();
  }
  nodes.clear();
  if (!refused.ok()) {
    return Status::PermissionDenied("the ramp servers refused this client's cluster token (" +
                                    errors + ")");
  }
  return Status::Unavailable("cannot reach any ramp server (" + errors + ")");
}

Status Client::Impl::LearnNodes(uint32_t node) {
  if (node < nodes.size()) return Status::OK();
  const auto now = std::chrono::steady_clock::now();
  const auto unknown = [&] {
    return Status::Unavailable("node " + std::to_string(node) + " is not in the cluster (" +
                               std::to_string(nodes.size()) + " nodes known)");
  };
  if (now - nodes_learned < std::chrono::milliseconds(kLearnNodesEveryMs)) return unknown();
  nodes_learned = now;
  // A fresh connection to a known server (its HELLO reply lists the nodes as that server's
  // cluster file does now), then to the seeds.
  std::vector<transport::Endpoint> ask;
  for (const Node& n : nodes) {
    if (n.channels[0].has_endpoint()) ask.push_back(n.channels[0].endpoint());
  }
  ask.insert(ask.end(), options.seeds.begin(), options.seeds.end());
  Status last = unknown();
  for (const transport::Endpoint& ep : ask) {
    NodeChannel ch;
    ch.Setup(this, &doorbells, NodeChannel::kAnyNode, "the server at " + ep.ToString());
    ch.SetEndpoint(ep);
    Status st = ch.Open();
    if (!st.ok()) {
      if (st.Is(Status::Code::kCancelled)) return st;
      last = st;
      continue;
    }
    const protocol::HelloReply& hr = ch.hello();
    if (hr.homes != homes) {
      return Status::Unavailable("the cluster's home nodes changed from " + std::to_string(homes) +
                                 " to " + std::to_string(hr.homes) + " (" + ep.ToString() +
                                 "): reconnect");
    }
    for (uint32_t i = static_cast<uint32_t>(nodes.size()); i < hr.node_count; i++) {
      std::vector<transport::Endpoint> eps;
      Status ps = transport::ParseEndpointList(hr.nodes[i], &eps);
      if (!ps.ok()) return ps.Annotate("cluster node list from " + ep.ToString());
      Node& added = nodes.emplace_back();
      added.index = i;
      added.endpoints = hr.nodes[i];
      SetChannels(&added, eps, options.provider);
      for (NodeChannel& c : added.channels) c.Setup(this, &doorbells, i, NodeName(i));
    }
    return node < nodes.size() ? Status::OK() : unknown();
  }
  return last;
}

// ---- routing -----------------------------------------------------------------------------

namespace {
// ramp::BucketOf, without a division when the count is a power of two (the default, 16):
// the remainder is then the low bits.
uint32_t BucketIn(std::string_view key, uint32_t buckets) {
  const uint64_t h = KeyHash(key);
  if (buckets != 0 && (buckets & (buckets - 1)) == 0)
    return static_cast<uint32_t>(h & (buckets - 1));
  return static_cast<uint32_t>(h % buckets);
}
}  // namespace

uint32_t Client::Impl::BucketOf(KeyspaceId keyspace, std::string_view key) const {
  KeyspaceDef def{default_buckets, false};
  if (auto it = keyspaces.find(keyspace); it != keyspaces.end()) def = it->second;
  if (def.grouped) {
    std::string_view group, suffix;
    if (DecodeGroupKey(key, &group, &suffix)) return BucketIn(group, def.buckets);
  }
  return BucketIn(key, def.buckets);
}

uint32_t Client::Impl::OwnerOf(const PartitionId& p) const {
  auto it = placements.find(p);
  return it != placements.end() ? it->second.owner : HomeOf(p, homes);
}

void Client::Impl::NoteMoved(const PartitionId& p, uint32_t owner, uint64_t epoch) {
  stats.moved_replies++;
  auto it = placements.find(p);
  if (owner >= nodes.size()) (void)LearnNodes(owner);  // a node added since we started
  if (owner < nodes.size() && (it == placements.end() ? epoch > 0 : epoch > it->second.epoch)) {
    placements[p] = CachedPlacement{owner, epoch};
    return;
  }
  if (it != placements.end()) placements.erase(it);
}

uint64_t Client::Impl::EpochOf(const PartitionId& p) const {
  auto it = placements.find(p);
  return it != placements.end() ? it->second.epoch : 0;
}

void Client::Impl::ReportLoad() {
  std::map<uint32_t, protocol::LoadReport> by_owner;
  for (const auto& [p, n] : one_sided_load) by_owner[OwnerOf(p)].reads.emplace_back(p, n);
  one_sided_load.clear();
  last_load = nullptr;
  one_sided_unreported = 0;
  std::vector<uint64_t> ids;
  std::string body;
  for (const auto& [node, report] : by_owner) {
    body.clear();
    protocol::Encode(report, &body);
    uint64_t id = 0;
    if (Call(node, ReadChannel(), Op::kLoadReport, static_cast<uint32_t>(report.reads.size()), body,
             &id)
            .ok()) {
      ids.push_back(id);
    }
  }
  // Best effort: a lost report only makes the partition look a little cooler.
  if (!Wait(ids).ok()) return;
  for (uint64_t id : ids) {
    PendingCall reply;
    (void)TakeReply(id, &reply);
  }
}

void Client::Impl::MoveBackoff(int attempt) const {
  // A cutover holds a partition's writes for a few milliseconds: retried every millisecond
  // at first (a coarser step would stretch the stall the writer sees), then more slowly;
  // the kMaxMoves retries of a request wait about 0.9 s in all.
  if (attempt < 2) return;
  std::this_thread::sleep_for(
      std::chrono::milliseconds(attempt < 12 ? 1 : std::min(20, attempt - 10)));
}

Status Client::Impl::ResolveOwners(std::span<const PartitionId> parts) {
  // Partitions not cached yet, grouped by their home.
  std::map<uint32_t, std::vector<PartitionId>> by_home;
  for (const auto& p : parts) {
    if (placements.count(p)) continue;
    auto& v = by_home[HomeOf(p, homes)];
    if (std::find(v.begin(), v.end(), p) == v.end()) v.push_back(p);
  }
  if (by_home.empty()) return Status::OK();
  std::vector<std::pair<uint64_t, std::vector<PartitionId>*>> sent;
  std::vector<uint64_t> ids;
  for (auto& [home, list] : by_home) {
    protocol::LookupRequest req{list};
    std::string body;
    protocol::Encode(req, &body);
    uint64_t id = 0;
    Status st =
        Call(home, ReadChannel(), Op::kLookup, static_cast<uint32_t>(list.size()), body, &id);
    if (!st.ok()) {
      for (uint64_t i : ids) calls.erase(i);
      return st;
    }
    ids.push_back(id);
    sent.emplace_back(id, &list);
  }
  RAMP_RETURN_IF_ERROR(Wait(ids));
  Status result;
  for (auto& [id, list] : sent) {
    PendingCall reply;
    Status st = TakeReply(id, &reply);
    protocol::LookupReply lr;
    if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &lr);
    if (st.ok() && lr.placements.size() != list->size()) {
      st = Status::Corruption("LOOKUP reply with the wrong number of placements");
    }
    if (!st.ok()) {
      if (result.ok()) result = st;
      continue;
    }
    for (size_t i = 0; i < list->size(); i++) {
      const auto& pl = lr.placements[i];
      if (pl.owner >= nodes.size() && !LearnNodes(pl.owner).ok()) {
        return Status::Corruption("LOOKUP names node " + std::to_string(pl.owner) +
                                  ", which is not in the cluster");
      }
      placements[(*list)[i]] = CachedPlacement{pl.owner, pl.epoch};
    }
  }
  return result;
}

// ---- public surface ----------------------------------------------------------------------

void Client::DefineKeyspace(KeyspaceId keyspace, uint32_t buckets, bool grouped) {
  impl_->keyspaces[keyspace] =
      KeyspaceDef{buckets == 0 ? impl_->default_buckets : buckets, grouped};
}

void Client::AdvanceClock(uint64_t time) {
  impl_->clock.Observe(time);
}

uint32_t Client::BucketsOf(KeyspaceId keyspace) const {
  auto it = impl_->keyspaces.find(keyspace);
  return it != impl_->keyspaces.end() ? it->second.buckets : impl_->default_buckets;
}

uint32_t Client::node_count() const {
  return static_cast<uint32_t>(impl_->nodes.size());
}
uint64_t Client::client_id() const {
  return impl_->client_id;
}
const ClientOptions& Client::options() const {
  return impl_->options;
}
ClientStats Client::stats() const {
  return impl_->stats;
}

AddressCacheStats Client::address_cache_stats() const {
  return impl_->addresses->Stats();
}

Status Client::DropKeyspace(KeyspaceId keyspace) {
  protocol::DropKeyspaceRequest req{keyspace};
  std::string body;
  protocol::Encode(req, &body);
  std::vector<uint64_t> ids;
  for (uint32_t n = 0; n < impl_->nodes.size(); n++) {
    uint64_t id = 0;
    Status st = impl_->Call(n, impl_->WriteChannel(), Op::kDropKeyspace, 0, body, &id);
    if (!st.ok()) {
      for (uint64_t i : ids) impl_->calls.erase(i);
      return st;
    }
    ids.push_back(id);
  }
  RAMP_RETURN_IF_ERROR(impl_->Wait(ids));
  Status result;
  for (uint64_t id : ids) {
    PendingCall reply;
    Status st = impl_->TakeReply(id, &reply);
    if (!st.ok() && result.ok()) result = st;
  }
  // Cached addresses of the keyspace now point at dropped records; they fail verification
  // and fall back, so nothing to clean here.
  return result;
}

Status Client::ClusterStatus(std::vector<ServerStatus>* out) {
  out->clear();
  for (uint32_t n = 0; n < impl_->nodes.size(); n++) {
    ServerStatus s;
    s.node = n;
    s.endpoints = impl_->nodes[n].endpoints;
    PendingCall reply;
    Status st = impl_->CallAndWait(n, impl_->ReadChannel(), Op::kStatus, 0, {}, &reply);
    protocol::StatusReply sr;
    if (st.ok()) st = protocol::Decode(reply.body(), &sr);
    if (st.Is(Status::Code::kCancelled)) return st;
    if (st.ok()) {
      s.reachable = true;
      s.partitions = sr.partitions;
      s.keys = sr.keys;
      s.bytes = sr.bytes;
      s.ops = sr.ops;
      s.uptime_ms = sr.uptime_ms;
      s.prepared_txns = sr.prepared_txns;
      s.advertised = sr.advertised;
      s.config_nodes = sr.config_nodes;
      s.config_digest = sr.config_digest;
    } else {
      s.error = st.ToString();
    }
    out->push_back(std::move(s));
  }
  return Status::OK();
}

Status Client::Probe(uint32_t from, const std::vector<uint32_t>& targets,
                     std::vector<NodeProbe>* out) {
  out->clear();
  protocol::ProbeRequest req{targets};
  std::string body;
  protocol::Encode(req, &body);
  PendingCall reply;
  RAMP_RETURN_IF_ERROR(impl_->CallAndWait(from, impl_->ReadChannel(), Op::kProbe,
                                          static_cast<uint32_t>(targets.size()), body, &reply));
  std::vector<protocol::ProbeResult> results;
  RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &results));
  for (const auto& r : results) {
    out->push_back(NodeProbe{from, r.node, r.ok, r.latency_us, r.endpoint, r.error});
  }
  return Status::OK();
}

Status Client::Partitions(std::vector<PartitionStatus>* out) {
  out->clear();
  const uint32_t count = static_cast<uint32_t>(impl_->nodes.size());
  for (uint32_t n = 0; n < count; n++) {
    PendingCall reply;
    Status st = impl_->CallAndWait(n, impl_->ReadChannel(), Op::kPartitions, 0, {}, &reply);
    std::vector<protocol::PartitionInfo> infos;
    if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &infos);
    if (!st.ok()) return st.Annotate(impl_->NodeName(n));
    for (const auto& p : infos) {
      // A partition is listed by its owner only (a server may keep a copy it gave away, or
      // hold one a migration is filling).
      if (p.owner != n) continue;
      PartitionStatus ps;
      ps.id = p.id;
      ps.owner = p.owner;
      ps.home = HomeOf(p.id, impl_->homes);
      ps.epoch = p.epoch;
      ps.keys = p.keys;
      ps.bytes = p.bytes;
      ps.ops_per_sec = p.ops_per_sec;
      out->push_back(ps);
    }
  }
  std::vector<MigrationStatus> moves;
  if (Migrations(&moves).ok()) {
    for (PartitionStatus& ps : *out) {
      for (const MigrationStatus& m : moves) {
        if (m.in_flight && m.id == ps.id) ps.migrating = true;
      }
    }
  }
  return Status::OK();
}

Status Client::Migrations(std::vector<MigrationStatus>* out) {
  out->clear();
  std::vector<MigrationStatus> finished;
  const uint32_t count = static_cast<uint32_t>(impl_->nodes.size());
  for (uint32_t n = 0; n < count; n++) {
    PendingCall reply;
    Status st = impl_->CallAndWait(n, impl_->ReadChannel(), Op::kMigrations, 0, {}, &reply);
    std::vector<protocol::MigrationInfo> infos;
    if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &infos);
    if (!st.ok()) return st.Annotate(impl_->NodeName(n));
    for (const auto& i : infos) {
      MigrationStatus m;
      m.id = i.part;
      m.home = n;
      m.source = i.source;
      m.target = i.target;
      m.phase = protocol::MigrationPhaseName(i.phase);
      m.in_flight = i.phase == protocol::MigrationPhase::kCopying ||
                    i.phase == protocol::MigrationPhase::kCutover ||
                    i.phase == protocol::MigrationPhase::kCommitted;
      m.old_epoch = i.old_epoch;
      m.new_epoch = i.new_epoch;
      m.started_unix_ms = i.started_unix_ms;
      m.bytes_copied = i.bytes_copied;
      m.bytes_total = i.bytes_total;
      m.error = i.error;
      (m.in_flight ? *out : finished).push_back(std::move(m));
    }
  }
  out->insert(out->end(), finished.begin(), finished.end());
  return Status::OK();
}

Status Client::MigratePartition(const PartitionId& partition, uint32_t node, bool wait,
                                const std::function<void(const MigrationStatus&)>& progress) {
  (void)impl_->LearnNodes(node);  // a node added since this client started
  const uint32_t count = static_cast<uint32_t>(impl_->nodes.size());
  if (node >= count) {
    return Status::InvalidArgument("unknown node " + std::to_string(node) +
                                   ": the cluster has nodes 0.." + std::to_string(count - 1));
  }
  const uint32_t home = HomeOf(partition, impl_->homes);
  // The moves of this partition finished before ours starts: ours is the next one listed.
  auto find = [&](MigrationStatus* found, uint64_t after_ms) -> Status {
    PendingCall reply;
    RAMP_RETURN_IF_ERROR(
        impl_->CallAndWait(home, impl_->ReadChannel(), Op::kMigrations, 0, {}, &reply));
    std::vector<protocol::MigrationInfo> infos;
    RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &infos));
    for (const auto& i : infos) {
      if (i.part != partition || i.target != node || i.started_unix_ms < after_ms) continue;
      found->id = i.part;
      found->home = home;
      found->source = i.source;
      found->target = i.target;
      found->phase = protocol::MigrationPhaseName(i.phase);
      found->in_flight = i.phase == protocol::MigrationPhase::kCopying ||
                         i.phase == protocol::MigrationPhase::kCutover ||
                         i.phase == protocol::MigrationPhase::kCommitted;
      found->old_epoch = i.old_epoch;
      found->new_epoch = i.new_epoch;
      found->started_unix_ms = i.started_unix_ms;
      found->bytes_copied = i.bytes_copied;
      found->bytes_total = i.bytes_total;
      found->error = i.error;
      return Status::OK();
    }
    return Status::NotFound("migration not listed");
  };
  const uint64_t asked_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()) -
      1000;  // clocks of the servers may differ a little
  protocol::MigrateRequest req{partition, node};
  std::string body;
  protocol::Encode(req, &body);
  PendingCall reply;
  // Longer than the checks the home makes (it asks the source and the target).
  const int saved_timeout = impl_->options.timeout_ms;
  impl_->options.timeout_ms = std::max(saved_timeout, 30000);
  Status st = impl_->CallAndWait(home, impl_->WriteChannel(), Op::kMigrate, 0, body, &reply);
  impl_->options.timeout_ms = saved_timeout;
  if (!st.ok()) return st;
  if (!wait) return Status::OK();
  for (;;) {
    MigrationStatus m;
    st = find(&m, asked_ms);
    if (!st.ok() && !st.Is(Status::Code::kNotFound)) return st;
    if (st.ok()) {
      if (progress) progress(m);
      if (!m.in_flight) {
        if (m.phase == "done") {
          // The next request for the partition asks its home.
          impl_->placements.erase(partition);
          return Status::OK();
        }
        return Status::Aborted("migration of " + partition.ToString() + " to node " +
                               std::to_string(node) + " " + m.phase + ": " + m.error);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (impl_->options.wait_hook) RAMP_RETURN_IF_ERROR(impl_->options.wait_hook());
  }
}

Status ParseClientOptions(std::string_view nodes, std::string_view provider,
                          std::string_view read_path, ClientOptions* out) {
  RAMP_RETURN_IF_ERROR(transport::ParseEndpointList(nodes, &out->seeds));
  if (out->seeds.empty()) return Status::InvalidArgument("no ramp server endpoint given");
  if (!provider.empty()) RAMP_RETURN_IF_ERROR(transport::ParseProvider(provider, &out->provider));
  if (!read_path.empty() && !ParseReadPath(read_path, &out->read_path)) {
    return Status::InvalidArgument("unknown read path '" + std::string(read_path) +
                                   "' (rpc, get+ or get*)");
  }
  return Status::OK();
}

}  // namespace ramp
