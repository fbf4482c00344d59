// Encoders and bounds-checked decoders of the wire protocol (messages.h).
#include "protocol/messages.h"

#include <cstring>
#include <string>

#include "ramp/bytes.h"

namespace ramp::protocol {
namespace {

// Longest string field accepted from the wire (keys, values, metadata, messages). The
// transport already bounds whole messages; this stops a length field from claiming more.
constexpr uint32_t kMaxField = 0xFFFFFFFFu;

Status Truncated(const char* what) {
  return Status::Corruption(std::string("malformed ") + what + ": truncated");
}

// A count from a header must be plausible: every item takes at least min_item bytes.
Status CheckCount(uint32_t count, size_t remaining, size_t min_item, const char* what) {
  if (min_item != 0 && count > remaining / min_item) {
    return Status::Corruption(std::string("malformed ") + what + ": " + std::to_string(count) +
                              " items cannot fit in " + std::to_string(remaining) + " bytes");
  }
  return Status::OK();
}

void PutView(StringByteWriter& w, std::string_view s) {
  w.PutString(s);
}

bool GetView(ByteReader& r, std::string_view* out) {
  ByteReader save = r;
  uint32_t n = 0;
  const uint8_t* p = nullptr;
  if (!r.GetU32(&n) || n > kMaxField || !r.GetView(n, &p)) {
    r = save;
    return false;
  }
  *out = std::string_view(reinterpret_cast<const char*>(p), n);
  return true;
}

void PutTs(StringByteWriter& w, const Timestamp& t) {
  w.PutU64(t.time);
  w.PutU64(t.client);
}
bool GetTs(ByteReader& r, Timestamp* t) {
  return r.GetU64(&t->time) && r.GetU64(&t->client);
}

void PutPart(StringByteWriter& w, const PartitionId& p) {
  w.PutU64(p.keyspace);
  w.PutU32(p.bucket);
}
bool GetPart(ByteReader& r, PartitionId* p) {
  return r.GetU64(&p->keyspace) && r.GetU32(&p->bucket);
}

void PutRegion(StringByteWriter& w, const transport::RemoteRegion& g) {
  w.PutU64(g.id);
  w.PutU64(g.key);
  w.PutU64(g.length);
  w.PutU32(g.access);
  w.PutU32(g.reserved);
}
bool GetRegion(ByteReader& r, transport::RemoteRegion* g) {
  return r.GetU64(&g->id) && r.GetU64(&g->key) && r.GetU64(&g->length) && r.GetU32(&g->access) &&
         r.GetU32(&g->reserved);
}

bool GetItemStatus(ByteReader& r, ItemStatus* s) {
  uint8_t v = 0;
  if (!r.GetU8(&v) || v > static_cast<uint8_t>(ItemStatus::kError)) return false;
  *s = static_cast<ItemStatus>(v);
  return true;
}

constexpr size_t kPartBytes = 12;
constexpr size_t kTsBytes = 16;

}  // namespace

namespace {
const char* OpNameOrNull(Op op) {
  switch (op) {
    case Op::kHello: return "HELLO";
    case Op::kGet: return "GET";
    case Op::kPrepare: return "PREPARE";
    case Op::kCommit: return "COMMIT";
    case Op::kAbort: return "ABORT";
    case Op::kLookup: return "LOOKUP";
    case Op::kLock: return "LOCK";
    case Op::kUnlock: return "UNLOCK";
    case Op::kWriteLocked: return "WRITE_LOCKED";
    case Op::kStatus: return "STATUS";
    case Op::kPartitions: return "PARTITIONS";
    case Op::kDropKeyspace: return "DROP_KEYSPACE";
    case Op::kClock: return "CLOCK";
    case Op::kGetGroup: return "GET_GROUP";
    case Op::kIntent: return "INTENT";
    case Op::kIntentRelease: return "INTENT_RELEASE";
    case Op::kWaitsFor: return "WAITS_FOR";
    case Op::kCommitAddresses: return "COMMIT_ADDRESSES";
    case Op::kScanOpen: return "SCAN_OPEN";
    case Op::kScanNext: return "SCAN_NEXT";
    case Op::kScanClose: return "SCAN_CLOSE";
    case Op::kReadPages: return "READ_PAGES";
    case Op::kTxnState: return "TXN_STATE";
    case Op::kMigrate: return "MIGRATE";
    case Op::kMigrations: return "MIGRATIONS";
    case Op::kMigrateCtl: return "MIGRATE_CTL";
    case Op::kLoadReport: return "LOAD_REPORT";
    case Op::kProbe: return "PROBE";
    case Op::kPlacement: return "PLACEMENT";
    case Op::kIntentForward: return "INTENT_FORWARD";
  }
  return nullptr;
}
}  // namespace

const char* OpName(Op op) {
  const char* name = OpNameOrNull(op);
  return name ? name : "UNKNOWN";
}

bool KnownOp(uint16_t op) {
  return OpNameOrNull(static_cast<Op>(op & ~kReplyBit)) != nullptr;
}

void EncodeHeader(const Header& h, std::string* out) {
  StringByteWriter w(out);
  w.PutU16(h.op);
  w.PutU16(h.status);
  w.PutU32(h.count);
  w.PutU64(h.request_id);
  w.PutU64(h.clock);
}

Status DecodeHeader(std::string_view msg, Header* out) {
  ByteReader r(msg);
  if (!r.GetU16(&out->op) || !r.GetU16(&out->status) || !r.GetU32(&out->count) ||
      !r.GetU64(&out->request_id) || !r.GetU64(&out->clock)) {
    return Status::Corruption("malformed message: shorter than its " +
                              std::to_string(kHeaderBytes) + "-byte header");
  }
  if (!KnownOp(out->op)) {
    return Status::Corruption("unknown opcode " + std::to_string(out->op & ~kReplyBit));
  }
  if (out->status > static_cast<uint16_t>(Status::Code::kInternal)) {
    return Status::Corruption("unknown status code " + std::to_string(out->status));
  }
  return Status::OK();
}

Header ReplyTo(const Header& request, uint64_t clock, uint32_t count) {
  Header h;
  h.op = static_cast<uint16_t>(request.op | kReplyBit);
  h.count = count;
  h.request_id = request.request_id;
  h.clock = clock;
  return h;
}

void EncodeErrorReply(const Header& request, uint64_t clock, const Status& error,
                      std::string* out) {
  Header h = ReplyTo(request, clock);
  h.status = static_cast<uint16_t>(error.code());
  EncodeHeader(h, out);
  out->append(error.message());
}

Status DecodeErrorReply(const Header& h, std::string_view body) {
  if (h.status == 0) return Status::OK();
  return Status(static_cast<Status::Code>(h.status), body);
}

// ---- hello -------------------------------------------------------------------------------

void Encode(const Hello& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU32(m.version);
  w.PutU64(m.client_id);
  w.PutU8(m.peer_kind);
}

Status Decode(std::string_view body, Hello* out) {
  ByteReader r(body);
  if (!r.GetU32(&out->version) || !r.GetU64(&out->client_id) || !r.GetU8(&out->peer_kind)) {
    return Truncated("HELLO");
  }
  return r.ExpectEnd("HELLO");
}

void Encode(const HelloReply& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU32(m.node);
  w.PutU32(m.node_count);
  w.PutU32(m.default_buckets);
  PutRegion(w, m.arena);
  w.PutU64(m.instance);
  w.PutU32(static_cast<uint32_t>(m.nodes.size()));
  for (const auto& n : m.nodes) PutView(w, n);
  w.PutU32(m.homes != 0 ? m.homes : m.node_count);
}

Status Decode(std::string_view body, HelloReply* out) {
  ByteReader r(body);
  uint32_t n = 0;
  if (!r.GetU32(&out->node) || !r.GetU32(&out->node_count) || !r.GetU32(&out->default_buckets) ||
      !GetRegion(r, &out->arena) || !r.GetU64(&out->instance) || !r.GetU32(&n)) {
    return Truncated("HELLO reply");
  }
  RAMP_RETURN_IF_ERROR(CheckCount(n, r.remaining(), 4, "HELLO reply"));
  if (n != out->node_count || out->node >= n || out->default_buckets == 0) {
    return Status::Corruption("malformed HELLO reply: node " + std::to_string(out->node) + " of " +
                              std::to_string(out->node_count) + " with " + std::to_string(n) +
                              " endpoints");
  }
  out->nodes.clear();
  for (uint32_t i = 0; i < n; i++) {
    std::string_view v;
    if (!GetView(r, &v)) return Truncated("HELLO reply");
    out->nodes.emplace_back(v);
  }
  out->homes = n;
  if (r.remaining() > 0 && !r.GetU32(&out->homes)) return Truncated("HELLO reply");
  if (out->homes == 0 || out->homes > n) {
    return Status::Corruption("malformed HELLO reply: " + std::to_string(out->homes) +
                              " homes among " + std::to_string(n) + " nodes");
  }
  return r.ExpectEnd("HELLO reply");
}

// ---- reads -------------------------------------------------------------------------------

void Encode(const GetRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU8(m.flags);
  for (const auto& it : m.items) {
    PutPart(w, it.part);
    PutView(w, it.key);
    PutTs(w, it.at);
  }
}

Status Decode(std::string_view body, uint32_t count, GetRequest* out) {
  ByteReader r(body);
  if (!r.GetU8(&out->flags)) return Truncated("GET");
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 4 + kTsBytes, "GET"));
  out->items.resize(count);
  for (auto& it : out->items) {
    if (!GetPart(r, &it.part) || !GetView(r, &it.key) || !GetTs(r, &it.at)) {
      return Truncated("GET");
    }
  }
  return r.ExpectEnd("GET");
}

