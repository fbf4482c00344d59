// The verbs provider's data path: posting work requests, polling completions and events,
// one-sided RDMA READ/WRITE (checked first by the region check of core/region.h), ring
// frames and credits as RDMA writes. Set-up, memory registration and the control messages
// are in verbs_connection.cpp.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/region.h"
#include "ramp/log.h"
#include "verbs/verbs_connection.h"
#include "verbs/verbs_work_request.h"

namespace ramp::transport::detail {

using namespace verbs;  // NOLINT: the provider's own constants and work request ids

Status VerbsConnection::PostRecv(uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(control_area_ + slot * kSlotBytes);
  sge.length = kSlotBytes;
  sge.lkey = control_lkey_;
  ibv_recv_wr wr{};
  wr.wr_id = WrId(kKindRecv, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(id_->qp, &wr, &bad);
  if (rc != 0) return Status::FromErrno("ibv_post_recv", rc);
  return Status::OK();
}

bool VerbsConnection::SqHasRoom(int count) {
  return static_cast<int64_t>(sq_posted_ - sq_retired_) + count <= sq_depth_ - 1;
}

Status VerbsConnection::PostSendChain(ibv_send_wr* first, uint64_t* last_seq) {
  uint64_t seq = sq_posted_;
  int count = 0;
  for (ibv_send_wr* wr = first; wr != nullptr; wr = wr->next) {
    seq++;
    count++;
    if (wr->send_flags & IBV_SEND_SIGNALED) {
      unsignalled_run_ = 0;
      continue;
    }
    // Signal now and then so that completions retire send-queue slots.
    const bool half_full = static_cast<int64_t>(seq - sq_retired_) >= sq_depth_ / 2;
    if (++unsignalled_run_ >= kSignalInterval || half_full) {
      wr->send_flags |= IBV_SEND_SIGNALED;
      wr->wr_id = WrId(kKindMarker, seq);
      unsignalled_run_ = 0;
    }
  }
  if (!SqHasRoom(count)) return Status::Busy("verbs send queue full");
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(id_->qp, first, &bad);
  if (rc != 0) return Status::FromErrno("ibv_post_send", rc);
  sq_posted_ = seq;
  *last_seq = seq;
  return Status::OK();
}

// ---- completions and events -----------------------------------------------------------------

int VerbsConnection::PollCq() {
  int total = 0;
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wc);
    if (n < 0) {
      CloseWith(Status::IOError("ibv_poll_cq failed on the connection to " + peer_));
      return total;
    }
    for (int i = 0; i < n; i++) {
      const ibv_wc& w = wc[i];
      const uint64_t v = ValueOf(w.wr_id);
      switch (KindOf(w.wr_id)) {
        case kKindRecv: {
          if (w.status != IBV_WC_SUCCESS) {
            if (w.status != IBV_WC_WR_FLUSH_ERR) CloseWith(FromCompletion(w, peer_));
            break;
          }
          if (w.opcode == IBV_WC_RECV) {
            const uint8_t* buf = control_area_ + v * kSlotBytes;
            uint8_t type = 0;
            uint32_t len = 0;
            Status s = w.byte_len >= wire::kHeaderBytes
                           ? wire::DecodeHeader(buf, kSlotBytes - wire::kHeaderBytes, &type, &len)
                           : Status::Corruption("runt control message");
            if (s.ok() && len + wire::kHeaderBytes != w.byte_len) {
              s = Status::Corruption("control message length does not match what arrived");
            }
            if (!s.ok()) {
              CloseWith(s.Annotate("from peer " + peer_));
              break;
            }
            ControlMessage m;
            m.type = type;
            m.payload.assign(buf + wire::kHeaderBytes, buf + wire::kHeaderBytes + len);
            inbox_.push_back(std::move(m));
          }
          // IBV_WC_RECV_RDMA_WITH_IMM: a frame's lead landed; the wake-up was the point.
          if (!closed()) {
            Status s = PostRecv(static_cast<uint32_t>(v));
            if (!s.ok()) CloseWith(s);
          }
          break;
        }
        case kKindSend:
          if (v < send_slot_busy_.size()) {
            send_slot_busy_[v] = false;
            sq_retired_ = std::max(sq_retired_, send_slot_seq_[v]);
          }
          if (w.status != IBV_WC_SUCCESS) CloseWith(FromCompletion(w, peer_));
          break;
        case kKindMarker:
          sq_retired_ = std::max(sq_retired_, v);
          if (w.status != IBV_WC_SUCCESS) CloseWith(FromCompletion(w, peer_));
          break;
        case kKindOp: {
          auto it = ops_.find(v);
          Status status = w.status == IBV_WC_SUCCESS ? Status::OK() : FromCompletion(w, peer_);
          if (it != ops_.end()) {
            Op op = std::move(it->second);
            ops_.erase(it);
            sq_retired_ = std::max(sq_retired_, op.sq_seq);
            if (status.ok()) {
              Bump(op.write ? counters_.bytes_written : counters_.bytes_read, op.len);
            }
            CompleteLocal(op.wr_id, std::move(op.cb), status);
          }
          // After an error the queue pair is dead: everything else fails too.
          if (!status.ok()) CloseWith(status);
          break;
        }
        default:
          break;
      }
    }
    total += n;
    if (n < 32) return total;
  }
}

