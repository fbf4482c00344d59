// The pipelined page reader (ramp/page_reader.h).
#include "ramp/page_reader.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "client/cluster_view.h"
#include "client/node_channel.h"
#include "common/record.h"
#include "protocol/page_messages.h"
#include "ramp/log.h"

namespace ramp {

using protocol::PageReadItem;
using protocol::PageReadResult;

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
  // One of the reader's own connections to a node (several per node, apart from the
  // client's channels: page batches must not queue behind transactions).
  struct Conn {
    NodeChannel channel;
    int in_flight = 0;
  };
  struct Batch {
    size_t conn = 0;
    int slot = 0;
    bool next = false;  // of the prefetched read (Prefetch)
    std::vector<size_t> indices;
    std::vector<PageReadItem> items;
  };

  ClusterView* cluster = nullptr;
  ChannelContext* context = nullptr;  // the client's: options, memory, clock
  PageReaderOptions options;
  DoorbellSet doorbells;                 // the reader's connections (declared before conns)
  std::vector<std::vector<Conn>> conns;  // per node
  std::vector<Conn*> all_conns;          // connected at least once and not given up
  std::vector<uint8_t*> slot_bufs;
  size_t slot_bytes = 0;
  transport::RemoteRegion region;
  std::vector<int> free_slots;
  std::unordered_map<uint64_t, Batch> in_flight;
  std::vector<Conn*> batch_conn;  // by Batch::conn
  uint64_t next_id = 1;
  PageReaderStats stats;

  // The read in progress (Begin .. NextBatch .. End).
  bool active = false;
  std::vector<PageRef> pages;
  std::vector<std::deque<size_t>> queue;  // per node: indices into pages not sent yet
  size_t queued = 0;
  uint8_t flags = 0;
  int held_slot = -1;  // the buffer of the batch NextBatch delivered last

  // The read queued behind it (Prefetch): its pages are sent once every page of the current
  // read was sent, and its completed batches wait (their slots kept) until BeginPrefetched
  // makes it the current read.
  struct Stashed {
    Batch batch;
    std::vector<Status> status;  // per item, checked (CheckPageReply)
  };
  bool has_next = false;
  std::vector<PageRef> next_pages;
  std::vector<std::deque<size_t>> next_queue;
  size_t next_queued = 0;
  std::deque<Stashed> stash;  // completed batches of the prefetched read, then of the current
  // Queues pages for a read: per node, in order.
  Status Plan(std::span<const PageRef> pages, std::vector<std::deque<size_t>>* queue);
  // Drops the prefetched read: waits for its batches in flight, frees its slots.
  void DropNext();

  ~Impl() {
    conns.clear();  // closes the connections
    // Freeing is safe with writes still in flight: a closed tcp connection delivers
    // nothing more, and an shm server keeps its own mapping of the segment (it writes into
    // memory nobody reads). Freeing also removes the registration (the cache notices).
    for (uint8_t* b : slot_bufs) (void)context->memory->Free(b);
  }