void Encode(const GetReply& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& res : m.results) {
    w.PutU8(static_cast<uint8_t>(res.status));
    switch (res.status) {
      case ItemStatus::kOk:
        w.PutU8(res.flags);
        PutTs(w, res.ts);
        PutView(w, res.value);
        PutView(w, res.metadata);
        w.PutU64(res.address.offset);
        w.PutU32(res.address.length);
        w.PutU32(res.address.epoch);
        break;
      case ItemStatus::kMoved:
        w.PutU32(res.owner);
        w.PutU64(res.epoch);
        break;
      case ItemStatus::kNotFound:
        // The latest committed timestamp is useful even without a value (tombstones are
        // sent as kOk; this is "never written", ts zero, or "no version at that ts").
        PutTs(w, res.ts);
        break;
      case ItemStatus::kCollected:
      case ItemStatus::kError:
        break;
    }
  }
}

Status Decode(std::string_view body, uint32_t count, GetReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 1, "GET reply"));
  out->results.resize(count);
  for (auto& res : out->results) {
    res = GetResult();
    if (!GetItemStatus(r, &res.status)) return Truncated("GET reply");
    bool ok = true;
    switch (res.status) {
      case ItemStatus::kOk:
        ok = r.GetU8(&res.flags) && GetTs(r, &res.ts) && GetView(r, &res.value) &&
             GetView(r, &res.metadata) && r.GetU64(&res.address.offset) &&
             r.GetU32(&res.address.length) && r.GetU32(&res.address.epoch);
        break;
      case ItemStatus::kMoved:
        ok = r.GetU32(&res.owner) && r.GetU64(&res.epoch);
        break;
      case ItemStatus::kNotFound:
        ok = GetTs(r, &res.ts);
        break;
      case ItemStatus::kCollected:
      case ItemStatus::kError:
        break;
    }
    if (!ok) return Truncated("GET reply");
  }
  return r.ExpectEnd("GET reply");
}

