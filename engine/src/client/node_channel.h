// One channel to one node, and the one way the client library waits.
//
// A NodeChannel owns one connection to one rampd over one provider: it connects, passes the
// transport's token handshake, says HELLO and keeps the server's HelloReply. After a failure
// it is reset (the connection dropped, the reason kept for messages) and the next use
// reconnects. The client's per-node channels and the page reader's connections are
// NodeChannels.
//
// The client runs inside single-threaded PostgreSQL backends: it never starts threads and
// never blocks without looking at its interrupt flags. Every wait of the library therefore
// follows WaitPolicy through a Waiter: poll the connections; after a few idle rounds sleep
// on their doorbells (a DoorbellSet, one epoll set) for at most a few milliseconds; call
// the wait hook between sleeps; give up at the deadline with Status::Timeout.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.h"
#include "ramp/client.h"
#include "ramp/hlc.h"
#include "ramp/transport/transport.h"

namespace ramp {

// What every channel of one client shares: how to connect and authenticate, the memory
// registrations are made in, the clock carried on every request, and the deadlines.
struct ChannelContext {
  ClientOptions options;
  std::shared_ptr<transport::Memory> memory;
  HybridClock clock;
  uint64_t client_id = 0;

  // While set, no wait ends later than this: the waits of one operation share one timeout
  // (a commit's PREPAREs and the ABORTs after a failure: write_path.cpp's CommitDeadline).
  std::optional<std::chrono::steady_clock::time_point> bound;

  std::chrono::steady_clock::time_point Deadline() const {
    const auto d = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
    return bound && *bound < d ? *bound : d;
  }
  // The transport options of a backend's connection: no responder thread (peers are served
  // while polling), the wait hook run while connecting.
  transport::TransportOptions ConnectOptions() const;
};

// The wait/poll policy of every wait in the client library (requests, one-sided reads,
// HELLO, page reads).
struct WaitPolicy {
  // Idle polling rounds before a sleep. Replies come in tens of microseconds at best, so
  // spinning longer only takes the CPU that a server on the same machine needs.
  static constexpr int kSpinRounds = 4;
  // The longest sleep: a doorbell (message, completion, close) ends it earlier, so this
  // only bounds how late a missed wake-up and the wait hook are noticed.
  static constexpr int kMaxSleepMs = 10;
  // While rounds keep finding nothing without reaching kSpinRounds in a row (or while the
  // set never lets us sleep), the hook still runs this often.
  static constexpr int kHookEveryRounds = 1024;
};

// The connections a waiter may sleep on: one epoll set of their wait fds. Members are
// connections (owned by their channels, which add and remove them); every member is armed
// before a sleep, which also drains its doorbell, because a doorbell rung earlier on a
// member nobody waits for would keep the set readable and turn every sleep into a spin.
class DoorbellSet {
 public:
  DoorbellSet() = default;
  ~DoorbellSet();
  DoorbellSet(const DoorbellSet&) = delete;
  DoorbellSet& operator=(const DoorbellSet&) = delete;

  Status Init();  // creates the epoll set (Add does it too when needed)
  Status Add(transport::Connection* conn);
  void Remove(transport::Connection* conn);
  size_t size() const { return members_.size(); }
  // Arms every member and sleeps until one rings or timeout_ms passes; returns at once
  // when a member already has work (or is closed).
  Status Sleep(int timeout_ms);
  // Counters bumped by Sleep: sleeps taken, and those that ended by timeout (may be null).
  void CountInto(uint64_t* sleeps, uint64_t* timeouts) {
    sleeps_ = sleeps;
    timeouts_ = timeouts;
  }

 private:
  int fd_ = -1;
  std::vector<transport::Connection*> members_;
  uint64_t* sleeps_ = nullptr;
  uint64_t* timeouts_ = nullptr;
};

// One wait, from its construction to its deadline (the context's timeout_ms). The caller
// polls its connections in a loop and calls Next after every round.
class Waiter {
 public:
  // hook: whether the context's wait hook runs during this wait (not while draining after
  // a cancel, say).
  // The deadline is taken at the first round that made no progress, not here: a wait that
  // is over at once (a one-sided read the shm provider completed when it was posted) reads
  // no clock. It is later by the busy rounds before that, microseconds.
  Waiter(const ChannelContext& context, DoorbellSet* doorbells, bool hook = true)
      : context_(&context),
        hook_(hook && context.options.wait_hook ? &context.options.wait_hook : nullptr),
        doorbells_(doorbells) {}

