#include "verbs_connection.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "handshake.h"
#include "ramp/log.h"

namespace ramp::transport::detail {
namespace {

// Receive slots double as doorbells: every frame's lead write consumes one. They are
// reposted as soon as polled; a burst beyond them makes the sender retry (RNR), not fail.
constexpr uint32_t kRecvSlots = 128;
constexpr uint32_t kSendSlots = 16;
constexpr size_t kSlotBytes = 4096;
constexpr int kSendQueueDepth = 1024;
constexpr uint64_t kSignalInterval = 32;
constexpr int kExposeWaitMs = 50;
constexpr int64_t kCmCheckIntervalMs = 10;

enum Kind : uint64_t { kKindOp = 1, kKindRecv = 2, kKindSend = 3, kKindMarker = 4 };
constexpr uint64_t kValueMask = (uint64_t{1} << 56) - 1;
uint64_t WrId(Kind k, uint64_t v) {
  return (static_cast<uint64_t>(k) << 56) | (v & kValueMask);
}
Kind KindOf(uint64_t id) {
  return static_cast<Kind>(id >> 56);
}
uint64_t ValueOf(uint64_t id) {
  return id & kValueMask;
}

Status FromCompletion(const ibv_wc& wc, const std::string& peer) {
  const std::string what = std::string(ibv_wc_status_str(wc.status)) + " (peer " + peer + ")";
  switch (wc.status) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
      return Status::PermissionDenied(what);
    case IBV_WC_WR_FLUSH_ERR:
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return Status::Unavailable(what);
    default:
      return Status::IOError(what);
  }
}

}  // namespace

Status WaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected,
                   const Deadline& deadline, const WaitHook& hook, const std::string& what) {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel, &ev) == 0) {
      const rdma_cm_event_type type = ev->event;
      const int status = ev->status;
      rdma_ack_cm_event(ev);
      if (type == expected) return Status::OK();
      switch (type) {
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
          return Status::Unavailable(what + ": " + rdma_event_str(type) + " (status " +
                                     std::to_string(status) + ")");
        default:
          return Status::Corruption(what + ": unexpected rdmacm event " + rdma_event_str(type));
      }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Status::FromErrno("rdma_get_cm_event", errno);
    }
    RAMP_RETURN_IF_ERROR(WaitFd(channel->fd, POLLIN, deadline, hook, what));
  }
}

std::string VerbsPeerName(rdma_cm_id* id) {
  sockaddr* sa = rdma_get_peer_addr(id);
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa != nullptr && sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return "verbs://" + std::string(host) + ":" + std::to_string(port);
  }
  if (sa != nullptr && sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return "verbs://[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "verbs://?";
}

// ---- set-up ---------------------------------------------------------------------------------

VerbsConnection::VerbsConnection(const TransportOptions& options, std::shared_ptr<Memory> memory,
                                 rdma_event_channel* channel, rdma_cm_id* id)
    : RingConnection(options, std::move(memory)), cm_channel_(channel), id_(id) {
  peer_ = VerbsPeerName(id_);
}