void VerbsConnection::DrainEvents() {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(comp_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(cm_channel_, &ev) == 0) {
    const rdma_cm_event_type type = ev->event;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
        type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
      CloseWith(
          Status::Unavailable("peer " + peer_ + " disconnected (" + rdma_event_str(type) + ")"));
    }
  }
  last_cm_check_ms_ = NowMs();
}

Status VerbsConnection::WaitForEvents(const Deadline& deadline, const WaitHook& hook,
                                      const std::string& what) {
  ibv_req_notify_cq(cq_, 0);
  if (PollCq() > 0) return Status::OK();  // arrived between the poll and the request
  constexpr int kHookIntervalMs = 100;
  for (;;) {
    if (hook) RAMP_RETURN_IF_ERROR(hook());
    pollfd fds[2] = {};
    fds[0].fd = comp_->fd;
    fds[0].events = POLLIN;
    fds[1].fd = cm_channel_->fd;
    fds[1].events = POLLIN;
    int n = poll(fds, 2, deadline.RemainingMs(kHookIntervalMs));
    if (n < 0 && errno != EINTR) return Status::FromErrno("poll", errno);
    if (n > 0) {
      DrainEvents();
      return closed() ? close_status() : Status::OK();
    }
    if (deadline.Expired()) return Status::Timeout("timed out waiting for " + what);
  }
}

void VerbsConnection::Progress() {
  if (closed()) return;
  if ((++progress_calls_ & 63) == 0 && NowMs() - last_cm_check_ms_ >= kCmCheckIntervalMs) {
    DrainEvents();
  }
  PollCq();
  while (!inbox_.empty() && !closed()) {
    ControlMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    HandleControl(m);
  }
}

bool VerbsConnection::ArmProvider() {
  DrainEvents();
  if (closed()) return false;
  ibv_req_notify_cq(cq_, 0);
  // Completions that arrived before the request raise no event: look once more.
  if (PollCq() > 0 || !inbox_.empty()) {
    Progress();
    return false;
  }
  return true;
}

// ---- one-sided operations -------------------------------------------------------------------

Status VerbsConnection::CheckImported(const RemoteRegion& handle, uint64_t offset, uint64_t len,
                                      uint32_t access, const ImportedRegion** out) {
  auto it = imports_.find(handle.id);
  if (it == imports_.end()) {
    return Status::NotFound("region " + std::to_string(handle.id) + " not exposed");
  }
  const ImportedRegion& r = it->second;
  RAMP_RETURN_IF_ERROR(CheckRegionAccess(r.handle, handle, offset, len, access));
  *out = &r;
  return Status::OK();
}

