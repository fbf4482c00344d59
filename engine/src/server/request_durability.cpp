// The durable half of request handling (DESIGN §5, "Acknowledgement"):
//  - a PREPARE (and an ABORT, a 2PL write, a fencing TXN_STATE) is answered only once its
//    bytes are on disk. The worker does not wait: the reply is parked with the group commit
//    and sent through the worker's mailbox (DeferredReply) when the batch is durable, so one
//    worker keeps serving other clients while the disk syncs;
//  - a COMMIT is answered at once, before its own fdatasync: every sibling partition holds
//    the transaction prepared durably (the client commits only after every PREPARE was
//    acknowledged), and recovery commits a transaction that a sibling committed or that
//    every sibling holds prepared;
//  - so that no reader sees a commit disappear in a crash, a restarted server refuses reads
//    of the partitions that came back with a transaction in doubt until it has resolved
//    them with their siblings (in_doubt.h, Server::TerminationLoop).
#include "protocol/messages.h"
#include "server/in_doubt.h"
#include "server/request_handler.h"

namespace ramp::server {
namespace {

bool Writes(const protocol::Header& h, std::string_view message) {
  switch (h.base_op()) {
    case protocol::Op::kPrepare:
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
      return false;  // COMMIT included: acknowledged before its sync (see above)
  }
}

// The partition of a read that waits for the start-up resolution, if any.
const PartitionId* BlockedRead(const InDoubt& in_doubt, const protocol::Header& h,
                               std::string_view message, PartitionId* scratch) {
  const std::string_view body = message.substr(protocol::kHeaderBytes);
  switch (h.base_op()) {
    case protocol::Op::kGet: {
      protocol::GetRequest req;
      if (!protocol::Decode(body, h.count, &req).ok()) return nullptr;  // HandleNow refuses it
      for (const auto& item : req.items) {
        if (in_doubt.Blocks(item.part)) {
          *scratch = item.part;
          return scratch;
        }
      }
      return nullptr;
    }
    case protocol::Op::kGetGroup: {
      protocol::GetGroupRequest req;
      if (!protocol::Decode(body, &req).ok() || !in_doubt.Blocks(req.part)) return nullptr;
      *scratch = req.part;
      return scratch;
    }
    default:
      return nullptr;
  }
}

}  // namespace

Status RequestHandler::Handle(Session& session, std::string_view message, std::string* reply) {
  if (ctx_->in_doubt != nullptr && !ctx_->in_doubt->empty() && session.greeted) {
    protocol::Header h;
    PartitionId part;
    if (protocol::DecodeHeader(message, &h).ok() && !h.is_reply() &&
        BlockedRead(*ctx_->in_doubt, h, message, &part) != nullptr) {
      reply->clear();
      ErrorReply(h,
                 Status::Unavailable("partition " + part.ToString() +
                                     " is recovering: a transaction found prepared at restart "
                                     "awaits its siblings' answer; retry"),
                 reply);
      return Status::OK();
    }
  }
  RAMP_RETURN_IF_ERROR(HandleNow(session, message, reply));
  if (reply->empty() || !ctx_->store->durable()) return Status::OK();
  // The fault harness's injected bug (rampd --test-ack-before-durable): answer at once.
  if (ctx_->test_ack_before_durable) return Status::OK();
  protocol::Header h;
  if (!protocol::DecodeHeader(message, &h).ok() || !Writes(h, message)) return Status::OK();
  // Every reply of a writing request waits, errors too: a PREPARE refused at its third
  // item has prepared the first two.
  const uint64_t ticket = ctx_->store->DurableTicket();
  auto deferred = std::make_shared<DeferredReply>(Defer(session));
  auto ready = std::make_shared<std::string>(std::move(*reply));
  reply->clear();
  HybridClock* clock = ctx_->clock;
  ctx_->store->WhenDurable(
      ticket,
      [deferred, ready, h, clock](const Status& st) {
        if (st.ok()) {
          deferred->Send(std::move(*ready));
          return;
        }
        std::string error;
        protocol::EncodeErrorReply(h, clock->Peek(), st, &error);
        deferred->Send(std::move(error));
      },
      /*caller_flushes=*/true);
  durable_waits_ = true;  // the worker writes the batch at the end of its round
  return Status::OK();
}

}  // namespace ramp::server
