// RingConnection: what every provider shares. Messages (fragmentation, reassembly, the
// outgoing queue, credits), completion delivery, arming and the wait fd are implemented
// here once, on top of a few provider hooks:
//
//   WriteFrame    put one frame into the peer's ring (size, body, trail, then the lead last)
//   WriteCredits  put our consumed count into the peer's credit word
//   Progress      move the provider along (control messages, sockets, completion queues)
//
// Memory layout. Each side allocates one block in its Memory and registers it read-write
// for the peer:   [ receive ring (ring_bytes) | ControlBlock (64) | credit word (8) | pad ]
// The peer writes frames into the ring, clears `armed` in the control block when it rings
// our doorbell, and writes into the credit word how much of *its* ring we may reuse.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/fd.h"
#include "ramp/transport/connection.h"
#include "ramp/transport/memory.h"
#include "ramp/transport/ring.h"
#include "ramp/transport/transport.h"

namespace ramp::transport::detail {

struct BlockLayout {
  static constexpr size_t ControlOffset(size_t ring_bytes) { return ring_bytes; }
  static constexpr size_t CreditOffset(size_t ring_bytes) { return ring_bytes + 64; }
  static constexpr size_t Bytes(size_t ring_bytes) { return ring_bytes + 128; }
};

// Our block: allocated and registered at set-up, deregistered and freed at destruction.
class ConnBlock {
 public:
  ConnBlock() = default;
  ~ConnBlock();
  ConnBlock(const ConnBlock&) = delete;
  ConnBlock& operator=(const ConnBlock&) = delete;

  Status Create(std::shared_ptr<Memory> memory, size_t ring_bytes);
  uint8_t* ring() const { return base_; }
  size_t ring_bytes() const { return ring_bytes_; }
  ring::ControlBlock* control() const {
    return reinterpret_cast<ring::ControlBlock*>(base_ + BlockLayout::ControlOffset(ring_bytes_));
  }
  uint64_t* credit_word() const {
    return reinterpret_cast<uint64_t*>(base_ + BlockLayout::CreditOffset(ring_bytes_));
  }
  const RemoteRegion& region() const { return region_; }
  uint64_t segment_id() const { return segment_id_; }

 private:
  std::shared_ptr<Memory> memory_;
  uint8_t* base_ = nullptr;
  size_t ring_bytes_ = 0;
  RemoteRegion region_;
  uint64_t segment_id_ = 0;
};

// Checks TransportOptions a connection depends on.
Status ValidateOptions(const TransportOptions& options);

class RingConnection : public Connection {
 public:
  ~RingConnection() override;

  Status Send(const void* data, size_t len) final;
  Status SendV(const iovec* iov, int iovcnt) final;
  // The outgoing queue plus what the provider holds unsent (tcp's send buffer): an owner
  // that stops driving the connection at zero knows everything left.
  size_t queued_bytes() const final { return queued_bytes_ + UnsentBytes(); }
  bool Receive(MessageView* out) final;
  void Release() final;
  size_t max_message_bytes() const final { return send_limit_; }

  int Poll(Completion* out, int max) final;
  size_t outstanding() const final { return outstanding_.load(std::memory_order_acquire); }

  int wait_fd() const final { return epoll_.get(); }
  bool Arm() final;

  // One-sided operations: the four overloads of the contract funnel into PostOneSided.
  Status PostRead(void* local, const RemoteRegion& remote, uint64_t offset, uint64_t len,
                  uint64_t wr_id) final;
  Status PostWrite(const void* local, const RemoteRegion& remote, uint64_t offset, uint64_t len,
                   uint64_t wr_id) final;
  Status PostRead(void* local, const RemoteRegion& remote, uint64_t offset, uint64_t len,
                  CompletionCallback done) final;
  Status PostWrite(const void* local, const RemoteRegion& remote, uint64_t offset, uint64_t len,
                   CompletionCallback done) final;

  bool closed() const final { return closed_.load(std::memory_order_acquire); }
  Status close_status() const final;
  void Close() override;
  ConnectionStats stats() const final;

  // Our receive ring. Tests write garbage here to play a hostile peer (an shm peer can
  // write this memory at will; tcp and verbs peers through frame writes).
  uint8_t* receive_ring_for_testing() const { return block_.ring(); }

 protected:
  RingConnection(const TransportOptions& options, std::shared_ptr<Memory> memory);
  Status RunWaitHook() override;

  // Set-up, in this order: InitLocal (before SETUP is sent: it allocates the block whose
  // handle SETUP carries), then AttachPeer with what the peer's SETUP said.
  Status InitLocal();
  void AttachPeer(size_t peer_ring_bytes, uint64_t peer_max_message_bytes);
  // Adds a descriptor to the wait fd's epoll set.
  Status WatchFd(int fd, uint32_t events);
  Status ModifyWatch(int fd, uint32_t events);

  // The checks every provider's Expose starts with: the connection is open and the handle is
  // one of ours (its key matches the registration); *handle and *pieces describe it.
  Status DescribeOwnRegion(const RemoteRegion& local_region, RemoteRegion* handle,
                           std::vector<SegmentPiece>* pieces);

