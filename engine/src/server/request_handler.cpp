#include "server/request_handler.h"

#include <chrono>

#include "ramp/log.h"
#include "server/membership.h"
#include "server/store_wire.h"

namespace ramp::server {

using protocol::Header;
using protocol::Op;

namespace {

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

Status RequestHandler::CheckKey(std::string_view key) const {
  if (key.size() > ctx_->limits.max_key_bytes) {
    return Status::TooLarge("key of " + std::to_string(key.size()) +
                            " bytes exceeds the limit of " +
                            std::to_string(ctx_->limits.max_key_bytes) + " bytes");
  }
  return Status::OK();
}

Status RequestHandler::CheckValue(std::string_view value) const {
  if (value.size() > ctx_->limits.max_value_bytes) {
    return Status::TooLarge("value of " + std::to_string(value.size()) +
                            " bytes exceeds the limit of " +
                            std::to_string(ctx_->limits.max_value_bytes) + " bytes");
  }
  return Status::OK();
}

Status RequestHandler::CheckBatch(size_t items) const {
  if (items > ctx_->limits.max_batch_items) {
    return Status::TooLarge("batch of " + std::to_string(items) + " items exceeds the limit of " +
                            std::to_string(ctx_->limits.max_batch_items));
  }
  return Status::OK();
}

void RequestHandler::ErrorReply(const Header& h, const Status& error, std::string* reply) {
  protocol::EncodeErrorReply(h, Clock(), error, reply);
}

Status RequestHandler::HandleNow(Session& session, std::string_view message, std::string* reply) {
  reply->clear();
  Header h;
  RAMP_RETURN_IF_ERROR(protocol::DecodeHeader(message, &h));
  if (h.is_reply()) {
    return Status::Corruption(std::string("unexpected reply message ") +
                              protocol::OpName(h.base_op()));
  }
  ctx_->clock->Observe(h.clock);
  ctx_->ops.fetch_add(1, std::memory_order_relaxed);
  std::string_view body = message.substr(protocol::kHeaderBytes);
  const Op op = h.base_op();
  if (!session.greeted && op != Op::kHello) {
    return Status::Corruption(std::string(protocol::OpName(op)) + " before HELLO");
  }
  switch (op) {
    case Op::kHello:
      return OnHello(session, h, body, reply);
    case Op::kGet:
      return OnGet(h, body, reply);
    case Op::kGetGroup:
      return OnGetGroup(h, body, reply);
    case Op::kPrepare:
      return OnPrepare(h, body, reply);
    case Op::kCommit:
    case Op::kCommitAddresses:
    case Op::kAbort:
      return OnDecision(session, h, body, reply);
    case Op::kLookup:
      return OnLookup(session, h, body, reply);
    case Op::kLock:
      return OnLock(session, h, body, reply);
    case Op::kWriteLocked:
      return OnWriteLocked(session, h, body, reply);
    case Op::kUnlock: {
      protocol::LockRequest req;
      RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
      ctx_->locks->ReleaseAll({session.client_id, req.txn});
      protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
      return Status::OK();
    }
    case Op::kIntent:
      return OnIntent(session, h, body, reply);
    case Op::kIntentRelease:
      return OnIntentRelease(session, h, body, reply);
    case Op::kWaitsFor:
      return OnWaitsFor(h, body, reply);
    case Op::kIntentForward:
      return OnIntentForward(h, body, reply);
    case Op::kStatus:
      return OnStatus(h, reply);
    case Op::kPartitions:
      return OnPartitions(h, reply);
    case Op::kDropKeyspace:
      return OnDropKeyspace(h, body, reply);
    case Op::kClock:
      protocol::EncodeHeader(protocol::ReplyTo(h, ctx_->clock->Now()), reply);
      return Status::OK();
    case Op::kTxnState:
      return OnTxnState(h, body, reply);
    case Op::kReadPages:
      return OnReadPages(session, h, body, reply);
    case Op::kScanOpen:
      return OnScanOpen(h, body, reply);
    case Op::kMigrate:
      return OnMigrate(session, h, body, reply);
    case Op::kMigrations:
      return OnMigrations(h, reply);
    case Op::kMigrateCtl:
      return OnMigrateCtl(session, h, body, reply);
    case Op::kLoadReport: {
      protocol::LoadReport r;
      RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &r));
      for (const auto& [p, n] : r.reads) {
        if (ctx_->directory->Owns(p)) ctx_->store->CountLoad(p, n);
      }
      protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
      return Status::OK();
    }
    case Op::kProbe: {
      protocol::ProbeRequest req;
      RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
      Status st =
          ctx_->membership->StartProbe(std::move(req.nodes), h, ctx_->clock, Defer(session));
      if (!st.ok()) ErrorReply(h, st, reply);
      return Status::OK();  // without an error, the reply follows the probes
    }
    case Op::kScanNext:
    case Op::kScanClose:
    case Op::kPlacement:  // server to client only
      ErrorReply(h, Status::NotSupported(std::string(protocol::OpName(op)) + " is not served here"),
                 reply);
      return Status::OK();
  }
  return Status::Corruption("unknown opcode " + std::to_string(h.op));
}