  std::string NodeName(const Conn* c) const { return cluster->NodeName(c->channel.node()); }
  // Connects (again) and says HELLO; the servers write pages into our buffers, so the
  // region is exposed to them too.
  Status Open(Conn* c);
  Status Send(Conn* c, const Batch& b, uint64_t id, uint8_t flags);
  // Takes the replies that arrived on c (at most one with hold: its slot is kept in
  // held_slot instead of freed, and *got is set).
  // A READ_PAGES reply's body, decoded: one result per page of batch b.
  static Status DecodeReply(const protocol::Header& h, std::string_view body, const Batch& b,
                            protocol::ReadPagesReply* reply);
  // Where page i of batch b landed in the batch's slot.
  const uint8_t* PageData(const Batch& b, size_t i) const {
    return slot_bufs[static_cast<size_t>(b.slot)] +
           (b.items[i].dest_offset - static_cast<uint64_t>(b.slot) * slot_bytes);
  }
  Status Progress(Conn* c, bool* did, const Sink* sink, bool discard, bool hold = false,
                  bool* got = nullptr);
  // Sends batches while slots and connection depth allow.
  Status Issue(bool* did);
  void ReleaseHeld() {
    if (held_slot >= 0) free_slots.push_back(held_slot);
    held_slot = -1;
  }
  // wait: for the batches in flight (false: their connections are given up at once).
  Status Drain(bool wait);
  // Connections (not opened yet) for the nodes the client knows and the reader has none
  // for: all of them at first, later the nodes added to a running cluster. Existing
  // connections stay where they are (the per-node vectors move, their elements do not).
  void AddNodes() {
    const uint32_t nodes = cluster->node_count();
    for (uint32_t n = static_cast<uint32_t>(conns.size()); n < nodes; n++) {
      conns.emplace_back(static_cast<size_t>(options.connections_per_node));
      const transport::Endpoint* ep = cluster->FastEndpoint(n);
      for (auto& c : conns[n]) {
        c.channel.Setup(context, &doorbells, n, cluster->NodeName(n));
        if (ep != nullptr) c.channel.SetEndpoint(*ep);
      }
    }
  }
};

PageReader::PageReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PageReader::~PageReader() = default;
PageReaderStats PageReader::stats() const {
  return impl_->stats;
}

bool PageReader::intact() const {
  return impl_->in_flight.empty() && impl_->free_slots.size() == impl_->slot_bufs.size();
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
  impl->cluster = ClusterViewOf(client);
  impl->context = &impl->cluster->channel_context();
  impl->options = options;
  RAMP_RETURN_IF_ERROR(impl->doorbells.Init());
  const uint32_t nodes = impl->cluster->node_count();
  impl->AddNodes();
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
        impl->context->memory->Allocate(impl->slot_bytes, transport::kAccessReadWrite, &buf));
    impl->slot_bufs.push_back(buf);
    iov[i] = {buf, impl->slot_bytes};
    impl->free_slots.push_back(static_cast<int>(i));
  }
  RAMP_RETURN_IF_ERROR(impl->context->memory->RegisterCached(
      iov.data(), static_cast<int>(iov.size()), transport::kAccessWrite, &impl->region));
  out->reset(new PageReader(std::move(impl)));
  return Status::OK();
}

Status PageReader::Impl::Open(Conn* c) {
  Status st = c->channel.Open();
  if (st.ok()) st = c->channel.conn()->Expose(region);
  if (!st.ok()) {
    c->channel.Reset(st);
    return st.Annotate("page reader");
  }
  if (std::find(all_conns.begin(), all_conns.end(), c) == all_conns.end()) all_conns.push_back(c);
  return Status::OK();
}

Status PageReader::Impl::Send(Conn* c, const Batch& b, uint64_t id, uint8_t flags) {
  protocol::ReadPagesRequest req;
  req.dest = region;
  req.flags = flags;
  req.items = b.items;
  std::string body;
  protocol::Encode(req, &body);
  return c->channel.Send(protocol::Op::kReadPages, static_cast<uint32_t>(b.items.size()), id, body);
}

Status PageReader::Impl::DecodeReply(const protocol::Header& h, std::string_view body,
                                     const Batch& b, protocol::ReadPagesReply* reply) {
  RAMP_RETURN_IF_ERROR(protocol::DecodeErrorReply(h, body));
  RAMP_RETURN_IF_ERROR(protocol::Decode(body, h.count, reply));
  if (reply->results.size() != b.items.size()) {
    return Status::Corruption("READ_PAGES reply carries " + std::to_string(reply->results.size()) +
                              " pages, " + std::to_string(b.items.size()) + " were asked for");
  }
  return Status::OK();
}

