// Remote page I/O, client side (DESIGN §6): a pipelined reader of log pages from the
// servers that own them. Many READ_PAGES batches are kept in flight over several
// connections per server; the destination buffers of every batch slot are registered once,
// as one scatter–gather handle (paper 003: one handle for many discrete buffers), through
// the registration cache, and the servers write pages into them one-sided.
//
// Every completion is checked against what was asked before a byte of it is used: the
// reply must name the same pages (partition, page number, epoch, length, destination) in
// the same order, and a page that carries a header must carry the header of the page asked
// for. A mismatch is a Corruption error, never data.
//
// Single-threaded like the Client it belongs to; it never starts threads. A PageReader must
// not outlive its Client. Its connections are its own (several per server, apart from the
// client's): each is opened on first use, and again once a server closed it, and every
// wait follows the client library's one wait policy (spin, sleep on doorbells, wait hook,
// timeout).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "ramp/client.h"
#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp {

namespace protocol {
struct PageReadItem;
struct PageReadResult;
}  // namespace protocol

struct PageRef {
  PartitionId part;
  uint32_t page_no = 0;
  uint32_t epoch = 0;
  uint32_t length = 8192;  // a multiple of 512, at most 16384 (two pages)
};

struct PageReaderOptions {
  int connections_per_node = 2;
  int batch_pages = 16;       // pages per READ_PAGES request
  int batches_in_flight = 4;  // per connection (at most 32: the servers' limit)
  // The longest page read asked for (buffers are sized by it): 8192, or 16384 for
  // two-page reads.
  uint32_t max_page_bytes = 8192;
  // Ask servers to read pages from their page files where they are there (benchmarks of
  // the disk path); otherwise resident pages are copied from memory.
  bool prefer_disk = false;
  // The reader is a migration's target (protocol::kPagesMigration): servers only.
  bool migration = false;
};

struct PageReaderStats {
  uint64_t pages = 0;
  uint64_t bytes = 0;
  uint64_t batches = 0;
  uint64_t page_errors = 0;
};

class PageReader {
 public:
  static Status Open(Client* client, const PageReaderOptions& options,
                     std::unique_ptr<PageReader>* out);
  ~PageReader();
  PageReader(const PageReader&) = delete;
  PageReader& operator=(const PageReader&) = delete;

  // Called once per page, in completion order: index into the pages passed to Read, the
  // page's status (an error of that page alone: outside the partition, stale epoch, disk
  // error) and, when OK, its bytes (valid during the call only). A non-OK return stops Read,
  // which then returns it.
  using Sink = std::function<Status(size_t index, const Status& status, const uint8_t* data,
                                    uint32_t length)>;
  // Reads the pages (owners resolved through the client's directory cache). Errors of the
  // whole read: Timeout, Unavailable, Corruption (a reply that does not match its request).
  Status Read(std::span<const PageRef> pages, const Sink& sink);

  // The same read, pulled one batch at a time (a scan hands rows out of a batch while the
  // next batches are in flight): Begin queues the pages (copied), each NextBatch calls sink
  // for the pages of one completed batch and keeps that batch's buffer until the next call
  // of NextBatch, Begin or End (the bytes passed to sink stay valid until then); *done once
  // every page was delivered (sink is not called then). An error of NextBatch ends the read
  // as Read's does. End gives the held buffer back and, when pages are still in flight
  // (a read stopped early), waits for them (bounded) so that the reader stays intact.
  Status Begin(std::span<const PageRef> pages);
  Status NextBatch(const Sink& sink, bool* done);
  void End();
  // The next read, queued behind the current one so that the pipeline stays full between
  // reads: its pages are sent once every page of the current read was sent (all_sent), and
  // its batches that complete early wait, their buffers kept, until BeginPrefetched (after
  // NextBatch said *done) makes it the current read. Begin and End drop it.
  Status Prefetch(std::span<const PageRef> pages);
  Status BeginPrefetched();
  bool prefetched() const;
  bool all_sent() const;

  PageReaderStats stats() const;
  // Nothing in flight and every batch slot usable: a reader whose read failed with batches
  // in flight gives their slots up for good (a late write may still land in them), and one
  // kept for later reads should be intact.
  bool intact() const;

  struct Impl;

 private:
  explicit PageReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Checks one reply item against the request item and, when OK, the page bytes it carries
// (exposed for tests).
Status CheckPageReply(const protocol::PageReadItem& asked, const protocol::PageReadResult& got,
                      const uint8_t* data);

}  // namespace ramp
