#include "core/stream_listener.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "core/wire.h"
#include "ramp/log.h"

namespace ramp::transport::detail {
namespace {

// HELLO and PROOF are a few dozen bytes, SETUP under a hundred: a peer that has not
// authenticated gets no more buffer than this.
constexpr size_t kPendingMaxPayload = 4096;
// Connections taken from the backlog before pending handshakes get their turn.
constexpr int kAcceptBatch = 64;
// After EMFILE and friends, the backlog is left alone this long (no busy loop).
constexpr int64_t kAcceptPauseMs = 100;
// Refusals and drops logged per second at most; the rest are counted.
constexpr int kDosLinesPerSecond = 20;

}  // namespace

Status ValidateListenOptions(const TransportOptions& o) {
  if (o.pending_handshake_timeout_ms < 1) {
    return Status::InvalidArgument("pending_handshake_timeout_ms must be > 0");
  }
  if (o.handshake_timeout_ms < 1)
    return Status::InvalidArgument("handshake_timeout_ms must be > 0");
  if (o.max_pending_handshakes < 1 || o.max_pending_handshakes_per_source < 1) {
    return Status::InvalidArgument("max_pending_handshakes and its per-source bound must be > 0");
  }
  return Status::OK();
}

StreamListener::StreamListener(UniqueFd fd, Endpoint bound, const TransportOptions& options,
                               std::shared_ptr<Memory> memory, Provider provider, AdmitFn admit,
                               SetUpFn set_up, std::function<void()> on_close)
    : fd_(std::move(fd)),
      endpoint_(std::move(bound)),
      options_(options),
      memory_(std::move(memory)),
      provider_(provider),
      admit_(std::move(admit)),
      set_up_(std::move(set_up)),
      on_close_(std::move(on_close)),
      timeout_ms_(std::min(options.handshake_timeout_ms, options.pending_handshake_timeout_ms)) {
  init_status_ = Init();
}

StreamListener::~StreamListener() {
  Close();
}

Status StreamListener::Init() {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Status::FromErrno("epoll_create1", errno);
  epoll_.reset(ep);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd_.get(), &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno);
  }
  return Status::OK();
}

Status StreamListener::Accept(int timeout_ms, std::unique_ptr<Connection>* out) {
  if (!fd_.valid()) return Status::Unavailable("listener " + endpoint_.ToString() + " is closed");
  if (!init_status_.ok()) return init_status_;
  const Deadline deadline = Deadline::After(timeout_ms);
  epoll_event events[128];
  for (;;) {
    if (!ready_.empty()) {
      Result r = std::move(ready_.front());
      ready_.pop_front();
      *out = std::move(r.conn);
      return r.status;
    }
    if (options_.wait_hook) RAMP_RETURN_IF_ERROR(options_.wait_hook());
    int64_t now = NowMs();
    if (!accepting_ && now >= paused_until_ms_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = 0;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd_.get(), &ev) == 0) accepting_ = true;
    }
    ExpireDue(now);
    if (!ready_.empty()) continue;
    int64_t wait = deadline.RemainingMs(options_.wait_hook ? 100 : -1);
    if (wait < 0) wait = 1000;  // no deadline: wake now and then all the same
    if (!expiry_.empty())
      wait = std::min<int64_t>(wait, std::max<int64_t>(0, expiry_.front().first - now));
    if (!accepting_) wait = std::min<int64_t>(wait, std::max<int64_t>(0, paused_until_ms_ - now));
    int n = epoll_wait(epoll_.get(), events, 128, static_cast<int>(wait));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("epoll_wait on " + endpoint_.ToString(), errno);
    }
    now = NowMs();
    for (int i = 0; i < n; i++) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) {
        Status s = AcceptBatch(now);
        // EMFILE and friends: report, the caller decides whether to back off (accepting
        // pauses meanwhile).
        if (!s.ok()) ready_.push_back({std::move(s), nullptr});
        continue;
      }
      auto it = pending_.find(id);
      if (it != pending_.end()) Drive(it->second.get());  // else: ended earlier this round
    }
    if (ready_.empty() && deadline.Expired()) {
      ExpireDue(NowMs());
      if (ready_.empty()) {
        return Status::Timeout("timed out waiting for a connection on " + endpoint_.ToString());
      }
    }
  }
}

