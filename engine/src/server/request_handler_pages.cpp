// RequestHandler: remote page I/O. READ_PAGES is checked here, on the worker (the poller),
// and handed to the static I/O pool; SCAN_OPEN fixes a scan's snapshot at the partitions.
#include "protocol/page_messages.h"
#include "server/page_service.h"
#include "server/request_handler.h"

namespace ramp::server {

Status RequestHandler::OnReadPages(Session& s, const protocol::Header& h, std::string_view body,
                                   std::string* reply) {
  PageService::Job job;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &job.req));
  if (ctx_->pages == nullptr || post_writes_ == nullptr) {
    ErrorReply(h, Status::NotSupported("this server does not serve page reads"), reply);
    return Status::OK();
  }
  if (Status st = ctx_->pages->Validate(job.req); !st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  job.pre.resize(job.req.items.size());
  for (size_t i = 0; i < job.req.items.size(); i++) {
    const protocol::PageAddress& a = job.req.items[i].page;
    uint32_t hint = 0;
    uint64_t epoch = 0;
    const bool owned = ctx_->directory->Owns(a.part, &hint, &epoch);
    if (owned ? epoch == a.epoch
              : (job.req.flags & protocol::kPagesMigration) &&
                    ctx_->directory->ServesPagesAt(a.part, a.epoch)) {
      // Owned at that epoch, or released by a migration whose target still reads it.
    } else if (!owned) {
      job.pre[i] = Status::Moved("partition " + a.part.ToString() + " is served by node " +
                                 std::to_string(hint));
    } else if (epoch != a.epoch) {
      job.pre[i] =
          Status::Moved("stale epoch " + std::to_string(a.epoch) + " for partition " +
                        a.part.ToString() + ", which is at epoch " + std::to_string(epoch));
    }
  }
  const int limit = ctx_->pages->options().max_batches_per_connection;
  if (s.page_batches->fetch_add(1, std::memory_order_relaxed) >= limit) {
    s.page_batches->fetch_sub(1, std::memory_order_relaxed);
    ErrorReply(h,
               Status::Busy("too many READ_PAGES batches in flight on this connection (limit " +
                            std::to_string(limit) + "): wait for replies"),
               reply);
    return Status::OK();
  }
  job.in_flight = s.page_batches;
  job.session = s.id;
  job.request = h;
  job.clock = Clock();
  job.post = post_writes_;
  // Resident pages are copied here, on the worker; pages to read from disk go to the I/O
  // threads.
  if (!ctx_->pages->ServeResident(job)) ctx_->pages->Submit(std::move(job));
  reply->clear();  // the reply follows the one-sided writes
  return Status::OK();
}

Status RequestHandler::OnScanOpen(const protocol::Header& h, std::string_view body,
                                  std::string* reply) {
  protocol::ScanOpenRequest req;
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, &req));
  if (Status st = CheckBatch(req.partitions.size()); !st.ok()) {
    ErrorReply(h, st, reply);
    return Status::OK();
  }
  protocol::ScanOpenReply r;
  std::shared_lock no_locked_writes(ctx_->watermarks_mu);  // ServerContext::watermarks_mu
  for (const auto& p : req.partitions) {
    uint32_t hint = 0;
    uint64_t epoch = 0;
    if (!ctx_->directory->Owns(p, &hint, &epoch)) {
      ErrorReply(
          h,
          Status::Moved("partition " + p.ToString() + " is served by node " + std::to_string(hint)),
          reply);
      return Status::OK();
    }
    // PREPAREs at or below the snapshot are refused from now on; those already prepared
    // are the ones the scanner waits for.
    const std::vector<Timestamp> pending = ctx_->store->RaiseWatermark(p, req.snapshot);
    protocol::ScanOpenPartition out;
    out.epoch = static_cast<uint32_t>(epoch);
    out.pending = static_cast<uint32_t>(pending.size());
    // Read after the pending list: every decision at or below the snapshot made so far is
    // in pages below this count.
    out.page_count = ctx_->store->PageCount(p);
    r.partitions.push_back(out);
  }
  protocol::EncodeHeader(protocol::ReplyTo(h, Clock(), static_cast<uint32_t>(r.partitions.size())),
                         reply);
  protocol::Encode(r, reply);
  return Status::OK();
}

}  // namespace ramp::server