void Encode(const GetGroupRequest& m, std::string* out) {
  StringByteWriter w(out);
  PutPart(w, m.part);
  PutView(w, m.group);
}

Status Decode(std::string_view body, GetGroupRequest* out) {
  ByteReader r(body);
  if (!GetPart(r, &out->part) || !GetView(r, &out->group)) return Truncated("GET_GROUP");
  return r.ExpectEnd("GET_GROUP");
}

void Encode(const GetGroupReply& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU8(static_cast<uint8_t>(m.status));
  w.PutU32(m.owner);
  w.PutU64(m.epoch);
  w.PutU64(m.version_offset);
  w.PutU64(m.version);
  for (const auto& e : m.entries) {
    PutView(w, e.key);
    PutTs(w, e.ts);
    PutView(w, e.value);
    PutView(w, e.metadata);
  }
}

Status Decode(std::string_view body, uint32_t count, GetGroupReply* out) {
  ByteReader r(body);
  if (!GetItemStatus(r, &out->status) || !r.GetU32(&out->owner) || !r.GetU64(&out->epoch) ||
      !r.GetU64(&out->version_offset) || !r.GetU64(&out->version)) {
    return Truncated("GET_GROUP reply");
  }
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 12 + kTsBytes, "GET_GROUP reply"));
  out->entries.resize(count);
  for (auto& e : out->entries) {
    if (!GetView(r, &e.key) || !GetTs(r, &e.ts) || !GetView(r, &e.value) ||
        !GetView(r, &e.metadata)) {
      return Truncated("GET_GROUP reply");
    }
  }
  return r.ExpectEnd("GET_GROUP reply");
}

// ---- writes ------------------------------------------------------------------------------

void Encode(const PrepareRequest& m, std::string* out) {
  // A bulk load's PREPARE holds thousands of rows: its size is known, grow the body once.
  size_t bytes = kTsBytes;
  for (const auto& it : m.items) {
    bytes += kPartBytes + 4 + it.key.size() + 4 + it.value.size() + 1 + 4 + it.metadata.size() +
             ((it.flags & kPutHasExpected) ? kTsBytes : 0);
  }
  out->reserve(out->size() + bytes);
  StringByteWriter w(out);
  PutTs(w, m.ts);
  for (const auto& it : m.items) {
    PutPart(w, it.part);
    PutView(w, it.key);
    PutView(w, it.value);
    w.PutU8(it.flags);
    if (it.flags & kPutHasExpected) PutTs(w, it.expected);
    PutView(w, it.metadata);
  }
}

