// A worker thread of rampd: owns a set of connections, polls their receive rings, runs
// requests and sends replies. When no message arrives for a while it arms every connection's
// doorbell and sleeps in epoll, so idle servers leave the CPU to others (the development
// machine runs servers and clients on two cores). Replies deferred by slow requests come
// back through the worker's mailbox from other threads.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/one_sided_reply.h"
#include "server/request_handler.h"
#include "server/server_context.h"
#include "server/session.h"

namespace ramp::server {

class Worker {
 public:
  Worker(ServerContext* ctx, int index, int spin_rounds);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  Status Start();
  void Stop();
  // Hands a connection (handshake done) to this worker; thread-safe.
  void Adopt(std::unique_ptr<transport::Connection> conn);
  size_t session_count() const { return session_count_.load(std::memory_order_relaxed); }

 private:
  // Deferred replies arrive here from other threads. Shared with the post function so that a
  // reply finished after this worker stopped is dropped instead of touching freed memory.
  struct Mailbox {
    std::mutex mu;
    bool closed = false;
    int wake_fd = -1;
    std::vector<std::pair<uint64_t, std::string>> replies;
    std::vector<std::pair<uint64_t, std::shared_ptr<OneSidedReply>>> writebacks;
    std::atomic<bool> ready{false};
  };
  static std::shared_ptr<const DeferredReply::PostFn> MakePost(std::shared_ptr<Mailbox> box);
  static std::shared_ptr<const PostWritesFn> MakePostWrites(std::shared_ptr<Mailbox> box);
  // Posts the one-sided writes of page replies (as far as the connection admits them); the
  // reply goes out when the last one completes. True if it did any work.
  bool PumpWrites();

  void Run();
  void TakeNewSessions();
  // Serves up to a bounded number of messages of one session; true if it did any work.
  bool Serve(Session& s);
  // Sends the deferred replies that arrived; true if there were any.
  bool SendDeferred();
  void Drop(size_t index, const Status& why);
  void Sleep();

  ServerContext* ctx_;
  const int index_;
  const int spin_rounds_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: new sessions, deferred replies, stop
  std::shared_ptr<Mailbox> mailbox_;
  RequestHandler handler_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex incoming_mu_;
  std::vector<std::unique_ptr<transport::Connection>> incoming_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::atomic<size_t> session_count_{0};
  std::vector<std::pair<uint64_t, std::string>> mail_batch_;
  std::vector<std::pair<uint64_t, std::shared_ptr<OneSidedReply>>> writebacks_;  // posting
  std::string reply_;
};

}  // namespace ramp::server
