// The shm provider's set-up and control path: handshake and SETUP over the unix socket,
// attaching the peer's ring block, sending our segments and EXPOSE, and reading the peer's.
// The data path is in shm_datapath.cpp.
#include "shm/shm_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/handshake.h"
#include "ramp/log.h"

namespace ramp::transport::detail {
namespace {

// How often a busy owner looks at the control socket without being told to (peer death
// shows only there).
constexpr int64_t kControlCheckIntervalMs = 10;

bool IsEventFd(int fd) {
  char path[64];
  char target[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return strcmp(target, "anon_inode:[eventfd]") == 0;
}

}  // namespace

ShmConnection::ShmConnection(const TransportOptions& options, std::shared_ptr<Memory> memory,
                             UniqueFd sock, std::string peer)
    : RingConnection(options, std::move(memory)),
      sock_(std::move(sock)),
      peer_(std::move(peer)),
      channel_(sock_.get(), peer_) {}

ShmConnection::~ShmConnection() {
  Close();
}

Status ShmConnection::Establish(UniqueFd sock, const std::string& peer, bool server,
                                const TransportOptions& options, std::shared_ptr<Memory> memory,
                                std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<ShmConnection> c(
      new ShmConnection(options, std::move(memory), std::move(sock), peer));
  HandshakeParams params{Provider::kShm, options.token,
                         Deadline::After(options.handshake_timeout_ms), options.wait_hook};
  RAMP_RETURN_IF_ERROR(server ? ServerHandshake(&c->channel_, params)
                              : ClientHandshake(&c->channel_, params));
  RAMP_RETURN_IF_ERROR(c->SetUp(params));
  *out = std::move(c);
  return Status::OK();
}

Status ShmConnection::SetUpAccepted(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                                    const TransportOptions& options, std::shared_ptr<Memory> memory,
                                    std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<ShmConnection> c(
      new ShmConnection(options, std::move(memory), std::move(sock), peer));
  // Same socket: what the listener buffered (the peer's SETUP, its descriptors) comes along.
  c->channel_ = std::move(*channel);
  HandshakeParams params{Provider::kShm, options.token,
                         Deadline::After(options.handshake_timeout_ms), options.wait_hook};
  RAMP_RETURN_IF_ERROR(c->SetUp(params));
  *out = std::move(c);
  return Status::OK();
}

Status ShmConnection::SetUp(const HandshakeParams& params) {
  // Authenticated: only now is memory allocated and its handle revealed.
  RAMP_RETURN_IF_ERROR(InitLocal());
  wire::Setup mine;
  mine.ring_bytes = block_.ring_bytes();
  mine.max_message_bytes = options_.max_message_bytes;
  mine.block = block_.region();
  mine.block_segment_id = block_.segment_id();
  mine.block_segment_offset = 0;
  Segment seg;
  std::shared_ptr<const void> pin;
  RAMP_RETURN_IF_ERROR(memory_->GetSegment(block_.segment_id(), &seg, &pin));
  const int fds[2] = {seg.fd, doorbell_.get()};
  wire::Setup theirs;
  std::vector<UniqueFd> their_fds;
  RAMP_RETURN_IF_ERROR(ExchangeSetup(&channel_, mine, fds, 2, 2, params, &theirs, &their_fds));
  return AttachShm(theirs, std::move(their_fds));
}

Status ShmConnection::AttachShm(const wire::Setup& theirs, std::vector<UniqueFd> fds) {
  if (!IsEventFd(fds[1].get())) {
    return Status::Corruption("peer " + peer_ + " sent a doorbell that is not an eventfd");
  }
  if (theirs.block_segment_offset % 64 != 0 || theirs.block_segment_offset > (1ull << 40)) {
    return Status::Corruption("peer " + peer_ + ": misaligned ring block");
  }
  wire::SegmentInfo info;
  info.segment_id = theirs.block_segment_id;
  info.length = theirs.block_segment_offset + theirs.block.length;
  info.writable = true;
  if (info.segment_id == 0) return Status::Corruption("peer " + peer_ + ": ring segment 0");
  RAMP_RETURN_IF_ERROR(imports_.AddSegment(info, std::move(fds[0])).Annotate("peer " + peer_));
  uint8_t* block = nullptr;
  RAMP_RETURN_IF_ERROR(imports_.MapRange(info.segment_id, theirs.block_segment_offset,
                                         theirs.block.length, true, &block));
  peer_ring_ = block;
  peer_control_ =
      reinterpret_cast<ring::ControlBlock*>(block + BlockLayout::ControlOffset(theirs.ring_bytes));
  peer_credit_word_ =
      reinterpret_cast<uint64_t*>(block + BlockLayout::CreditOffset(theirs.ring_bytes));
  peer_doorbell_ = std::move(fds[1]);
  AttachPeer(theirs.ring_bytes, theirs.max_message_bytes);
  // The control socket wakes the owner for EXPOSE messages and for the peer's death.
  RAMP_RETURN_IF_ERROR(WatchFd(sock_.get(), EPOLLIN | EPOLLRDHUP));
  last_control_check_ms_ = NowMs();
  return Status::OK();
}

// ---- exposing regions -----------------------------------------------------------------------

Status ShmConnection::Expose(const RemoteRegion& local_region) {
  RemoteRegion handle;
  std::vector<SegmentPiece> pieces;
  RAMP_RETURN_IF_ERROR(DescribeOwnRegion(local_region, &handle, &pieces));
  if (pieces.size() > wire::kMaxExposePieces) {
    return Status::TooLarge("region " + std::to_string(handle.id) + " has " +
                            std::to_string(pieces.size()) + " pieces; shm exposes at most " +
                            std::to_string(wire::kMaxExposePieces));
  }
  const bool writable = (handle.access & kAccessWrite) != 0;
  const Deadline deadline = Deadline::After(options_.handshake_timeout_ms);

  // Segments the peer has not got yet, in this mode: fds first, then the description.
  std::vector<wire::SegmentInfo> infos;
  std::vector<UniqueFd> reopened;  // read-only descriptors we opened (closed after sending)
  std::vector<int> fds;
  std::vector<std::shared_ptr<const void>> pins;  // keep the fds open while sending
  std::set<uint64_t> batch;
  auto flush = [&]() -> Status {
    if (infos.empty()) return Status::OK();
    std::vector<uint8_t> payload;
    wire::EncodeSegments(infos, &payload);
    RAMP_RETURN_IF_ERROR(channel_.Send(wire::Type::kSegments, payload, deadline, options_.wait_hook,
                                       fds.data(), static_cast<int>(fds.size())));
    for (const auto& i : infos) sent_segments_.insert({i.segment_id, i.writable});
    infos.clear();
    fds.clear();
    reopened.clear();
    pins.clear();
    return Status::OK();
  };
  for (const SegmentPiece& p : pieces) {
    if (sent_segments_.count({p.segment_id, writable}) || batch.count(p.segment_id)) continue;
    batch.insert(p.segment_id);
    Segment seg;
    std::shared_ptr<const void> pin;
    RAMP_RETURN_IF_ERROR(memory_->GetSegment(p.segment_id, &seg, &pin));
    int fd = seg.fd;
    if (!writable) {
      // A read-only region travels as a read-only descriptor: the peer cannot map it
      // writable, whatever it tries.
      char path[64];
      snprintf(path, sizeof(path), "/proc/self/fd/%d", seg.fd);
      int ro = open(path, O_RDONLY | O_CLOEXEC);
      if (ro < 0) return Status::FromErrno("reopening segment read-only", errno);
      reopened.emplace_back(ro);
      fd = ro;
    }
    infos.push_back(wire::SegmentInfo{seg.id, seg.length, writable});
    fds.push_back(fd);
    pins.push_back(std::move(pin));
    if (infos.size() == wire::kMaxSegmentsPerMessage) RAMP_RETURN_IF_ERROR(flush());
  }
  RAMP_RETURN_IF_ERROR(flush());

  wire::Expose e;
  e.region = handle;
  e.pieces = std::move(pieces);
  std::vector<uint8_t> payload;
  wire::EncodeExpose(e, &payload);
  Status s = channel_.Send(wire::Type::kExpose, payload, deadline, options_.wait_hook);
  if (!s.ok()) {
    CloseWith(s.Annotate("sending EXPOSE"));
    return s;
  }
  FlagControlPending();
  return Status::OK();
}

// ---- control path ---------------------------------------------------------------------------

void ShmConnection::FlagControlPending() {
  peer_control_->control_pending.store(1, std::memory_order_release);
  RingPeerIfArmed();
}

void ShmConnection::DrainControl() {
  if (closed()) return;
  block_.control()->control_pending.store(0, std::memory_order_relaxed);
  last_control_check_ms_ = NowMs();
  for (;;) {
    ControlMessage m;
    bool got = false;
    Status s = channel_.TryReceive(&m, &got);
    if (!s.ok()) {
      CloseWith(s);
      return;
    }
    if (!got) return;
    s = HandleControl(m);
    if (!s.ok()) {
      CloseWith(s.Annotate("control message from " + peer_));
      return;
    }
  }
}

Status ShmConnection::HandleControl(const ControlMessage& m) {
  switch (static_cast<wire::Type>(m.type)) {
    case wire::Type::kSegments: {
      std::vector<wire::SegmentInfo> infos;
      RAMP_RETURN_IF_ERROR(wire::DecodeSegments(m.payload.data(), m.payload.size(), &infos));
      std::vector<UniqueFd> fds;
      RAMP_RETURN_IF_ERROR(channel_.TakeFds(infos.size(), &fds));
      for (size_t i = 0; i < infos.size(); i++) {
        RAMP_RETURN_IF_ERROR(imports_.AddSegment(infos[i], std::move(fds[i])));
      }
      return Status::OK();
    }
    case wire::Type::kExpose: {
      wire::Expose e;
      RAMP_RETURN_IF_ERROR(wire::DecodeExpose(m.payload.data(), m.payload.size(), &e));
      return imports_.AddRegion(e);
    }
    case wire::Type::kError: {
      Status::Code code;
      std::string reason;
      RAMP_RETURN_IF_ERROR(wire::DecodeReason(m.payload.data(), m.payload.size(), &code, &reason));
      return Status(code, "peer closed the connection: " + reason);
    }
    default:
      return Status::Corruption("unexpected control message type " + std::to_string(m.type));
  }
}

void ShmConnection::Progress() {
  if (closed()) return;
  bool check = block_.control()->control_pending.load(std::memory_order_acquire) != 0;
  if (!check && (++progress_calls_ & 63) == 0) {
    check = NowMs() - last_control_check_ms_ >= kControlCheckIntervalMs;
  }
  if (check) DrainControl();
}

bool ShmConnection::ArmProvider() {
  // About to sleep: one look at the socket costs nothing next to sleeping, and catches a
  // peer that died (its socket is at EOF, which would keep waking us).
  DrainControl();
  return !closed() && block_.control()->control_pending.load(std::memory_order_acquire) == 0;
}

void ShmConnection::OnClose() {
  if (sock_.valid()) shutdown(sock_.get(), SHUT_RDWR);
}

}  // namespace ramp::transport::detail