Status Decode(std::string_view body, uint32_t count, PrepareRequest* out) {
  ByteReader r(body);
  if (!GetTs(r, &out->ts)) return Truncated("PREPARE");
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 4 + 4 + 1 + 4, "PREPARE"));
  out->items.resize(count);
  for (auto& it : out->items) {
    it.expected = Timestamp();
    if (!GetPart(r, &it.part) || !GetView(r, &it.key) || !GetView(r, &it.value) ||
        !r.GetU8(&it.flags) || ((it.flags & kPutHasExpected) && !GetTs(r, &it.expected)) ||
        !GetView(r, &it.metadata)) {
      return Truncated("PREPARE");
    }
  }
  return r.ExpectEnd("PREPARE");
}

void Encode(const Decision& m, std::string* out) {
  StringByteWriter w(out);
  PutTs(w, m.ts);
  for (const auto& p : m.partitions) PutPart(w, p);
  if (m.release_intents_of != 0) w.PutU64(m.release_intents_of);
}

Status Decode(std::string_view body, uint32_t count, Decision* out) {
  ByteReader r(body);
  out->release_intents_of = 0;
  if (!GetTs(r, &out->ts)) return Truncated("COMMIT/ABORT");
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes, "COMMIT/ABORT"));
  out->partitions.resize(count);
  for (auto& p : out->partitions) {
    if (!GetPart(r, &p)) return Truncated("COMMIT/ABORT");
  }
  if (r.remaining() == 8) {
    if (!r.GetU64(&out->release_intents_of) || out->release_intents_of == 0) {
      return Status::Corruption("malformed COMMIT/ABORT: intents of transaction 0");
    }
  }
  return r.ExpectEnd("COMMIT/ABORT");
}

void Encode(const CommitAddressesReply& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& item : m.items) {
    PutPart(w, item.part);
    PutView(w, item.key);
    w.PutU64(item.address.offset);
    w.PutU32(item.address.length);
    w.PutU32(item.address.epoch);
  }
}

Status Decode(std::string_view body, uint32_t count, CommitAddressesReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 4 + 16, "COMMIT reply"));
  out->items.resize(count);
  for (auto& item : out->items) {
    if (!GetPart(r, &item.part) || !GetView(r, &item.key) || !r.GetU64(&item.address.offset) ||
        !r.GetU32(&item.address.length) || !r.GetU32(&item.address.epoch)) {
      return Truncated("COMMIT reply");
    }
  }
  return r.ExpectEnd("COMMIT reply");
}

void Encode(const PrepareError& m, std::string_view message, std::string* out) {
  StringByteWriter w(out);
  PutView(w, message);
  w.PutU32(m.item);
  PutTs(w, m.watermark);
  w.PutU32(m.owner);
  w.PutU64(m.epoch);
}

Status Decode(std::string_view body, PrepareError* out, std::string* message) {
  ByteReader r(body);
  std::string_view msg;
  if (!GetView(r, &msg) || !r.GetU32(&out->item) || !GetTs(r, &out->watermark) ||
      !r.GetU32(&out->owner) || !r.GetU64(&out->epoch)) {
    return Truncated("PREPARE error");
  }
  message->assign(msg);
  return r.ExpectEnd("PREPARE error");
}

// ---- directory ---------------------------------------------------------------------------

void Encode(const LookupRequest& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& p : m.partitions) PutPart(w, p);
}

Status Decode(std::string_view body, uint32_t count, LookupRequest* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes, "LOOKUP"));
  out->partitions.resize(count);
  for (auto& p : out->partitions) {
    if (!GetPart(r, &p)) return Truncated("LOOKUP");
  }
  return r.ExpectEnd("LOOKUP");
}

void Encode(const LookupReply& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& p : m.placements) {
    w.PutU32(p.owner);
    w.PutU64(p.epoch);
  }
}

Status Decode(std::string_view body, uint32_t count, LookupReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 12, "LOOKUP reply"));
  out->placements.resize(count);
  for (auto& p : out->placements) {
    if (!r.GetU32(&p.owner) || !r.GetU64(&p.epoch)) return Truncated("LOOKUP reply");
  }
  return r.ExpectEnd("LOOKUP reply");
}

void Encode(const PlacementPush& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& [p, pl] : m.entries) {
    PutPart(w, p);
    w.PutU32(pl.owner);
    w.PutU64(pl.epoch);
  }
}

