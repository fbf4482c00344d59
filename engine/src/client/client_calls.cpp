// Connections, requests and waiting: the part of the client that talks to servers.
//
// A backend must never block without looking at its interrupt flags: every wait here
// follows the library's one wait policy (client/node_channel.h: poll, spin a few rounds,
// sleep on the doorbells for a few milliseconds at most, call the wait hook, deadline).
#include <time.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "client/client_impl.h"
#include "ramp/log.h"

namespace ramp {

Client::Impl::~Impl() {
  scan_spares.reset();  // a page reader's connections and buffers
  nodes.clear();        // channels close their connections and leave the doorbell set
}

std::string Client::Impl::NodeName(uint32_t node) const {
  if (node < nodes.size())
    return "node " + std::to_string(node) + " (" + nodes[node].endpoints + ")";
  return "node " + std::to_string(node);
}

ChannelKind Client::Impl::ReadChannel() const {
  return options.read_path == ReadPath::kRpc ? ChannelKind::kRpc : ChannelKind::kFast;
}

ChannelKind Client::Impl::WriteChannel() const {
  return options.write_path == WritePath::kRpc ? ChannelKind::kRpc : ChannelKind::kFast;
}

ChannelKind Client::Impl::Effective(uint32_t node, ChannelKind kind) const {
  // Without an endpoint of the preferred provider, the fast channel is the rpc one.
  if (kind == ChannelKind::kFast && !nodes[node].channels[1].has_endpoint()) {
    return ChannelKind::kRpc;
  }
  return kind;
}

const transport::Endpoint* Client::Impl::FastEndpoint(uint32_t node) const {
  if (node >= nodes.size()) return nullptr;
  const NodeChannel& ch =
      nodes[node].channels[static_cast<int>(Effective(node, ChannelKind::kFast))];
  return ch.has_endpoint() ? &ch.endpoint() : nullptr;
}

Status Client::Impl::Connected(uint32_t node, ChannelKind kind, NodeChannel** out) {
  if (node >= nodes.size()) RAMP_RETURN_IF_ERROR(LearnNodes(node));
  kind = Effective(node, kind);
  NodeChannel& ch = nodes[node].channels[static_cast<int>(kind)];
  if (!ch.has_endpoint()) {
    return Status::Unavailable(NodeName(node) + " has no tcp endpoint");
  }
  // A channel reconnects only once a failure reset it: a request is never silently re-sent
  // to a server that may have lost what earlier requests of its transaction left there.
  if (!ch.is_open()) {
    // A channel that failed before (the node restarted, or the connection broke) is opened
    // again: the node, if it is the home of partitions cached here, may have forgotten this
    // client as their sharer and where to push their moves (routes live in its memory).
    const bool again = !ch.last_error().ok();
    RAMP_RETURN_IF_ERROR(ch.Open());
    if (again) Reregister(node);
  }
  *out = &ch;
  return Status::OK();
}

void Client::Impl::Reregister(uint32_t home) {
  if (reregistering) return;  // the LOOKUP below may open the read channel itself
  std::vector<PartitionId> mine;
  for (const auto& [p, pl] : placements) {
    if (HomeOf(p, homes) == home) mine.push_back(p);
  }
  if (mine.empty()) return;
  reregistering = true;
  // LOOKUP records this client as a sharer of each partition again and notes the session as
  // its route. The reply is not waited for (dropped when it comes): the cached placements
  // stay right or are corrected by MOVED, as before.
  protocol::LookupRequest req{mine};
  std::string body;
  protocol::Encode(req, &body);
  uint64_t id = 0;
  if (Call(home, ReadChannel(), protocol::Op::kLookup, static_cast<uint32_t>(mine.size()), body,
           &id)
          .ok()) {
    calls.erase(id);
    stats.sharer_lookups++;
  }
  reregistering = false;
}

void Client::Impl::Fail(uint32_t node, ChannelKind kind, const Status& why) {
  nodes[node].channels[static_cast<int>(kind)].Reset(why);
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
  NodeChannel* ch = nullptr;
  RAMP_RETURN_IF_ERROR(Connected(node, kind, &ch));
  const ChannelKind used = Effective(node, kind);
  const uint64_t request_id = next_request++;
  Status st = ch->Send(op, count, request_id, body);
  if (!st.ok()) {
    if (st.Is(Status::Code::kTooLarge)) return st;
    Fail(node, used, st);
    return Status::Unavailable("cannot send to " + NodeName(node) + ": " + st.message());
  }
  PendingCall& call = calls[request_id];
  call.node = node;
  call.channel = used;
  *id = request_id;
  return Status::OK();
}

Status Client::Impl::Progress(uint32_t node, ChannelKind kind, bool* did) {
  transport::Connection* conn = nodes[node].channels[static_cast<int>(kind)].conn();
  if (conn == nullptr) return Status::OK();
  transport::Completion completions[16];
  // One-sided reads complete through callbacks run inside Poll.
  if (conn->Poll(completions, 16) > 0) *did = true;
  transport::MessageView msg;
  while (conn->Receive(&msg)) {
    *did = true;
    std::string_view bytes(reinterpret_cast<const char*>(msg.data), msg.size);
    protocol::Header h;
    Status st = protocol::DecodeHeader(bytes, &h);
    if (st.ok() && !h.is_reply()) st = Status::Corruption("server sent a request to a client");
    if (!st.ok()) {
      conn->Release();
      Fail(node, kind, st);
      return Status::OK();
    }
    clock.Observe(h.clock);
    if (h.request_id == 0 && h.base_op() == protocol::Op::kPlacement) {
      // Unasked: a home telling its sharers of a cutover.
      TakePlacements(h, bytes.substr(protocol::kHeaderBytes));
      conn->Release();
      continue;
    }
    auto it = calls.find(h.request_id);
    if (it != calls.end() && !it->second.done) {
      it->second.done = true;
      it->second.header = h;
      it->second.reply.assign(bytes);
    }
    // A reply to a request nobody waits for any more (timed out) is dropped.
    conn->Release();
  }
  if (conn->closed()) {
    Fail(node, kind, conn->close_status());
    *did = true;
  }
  return Status::OK();
}

void Client::Impl::TakePlacements(const protocol::Header& h, std::string_view body) {
  if (options.debug_ignore_placement_pushes) return;
  protocol::PlacementPush push;
  if (!protocol::Decode(body, h.count, &push).ok()) return;  // best effort: MOVED still works
  for (const auto& [p, pl] : push.entries) {
    if (pl.owner >= nodes.size()) continue;
    auto it = placements.find(p);
    if (it != placements.end() && it->second.epoch >= pl.epoch) continue;
    placements[p] = CachedPlacement{pl.owner, pl.epoch};
    stats.placements_pushed++;
  }
}

void Client::Impl::TakePushes() {
  if (options.debug_ignore_placement_pushes) return;
  timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  const int64_t tick = int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
  if (tick == last_push_poll_ms) return;
  last_push_poll_ms = tick;
  for (uint32_t n = 0; n < nodes.size(); n++) {
    for (ChannelKind k : {ChannelKind::kRpc, ChannelKind::kFast}) {
      bool did = false;
      if (nodes[n].channels[static_cast<int>(k)].conn() != nullptr) (void)Progress(n, k, &did);
    }
  }
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
  Waiter waiter(*this, &doorbells);
  std::vector<std::pair<uint32_t, ChannelKind>> channels;  // (node, kind) with calls pending
  for (;;) {
    bool all_done = true;
    channels.clear();
    for (uint64_t id : ids) {
      auto it = calls.find(id);
      if (it == calls.end() || it->second.done) continue;
      all_done = false;
      const std::pair<uint32_t, ChannelKind> ch{it->second.node, it->second.channel};
      if (std::find(channels.begin(), channels.end(), ch) == channels.end()) {
        channels.push_back(ch);
      }
    }
    if (all_done) return Status::OK();
    bool did = false;
    for (const auto& [node, kind] : channels) {
      RAMP_RETURN_IF_ERROR(Progress(node, kind, &did));
    }
    RAMP_RETURN_IF_ERROR(waiter.Next(did, [&] {
      std::string who;
      for (const auto& ch : channels) who += (who.empty() ? "" : ", ") + NodeName(ch.first);
      return "no reply from " + who + " within " + std::to_string(options.timeout_ms) + " ms";
    }));
  }
}

bool Client::Impl::Replied(std::span<const uint64_t> ids) {
  std::vector<std::pair<uint32_t, ChannelKind>> channels;
  for (uint64_t id : ids) {
    auto it = calls.find(id);
    if (it == calls.end() || it->second.done) continue;
    const std::pair<uint32_t, ChannelKind> ch{it->second.node, it->second.channel};
    if (std::find(channels.begin(), channels.end(), ch) == channels.end()) channels.push_back(ch);
  }
  if (channels.empty()) return true;
  bool did = false;
  for (const auto& [node, kind] : channels) {
    if (!Progress(node, kind, &did).ok()) return true;
  }
  return std::all_of(ids.begin(), ids.end(), [&](uint64_t id) {
    auto it = calls.find(id);
    return it == calls.end() || it->second.done;
  });
}

Status Client::Impl::WaitOneSided(std::span<const uint32_t> which) {
  // The completions first: a read the provider finished when it was posted (shm copies at
  // once) is over once its callback ran, without a look at the message rings (Begin's
  // TakePushes and every request's wait read those) or at the clock.
  bool pending = false;
  for (uint32_t n : which) {
    transport::Connection* conn =
        nodes[n].channels[static_cast<int>(Effective(n, ChannelKind::kFast))].conn();
    if (conn == nullptr || conn->outstanding() == 0) continue;
    transport::Completion completions[16];
    (void)conn->Poll(completions, 16);  // callbacks run inside; none asks for a wr_id
    if (conn->outstanding() != 0 || conn->closed()) pending = true;
  }
  if (!pending) return Status::OK();
  Waiter waiter(*this, &doorbells);
  for (;;) {
    bool busy = false;
    bool did = false;
    for (uint32_t n : which) {
      const ChannelKind kind = Effective(n, ChannelKind::kFast);
      const transport::Connection* conn = nodes[n].channels[static_cast<int>(kind)].conn();
      if (conn == nullptr || conn->outstanding() == 0) continue;
      RAMP_RETURN_IF_ERROR(Progress(n, kind, &did));
      // Still waiting only if something is left after this round (a read whose callback ran
      // in it is over: no idle round, no clock read for it).
      const transport::Connection* after = nodes[n].channels[static_cast<int>(kind)].conn();
      if (after != nullptr && after->outstanding() != 0) busy = true;
    }
    if (!busy) return Status::OK();
    RAMP_RETURN_IF_ERROR(waiter.Next(did, [&] {
      return "one-sided reads did not complete within " + std::to_string(options.timeout_ms) +
             " ms";
    }));
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

Status Client::Impl::CallAndWait(uint32_t node, ChannelKind kind, protocol::Op op, uint32_t count,
                                 std::string_view body, PendingCall* out) {
  uint64_t id = 0;
  RAMP_RETURN_IF_ERROR(Call(node, kind, op, count, body, &id));
  RAMP_RETURN_IF_ERROR(Wait(std::span<const uint64_t>(&id, 1)));
  return TakeReply(id, out);
}

}  // namespace ramp
