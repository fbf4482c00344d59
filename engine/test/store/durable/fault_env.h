// An Env that forwards to the POSIX one and fails on demand: a disk that fills up after a
// number of bytes, fdatasync errors, read errors, a read-only file system. For durability
// and page-file tests. Its files give no descriptor (File::fd is -1), so readers that would
// use io_uring read through File::Read, where the faults are.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "store/durable/env.h"

namespace ramp::store::testing {

class FaultEnv : public Env {
 public:
  std::atomic<int64_t> bytes_left{-1};  // writes fail with NoSpace once exhausted (-1: never)
  std::atomic<bool> fail_sync{false};
  std::atomic<bool> read_only{false};
  std::atomic<bool> fail_reads{false};  // File::Read fails with IOError

  Status Open(const std::string& path, bool create, std::unique_ptr<File>* out) override {
    if (read_only && create && !PosixEnv()->Exists(path)) return ReadOnly("open " + path);
    std::unique_ptr<File> f;
    RAMP_RETURN_IF_ERROR(PosixEnv()->Open(path, create, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f));
    return Status::OK();
  }
  Status OpenDirect(const std::string& path, std::unique_ptr<File>* out) override {
    std::unique_ptr<File> f;
    RAMP_RETURN_IF_ERROR(PosixEnv()->OpenDirect(path, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f));
    return Status::OK();
  }
  Status ReadFile(const std::string& path, std::string* out) override {
    return PosixEnv()->ReadFile(path, out);
  }
  Status WriteFileAtomic(const std::string& path, const std::string& data) override {
    if (read_only) return ReadOnly("write " + path);
    return PosixEnv()->WriteFileAtomic(path, data);
  }
  Status CreateDir(const std::string& path) override {
    if (read_only && !PosixEnv()->Exists(path)) return ReadOnly("mkdir " + path);
    return PosixEnv()->CreateDir(path);
  }
  Status List(const std::string& dir, std::vector<std::string>* names) override {
    return PosixEnv()->List(dir, names);
  }
  Status Remove(const std::string& path) override {
    if (read_only) return ReadOnly("unlink " + path);
    return PosixEnv()->Remove(path);
  }
  Status RemoveDir(const std::string& path) override { return PosixEnv()->RemoveDir(path); }
  Status SyncDir(const std::string& dir) override { return PosixEnv()->SyncDir(dir); }
  bool Exists(const std::string& path) override { return PosixEnv()->Exists(path); }

 private:
  static Status ReadOnly(const std::string& what) {
    return Status::PermissionDenied(what + ": Read-only file system");
  }
  class FaultFile : public File {
   public:
    FaultFile(FaultEnv* env, std::unique_ptr<File> f) : env_(env), f_(std::move(f)) {}
    Status Write(uint64_t offset, const void* data, size_t len) override {
      if (env_->read_only) return ReadOnly("write");
      if (env_->bytes_left >= 0) {
        if (env_->bytes_left < static_cast<int64_t>(len)) {
          return Status::NoSpace("write: No space left on device");
        }
        env_->bytes_left -= static_cast<int64_t>(len);
      }
      return f_->Write(offset, data, len);
    }
    Status Sync() override {
      if (env_->fail_sync) return Status::IOError("fdatasync: Input/output error");
      return f_->Sync();
    }
    Status Read(uint64_t offset, size_t len, void* out, size_t* got) override {
      if (env_->fail_reads) {
        *got = 0;
        return Status::IOError("read: Input/output error");
      }
      return f_->Read(offset, len, out, got);
    }
    Status Size(uint64_t* out) override { return f_->Size(out); }
    Status Truncate(uint64_t size) override { return f_->Truncate(size); }

   private:
    FaultEnv* env_;
    std::unique_ptr<File> f_;
  };
};

}  // namespace ramp::store::testing