Status Decode(std::string_view body, uint32_t count, PlacementPush* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 12, "PLACEMENT"));
  out->entries.resize(count);
  for (auto& [p, pl] : out->entries) {
    if (!GetPart(r, &p) || !r.GetU32(&pl.owner) || !r.GetU64(&pl.epoch)) {
      return Truncated("PLACEMENT");
    }
  }
  return r.ExpectEnd("PLACEMENT");
}

// ---- strict two-phase locking --------------------------------------------------------------

void Encode(const LockRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU64(m.txn);
  for (const auto& it : m.items) {
    PutPart(w, it.part);
    PutView(w, it.key);
    w.PutU8(it.mode);
    w.PutU8(it.flags);
    PutView(w, it.value);
  }
}

Status Decode(std::string_view body, uint32_t count, LockRequest* out) {
  ByteReader r(body);
  if (!r.GetU64(&out->txn)) return Truncated("LOCK");
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 4 + 2 + 4, "LOCK"));
  out->items.resize(count);
  for (auto& it : out->items) {
    if (!GetPart(r, &it.part) || !GetView(r, &it.key) || !r.GetU8(&it.mode) ||
        !r.GetU8(&it.flags) || !GetView(r, &it.value)) {
      return Truncated("LOCK");
    }
    if (it.mode > kLockExclusive) {
      return Status::Corruption("malformed LOCK: lock mode " + std::to_string(it.mode));
    }
  }
  return r.ExpectEnd("LOCK");
}

// ---- write intents -----------------------------------------------------------------------

namespace {
constexpr size_t kHolderBytes = 24;
void PutHolder(StringByteWriter& w, const IntentHolder& h) {
  w.PutU64(h.owner.client);
  w.PutU64(h.owner.txn);
  w.PutU64(h.priority);
}
bool GetHolder(ByteReader& r, IntentHolder* h) {
  return r.GetU64(&h->owner.client) && r.GetU64(&h->owner.txn) && r.GetU64(&h->priority);
}
// u32 count, then per intent: holder (24 bytes), u8 mode, key.
constexpr size_t kMovedIntentBytes = kHolderBytes + 1 + 4;

void PutMovedIntents(StringByteWriter& w, const std::vector<MovedIntent>& v) {
  w.PutU32(static_cast<uint32_t>(v.size()));
  for (const MovedIntent& m : v) {
    PutHolder(w, IntentHolder{m.owner, m.priority});
    w.PutU8(m.mode);
    PutView(w, m.key);
  }
}

Status GetMovedIntents(ByteReader& r, std::vector<MovedIntent>* out, const char* what) {
  uint32_t n = 0;
  if (!r.GetU32(&n)) return Truncated(what);
  RAMP_RETURN_IF_ERROR(CheckCount(n, r.remaining(), kMovedIntentBytes, what));
  out->resize(n);
  for (MovedIntent& m : *out) {
    IntentHolder h;
    std::string_view key;
    if (!GetHolder(r, &h) || !r.GetU8(&m.mode) || !GetView(r, &key)) return Truncated(what);
    m.owner = h.owner;
    m.priority = h.priority;
    m.key.assign(key);
  }
  return Status::OK();
}
}  // namespace

void Encode(const IntentForward& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& [owner, part] : m.released) {
    w.PutU64(owner.client);
    w.PutU64(owner.txn);
    PutPart(w, part);
  }
}

Status Decode(std::string_view body, uint32_t count, IntentForward* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 16 + 12, "INTENT_FORWARD"));
  out->released.resize(count);
  for (auto& [owner, part] : out->released) {
    if (!r.GetU64(&owner.client) || !r.GetU64(&owner.txn) || !GetPart(r, &part)) {
      return Truncated("INTENT_FORWARD");
    }
  }
  return r.ExpectEnd("INTENT_FORWARD");
}

void Encode(const IntentRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU64(m.txn);
  w.PutU64(m.priority);
  w.PutU8(m.flags);
  w.PutU8(m.mode);
  PutPart(w, m.part);
  PutView(w, m.key);
}

Status Decode(std::string_view body, IntentRequest* out) {
  ByteReader r(body);
  if (!r.GetU64(&out->txn) || !r.GetU64(&out->priority) || !r.GetU8(&out->flags) ||
      !r.GetU8(&out->mode) || !GetPart(r, &out->part) || !GetView(r, &out->key)) {
    return Truncated("INTENT");
  }
  // Every mode is valid: 0..3 row-lock modes, 4..255 groups (kIntentGroupBase).
  if (out->flags > (kIntentWait | kIntentWithdraw)) {
    return Status::Corruption("malformed INTENT: flags " + std::to_string(out->flags));
  }
  return r.ExpectEnd("INTENT");
}

