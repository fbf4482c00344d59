// The group commit (DESIGN §5: "a write is acknowledged after its page is on disk"). Writers
// append to their partition's log in memory and take a ticket; one flusher thread writes
// the changed bytes of every dirty page of every partition to the server's write-ahead log
// (wal.h) and fdatasyncs that one file, then completes all tickets
// taken before it started the batch. While it syncs, new writes queue up for the next
// batch, so one fdatasync covers many clients and partitions. Nobody blocks on the disk:
// completion is a callback (the server sends its deferred reply from it).
//
// Checkpoints (when the log is half full, and at least every second while something is
// pending): the latest image of every page changed since the last one is written to its
// segment file (once, however many batches changed it), the files are synced, the log starts a new
// generation, and the files of segments compaction retired are removed (their live records
// were copied elsewhere and are durable by then).
//
// After a failed write or sync the writer stops accepting work (health() is the error):
// after a failed fdatasync the kernel may have dropped the dirty pages, so retrying could
// acknowledge data that is not on disk. A restart recovers from what the files hold.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ramp/status.h"
#include "store/durable/env.h"
#include "store/durable/log_sink.h"
#include "store/durable/sync_pool.h"
#include "store/durable/wal.h"

namespace ramp::store {

class LogWriter : public LogSink {
 public:
  LogWriter(Env* env, std::string dir, std::unique_ptr<Wal> wal);
  ~LogWriter() override;
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  void Start();
  // Writes what is dirty, completes every ticket, stops the thread. Idempotent.
  void Stop();

  void MarkDirty(std::shared_ptr<Partition> partition) override;

  // A ticket for everything appended before this call.
  uint64_t Ticket();
  // Calls done (from the thread that wrote the batch, or at once) when the ticket's batch is
  // durable, with the error if it could not be made durable. caller_flushes: the caller
  // promises to call FlushInline() soon (a server worker at the end of its round), so the
  // flusher thread is not woken for this waiter (only in inline mode; see FlushInline).
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done,
                   bool caller_flushes = false);
  // Inline mode: the threads that take tickets write the batches themselves. A server
  // worker that parked durable replies in a round calls FlushInline() at its end: if no
  // batch is being written, it writes one (everything dirty so far, its own waiters and
  // others') on its own thread and completes the waiters, so its replies go out without
  // waking the flusher thread and then the worker (two wake-ups per PREPARE, each 0.1-0.2 ms
  // on 2 busy cores). If a batch is being written, the writer of that batch hands the rest
  // to the flusher thread when it finishes. The flusher still writes checkpoints, batches
  // for Sync() and other waiters, dirty pages nobody waits for (COMMIT marks) that no
  // inline batch took within kBackstop, and every batch while the disk is slow (the last
  // batch took over kSlowBatch: a stalled disk then holds up the writes only, not the
  // workers' other requests). May be switched while running.
  void SetInlineFlush(bool on);
  void FlushInline();
  // Ticket + wait: for tests, shutdown and tools.
  Status Sync();
  // OK, or the error that stopped the writer.
  Status health() const;

  struct Stats {
    uint64_t batches = 0;
    uint64_t pages = 0;
    uint64_t syncs = 0;
    uint64_t files_removed = 0;
    uint64_t busy_us = 0;  // time spent writing and syncing
    uint64_t checkpoints = 0;
    uint64_t checkpoint_us = 0;  // time spent in checkpoints (the log is held meanwhile)
    uint64_t checkpoint_max_us = 0;
    uint64_t zeros_written = 0;   // bytes Preallocate wrote (no fallocate)
    uint64_t inline_batches = 0;  // written by FlushInline's caller
  };
  Stats stats() const;

 private:
  struct Waiter {
    uint64_t ticket;
    std::function<void(const Status&)> done;
  };
  struct SegmentFile {
    std::unique_ptr<File> file;
    uint64_t allocated = 0;  // bytes the file holds (zero-filled ahead of the writes)
  };
  struct PartitionFiles {
    bool dir_made = false;
    std::map<uint32_t, SegmentFile> segments;
  };

  void Run();
  // Writes one batch (everything dirty, every waiter up to it) on this thread. Called with
  // lock held, !writing_; returns with lock held. Checkpoints that are only due by time
  // are left to the flusher when inline.
  void WriteOneBatch(std::unique_lock<std::mutex>& lock, bool inline_caller);
  // Writes one batch; returns the first error.
  Status WriteBatch(std::vector<DirtyPages>* batch, bool inline_caller);
  Status FileFor(const PartitionId& id, uint32_t segment, SegmentFile** out,
                 std::vector<std::string>* new_dirs);
  // Allocates the file ahead of a write ending at `end`, a chunk at a time (File::Allocate:
  // fallocate; where the file system has none, zeros are written). Checkpoint writes then
  // land in reserved blocks that read as zeros past the last page, also after a crash.
  // Not zeros written: those were as many bytes as the page images, written back and
  // flushed at the next checkpoint, whose device cache flush on a virtual disk also waits
  // for them (while the group commit's log writes wait for that flush).
  Status Preallocate(SegmentFile* f, uint64_t end);
  Status Checkpoint();
  bool CheckpointDue() const;
  std::string PartitionDir(const PartitionId& id) const;

  Env* const env_;
  const std::string dir_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
  std::atomic<bool> inline_{false};  // SetInlineFlush (read without mu_ by FlushInline)
  bool writing_ = false;             // a thread holds the log: writes a batch or a checkpoint
  bool kicked_ = false;              // inline mode: the flusher has work that no worker will take
  bool slow_disk_ = false;          // the last batch took longer than kSlowBatch: no inline batches
  uint64_t last_seen_batches_ = 0;  // flusher, inline mode: batches at its last look
  Status failed_;
  uint64_t next_gen_ = 1;  // the batch a ticket taken now waits for
  std::unordered_map<Partition*, std::shared_ptr<Partition>> dirty_;
  std::deque<Waiter> waiters_;  // ticket order
  Stats stats_;
  std::thread thread_;

  // Whoever holds writing_ (the flusher thread, or a worker in FlushInline).
  std::unique_ptr<Wal> wal_;
  std::map<PartitionId, PartitionFiles> files_;
  SyncPool sync_pool_{3};
  // The latest image of every page changed since the last checkpoint (written to the
  // segment files at the checkpoint; the log holds their changes until then).
  struct ImageKey {
    PartitionId partition;
    uint32_t segment = 0;
    uint32_t page_no = 0;
    auto operator<=>(const ImageKey&) const = default;
  };
  std::map<ImageKey, std::string> images_;
  uint64_t pending_bytes_ = 0;
  std::vector<std::pair<PartitionId, uint32_t>> retired_;  // to remove at checkpoint
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
};

}  // namespace ramp::store
