// The pipelined page reader (ramp/page_reader.h).
#include "ramp/page_reader.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "client/client_impl.h"
#include "common/record.h"
#include "protocol/page_messages.h"
#include "ramp/log.h"

namespace ramp {

using protocol::PageReadItem;
using protocol::PageReadResult;

namespace {
constexpr int kSpinRounds = 256;
constexpr int kHookEveryRounds = 4096;
constexpr int kMaxSleepMs = 1;
}  // namespace

Status CheckPageReply(const PageReadItem& asked, const PageReadResult& got, const uint8_t* data) {
  const PageReadItem& g = got.item;
  if (!(g.page == asked.page) || g.length != asked.length || g.dest_offset != asked.dest_offset) {
    return Status::Corruption(
        "READ_PAGES reply names page " + std::to_string(g.page.page_no) + " of " +
        g.page.part.ToString() + " (epoch " + std::to_string(g.page.epoch) + ", " +
        std::to_string(g.length) + " bytes at " + std::to_string(g.dest_offset) + ") where page " +
        std::to_string(asked.page.page_no) + " of " + asked.page.part.ToString() + " (epoch " +
        std::to_string(asked.page.epoch) + ", " + std::to_string(asked.length) + " bytes at " +
        std::to_string(asked.dest_offset) + ") was asked for");
  }
  if (!got.status.ok() || data == nullptr) return Status::OK();
  uint32_t magic = 0;
  std::memcpy(&magic, data, sizeof(magic));
  // Without the magic the page is the continuation of a multi-page record: no header.
  if (magic != record::kPageMagic) return Status::OK();
  record::PageHeader h;
  Status st = record::ReadPageHeader(data, record::kPageHeaderBytes, &h);
  if (!st.ok() || h.keyspace != asked.page.part.keyspace || h.bucket != asked.page.part.bucket ||
      h.page_no != asked.page.page_no) {
    return Status::Corruption("page delivered for page " + std::to_string(asked.page.page_no) +
                              " of " + asked.page.part.ToString() + " carries the header of page " +
                              std::to_string(h.page_no) + " of keyspace " +
                              std::to_string(h.keyspace) + " bucket " + std::to_string(h.bucket));
  }
  return Status::OK();
}

struct PageReader::Impl {
  struct Conn {
    uint32_t node = 0;
    std::unique_ptr<transport::Connection> conn;
    int in_flight = 0;
  };
  struct Batch {
    size_t conn = 0;
    int slot = 0;
    std::vector<size_t> indices;
    std::vector<PageReadItem> items;
  };

  Client::Impl* client = nullptr;
  PageReaderOptions options;
  std::vector<std::vector<Conn>> conns;  // per node
  std::vector<Conn*> all_conns;
  std::vector<uint8_t*> slot_bufs;
  size_t slot_bytes = 0;
  transport::RemoteRegion region;
  std::vector<int> free_slots;
  std::unordered_map<uint64_t, Batch> in_flight;
  std::vector<Conn*> batch_conn;  // by Batch::conn
  uint64_t next_id = 1;
  PageReaderStats stats;

  ~Impl() {
    for (auto& node : conns) {
      for (auto& c : node) {
        if (c.conn) c.conn->Close();
      }
    }
    // Freeing is safe with writes still in flight: a closed tcp connection delivers
    // nothing more, and an shm server keeps its own mapping of the segment (it writes into
    // memory nobody reads). Freeing also removes the registration (the cache notices).
    for (uint8_t* b : slot_bufs) (void)client->memory->Free(b);
  }

