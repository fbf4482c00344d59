// The page-read service of rampd (DESIGN §6, papers 002 and 003): READ_PAGES batches are
// handed by the worker that received them (the poller) to a STATIC pool of I/O threads.
// An I/O thread copies resident pages from the arena and reads the others from the
// partition's page file through its own io_uring (a pread loop where the kernel refuses
// io_uring, logged once), into a staging buffer of registered memory; the worker then
// writes the pages one-sided into the client's buffers and sends the completion
// (one_sided_reply.h). A batch whose pages are all resident never reaches the I/O threads:
// the worker that received it writes the pages from their frames (ServeResident).
//
// The thread-per-request variant (a thread, and a ring, per batch) exists only as the
// baseline the benchmark compares the static pool with (paper 002 measured 32x).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/messages.h"
#include "protocol/page_messages.h"
#include "ramp/status.h"
#include "ramp/transport/memory.h"
#include "server/one_sided_reply.h"
#include "store/store.h"

namespace ramp::server {

struct PageServiceOptions {
  int io_workers = 2;
  bool per_request_threads = false;
  // Batches whose pages are all in memory are served by the worker that received them
  // (ServeResident): no hand-off to an I/O thread and back, i.e. no wake-up of either.
  // false: every batch goes through the I/O threads (rampd --page-io pool, for comparison).
  bool serve_resident_inline = true;
  // How long a frame stays readable after its page is retired (the store's GC grace): a
  // page written from its frame sooner than half of it after it was located needs no
  // re-check (its frame cannot have been reused yet). 0: always re-check.
  int frame_grace_ms = 0;
  unsigned queue_depth = 128;  // io_uring entries per I/O thread
  size_t max_batch_pages = 256;
  size_t max_batch_bytes = size_t{512} << 10;
  int staging_buffers = 64;  // batches being read or written back at once
  // Batches one connection may have in flight: a peer that stops taking its pages (a tcp
  // client that never polls) holds this many staging buffers at most.
  int max_batches_per_connection = 32;
  bool use_io_uring = true;  // false: the pread fallback (tests, comparison)
  // Debug fault injection into disk reads (tests): "eio:<page>" fails the read of that page
  // number with EIO, "short:<page>" makes it return half the bytes; "moved:<page>" makes the
  // re-check of that page after it was written from its frame fail (ServeResident), as when
  // it left the frame meanwhile ("moved-once:<page>": only its first re-check). Empty: none.
  std::string debug_fault;
};

class PageService {
 public:
  static Status Start(const PageServiceOptions& options, store::Store* store,
                      std::shared_ptr<transport::Memory> memory, std::unique_ptr<PageService>* out);
  ~PageService();
  PageService(const PageService&) = delete;
  PageService& operator=(const PageService&) = delete;

  const PageServiceOptions& options() const { return options_; }

  // Checks what can be checked before any I/O (batch limits, lengths, destination bounds);
  // an error here is the whole request's.
  Status Validate(const protocol::ReadPagesRequest& req) const;

  struct Job {
    uint64_t session = 0;
    protocol::Header request;
    uint64_t clock = 0;  // for the reply header
    protocol::ReadPagesRequest req;
    std::vector<Status> pre;  // per item: errors found by the handler (moved, stale epoch)
    std::shared_ptr<const PostWritesFn> post;
    std::shared_ptr<std::atomic<int>> in_flight;  // the session's count, taken by Submit's caller
  };
  // Queues a validated batch (thread-safe). The reply goes through job.post.
  void Submit(Job job);
  // Serves a validated batch on the calling thread (the worker that received it) when every
  // page it asks for is resident: the reply's one-sided writes go from the arena's frames
  // straight to the client (no I/O thread, no staging copy) and the reply goes through
  // job.post. False, with the job untouched, when a page is not resident, reads are to
  // prefer the disk, or options().serve_resident_inline is off: Submit it then.
  bool ServeResident(Job& job);

  void Stop();

 private:
  struct Ring;
  struct Active;
  struct DiskRead;
  struct Staging;
  PageService(const PageServiceOptions& options, store::Store* store,
              std::shared_ptr<transport::Memory> memory);
  Status Init();
  void Run(int index);
  // Serves one job from start to end (the thread-per-request baseline).
  void ServeOne(Job& job, Ring* ring);
  // Locates and copies the job's pages, queues its disk reads on the ring (coalescing
  // consecutive pages of one file into one read); false when no staging buffer is free
  // and `wait` is false.
  bool Start(Job& job, Ring* ring, bool wait);
  // Submits queued reads while the ring has room; reaps completions (waiting up to
  // wait_us for the first when asked); finishes the jobs whose reads all completed.
  void Reap(Ring* ring, int wait_us);
  void Finish(Active& a);
  // A disk read completed with res (bytes or -errno).
  void Complete(DiskRead* d, int res);
  bool InjectFault(uint32_t page_no, uint32_t len, int* res) const;

  const PageServiceOptions options_;
  store::Store* const store_;
  const std::shared_ptr<transport::Memory> memory_;
  // Shared with the release functions of replies still in flight, which may outlive us.
  std::shared_ptr<Staging> staging_;

  std::mutex mu_;
  std::condition_variable cv_;  // jobs queued
  std::deque<Job> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::atomic<int> per_request_running_{0};
  std::atomic<bool> uring_refused_logged_{false};
  // 1 = eio, 2 = short (disk reads), 3 = moved, 4 = moved once (ServeResident's re-check)
  int fault_kind_ = 0;
  std::shared_ptr<std::atomic<bool>> fault_fired_ = std::make_shared<std::atomic<bool>>(false);
  uint32_t fault_page_ = 0;
};

}  // namespace ramp::server
