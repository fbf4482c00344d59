// The tcp provider's set-up (handshake, SETUP, starting the responder) and closing. The
// data path is in tcp_datapath.cpp (initiator) and tcp_responder.cpp (target).
#include "tcp/tcp_connection.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/control_channel.h"
#include "core/handshake.h"
#include "ramp/log.h"

namespace ramp::transport::detail {

TcpConnection::TcpConnection(const TransportOptions& options, std::shared_ptr<Memory> memory,
                             UniqueFd sock, std::string peer)
    : RingConnection(options, std::move(memory)),
      sock_(std::move(sock)),
      peer_(std::move(peer)),
      responder_mode_(options.responder_thread) {}

TcpConnection::~TcpConnection() {
  Close();
}

Status TcpConnection::Establish(UniqueFd sock, const std::string& peer, bool server,
                                const TransportOptions& options, std::shared_ptr<Memory> memory,
                                std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  ControlChannel channel(sock.get(), peer);
  HandshakeParams params{Provider::kTcp, options.token,
                         Deadline::After(options.handshake_timeout_ms), options.wait_hook};
  RAMP_RETURN_IF_ERROR(server ? ServerHandshake(&channel, params)
                              : ClientHandshake(&channel, params));
  return SetUp(std::move(sock), &channel, peer, params, options, std::move(memory), out);
}

Status TcpConnection::SetUpAccepted(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                                    const TransportOptions& options, std::shared_ptr<Memory> memory,
                                    std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  HandshakeParams params{Provider::kTcp, options.token,
                         Deadline::After(options.handshake_timeout_ms), options.wait_hook};
  return SetUp(std::move(sock), channel, peer, params, options, std::move(memory), out);
}

Status TcpConnection::SetUp(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                            const HandshakeParams& params, const TransportOptions& options,
                            std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out) {
  std::unique_ptr<TcpConnection> c(
      new TcpConnection(options, std::move(memory), std::move(sock), peer));
  RAMP_RETURN_IF_ERROR(c->InitLocal());
  wire::Setup mine;
  mine.ring_bytes = c->block_.ring_bytes();
  mine.max_message_bytes = options.max_message_bytes;
  mine.block = c->block_.region();
  wire::Setup theirs;
  RAMP_RETURN_IF_ERROR(ExchangeSetup(channel, mine, nullptr, 0, 0, params, &theirs, nullptr));
  c->peer_block_ = theirs.block;
  c->AttachPeer(theirs.ring_bytes, theirs.max_message_bytes);
  // Whatever we may be sent: a frame for our ring, a write or read response of our own
  // limit, a peer's write of up to its limit (which AttachPeer capped at ours).
  c->max_payload_ = std::max<size_t>(options.max_message_bytes, options.ring_bytes) + 64;
  // The peer may already have started the data path behind its SETUP.
  channel->TakeBuffered(&c->rx_);
  c->rx_tail_ = c->rx_.size();
  RAMP_RETURN_IF_ERROR(MakeEventFd(&c->wake_));
  if (c->responder_mode_) {
    c->responder_ = std::thread([conn = c.get()] { conn->ResponderMain(); });
  } else {
    RAMP_RETURN_IF_ERROR(c->WatchFd(c->sock_.get(), EPOLLIN | EPOLLRDHUP));
    bool woke = false;
    c->ProcessBuffered(&woke);
  }
  *out = std::move(c);
  return Status::OK();
}

Status TcpConnection::Expose(const RemoteRegion& local_region) {
  // Nothing to hand over: the target checks every access itself. Still say early when the
  // handle is not ours.
  RemoteRegion handle;
  std::vector<SegmentPiece> pieces;
  RAMP_RETURN_IF_ERROR(DescribeOwnRegion(local_region, &handle, &pieces));
  return Status::OK();
}

// ---- closing --------------------------------------------------------------------------------

void TcpConnection::FailPending() {
  std::deque<PendingOp> failed;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_failed_ = true;
    failed.swap(pending_);
  }
  for (PendingOp& p : failed) {
    CompleteRemote(p.wr_id, std::move(p.cb),
                   Status::Unavailable("connection to " + peer_ + " closed before the " +
                                       (p.write ? "write" : "read") + " completed"));
  }
}

void TcpConnection::OnClose() {
  FailPending();
  if (sock_.valid()) shutdown(sock_.get(), SHUT_RDWR);
  if (wake_.valid()) RingEventFd(wake_.get());
}

void TcpConnection::Close() {
  // What the owner sent last (held for a batch) still goes, as far as the socket takes it
  // without waiting.
  if (!closed()) FlushTx();
  RingConnection::Close();
  stop_.store(true, std::memory_order_release);
  if (responder_.joinable()) {
    if (wake_.valid()) RingEventFd(wake_.get());
    responder_.join();
  }
}

}  // namespace ramp::transport::detail