Status PageReader::Impl::Progress(Conn* c, bool* did, const Sink* sink, bool discard, bool hold,
                                  bool* got) {
  transport::Connection* conn = c->channel.conn();
  transport::Completion comps[16];
  // tcp: serving the server's one-sided writes into our buffers happens in here.
  if (conn->Poll(comps, 16) > 0) *did = true;
  transport::MessageView m;
  Status result;
  while (result.ok() && conn->Receive(&m)) {
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
      conn->Release();
      return st;
    }
    context->clock.Observe(h.clock);
    Batch b = std::move(it->second);
    in_flight.erase(it);
    c->in_flight--;
    if (b.next && !discard) {
      // A batch of the prefetched read: checked now, delivered after BeginPrefetched.
      const std::string_view body = bytes.substr(protocol::kHeaderBytes);
      Stashed sb;
      protocol::ReadPagesReply reply;
      st = DecodeReply(h, body, b, &reply);
      for (size_t i = 0; st.ok() && i < b.items.size(); i++) {
        const PageReadResult& r = reply.results[i];
        st = CheckPageReply(b.items[i], r, r.status.ok() ? PageData(b, i) : nullptr);
        sb.status.push_back(r.status);
      }
      stats.batches++;
      conn->Release();
      sb.batch = std::move(b);
      stash.push_back(std::move(sb));  // its slot stays taken
      if (!st.ok()) {
        result = st.Annotate(NodeName(c));
        break;
      }
      continue;
    }
    if (hold) {
      held_slot = b.slot;
      *got = true;
    } else {
      free_slots.push_back(b.slot);
    }
    stats.batches++;
    const std::string_view body = bytes.substr(protocol::kHeaderBytes);
    protocol::ReadPagesReply reply;
    st = DecodeReply(h, body, b, &reply);
    for (size_t i = 0; st.ok() && !discard && i < b.items.size(); i++) {
      const PageReadResult& r = reply.results[i];
      const uint8_t* data = r.status.ok() ? PageData(b, i) : nullptr;
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
    conn->Release();
    if (!st.ok()) result = st.Annotate(NodeName(c));
    if (hold) break;
  }
  if (result.ok() && conn->closed()) {
    result = Status::Unavailable(NodeName(c) + " went away: " + conn->close_status().message());
  }
  return result;
}

Status PageReader::Impl::Drain(bool wait) {
  // Batches still in flight will be written into their slots: wait for them (bounded by the
  // timeout and by the wait hook: a cancelled statement does not wait for a server that
  // stopped answering), or give their connections up so that nothing lands in a slot reused
  // later. Not at all after a wait that was cancelled or timed out.
  Waiter waiter(*context, &doorbells);
  while (wait && !in_flight.empty()) {
    bool did = false;
    for (Conn* c : all_conns) {
      if (!c->channel.is_open() || c->in_flight == 0) continue;
      Status st = Progress(c, &did, nullptr, true);
      if (!st.ok()) c->channel.Reset(st);
    }
    bool open = false;
    for (Conn* c : all_conns) {
      open |= c->channel.is_open() && !c->channel.conn()->closed() && c->in_flight > 0;
    }
    if (!open || !waiter.Next(did, [] { return std::string(); }).ok()) break;
  }
  for (auto& [id, b] : in_flight) {
    Conn* c = batch_conn[b.conn];
    c->channel.Reset(Status::Unavailable("page reader: batches given up"));
    c->in_flight = 0;
    (void)id;
  }
  in_flight.clear();
  // Slots of abandoned batches stay out of use for good (a late write may still hit them).
  std::erase_if(all_conns, [](Conn* c) { return !c->channel.is_open(); });
  return Status::OK();
}

Status PageReader::Read(std::span<const PageRef> pages, const Sink& sink) {
  Status st = Begin(pages);
  bool done = false;
  while (st.ok() && !done) st = NextBatch(sink, &done);
  End();
  return st;
}

