// The page file of one partition: a copy on disk of its log pages, at offset
// page_no * kPageBytes (a sparse file: retired page numbers stay holes). Remote page I/O
// reads pages that are not resident from here (io_uring). A page is written once, when it
// is complete (the log opened the next page), with plain pwrite: no fsync, no ordering
// promises. This is the seam the durability work (issue 4) is to turn into the durable
// log; until then nothing is recovered from these files and they are truncated when the
// partition is created.
//
// Not thread-safe for writes: the partition's exclusive lock guards Write, its shared lock
// guards OnDisk. The descriptors are stable for the file's life, so I/O threads may read
// through them without any lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp::store {

class PageFile {
 public:
  // Creates (truncating) <dir>/<keyspace>-<bucket>.pages. With direct_io, reads also get a
  // descriptor opened with O_DIRECT (falls back to the buffered one, logged, where the file
  // system refuses O_DIRECT).
  static Status Create(const std::string& dir, const PartitionId& id, bool direct_io,
                       std::unique_ptr<PageFile>* out);
  ~PageFile();
  PageFile(const PageFile&) = delete;
  PageFile& operator=(const PageFile&) = delete;

  // Writes `run` complete pages starting at page_no. An error is logged and the pages stay
  // "not on disk" (they are still resident): the page file is a copy, never the only one
  // until the memory budget work evicts pages.
  void Write(uint32_t page_no, uint32_t run, const uint8_t* data);
  // Writes a page already in the file again (its state bytes changed since): before the
  // memory budget evicts it, so that what is read back is what was in memory.
  Status Rewrite(uint32_t page_no, const uint8_t* data);
  // Reads one whole page (memory budget: a page read back into memory). IOError on a short
  // read or an I/O error.
  Status ReadPage(uint32_t page_no, uint8_t* dst) const;
  // Every page of [page_no, page_no + count) is in the file.
  bool OnDisk(uint32_t page_no, uint32_t count) const;
  // The descriptor I/O threads read pages through (O_DIRECT when asked and possible).
  int read_fd() const { return direct_fd_ >= 0 ? direct_fd_ : fd_; }
  bool direct() const { return direct_fd_ >= 0; }
  static uint64_t OffsetOf(uint32_t page_no);
  const std::string& path() const { return path_; }
  // Removes the file (the partition was dropped).
  void Unlink();

 private:
  PageFile(std::string path, int fd, int direct_fd)
      : path_(std::move(path)), fd_(fd), direct_fd_(direct_fd) {}
  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  std::vector<bool> on_disk_;
};

}  // namespace ramp::store