void Encode(const IntentReply& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU8(m.outcome);
  w.PutU8(m.live);
  PutTs(w, m.latest);
  PutView(w, m.value);
  for (const auto& h : m.holders) PutHolder(w, h);
}

Status Decode(std::string_view body, uint32_t count, IntentReply* out) {
  ByteReader r(body);
  if (!r.GetU8(&out->outcome) || !r.GetU8(&out->live) || !GetTs(r, &out->latest) ||
      !GetView(r, &out->value)) {
    return Truncated("INTENT reply");
  }
  if (out->outcome > kIntentHeld) {
    return Status::Corruption("malformed INTENT reply: outcome " + std::to_string(out->outcome));
  }
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kHolderBytes, "INTENT reply"));
  out->holders.resize(count);
  for (auto& h : out->holders) {
    if (!GetHolder(r, &h)) return Truncated("INTENT reply");
  }
  return r.ExpectEnd("INTENT reply");
}

void Encode(const IntentReleaseRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU64(m.txn);
}

Status Decode(std::string_view body, IntentReleaseRequest* out) {
  ByteReader r(body);
  if (!r.GetU64(&out->txn)) return Truncated("INTENT_RELEASE");
  return r.ExpectEnd("INTENT_RELEASE");
}

void Encode(const WaitsForRequest& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& o : m.owners) {
    w.PutU64(o.client);
    w.PutU64(o.txn);
  }
}

Status Decode(std::string_view body, uint32_t count, WaitsForRequest* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 16, "WAITS_FOR"));
  out->owners.resize(count);
  for (auto& o : out->owners) {
    if (!r.GetU64(&o.client) || !r.GetU64(&o.txn)) return Truncated("WAITS_FOR");
  }
  return r.ExpectEnd("WAITS_FOR");
}

void Encode(const WaitsForReply& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& edges : m.edges) {
    w.PutU32(static_cast<uint32_t>(edges.size()));
    for (const auto& h : edges) PutHolder(w, h);
  }
}

Status Decode(std::string_view body, uint32_t count, WaitsForReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 4, "WAITS_FOR reply"));
  out->edges.resize(count);
  for (auto& edges : out->edges) {
    uint32_t n = 0;
    if (!r.GetU32(&n)) return Truncated("WAITS_FOR reply");
    RAMP_RETURN_IF_ERROR(CheckCount(n, r.remaining(), kHolderBytes, "WAITS_FOR reply"));
    edges.resize(n);
    for (auto& h : edges) {
      if (!GetHolder(r, &h)) return Truncated("WAITS_FOR reply");
    }
  }
  return r.ExpectEnd("WAITS_FOR reply");
}

// ---- administration ----------------------------------------------------------------------

void Encode(const StatusReply& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU32(m.node);
  w.PutU64(m.partitions);
  w.PutU64(m.keys);
  w.PutU64(m.bytes);
  w.PutU64(m.ops);
  w.PutU64(m.uptime_ms);
  w.PutU64(m.prepared_txns);
  PutView(w, m.advertised);
  w.PutU32(m.config_nodes);
  w.PutU64(m.config_digest);
}

Status Decode(std::string_view body, StatusReply* out) {
  ByteReader r(body);
  if (!r.GetU32(&out->node) || !r.GetU64(&out->partitions) || !r.GetU64(&out->keys) ||
      !r.GetU64(&out->bytes) || !r.GetU64(&out->ops) || !r.GetU64(&out->uptime_ms)) {
    return Truncated("STATUS reply");
  }
  out->prepared_txns = 0;
  if (r.remaining() > 0 && !r.GetU64(&out->prepared_txns)) return Truncated("STATUS reply");
  out->advertised.clear();
  out->config_nodes = 0;
  out->config_digest = 0;
  if (r.remaining() > 0) {
    std::string_view adv;
    if (!GetView(r, &adv) || !r.GetU32(&out->config_nodes) || !r.GetU64(&out->config_digest)) {
      return Truncated("STATUS reply");
    }
    out->advertised = adv;
  }
  return r.ExpectEnd("STATUS reply");
}

void Encode(const std::vector<PartitionInfo>& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& p : m) {
    PutPart(w, p.id);
    w.PutU32(p.owner);
    w.PutU64(p.epoch);
    w.PutU64(p.keys);
    w.PutU64(p.bytes);
    uint64_t bits = 0;
    static_assert(sizeof(bits) == sizeof(p.ops_per_sec));
    std::memcpy(&bits, &p.ops_per_sec, sizeof(bits));
    w.PutU64(bits);
  }
}

