// Connection: the one transport contract (DESIGN §4). Every provider (tcp, shm, verbs)
// implements it; RAMP, page I/O and the directory are written against it only.
//
// Data path: one-sided reads and writes against a peer's registered memory, and message
// rings (one per direction, living in the receiver's memory, written one-sided by the
// sender). Control path (connection set-up, authentication, exposing regions, close) runs
// over the provider's socket and never blocks the data path.
//
// Threading: a Connection is driven by one thread at a time. Nothing here starts a thread
// unless TransportOptions::responder_thread asks the tcp provider to serve peers' one-sided
// operations on its own (servers do; PostgreSQL backends poll instead).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ramp/status.h"
#include "ramp/transport/endpoint.h"
#include "ramp/transport/memory.h"

namespace ramp::transport {

// The result of a one-sided operation posted without a callback.
struct Completion {
  uint64_t wr_id = 0;
  Status status;
};

// Runs inside Poll() when the operation completes.
using CompletionCallback = std::function<void(const Status&)>;

// A received message. It points into the receive ring and stays valid until Release().
struct MessageView {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct ConnectionStats {
  uint64_t reads_posted = 0;
  uint64_t writes_posted = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t send_busy = 0;       // Send() refused for want of ring credits
  uint64_t doorbells_rung = 0;  // wake-ups sent to a sleeping receiver
};

class Connection {
 public:
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  virtual Provider provider() const = 0;
  // The peer, for logs ("tcp://127.0.0.1:7400", "shm:///tmp/r.sock").
  virtual std::string peer() const = 0;

  // ---- one-sided operations ------------------------------------------------------------
  // Posts a read of [offset, offset+len) of the peer's region into local, without waiting.
  // local must stay valid until the operation completes (through Poll). An access outside
  // the handle's bounds or rights, or with a forged key, completes with an error status:
  // never with the peer's memory. Returns Busy when too many operations are outstanding.
  virtual Status PostRead(void* local, const RemoteRegion& remote, uint64_t offset, uint64_t len,
                          uint64_t wr_id) = 0;
  virtual Status PostWrite(const void* local, const RemoteRegion& remote, uint64_t offset,
                           uint64_t len, uint64_t wr_id) = 0;
  // The same, completed by a callback run inside Poll() instead of a Completion entry.
  virtual Status PostRead(void* local, const RemoteRegion& remote, uint64_t offset, uint64_t len,
                          CompletionCallback done) = 0;
  virtual Status PostWrite(const void* local, const RemoteRegion& remote, uint64_t offset,
                           uint64_t len, CompletionCallback done) = 0;

  // Makes one of our registrations usable by this peer (shm: passes the segments' file
  // descriptors; verbs: addresses and rkeys; tcp: nothing). Call it before sending the
  // handle to the peer in a message.
  virtual Status Expose(const RemoteRegion& local_region) = 0;

  // Drives progress without blocking: completes posted operations (running callbacks and
  // filling out[0..max) with the others), serves the peer where this side must (tcp without
  // responder thread), handles control messages. Returns the number of entries filled.
  virtual int Poll(Completion* out, int max) = 0;
  // Operations posted and not yet completed.
  virtual size_t outstanding() const = 0;

  // ---- messages ------------------------------------------------------------------------
  // Sends a message through the peer's receive ring. A message larger than one frame
  // (ring::MaxBody) is split into fragments and reassembled by the receiver. Send never
  // blocks: what does not fit in the ring for want of credits is copied to an outgoing queue
  // that Poll/Receive flush as credits come back (messages are delivered in order). Busy
  // only when that queue already holds TransportOptions::max_queued_bytes; TooLarge above
  // max_message_bytes().
  // A provider may hold a sent message back to batch it with the next ones (tcp does): it
  // leaves at the latest at the next Poll, Arm or Wait, when Receive finds nothing more to
  // return, or at Close. An owner that drives the connection to get its answer loses nothing.
  virtual Status Send(const void* data, size_t len) = 0;
  virtual Status SendV(const iovec* iov, int iovcnt) = 0;
  // Bytes waiting in the outgoing queue.
  virtual size_t queued_bytes() const = 0;
  // The next whole message, if any; does not block. A malformed frame closes the connection
  // (closed() becomes true, close_status() says why) and returns false.
  virtual bool Receive(MessageView* out) = 0;
  // Consumes the message returned by the last Receive (zeroes its slots, returns credits).
  virtual void Release() = 0;
  virtual size_t max_message_bytes() const = 0;

  // ---- waiting -------------------------------------------------------------------------
  // A file descriptor that becomes readable when a message, a completion or a close may be
  // waiting. Usable in poll/epoll. Call Arm() first: it tells the peer to ring the doorbell.
  virtual int wait_fd() const = 0;
  // Prepares to sleep on wait_fd(). Returns false when work is already pending (don't
  // sleep). After waking, call Poll/Receive; the arming is cleared by the next Receive.
  virtual bool Arm() = 0;
  // Arm + poll(wait_fd, timeout) + progress. OK when something may be ready, Timeout when
  // the time passed, Unavailable when closed.
  Status Wait(int timeout_ms);

  // ---- lifecycle -----------------------------------------------------------------------
  virtual bool closed() const = 0;
  // Why the connection closed (peer vanished, malformed frame, Close()).
  virtual Status close_status() const = 0;
  // Closes: outstanding operations complete with Unavailable at the next Poll.
  virtual void Close() = 0;
  virtual ConnectionStats stats() const = 0;

 protected:
  Connection() = default;
  // Called by Wait() between sleeps (at least every 100 ms): providers run
  // TransportOptions::wait_hook here; a non-OK status ends the wait with it.
  virtual Status RunWaitHook() { return Status::OK(); }
};

}  // namespace ramp::transport
