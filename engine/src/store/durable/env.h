// The file-system seam of the store (leveldb's Env idea): everything the server does to
// files goes through an Env — the log writer, recovery, the page files of the memory
// budget and remote page I/O — so tests can inject faults (a full disk, a failing
// fdatasync or read, a read-only directory) without root or a special mount. PosixEnv is
// the real one. Thread-safe.
//
// Readers that submit their own I/O (the io_uring of remote page I/O) take the file's
// descriptor (File::fd); an Env that has none to give (a test Env) returns -1, and they
// read through File::Read instead, so faults reach them too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ramp/status.h"

namespace ramp::store {

// An open file written at offsets (log segments are rewritten in place at their head page).
class File {
 public:
  virtual ~File() = default;
  virtual Status Write(uint64_t offset, const void* data, size_t len) = 0;
  // fdatasync: the bytes written so far survive a crash once this returns OK.
  virtual Status Sync() = 0;
  virtual Status Read(uint64_t offset, size_t len, void* out, size_t* got) = 0;
  virtual Status Size(uint64_t* out) = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Reserves the blocks of [offset, offset + len) and grows the file over them without
  // writing them (fallocate): they read back as zeros, also after a crash. NotSupported
  // where the file system cannot: the caller writes zeros instead.
  virtual Status Allocate(uint64_t offset, uint64_t len) {
    (void)offset;
    (void)len;
    return Status::NotSupported("fallocate");
  }
  // The POSIX descriptor behind the file, for I/O submitted elsewhere (io_uring); valid
  // for the File's life. -1: there is none to give, read through Read.
  virtual int fd() const { return -1; }
};

class Env {
 public:
  virtual ~Env() = default;
  // Opens path for reading and writing, creating it when create is set.
  virtual Status Open(const std::string& path, bool create, std::unique_ptr<File>* out) = 0;
  // Opens an existing file read-only with O_DIRECT (reads then need buffers, offsets and
  // lengths aligned to the logical block size). An error where the file system refuses
  // O_DIRECT: the caller reads through a buffered File instead.
  virtual Status OpenDirect(const std::string& path, std::unique_ptr<File>* out) = 0;
  // Opens an existing file for writes that are durable when Write returns OK (O_DIRECT |
  // O_DSYNC: one device write with its cache flush, no page-cache writeback and no separate
  // fdatasync). Buffers, offsets and lengths must be aligned to kSyncWriteAlign. An error
  // where the file system refuses it: the caller writes and Syncs a buffered File instead.
  static constexpr size_t kSyncWriteAlign = 4096;
  virtual Status OpenSyncWrites(const std::string& path, std::unique_ptr<File>* out) = 0;
  virtual Status ReadFile(const std::string& path, std::string* out) = 0;
  // Writes a small file atomically (temporary file, fsync, rename, fsync of the directory).
  virtual Status WriteFileAtomic(const std::string& path, const std::string& data) = 0;
  virtual Status CreateDir(const std::string& path) = 0;  // OK if it exists
  // Names in a directory (no "." and ".."); NotFound when the directory is missing.
  virtual Status List(const std::string& dir, std::vector<std::string>* names) = 0;
  virtual Status Remove(const std::string& path) = 0;
  virtual Status RemoveDir(const std::string& path) = 0;
  // fsync of a directory: makes created and removed entries durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The process-wide POSIX Env.
Env* PosixEnv();

}  // namespace ramp::store
