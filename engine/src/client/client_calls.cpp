// Connections, requests and waiting: the part of the client that talks to servers.
//
// A backend must never block without looking at its interrupt flags, so every wait here
// polls the connections, sleeps at most a few milliseconds at a time in epoll, and calls
// the wait hook between sleeps.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "client/client_impl.h"
#include "ramp/log.h"

namespace ramp {
namespace {
constexpr int kSpinRounds = 4;
constexpr int kMaxSleepMs = 10;
constexpr int kHookEveryRounds = 1024;

uint64_t EpollTag(uint32_t node, ChannelKind kind) {
  return (static_cast<uint64_t>(node) << 1) | static_cast<uint64_t>(kind);
}
}  // namespace

Client::Impl::~Impl() {
  for (auto& n : nodes) {
    for (auto& ch : n.channels) {
      if (ch.conn) ch.conn->Close();
    }
  }
  if (epoll_fd >= 0) close(epoll_fd);
}

std::string Client::Impl::NodeName(uint32_t node) const {
  if (node < nodes.size()) return "node " + std::to_string(node) + " (" + nodes[node].endpoints + ")";
  return "node " + std::to_string(node);
}

ChannelKind Client::Impl::ReadChannel() const {
  return options.read_path == ReadPath::kRpc ? ChannelKind::kRpc : ChannelKind::kFast;
}

ChannelKind Client::Impl::WriteChannel() const {
  return options.write_path == WritePath::kRpc ? ChannelKind::kRpc : ChannelKind::kFast;
}

Status Client::Impl::Connect(uint32_t node, ChannelKind kind) {
  Channel& ch = nodes[node].channels[static_cast<int>(kind)];
  transport::TransportOptions t;
  t.token = options.token;
  t.ring_bytes = options.ring_bytes;
  t.connect_timeout_ms = options.connect_timeout_ms;
  t.handshake_timeout_ms = options.connect_timeout_ms;
  t.responder_thread = false;  // a backend must not get threads: serve peers while polling
  t.wait_hook = options.wait_hook;
  std::unique_ptr<transport::Connection> conn;
  Status st = transport::Connect(ch.endpoint, t, memory, &conn);
  if (!st.ok()) {
    ch.last_error = st;
    return Status(st.code(), "cannot connect to " + NodeName(node) + " at " +
                                 ch.endpoint.ToString() + ": " + st.message());
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = EpollTag(node, kind);
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, conn->wait_fd(), &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno);
  }
  ch.conn = std::move(conn);

  protocol::Hello hello;
  hello.client_id = client_id;
  std::string body;
  protocol::Encode(hello, &body);
  PendingCall reply;
  st = CallAndWait(node, kind, protocol::Op::kHello, 0, body, &reply);
  if (st.ok()) st = protocol::Decode(reply.body(), &ch.hello);
  if (st.ok() && ch.hello.node != node) {
    st = Status::InvalidArgument("server at " + ch.endpoint.ToString() + " says it is node " +
                                 std::to_string(ch.hello.node) + ", the cluster lists it as node " +
                                 std::to_string(node));
  }
  if (!st.ok()) {
    Fail(node, kind, st);
    ch.last_error = st;
    return st.Annotate("HELLO to " + NodeName(node));
  }
  return Status::OK();
}

ChannelKind Client::Impl::Effective(uint32_t node, ChannelKind kind) const {
  // Without an endpoint of the preferred provider, the fast channel is the rpc one.
  if (kind == ChannelKind::kFast && !nodes[node].channels[1].has_endpoint) return ChannelKind::kRpc;
  return kind;
}

Status Client::Impl::Connected(uint32_t node, ChannelKind kind, Channel** out) {
  if (node >= nodes.size()) return Status::Internal("no node " + std::to_string(node));
  kind = Effective(node, kind);
  Channel& ch = nodes[node].channels[static_cast<int>(kind)];
  if (!ch.has_endpoint) {
    return Status::Unavailable(NodeName(node) + " has no tcp endpoint");
  }
  if (!ch.conn) RAMP_RETURN_IF_ERROR(Connect(node, kind));
  *out = &ch;
  return Status::OK();
}

