#include "server/page_service.h"

#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/record.h"
#include "ramp/log.h"
#include "store/durable/env.h"

namespace ramp::server {

using protocol::PageReadItem;

// Staging buffers: registered memory (a verbs peer can only be written from registered
// memory), one per batch in progress. Shared by the service and the release functions of
// replies in flight.
struct PageService::Staging {
  std::shared_ptr<transport::Memory> memory;  // keeps the allocation mapped
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint8_t*> free;
  bool stop = false;

  uint8_t* Take() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return stop || !free.empty(); });
    if (free.empty()) return nullptr;
    uint8_t* b = free.back();
    free.pop_back();
    return b;
  }
  void Give(uint8_t* b) {
    {
      std::lock_guard lock(mu);
      free.push_back(b);
    }
    cv.notify_one();
  }
};

// A job being served: its staging buffer, per-item status and reads outstanding.
struct PageService::Active {
  Job job;
  uint8_t* buf = nullptr;
  std::vector<size_t> at;  // offset of each item in buf
  std::vector<Status> status;
  size_t reads_left = 0;
};

// A disk read: one item, or several consecutive pages of one file landing consecutively in
// the staging buffer (coalesced).
// The file comes from the store's Env: io_uring reads through its descriptor, or, where
// there is none (a test Env) or no ring, File::Read does (synchronously).
struct PageService::DiskRead {
  Active* job = nullptr;
  std::vector<size_t> items;
  std::shared_ptr<store::File> file;  // kept open until the read completed
  uint64_t offset = 0;
  uint8_t* dst = nullptr;
  uint32_t len = 0;
  Status error;  // a failed File::Read (its res is -EIO)
};

// One io_uring per I/O thread (ok false: the pread fallback), with the reads queued on it.
struct PageService::Ring {
  io_uring ring{};
  bool ok = false;
  unsigned depth = 0;
  std::deque<DiskRead*> queued;  // not yet submitted
  unsigned in_ring = 0;          // submitted, not completed
  std::vector<std::unique_ptr<Active>> active;
  ~Ring() {
    if (ok) io_uring_queue_exit(&ring);
  }
};

PageService::PageService(const PageServiceOptions& options, store::Store* store,
                         std::shared_ptr<transport::Memory> memory)
    : options_(options), store_(store), memory_(std::move(memory)) {}

Status PageService::Start(const PageServiceOptions& options, store::Store* store,
                          std::shared_ptr<transport::Memory> memory,
                          std::unique_ptr<PageService>* out) {
  std::unique_ptr<PageService> s(new PageService(options, store, std::move(memory)));
  RAMP_RETURN_IF_ERROR(s->Init());
  *out = std::move(s);
  return Status::OK();
}

Status PageService::Init() {
  if (!options_.debug_fault.empty()) {
    const std::string& f = options_.debug_fault;
    const size_t colon = f.find(':');
    const std::string kind = f.substr(0, colon);
    if (colon == std::string::npos ||
        (kind != "eio" && kind != "short" && kind != "moved" && kind != "moved-once")) {
      return Status::InvalidArgument(
          "page fault injection '" + f +
          "': expected eio:<page>, short:<page>, moved:<page> or moved-once:<page>");
    }
    fault_kind_ = kind == "eio" ? 1 : kind == "short" ? 2 : kind == "moved" ? 3 : 4;
    fault_page_ = static_cast<uint32_t>(std::stoul(f.substr(colon + 1)));
    RAMP_WARN("page I/O: injecting %s into disk reads of page %u (debug)", kind.c_str(),
              fault_page_);
  }
  staging_ = std::make_shared<Staging>();
  staging_->memory = memory_;
  const size_t per = options_.max_batch_bytes;
  const int n = std::max(1, options_.staging_buffers);
  uint8_t* base = nullptr;
  RAMP_RETURN_IF_ERROR(
      memory_->Allocate(per * static_cast<size_t>(n), transport::kAccessRead, &base));
  for (int i = 0; i < n; i++) staging_->free.push_back(base + per * static_cast<size_t>(i));
  if (!options_.per_request_threads) {
    for (int i = 0; i < options_.io_workers; i++) threads_.emplace_back([this, i] { Run(i); });
  }
  RAMP_INFO("page I/O: %s, %d staging buffers of %zu KiB",
            options_.per_request_threads
                ? "a thread per request (baseline)"
                : (std::to_string(options_.io_workers) + " static I/O workers").c_str(),
            n, per >> 10);
  return Status::OK();
}

