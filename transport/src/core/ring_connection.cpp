#include "core/ring_connection.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "ramp/log.h"

namespace ramp::transport::detail {

// ---- ConnBlock ------------------------------------------------------------------------------

ConnBlock::~ConnBlock() {
  if (memory_ == nullptr) return;
  if (region_.valid()) (void)memory_->Deregister(region_.id);
  if (base_ != nullptr) (void)memory_->Free(base_);
}

Status ConnBlock::Create(std::shared_ptr<Memory> memory, size_t ring_bytes) {
  memory_ = std::move(memory);
  const size_t bytes = BlockLayout::Bytes(ring_bytes);
  RAMP_RETURN_IF_ERROR(memory_->Allocate(bytes, kAccessReadWrite, &base_));
  ring_bytes_ = ring_bytes;
  new (control()) ring::ControlBlock{};
  RAMP_RETURN_IF_ERROR(memory_->Register(base_, bytes, kAccessReadWrite, &region_));
  Segment seg;
  std::shared_ptr<const void> pin;
  RAMP_RETURN_IF_ERROR(memory_->FindSegment(base_, bytes, &seg, &pin));
  segment_id_ = seg.id;
  return Status::OK();
}

Status ValidateOptions(const TransportOptions& o) {
  if (o.token.empty()) {
    return Status::InvalidArgument("no cluster token configured (TransportOptions::token)");
  }
  if (o.ring_bytes % ring::kAlign != 0 || o.ring_bytes < 4096 || o.ring_bytes > (1u << 30)) {
    return Status::InvalidArgument("ring_bytes " + std::to_string(o.ring_bytes) +
                                   " must be a multiple of 16 between 4 KiB and 1 GiB");
  }
  if (o.max_message_bytes == 0 || o.max_message_bytes > (size_t{1} << 40)) {
    return Status::InvalidArgument("max_message_bytes " + std::to_string(o.max_message_bytes) +
                                   " must be between 1 byte and 1 TiB");
  }
  if (o.max_outstanding == 0) return Status::InvalidArgument("max_outstanding must be > 0");
  return Status::OK();
}

// ---- set-up ---------------------------------------------------------------------------------

RingConnection::RingConnection(const TransportOptions& options, std::shared_ptr<Memory> memory)
    : options_(options), memory_(std::move(memory)) {}

RingConnection::~RingConnection() = default;

Status RingConnection::InitLocal() {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Status::FromErrno("epoll_create1", errno);
  epoll_.reset(ep);
  RAMP_RETURN_IF_ERROR(MakeEventFd(&doorbell_));
  RAMP_RETURN_IF_ERROR(WatchFd(doorbell_.get(), EPOLLIN));
  RAMP_RETURN_IF_ERROR(block_.Create(memory_, options_.ring_bytes));
  receiver_ = ring::Receiver(block_.ring(), block_.ring_bytes());
  return Status::OK();
}

void RingConnection::AttachPeer(size_t peer_ring_bytes, uint64_t peer_max_message_bytes) {
  peer_ring_bytes_ = peer_ring_bytes;
  sender_ = ring::Sender(peer_ring_bytes);
  max_fragment_ = ring::MaxBody(peer_ring_bytes);
  send_limit_ =
      static_cast<size_t>(std::min<uint64_t>(options_.max_message_bytes, peer_max_message_bytes));
}

Status RingConnection::WatchFd(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Status::FromErrno("epoll_ctl add", errno);
  }
  return Status::OK();
}

Status RingConnection::ModifyWatch(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return Status::FromErrno("epoll_ctl mod", errno);
  }
  return Status::OK();
}

Status RingConnection::RunWaitHook() {
  return options_.wait_hook ? options_.wait_hook() : Status::OK();
}

// ---- close ----------------------------------------------------------------------------------