void Client::Impl::Fail(uint32_t node, ChannelKind kind, const Status& why) {
  Channel& ch = nodes[node].channels[static_cast<int>(kind)];
  if (ch.conn) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, ch.conn->wait_fd(), nullptr);
    ch.conn->Close();
    ch.conn.reset();
  }
  ch.last_error = why;
  const Status err = Status::Unavailable(NodeName(node) + " went away: " + why.message());
  for (auto& [id, call] : calls) {
    if (!call.done && call.node == node && call.channel == kind) {
      call.done = true;
      call.transport_error = err;
    }
  }
}

Status Client::Impl::Call(uint32_t node, ChannelKind kind, protocol::Op op, uint32_t count,
                          std::string_view body, uint64_t* id) {
  Channel* ch = nullptr;
  RAMP_RETURN_IF_ERROR(Connected(node, kind, &ch));
  const ChannelKind used = Effective(node, kind);
  protocol::Header h;
  h.op = static_cast<uint16_t>(op);
  h.count = count;
  h.request_id = next_request++;
  h.clock = clock.Peek();
  std::string header;
  header.reserve(protocol::kHeaderBytes);
  protocol::EncodeHeader(h, &header);
  iovec iov[2] = {{header.data(), header.size()},
                  {const_cast<char*>(body.data()), body.size()}};
  Status st = ch->conn->SendV(iov, body.empty() ? 1 : 2);
  if (!st.ok()) {
    if (st.Is(Status::Code::kTooLarge)) return st;
    Fail(node, used, st);
    return Status::Unavailable("cannot send to " + NodeName(node) + ": " + st.message());
  }
  PendingCall& call = calls[h.request_id];
  call.node = node;
  call.channel = used;
  *id = h.request_id;
  return Status::OK();
}

Status Client::Impl::Progress(Channel& ch, uint32_t node, bool* did) {
  if (!ch.conn) return Status::OK();
  transport::Completion completions[16];
  // One-sided reads complete through callbacks run inside Poll.
  if (ch.conn->Poll(completions, 16) > 0) *did = true;
  transport::MessageView msg;
  while (ch.conn->Receive(&msg)) {
    *did = true;
    std::string_view bytes(reinterpret_cast<const char*>(msg.data), msg.size);
    protocol::Header h;
    Status st = protocol::DecodeHeader(bytes, &h);
    if (st.ok() && !h.is_reply()) st = Status::Corruption("server sent a request to a client");
    if (!st.ok()) {
      ch.conn->Release();
      const ChannelKind kind = (&ch == &nodes[node].channels[0]) ? ChannelKind::kRpc
                                                                  : ChannelKind::kFast;
      Fail(node, kind, st);
      return Status::OK();
    }
    clock.Observe(h.clock);
    auto it = calls.find(h.request_id);
    if (it != calls.end() && !it->second.done) {
      it->second.done = true;
      it->second.header = h;
      it->second.reply.assign(bytes);
    }
    // A reply to a request nobody waits for any more (timed out) is dropped.
    ch.conn->Release();
  }
  if (ch.conn->closed()) {
    const ChannelKind kind = (&ch == &nodes[node].channels[0]) ? ChannelKind::kRpc
                                                                : ChannelKind::kFast;
    Fail(node, kind, ch.conn->close_status());
    *did = true;
  }
  return Status::OK();
}

Status Client::Impl::Sleep(int timeout_ms) {
  // Every connection is in the epoll set, so every one must be armed (which also drains its
  // doorbell): a doorbell rung earlier on a connection we are not waiting on would otherwise
  // stay readable and turn every sleep into a busy loop.
  for (auto& n : nodes) {
    for (auto& ch : n.channels) {
      if (ch.conn && !ch.conn->Arm()) return Status::OK();  // something already waits
    }
  }
  epoll_event events[16];
  stats.sleeps++;
  int n = epoll_wait(epoll_fd, events, 16, timeout_ms);
  if (n == 0) stats.sleep_timeouts++;
  if (n < 0 && errno != EINTR) return Status::FromErrno("epoll_wait", errno);
  return Status::OK();
}

