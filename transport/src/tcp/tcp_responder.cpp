// The tcp provider's target side: the peer's one-sided operations are requests on the stream,
// executed here against our registered memory. Every access goes through Memory::Resolve,
// which applies the region check of core/region.h (a forged key, handle, right or offset gets
// an error reply, never memory). Runs on the responder thread (ResponderMain) or inline
// inside the owner's Poll/Receive/Wait (ServeInput from Progress).
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/region.h"
#include "ramp/log.h"
#include "tcp/tcp_connection.h"

namespace ramp::transport::detail {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

// Copies data into the spans, skipping byte `skip` (the lead indicator, applied last).
// Returns the address where byte `skip` lands.
uint8_t* CopyIntoSpans(const std::vector<Span>& spans, const uint8_t* data, size_t skip) {
  uint8_t* lead = nullptr;
  size_t at = 0;
  for (const Span& s : spans) {
    if (skip >= at && skip < at + s.length) {
      const size_t k = skip - at;
      std::memcpy(s.data, data + at, k);
      std::memcpy(s.data + k + 1, data + at + k + 1, s.length - k - 1);
      lead = s.data + k;
    } else {
      std::memcpy(s.data, data + at, s.length);
    }
    at += s.length;
  }
  return lead;
}

}  // namespace

void TcpConnection::ResponderMain() {
  bool woke = false;
  ProcessBuffered(&woke);
  FlushTx();
  if (woke) NotifyOwner();
  while (!stop_.load(std::memory_order_acquire) && !closed()) {
    pollfd fds[2] = {};
    fds[0].fd = sock_.get();
    fds[0].events =
        static_cast<short>(POLLIN | (tx_pending_.load(std::memory_order_acquire) ? POLLOUT : 0));
    fds[1].fd = wake_.get();
    fds[1].events = POLLIN;
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      CloseWith(Status::FromErrno("responder poll", errno));
      break;
    }
    if (fds[1].revents != 0) DrainEventFd(wake_.get());
    if (stop_.load(std::memory_order_acquire)) break;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) ServeInput();
    FlushTx();
  }
}

// ---- serving the peer -----------------------------------------------------------------------

void TcpConnection::ServeInput() {
  bool wake = false;
  // Bounded so that a flooding peer cannot keep an inline owner inside Poll forever.
  for (int round = 0; round < 16 && !closed(); round++) {
    if (rx_head_ == rx_tail_) rx_head_ = rx_tail_ = 0;
    if (rx_.size() - rx_tail_ < kReadChunk) {
      if (rx_head_ > 0) {
        std::memmove(rx_.data(), rx_.data() + rx_head_, rx_tail_ - rx_head_);
        rx_tail_ -= rx_head_;
        rx_head_ = 0;
      }
      if (rx_.size() - rx_tail_ < kReadChunk) rx_.resize(rx_tail_ + kReadChunk);
    }
    const size_t room = rx_.size() - rx_tail_;
    ssize_t n = recv(sock_.get(), rx_.data() + rx_tail_, room, MSG_DONTWAIT);
    if (n == 0) {
      CloseWith(Status::Unavailable("peer " + peer_ + " closed the connection"));
      break;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CloseWith(Status::Unavailable(Status::FromErrno("receiving from " + peer_, errno).message()));
      break;
    }
    rx_tail_ += static_cast<size_t>(n);
    if (!ProcessBuffered(&wake)) break;
    if (static_cast<size_t>(n) < room) break;  // drained the socket
  }
  // Responses to the peer's requests go at once (whatever the owner queued goes with them).
  // The responder thread flushes after every round anyway.
  if (responses_pending_ || responder_mode_) FlushTx();
  responses_pending_ = false;
  if (wake && responder_mode_) NotifyOwner();
}

bool TcpConnection::ProcessBuffered(bool* wake) {
  while (rx_tail_ - rx_head_ >= wire::kHeaderBytes) {
    uint8_t type = 0;
    uint32_t len = 0;
    Status s = wire::DecodeHeader(rx_.data() + rx_head_, max_payload_, &type, &len);
    if (!s.ok()) {
      CloseWith(s.Annotate("malformed data from " + peer_));
      return false;
    }
    const size_t need = wire::kHeaderBytes + len;
    if (rx_tail_ - rx_head_ < need) {
      // Make room for the whole message (bounded by max_payload_).
      if (rx_.size() - rx_head_ < need) {
        std::memmove(rx_.data(), rx_.data() + rx_head_, rx_tail_ - rx_head_);
        rx_tail_ -= rx_head_;
        rx_head_ = 0;
        if (rx_.size() < need) rx_.resize(need);
      }
      return true;
    }
    s = Handle(type, rx_.data() + rx_head_ + wire::kHeaderBytes, len, wake);
    rx_head_ += need;
    if (!s.ok()) {
      CloseWith(s.Annotate("from peer " + peer_));
      return false;
    }
  }
  return true;
}

Status TcpConnection::Handle(uint8_t type, const uint8_t* p, size_t n, bool* wake) {
  wire::Op op;
  RAMP_RETURN_IF_ERROR(wire::DecodeOp(type, p, n, &op));
  switch (op.type) {
    case wire::Type::kRead:
      return ServeRead(op);
    case wire::Type::kWrite:
      return ServeWrite(op);
    case wire::Type::kFrame:
      *wake = true;
      return ApplyFrame(op);
    case wire::Type::kWriteU64:
      *wake = true;
      return ApplyWriteU64(op);
    case wire::Type::kReadResponse:
    case wire::Type::kWriteResponse:
      *wake = true;
      return Complete(op);
    default:
      return Status::Corruption("unexpected message type " + std::to_string(type));
  }
}