PageService::~PageService() {
  Stop();
}

void PageService::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_ && threads_.empty() && per_request_running_.load() == 0) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (staging_) {
    std::lock_guard lock(staging_->mu);
    staging_->stop = true;
  }
  if (staging_) staging_->cv.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  while (per_request_running_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

Status PageService::Validate(const protocol::ReadPagesRequest& req) const {
  if (req.items.size() > options_.max_batch_pages) {
    return Status::TooLarge("READ_PAGES batch of " + std::to_string(req.items.size()) +
                            " items exceeds the limit of " +
                            std::to_string(options_.max_batch_pages));
  }
  if (!(req.dest.access & transport::kAccessWrite)) {
    return Status::PermissionDenied("READ_PAGES destination handle is not writable by peers");
  }
  uint64_t total = 0;
  for (size_t i = 0; i < req.items.size(); i++) {
    const PageReadItem& it = req.items[i];
    if (it.length == 0 || it.length % protocol::kPageReadGranule != 0 ||
        it.length > protocol::kMaxPageReadBytes) {
      return Status::InvalidArgument("READ_PAGES item " + std::to_string(i) + ": length " +
                                     std::to_string(it.length) + " is not a multiple of " +
                                     std::to_string(protocol::kPageReadGranule) + " in (0, " +
                                     std::to_string(protocol::kMaxPageReadBytes) + "]");
    }
    if (it.dest_offset > req.dest.length || req.dest.length - it.dest_offset < it.length) {
      return Status::InvalidArgument(
          "READ_PAGES item " + std::to_string(i) + ": destination offset " +
          std::to_string(it.dest_offset) + " + " + std::to_string(it.length) +
          " bytes is beyond the handle of " + std::to_string(req.dest.length) + " bytes");
    }
    total += it.length;
  }
  if (total > options_.max_batch_bytes) {
    return Status::TooLarge("READ_PAGES batch of " + std::to_string(total) +
                            " bytes exceeds the limit of " +
                            std::to_string(options_.max_batch_bytes));
  }
  return Status::OK();
}

void PageService::Submit(Job job) {
  if (options_.per_request_threads) {
    // The baseline: a fresh thread and ring for every batch.
    per_request_running_.fetch_add(1);
    std::thread([this, j = std::move(job)]() mutable {
      Ring ring;
      ring.depth = options_.queue_depth;
      if (options_.use_io_uring) ring.ok = io_uring_queue_init(ring.depth, &ring.ring, 0) == 0;
      ServeOne(j, &ring);
      per_request_running_.fetch_sub(1);
    }).detach();
    return;
  }
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

bool PageService::ServeResident(Job& job) {
  if (!options_.serve_resident_inline || options_.per_request_threads ||
      (job.req.flags & protocol::kPagesPreferDisk)) {
    return false;
  }
  const auto& items = job.req.items;
  std::vector<Status> status = job.pre;
  status.resize(items.size());
  auto out = std::make_shared<OneSidedReply>();
  auto& writes = out->writes;
  struct Frame {
    size_t item;
    uint32_t page;  // within the item
    const uint8_t* frame;
  };
  std::vector<Frame> frames;  // every page written, for the re-check
  for (size_t i = 0; i < items.size(); i++) {
    if (!status[i].ok()) continue;
    const PageReadItem& it = items[i];
    const uint32_t npages =
        static_cast<uint32_t>((it.length + record::kPageBytes - 1) / record::kPageBytes);
    OneSidedReply::Write pages[2];  // kMaxPageReadBytes is two pages
    uint32_t left = it.length;
    for (uint32_t p = 0; p < npages && status[i].ok(); p++) {
      store::Store::PageLocation loc;
      status[i] = store_->LocatePage(it.page.part, it.page.page_no + p, &loc);
      if (!status[i].ok()) break;
      if (loc.frame == nullptr) return false;  // on disk: the I/O threads read it
      const uint32_t n = std::min<uint32_t>(left, record::kPageBytes);
      pages[p] = {loc.frame, it.dest_offset + uint64_t{p} * record::kPageBytes, n};
      left -= n;
    }
    if (!status[i].ok()) continue;
    for (uint32_t p = 0; p < npages; p++) frames.push_back({i, p, pages[p].local});
    // Pages whose frames follow each other in the arena and whose destinations follow each
    // other go as one write.
    for (uint32_t p = 0; p < npages; p++) {
      if (!writes.empty()) {
        OneSidedReply::Write& last = writes.back();
        if (last.local + last.len == pages[p].local && last.offset + last.len == pages[p].offset) {
          last.len += pages[p].len;
          continue;
        }
      }
      writes.push_back(pages[p]);
    }
  }
  // The pages go from their frames straight to the client: no staging copy. A frame stays
  // readable for the GC grace after its page is retired (Store::LocatePage), far longer than
  // the writes take; a page being appended to is copied as it is when the write runs, as an
  // I/O thread's copy would be when it runs (the client checks every record it parses).
  out->dest = job.req.dest;
  out->request = job.request;
  out->in_flight = std::move(job.in_flight);
  protocol::ReadPagesReply reply;
  reply.results.resize(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    reply.results[i].item = items[i];
    reply.results[i].status = status[i];
  }
  protocol::EncodeHeader(
      protocol::ReplyTo(job.request, job.clock, static_cast<uint32_t>(items.size())), &out->reply);
  protocol::Encode(reply, &out->reply);
  // Once the writes are done: every page must still be in the frame it was written from (it
  // was not evicted, compacted away or moved meanwhile, and its frame not reused, which
  // takes the GC grace). A page that left its frame is an error of that page, never data.
  const protocol::Header request = job.request;
  const uint64_t clock = job.clock;
  // Runs on the worker, which uses the store as long as it runs (the service may be gone).
  store::Store* const store = store_;
  // moved-once: only the first re-check of the page fails (a reader that reads it again
  // gets it).
  const bool inject = fault_kind_ == 3 || (fault_kind_ == 4 && !fault_fired_->load());
  const uint32_t inject_page = fault_page_;
  const std::shared_ptr<std::atomic<bool>> fired = fault_kind_ == 4 ? fault_fired_ : nullptr;
  const auto located = std::chrono::steady_clock::now();
  const auto safe = std::chrono::milliseconds(options_.frame_grace_ms / 2);
  out->recheck = [store, inject, inject_page, fired, request, clock, located, safe,
                  reply = std::move(reply),
                  frames = std::move(frames)](std::string* encoded) mutable {
    // Within the grace every frame still holds its page's bytes: a page retired since was
    // written from its last state, as a copy made before the retirement would have been.
    if (!inject && std::chrono::steady_clock::now() - located < safe) return;
    bool changed = false;
    for (const Frame& f : frames) {
      const PageReadItem& it = reply.results[f.item].item;
      if (!reply.results[f.item].status.ok()) continue;
      const uint32_t page_no = it.page.page_no + f.page;
      store::Store::PageLocation loc;
      const bool injected =
          inject && page_no == inject_page && (fired == nullptr || !fired->exchange(true));
      const bool same =
          store->LocatePage(it.page.part, page_no, &loc).ok() && loc.frame == f.frame && !injected;
      if (same) continue;
      reply.results[f.item].status = Status::Aborted(
          "page " + std::to_string(page_no) + " of partition " + it.page.part.ToString() +
          " left its memory frame while it was being written to the client: read it again");
      changed = true;
    }
    if (!changed) return;
    encoded->clear();
    protocol::EncodeHeader(
        protocol::ReplyTo(request, clock, static_cast<uint32_t>(reply.results.size())), encoded);
    protocol::Encode(reply, encoded);
  };
  (*job.post)(job.session, std::move(out));
  return true;
}

void PageService::ServeOne(Job& job, Ring* ring) {
  if (!Start(job, ring, true)) return;
  while (!ring->active.empty()) Reap(ring, 1000);
}

void PageService::Run(int index) {
  Ring ring;
  ring.depth = options_.queue_depth;
  if (options_.use_io_uring) {
    const int rc = io_uring_queue_init(ring.depth, &ring.ring, 0);
    ring.ok = rc == 0;
    if (!ring.ok && !uring_refused_logged_.exchange(true)) {
      RAMP_WARN("page I/O: io_uring refused (%s): I/O workers read pages with pread",
                std::strerror(-rc));
    }
  }
  if (index == 0 && ring.ok)
    RAMP_INFO("page I/O: io_uring with %u entries per I/O worker", ring.depth);
  // Batches overlap: a worker takes the next batch while the reads of earlier ones are in
  // the ring, so the disk sees up to `depth` reads of this worker at once.
  for (;;) {
    std::optional<Job> job;
    {
      std::unique_lock lock(mu_);
      if (ring.active.empty()) cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && ring.active.empty()) return;
      if (!queue_.empty() && !stop_ && ring.queued.size() + ring.in_ring < ring.depth) {
        job = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (job) {
      if (!Start(*job, &ring, ring.active.empty())) {
        // No staging buffer free while our own jobs hold some: put it back, finish ours.
        {
          std::lock_guard lock(mu_);
          queue_.push_front(std::move(*job));
        }
        Reap(&ring, 200);
        continue;
      }
      Reap(&ring, 0);
      continue;
    }
    Reap(&ring, 50);
  }
}

bool PageService::InjectFault(uint32_t page_no, uint32_t len, int* res) const {
  if ((fault_kind_ != 1 && fault_kind_ != 2) || page_no != fault_page_) return false;
  *res = fault_kind_ == 1 ? -EIO : static_cast<int>(len / 2);
  return true;
}

namespace {

Status CheckPageHeader(const uint8_t* data, const protocol::PageAddress& want) {
  record::PageHeader h;
  uint32_t magic = 0;
  std::memcpy(&magic, data, sizeof(magic));
  // A page without a header is the continuation of a run; the head page of the run was
  // checked when it was asked for.
  if (magic != record::kPageMagic) return Status::OK();
  if (!record::ReadPageHeader(data, record::kPageHeaderBytes, &h).ok() ||
      h.keyspace != want.part.keyspace || h.bucket != want.part.bucket ||
      h.page_no != want.page_no) {
    return Status::Corruption("page " + std::to_string(want.page_no) + " of partition " +
                              want.part.ToString() +
                              " read from disk has the header of another page");
  }
  return Status::OK();
}

// The longest coalesced disk read.
constexpr uint32_t kMaxCoalescedBytes = 256u << 10;

}  // namespace

bool PageService::Start(Job& job, Ring* ring, bool wait) {
  uint8_t* buf = nullptr;
  if (wait) {
    buf = staging_->Take();
  } else {
    std::lock_guard lock(staging_->mu);
    if (!staging_->free.empty()) {
      buf = staging_->free.back();
      staging_->free.pop_back();
    }
  }
  if (buf == nullptr) return !wait ? false : true;  // stopping when waiting failed
  auto a = std::make_unique<Active>();
  a->job = std::move(job);
  a->buf = buf;
  const auto& items = a->job.req.items;
  a->status = a->job.pre;
  a->status.resize(items.size());
  a->at.resize(items.size());
  std::vector<DiskRead*> reads;  // owned until completed
  size_t off = 0;
  const bool prefer_disk = a->job.req.flags & protocol::kPagesPreferDisk;
  for (size_t i = 0; i < items.size(); i++) {
    const PageReadItem& it = items[i];
    a->at[i] = off;
    off += it.length;
    if (!a->status[i].ok()) continue;
    const uint32_t npages =
        static_cast<uint32_t>((it.length + record::kPageBytes - 1) / record::kPageBytes);
    // Where every page of the item is: all resident, or all in the page file.
    store::Store::PageLocation first;
    bool all_resident = true;
    bool all_disk = true;
    Status st;
    const uint8_t* frames[2] = {nullptr, nullptr};  // kMaxPageReadBytes is two pages
    for (uint32_t p = 0; p < npages && st.ok(); p++) {
      store::Store::PageLocation loc;
      st = store_->LocatePage(it.page.part, it.page.page_no + p, &loc);
      if (!st.ok()) break;
      if (p == 0) first = loc;
      frames[p] = loc.frame;
      all_resident &= loc.frame != nullptr;
      all_disk &= loc.file != nullptr && loc.file == first.file;
    }
    // The epoch was checked against the directory's (the placement epoch clients learn
    // from LOOKUP and SCAN_OPEN) by the handler; the partition's own epoch is constant
    // until migration raises both.
    if (st.ok() && all_disk && (prefer_disk || !all_resident)) {
      DiskRead* prev = reads.empty() ? nullptr : reads.back();
      if (prev != nullptr && prev->file == first.file &&
          prev->offset + prev->len == first.file_offset &&
          prev->dst + prev->len == buf + a->at[i] && prev->len + it.length <= kMaxCoalescedBytes &&
          prev->len % record::kPageBytes == 0) {
        prev->items.push_back(i);
        prev->len += it.length;
      } else {
        reads.push_back(
            new DiskRead{a.get(), {i}, first.file, first.file_offset, buf + a->at[i], it.length});
      }
    } else if (st.ok() && all_resident) {
      uint32_t left = it.length;
      for (uint32_t p = 0; p < npages; p++) {
        const uint32_t n = std::min<uint32_t>(left, record::kPageBytes);
        std::memcpy(buf + a->at[i] + size_t{p} * record::kPageBytes, frames[p], n);
        left -= n;
      }
    } else if (st.ok()) {
      st = Status::NotFound("pages " + std::to_string(it.page.page_no) + ".." +
                            std::to_string(it.page.page_no + npages - 1) + " of partition " +
                            it.page.part.ToString() + " are neither all in memory nor all on disk");
    }
    a->status[i] = st;
  }
  a->reads_left = reads.size();
  Active* raw = a.get();
  ring->active.push_back(std::move(a));
  if (reads.empty()) {
    Finish(*raw);
    return true;
  }
  for (DiskRead* d : reads) {
    if (ring->ok && d->file->fd() >= 0) {
      ring->queued.push_back(d);
      continue;
    }
    // The fallback (no ring, or a file without a descriptor): synchronous, one at a time.
    size_t got = 0;
    d->error = d->file->Read(d->offset, d->len, d->dst, &got);
    Complete(d, d->error.ok() ? static_cast<int>(got) : -EIO);
  }
  return true;
}

void PageService::Complete(DiskRead* d, int res) {
  Active& a = *d->job;
  const auto& items = a.job.req.items;
  // What a coalesced read delivered is split back into its items.
  uint32_t at = 0;
  for (size_t i : d->items) {
    const PageReadItem& it = items[i];
    int r = res < 0 ? res
                    : static_cast<int>(
                          std::min<int64_t>(it.length, std::max<int64_t>(0, int64_t{res} - at)));
    InjectFault(it.page.page_no, it.length, &r);
    if (r < 0) {
      a.status[i] = Status::IOError("reading page " + std::to_string(it.page.page_no) +
                                    " of partition " + it.page.part.ToString() + ": " +
                                    (d->error.ok() ? std::strerror(-r) : d->error.ToString()));
    } else if (static_cast<uint32_t>(r) != it.length) {
      a.status[i] =
          Status::IOError("short read of page " + std::to_string(it.page.page_no) +
                          " of partition " + it.page.part.ToString() + ": " + std::to_string(r) +
                          " of " + std::to_string(it.length) + " bytes");
    } else {
      a.status[i] = CheckPageHeader(d->dst + at, it.page);
    }
    at += it.length;
  }
  delete d;
  if (--a.reads_left == 0) Finish(a);
}

void PageService::Reap(Ring* ring, int wait_us) {
  // Finished jobs leave the active list.
  std::erase_if(ring->active, [](const std::unique_ptr<Active>& a) { return a->buf == nullptr; });
  if (!ring->ok) return;
  unsigned queued = 0;
  while (!ring->queued.empty() && ring->in_ring < ring->depth) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring->ring);
    if (sqe == nullptr) break;
    DiskRead* d = ring->queued.front();
    ring->queued.pop_front();
    io_uring_prep_read(sqe, d->file->fd(), d->dst, d->len, d->offset);
    io_uring_sqe_set_data(sqe, d);
    ring->in_ring++;
    queued++;
  }
  if (queued > 0) {
    const int rc = io_uring_submit(&ring->ring);
    if (rc < 0) RAMP_ERROR("page I/O: io_uring_submit: %s", std::strerror(-rc));
  }
  if (ring->in_ring == 0) return;
  io_uring_cqe* cqe = nullptr;
  int rc = io_uring_peek_cqe(&ring->ring, &cqe);
  if (rc != 0 && wait_us > 0) {
    __kernel_timespec ts{0, static_cast<long long>(wait_us) * 1000};
    rc = io_uring_wait_cqe_timeout(&ring->ring, &cqe, &ts);
  }
  while (rc == 0 && cqe != nullptr) {
    auto* d = static_cast<DiskRead*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring->ring, cqe);
    ring->in_ring--;
    Complete(d, res);
    cqe = nullptr;
    rc = io_uring_peek_cqe(&ring->ring, &cqe);
  }
  std::erase_if(ring->active, [](const std::unique_ptr<Active>& a) { return a->buf == nullptr; });
}