Status StreamListener::AcceptBatch(int64_t now) {
  for (int i = 0; i < kAcceptBatch; i++) {
    int s = accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0) {
      Admit(UniqueFd(s), now);
      continue;
    }
    const int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return Status::OK();
    PauseAccepting(now + kAcceptPauseMs);
    return Status::FromErrno("accept on " + endpoint_.ToString(), err);
  }
  return Status::OK();
}

void StreamListener::PauseAccepting(int64_t until_ms) {
  epoll_event ev{};
  ev.events = 0;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd_.get(), &ev) == 0) {
    accepting_ = false;
    paused_until_ms_ = until_ms;
  }
}

void StreamListener::Admit(UniqueFd sock, int64_t now) {
  std::string peer;
  std::string source;
  admit_(sock.get(), &peer, &source);
  std::string refused;
  if (pending_.size() >= options_.max_pending_handshakes && !EvictForFairness(source)) {
    refused = std::to_string(pending_.size()) +
              " connections are handshaking, the limit (max pending handshakes)";
  } else if (!source.empty()) {
    auto it = per_source_.find(source);
    if (it != per_source_.end() && it->second >= options_.max_pending_handshakes_per_source) {
      refused = std::to_string(it->second) + " connections from " + source +
                " are handshaking, the per-source limit";
    }
  }
  if (!refused.empty()) {
    LogDos(kRefused, "listener " + endpoint_.ToString() + ": refused " + peer + ": " + refused);
    // Tell the peer why (best effort, never waits), then close.
    ControlChannel channel(sock.get(), peer);
    std::vector<uint8_t> payload;
    wire::EncodeReason(Status::Code::kUnavailable,
                       "too many connections handshaking with the server, try again", &payload);
    (void)channel.Send(wire::Type::kError, payload, Deadline::After(0), nullptr);
    return;
  }
  const uint64_t id = next_id_++;
  auto p = std::make_unique<Pending>(id, std::move(sock), std::move(peer), std::move(source),
                                     now + timeout_ms_, provider_, options_.token);
  p->channel.set_max_payload(kPendingMaxPayload);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p->sock.get(), &ev) != 0) {
    Status s = Status::FromErrno("epoll_ctl", errno);
    LogDos(kFailed, "listener " + endpoint_.ToString() + ": connection from " + p->peer +
                        " failed: " + s.ToString());
    return;
  }
  if (!p->source.empty()) per_source_[p->source]++;
  expiry_.emplace_back(p->deadline_ms, id);
  pending_.emplace(id, std::move(p));
}

bool StreamListener::EvictForFairness(const std::string& source) {
  std::string busiest;
  size_t most = 0;
  for (const auto& [src, n] : per_source_) {
    if (n > most) {
      most = n;
      busiest = src;
    }
  }
  size_t mine = 0;
  if (!source.empty()) {
    auto it = per_source_.find(source);
    if (it != per_source_.end()) mine = it->second;
  }
  if (most <= mine + 1) return false;
  for (const auto& [deadline, id] : expiry_) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second->source != busiest) continue;
    LogDos(kDropped,
           "listener " + endpoint_.ToString() + ": dropped " + it->second->peer +
               " (handshake not finished) to admit " + (source.empty() ? "a peer" : source) + ": " +
               std::to_string(pending_.size()) + " connections are handshaking, the limit, and " +
               busiest + " holds the most (" + std::to_string(most) + ")");
    Remove(id);
    return true;
  }
  return false;
}

