#include "core/stream_listener.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "ramp/log.h"

namespace ramp::transport::detail {

StreamListener::StreamListener(UniqueFd fd, Endpoint bound, const TransportOptions& options,
                               std::shared_ptr<Memory> memory, EstablishFn establish,
                               PeerNameFn peer_name, std::function<void()> on_close)
    : fd_(std::move(fd)),
      endpoint_(std::move(bound)),
      options_(options),
      memory_(std::move(memory)),
      establish_(std::move(establish)),
      peer_name_(std::move(peer_name)),
      on_close_(std::move(on_close)) {}

StreamListener::~StreamListener() {
  Close();
}

Status StreamListener::Accept(int timeout_ms, std::unique_ptr<Connection>* out) {
  if (!fd_.valid()) return Status::Unavailable("listener " + endpoint_.ToString() + " is closed");
  const Deadline deadline = Deadline::After(timeout_ms);
  for (;;) {
    int s = accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0) {
      UniqueFd sock(s);
      const std::string peer = peer_name_(sock.get());
      Status st = establish_(std::move(sock), peer, /*server=*/true, options_, memory_, out);
      if (!st.ok() && !st.Is(Status::Code::kPermissionDenied)) {
        // PermissionDenied was logged by the handshake; the listener stays usable either way.
        RAMP_WARN("listener %s: connection from %s failed: %s", endpoint_.ToString().c_str(),
                  peer.c_str(), st.ToString().c_str());
      }
      return st;
    }
    const int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      // EMFILE and friends: report, the caller decides whether to back off.
      return Status::FromErrno("accept on " + endpoint_.ToString(), err);
    }
    Status w = WaitFd(fd_.get(), POLLIN, deadline, options_.wait_hook,
                      "a connection on " + endpoint_.ToString());
    if (!w.ok()) return w;
  }
}

void StreamListener::Close() {
  if (!fd_.valid()) return;
  fd_.reset();
  if (on_close_) on_close_();
}

}  // namespace ramp::transport::detail