  // After one polling round (did: it made progress). OK: poll again, having spun, slept on
  // the doorbells or run the wait hook as WaitPolicy says. Otherwise the hook's error, or,
  // past the deadline, Status::Timeout(timeout_message()).
  template <class Message>
  Status Next(bool did, const Message& timeout_message) {
    round_++;
    if (did) {
      idle_ = 0;
      return Status::OK();
    }
    const auto now = std::chrono::steady_clock::now();
    if (!have_deadline_) {
      deadline_ = context_->Deadline();
      have_deadline_ = true;
    }
    if (now >= deadline_) return Status::Timeout(timeout_message());
    if (++idle_ >= WaitPolicy::kSpinRounds) {
      idle_ = 0;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count();
      RAMP_RETURN_IF_ERROR(doorbells_->Sleep(
          static_cast<int>(std::clamp<int64_t>(left, 1, WaitPolicy::kMaxSleepMs))));
      return RunHook();
    }
    if (round_ % WaitPolicy::kHookEveryRounds == 0) return RunHook();
    return Status::OK();
  }

  bool expired() const { return have_deadline_ && std::chrono::steady_clock::now() >= deadline_; }

 private:
  Status RunHook() const { return hook_ != nullptr ? (*hook_)() : Status::OK(); }

  const ChannelContext* context_;
  bool have_deadline_ = false;
  std::chrono::steady_clock::time_point deadline_;
  const std::function<Status()>* hook_;
  DoorbellSet* doorbells_;
  uint64_t round_ = 0;
  int idle_ = 0;
};

class NodeChannel {
 public:
  // The node index a seed's channel is set up with: whichever node answers is accepted.
  static constexpr uint32_t kAnyNode = ~0u;

  NodeChannel() = default;
  ~NodeChannel() { Drop(); }
  NodeChannel(NodeChannel&& other) noexcept;
  NodeChannel& operator=(NodeChannel&& other) noexcept;
  NodeChannel(const NodeChannel&) = delete;
  NodeChannel& operator=(const NodeChannel&) = delete;

  // Whose channel this is (the context and doorbell set outlive it), which node it reaches
  // and the name messages give that node ("node 2 (tcp://127.0.0.1:7402)").
  void Setup(ChannelContext* context, DoorbellSet* doorbells, uint32_t node, std::string name);
  void SetEndpoint(const transport::Endpoint& endpoint) {
    endpoint_ = endpoint;
    has_endpoint_ = true;
  }

  // Connect + SayHello, with the node named in the error: "cannot connect to <name> at
  // <endpoint>: ..." or "HELLO to <name>: ...".
  Status Open();
  // The transport connection and its token handshake; joins the doorbell set. The
  // transport's error as it is (PermissionDenied for a wrong token, Cancelled, ...).
  Status Connect();
  // HELLO on a connected channel, waited for under WaitPolicy; keeps the reply and checks
  // that the server is the node this channel is for. On failure the channel is reset.
  Status SayHello();
  // Drops the connection (the next Open reconnects) and records why.
  void Reset(const Status& why);
  // For a connection with nothing in flight: notices a peer that went away meanwhile (polls
  // it, and arms it, which looks at the provider's control path: shm learns of a dead peer
  // there) and resets the channel if so. True when the channel is still open.
  bool ResetIfClosed();

  // Sends a request: header (op, count, request id, our clock) and body. The header is
  // encoded into a buffer that is reused from call to call.
  Status Send(protocol::Op op, uint32_t count, uint64_t request_id, std::string_view body);

  bool is_open() const { return conn_ != nullptr; }
  transport::Connection* conn() const { return conn_.get(); }
  // The server's HELLO reply (valid while open).
  const protocol::HelloReply& hello() const { return hello_; }
  // Why the last connect, HELLO or connection failed (OK if nothing failed yet).
  const Status& last_error() const { return last_error_; }
  bool has_endpoint() const { return has_endpoint_; }
  const transport::Endpoint& endpoint() const { return endpoint_; }
  uint32_t node() const { return node_; }
  const std::string& name() const { return name_; }

 private:
  Status AwaitHello(uint64_t request_id);
  void Drop();  // closes the connection and leaves the doorbell set

  ChannelContext* context_ = nullptr;
  DoorbellSet* doorbells_ = nullptr;
  uint32_t node_ = kAnyNode;
  std::string name_;
  transport::Endpoint endpoint_;
  bool has_endpoint_ = false;
  std::unique_ptr<transport::Connection> conn_;
  protocol::HelloReply hello_;
  Status last_error_;
  std::string header_;  // Send's scratch
};

}  // namespace ramp
