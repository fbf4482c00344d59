// StreamListener: a listening stream socket (unix for shm, TCP for tcp). Accept drives every
// pending handshake at once from one thread: accepted sockets are non-blocking state machines
// (ServerAuth, then waiting for the peer's SETUP) on an epoll set, each with a deadline from
// its accept, so that an idle or slow peer holds up nobody but itself. Only when the peer's
// SETUP is buffered does the provider's set-up run (it then never waits on the peer).
//
// Unauthenticated connections are bounded in total and per source address
// (TransportOptions::max_pending_handshakes*): an excess one is refused at once, except that
// when the total is reached a source with fewer pending handshakes than the busiest one
// takes the place of the busiest source's oldest (so that one source cannot keep others
// out). Refusals and deadline drops are logged with the peer (at most 20 lines a second of
// each kind, then a count of those suppressed).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/control_channel.h"
#include "core/fd.h"
#include "core/handshake.h"
#include "ramp/transport/transport.h"

namespace ramp::transport::detail {

// Set-up of an authenticated connection: channel holds what the peer sent past AUTH_OK.
using SetUpFn =
    std::function<Status(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                         const TransportOptions& options, std::shared_ptr<Memory> memory,
                         std::unique_ptr<Connection>* out)>;
// For an accepted socket: a printable name of the peer, and the key of the per-source bound
// ("" for none). May also set socket options.
using AdmitFn = std::function<void(int fd, std::string* peer, std::string* source)>;

// Checks the listener bounds of the options.
Status ValidateListenOptions(const TransportOptions& options);

class StreamListener final : public Listener {
 public:
  StreamListener(UniqueFd fd, Endpoint bound, const TransportOptions& options,
                 std::shared_ptr<Memory> memory, Provider provider, AdmitFn admit, SetUpFn set_up,
                 std::function<void()> on_close);
  ~StreamListener() override;

  const Endpoint& endpoint() const override { return endpoint_; }
  // The epoll set: readable when a connection attempt or a pending handshake wants service.
  int fd() const override { return epoll_.valid() ? epoll_.get() : fd_.get(); }
  Status Accept(int timeout_ms, std::unique_ptr<Connection>* out) override;
  void Close() override;

  size_t pending_handshakes() const { return pending_.size(); }

 private:
  struct Pending {
    uint64_t id = 0;
    UniqueFd sock;
    std::string peer;
    std::string source;
    int64_t deadline_ms = 0;
    ControlChannel channel;
    ServerAuth auth;
    Pending(uint64_t i, UniqueFd s, std::string p, std::string src, int64_t d, Provider prov,
            const std::string& token)
        : id(i),
          sock(std::move(s)),
          peer(std::move(p)),
          source(std::move(src)),
          deadline_ms(d),
          channel(sock.get(), peer),
          auth(prov, token, peer) {}
  };
  struct Result {
    Status status;
    std::unique_ptr<Connection> conn;
  };

  Status Init();
  // Accepts what the backlog holds (a bounded batch).
  Status AcceptBatch(int64_t now);
  void Admit(UniqueFd sock, int64_t now);
  // Makes room for a connection from `source` when the total is reached; false: refuse it.
  bool EvictForFairness(const std::string& source);
  void Drive(Pending* p);
  // Ends a pending handshake; a failure is returned by Accept.
  void Finish(uint64_t id, Status status, std::unique_ptr<Connection> conn);
  std::unique_ptr<Pending> Remove(uint64_t id);
  void ExpireDue(int64_t now);
  void PauseAccepting(int64_t until_ms);
  // Refusals, drops and failures: warnings, each kind rate-limited on its own.
  enum LogKind { kRefused = 0, kDropped = 1, kFailed = 2 };
  void LogDos(LogKind kind, const std::string& line);

  UniqueFd fd_;
  UniqueFd epoll_;
  Status init_status_;
  Endpoint endpoint_;
  TransportOptions options_;
  std::shared_ptr<Memory> memory_;
  Provider provider_;
  AdmitFn admit_;
  SetUpFn set_up_;
  std::function<void()> on_close_;
  int timeout_ms_ = 0;

  uint64_t next_id_ = 1;  // 0 is the listening socket in the epoll set
  std::unordered_map<uint64_t, std::unique_ptr<Pending>> pending_;
  std::unordered_map<std::string, size_t> per_source_;
  // (deadline, id) in accept order; deadlines grow with it. Entries of finished handshakes
  // are skipped.
  std::deque<std::pair<int64_t, uint64_t>> expiry_;
  std::deque<Result> ready_;
  bool accepting_ = true;
  int64_t paused_until_ms_ = 0;
  int64_t log_window_ms_[3] = {0, 0, 0};
  int log_lines_[3] = {0, 0, 0};
  uint64_t log_suppressed_[3] = {0, 0, 0};
};

}  // namespace ramp::transport::detail