Status VerbsConnection::PostOneSided(bool write, void* local, const RemoteRegion& remote,
                                     uint64_t offset, uint64_t len, uint64_t wr_id,
                                     CompletionCallback cb) {
  const uint32_t access = write ? kAccessWrite : kAccessRead;
  const ImportedRegion* region = nullptr;
  Status check = CheckImported(remote, offset, len, access, &region);
  if (check.Is(Status::Code::kNotFound) && !closed()) {
    // The handle may have overtaken its exposure: look at the control messages, briefly.
    const Deadline deadline = Deadline::After(kExposeWaitMs);
    while (check.Is(Status::Code::kNotFound) && !closed() && !deadline.Expired()) {
      Progress();
      check = CheckImported(remote, offset, len, access, &region);
    }
  }
  uint32_t lkey = 0;
  if (len > 0) RAMP_RETURN_IF_ERROR(LocalKey(local, len, &lkey));

  // The work requests: one per remote piece touched.
  std::vector<ibv_sge> sges;
  std::vector<ibv_send_wr> wrs;
  if (check.ok() && len > 0) {
    const auto& pieces = region->pieces;
    size_t i = 0;
    while (i + 1 < pieces.size() && pieces[i + 1].region_offset <= offset) i++;
    uint64_t within = offset - pieces[i].region_offset;
    uint64_t done = 0;
    sges.reserve(pieces.size() - i);
    wrs.reserve(pieces.size() - i);
    while (done < len) {
      const ImportedPiece& p = pieces[i++];
      const uint64_t take = std::min(len - done, p.length - within);
      ibv_sge sge{};
      sge.addr = reinterpret_cast<uintptr_t>(local) + done;
      sge.length = static_cast<uint32_t>(take);
      sge.lkey = lkey;
      sges.push_back(sge);
      ibv_send_wr wr{};
      wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = p.addr + within;
      wr.wr.rdma.rkey = p.rkey;
      wr.wr_id = WrId(kKindMarker, 0);
      if (write && take <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
      wrs.push_back(wr);
      done += take;
      within = 0;
    }
    if (!SqHasRoom(static_cast<int>(wrs.size()))) PollCq();
    if (!SqHasRoom(static_cast<int>(wrs.size()))) {
      return Status::Busy("verbs send queue full; poll for completions");
    }
  }
  RAMP_RETURN_IF_ERROR(AdmitOperation(len, write));
  if (!check.ok() || len == 0) {
    if (!check.ok()) {
      check = check.Annotate(std::string(write ? "write to " : "read from ") + peer_);
    }
    CompleteLocal(wr_id, std::move(cb), std::move(check));
    return Status::OK();
  }
  const uint64_t op_id = next_op_++;
  for (size_t k = 0; k < wrs.size(); k++) {
    wrs[k].sg_list = &sges[k];
    wrs[k].num_sge = 1;
    wrs[k].next = k + 1 < wrs.size() ? &wrs[k + 1] : nullptr;
  }
  // Only the last signals: RC completes in order, so it speaks for the others.
  wrs.back().send_flags |= IBV_SEND_SIGNALED;
  wrs.back().wr_id = WrId(kKindOp, op_id);
  uint64_t seq = 0;
  Status posted = PostSendChain(wrs.data(), &seq);
  if (!posted.ok()) {
    CompleteLocal(wr_id, std::move(cb), posted);
    CloseWith(posted.Annotate("posting to " + peer_));
    return Status::OK();
  }
  ops_.emplace(op_id, Op{wr_id, std::move(cb), len, write, seq});
  return Status::OK();
}

// ---- ring writes ----------------------------------------------------------------------------

Status VerbsConnection::WriteFrame(uint64_t position, uint64_t size_field, const iovec* body,
                                   int iovcnt, size_t body_len) {
  if (!SqHasRoom(2)) PollCq();
  if (!SqHasRoom(2)) return Status::Busy("verbs send queue full");
  const bool wrap = size_field == ring::kWrapMarker;
  uint8_t* f = staging_ + position;
  ring::EncodeSize(f, size_field);
  size_t bytes = ring::kSizeBytes;
  if (!wrap) {
    f[ring::kLeadOffset] = 0;  // the lead goes separately, last
    uint8_t* d = f + ring::kBodyOffset;
    for (int i = 0; i < iovcnt; i++) {
      std::memcpy(d, body[i].iov_base, body[i].iov_len);
      d += body[i].iov_len;
    }
    *d = ring::kIndicator;
    bytes = ring::kBodyOffset + body_len + 1;
  }
  ibv_sge frame_sge{};
  frame_sge.addr = reinterpret_cast<uintptr_t>(f);
  frame_sge.length = static_cast<uint32_t>(bytes);
  frame_sge.lkey = staging_lkey_;
  ibv_sge lead_sge{};
  lead_sge.addr = reinterpret_cast<uintptr_t>(staging_ + peer_ring_bytes_);
  lead_sge.length = 1;
  lead_sge.lkey = staging_lkey_;

  ibv_send_wr lead{};
  lead.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  lead.imm_data = htonl(static_cast<uint32_t>(position / ring::kAlign));
  lead.sg_list = &lead_sge;
  lead.num_sge = 1;
  lead.wr.rdma.remote_addr = peer_block_addr_ + position + ring::kLeadOffset;
  lead.wr.rdma.rkey = peer_block_rkey_;
  lead.wr_id = WrId(kKindMarker, 0);
  if (max_inline_ >= 1) lead.send_flags = IBV_SEND_INLINE;

  ibv_send_wr frame{};
  frame.opcode = IBV_WR_RDMA_WRITE;
  frame.sg_list = &frame_sge;
  frame.num_sge = 1;
  frame.wr.rdma.remote_addr = peer_block_addr_ + position;
  frame.wr.rdma.rkey = peer_block_rkey_;
  frame.wr_id = WrId(kKindMarker, 0);
  if (bytes <= max_inline_) frame.send_flags = IBV_SEND_INLINE;
  frame.next = &lead;  // same queue pair, in order: the lead lands after the frame

  uint64_t seq = 0;
  return PostSendChain(&frame, &seq);
}

Status VerbsConnection::WriteCredits(uint64_t consumed) {
  if (!SqHasRoom(1)) PollCq();
  if (!SqHasRoom(1)) return Status::Busy("verbs send queue full");
  // Inline when the adapter allows (the value is copied at post time); otherwise from a
  // registered slot. A later credit overwriting the slot before the adapter reads it is
  // harmless: the newer count is just as true, and counts only grow.
  uint64_t* src = reinterpret_cast<uint64_t*>(staging_ + peer_ring_bytes_ + 8);
  *src = consumed;
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(src);
  sge.length = 8;
  sge.lkey = staging_lkey_;
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = peer_block_addr_ + BlockLayout::CreditOffset(peer_ring_bytes_);
  wr.wr.rdma.rkey = peer_block_rkey_;
  wr.wr_id = WrId(kKindMarker, 0);
  if (max_inline_ >= 8) wr.send_flags = IBV_SEND_INLINE;
  uint64_t seq = 0;
  return PostSendChain(&wr, &seq);
}

}  // namespace ramp::transport::detail