Status PageReader::Impl::Plan(std::span<const PageRef> pages,
                              std::vector<std::deque<size_t>>* queue) {
  // Owners of the partitions involved.
  std::vector<PartitionId> parts;
  {
    std::unordered_set<PartitionId, PartitionIdHash> seen;
    for (const PageRef& p : pages) {
      if (seen.insert(p.part).second) parts.push_back(p.part);
    }
  }
  RAMP_RETURN_IF_ERROR(cluster->ResolveOwners(parts));
  AddNodes();  // an owner may be a node added since the reader opened
  queue->assign(conns.size(), {});
  for (size_t i = 0; i < pages.size(); i++) {
    if (pages[i].length == 0 || pages[i].length > options.max_page_bytes ||
        pages[i].length % protocol::kPageReadGranule != 0) {
      return Status::InvalidArgument("page read length " + std::to_string(pages[i].length) +
                                     " is not a multiple of 512 in (0, " +
                                     std::to_string(options.max_page_bytes) + "]");
    }
    const uint32_t owner = cluster->OwnerOf(pages[i].part);
    if (owner >= queue->size()) {
      return Status::Unavailable("partition " + pages[i].part.ToString() + " is owned by node " +
                                 std::to_string(owner) + ", which this client does not know");
    }
    (*queue)[owner].push_back(i);
  }
  return Status::OK();
}

Status PageReader::Begin(std::span<const PageRef> pages) {
  Impl& im = *impl_;
  End();
  RAMP_RETURN_IF_ERROR(im.Plan(pages, &im.queue));
  im.pages.assign(pages.begin(), pages.end());
  im.queued = pages.size();
  im.flags = static_cast<uint8_t>((im.options.prefer_disk ? protocol::kPagesPreferDisk : 0) |
                                  (im.options.migration ? protocol::kPagesMigration : 0));
  // A connection the server closed while we were not using it is reopened when next needed
  // (reads are idempotent); one closed with batches in flight fails the read below.
  for (Impl::Conn* c : im.all_conns) {
    if (c->in_flight == 0) (void)c->channel.ResetIfClosed();
  }
  im.active = true;
  return Status::OK();
}

Status PageReader::Prefetch(std::span<const PageRef> pages) {
  Impl& im = *impl_;
  if (im.has_next) return Status::InvalidArgument("PageReader: a read is prefetched already");
  RAMP_RETURN_IF_ERROR(im.Plan(pages, &im.next_queue));
  im.next_pages.assign(pages.begin(), pages.end());
  im.next_queued = pages.size();
  im.has_next = true;
  return Status::OK();
}

bool PageReader::prefetched() const {
  return impl_->has_next;
}

bool PageReader::all_sent() const {
  return impl_->queued == 0;
}

Status PageReader::BeginPrefetched() {
  Impl& im = *impl_;
  if (!im.has_next) return Status::InvalidArgument("PageReader: no read is prefetched");
  if (im.active) {
    return Status::InvalidArgument("PageReader: the current read has pages left to deliver");
  }
  im.ReleaseHeld();
  im.pages = std::move(im.next_pages);
  im.queue = std::move(im.next_queue);
  im.queued = im.next_queued;
  im.next_pages.clear();
  im.next_queue.clear();
  im.next_queued = 0;
  im.has_next = false;
  // Its batches in flight and those that completed are the current read's now.
  for (auto& [id, b] : im.in_flight) b.next = false;
  for (Impl::Stashed& sb : im.stash) sb.batch.next = false;
  im.active = true;
  return Status::OK();
}

void PageReader::Impl::DropNext() {
  has_next = false;
  next_pages.clear();
  next_queue.clear();
  next_queued = 0;
  for (Stashed& sb : stash) free_slots.push_back(sb.batch.slot);
  stash.clear();
}

