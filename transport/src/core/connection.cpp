#include "ramp/transport/connection.h"

#include <poll.h>

#include <cerrno>

#include "core/fd.h"

namespace ramp::transport {

Status Connection::Wait(int timeout_ms) {
  // The hook (query cancel in a backend) must run now and then even in a long wait.
  constexpr int kHookIntervalMs = 100;
  const detail::Deadline deadline = detail::Deadline::After(timeout_ms);
  for (;;) {
    if (closed()) {
      return Status::Unavailable("connection to " + peer() +
                                 " is closed: " + close_status().ToString());
    }
    RAMP_RETURN_IF_ERROR(RunWaitHook());
    if (!Arm()) {
      Poll(nullptr, 0);
      if (closed()) continue;
      return Status::OK();
    }
    struct pollfd p = {wait_fd(), POLLIN, 0};
    int n = poll(&p, 1, deadline.RemainingMs(kHookIntervalMs));
    if (n < 0 && errno != EINTR) return Status::FromErrno("poll on wait_fd", errno);
    if (n > 0) {
      Poll(nullptr, 0);
      if (closed()) continue;
      return Status::OK();
    }
    if (deadline.Expired()) {
      return Status::Timeout("nothing from " + peer() + " within " + std::to_string(timeout_ms) +
                             " ms");
    }
  }
}

}  // namespace ramp::transport