Status RequestHandler::OnHello(Session& s, const Header& h, std::string_view body,
                               std::string* reply) {
  protocol::Hello hello;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &hello));
  if (hello.version != protocol::kProtocolVersion) {
    ErrorReply(h,
               Status::NotSupported("protocol version " + std::to_string(hello.version) +
                                    " not supported (server speaks " +
                                    std::to_string(protocol::kProtocolVersion) + ")"),
               reply);
    return Status::OK();
  }
  // The arena is readable one-sided by every peer (GET*); exposing it hands the provider
  // what the peer needs to map it.
  Status exposed = s.conn->Expose(ctx_->store->arena_region());
  if (!exposed.ok()) {
    ErrorReply(h, exposed.Annotate("cannot expose page memory"), reply);
    return Status::OK();
  }
  s.greeted = true;
  s.client_id = hello.client_id;
  s.peer_kind = hello.peer_kind;
  protocol::HelloReply r;
  r.node = ctx_->self;
  const std::shared_ptr<const ClusterConfig> cluster = ctx_->membership->Get();
  r.node_count = static_cast<uint32_t>(cluster->nodes.size());
  r.homes = cluster->home_count();
  r.default_buckets = cluster->default_buckets;
  r.arena = ctx_->store->arena_region();
  r.instance = ctx_->instance;
  for (const auto& n : cluster->nodes) r.nodes.push_back(n.ToString());
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

Status RequestHandler::OnGet(const Header& h, std::string_view body, std::string* reply) {
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &get_));
  if (Status s = CheckBatch(get_.items.size()); !s.ok()) {
    ErrorReply(h, s, reply);
    return Status::OK();
  }
  get_reply_.results.resize(get_.items.size());
  const uint8_t read_flags = ToStoreReadFlags(get_.flags);
  for (size_t i = 0; i < get_.items.size(); i++) {
    const auto& item = get_.items[i];
    auto& res = get_reply_.results[i];
    res = protocol::GetResult();
    uint32_t hint = 0;
    uint64_t epoch = 0;
    if (!ctx_->directory->Owns(item.part, &hint, &epoch)) {
      res.status = protocol::ItemStatus::kMoved;
      res.owner = hint;
      res.epoch = epoch;
      continue;
    }
    if (!CheckKey(item.key).ok()) {
      res.status = protocol::ItemStatus::kError;
      continue;
    }
    store::ReadResult r;
    ctx_->store->Get(ToStore(item), read_flags, &r);
    ToWire(r, &res);
  }
  protocol::EncodeHeader(
      protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(get_reply_.results.size())), reply);
  protocol::Encode(get_reply_, reply);
  return Status::OK();
}

