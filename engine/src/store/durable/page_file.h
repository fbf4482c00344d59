// The page file of one partition: a copy on disk of its log pages, at offset
// page_no * kPageBytes (a sparse file: retired page numbers stay holes). Remote page I/O
// reads pages that are not resident from here (io_uring). A page is written once, when it
// is complete (the log opened the next page), with plain pwrite: no fsync, no ordering
// promises. This is the seam the durability work (issue 4) is to turn into the durable
// log; until then nothing is recovered from these files and they are truncated when the
// partition is created. Every access goes through the store's Env (env.h).
//
// Not thread-safe for writes: the partition's exclusive lock guards Write, its shared lock
// guards OnDisk. The reader File (reader()) is shared: I/O threads keep it, and read
// through it, without any lock, even after the partition is gone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp::store {

class Env;
class File;

class PageFile {
 public:
  // Creates (truncating) <dir>/<keyspace>-<bucket>.pages through env. With direct_io,
  // reads also get a File opened with O_DIRECT (falls back to the buffered one, logged,
  // where the file system refuses O_DIRECT).
  static Status Create(Env* env, const std::string& dir, const PartitionId& id, bool direct_io,
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
  // The File I/O threads read pages through (O_DIRECT when asked and possible).
  const std::shared_ptr<File>& reader() const { return direct_ != nullptr ? direct_ : file_; }
  bool direct() const { return direct_ != nullptr; }
  static uint64_t OffsetOf(uint32_t page_no);
  const std::string& path() const { return path_; }
  // Removes the file (the partition was dropped).
  void Unlink();

 private:
  PageFile(Env* env, std::string path, std::shared_ptr<File> file, std::shared_ptr<File> direct)
      : env_(env), path_(std::move(path)), file_(std::move(file)), direct_(std::move(direct)) {}
  Env* const env_;
  const std::string path_;
  const std::shared_ptr<File> file_;
  const std::shared_ptr<File> direct_;  // null without O_DIRECT
  std::vector<bool> on_disk_;
};

}  // namespace ramp::store