Status Client::Impl::Wait(std::span<const uint64_t> ids) {
  Status st = WaitLoop(ids);
  // Calls nobody will collect are forgotten; late replies to them are dropped.
  if (!st.ok()) {
    for (uint64_t id : ids) calls.erase(id);
  }
  return st;
}

Status Client::Impl::WaitLoop(std::span<const uint64_t> ids) {
  const auto deadline = Deadline();
  std::vector<Channel*> channels;
  std::vector<uint32_t> channel_nodes;
  int idle = 0;
  for (uint64_t round = 1;; round++) {
    bool all_done = true;
    channels.clear();
    channel_nodes.clear();
    for (uint64_t id : ids) {
      auto it = calls.find(id);
      if (it == calls.end() || it->second.done) continue;
      all_done = false;
      Channel* ch = &nodes[it->second.node].channels[static_cast<int>(it->second.channel)];
      if (std::find(channels.begin(), channels.end(), ch) == channels.end()) {
        channels.push_back(ch);
        channel_nodes.push_back(it->second.node);
      }
    }
    if (all_done) return Status::OK();
    bool did = false;
    for (size_t i = 0; i < channels.size(); i++) {
      RAMP_RETURN_IF_ERROR(Progress(*channels[i], channel_nodes[i], &did));
    }
    if (did) {
      idle = 0;
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      std::string who;
      for (uint32_t n : channel_nodes) who += (who.empty() ? "" : ", ") + NodeName(n);
      return Status::Timeout("no reply from " + who + " within " +
                             std::to_string(options.timeout_ms) + " ms");
    }
    if (++idle >= kSpinRounds) {
      idle = 0;
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count());
      RAMP_RETURN_IF_ERROR(Sleep(std::clamp(left, 1, kMaxSleepMs)));
      if (options.wait_hook) RAMP_RETURN_IF_ERROR(options.wait_hook());
    } else if (round % kHookEveryRounds == 0 && options.wait_hook) {
      RAMP_RETURN_IF_ERROR(options.wait_hook());
    }
  }
}

Status Client::Impl::WaitOneSided(std::span<const uint32_t> which) {
  const auto deadline = Deadline();
  int idle = 0;
  std::vector<Channel*> channels;
  for (;;) {
    bool busy = false;
    bool did = false;
    channels.clear();
    for (uint32_t n : which) {
      Channel& ch = nodes[n].channels[static_cast<int>(Effective(n, ChannelKind::kFast))];
      if (!ch.conn || ch.conn->outstanding() == 0) continue;
      busy = true;
      channels.push_back(&ch);
      RAMP_RETURN_IF_ERROR(Progress(ch, n, &did));
    }
    if (!busy) return Status::OK();
    if (did) {
      idle = 0;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Timeout("one-sided reads did not complete within " +
                             std::to_string(options.timeout_ms) + " ms");
    }
    if (++idle >= kSpinRounds) {
      idle = 0;
      RAMP_RETURN_IF_ERROR(Sleep(1));
      if (options.wait_hook) RAMP_RETURN_IF_ERROR(options.wait_hook());
    }
  }
}

Status Client::Impl::TakeReply(uint64_t id, PendingCall* out) {
  auto it = calls.find(id);
  if (it == calls.end()) return Status::Internal("no call " + std::to_string(id));
  *out = std::move(it->second);
  calls.erase(it);
  if (!out->done) return Status::Internal("call " + std::to_string(id) + " not finished");
  if (!out->transport_error.ok()) return out->transport_error;
  return protocol::DecodeErrorReply(out->header, out->body());
}

Status Client::Impl::CallAndWait(uint32_t node, ChannelKind kind, protocol::Op op,
                                 uint32_t count, std::string_view body, PendingCall* out) {
  uint64_t id = 0;
  RAMP_RETURN_IF_ERROR(Call(node, kind, op, count, body, &id));
  RAMP_RETURN_IF_ERROR(Wait(std::span<const uint64_t>(&id, 1)));
  return TakeReply(id, out);
}

}  // namespace ramp
