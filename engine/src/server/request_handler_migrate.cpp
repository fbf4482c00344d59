// RequestHandler: migration requests (DESIGN §7, migration.h). MIGRATE at the home starts a
// move (its reply waits for the checks that need the other servers); MIGRATIONS lists the
// moves this home has in flight and recently finished; MIGRATE_CTL is one step of a move at
// the source or the target.
#include "server/migration.h"
#include "server/request_handler.h"

namespace ramp::server {

void RequestHandler::MovedReply(const protocol::Header& h, const PartitionId& part, uint32_t item,
                                std::string* reply) {
  protocol::PrepareError err;
  err.item = item;
  ctx_->directory->Owns(part, &err.owner, &err.epoch);
  protocol::Header rh = protocol::ReplyTo(h, Clock());
  rh.status = static_cast<uint16_t>(Status::Code::kMoved);
  protocol::EncodeHeader(rh, reply);
  protocol::Encode(
      err, "partition " + part.ToString() + " is served by node " + std::to_string(err.owner),
      reply);
}

Status RequestHandler::OnMigrate(Session& s, const protocol::Header& h, std::string_view body,
                                 std::string* reply) {
  protocol::MigrateRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &req));
  if (!ctx_->directory->IsHome(req.part)) {
    ErrorReply(h,
               Status::InvalidArgument("node " + std::to_string(ctx_->self) +
                                       " is not the home of partition " + req.part.ToString()),
               reply);
    return Status::OK();
  }
  if (ctx_->migrations == nullptr) {
    ErrorReply(h, Status::NotSupported("this server does not migrate partitions"), reply);
    return Status::OK();
  }
  ctx_->migrations->Start(req, h, Defer(s));
  reply->clear();  // the reply follows the checks
  return Status::OK();
}

Status RequestHandler::OnMigrations(const protocol::Header& h, std::string* reply) {
  std::vector<protocol::MigrationInfo> out;
  for (const MigrationState& m : ctx_->directory->Migrations()) {
    out.push_back(protocol::MigrationInfo{m.part, m.source, m.target, m.phase, m.old_epoch,
                                          m.new_epoch, m.started_unix_ms, m.bytes_copied,
                                          m.bytes_total, m.error});
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(out.size())), reply);
  protocol::Encode(out, reply);
  return Status::OK();
}

Status RequestHandler::OnMigrateCtl(Session& s, const protocol::Header& h, std::string_view body,
                                    std::string* reply) {
  protocol::MigrateCtl m;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, &m));
  if (m.action == protocol::MigrateAction::kFinish && ctx_->migrations != nullptr) {
    // Answered when the target's final round is over (the home's cutover waits for it).
    ServerContext* ctx = ctx_;
    ctx_->migrations->Finish(
        m.part, [ctx, h, d = Defer(s)](const protocol::MigrateCtlReply& r) mutable {
          std::string out;
          protocol::EncodeHeader(protocol::ReplyTo(h, ctx->clock->Peek()), &out);
          protocol::Encode(r, &out);
          d.Send(std::move(out));
        });
    reply->clear();
    return Status::OK();
  }
  protocol::MigrateCtlReply r;
  Status st = ctx_->migrations == nullptr
                  ? Status::NotSupported("this server does not migrate partitions")
                  : ctx_->migrations->Control(m, &r);
  if (!st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock()), reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

}  // namespace ramp::server
