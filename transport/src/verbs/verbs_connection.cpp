// The verbs provider's set-up and control path: rdmacm connection, queue pair, memory
// registration, typed control messages (handshake, SETUP, VERBS_EXPOSE) and closing. The
// data path is in verbs_datapath.cpp.
#include "verbs/verbs_connection.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/handshake.h"
#include "ramp/log.h"
#include "verbs/verbs_work_request.h"

namespace ramp::transport::detail {
using namespace verbs;  // NOLINT: the provider's own constants and work request ids

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

}  // namespace ramp::transport::detail
