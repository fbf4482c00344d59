// Write intents (server/intent_table.h): INTENT, INTENT_RELEASE and WAITS_FOR.
#include "server/request_handler.h"

namespace ramp::server {

using protocol::Header;

// The reply that grants an intent: the key's latest committed version comes with it, so the
// writer learns at once whether the version it read is still the newest (else it re-reads:
// PostgreSQL's EvalPlanQual).
void EncodeIntentGrant(const ServerContext& ctx, const Header& h, const PartitionId& part,
                       std::string_view key, std::string* reply) {
  store::ReadResult r;
  ctx.store->Get(store::ReadItem{part, key, Timestamp()}, 0, &r);
  protocol::IntentReply g;
  g.outcome = protocol::kIntentGranted;
  g.live = r.status == store::ReadStatus::kOk && (r.flags & record::kRecordTombstone) == 0;
  g.latest = r.ts;
  g.value = r.value;  // a deletion's: empty, or kMovedTombstone (ramp/write_batch.h)
  protocol::EncodeHeader(protocol::ReplyTo(h, ctx.clock->Peek()), reply);
  protocol::Encode(g, reply);
}

void EncodeIntentMoved(const ServerContext& ctx, const Header& h, const PartitionId& part,
                       std::string* reply) {
  uint32_t hint = 0;
  uint64_t epoch = 0;
  ctx.directory->Owns(part, &hint, &epoch);
  protocol::EncodeErrorReply(
      h, ctx.clock->Peek(),
      Status::Moved("partition " + part.ToString() + " is served by node " + std::to_string(hint)),
      reply);
}

Status RequestHandler::OnIntent(Session& s, const Header& h, std::string_view body,
                                std::string* reply) {
  protocol::IntentRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &req));
  const IntentTable::Owner owner{s.client_id, req.txn};
  if (req.flags & protocol::kIntentWithdraw) {
    ctx_->intents->Withdraw(owner, req.part, req.key);
    protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
    protocol::Encode(protocol::IntentReply{}, reply);
    return Status::OK();
  }
  if (Status st = CheckKey(req.key); !st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  if (!ctx_->directory->Owns(req.part)) {
    EncodeIntentMoved(*ctx_, h, req.part, reply);
    return Status::OK();
  }
  const bool wait = (req.flags & protocol::kIntentWait) != 0;
  protocol::IntentReply r;
  const IntentTable::Outcome outcome =
      ctx_->intents->Acquire(owner, req.priority, req.part, req.key, req.mode, wait, h,
                             wait ? Defer(s) : DeferredReply(), &r.holders);
  switch (outcome) {
    case IntentTable::Outcome::kGranted:
      EncodeIntentGrant(*ctx_, h, req.part, req.key, reply);
      return Status::OK();
    case IntentTable::Outcome::kQueued:
      return Status::OK();  // the grant is the reply
    case IntentTable::Outcome::kMoved:
      EncodeIntentMoved(*ctx_, h, req.part, reply);
      return Status::OK();
    case IntentTable::Outcome::kHeld:
      break;
  }
  r.outcome = protocol::kIntentHeld;
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.holders.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

Status RequestHandler::OnIntentRelease(Session& s, const Header& h, std::string_view body,
                                       std::string* reply) {
  protocol::IntentReleaseRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &req));
  ctx_->intents->Release({s.client_id, req.txn});
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  return Status::OK();
}

Status RequestHandler::OnWaitsFor(const Header& h, std::string_view body, std::string* reply) {
  protocol::WaitsForRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  if (Status st = CheckBatch(req.owners.size()); !st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  protocol::WaitsForReply r;
  r.edges.resize(req.owners.size());
  for (size_t i = 0; i < req.owners.size(); i++)
    ctx_->intents->WaitsFor(req.owners[i], &r.edges[i]);
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.edges.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

// From the server a moved partition's holders asked (their client ended the transaction or
// closed its last connection there): the intents that moved here are released.
Status RequestHandler::OnIntentForward(const Header& h, std::string_view body, std::string* reply) {
  protocol::IntentForward req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  if (Status st = CheckBatch(req.released.size()); !st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  for (const auto& [owner, part] : req.released) ctx_->intents->ReleaseForwarded(owner, part);
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  return Status::OK();
}

}  // namespace ramp::server