VerbsConnection::~VerbsConnection() {
  Close();
  if (qp_created_) rdma_destroy_qp(id_);
  for (auto& [segment, m] : mrs_) ibv_dereg_mr(m.mr);
  mrs_.clear();
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (comp_ != nullptr) ibv_destroy_comp_channel(comp_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (id_ != nullptr) rdma_destroy_id(id_);
  if (cm_channel_ != nullptr) rdma_destroy_event_channel(cm_channel_);
  // Only now, with no registration left on them, can our buffers go.
  if (staging_ != nullptr) (void)memory_->Free(staging_);
  if (control_area_ != nullptr) (void)memory_->Free(control_area_);
}

Status VerbsConnection::Establish(rdma_event_channel* channel, rdma_cm_id* id, bool server,
                                  const TransportOptions& options, std::shared_ptr<Memory> memory,
                                  std::unique_ptr<Connection>* out) {
  std::unique_ptr<VerbsConnection> c(new VerbsConnection(options, std::move(memory), channel, id));
  Status s = ValidateOptions(options);
  if (s.ok()) s = SetNonBlocking(channel->fd);
  if (s.ok()) s = c->CreateQueuePair();
  if (!s.ok()) {
    if (server) rdma_reject(id, nullptr, 0);
    return s;
  }
  RAMP_RETURN_IF_ERROR(c->Connect(server, Deadline::After(options.connect_timeout_ms)));

  HandshakeParams params{Provider::kVerbs, options.token,
                         Deadline::After(options.handshake_timeout_ms), options.wait_hook};
  RAMP_RETURN_IF_ERROR(server ? ServerHandshake(&c->channel_, params)
                              : ClientHandshake(&c->channel_, params));
  // Authenticated: only now is our ring block allocated and its address and rkey revealed.
  RAMP_RETURN_IF_ERROR(c->InitLocal());
  Mr* block_mr = nullptr;
  RAMP_RETURN_IF_ERROR(c->RegisterSegment(c->block_.segment_id(), &block_mr));
  wire::Setup mine;
  mine.ring_bytes = c->block_.ring_bytes();
  mine.max_message_bytes = options.max_message_bytes;
  mine.block = c->block_.region();
  mine.block_segment_id = block_mr->mr->rkey;
  mine.block_segment_offset = reinterpret_cast<uintptr_t>(c->block_.ring());
  wire::Setup theirs;
  RAMP_RETURN_IF_ERROR(ExchangeSetup(&c->channel_, mine, nullptr, 0, 0, params, &theirs, nullptr));
  RAMP_RETURN_IF_ERROR(c->SetUpRings(theirs));
  RAMP_RETURN_IF_ERROR(c->WatchFd(c->comp_->fd, EPOLLIN));
  RAMP_RETURN_IF_ERROR(c->WatchFd(c->cm_channel_->fd, EPOLLIN));
  c->last_cm_check_ms_ = NowMs();
  *out = std::move(c);
  return Status::OK();
}

Status VerbsConnection::CreateQueuePair() {
  pd_ = ibv_alloc_pd(id_->verbs);
  if (pd_ == nullptr) return Status::FromErrno("ibv_alloc_pd", errno);
  comp_ = ibv_create_comp_channel(id_->verbs);
  if (comp_ == nullptr) return Status::FromErrno("ibv_create_comp_channel", errno);
  RAMP_RETURN_IF_ERROR(SetNonBlocking(comp_->fd));
  cq_ =
      ibv_create_cq(id_->verbs, kSendQueueDepth + static_cast<int>(kRecvSlots), nullptr, comp_, 0);
  if (cq_ == nullptr) return Status::FromErrno("ibv_create_cq", errno);

  ibv_qp_init_attr attr{};
  attr.send_cq = cq_;
  attr.recv_cq = cq_;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;  // selective signalling
  attr.cap.max_send_wr = kSendQueueDepth;
  attr.cap.max_recv_wr = kRecvSlots;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = 64;
  if (rdma_create_qp(id_, pd_, &attr) != 0) return Status::FromErrno("rdma_create_qp", errno);
  qp_created_ = true;
  max_inline_ = attr.cap.max_inline_data;
  sq_depth_ = static_cast<int>(attr.cap.max_send_wr);

  const size_t area = (kRecvSlots + kSendSlots) * kSlotBytes;
  RAMP_RETURN_IF_ERROR(memory_->Allocate(area, kAccessReadWrite, &control_area_));
  RAMP_RETURN_IF_ERROR(LocalKey(control_area_, area, &control_lkey_));
  send_slot_busy_.assign(kSendSlots, false);
  send_slot_seq_.assign(kSendSlots, 0);
  // Receives must be posted before the peer can send: before connect/accept.
  for (uint32_t i = 0; i < kRecvSlots; i++) RAMP_RETURN_IF_ERROR(PostRecv(i));
  return Status::OK();
}

Status VerbsConnection::Connect(bool server, const Deadline& deadline) {
  ibv_device_attr dev{};
  int depth = 16;
  if (ibv_query_device(id_->verbs, &dev) == 0) {
    depth = std::min({depth, dev.max_qp_rd_atom, dev.max_qp_init_rd_atom});
  }
  rdma_conn_param param{};
  param.responder_resources = static_cast<uint8_t>(depth);
  param.initiator_depth = static_cast<uint8_t>(depth);
  param.retry_count = 7;
  param.rnr_retry_count = 7;  // infinite: a receiver briefly out of receives is not an error
  if ((server ? rdma_accept(id_, &param) : rdma_connect(id_, &param)) != 0) {
    return Status::FromErrno(server ? "rdma_accept" : "rdma_connect", errno);
  }
  return WaitCmEvent(cm_channel_, RDMA_CM_EVENT_ESTABLISHED, deadline, options_.wait_hook,
                     "establishing the connection with " + peer_);
}

Status VerbsConnection::SetUpRings(const wire::Setup& theirs) {
  if (theirs.block_segment_id > UINT32_MAX) {
    return Status::Corruption("peer " + peer_ + " sent an rkey wider than 32 bits");
  }
  peer_block_addr_ = theirs.block_segment_offset;
  peer_block_rkey_ = static_cast<uint32_t>(theirs.block_segment_id);
  AttachPeer(theirs.ring_bytes, theirs.max_message_bytes);
  // The staging mirror of the peer's ring, then the lead byte source and a credit slot.
  RAMP_RETURN_IF_ERROR(memory_->Allocate(theirs.ring_bytes + 64, kAccessReadWrite, &staging_));
  RAMP_RETURN_IF_ERROR(LocalKey(staging_, theirs.ring_bytes + 64, &staging_lkey_));
  staging_[theirs.ring_bytes] = ring::kIndicator;
  return Status::OK();
}

// ---- memory registration --------------------------------------------------------------------

Status VerbsConnection::RegisterSegment(uint64_t segment_id, Mr** out) {
  auto it = mrs_.find(segment_id);
  if (it != mrs_.end()) {
    *out = &it->second;
    return Status::OK();
  }
  Segment seg;
  Mr m;
  RAMP_RETURN_IF_ERROR(memory_->GetSegment(segment_id, &seg, &m.pin));
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (seg.max_access & kAccessRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (seg.max_access & kAccessWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  m.mr = ibv_reg_mr(pd_, seg.base, seg.length, flags);
  if (m.mr == nullptr) {
    return Status::FromErrno("ibv_reg_mr of " + std::to_string(seg.length) + " bytes", errno);
  }
  m.base = seg.base;
  auto [pos, inserted] = mrs_.emplace(segment_id, std::move(m));
  *out = &pos->second;
  return Status::OK();
}

Status VerbsConnection::LocalKey(const void* p, size_t len, uint32_t* lkey) {
  Segment seg;
  std::shared_ptr<const void> pin;
  Status s = memory_->FindSegment(p, len, &seg, &pin);
  if (!s.ok()) {
    return Status::InvalidArgument("verbs: local buffers must lie inside a Memory allocation");
  }
  Mr* m = nullptr;
  RAMP_RETURN_IF_ERROR(RegisterSegment(seg.id, &m));
  *lkey = m->mr->lkey;
  return Status::OK();
}

// ---- control messages -----------------------------------------------------------------------

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

Status VerbsConnection::SendControl(wire::Type type, const std::vector<uint8_t>& payload,
                                    const Deadline& deadline, const WaitHook& hook) {
  if (payload.size() + wire::kHeaderBytes > kSlotBytes) {
    return Status::TooLarge("verbs control message of " + std::to_string(payload.size()) +
                            " bytes exceeds " + std::to_string(kSlotBytes - wire::kHeaderBytes));
  }
  for (;;) {
    if (closed()) return Status::Unavailable("connection to " + peer_ + " is closed");
    auto free_slot = std::find(send_slot_busy_.begin(), send_slot_busy_.end(), false);
    if (free_slot != send_slot_busy_.end() && SqHasRoom(1)) {
      const uint32_t slot = static_cast<uint32_t>(free_slot - send_slot_busy_.begin());
      uint8_t* buf = control_area_ + (kRecvSlots + slot) * kSlotBytes;
      wire::EncodeHeader(static_cast<uint8_t>(type), static_cast<uint32_t>(payload.size()), buf);
      if (!payload.empty()) std::memcpy(buf + wire::kHeaderBytes, payload.data(), payload.size());
      ibv_sge sge{};
      sge.addr = reinterpret_cast<uintptr_t>(buf);
      sge.length = static_cast<uint32_t>(wire::kHeaderBytes + payload.size());
      sge.lkey = control_lkey_;
      ibv_send_wr wr{};
      wr.wr_id = WrId(kKindSend, slot);
      wr.opcode = IBV_WR_SEND;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      uint64_t seq = 0;
      RAMP_RETURN_IF_ERROR(PostSendChain(&wr, &seq));
      send_slot_busy_[slot] = true;
      send_slot_seq_[slot] = seq;
      return Status::OK();
    }
    if (PollCq() == 0) RAMP_RETURN_IF_ERROR(WaitForEvents(deadline, hook, "a send buffer"));
  }
}

Status VerbsConnection::ReceiveControl(ControlMessage* out, const Deadline& deadline,
                                       const WaitHook& hook, const std::string& what) {
  for (;;) {
    if (!inbox_.empty()) {
      *out = std::move(inbox_.front());
      inbox_.pop_front();
      return Status::OK();
    }
    if (closed()) return close_status();
    if (PollCq() == 0) RAMP_RETURN_IF_ERROR(WaitForEvents(deadline, hook, what + " from " + peer_));
  }
}

Status VerbsConnection::Channel::Send(wire::Type type, const std::vector<uint8_t>& payload,
                                      const Deadline& deadline, const WaitHook& hook,
                                      const int* /*fds*/, int nfds) {
  if (nfds != 0) return Status::Internal("verbs cannot pass file descriptors");
  return c_->SendControl(type, payload, deadline, hook);
}

Status VerbsConnection::Channel::Receive(ControlMessage* out, const Deadline& deadline,
                                         const WaitHook& hook, const std::string& what) {
  return c_->ReceiveControl(out, deadline, hook, what);
}

Status VerbsConnection::Channel::TakeFds(size_t n, std::vector<UniqueFd>* out) {
  out->clear();
  if (n != 0) return Status::Corruption("verbs peers send no file descriptors");
  return Status::OK();
}

void VerbsConnection::HandleControl(const ControlMessage& m) {
  Status s;
  switch (static_cast<wire::Type>(m.type)) {
    case wire::Type::kVerbsExpose: {
      wire::VerbsExpose e;
      s = wire::DecodeVerbsExpose(m.payload.data(), m.payload.size(), &e);
      if (!s.ok()) break;
      ImportedRegion r;
      r.handle = e.region;
      uint64_t at = 0;
      for (const wire::RemotePiece& p : e.pieces) {
        r.pieces.push_back(ImportedPiece{p.addr, p.rkey, p.length, at});
        at += p.length;
      }
      imports_[e.region.id] = std::move(r);
      return;
    }
    case wire::Type::kError: {
      Status::Code code;
      std::string reason;
      s = wire::DecodeReason(m.payload.data(), m.payload.size(), &code, &reason);
      if (s.ok()) s = Status(code, "peer closed the connection: " + reason);
      break;
    }
    default:
      s = Status::Corruption("unexpected control message type " + std::to_string(m.type));
  }
  CloseWith(s.Annotate("control message from " + peer_));
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

void VerbsConnection::OnClose() {
  // The queue pair is going to error state: nothing will complete normally any more.
  for (auto& [id, op] : ops_) {
    CompleteLocal(op.wr_id, std::move(op.cb),
                  Status::Unavailable("connection to " + peer_ + " closed before the " +
                                      (op.write ? "write" : "read") + " completed"));
  }
  ops_.clear();
  if (id_ != nullptr && qp_created_) rdma_disconnect(id_);
}

// ---- one-sided operations -------------------------------------------------------------------

Status VerbsConnection::CheckImported(const RemoteRegion& handle, uint64_t offset, uint64_t len,
                                      uint32_t access, const ImportedRegion** out) {
  auto it = imports_.find(handle.id);
  if (it == imports_.end()) {
    return Status::NotFound("region " + std::to_string(handle.id) + " not exposed");
  }
  const ImportedRegion& r = it->second;
  if (r.handle.key != handle.key) {
    return Status::PermissionDenied("region " + std::to_string(handle.id) + ": wrong key");
  }
  if ((access & ~r.handle.access) != 0) {
    return Status::PermissionDenied("region " + std::to_string(handle.id) + " does not grant " +
                                    ((access & kAccessWrite) ? "write" : "read") + " access");
  }
  if (offset > r.handle.length || len > r.handle.length - offset) {
    return Status::InvalidArgument("region " + std::to_string(handle.id) + ": bytes [" +
                                   std::to_string(offset) + ", " + std::to_string(offset) + "+" +
                                   std::to_string(len) + ") outside its " +
                                   std::to_string(r.handle.length) + " bytes");
  }
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

Status VerbsConnection::Expose(const RemoteRegion& local_region) {
  RemoteRegion handle;
  std::vector<SegmentPiece> pieces;
  RAMP_RETURN_IF_ERROR(DescribeOwnRegion(local_region, &handle, &pieces));
  wire::VerbsExpose e;
  e.region = handle;
  for (const SegmentPiece& p : pieces) {
    Mr* m = nullptr;
    RAMP_RETURN_IF_ERROR(RegisterSegment(p.segment_id, &m));
    e.pieces.push_back(
        wire::RemotePiece{reinterpret_cast<uintptr_t>(m->base) + p.offset, m->mr->rkey, p.length});
  }
  std::vector<uint8_t> payload;
  wire::EncodeVerbsExpose(e, &payload);
  return SendControl(wire::Type::kVerbsExpose, payload,
                     Deadline::After(options_.handshake_timeout_ms), options_.wait_hook);
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
