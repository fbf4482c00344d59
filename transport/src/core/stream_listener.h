// StreamListener: a listening stream socket (unix for shm, TCP for tcp) whose Accept runs the
// provider's handshake and set-up on each accepted socket.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/fd.h"
#include "ramp/transport/transport.h"

namespace ramp::transport::detail {

// Handshake + set-up on a connected socket; server says which side we are.
using EstablishFn = std::function<Status(
    UniqueFd sock, const std::string& peer, bool server, const TransportOptions& options,
    std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out)>;
// A printable name for an accepted peer.
using PeerNameFn = std::function<std::string(int fd)>;

class StreamListener final : public Listener {
 public:
  StreamListener(UniqueFd fd, Endpoint bound, const TransportOptions& options,
                 std::shared_ptr<Memory> memory, EstablishFn establish, PeerNameFn peer_name,
                 std::function<void()> on_close);
  ~StreamListener() override;

  const Endpoint& endpoint() const override { return endpoint_; }
  int fd() const override { return fd_.get(); }
  Status Accept(int timeout_ms, std::unique_ptr<Connection>* out) override;
  void Close() override;

 private:
  UniqueFd fd_;
  Endpoint endpoint_;
  TransportOptions options_;
  std::shared_ptr<Memory> memory_;
  EstablishFn establish_;
  PeerNameFn peer_name_;
  std::function<void()> on_close_;
};

}  // namespace ramp::transport::detail
