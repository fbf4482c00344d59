// The shm provider's data path: one-sided operations are memcpys between our buffers and the
// peer's mapped memory (checked by the region check of core/region.h), and ring frames and
// credits are written straight into the peer's mapped ring block. Set-up and the control
// path (handshake, segments, EXPOSE) are in shm_connection.cpp.
#include <poll.h>

#include <atomic>
#include <cstring>

#include "shm/shm_connection.h"

namespace ramp::transport::detail {
namespace {

// How long an operation naming a region we have not seen yet waits for its EXPOSE. The peer
// sends EXPOSE before it can send the handle, so it is normally already in our socket.
constexpr int kExposeWaitMs = 50;

}  // namespace

// ---- one-sided operations -------------------------------------------------------------------

Status ShmConnection::PostOneSided(bool write, void* local, const RemoteRegion& remote,
                                   uint64_t offset, uint64_t len, uint64_t wr_id,
                                   CompletionCallback cb) {
  RAMP_RETURN_IF_ERROR(AdmitOperation(len, write));
  const uint32_t access = write ? kAccessWrite : kAccessRead;
  Status s = imports_.Copy(remote, offset, len, access, local);
  if (s.Is(Status::Code::kNotFound) && !imports_.HasRegion(remote.id)) {
    // The handle may have overtaken its EXPOSE: read the control socket, briefly.
    const Deadline deadline = Deadline::After(kExposeWaitMs);
    while (!closed()) {
      DrainControl();
      if (imports_.HasRegion(remote.id) || deadline.Expired()) break;
      (void)WaitFd(sock_.get(), POLLIN, deadline, nullptr, "EXPOSE");
    }
    s = imports_.Copy(remote, offset, len, access, local);
  }
  if (s.ok()) {
    if (write) {
      // Orders the copy before whatever the peer is told next (a ring frame, a flag).
      std::atomic_thread_fence(std::memory_order_release);
      Bump(counters_.bytes_written, len);
    } else {
      Bump(counters_.bytes_read, len);
    }
  } else {
    s = s.Annotate(std::string(write ? "write to " : "read from ") + peer_);
  }
  CompleteLocal(wr_id, std::move(cb), std::move(s));
  return Status::OK();
}

// ---- ring writes ----------------------------------------------------------------------------

void ShmConnection::RingPeerIfArmed() {
  // Pairs with the receiver's fence in Arm(): it sees our frame or we see `armed`.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::atomic<uint32_t>& armed = peer_control_->armed;
  if (armed.load(std::memory_order_relaxed) != 0 && armed.exchange(0) != 0) {
    RingEventFd(peer_doorbell_.get());
    Bump(counters_.doorbells_rung, 1);
  }
}

Status ShmConnection::WriteFrame(uint64_t position, uint64_t size_field, const iovec* body,
                                 int iovcnt, size_t body_len) {
  uint8_t* f = peer_ring_ + position;
  ring::EncodeSize(f, size_field);
  if (size_field != ring::kWrapMarker) {
    uint8_t* d = f + ring::kBodyOffset;
    for (int i = 0; i < iovcnt; i++) {
      std::memcpy(d, body[i].iov_base, body[i].iov_len);
      d += body[i].iov_len;
    }
    std::atomic_ref<uint8_t>(f[ring::kBodyOffset + body_len])
        .store(ring::kIndicator, std::memory_order_relaxed);
  }
  // Lead last, with release: a receiver that sees it sees the whole frame.
  std::atomic_ref<uint8_t>(f[ring::kLeadOffset]).store(ring::kIndicator, std::memory_order_release);
  RingPeerIfArmed();
  return Status::OK();
}

Status ShmConnection::WriteCredits(uint64_t consumed) {
  std::atomic_ref<uint64_t>(*peer_credit_word_).store(consumed, std::memory_order_release);
  RingPeerIfArmed();
  return Status::OK();
}

}  // namespace ramp::transport::detail