Status RequestHandler::OnGetGroup(const Header& h, std::string_view body, std::string* reply) {
  protocol::GetGroupRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &req));
  protocol::GetGroupReply r;
  uint32_t hint = 0;
  uint64_t epoch = 0;
  if (!ctx_->directory->Owns(req.part, &hint, &epoch)) {
    r.status = protocol::ItemStatus::kMoved;
    r.owner = hint;
    r.epoch = epoch;
  } else {
    store::GroupVersion version;
    ctx_->store->GetGroup(req.part, req.group, &group_, &version);
    r.version_offset = version.offset;
    r.version = version.value;
    r.entries.reserve(group_.size());
    for (const store::GroupEntry& e : group_) r.entries.push_back(ToWire(e));
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.entries.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

Status RequestHandler::OnPrepare(const Header& h, std::string_view body, std::string* reply) {
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &prepare_));
  protocol::PrepareError err;
  Status s = CheckBatch(prepare_.items.size());
  for (uint32_t i = 0; s.ok() && i < prepare_.items.size(); i++) {
    const auto& item = prepare_.items[i];
    s = CheckKey(item.key);
    if (s.ok()) s = CheckValue(item.value);
    uint32_t hint = 0;
    uint64_t epoch = 0;
    if (s.ok() && !ctx_->directory->Owns(item.part, &hint, &epoch)) {
      s = Status::Moved("partition " + item.part.ToString() + " is served by node " +
                        std::to_string(hint));
      err.owner = hint;
      err.epoch = epoch;
    }
    if (!s.ok()) err.item = i;
  }
  if (s.ok()) {
    prepare_items_.clear();
    for (const auto& item : prepare_.items) prepare_items_.push_back(ToStore(item));
    store::WriteError serr;
    s = ctx_->store->Prepare(prepare_.ts, prepare_items_, &serr);
    err.item = serr.item;
    err.watermark = serr.watermark;
    if (s.Is(Status::Code::kMoved) && err.item < prepare_.items.size()) {
      // Released while this request was on its way (migration.h): where it went.
      uint32_t hint = 0;
      uint64_t epoch = 0;
      ctx_->directory->Owns(prepare_.items[err.item].part, &hint, &epoch);
      err.owner = hint;
      err.epoch = epoch;
    }
  }
  if (!s.ok()) {
    Header rh = protocol::ReplyTo(h, Clock());
    rh.status = static_cast<uint16_t>(s.code());
    protocol::EncodeHeader(rh, reply);
    protocol::Encode(err, s.message(), reply);
    return Status::OK();
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  return Status::OK();
}

// A decision that carries release_intents_of releases those intents after it is applied
// (whatever its outcome, as the INTENT_RELEASE that used to follow it did): a writer waiting
// for one of them is granted with this commit in the version its grant carries. Not when it
// is refused with MOVED: the commit is not applied here then (a writer granted now would read
// the key without it and fail its own commit with 40001); the client sends the decision
// again and the release after it is applied.
Status RequestHandler::OnDecision(Session& s, const Header& h, std::string_view body,
                                  std::string* reply) {
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &decision_));
  bool moved = false;
  Status st = ApplyDecision(h, reply, &moved);
  if (decision_.release_intents_of != 0 && !moved) {
    ctx_->intents->Release({s.client_id, decision_.release_intents_of});
  }
  return st;
}

