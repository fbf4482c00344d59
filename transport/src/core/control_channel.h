// ControlChannel: whole messages ([u32 length][u8 type][payload], see wire.h) over a
// non-blocking stream socket (unix or TCP), with file descriptors (SCM_RIGHTS) on unix
// sockets. Used for the handshake of every stream provider and for the shm control path.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/fd.h"
#include "core/wire.h"
#include "ramp/status.h"

namespace ramp::transport::detail {

struct ControlMessage {
  uint8_t type = 0;
  std::vector<uint8_t> payload;
};

// Whole typed messages to and from one peer: what the handshake needs. A stream socket
// (ControlChannel) is one; verbs sends them as SEND/RECV on its queue pair.
class MessageChannel {
 public:
  virtual ~MessageChannel() = default;
  virtual Status Send(wire::Type type, const std::vector<uint8_t>& payload,
                      const Deadline& deadline, const WaitHook& hook, const int* fds, int nfds) = 0;
  Status Send(wire::Type type, const std::vector<uint8_t>& payload, const Deadline& deadline,
              const WaitHook& hook) {
    return Send(type, payload, deadline, hook, nullptr, 0);
  }
  virtual Status Receive(ControlMessage* out, const Deadline& deadline, const WaitHook& hook,
                         const std::string& what) = 0;
  // File descriptors that arrived with messages (unix sockets only).
  virtual Status TakeFds(size_t n, std::vector<UniqueFd>* out) = 0;
  virtual const std::string& peer() const = 0;
};

class ControlChannel final : public MessageChannel {
 public:
  ControlChannel() = default;
  // fd: a connected, non-blocking stream socket, not owned. peer: for error messages.
  ControlChannel(int fd, std::string peer, size_t max_payload = wire::kMaxControlPayload)
      : fd_(fd), peer_(std::move(peer)), max_payload_(max_payload) {}

  // Sends one message (fds travel with its first byte), waiting while the socket buffer is
  // full until the deadline.
  using MessageChannel::Send;
  Status Send(wire::Type type, const std::vector<uint8_t>& payload, const Deadline& deadline,
              const WaitHook& hook, const int* fds, int nfds) override;
  // Receives one whole message, waiting until the deadline. `what` names the expected
  // message in a Timeout.
  Status Receive(ControlMessage* out, const Deadline& deadline, const WaitHook& hook,
                 const std::string& what) override;
  // Non-blocking: *got says whether a whole message was there. Unavailable once the peer
  // closed the socket and every buffered message was taken; Corruption for a malformed
  // stream.
  Status TryReceive(ControlMessage* out, bool* got);
  // Non-blocking: reads what the socket holds; *whole says whether a whole message is
  // buffered (not taken). Errors as TryReceive.
  Status Fill(bool* whole);
  // Takes n file descriptors received so far (in arrival order); Corruption when fewer
  // arrived (the peer announced fds it did not send).
  Status TakeFds(size_t n, std::vector<UniqueFd>* out) override;

  // Moves bytes read past the last message taken (a peer may start the data path right
  // after its SETUP; those bytes belong to whoever reads the socket next).
  void TakeBuffered(std::vector<uint8_t>* out) {
    out->assign(buf_.begin() + static_cast<ptrdiff_t>(head_), buf_.end());
    buf_.clear();
    head_ = 0;
  }

  int fd() const { return fd_; }
  // The largest payload accepted (a listener keeps it small until the peer authenticated).
  void set_max_payload(size_t n) { max_payload_ = n; }
  const std::string& peer() const override { return peer_; }

 private:
  // One recvmsg into the buffer. *eof when the peer closed; OK with nothing read on EAGAIN.
  Status ReadSome(bool* eof, bool* read_any);
  bool Extract(ControlMessage* out, Status* error);

  int fd_ = -1;
  std::string peer_;
  size_t max_payload_ = wire::kMaxControlPayload;
  std::vector<uint8_t> buf_;
  size_t head_ = 0;
  bool eof_ = false;
  std::deque<UniqueFd> fds_;
};

}  // namespace ramp::transport::detail
