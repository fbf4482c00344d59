// The durable half of request handling: a request that wrote to the log is answered only
// once its bytes are on disk. The worker does not wait: the reply is parked with the group
// commit and sent through the worker's mailbox (DeferredReply) when the batch is durable,
// so one worker keeps serving other clients while the disk syncs.
#include "protocol/messages.h"
#include "server/request_handler.h"

namespace ramp::server {
namespace {

bool Writes(const protocol::Header& h, std::string_view message) {
  switch (h.base_op()) {
    case protocol::Op::kPrepare:
    case protocol::Op::kCommit:
    case protocol::Op::kAbort:
    case protocol::Op::kWriteLocked:
      return true;
    case protocol::Op::kTxnState: {
      // Only a fencing query writes (the abort mark that refuses a late PREPARE).
      protocol::TxnStateRequest req;
      return protocol::Decode(message.substr(protocol::kHeaderBytes), h.count, &req).ok() &&
             req.fence != 0;
    }
    default:
      return false;
  }
}

}  // namespace

Status RequestHandler::Handle(Session& session, std::string_view message, std::string* reply) {
  RAMP_RETURN_IF_ERROR(HandleNow(session, message, reply));
  if (reply->empty() || !ctx_->store->durable()) return Status::OK();
  protocol::Header h;
  if (!protocol::DecodeHeader(message, &h).ok() || !Writes(h, message)) return Status::OK();
  // Every reply of a writing request waits, errors too: a PREPARE refused at its third
  // item has prepared the first two.
  const uint64_t ticket = ctx_->store->DurableTicket();
  auto deferred = std::make_shared<DeferredReply>(Defer(session));
  auto ready = std::make_shared<std::string>(std::move(*reply));
  reply->clear();
  HybridClock* clock = ctx_->clock;
  ctx_->store->WhenDurable(ticket, [deferred, ready, h, clock](const Status& st) {
    if (st.ok()) {
      deferred->Send(std::move(*ready));
      return;
    }
    std::string error;
    protocol::EncodeErrorReply(h, clock->Peek(), st, &error);
    deferred->Send(std::move(error));
  });
  return Status::OK();
}

}  // namespace ramp::server