Status PageReader::Impl::Issue(bool* did) {
  Status st;
  // The prefetched read's pages once every page of the current read was sent.
  const bool next = queued == 0 && has_next;
  std::vector<std::deque<size_t>>& queue = next ? next_queue : this->queue;
  size_t& queued = next ? next_queued : this->queued;
  const std::vector<PageRef>& pages = next ? next_pages : this->pages;
  for (size_t node = 0; st.ok() && node < queue.size(); node++) {
    while (st.ok() && !queue[node].empty() && !free_slots.empty()) {
      Conn* best = nullptr;
      for (auto& c : conns[node]) {
        if (c.in_flight >= options.batches_in_flight) continue;
        if (best == nullptr || c.in_flight < best->in_flight) best = &c;
      }
      if (best == nullptr) break;
      if (!best->channel.is_open()) {
        st = Open(best);
        if (!st.ok()) break;
      }
      Batch b;
      b.next = next;
      b.slot = free_slots.back();
      free_slots.pop_back();
      uint64_t off = static_cast<uint64_t>(b.slot) * slot_bytes;
      while (!queue[node].empty() && b.items.size() < static_cast<size_t>(options.batch_pages)) {
        const size_t i = queue[node].front();
        queue[node].pop_front();
        queued--;
        const PageRef& p = pages[i];
        b.items.push_back({{p.part, p.page_no, p.epoch}, p.length, off});
        b.indices.push_back(i);
        off += p.length;
      }
      const uint64_t id = next_id++;
      st = Send(best, b, id, flags);
      if (!st.ok()) {
        st = st.Annotate("page reader: sending to " +
                         cluster->NodeName(static_cast<uint32_t>(node)));
        free_slots.push_back(b.slot);
        break;
      }
      auto pos = std::find(batch_conn.begin(), batch_conn.end(), best);
      if (pos == batch_conn.end()) pos = batch_conn.insert(batch_conn.end(), best);
      b.conn = static_cast<size_t>(pos - batch_conn.begin());
      best->in_flight++;
      in_flight.emplace(id, std::move(b));
      *did = true;
    }
  }
  return st;
}

Status PageReader::NextBatch(const Sink& sink, bool* done) {
  Impl& im = *impl_;
  im.ReleaseHeld();
  *done = false;
  if (!im.active) {
    *done = true;
    return Status::OK();
  }
  Status st;
  // A batch of this read that completed while it was the prefetched one.
  for (auto it = im.stash.begin(); it != im.stash.end(); ++it) {
    if (it->batch.next) continue;
    Impl::Stashed sb = std::move(*it);
    im.stash.erase(it);
    im.held_slot = sb.batch.slot;
    const Impl::Batch& b = sb.batch;
    for (size_t i = 0; st.ok() && i < b.items.size(); i++) {
      const uint8_t* data = nullptr;
      if (sb.status[i].ok()) {
        data = im.PageData(b, i);
        im.stats.pages++;
        im.stats.bytes += b.items[i].length;
      } else {
        im.stats.page_errors++;
      }
      st = sink(b.indices[i], sb.status[i], data, b.items[i].length);
    }
    if (st.ok()) return st;
    break;
  }
  Waiter waiter(*im.context, &im.doorbells);
  while (st.ok()) {
    // Sends what it can first: a prefetched read's pages too, once this read's were sent.
    bool did = false;
    st = im.Issue(&did);
    if (!st.ok()) break;
    bool current = false;  // a batch of this read is in flight
    for (const auto& [id, b] : im.in_flight) current |= !b.next;
    if (im.queued == 0 && !current) {
      im.active = false;
      *done = true;
      return Status::OK();
    }
    bool got = false;
    for (Impl::Conn* c : im.all_conns) {
      if (c->channel.is_open() && c->in_flight > 0) {
        st = im.Progress(c, &did, &sink, false, true, &got);
        if (!st.ok() || got) break;
      }
    }
    if (!st.ok() || got) break;
    st = waiter.Next(did, [&] {
      return "page reads did not complete within " +
             std::to_string(im.context->options.timeout_ms) + " ms";
    });
  }
  if (!st.ok()) {
    im.ReleaseHeld();
    im.Drain(!st.Is(Status::Code::kCancelled) && !st.Is(Status::Code::kTimeout));
    im.DropNext();
    im.active = false;
    im.queued = 0;
    im.queue.clear();
  }
  return st;
}

void PageReader::End() {
  Impl& im = *impl_;
  im.ReleaseHeld();
  const bool pending = im.active || im.has_next || !im.stash.empty();
  im.active = false;
  im.queued = 0;
  im.queue.clear();
  if (!pending) return;
  // Batches still in flight land in their slots: wait for them (Drain). A prefetched read is
  // dropped with them.
  if (!im.in_flight.empty()) im.Drain(true);
  im.DropNext();
}

}  // namespace ramp
