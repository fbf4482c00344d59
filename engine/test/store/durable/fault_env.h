// An Env that forwards to the POSIX one and fails on demand: a disk that fills up after a
// number of bytes, fdatasync errors, read errors, a read-only file system. For durability
// and page-file tests. Its files give no descriptor (File::fd is -1), so readers that would
// use io_uring read through File::Read, where the faults are.
//
// With track_unsynced, it remembers what every write overwrote until an fdatasync of that
// file (through any descriptor, as fdatasync covers the file) made it durable; Crash() then
// puts the old bytes back, newest first: what a power failure leaves of writes that were
// never synced.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/durable/env.h"

namespace ramp::store::testing {

class FaultEnv : public Env {
 public:
  std::atomic<int64_t> bytes_left{-1};  // writes fail with NoSpace once exhausted (-1: never)
  std::atomic<bool> fail_sync{false};
  std::atomic<bool> read_only{false};
  std::atomic<bool> fail_reads{false};  // File::Read fails with IOError
  std::atomic<bool> track_unsynced{false};
  std::atomic<int> failed_syncs{0};         // syncs refused by fail_sync
  std::atomic<int> sync_delay_us{0};        // a slow disk: every sync takes this long first
  std::atomic<bool> no_sync_writes{false};  // OpenSyncWrites is refused (as by tmpfs)
  std::atomic<int> durable_ops{0};          // successful syncs and O_DSYNC writes
  std::atomic<bool> no_allocate{false};     // File::Allocate is NotSupported (no fallocate)

  // Undoes every write not covered by a successful sync since track_unsynced was set.
  // Call with no File of this Env in use. Returns how many writes were undone.
  size_t Crash() {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (auto& [path, undo] : unsynced_) {
      std::unique_ptr<File> f;
      if (!PosixEnv()->Open(path, false, &f).ok()) continue;
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
        (void)f->Write(it->offset, it->old.data(), it->old.size());
        ++n;
      }
      (void)f->Sync();
    }
    unsynced_.clear();
    return n;
  }

  Status Open(const std::string& path, bool create, std::unique_ptr<File>* out) override {
    if (read_only && create && !PosixEnv()->Exists(path)) return ReadOnly("open " + path);
    std::unique_ptr<File> f;
    RAMP_RETURN_IF_ERROR(PosixEnv()->Open(path, create, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f), path);
    return Status::OK();
  }
  Status OpenDirect(const std::string& path, std::unique_ptr<File>* out) override {
    std::unique_ptr<File> f;
    RAMP_RETURN_IF_ERROR(PosixEnv()->OpenDirect(path, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f), path);
    return Status::OK();
  }
  // Writes through it are durable when they return: with track_unsynced they are not
  // undone by Crash(); fail_sync and sync_delay_us apply to each write (its sync part).
  Status OpenSyncWrites(const std::string& path, std::unique_ptr<File>* out) override {
    if (no_sync_writes) return Status::InvalidArgument("open (O_DIRECT|O_DSYNC): refused by test");
    std::unique_ptr<File> f;
    RAMP_RETURN_IF_ERROR(PosixEnv()->OpenSyncWrites(path, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f), path, true);
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
  struct Undo {
    uint64_t seq;
    uint64_t offset;
    std::string old;
  };
  std::mutex mu_;
  uint64_t seq_ = 0;
  std::map<std::string, std::vector<Undo>> unsynced_;

  static Status ReadOnly(const std::string& what) {
    return Status::PermissionDenied(what + ": Read-only file system");
  }
  class FaultFile : public File {
   public:
    FaultFile(FaultEnv* env, std::unique_ptr<File> f, std::string path, bool sync_writes = false)
        : env_(env), f_(std::move(f)), path_(std::move(path)), sync_writes_(sync_writes) {}
    Status Write(uint64_t offset, const void* data, size_t len) override {
      if (env_->read_only) return ReadOnly("write");
      if (env_->bytes_left >= 0) {
        if (env_->bytes_left < static_cast<int64_t>(len)) {
          return Status::NoSpace("write: No space left on device");
        }
        env_->bytes_left -= static_cast<int64_t>(len);
      }
      if (sync_writes_) {
        // O_DSYNC: the write carries its own sync. A failed one writes nothing here (one
        // of the outcomes a failed device write may have).
        if (env_->sync_delay_us > 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(env_->sync_delay_us.load()));
        }
        if (env_->fail_sync) {
          ++env_->failed_syncs;
          return Status::IOError("write (O_DSYNC): Input/output error");
        }
        RAMP_RETURN_IF_ERROR(f_->Write(offset, data, len));
        ++env_->durable_ops;
        return Status::OK();
      }
      if (env_->track_unsynced) {
        std::lock_guard lock(env_->mu_);
        Undo u{++env_->seq_, offset, std::string(len, '\0')};
        size_t got = 0;
        RAMP_RETURN_IF_ERROR(f_->Read(offset, len, u.old.data(), &got));
        u.old.resize(got);  // bytes past the end were not there before
        env_->unsynced_[path_].push_back(std::move(u));
        // Under the lock: a sync that starts after this write's number covers its bytes.
        return f_->Write(offset, data, len);
      }
      return f_->Write(offset, data, len);
    }
    Status Sync() override {
      if (env_->sync_delay_us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(env_->sync_delay_us.load()));
      }
      if (env_->fail_sync) {
        ++env_->failed_syncs;
        return Status::IOError("fdatasync: Input/output error");
      }
      uint64_t upto = 0;
      {
        std::lock_guard lock(env_->mu_);
        upto = env_->seq_;  // what was written before this sync began
      }
      RAMP_RETURN_IF_ERROR(f_->Sync());
      ++env_->durable_ops;
      std::lock_guard lock(env_->mu_);
      auto it = env_->unsynced_.find(path_);
      if (it != env_->unsynced_.end()) {
        std::erase_if(it->second, [&](const Undo& u) { return u.seq <= upto; });
      }
      return Status::OK();
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
    Status Allocate(uint64_t offset, uint64_t len) override {
      if (env_->read_only) return ReadOnly("fallocate");
      if (env_->no_allocate) return File::Allocate(offset, len);
      if (env_->bytes_left >= 0) {
        if (env_->bytes_left < static_cast<int64_t>(len)) {
          return Status::NoSpace("fallocate: No space left on device");
        }
        env_->bytes_left -= static_cast<int64_t>(len);
      }
      return f_->Allocate(offset, len);
    }

   private:
    FaultEnv* env_;
    std::unique_ptr<File> f_;
    const std::string path_;
    const bool sync_writes_;
  };
};

}  // namespace ramp::store::testing
