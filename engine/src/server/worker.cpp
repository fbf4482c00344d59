#include "server/worker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ramp/log.h"
#include "server/terminator.h"

namespace ramp::server {
namespace {
// Messages served from one connection before moving on to the next (fairness).
constexpr int kMessagesPerTurn = 64;
constexpr int kSleepTimeoutMs = 100;

// The mailbox of the worker running on this thread, if any.
thread_local const void* tls_own_mailbox = nullptr;

// Under box.mu, after adding to it: marks it ready and wakes its worker, only when that is
// needed. A worker posting to its own mailbox (an intent it released grants a waiter of its
// own sessions) is awake and looks at the mailbox before it sleeps; and when the mailbox was
// ready already, whoever made it so has woken the worker (or is the worker). Saves an eventfd
// write, and the wake-up of a worker that is not asleep, per deferred reply.
template <class Box>
void MarkReady(Box& box) {
  const bool was_ready = box.ready.exchange(true, std::memory_order_acq_rel);
  if (was_ready || tls_own_mailbox == &box) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(box.wake_fd, &one, sizeof(one));
}
}  // namespace

std::shared_ptr<const DeferredReply::PostFn> Worker::MakePost(std::shared_ptr<Mailbox> box) {
  return std::make_shared<const DeferredReply::PostFn>([box](uint64_t session, std::string reply) {
    std::lock_guard lock(box->mu);
    if (box->closed) return;
    box->replies.emplace_back(session, std::move(reply));
    MarkReady(*box);
  });
}

std::shared_ptr<const PostWritesFn> Worker::MakePostWrites(std::shared_ptr<Mailbox> box) {
  return std::make_shared<const PostWritesFn>(
      [box](uint64_t session, std::shared_ptr<OneSidedReply> reply) {
        std::lock_guard lock(box->mu);
        if (box->closed) return;
        box->writebacks.emplace_back(session, std::move(reply));
        MarkReady(*box);
      });
}

Worker::Worker(ServerContext* ctx, int index, int spin_rounds)
    : ctx_(ctx),
      index_(index),
      spin_rounds_(spin_rounds),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      mailbox_(std::make_shared<Mailbox>()),
      handler_(ctx, MakePost(mailbox_)) {
  mailbox_->wake_fd = wake_fd_;
  handler_.set_post_writes(MakePostWrites(mailbox_));
}

Worker::~Worker() {
  Stop();
  {
    std::lock_guard lock(mailbox_->mu);
    mailbox_->closed = true;
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status Worker::Start() {
  if (wake_fd_ < 0) return Status::FromErrno("eventfd", errno);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Status::FromErrno("epoll_create1", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno);
  }
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

void Worker::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  thread_.join();
  for (auto& s : sessions_) s->conn->Close();
  sessions_.clear();
}

void Worker::Adopt(std::unique_ptr<transport::Connection> conn) {
  {
    std::lock_guard lock(incoming_mu_);
    incoming_.push_back(std::move(conn));
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void Worker::TakeNewSessions() {
  std::vector<std::unique_ptr<transport::Connection>> fresh;
  {
    std::lock_guard lock(incoming_mu_);
    fresh.swap(incoming_);
  }
  for (auto& conn : fresh) {
    auto s = std::make_unique<Session>();
    s->id = ctx_->next_session.fetch_add(1, std::memory_order_relaxed);
    s->peer = conn->peer();
    s->conn = std::move(conn);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = s.get();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, s->conn->wait_fd(), &ev) != 0) {
      RAMP_ERROR("worker %d: cannot watch connection from %s: %s", index_, s->peer.c_str(),
                 std::strerror(errno));
      s->conn->Close();
      continue;
    }
    RAMP_DEBUG("worker %d: serving %s", index_, s->peer.c_str());
    sessions_.push_back(std::move(s));
  }
  session_count_.store(sessions_.size(), std::memory_order_relaxed);
}

void Worker::Drop(size_t index, const Status& why) {
  Session& s = *sessions_[index];
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s.conn->wait_fd(), nullptr);
  if (why.ok()) {
    RAMP_DEBUG("worker %d: %s disconnected", index_, s.peer.c_str());
  } else {
    RAMP_WARN("closing connection from %s: %s", s.peer.c_str(), why.ToString().c_str());
  }
  s.conn->Close();
  // The terminator resolves what a client left prepared once its last connection here is
  // gone (terminator.cpp, ResolveGone).
  if (s.counted) {
    auto presence = ClientPresence::For(ctx_->store);
    presence->Disconnected(s.client_id);
    // Its write intents go with its last connection: a vanished backend locks nothing.
    if (!presence->IsConnected(s.client_id)) ctx_->intents->ReleaseClient(s.client_id);
  }
  sessions_[index] = std::move(sessions_.back());
  sessions_.pop_back();
  session_count_.store(sessions_.size(), std::memory_order_relaxed);
  ctx_->connections.fetch_sub(1, std::memory_order_relaxed);
}

bool Worker::Serve(Session& s) {
  bool did = false;
  transport::Completion completions[16];
  if (s.conn->Poll(completions, 16) > 0) did = true;
  transport::MessageView msg;
  for (int i = 0; i < kMessagesPerTurn && s.conn->Receive(&msg); i++) {
    did = true;
    Status st = handler_.Handle(
        s, std::string_view(reinterpret_cast<const char*>(msg.data), msg.size), &reply_);
    s.conn->Release();
    if (s.greeted && !s.counted && s.peer_kind == 0) {
      s.counted = true;
      ClientPresence::For(ctx_->store)->Connected(s.client_id);
    }
    if (!st.ok()) {
      // A protocol violation: close this one connection with the reason.
      s.violation = st;
      s.conn->Close();
      break;
    }
    if (!reply_.empty()) {
      Status sent = s.conn->Send(reply_.data(), reply_.size());
      if (!sent.ok()) {
        RAMP_WARN("cannot reply to %s: %s", s.peer.c_str(), sent.ToString().c_str());
        s.conn->Close();
        break;
      }
    }
  }
  return did;
}

bool Worker::SendDeferred() {
  if (!mailbox_->ready.load(std::memory_order_acquire)) return false;
  {
    std::lock_guard lock(mailbox_->mu);
    mail_batch_.swap(mailbox_->replies);
    for (auto& w : mailbox_->writebacks) writebacks_.push_back(std::move(w));
    mailbox_->writebacks.clear();
    mailbox_->ready.store(false, std::memory_order_relaxed);
  }
  for (auto& [id, reply] : mail_batch_) {
    for (auto& s : sessions_) {
      if (s->id != id) continue;
      if (!s->conn->closed()) {
        Status sent = s->conn->Send(reply.data(), reply.size());
        if (!sent.ok()) {
          RAMP_WARN("cannot reply to %s: %s", s->peer.c_str(), sent.ToString().c_str());
          s->conn->Close();
        }
      }
      break;
    }
  }
  mail_batch_.clear();
  return true;
}

bool Worker::PumpWrites() {
  bool did = false;
  for (size_t i = 0; i < writebacks_.size();) {
    auto& [id, wb] = writebacks_[i];
    transport::Connection* conn = nullptr;
    for (auto& s : sessions_) {
      if (s->id == id) conn = s->conn.get();
    }
    if (conn == nullptr || conn->closed()) {
      // The peer went away: its pages are dropped (the staging buffer goes back with wb).
      writebacks_[i] = std::move(writebacks_.back());
      writebacks_.pop_back();
      did = true;
      continue;
    }
    std::shared_ptr<OneSidedReply> keep = wb;
    auto finish = [this, conn, keep] {
      std::string error;
      if (keep->failed.ok() && keep->recheck) keep->recheck(&keep->reply);
      const std::string* reply = &keep->reply;
      if (!keep->failed.ok()) {
        protocol::EncodeErrorReply(keep->request, ctx_->clock->Peek(),
                                   keep->failed.Annotate("writing pages to the client"), &error);
        reply = &error;
      }
      Status sent = conn->Send(reply->data(), reply->size());
      if (!sent.ok()) {
        RAMP_WARN("cannot reply to %s: %s", conn->peer().c_str(), sent.ToString().c_str());
        conn->Close();
      }
    };
    if (keep->writes.empty() && keep->posted == 0) {
      keep->posted = 1;  // nothing to write (every item failed): reply now
      finish();
    }
    while (keep->posted < keep->writes.size()) {
      const OneSidedReply::Write& w = keep->writes[keep->posted];
      Status st =
          conn->PostWrite(w.local, keep->dest, w.offset, w.len, [keep, finish](const Status& done) {
            if (!done.ok() && keep->failed.ok()) keep->failed = done;
            if (++keep->completed == keep->writes.size()) finish();
          });
      if (st.Is(Status::Code::kBusy)) break;  // the rest after completions
      did = true;
      keep->posted++;
      if (!st.ok()) {
        if (keep->failed.ok()) keep->failed = st;
        if (++keep->completed == keep->writes.size()) finish();
      }
    }
    if (keep->posted >= keep->writes.size()) {
      writebacks_[i] = std::move(writebacks_.back());
      writebacks_.pop_back();
      continue;
    }
    i++;
  }
  return did;
}

void Worker::Sleep() {
  // A deferred reply may have arrived since the last look; page writes may wait to be posted.
  if (mailbox_->ready.load(std::memory_order_acquire) || !writebacks_.empty()) return;
  for (auto& s : sessions_) {
    // Arm returns false when something is already waiting: do not sleep then.
    if (!s->conn->Arm()) return;
  }
  epoll_event events[64];
  int n = epoll_wait(epoll_fd_, events, 64, kSleepTimeoutMs);
  for (int i = 0; i < n; i++) {
    if (events[i].data.fd == wake_fd_) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = read(wake_fd_, &v, sizeof(v));
    }
  }
}

void Worker::Run() {
  tls_own_mailbox = mailbox_.get();
  int idle_rounds = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    TakeNewSessions();
    bool did = SendDeferred();
    if (PumpWrites()) did = true;
    for (size_t i = 0; i < sessions_.size();) {
      Session& s = *sessions_[i];
      if (Serve(s)) did = true;
      if (s.conn->closed()) {
        // A peer that went away is routine; a malformed frame or a protocol violation is
        // logged with its reason.
        Status why = !s.violation.ok() ? s.violation : s.conn->close_status();
        Drop(i, why.Is(Status::Code::kUnavailable) ? Status::OK() : why);
        continue;
      }
      i++;
    }
    // Replies parked with the group commit this round: write their batch on this thread
    // unless one is being written (no wake-up of the log writer, then of this worker).
    if (handler_.TakeDurableWaits()) ctx_->store->FlushLogInline();
    if (did) {
      idle_rounds = 0;
    } else if (++idle_rounds >= spin_rounds_) {
      Sleep();
      idle_rounds = 0;
    }
  }
}

}  // namespace ramp::server
