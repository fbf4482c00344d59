// Executes one request against the store and encodes its reply.
#pragma once

#include <string>
#include <string_view>

#include "protocol/messages.h"
#include "server/deferred_reply.h"
#include "server/one_sided_reply.h"
#include "server/server_context.h"
#include "server/session.h"
#include "store/store_types.h"

namespace ramp::server {

// The reply granting an intent: the key's latest committed version goes with it
// (request_handler_intents.cpp; the intent table sends it for requests that waited).
void EncodeIntentGrant(const ServerContext& ctx, const protocol::Header& h, const PartitionId& part,
                       std::string_view key, std::string* reply);
// The MOVED reply to a queued intent request whose partition left this server (the intent
// table sends it at the release: the client asks the new owner).
void EncodeIntentMoved(const ServerContext& ctx, const protocol::Header& h, const PartitionId& part,
                       std::string* reply);

class RequestHandler {
 public:
  // post hands deferred replies to the worker that owns the sessions.
  RequestHandler(ServerContext* ctx, std::shared_ptr<const DeferredReply::PostFn> post)
      : ctx_(ctx), post_(std::move(post)) {}

  // Handles one message; *reply receives the reply (empty: none now — a deferred reply
  // follows, see Defer). A non-OK result is a protocol violation (unknown opcode,
  // malformed body, no HELLO first): the caller closes the connection and logs the reason.
  // Errors of the request itself (limits, conflicts) are error replies, not violations.
  // With a data directory, the replies of requests that write (PREPARE, COMMIT, ABORT,
  // 2PL writes, fencing TXN_STATE) are deferred until the group commit made the writes
  // durable (request_durability.cpp).
  Status Handle(Session& session, std::string_view message, std::string* reply);
  // Where page replies (one-sided writes, then the reply) go: the owning worker.
  void set_post_writes(std::shared_ptr<const PostWritesFn> post) { post_writes_ = std::move(post); }
  // Whether replies were parked with the group commit since the last call: the worker then
  // calls Store::FlushLogInline at the end of its round (request_durability.cpp).
  bool TakeDurableWaits() {
    const bool any = durable_waits_;
    durable_waits_ = false;
    return any;
  }

 private:
  Status HandleNow(Session& session, std::string_view message, std::string* reply);
  Status OnHello(Session& s, const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnGet(const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnGetGroup(const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnPrepare(const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnDecision(Session& s, const protocol::Header& h, std::string_view body,
                    std::string* reply);
  // *moved: refused with MOVED (a partition moved away: the client sends it again).
  Status ApplyDecision(const protocol::Header& h, std::string* reply, bool* moved);
  Status OnLookup(Session& s, const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnLock(Session& s, const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnWriteLocked(Session& s, const protocol::Header& h, std::string_view body,
                       std::string* reply);
  // Write intents (request_handler_intents.cpp).
  Status OnIntent(Session& s, const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnIntentRelease(Session& s, const protocol::Header& h, std::string_view body,
                         std::string* reply);
  Status OnWaitsFor(const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnIntentForward(const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnStatus(const protocol::Header& h, std::string* reply);
  Status OnPartitions(const protocol::Header& h, std::string* reply);
  Status OnDropKeyspace(const protocol::Header& h, std::string_view body, std::string* reply);
  Status OnTxnState(const protocol::Header& h, std::string_view body, std::string* reply);
  // Migration (request_handler_migrate.cpp).
  Status OnMigrate(Session& s, const protocol::Header& h, std::string_view body,
                   std::string* reply);
  Status OnMigrations(const protocol::Header& h, std::string* reply);
  Status OnMigrateCtl(Session& s, const protocol::Header& h, std::string_view body,
                      std::string* reply);
  // A Moved error reply naming where partition part is served (PREPARE's error body).
  void MovedReply(const protocol::Header& h, const PartitionId& part, uint32_t item,
                  std::string* reply);
  // Remote page I/O (request_handler_pages.cpp).
  Status OnReadPages(Session& s, const protocol::Header& h, std::string_view body,
                     std::string* reply);
  Status OnScanOpen(const protocol::Header& h, std::string_view body, std::string* reply);

  bool durable_waits_ = false;  // TakeDurableWaits
  void ErrorReply(const protocol::Header& h, const Status& error, std::string* reply);
  // A reply to the current request that will be sent later (from any thread).
  DeferredReply Defer(const Session& s) const { return DeferredReply(post_, s.id); }
  uint64_t Clock() const { return ctx_->clock->Peek(); }
  // Checks the key/value/batch limits of a request; a TooLarge status names the limit.
  Status CheckKey(std::string_view key) const;
  Status CheckValue(std::string_view value) const;
  Status CheckBatch(size_t items) const;

  ServerContext* ctx_;
  std::shared_ptr<const DeferredReply::PostFn> post_;
  std::shared_ptr<const PostWritesFn> post_writes_;
  // Reused between requests to avoid allocations on the hot path.
  protocol::GetRequest get_;
  protocol::GetReply get_reply_;
  protocol::PrepareRequest prepare_;
  std::vector<store::WriteItem> prepare_items_;  // prepare_ as the store takes it
  std::vector<store::GroupEntry> group_;
  protocol::Decision decision_;
  std::vector<store::CommittedRecord> committed_;  // COMMIT_ADDRESSES: what the commit made current
  std::string scratch_;
};

}  // namespace ramp::server