  // ---- provider hooks ------------------------------------------------------------------
  // A one-sided read (write = false) or write of len bytes at offset of remote; completes
  // with wr_id through Poll, or through cb when cb is set.
  virtual Status PostOneSided(bool write, void* local, const RemoteRegion& remote, uint64_t offset,
                              uint64_t len, uint64_t wr_id, CompletionCallback cb) = 0;
  // Writes a frame at `position` of the peer's ring: the 8-byte size field, the body, the
  // trailing indicator, and only then the lead indicator. A wrap marker is a frame with
  // size_field == ring::kWrapMarker and no body (no trail either).
  virtual Status WriteFrame(uint64_t position, uint64_t size_field, const iovec* body, int iovcnt,
                            size_t body_len) = 0;
  // Writes our consumed count into the peer's credit word.
  virtual Status WriteCredits(uint64_t consumed) = 0;
  // Drives the provider without blocking.
  virtual void Progress() = 0;
  // What Send and Receive drive. Providers that batch output (tcp) hold it back here, so
  // that messages sent in a row, or replies to messages received in a row, leave together:
  //   ProgressAfterSend  after Send/SendV wrote a message (default: Progress);
  //   ProgressInput      at the start of Receive: take input, output may wait (default:
  //                      Progress);
  //   FlushOutput        when Receive finds nothing more to return: the owner is about to
  //                      poll, sleep or do other work, so what it sent must go now.
  // Poll, Arm (and so Wait) call Progress, which must put everything on the wire.
  virtual void ProgressAfterSend() { Progress(); }
  virtual void ProgressInput() { Progress(); }
  virtual void FlushOutput() {}
  // Runs inside Arm() after `armed` is set: false when the provider already has work (the
  // owner must not sleep). May adjust what the epoll set watches.
  virtual bool ArmProvider() { return true; }
  // Runs once, on the first close (any thread): fail outstanding operations, wake threads.
  virtual void OnClose() {}
  // Bytes written by the hooks but not yet handed to the operating system or the peer.
  virtual size_t UnsentBytes() const { return 0; }

  // ---- helpers for providers -----------------------------------------------------------
  // Marks the connection closed with the first reason given (logged); wakes the owner.
  void CloseWith(const Status& why, bool log = true);
  // Admission of a one-sided operation: Unavailable when closed, Busy past
  // max_outstanding, TooLarge past max_message_bytes(). Counts it outstanding when OK.
  Status AdmitOperation(uint64_t len, bool is_write);
  // Completions made on the owner's thread (no lock).
  void CompleteLocal(uint64_t wr_id, CompletionCallback cb, Status status);
  // Completions made on another thread (tcp responder); follow with NotifyOwner().
  void CompleteRemote(uint64_t wr_id, CompletionCallback cb, Status status);
  // Rings our own doorbell if the owner armed it (threads other than the owner, after
  // they produced work for it).
  void NotifyOwner();

  const TransportOptions options_;
  const std::shared_ptr<Memory> memory_;
  ConnBlock block_;
  UniqueFd doorbell_;  // rung by the peer (shm) or by our responder (tcp)
  size_t peer_ring_bytes_ = 0;

  // Statistics. Each counter has one writing thread (the owner, or the tcp responder for
  // what it completes and the doorbells it rings), so an increment is a relaxed load and
  // store: no locked instruction on the hot path. stats() may read from any thread.
  struct Counters {
    std::atomic<uint64_t> reads_posted{0}, writes_posted{0}, bytes_read{0}, bytes_written{0},
        messages_sent{0}, messages_received{0}, send_busy{0}, doorbells_rung{0};
  };
  static void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  Counters counters_;

 private:
  struct Pending {
    uint64_t wr_id;
    CompletionCallback cb;
    Status status;
  };
  struct Outgoing {
    std::vector<uint8_t> bytes;
    size_t offset = 0;
  };
  enum class Held { kNone, kRing, kReassembled };

  // Writes fragments of the message from *offset on while credits last: OK when all is
  // written, Busy when the ring is full (the rest is for the queue), else an error.
  Status WriteMessage(const iovec* iov, int iovcnt, size_t total, size_t* offset);
  void FlushQueue();
  bool QueueCanProgress();
  void RefreshCredits();
  void MaybePublishCredits(bool ring_empty);
  bool CompletionsReady() const;
  void FailReceive(const Status& why);

  UniqueFd epoll_;
  ring::Receiver receiver_;
  ring::Sender sender_;
  size_t send_limit_ = 0;
  size_t max_fragment_ = 0;

  // Outgoing queue (owner thread only).
  std::deque<Outgoing> queue_;
  size_t queued_bytes_ = 0;
  std::vector<iovec> fragment_iov_;

  // Receive state (owner thread only).
  Held held_ = Held::kNone;
  MessageView held_view_;
  std::vector<uint8_t> reassembly_;
  bool reassembling_ = false;

  // Completions. outstanding_ changes only on the owner's thread (admission, delivery).
  std::atomic<size_t> outstanding_{0};
  // Owner-side completions: a vector consumed from local_head_ and reset when drained, so
  // that a steady stream of operations allocates nothing (a deque would, every few entries).
  std::vector<Pending> local_done_;
  size_t local_head_ = 0;
  bool delivering_ = false;  // a callback calling Poll() must not deliver under our feet
  mutable std::mutex remote_mu_;
  std::deque<Pending> remote_done_;
  std::atomic<size_t> remote_ready_{0};

  // True from an Arm() that returned true until the doorbell is drained: only then can a
  // writer have rung it. Receive/Poll/Arm drain it then, so wait_fd does not stay readable
  // (and an owner's epoll loop spinning) after the wake-up was handled.
  bool doorbell_may_ring_ = false;
  void DrainDoorbell();

  // Close.
  std::atomic<bool> closed_{false};
  mutable std::mutex close_mu_;
  Status close_status_;
};

}  // namespace ramp::transport::detail