void PageService::Finish(Active& a) {
  const auto& items = a.job.req.items;
  auto out = std::make_shared<OneSidedReply>();
  out->dest = a.job.req.dest;
  out->request = a.job.request;
  std::shared_ptr<Staging> staging = staging_;
  uint8_t* buf = a.buf;
  out->release = [staging, buf] { staging->Give(buf); };
  out->in_flight = std::move(a.job.in_flight);
  a.buf = nullptr;  // done: Reap drops it
  protocol::ReadPagesReply reply;
  reply.results.resize(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    reply.results[i].item = items[i];
    reply.results[i].status = a.status[i];
    if (!a.status[i].ok()) continue;
    // Items next to each other in the staging buffer and at the destination (a page
    // reader asks for consecutive pages at consecutive offsets) go as one write: one
    // one-sided operation per run of pages instead of one per page.
    if (!out->writes.empty()) {
      OneSidedReply::Write& last = out->writes.back();
      if (last.local + last.len == buf + a.at[i] &&
          last.offset + last.len == items[i].dest_offset) {
        last.len += items[i].length;
        continue;
      }
    }
    out->writes.push_back({buf + a.at[i], items[i].dest_offset, items[i].length});
  }
  protocol::EncodeHeader(
      protocol::ReplyTo(a.job.request, a.job.clock, static_cast<uint32_t>(items.size())),
      &out->reply);
  protocol::Encode(reply, &out->reply);
  (*a.job.post)(a.job.session, std::move(out));
}

}  // namespace ramp::server
