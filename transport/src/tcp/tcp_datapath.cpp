// The tcp provider's initiator data path: posting one-sided operations (batched into one
// send), ring frames and credits as messages the target applies, and the progress that
// flushes them (and, inline, serves the peer). The target side is tcp_responder.cpp; set-up
// and closing are tcp_connection.cpp.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "tcp/tcp_connection.h"

namespace ramp::transport::detail {
namespace {

// Posted operations are batched into one send() at the next Poll/Receive/Wait; past this
// much pending output they go at once.
constexpr size_t kFlushThreshold = 64 * 1024;

}  // namespace

// ---- posting --------------------------------------------------------------------------------

Status TcpConnection::PostOneSided(bool write, void* local, const RemoteRegion& remote,
                                   uint64_t offset, uint64_t len, uint64_t wr_id,
                                   CompletionCallback cb) {
  RAMP_RETURN_IF_ERROR(AdmitOperation(len, write));
  const uint64_t id = next_request_++;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    if (pending_failed_) {
      // Closed after admission: nothing will answer on this socket.
      CompleteRemote(wr_id, std::move(cb),
                     Status::Unavailable("connection to " + peer_ + " closed"));
      return Status::OK();
    }
    pending_.push_back(
        PendingOp{id, write, static_cast<uint8_t*>(local), len, wr_id, std::move(cb)});
  }
  size_t queued;
  {
    std::lock_guard<std::mutex> lock(tx_mu_);
    if (write) {
      wire::AppendWriteHeader(id, remote, offset, len, &tx_);
      tx_.insert(tx_.end(), static_cast<uint8_t*>(local), static_cast<uint8_t*>(local) + len);
    } else {
      wire::AppendRead(id, remote, offset, len, &tx_);
    }
    queued = tx_.size() - tx_head_;
  }
  tx_pending_.store(true, std::memory_order_release);
  if (queued >= kFlushThreshold) FlushTx();
  return Status::OK();
}

// ---- ring writes ----------------------------------------------------------------------------

Status TcpConnection::WriteFrame(uint64_t position, uint64_t size_field, const iovec* body,
                                 int iovcnt, size_t body_len) {
  const bool wrap = size_field == ring::kWrapMarker;
  const size_t bytes = wrap ? ring::kBodyOffset : ring::kBodyOffset + body_len + 1;
  {
    std::lock_guard<std::mutex> lock(tx_mu_);
    wire::AppendFrameHeader(peer_block_, position, bytes, &tx_);
    const size_t at = tx_.size();
    tx_.resize(at + bytes);
    uint8_t* f = tx_.data() + at;
    ring::EncodeSize(f, size_field);
    f[ring::kLeadOffset] = ring::kIndicator;
    if (!wrap) {
      uint8_t* d = f + ring::kBodyOffset;
      for (int i = 0; i < iovcnt; i++) {
        std::memcpy(d, body[i].iov_base, body[i].iov_len);
        d += body[i].iov_len;
      }
      *d = ring::kIndicator;
    }
    batch_full_ = tx_.size() - tx_head_ >= kFlushThreshold;
  }
  tx_pending_.store(true, std::memory_order_release);
  return Status::OK();
}

Status TcpConnection::WriteCredits(uint64_t consumed) {
  {
    std::lock_guard<std::mutex> lock(tx_mu_);
    wire::AppendWriteU64(peer_block_, BlockLayout::CreditOffset(peer_ring_bytes_), consumed, &tx_);
  }
  tx_pending_.store(true, std::memory_order_release);
  // A sender may be stalled on these: they go now, not with the next batch (once per
  // quarter ring, so this costs little).
  FlushTx();
  return Status::OK();
}

// ---- progress -------------------------------------------------------------------------------

void TcpConnection::FlushTx() {
  if (!tx_pending_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(tx_mu_);
  while (tx_head_ < tx_.size()) {
    ssize_t n = send(sock_.get(), tx_.data() + tx_head_, tx_.size() - tx_head_,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      tx_head_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The responder waits for room (POLLOUT) once woken; inline, Arm watches EPOLLOUT.
      if (responder_mode_) RingEventFd(wake_.get());
      return;
    }
    const int err = n < 0 ? errno : EPIPE;
    lock.unlock();
    CloseWith(Status::Unavailable(Status::FromErrno("sending to " + peer_, err).message()));
    return;
  }
  tx_.clear();
  tx_head_ = 0;
  if (tx_.capacity() > (64u << 20)) tx_.shrink_to_fit();
  tx_pending_.store(false, std::memory_order_release);
}

size_t TcpConnection::UnsentBytes() const {
  if (!tx_pending_.load(std::memory_order_acquire)) return 0;
  std::lock_guard<std::mutex> lock(tx_mu_);
  return tx_.size() - tx_head_;
}

void TcpConnection::Progress() {
  if (closed()) return;
  if (!responder_mode_) ServeInput();
  FlushTx();
}

void TcpConnection::ProgressAfterSend() {
  // The frame waits for more unless the batch is full: the owner's next Poll, Arm, Wait or
  // empty Receive sends it (a Send is never left behind by an owner that keeps to the
  // contract: it must drive the connection to get anything back).
  if (batch_full_) {
    batch_full_ = false;
    FlushTx();
  }
}

void TcpConnection::ProgressInput() {
  if (closed()) return;
  if (!responder_mode_) ServeInput();
}

void TcpConnection::FlushOutput() {
  if (!closed()) FlushTx();
}

bool TcpConnection::ArmProvider() {
  if (responder_mode_) return true;
  // Inline: the socket itself is in the epoll set. Watch for room to send only while
  // output waits (a writable socket would otherwise wake us at once).
  const bool want_out = tx_pending_.load(std::memory_order_acquire);
  if (want_out != watching_out_) {
    (void)ModifyWatch(sock_.get(), EPOLLIN | EPOLLRDHUP | (want_out ? uint32_t{EPOLLOUT} : 0u));
    watching_out_ = want_out;
  }
  return true;
}

}  // namespace ramp::transport::detail