Status Decode(std::string_view body, uint32_t count, std::vector<PartitionInfo>* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 4 + 32, "PARTITIONS reply"));
  out->resize(count);
  for (auto& p : *out) {
    uint64_t bits = 0;
    if (!GetPart(r, &p.id) || !r.GetU32(&p.owner) || !r.GetU64(&p.epoch) || !r.GetU64(&p.keys) ||
        !r.GetU64(&p.bytes) || !r.GetU64(&bits)) {
      return Truncated("PARTITIONS reply");
    }
    std::memcpy(&p.ops_per_sec, &bits, sizeof(bits));
  }
  return r.ExpectEnd("PARTITIONS reply");
}

void Encode(const DropKeyspaceRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU64(m.keyspace);
}

Status Decode(std::string_view body, DropKeyspaceRequest* out) {
  ByteReader r(body);
  if (!r.GetU64(&out->keyspace)) return Truncated("DROP_KEYSPACE");
  return r.ExpectEnd("DROP_KEYSPACE");
}

// ---- termination -------------------------------------------------------------------------

void Encode(const TxnStateRequest& m, std::string* out) {
  StringByteWriter w(out);
  PutTs(w, m.ts);
  w.PutU8(m.fence);
  for (const auto& p : m.partitions) PutPart(w, p);
}

Status Decode(std::string_view body, uint32_t count, TxnStateRequest* out) {
  ByteReader r(body);
  if (!GetTs(r, &out->ts) || !r.GetU8(&out->fence)) return Truncated("TXN_STATE");
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes, "TXN_STATE"));
  out->partitions.resize(count);
  for (auto& p : out->partitions) {
    if (!GetPart(r, &p)) return Truncated("TXN_STATE");
  }
  return r.ExpectEnd("TXN_STATE");
}

void Encode(const TxnStateReply& m, std::string* out) {
  StringByteWriter w(out);
  for (auto s : m.states) w.PutU8(static_cast<uint8_t>(s));
}

Status Decode(std::string_view body, uint32_t count, TxnStateReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 1, "TXN_STATE reply"));
  out->states.resize(count);
  for (auto& s : out->states) {
    uint8_t v = 0;
    if (!r.GetU8(&v) || v > static_cast<uint8_t>(TxnState::kAborted)) {
      return Truncated("TXN_STATE reply");
    }
    s = static_cast<TxnState>(v);
  }
  return r.ExpectEnd("TXN_STATE reply");
}

// ---- migration ---------------------------------------------------------------------------

const char* MigrationPhaseName(MigrationPhase p) {
  switch (p) {
    case MigrationPhase::kCopying:
      return "copying";
    case MigrationPhase::kCutover:
      return "cutover";
    case MigrationPhase::kCommitted:
      return "committed";
    case MigrationPhase::kDone:
      return "done";
    case MigrationPhase::kRolledBack:
      return "rolled back";
    case MigrationPhase::kFailed:
      return "failed";
  }
  return "unknown";
}

void Encode(const MigrateRequest& m, std::string* out) {
  StringByteWriter w(out);
  PutPart(w, m.part);
  w.PutU32(m.target);
}

Status Decode(std::string_view body, MigrateRequest* out) {
  ByteReader r(body);
  if (!GetPart(r, &out->part) || !r.GetU32(&out->target)) return Truncated("MIGRATE");
  return r.ExpectEnd("MIGRATE");
}

void Encode(const std::vector<MigrationInfo>& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& i : m) {
    PutPart(w, i.part);
    w.PutU32(i.source);
    w.PutU32(i.target);
    w.PutU8(static_cast<uint8_t>(i.phase));
    w.PutU64(i.old_epoch);
    w.PutU64(i.new_epoch);
    w.PutU64(i.started_unix_ms);
    w.PutU64(i.bytes_copied);
    w.PutU64(i.bytes_total);
    PutView(w, i.error);
  }
}

Status Decode(std::string_view body, uint32_t count, std::vector<MigrationInfo>* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 65, "MIGRATIONS reply"));
  out->resize(count);
  for (auto& i : *out) {
    uint8_t phase = 0;
    std::string_view err;
    if (!GetPart(r, &i.part) || !r.GetU32(&i.source) || !r.GetU32(&i.target) || !r.GetU8(&phase) ||
        !r.GetU64(&i.old_epoch) || !r.GetU64(&i.new_epoch) || !r.GetU64(&i.started_unix_ms) ||
        !r.GetU64(&i.bytes_copied) || !r.GetU64(&i.bytes_total) || !GetView(r, &err)) {
      return Truncated("MIGRATIONS reply");
    }
    if (phase < 1 || phase > 6) return Status::Corruption("MIGRATIONS reply: unknown phase");
    i.phase = static_cast<MigrationPhase>(phase);
    i.error.assign(err);
  }
  return r.ExpectEnd("MIGRATIONS reply");
}

