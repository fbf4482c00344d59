#include "core/fd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace ramp::transport::detail {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Deadline Deadline::After(int timeout_ms) {
  Deadline d;
  if (timeout_ms < 0) {
    d.never_ = true;
  } else {
    d.at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  return d;
}

Deadline Deadline::Never() {
  Deadline d;
  d.never_ = true;
  return d;
}

int Deadline::RemainingMs(int cap_ms) const {
  if (never_) return cap_ms;
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(at_ - std::chrono::steady_clock::now())
          .count();
  if (left < 0) left = 0;
  if (cap_ms >= 0 && left > cap_ms) left = cap_ms;
  return static_cast<int>(left);
}

bool Deadline::Expired() const {
  return !never_ && std::chrono::steady_clock::now() >= at_;
}

Status WaitFd(int fd, short events, const Deadline& deadline, const WaitHook& hook,
              const std::string& what) {
  constexpr int kHookIntervalMs = 100;
  while (true) {
    if (hook) {
      Status s = hook();
      if (!s.ok()) return s;
    }
    int slice = deadline.RemainingMs(kHookIntervalMs);
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, slice);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("poll while waiting for " + what, errno);
    }
    if (n > 0) return Status::OK();  // readable, writable, or an error/hang-up to look at
    if (deadline.Expired()) return Status::Timeout("timed out waiting for " + what);
  }
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return Status::FromErrno("fcntl O_NONBLOCK", errno);
  }
  return Status::OK();
}

Status MakeEventFd(UniqueFd* out) {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Status::FromErrno("eventfd", errno);
  out->reset(fd);
  return Status::OK();
}

void RingEventFd(int fd) {
  uint64_t one = 1;
  // EAGAIN means the counter is saturated: the doorbell is already ringing.
  ssize_t n;
  do {
    n = write(fd, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

void DrainEventFd(int fd) {
  uint64_t v;
  ssize_t n;
  do {
    n = read(fd, &v, sizeof(v));
  } while (n < 0 && errno == EINTR);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ramp::transport::detail