Status TcpConnection::ServeRead(const wire::Op& op) {
  std::shared_ptr<const void> pin;
  Status s;
  if (op.length > options_.max_message_bytes) {
    s = Status::TooLarge("read of " + std::to_string(op.length) +
                         " bytes exceeds max_message_bytes");
  } else {
    s = memory_->Resolve(op.target, op.offset, op.length, kAccessRead, &spans_, &pin);
  }
  std::lock_guard<std::mutex> lock(tx_mu_);
  wire::AppendResponseHeader(wire::Type::kReadResponse, op.request_id, s, op.length, &tx_);
  if (s.ok()) {
    for (const Span& span : spans_) tx_.insert(tx_.end(), span.data, span.data + span.length);
  }
  tx_pending_.store(true, std::memory_order_release);
  responses_pending_ = true;
  return Status::OK();
}

Status TcpConnection::ServeWrite(const wire::Op& op) {
  std::shared_ptr<const void> pin;
  Status s = memory_->Resolve(op.target, op.offset, op.data_length, kAccessWrite, &spans_, &pin);
  if (s.ok()) {
    const uint8_t* d = op.data;
    for (const Span& span : spans_) {
      std::memcpy(span.data, d, span.length);
      d += span.length;
    }
    // Later frames and flags of this stream must not be seen before these bytes.
    std::atomic_thread_fence(std::memory_order_release);
  }
  if (op.request_id == 0) {
    return s.ok() ? s : Status::Corruption("unacknowledged write refused: " + s.message());
  }
  std::lock_guard<std::mutex> lock(tx_mu_);
  wire::AppendResponseHeader(wire::Type::kWriteResponse, op.request_id, s, 0, &tx_);
  tx_pending_.store(true, std::memory_order_release);
  responses_pending_ = true;
  return Status::OK();
}

Status TcpConnection::ResolveRingWrite(const wire::Op& op, uint64_t len,
                                       std::shared_ptr<const void>* pin) {
  const RemoteRegion& own = block_.region();
  if (op.target.id == own.id) {
    // Our block: registered at set-up, deregistered only when this connection is destroyed
    // (after the responder stopped), one contiguous allocation.
    RAMP_RETURN_IF_ERROR(CheckRegionAccess(own, op.target, op.offset, len, kAccessWrite));
    spans_.clear();
    if (len > 0) spans_.push_back(Span{block_.ring() + op.offset, len});
    return Status::OK();
  }
  return memory_->Resolve(op.target, op.offset, len, kAccessWrite, &spans_, pin);
}

Status TcpConnection::ApplyFrame(const wire::Op& op) {
  std::shared_ptr<const void> pin;
  Status s = ResolveRingWrite(op, op.data_length, &pin);
  if (!s.ok()) return Status::Corruption("ring frame refused: " + s.message());
  uint8_t* lead = CopyIntoSpans(spans_, op.data, ring::kLeadOffset);
  // The lead indicator last, with release: the receiver that sees it sees the frame.
  std::atomic_ref<uint8_t>(*lead).store(op.data[ring::kLeadOffset], std::memory_order_release);
  return Status::OK();
}

Status TcpConnection::ApplyWriteU64(const wire::Op& op) {
  std::shared_ptr<const void> pin;
  Status s = ResolveRingWrite(op, 8, &pin);
  if (!s.ok()) return Status::Corruption("credit write refused: " + s.message());
  if (spans_.size() != 1 || reinterpret_cast<uintptr_t>(spans_[0].data) % 8 != 0) {
    return Status::Corruption("credit write to a misaligned or split word");
  }
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(spans_[0].data))
      .store(op.value, std::memory_order_release);
  return Status::OK();
}

Status TcpConnection::Complete(const wire::Op& op) {
  const bool is_write = op.type == wire::Type::kWriteResponse;
  PendingOp pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    if (pending_.empty() || pending_.front().request_id != op.request_id ||
        pending_.front().write != is_write) {
      return Status::Corruption("response to request " + std::to_string(op.request_id) +
                                " that is not the next one outstanding");
    }
    pending = std::move(pending_.front());
    pending_.pop_front();
  }
  Status result;
  if (op.code != Status::Code::kOk) {
    result = Status(op.code,
                    std::string(is_write ? "write to " : "read from ") + peer_ + ": " + op.reason);
  } else if (!is_write) {
    if (op.data_length != pending.len) {
      return Status::Corruption("read response of " + std::to_string(op.data_length) +
                                " bytes for a read of " + std::to_string(pending.len));
    }
    if (pending.len > 0) std::memcpy(pending.local, op.data, pending.len);
    Bump(counters_.bytes_read, pending.len);
  } else {
    Bump(counters_.bytes_written, pending.len);
  }
  if (responder_mode_) {
    CompleteRemote(pending.wr_id, std::move(pending.cb), std::move(result));
  } else {
    CompleteLocal(pending.wr_id, std::move(pending.cb), std::move(result));
  }
  return Status::OK();
}

}  // namespace ramp::transport::detail