void RingConnection::CloseWith(const Status& why, bool log) {
  {
    std::lock_guard<std::mutex> lock(close_mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    close_status_ = why;
    closed_.store(true, std::memory_order_release);
  }
  if (log) {
    RAMP_INFO("connection to %s closed: %s", peer().c_str(), why.ToString().c_str());
  }
  OnClose();
  // Whoever sleeps on wait_fd must wake up and see the close.
  if (doorbell_.valid()) RingEventFd(doorbell_.get());
}

Status RingConnection::close_status() const {
  std::lock_guard<std::mutex> lock(close_mu_);
  return close_status_;
}

void RingConnection::Close() {
  CloseWith(Status::Unavailable("closed locally"), false);
}

// ---- one-sided operation plumbing -----------------------------------------------------------

Status RingConnection::AdmitOperation(uint64_t len, bool is_write) {
  if (closed()) {
    return Status::Unavailable("connection to " + peer() +
                               " is closed: " + close_status().ToString());
  }
  if (len > send_limit_) {
    return Status::TooLarge(std::string("one-sided ") + (is_write ? "write" : "read") + " of " +
                            std::to_string(len) + " bytes exceeds max_message_bytes (" +
                            std::to_string(send_limit_) + ")");
  }
  if (outstanding_.load(std::memory_order_relaxed) >= options_.max_outstanding) {
    return Status::Busy("too many outstanding operations (" +
                        std::to_string(options_.max_outstanding) + "); poll for completions");
  }
  outstanding_.store(outstanding_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (is_write) {
    Bump(counters_.writes_posted, 1);
  } else {
    Bump(counters_.reads_posted, 1);
  }
  return Status::OK();
}

void RingConnection::CompleteLocal(uint64_t wr_id, CompletionCallback cb, Status status) {
  local_done_.push_back(Pending{wr_id, std::move(cb), std::move(status)});
}

void RingConnection::CompleteRemote(uint64_t wr_id, CompletionCallback cb, Status status) {
  std::lock_guard<std::mutex> lock(remote_mu_);
  remote_done_.push_back(Pending{wr_id, std::move(cb), std::move(status)});
  remote_ready_.store(remote_done_.size(), std::memory_order_release);
}

void RingConnection::NotifyOwner() {
  // Pairs with the fence in Arm(): either the owner sees our work, or we see it armed.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::atomic<uint32_t>& armed = block_.control()->armed;
  if (armed.load(std::memory_order_relaxed) != 0 && armed.exchange(0) != 0) {
    RingEventFd(doorbell_.get());
    Bump(counters_.doorbells_rung, 1);
  }
}

bool RingConnection::CompletionsReady() const {
  return local_head_ < local_done_.size() || remote_ready_.load(std::memory_order_acquire) != 0;
}

void RingConnection::DrainDoorbell() {
  if (!doorbell_may_ring_) return;
  DrainEventFd(doorbell_.get());
  doorbell_may_ring_ = false;
}

int RingConnection::Poll(Completion* out, int max) {
  DrainDoorbell();
  Progress();
  if (!queue_.empty()) {
    FlushQueue();
    FlushOutput();  // frames the queue just wrote go now, not with the next batch
  }

  if (remote_ready_.load(std::memory_order_acquire) != 0) {
    std::lock_guard<std::mutex> lock(remote_mu_);
    for (Pending& p : remote_done_) local_done_.push_back(std::move(p));
    remote_done_.clear();
    remote_ready_.store(0, std::memory_order_relaxed);
  }
  // Callbacks may post more operations that complete at once (shm): deliver only what was
  // there when we started, so that a callback chain cannot keep us here forever. Entries are
  // addressed by index: a callback may append (and reallocate) while we iterate.
  if (delivering_) return 0;
  delivering_ = true;
  int n = 0;
  const size_t end = local_done_.size();
  while (local_head_ < end) {
    Pending& p = local_done_[local_head_];
    if (p.cb) {
      CompletionCallback cb = std::move(p.cb);
      Status status = std::move(p.status);
      local_head_++;
      outstanding_.store(outstanding_.load(std::memory_order_relaxed) - 1,
                         std::memory_order_relaxed);
      cb(status);
      continue;
    }
    if (n >= max) break;
    out[n].wr_id = p.wr_id;
    out[n].status = std::move(p.status);
    n++;
    local_head_++;
    outstanding_.store(outstanding_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  if (local_head_ == local_done_.size()) {
    local_done_.clear();  // keeps its capacity
    local_head_ = 0;
  } else if (local_head_ > 1024 && local_head_ * 2 > local_done_.size()) {
    local_done_.erase(local_done_.begin(),
                      local_done_.begin() + static_cast<ptrdiff_t>(local_head_));
    local_head_ = 0;
  }
  delivering_ = false;
  return n;
}

// ---- sending --------------------------------------------------------------------------------

void RingConnection::RefreshCredits() {
  const uint64_t credit =
      std::atomic_ref<uint64_t>(*block_.credit_word()).load(std::memory_order_acquire);
  sender_.UpdateCredits(credit);
}

Status RingConnection::WriteMessage(const iovec* iov, int iovcnt, size_t total, size_t* offset) {
  // A fragment is a byte range of the iovec list: find where *offset falls.
  do {
    const size_t fragment = std::min(max_fragment_, total - *offset);
    const bool more = *offset + fragment < total;
    ring::Sender::Placement p;
    Status s = sender_.Place(fragment, &p);
    if (s.Is(Status::Code::kBusy)) {
      RefreshCredits();
      s = sender_.Place(fragment, &p);
    }
    RAMP_RETURN_IF_ERROR(s);

    fragment_iov_.clear();
    size_t skip = *offset;
    size_t want = fragment;
    for (int i = 0; i < iovcnt && want > 0; i++) {
      size_t n = iov[i].iov_len;
      if (skip >= n) {
        skip -= n;
        continue;
      }
      size_t take = std::min(n - skip, want);
      fragment_iov_.push_back({static_cast<uint8_t*>(iov[i].iov_base) + skip, take});
      want -= take;
      skip = 0;
    }
    if (p.wrap) {
      RAMP_RETURN_IF_ERROR(WriteFrame(p.wrap_position, ring::kWrapMarker, nullptr, 0, 0));
    }
    const uint64_t size_field = fragment | (more ? ring::kMoreFragments : 0);
    RAMP_RETURN_IF_ERROR(WriteFrame(p.position, size_field, fragment_iov_.data(),
                                    static_cast<int>(fragment_iov_.size()), fragment));
    sender_.Commit(p);
    *offset += fragment;
  } while (*offset < total);
  return Status::OK();
}

Status RingConnection::Send(const void* data, size_t len) {
  iovec iov{const_cast<void*>(data), len};
  return SendV(&iov, 1);
}

Status RingConnection::SendV(const iovec* iov, int iovcnt) {
  if (closed()) {
    return Status::Unavailable("connection to " + peer() +
                               " is closed: " + close_status().ToString());
  }
  if (iovcnt < 0 || (iovcnt > 0 && iov == nullptr)) {
    return Status::InvalidArgument("SendV: bad iovec list");
  }
  size_t total = 0;
  for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
  if (total > send_limit_) {
    return Status::TooLarge("message of " + std::to_string(total) +
                            " bytes exceeds max_message_bytes (" + std::to_string(send_limit_) +
                            ")");
  }
  if (!queue_.empty()) FlushQueue();
  size_t offset = 0;
  if (queue_.empty()) {
    Status s = WriteMessage(iov, iovcnt, total, &offset);
    if (s.ok()) {
      Bump(counters_.messages_sent, 1);
      ProgressAfterSend();  // tcp holds the frame until a batch is full or the owner polls
      return s;
    }
    if (!s.Is(Status::Code::kBusy)) return s;
    // Fragments already written must be followed by the rest: it is queued whatever the
    // queue holds (the queue exceeds its bound by at most one message).
  } else if (queued_bytes() + total > options_.max_queued_bytes) {
    // queued_bytes() counts what a provider holds unsent as well (tcp's batch): the bound is on
    // everything the connection has accepted and not yet handed to the peer.
    Bump(counters_.send_busy, 1);
    return Status::Busy("outgoing queue to " + peer() + " holds " + std::to_string(queued_bytes()) +
                        " bytes (max_queued_bytes " + std::to_string(options_.max_queued_bytes) +
                        ")");
  }
  Outgoing out;
  out.bytes.resize(total - offset);
  size_t at = 0;
  size_t skip = offset;
  for (int i = 0; i < iovcnt; i++) {
    size_t n = iov[i].iov_len;
    if (skip >= n) {
      skip -= n;
      continue;
    }
    std::memcpy(out.bytes.data() + at, static_cast<uint8_t*>(iov[i].iov_base) + skip, n - skip);
    at += n - skip;
    skip = 0;
  }
  queued_bytes_ += out.bytes.size();
  // A message cut after its last fragment was written still needs an empty final one:
  // offset == total cannot happen (WriteMessage returned Busy before finishing).
  queue_.push_back(std::move(out));
  Bump(counters_.messages_sent, 1);
  ProgressAfterSend();
  return Status::OK();
}

void RingConnection::FlushQueue() {
  while (!queue_.empty() && !closed()) {
    Outgoing& front = queue_.front();
    iovec iov{front.bytes.data(), front.bytes.size()};
    const size_t before = front.offset;
    Status s = WriteMessage(&iov, 1, front.bytes.size(), &front.offset);
    queued_bytes_ -= front.offset - before;
    if (s.ok()) {
      queue_.pop_front();
      continue;
    }
    if (!s.Is(Status::Code::kBusy)) CloseWith(s.Annotate("writing to the peer's ring"));
    return;
  }
}

bool RingConnection::QueueCanProgress() {
  if (queue_.empty()) return false;
  const uint64_t credit =
      std::atomic_ref<uint64_t>(*block_.credit_word()).load(std::memory_order_acquire);
  return credit > sender_.credits();
}

// ---- receiving ------------------------------------------------------------------------------

void RingConnection::MaybePublishCredits(bool ring_empty) {
  if (closed()) {
    // No credits go out any more, but what is left in the ring is still drained after a
    // close: consumed slots must read as empty or Peek walks around the ring into frames
    // it already delivered (a receiver spinning forever on stale messages).
    receiver_.ZeroConsumed();
    return;
  }
  const bool due = ring_empty ? receiver_.IdleCreditsDue() : receiver_.CreditsDue();
  if (!due) return;
  receiver_.ZeroConsumed();  // the slots must read as free before the sender may reuse them
  Status s = WriteCredits(receiver_.consumed());
  if (!s.ok()) {
    CloseWith(s.Annotate("returning ring credits"));
    return;
  }
  receiver_.MarkPublished();
}

void RingConnection::FailReceive(const Status& why) {
  CloseWith(Status::Corruption("malformed frame from " + peer() + ": " + why.message()));
}

Status RingConnection::PostRead(void* local, const RemoteRegion& remote, uint64_t offset,
                                uint64_t len, uint64_t wr_id) {
  return PostOneSided(false, local, remote, offset, len, wr_id, nullptr);
}

Status RingConnection::PostWrite(const void* local, const RemoteRegion& remote, uint64_t offset,
                                 uint64_t len, uint64_t wr_id) {
  return PostOneSided(true, const_cast<void*>(local), remote, offset, len, wr_id, nullptr);
}

Status RingConnection::PostRead(void* local, const RemoteRegion& remote, uint64_t offset,
                                uint64_t len, CompletionCallback done) {
  return PostOneSided(false, local, remote, offset, len, 0, std::move(done));
}

Status RingConnection::PostWrite(const void* local, const RemoteRegion& remote, uint64_t offset,
                                 uint64_t len, CompletionCallback done) {
  return PostOneSided(true, const_cast<void*>(local), remote, offset, len, 0, std::move(done));
}

Status RingConnection::DescribeOwnRegion(const RemoteRegion& local_region, RemoteRegion* handle,
                                         std::vector<SegmentPiece>* pieces) {
  if (closed()) return Status::Unavailable("connection to " + peer() + " is closed");
  RAMP_RETURN_IF_ERROR(memory_->Describe(local_region.id, handle, pieces));
  if (handle->key != local_region.key) {
    return Status::InvalidArgument("Expose: handle does not match region " +
                                   std::to_string(local_region.id));
  }
  return Status::OK();
}

bool RingConnection::Receive(MessageView* out) {
  if (held_ != Held::kNone) {
    *out = held_view_;
    return true;
  }
  std::atomic<uint32_t>& armed = block_.control()->armed;
  if (armed.load(std::memory_order_relaxed) != 0) armed.store(0, std::memory_order_relaxed);
  DrainDoorbell();
  ProgressInput();
  if (!queue_.empty()) FlushQueue();
  if (closed() && close_status().Is(Status::Code::kCorruption)) return false;

  for (;;) {
    const uint8_t* data = nullptr;
    size_t size = 0;
    bool more = false;
    Status s = receiver_.Peek(&data, &size, &more);
    if (s.Is(Status::Code::kNotFound)) {
      MaybePublishCredits(/*ring_empty=*/true);
      FlushOutput();
      return false;
    }
    if (!s.ok()) {
      FailReceive(s);
      return false;
    }
    if (!more && !reassembling_) {
      held_ = Held::kRing;
      held_view_ = MessageView{data, size};
      Bump(counters_.messages_received, 1);
      *out = held_view_;
      return true;
    }
    if (reassembly_.size() + size > options_.max_message_bytes) {
      FailReceive(Status::Corruption("fragmented message exceeds max_message_bytes (" +
                                     std::to_string(options_.max_message_bytes) + ")"));
      return false;
    }
    reassembly_.insert(reassembly_.end(), data, data + size);
    receiver_.Consume();
    MaybePublishCredits(/*ring_empty=*/false);
    reassembling_ = more;
    if (!more) {
      held_ = Held::kReassembled;
      held_view_ = MessageView{reassembly_.data(), reassembly_.size()};
      Bump(counters_.messages_received, 1);
      *out = held_view_;
      return true;
    }
  }
}

void RingConnection::Release() {
  if (held_ == Held::kRing) {
    receiver_.Consume();
    MaybePublishCredits(/*ring_empty=*/false);
  } else if (held_ == Held::kReassembled) {
    reassembly_.clear();
    // Keep a buffer for the next large message, but not an outsized one forever.
    if (reassembly_.capacity() > 4 * block_.ring_bytes()) reassembly_.shrink_to_fit();
  }
  held_ = Held::kNone;
  held_view_ = MessageView{};
}

// ---- waiting --------------------------------------------------------------------------------

bool RingConnection::Arm() {
  if (closed()) return false;
  // Credits we owe go out before we sleep, and before Progress: providers that batch
  // writes (tcp) put them on the wire there. A sender stalled on them would never wake us.
  if (held_ == Held::kNone && !receiver_.FrameReady()) MaybePublishCredits(/*ring_empty=*/true);
  Progress();
  if (!queue_.empty()) {
    FlushQueue();
    FlushOutput();  // the owner may sleep next: nothing may stay held
  }
  if (held_ != Held::kNone || CompletionsReady() || closed()) return false;
  DrainDoorbell();
  std::atomic<uint32_t>& armed = block_.control()->armed;
  armed.store(1, std::memory_order_relaxed);
  // Pairs with the fence a writer makes after its frame, credit or completion: either it
  // sees `armed` and rings, or we see its work here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (receiver_.FrameReady() || CompletionsReady() || QueueCanProgress() || closed() ||
      !ArmProvider()) {
    armed.store(0, std::memory_order_relaxed);
    return false;
  }
  doorbell_may_ring_ = true;
  return true;
}

ConnectionStats RingConnection::stats() const {
  ConnectionStats s;
  s.reads_posted = counters_.reads_posted.load(std::memory_order_relaxed);
  s.writes_posted = counters_.writes_posted.load(std::memory_order_relaxed);
  s.bytes_read = counters_.bytes_read.load(std::memory_order_relaxed);
  s.bytes_written = counters_.bytes_written.load(std::memory_order_relaxed);
  s.messages_sent = counters_.messages_sent.load(std::memory_order_relaxed);
  s.messages_received = counters_.messages_received.load(std::memory_order_relaxed);
  s.send_busy = counters_.send_busy.load(std::memory_order_relaxed);
  s.doorbells_rung = counters_.doorbells_rung.load(std::memory_order_relaxed);
  return s;
}

}  // namespace ramp::transport::detail