Status RequestHandler::ApplyDecision(const Header& h, std::string* reply, bool* moved) {
  // A decision for a partition that moved away is refused whole (the client sends it again
  // to the new owners; COMMIT and ABORT are idempotent).
  for (uint32_t i = 0; i < decision_.partitions.size(); i++) {
    if (!ctx_->directory->Owns(decision_.partitions[i])) {
      MovedReply(h, decision_.partitions[i], i, reply);
      *moved = true;
      return Status::OK();
    }
  }
  const bool want_addresses = h.base_op() == Op::kCommitAddresses;
  committed_.clear();
  Status s = h.base_op() == Op::kAbort
                 ? ctx_->store->Abort(decision_.ts, decision_.partitions)
                 : ctx_->store->Commit(decision_.ts, decision_.partitions,
                                       want_addresses ? &committed_ : nullptr);
  if (s.Is(Status::Code::kMoved)) {
    for (uint32_t i = 0; i < decision_.partitions.size(); i++) {
      if (!ctx_->directory->Owns(decision_.partitions[i])) {
        MovedReply(h, decision_.partitions[i], i, reply);
        *moved = true;
        return Status::OK();
      }
    }
  }
  if (!s.ok()) {
    ErrorReply(h, s, reply);
    return Status::OK();
  }
  if (!want_addresses) {
    protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
    return Status::OK();
  }
  // Bounded: a bulk load's addresses are hints, not worth a reply the transport chokes on.
  constexpr size_t kMaxAddressBytes = 4u << 20;
  protocol::CommitAddressesReply r;
  r.items.reserve(committed_.size());
  size_t bytes = 0;
  for (const store::CommittedRecord& c : committed_) {
    bytes += c.key.size() + 36;
    if (bytes > kMaxAddressBytes) break;
    r.items.push_back(protocol::CommittedAddress{
        c.part, c.key, {c.address.offset, c.address.length, c.address.epoch}});
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.items.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

Status RequestHandler::OnLookup(Session& s, const Header& h, std::string_view body,
                                std::string* reply) {
  protocol::LookupRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  protocol::LookupReply r;
  ctx_->directory->NoteRoute(s.client_id, post_, s.id);  // where PLACEMENT pushes go
  for (const auto& p : req.partitions) {
    if (!ctx_->directory->IsHome(p)) {
      ErrorReply(h,
                 Status::InvalidArgument("node " + std::to_string(ctx_->self) +
                                         " is not the home of partition " + p.ToString()),
                 reply);
      return Status::OK();
    }
    r.placements.push_back(ctx_->directory->Lookup(p, s.client_id));
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.placements.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

Status RequestHandler::OnLock(Session& s, const Header& h, std::string_view body,
                              std::string* reply) {
  protocol::LockRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  const LockTable::Owner owner{s.client_id, req.txn};
  get_reply_.results.resize(req.items.size());
  for (size_t i = 0; i < req.items.size(); i++) {
    const auto& item = req.items[i];
    uint32_t hint = 0;
    uint64_t epoch = 0;
    if (!ctx_->directory->Owns(item.part, &hint, &epoch)) {
      ErrorReply(h, Status::Moved("partition " + item.part.ToString() + " moved"), reply);
      return Status::OK();
    }
    if (!ctx_->locks->Acquire(owner, item.part, item.key, item.mode == protocol::kLockExclusive)) {
      // No-wait: the client releases everything and retries the transaction.
      ErrorReply(h, Status::Conflict("lock conflict"), reply);
      return Status::OK();
    }
    // A read under the lock: the latest committed value comes back with the grant.
    auto& res = get_reply_.results[i];
    store::ReadResult r;
    ctx_->store->Get(store::ReadItem{item.part, item.key, Timestamp()}, 0, &r);
    ToWire(r, &res);
  }
  protocol::EncodeHeader(
      protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(get_reply_.results.size())), reply);
  protocol::Encode(get_reply_, reply);
  return Status::OK();
}

Status RequestHandler::OnWriteLocked(Session& s, const Header& h, std::string_view body,
                                     std::string* reply) {
  protocol::LockRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  const LockTable::Owner owner{s.client_id, req.txn};
  std::unique_lock no_scan_opens(ctx_->watermarks_mu);
  Timestamp ts{ctx_->clock->Now(), s.client_id};
  // Above every scan watermark of the partitions written: one raised by a snapshot this
  // server's clock has not seen (carried here by a migration, or a client clock ahead).
  for (const auto& item : req.items) {
    const Timestamp w = ctx_->store->Watermark(item.part);
    if (ts <= w) {
      ctx_->clock->Observe(w.time);
      ts = Timestamp{ctx_->clock->Now(), s.client_id};
    }
  }
  Status st;
  // A partition that moved away since the LOCK (a migration's cutover) is not written here,
  // nor any item of the request: the write would land in a copy no longer served.
  for (const auto& item : req.items) {
    uint32_t hint = 0;
    uint64_t epoch = 0;
    if (!ctx_->directory->Owns(item.part, &hint, &epoch)) {
      st = Status::Moved("partition " + item.part.ToString() + " is served by node " +
                         std::to_string(hint));
      break;
    }
  }
  for (size_t i = 0; st.ok() && i < req.items.size(); i++) {
    const auto& item = req.items[i];
    // The client took exclusive locks before; re-acquiring checks that it still holds them.
    if (!ctx_->locks->Acquire(owner, item.part, item.key, true)) {
      st = Status::Conflict("write without the exclusive lock");
      break;
    }
    st = ctx_->store->WriteCommitted(item.part, item.key, item.value,
                                     item.flags & protocol::kPutTombstone, ts);
    if (!st.ok()) break;
  }
  // Strict 2PL: the writes are the commit; every lock of the transaction goes now.
  ctx_->locks->ReleaseAll(owner);
  if (!st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  return Status::OK();
}

Status RequestHandler::OnStatus(const Header& h, std::string* reply) {
  const store::StoreStats st = ctx_->store->stats();
  protocol::StatusReply r;
  r.node = ctx_->self;
  r.partitions = st.partitions;
  r.keys = st.keys;
  r.bytes = st.bytes;
  r.ops = ctx_->ops.load(std::memory_order_relaxed);
  r.uptime_ms = NowMs() - ctx_->started_ms;
  r.prepared_txns = st.prepared_txns;
  const std::shared_ptr<const ClusterConfig> cluster = ctx_->membership->Get();
  if (ctx_->self < cluster->nodes.size()) r.advertised = cluster->nodes[ctx_->self].ToString();
  r.config_nodes = static_cast<uint32_t>(cluster->nodes.size());
  r.config_digest = cluster->Digest();
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

Status RequestHandler::OnPartitions(const Header& h, std::string* reply) {
  std::vector<protocol::PartitionInfo> infos;
  for (const store::PartitionInfo& f : ctx_->store->PartitionInfos()) infos.push_back(ToWire(f));
  for (auto& p : infos) {
    uint32_t hint = 0;
    uint64_t epoch = 0;
    const bool owned = ctx_->directory->Owns(p.id, &hint, &epoch);
    p.owner = owned ? ctx_->self : hint;
    p.epoch = epoch;
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(infos.size())), reply);
  protocol::Encode(infos, reply);
  return Status::OK();
}

Status RequestHandler::OnDropKeyspace(const Header& h, std::string_view body, std::string* reply) {
  protocol::DropKeyspaceRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &req));
  Status s = ctx_->store->DropKeyspace(req.keyspace);
  if (!s.ok()) {
    ErrorReply(h, s, reply);
    return Status::OK();
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  return Status::OK();
}

Status RequestHandler::OnTxnState(const Header& h, std::string_view body, std::string* reply) {
  protocol::TxnStateRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  protocol::TxnStateReply r;
  for (const auto& p : req.partitions) {
    // Only the owner answers for a partition: a copy left behind by a migration knows less.
    if (!ctx_->directory->Owns(p)) {
      ErrorReply(h, Status::Moved("partition " + p.ToString() + " is not served here"), reply);
      return Status::OK();
    }
    r.states.push_back(ToWire(ctx_->store->QueryTxn(req.ts, p, req.fence != 0)));
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.states.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

}  // namespace ramp::server
