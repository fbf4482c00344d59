// A reply that is sent later, from any thread: a request whose answer waits for something
// slow (the group commit's fdatasync, a disk read through io_uring) takes one, returns
// without replying, and the worker that owns the connection sends it when it comes. The
// connection may be gone by then; the reply is dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ramp::server {

class DeferredReply {
 public:
  // post(session, reply) hands a finished reply to the owning worker (thread-safe).
  using PostFn = std::function<void(uint64_t session, std::string reply)>;
  DeferredReply() = default;
  DeferredReply(std::shared_ptr<const PostFn> post, uint64_t session)
      : post_(std::move(post)), session_(session) {}

  // Sends the reply (once; later calls do nothing). Thread-safe with respect to the worker.
  void Send(std::string reply) {
    if (!post_) return;
    (*post_)(session_, std::move(reply));
    post_.reset();
  }
  bool pending() const { return post_ != nullptr; }
  uint64_t session() const { return session_; }

 private:
  std::shared_ptr<const PostFn> post_;
  uint64_t session_ = 0;
};

}  // namespace ramp::server