void Encode(const MigrateCtl& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU8(static_cast<uint8_t>(m.action));
  PutPart(w, m.part);
  w.PutU32(m.node);
  w.PutU64(m.epoch);
  w.PutU64(m.old_epoch);
  w.PutU64(m.load_mops);
  PutMovedIntents(w, m.intents);
}

Status Decode(std::string_view body, MigrateCtl* out) {
  ByteReader r(body);
  uint8_t action = 0;
  if (!r.GetU8(&action) || !GetPart(r, &out->part) || !r.GetU32(&out->node) ||
      !r.GetU64(&out->epoch) || !r.GetU64(&out->old_epoch) || !r.GetU64(&out->load_mops)) {
    return Truncated("MIGRATE_CTL");
  }
  if (action < 1 || action > 8) return Status::Corruption("MIGRATE_CTL: unknown action");
  out->action = static_cast<MigrateAction>(action);
  RAMP_RETURN_IF_ERROR(GetMovedIntents(r, &out->intents, "MIGRATE_CTL"));
  return r.ExpectEnd("MIGRATE_CTL");
}

void Encode(const MigrateCtlReply& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU8(m.exists);
  w.PutU8(m.owns);
  w.PutU8(m.caught_up);
  w.PutU8(m.finished);
  w.PutU64(m.bytes_copied);
  w.PutU64(m.bytes_total);
  w.PutU64(m.partition_bytes);
  w.PutU64(m.free_bytes);
  w.PutU32(m.page_count);
  w.PutU64(m.load_mops);
  PutTs(w, m.watermark);
  PutView(w, m.error);
  PutMovedIntents(w, m.intents);
}

Status Decode(std::string_view body, MigrateCtlReply* out) {
  ByteReader r(body);
  std::string_view err;
  if (!r.GetU8(&out->exists) || !r.GetU8(&out->owns) || !r.GetU8(&out->caught_up) ||
      !r.GetU8(&out->finished) || !r.GetU64(&out->bytes_copied) || !r.GetU64(&out->bytes_total) ||
      !r.GetU64(&out->partition_bytes) || !r.GetU64(&out->free_bytes) ||
      !r.GetU32(&out->page_count) || !r.GetU64(&out->load_mops) || !GetTs(r, &out->watermark) ||
      !GetView(r, &err)) {
    return Truncated("MIGRATE_CTL reply");
  }
  out->error.assign(err);
  RAMP_RETURN_IF_ERROR(GetMovedIntents(r, &out->intents, "MIGRATE_CTL reply"));
  return r.ExpectEnd("MIGRATE_CTL reply");
}

void Encode(const LoadReport& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& [p, n] : m.reads) {
    PutPart(w, p);
    w.PutU64(n);
  }
}

Status Decode(std::string_view body, uint32_t count, LoadReport* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kPartBytes + 8, "LOAD_REPORT"));
  out->reads.resize(count);
  for (auto& [p, n] : out->reads) {
    if (!GetPart(r, &p) || !r.GetU64(&n)) return Truncated("LOAD_REPORT");
  }
  return r.ExpectEnd("LOAD_REPORT");
}

// ---- probe -------------------------------------------------------------------------------

void Encode(const ProbeRequest& m, std::string* out) {
  StringByteWriter w(out);
  for (uint32_t n : m.nodes) w.PutU32(n);
}

Status Decode(std::string_view body, uint32_t count, ProbeRequest* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 4, "PROBE"));
  out->nodes.resize(count);
  for (auto& n : out->nodes) {
    if (!r.GetU32(&n)) return Truncated("PROBE");
  }
  return r.ExpectEnd("PROBE");
}

void Encode(const std::vector<ProbeResult>& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& p : m) {
    w.PutU32(p.node);
    w.PutU8(p.ok ? 1 : 0);
    w.PutU64(p.latency_us);
    PutView(w, p.endpoint);
    PutView(w, p.error);
  }
}

Status Decode(std::string_view body, uint32_t count, std::vector<ProbeResult>* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 4 + 1 + 8 + 4 + 4, "PROBE reply"));
  out->resize(count);
  for (auto& p : *out) {
    uint8_t ok = 0;
    std::string_view ep, err;
    if (!r.GetU32(&p.node) || !r.GetU8(&ok) || !r.GetU64(&p.latency_us) || !GetView(r, &ep) ||
        !GetView(r, &err)) {
      return Truncated("PROBE reply");
    }
    if (ok > 1) return Status::Corruption("malformed PROBE reply: ok byte " + std::to_string(ok));
    p.ok = ok == 1;
    p.endpoint = ep;
    p.error = err;
  }
  return r.ExpectEnd("PROBE reply");
}

}  // namespace ramp::protocol