  Status Connect(uint32_t node, Conn* c);
  Status Hello(Conn* c);
  Status Send(Conn* c, const Batch& b, uint64_t id, uint8_t flags);
  Status Progress(Conn* c, bool* did, const Sink* sink, bool discard);
  Status Drain();
  // Sleeps until a connection with batches in flight has something (doorbell, socket) or
  // kMaxSleepMs passed: waiting for a disk must not burn the CPU the server needs.
  void Sleep();
};

void PageReader::Impl::Sleep() {
  std::vector<pollfd> fds;
  for (Conn* c : all_conns) {
    if (!c->conn || c->in_flight == 0) continue;
    if (!c->conn->Arm()) return;  // something is already waiting
    fds.push_back({c->conn->wait_fd(), POLLIN, 0});
  }
  if (!fds.empty()) (void)poll(fds.data(), fds.size(), kMaxSleepMs);
}

PageReader::PageReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PageReader::~PageReader() = default;
PageReaderStats PageReader::stats() const {
  return impl_->stats;
}

Status PageReader::Open(Client* client, const PageReaderOptions& options,
                        std::unique_ptr<PageReader>* out) {
  if (options.connections_per_node < 1 || options.batch_pages < 1 ||
      options.batches_in_flight < 1 || options.batches_in_flight > 32) {
    return Status::InvalidArgument(
        "PageReader: connections, batch size and depth must be >= 1, depth at most 32 (the "
        "servers' limit of batches in flight per connection)");
  }
  auto impl = std::make_unique<Impl>();
  impl->client = client->impl();
  impl->options = options;
  const size_t nodes = impl->client->nodes.size();
  impl->conns.resize(nodes);
  for (size_t n = 0; n < nodes; n++) {
    impl->conns[n].resize(static_cast<size_t>(options.connections_per_node));
    for (auto& c : impl->conns[n]) c.node = static_cast<uint32_t>(n);
  }
  // Discrete buffers, one per batch slot, registered as one handle.
  const size_t slots = nodes * static_cast<size_t>(options.connections_per_node) *
                       static_cast<size_t>(options.batches_in_flight);
  if (options.max_page_bytes == 0 || options.max_page_bytes > protocol::kMaxPageReadBytes ||
      options.max_page_bytes % protocol::kPageReadGranule != 0) {
    return Status::InvalidArgument("PageReader: max_page_bytes must be a multiple of 512 in (0, " +
                                   std::to_string(protocol::kMaxPageReadBytes) + "]");
  }
  impl->slot_bytes = static_cast<size_t>(options.batch_pages) * options.max_page_bytes;
  std::vector<iovec> iov(slots);
  for (size_t i = 0; i < slots; i++) {
    uint8_t* buf = nullptr;
    RAMP_RETURN_IF_ERROR(
        impl->client->memory->Allocate(impl->slot_bytes, transport::kAccessReadWrite, &buf));
    impl->slot_bufs.push_back(buf);
    iov[i] = {buf, impl->slot_bytes};
    impl->free_slots.push_back(static_cast<int>(i));
  }
  RAMP_RETURN_IF_ERROR(impl->client->memory->RegisterCached(
      iov.data(), static_cast<int>(iov.size()), transport::kAccessWrite, &impl->region));
  out->reset(new PageReader(std::move(impl)));
  return Status::OK();
}

Status PageReader::Impl::Connect(uint32_t node, Conn* c) {
  const ChannelKind kind = client->Effective(node, ChannelKind::kFast);
  const Channel& ch = client->nodes[node].channels[static_cast<int>(kind)];
  if (!ch.has_endpoint) return Status::Unavailable(client->NodeName(node) + " has no endpoint");
  transport::TransportOptions t;
  t.token = client->options.token;
  t.ring_bytes = client->options.ring_bytes;
  t.connect_timeout_ms = client->options.connect_timeout_ms;
  t.handshake_timeout_ms = client->options.connect_timeout_ms;
  t.responder_thread = false;  // never threads in a backend: peers are served while polling
  t.wait_hook = client->options.wait_hook;
  Status st = transport::Connect(ch.endpoint, t, client->memory, &c->conn);
  if (!st.ok()) return st.Annotate("page reader: connecting to " + client->NodeName(node));
  st = Hello(c);
  // The servers write pages into our buffers: they must be able to address them.
  if (st.ok()) st = c->conn->Expose(region);
  if (!st.ok()) {
    c->conn->Close();
    c->conn.reset();
    return st.Annotate("page reader: " + client->NodeName(node));
  }
  all_conns.push_back(c);
  return Status::OK();
}

Status PageReader::Impl::Hello(Conn* c) {
  protocol::Hello hello;
  hello.client_id = client->client_id;
  std::string msg;
  protocol::Header h;
  h.op = static_cast<uint16_t>(protocol::Op::kHello);
  h.request_id = next_id++;
  h.clock = client->clock.Peek();
  protocol::EncodeHeader(h, &msg);
  protocol::Encode(hello, &msg);
  RAMP_RETURN_IF_ERROR(c->conn->Send(msg.data(), msg.size()));
  const auto deadline = client->Deadline();
  transport::Completion comps[8];
  for (;;) {
    c->conn->Poll(comps, 8);
    transport::MessageView m;
    if (c->conn->Receive(&m)) {
      std::string_view bytes(reinterpret_cast<const char*>(m.data), m.size);
      protocol::Header rh;
      Status st = protocol::DecodeHeader(bytes, &rh);
      if (st.ok()) st = protocol::DecodeErrorReply(rh, bytes.substr(protocol::kHeaderBytes));
      if (st.ok() && rh.request_id != h.request_id) st = Status::Corruption("unexpected reply");
      if (st.ok()) client->clock.Observe(rh.clock);
      c->conn->Release();
      return st.Annotate("HELLO");
    }
    if (c->conn->closed()) return c->conn->close_status();
    if (std::chrono::steady_clock::now() > deadline) return Status::Timeout("no HELLO reply");
    (void)c->conn->Wait(1);
  }
}

Status PageReader::Impl::Send(Conn* c, const Batch& b, uint64_t id, uint8_t flags) {
  protocol::ReadPagesRequest req;
  req.dest = region;
  req.flags = flags;
  req.items = b.items;
  std::string msg;
  protocol::Header h;
  h.op = static_cast<uint16_t>(protocol::Op::kReadPages);
  h.count = static_cast<uint32_t>(b.items.size());
  h.request_id = id;
  h.clock = client->clock.Peek();
  protocol::EncodeHeader(h, &msg);
  protocol::Encode(req, &msg);
  return c->conn->Send(msg.data(), msg.size());
}

Status PageReader::Impl::Progress(Conn* c, bool* did, const Sink* sink, bool discard) {
  transport::Completion comps[16];
  // tcp: serving the server's one-sided writes into our buffers happens in here.
  if (c->conn->Poll(comps, 16) > 0) *did = true;
  transport::MessageView m;
  Status result;
  while (result.ok() && c->conn->Receive(&m)) {
    *did = true;
    std::string_view bytes(reinterpret_cast<const char*>(m.data), m.size);
    protocol::Header h;
    Status st = protocol::DecodeHeader(bytes, &h);
    auto it = st.ok() ? in_flight.find(h.request_id) : in_flight.end();
    if (st.ok() &&
        (it == in_flight.end() || h.base_op() != protocol::Op::kReadPages || !h.is_reply())) {
      st = Status::Corruption("page reader: reply " + std::to_string(h.request_id) +
                              " matches no READ_PAGES request in flight");
    }
    if (!st.ok()) {
      c->conn->Release();
      return st;
    }
    client->clock.Observe(h.clock);
    Batch b = std::move(it->second);
    in_flight.erase(it);
    c->in_flight--;
    free_slots.push_back(b.slot);
    stats.batches++;
    const std::string_view body = bytes.substr(protocol::kHeaderBytes);
    st = protocol::DecodeErrorReply(h, body);
    protocol::ReadPagesReply reply;
    if (st.ok()) st = protocol::Decode(body, h.count, &reply);
    if (st.ok() && reply.results.size() != b.items.size()) {
      st = Status::Corruption("READ_PAGES reply carries " + std::to_string(reply.results.size()) +
                              " pages, " + std::to_string(b.items.size()) + " were asked for");
    }
    for (size_t i = 0; st.ok() && !discard && i < b.items.size(); i++) {
      const PageReadResult& r = reply.results[i];
      const uint8_t* data = nullptr;
      if (r.status.ok()) {
        data = slot_bufs[static_cast<size_t>(b.slot)] +
               (b.items[i].dest_offset - static_cast<uint64_t>(b.slot) * slot_bytes);
      }
      st = CheckPageReply(b.items[i], r, data);
      if (!st.ok()) break;
      if (r.status.ok()) {
        stats.pages++;
        stats.bytes += b.items[i].length;
      } else {
        stats.page_errors++;
      }
      st = (*sink)(b.indices[i], r.status, data, b.items[i].length);
    }
    c->conn->Release();
    if (!st.ok()) result = st.Annotate(client->NodeName(c->node));
  }
  if (result.ok() && c->conn->closed()) {
    result = Status::Unavailable(client->NodeName(c->node) +
                                 " went away: " + c->conn->close_status().message());
  }
  return result;
}

Status PageReader::Impl::Drain() {
  // Batches still in flight will be written into their slots: wait for them (bounded), or
  // give their connections up so that nothing lands in a slot reused later.
  const auto deadline = client->Deadline();
  while (!in_flight.empty() && std::chrono::steady_clock::now() < deadline) {
    bool did = false;
    for (Conn* c : all_conns) {
      if (c->conn && c->in_flight > 0 && !Progress(c, &did, nullptr, true).ok()) {
        c->conn->Close();
      }
    }
    bool open = false;
    for (Conn* c : all_conns) open |= c->conn && !c->conn->closed() && c->in_flight > 0;
    if (!open) break;
    if (!did) sched_yield();
  }
  for (auto& [id, b] : in_flight) {
    Conn* c = batch_conn[b.conn];
    if (c->conn) {
      c->conn->Close();
      c->conn.reset();
    }
    c->in_flight = 0;
    (void)id;
  }
  in_flight.clear();
  // Slots of abandoned batches stay out of use for good (a late write may still hit them).
  std::erase_if(all_conns, [](Conn* c) { return c->conn == nullptr; });
  return Status::OK();
}

Status PageReader::Read(std::span<const PageRef> pages, const Sink& sink) {
  Impl& im = *impl_;
  Client::Impl& cl = *im.client;
  // Owners of the partitions involved.
  std::vector<PartitionId> parts;
  {
    std::unordered_set<PartitionId, PartitionIdHash> seen;
    for (const PageRef& p : pages) {
      if (seen.insert(p.part).second) parts.push_back(p.part);
    }
  }
  RAMP_RETURN_IF_ERROR(cl.ResolveOwners(parts));
  std::vector<std::deque<size_t>> queue(im.conns.size());
  for (size_t i = 0; i < pages.size(); i++) {
    if (pages[i].length == 0 || pages[i].length > im.options.max_page_bytes ||
        pages[i].length % protocol::kPageReadGranule != 0) {
      return Status::InvalidArgument("page read length " + std::to_string(pages[i].length) +
                                     " is not a multiple of 512 in (0, " +
                                     std::to_string(im.options.max_page_bytes) + "]");
    }
    queue[cl.OwnerOf(pages[i].part)].push_back(i);
  }
  const uint8_t flags = im.options.prefer_disk ? protocol::kPagesPreferDisk : 0;
  const auto deadline = cl.Deadline();
  size_t queued = pages.size();
  int idle = 0;
  Status st;
  for (uint64_t round = 1; st.ok() && (queued > 0 || !im.in_flight.empty()); round++) {
    bool did = false;
    // Issue batches while slots and connection depth allow.
    for (size_t node = 0; st.ok() && node < queue.size(); node++) {
      while (st.ok() && !queue[node].empty() && !im.free_slots.empty()) {
        Impl::Conn* best = nullptr;
        for (auto& c : im.conns[node]) {
          if (c.in_flight >= im.options.batches_in_flight) continue;
          if (best == nullptr || c.in_flight < best->in_flight) best = &c;
        }
        if (best == nullptr) break;
        if (!best->conn) {
          st = im.Connect(static_cast<uint32_t>(node), best);
          if (!st.ok()) break;
        }
        Impl::Batch b;
        b.slot = im.free_slots.back();
        im.free_slots.pop_back();
        uint64_t off = static_cast<uint64_t>(b.slot) * im.slot_bytes;
        while (!queue[node].empty() &&
               b.items.size() < static_cast<size_t>(im.options.batch_pages)) {
          const size_t i = queue[node].front();
          queue[node].pop_front();
          queued--;
          const PageRef& p = pages[i];
          b.items.push_back({{p.part, p.page_no, p.epoch}, p.length, off});
          b.indices.push_back(i);
          off += p.length;
        }
        const uint64_t id = im.next_id++;
        st = im.Send(best, b, id, flags);
        if (!st.ok()) {
          st = st.Annotate("page reader: sending to " + cl.NodeName(static_cast<uint32_t>(node)));
          im.free_slots.push_back(b.slot);
          break;
        }
        auto pos = std::find(im.batch_conn.begin(), im.batch_conn.end(), best);
        if (pos == im.batch_conn.end()) pos = im.batch_conn.insert(im.batch_conn.end(), best);
        b.conn = static_cast<size_t>(pos - im.batch_conn.begin());
        best->in_flight++;
        im.in_flight.emplace(id, std::move(b));
        did = true;
      }
    }
    for (Impl::Conn* c : im.all_conns) {
      if (!st.ok()) break;
      if (c->conn && c->in_flight > 0) st = im.Progress(c, &did, &sink, false);
    }
    if (!st.ok()) break;
    if (did) {
      idle = 0;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      st = Status::Timeout("page reads did not complete within " +
                           std::to_string(cl.options.timeout_ms) + " ms");
      break;
    }
    if (++idle >= kSpinRounds) {
      idle = 0;
      im.Sleep();
      if (cl.options.wait_hook) st = cl.options.wait_hook();
    } else if (round % kHookEveryRounds == 0 && cl.options.wait_hook) {
      st = cl.options.wait_hook();
    }
  }
  if (!st.ok()) im.Drain();
  return st;
}

}  // namespace ramp
