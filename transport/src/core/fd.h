// File descriptors, deadlines and waiting: the small OS layer under the providers.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "ramp/status.h"

namespace ramp::transport::detail {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A point in time by which a blocking step must finish.
class Deadline {
 public:
  static Deadline After(int timeout_ms);
  static Deadline Never();
  // Milliseconds left (0 when passed, -1 for Never), capped at cap_ms when cap_ms >= 0.
  int RemainingMs(int cap_ms = -1) const;
  bool Expired() const;

 private:
  std::chrono::steady_clock::time_point at_;
  bool never_ = false;
};

using WaitHook = std::function<Status()>;

// Waits until fd reports one of `events` (poll bits), the deadline passes (Timeout naming
// `what`), or the hook returns non-OK (that status). The hook runs at least every 100 ms.
Status WaitFd(int fd, short events, const Deadline& deadline, const WaitHook& hook,
              const std::string& what);

Status SetNonBlocking(int fd);
// A non-blocking, close-on-exec eventfd.
Status MakeEventFd(UniqueFd* out);
// Adds 1 to an eventfd (a doorbell); never blocks.
void RingEventFd(int fd);
// Resets a non-blocking eventfd to zero.
void DrainEventFd(int fd);

// Monotonic milliseconds, for coarse periodic checks.
int64_t NowMs();

}  // namespace ramp::transport::detail