void StreamListener::Drive(Pending* p) {
  for (;;) {
    if (!p->auth.authenticated()) {
      ControlMessage m;
      bool got = false;
      Status s = p->channel.TryReceive(&m, &got);
      if (!s.ok()) return Finish(p->id, std::move(s), nullptr);
      if (!got) return;
      AuthReply reply;
      bool done = false;
      s = p->auth.OnMessage(m, &reply, &done);
      if (reply.present) {
        // A fresh socket's buffer takes these few bytes; a peer that keeps it full is not
        // waited for.
        Status w = p->channel.Send(reply.type, reply.payload, Deadline::After(0), nullptr);
        if (s.ok() && !w.ok()) s = w;
      }
      if (!s.ok()) return Finish(p->id, std::move(s), nullptr);
      continue;
    }
    // Authenticated: wait (without waiting) for the peer's SETUP, then set up; the set-up
    // reads it from the buffer and never waits on the peer.
    bool whole = false;
    Status s = p->channel.Fill(&whole);
    if (!s.ok()) return Finish(p->id, std::move(s), nullptr);
    if (!whole) return;
    std::unique_ptr<Pending> taken = Remove(p->id);
    taken->channel.set_max_payload(wire::kMaxControlPayload);
    std::unique_ptr<Connection> conn;
    s = set_up_(std::move(taken->sock), &taken->channel, taken->peer, options_, memory_, &conn);
    if (!s.ok()) {
      LogDos(kFailed, "listener " + endpoint_.ToString() + ": connection from " + taken->peer +
                          " failed: " + s.ToString());
      conn.reset();
    }
    ready_.push_back({std::move(s), std::move(conn)});
    return;
  }
}

void StreamListener::Finish(uint64_t id, Status status, std::unique_ptr<Connection> conn) {
  std::unique_ptr<Pending> p = Remove(id);
  if (!status.ok() && !status.Is(Status::Code::kPermissionDenied) && p != nullptr) {
    // PermissionDenied was logged by the handshake; the listener stays usable either way.
    LogDos(kFailed, "listener " + endpoint_.ToString() + ": connection from " + p->peer +
                        " failed: " + status.ToString());
  }
  ready_.push_back({std::move(status), std::move(conn)});
}

std::unique_ptr<StreamListener::Pending> StreamListener::Remove(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return nullptr;
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->sock.get(), nullptr);
  if (!p->source.empty()) {
    auto s = per_source_.find(p->source);
    if (s != per_source_.end() && --s->second == 0) per_source_.erase(s);
  }
  return p;
}

void StreamListener::ExpireDue(int64_t now) {
  while (!expiry_.empty()) {
    const auto [deadline, id] = expiry_.front();
    auto it = pending_.find(id);
    if (it == pending_.end()) {
      expiry_.pop_front();
      continue;
    }
    if (deadline > now) break;
    expiry_.pop_front();
    Pending* p = it->second.get();
    Status t = Status::Timeout("peer " + p->peer + " did not finish the handshake within " +
                               std::to_string(timeout_ms_) + " ms (waiting for " +
                               p->auth.awaiting() + ")");
    LogDos(kDropped, "listener " + endpoint_.ToString() + ": dropped " + p->peer +
                         ": handshake not finished within " + std::to_string(timeout_ms_) +
                         " ms (waiting for " + p->auth.awaiting() + ")");
    Remove(id);
    ready_.push_back({std::move(t), nullptr});
  }
  for (LogKind k : {kRefused, kDropped, kFailed}) {
    if (log_suppressed_[k] > 0 && now - log_window_ms_[k] >= 1000) LogDos(k, std::string());
  }
}

void StreamListener::LogDos(LogKind kind, const std::string& line) {
  static const char* const kWhat[] = {"refused", "dropped", "failed"};
  const int64_t now = NowMs();
  if (now - log_window_ms_[kind] >= 1000) {
    if (log_suppressed_[kind] > 0) {
      RAMP_WARN("listener %s: %llu more connections %s, not logged", endpoint_.ToString().c_str(),
                static_cast<unsigned long long>(log_suppressed_[kind]), kWhat[kind]);
    }
    log_window_ms_[kind] = now;
    log_lines_[kind] = 0;
    log_suppressed_[kind] = 0;
  }
  if (line.empty()) return;
  if (log_lines_[kind] < kDosLinesPerSecond) {
    log_lines_[kind]++;
    RAMP_WARN("%s", line.c_str());
  } else {
    log_suppressed_[kind]++;
  }
}

void StreamListener::Close() {
  if (!fd_.valid()) return;
  ready_.clear();
  pending_.clear();
  per_source_.clear();
  expiry_.clear();
  epoll_.reset();
  fd_.reset();
  if (on_close_) on_close_();
}

}  // namespace ramp::transport::detail
