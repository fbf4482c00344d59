#include "store/durable/log_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <set>

#include "common/record.h"
#include "ramp/log.h"
#include "store/durable/data_dir.h"
#include "store/memory/partition.h"

namespace ramp::store {
namespace {
// Open segment files kept between batches; past this, files not written are closed.
constexpr size_t kMaxOpenFiles = 256;
// Segment files grow by this many zeroed pages at a time (a quarter of a segment).
constexpr uint32_t kPreallocPages = 32;
// Page images waiting for the next checkpoint: past this, a checkpoint is due.
constexpr uint64_t kMaxPendingBytes = uint64_t{64} << 20;
// Inline mode: dirty pages nobody waits for (COMMIT marks) are written by the flusher when no
// batch took them for this long.
constexpr auto kBackstop = std::chrono::milliseconds(2);
// Inline mode: after a batch slower than this (a stalled or very slow disk), workers leave
// the batches to the flusher until one is fast again, so that a slow disk holds up only the
// writes and not every other request of the workers' connections.
constexpr auto kSlowBatch = std::chrono::milliseconds(5);
// Test hook (durability_itest): every batch waits this long before it takes its pages, as
// a slow disk would, so that a test can kill the server while an acknowledged COMMIT is
// still in memory only.
int TestDelayMs() {
  static const int ms = [] {
    const char* e = std::getenv("RAMP_TEST_LOG_DELAY_MS");
    return e == nullptr ? 0 : std::atoi(e);
  }();
  return ms;
}
}  // namespace

LogWriter::LogWriter(Env* env, std::string dir, std::unique_ptr<Wal> wal)
    : env_(env), dir_(std::move(dir)), wal_(std::move(wal)) {}

LogWriter::~LogWriter() {
  Stop();
}

void LogWriter::Start() {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void LogWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // A clean stop leaves nothing to replay.
  if (health().ok() && wal_ != nullptr) {
    Status st = Checkpoint();
    if (!st.ok()) RAMP_WARN("final checkpoint: %s", st.ToString().c_str());
  }
  {
    std::lock_guard lock(mu_);
    if (stats_.batches > 0) {
      RAMP_INFO(
          "log writer: %llu batches (%llu by workers), %llu fdatasyncs, %llu pages written, %llu "
          "checkpoints (%.1f ms on average, %.1f at most), %.0f us per batch on average (%.0f "
          "in the log's synced write%s)",
          static_cast<unsigned long long>(stats_.batches),
          static_cast<unsigned long long>(stats_.inline_batches),
          static_cast<unsigned long long>(stats_.syncs),
          static_cast<unsigned long long>(stats_.pages),
          static_cast<unsigned long long>(stats_.checkpoints),
          static_cast<double>(stats_.checkpoint_us) / 1000.0 /
              static_cast<double>(std::max<uint64_t>(stats_.checkpoints, 1)),
          static_cast<double>(stats_.checkpoint_max_us) / 1000.0,
          static_cast<double>(stats_.busy_us) / static_cast<double>(stats_.batches),
          static_cast<double>(wal_ ? wal_->sync_us() : 0) / static_cast<double>(stats_.batches),
          wal_ && wal_->sync_writes() ? ", O_DIRECT|O_DSYNC" : " and fdatasync");
      if (stats_.zeros_written > 0) {
        RAMP_INFO("log writer: %llu KiB of zeros written ahead in segment files (no fallocate)",
                  static_cast<unsigned long long>(stats_.zeros_written >> 10));
      }
    }
  }
  // Whatever is still waiting (no thread ever started) learns it will not be durable.
  std::deque<Waiter> left;
  {
    std::lock_guard lock(mu_);
    left.swap(waiters_);
    dirty_.clear();
  }
  for (auto& w : left) w.done(Status::Unavailable("the log writer stopped"));
}

void LogWriter::MarkDirty(std::shared_ptr<Partition> partition) {
  std::lock_guard lock(mu_);
  Partition* key = partition.get();
  dirty_.emplace(key, std::move(partition));
  // Inline mode: the worker that wrote it, or the flusher's backstop, takes it.
  if (!inline_) cv_.notify_one();
}

uint64_t LogWriter::Ticket() {
  std::lock_guard lock(mu_);
  return next_gen_;
}

void LogWriter::WhenDurable(uint64_t ticket, std::function<void(const Status&)> done,
                            bool caller_flushes) {
  Status now;
  {
    std::lock_guard lock(mu_);
    if (failed_.ok() && !stop_) {
      waiters_.push_back(Waiter{ticket, std::move(done)});
      if (!inline_ || !caller_flushes) {
        kicked_ = true;
        cv_.notify_one();
      }
      return;
    }
    now = failed_.ok() ? Status::Unavailable("the log writer stopped") : failed_;
  }
  done(now);
}

void LogWriter::SetInlineFlush(bool on) {
  std::lock_guard lock(mu_);
  inline_ = on;
}

void LogWriter::FlushInline() {
  if (!inline_.load(std::memory_order_relaxed)) return;  // no lock taken per worker round
  std::unique_lock lock(mu_);
  if (waiters_.empty()) return;
  if (writing_ || stop_ || !started_ || !failed_.ok()) {
    // The writer of the batch in progress hands these waiters on when it finishes.
    kicked_ = true;
    return;
  }
  if (slow_disk_) {
    kicked_ = true;
    cv_.notify_one();
    return;
  }
  WriteOneBatch(lock, /*inline_caller=*/true);
}

Status LogWriter::Sync() {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  WhenDurable(Ticket(), [p](const Status& s) { p->set_value(s); });
  return f.get();
}

Status LogWriter::health() const {
  std::lock_guard lock(mu_);
  return failed_;
}

LogWriter::Stats LogWriter::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void LogWriter::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    auto work = [&] { return !dirty_.empty() || !waiters_.empty(); };
    if (inline_) {
      // Workers write the batches; this thread takes what they hand on (kicked_), Sync()
      // and other waiters' batches, and dirty pages no batch took for a whole kBackstop.
      const auto wait = work() ? kBackstop : std::chrono::milliseconds(1000);
      const bool woken = cv_.wait_for(lock, wait, [&] { return !writing_ && (stop_ || kicked_); });
      if (writing_) continue;  // timed out while a worker writes: look again later
      if (!woken && !stop_ && stats_.batches != last_seen_batches_) {
        last_seen_batches_ = stats_.batches;  // a batch went out meanwhile: no hurry
        continue;
      }
      kicked_ = false;
    } else {
      cv_.wait_for(lock, std::chrono::seconds(1), [&] { return !writing_ && (stop_ || work()); });
      if (writing_) continue;
    }
    if (!work()) {
      if (stop_) break;
      // Idle: a checkpoint if one is due (compaction's retired files wait for it).
      if (failed_.ok()) {
        writing_ = true;
        lock.unlock();
        Status st = CheckpointDue() ? Checkpoint() : Status::OK();
        lock.lock();
        writing_ = false;
        if (!st.ok() && failed_.ok()) failed_ = st.Annotate("checkpoint");
      }
      continue;
    }
    WriteOneBatch(lock, /*inline_caller=*/false);
    last_seen_batches_ = stats_.batches;
  }
}

void LogWriter::WriteOneBatch(std::unique_lock<std::mutex>& lock, bool inline_caller) {
  writing_ = true;
  const uint64_t gen = next_gen_++;
  std::vector<std::shared_ptr<Partition>> parts;
  parts.reserve(dirty_.size());
  for (auto& [k, p] : dirty_) parts.push_back(std::move(p));
  dirty_.clear();
  const bool failed = !failed_.ok();
  lock.unlock();

  Status st;
  const auto started = std::chrono::steady_clock::now();
  if (!failed) {
    if (TestDelayMs() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(TestDelayMs()));
    std::vector<DirtyPages> batch(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) parts[i]->TakeDirty(&batch[i]);
    parts.clear();
    st = WriteBatch(&batch, inline_caller);
    if (!st.ok()) {
      RAMP_ERROR("the log could not be made durable, writes are refused from now on: %s",
                 st.ToString().c_str());
    }
  }
  const bool checkpoint_due = inline_caller && st.ok() && !failed && CheckpointDue();

  std::vector<Waiter> done;
  lock.lock();
  if (!st.ok() && failed_.ok()) {
    failed_ = st.Annotate("data directory " + dir_ +
                          " failed (writes are refused until "
                          "rampd restarts)");
  }
  ++stats_.batches;
  if (inline_caller) ++stats_.inline_batches;
  const auto took = std::chrono::steady_clock::now() - started;
  slow_disk_ = took > kSlowBatch;
  stats_.busy_us +=
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
  while (!waiters_.empty() && (waiters_.front().ticket <= gen || !failed_.ok())) {
    done.push_back(std::move(waiters_.front()));
    waiters_.pop_front();
  }
  const Status result = failed_;
  writing_ = false;
  if (inline_caller) {
    // Waiters that came while this batch was written, a checkpoint that is due, or a
    // Stop() waiting for this batch: the flusher's turn.
    if (!waiters_.empty() || checkpoint_due) kicked_ = true;
    if (kicked_ || stop_) cv_.notify_one();
  }
  lock.unlock();
  for (auto& w : done) w.done(result);
  lock.lock();
}

std::string LogWriter::PartitionDir(const PartitionId& id) const {
  return dir_ + "/" + PartitionDirName(id);
}

Status LogWriter::FileFor(const PartitionId& id, uint32_t segment, SegmentFile** out,
                          std::vector<std::string>* new_dirs) {
  PartitionFiles& pf = files_[id];
  auto it = pf.segments.find(segment);
  if (it != pf.segments.end()) {
    *out = &it->second;
    return Status::OK();
  }
  const std::string pdir = PartitionDir(id);
  if (!pf.dir_made) {
    if (!env_->Exists(pdir)) {
      RAMP_RETURN_IF_ERROR(env_->CreateDir(pdir));
      new_dirs->push_back(dir_);
    }
    pf.dir_made = true;
  }
  const std::string path = pdir + "/" + SegmentFileName(segment);
  const bool fresh = !env_->Exists(path);
  SegmentFile sf;
  RAMP_RETURN_IF_ERROR(env_->Open(path, true, &sf.file));
  RAMP_RETURN_IF_ERROR(sf.file->Size(&sf.allocated));
  if (fresh) new_dirs->push_back(pdir);
  *out = &pf.segments.emplace(segment, std::move(sf)).first->second;
  return Status::OK();
}

Status LogWriter::Preallocate(SegmentFile* f, uint64_t end) {
  if (end <= f->allocated) return Status::OK();
  constexpr uint64_t kChunk = uint64_t{kPreallocPages} * record::kPageBytes;
  const uint64_t target = (end + kChunk - 1) / kChunk * kChunk;
  Status st = f->file->Allocate(f->allocated, target - f->allocated);
  if (st.ok()) {
    f->allocated = target;
    return Status::OK();
  }
  if (!st.Is(Status::Code::kNotSupported)) return st;
  {
    std::lock_guard lock(mu_);
    stats_.zeros_written += target - f->allocated;
  }
  static const std::string zeros(kChunk, '\0');
  for (uint64_t at = f->allocated; at < target;) {
    const uint64_t n = std::min<uint64_t>(kChunk, target - at);
    RAMP_RETURN_IF_ERROR(f->file->Write(at, zeros.data(), n));
    at += n;
  }
  f->allocated = target;
  return Status::OK();
}

Status LogWriter::WriteBatch(std::vector<DirtyPages>* batch, bool inline_caller) {
  // Dropped partitions: a checkpoint first, so that no log entry of theirs is replayed after
  // their files are gone; a partition of the same id created since writes afresh.
  bool drops = false;
  for (DirtyPages& d : *batch) drops = drops || d.dropped;
  if (drops) {
    for (DirtyPages& d : *batch) {
      if (!d.dropped) continue;
      images_.erase(images_.lower_bound(ImageKey{d.partition, 0, 0}),
                    images_.lower_bound(ImageKey{d.partition, UINT32_MAX, UINT32_MAX}));
    }
    RAMP_RETURN_IF_ERROR(Checkpoint());
    for (DirtyPages& d : *batch) {
      if (!d.dropped) continue;
      const std::string pdir = PartitionDir(d.partition);
      files_.erase(d.partition);
      std::erase_if(retired_, [&](const auto& e) { return e.first == d.partition; });
      std::vector<std::string> names;
      if (env_->List(pdir, &names).ok()) {
        for (const auto& n : names) RAMP_RETURN_IF_ERROR(env_->Remove(pdir + "/" + n));
        RAMP_RETURN_IF_ERROR(env_->RemoveDir(pdir));
        RAMP_RETURN_IF_ERROR(env_->SyncDir(dir_));
      }
    }
  }
  // The log entries: each page's header and the bytes appended since it was last taken.
  std::vector<WalPatch> entries;
  uint64_t entry_bytes = 0;
  for (const DirtyPages& d : *batch) {
    if (d.dropped) continue;
    for (const DirtyPage& p : d.pages) {
      const uint32_t base = (p.page_no - p.segment) * static_cast<uint32_t>(record::kPageBytes);
      entries.push_back(
          WalPatch{d.partition, p.segment, base, p.bytes.substr(0, record::kPageHeaderBytes)});
      const uint32_t from = std::max<uint32_t>(p.from, record::kPageHeaderBytes);
      if (p.used > from) {
        entries.push_back(
            WalPatch{d.partition, p.segment, base + from, p.bytes.substr(from, p.used - from)});
      }
      entry_bytes += 2 * Wal::kEntryHeaderBytes + record::kPageHeaderBytes +
                     (p.used > from ? p.used - from : 0);
    }
  }
  // A batch larger than what the log holds (huge values): its files are synced directly.
  const bool direct = entry_bytes > wal_->room() + wal_->used();
  if (!direct && entry_bytes > wal_->room()) RAMP_RETURN_IF_ERROR(Checkpoint());
  // The full pages go to the segment files at the next checkpoint only: a head page changes
  // in many batches and is written once, and the disk is left to the log's syncs.
  uint64_t pages = 0;
  for (DirtyPages& d : *batch) {
    if (d.dropped) continue;
    for (DirtyPage& p : d.pages) {
      pages += p.bytes.size() / record::kPageBytes;
      pending_bytes_ += p.bytes.size();
      auto [it, fresh] = images_.try_emplace(ImageKey{d.partition, p.segment, p.page_no});
      if (!fresh) pending_bytes_ -= it->second.size();
      it->second = std::move(p.bytes);
    }
    for (uint32_t s : d.retired_segments) retired_.emplace_back(d.partition, s);
  }
  size_t syncs = 0;
  if (direct) {
    RAMP_RETURN_IF_ERROR(Checkpoint());  // writes and syncs the pages just taken
  } else if (!entries.empty()) {
    RAMP_RETURN_IF_ERROR(wal_->Append(entries));
    syncs = 1;
  }
  // Inline: a checkpoint due only by time is the flusher's (the worker has replies to send).
  if (CheckpointDue() && (!inline_caller || wal_->used() > wal_->room())) {
    RAMP_RETURN_IF_ERROR(Checkpoint());
  }
  std::lock_guard lock(mu_);
  stats_.pages += pages;
  stats_.syncs += syncs;
  return Status::OK();
}

bool LogWriter::CheckpointDue() const {
  if (wal_->used() > wal_->room()) return true;  // more than half full
  if (pending_bytes_ > kMaxPendingBytes) return true;
  if (images_.empty() && retired_.empty()) return false;
  return std::chrono::steady_clock::now() - last_checkpoint_ > std::chrono::seconds(1);
}

Status LogWriter::Checkpoint() {
  const auto started = std::chrono::steady_clock::now();
  // Pages of segments about to be removed need not be written.
  for (const auto& [id, segment] : retired_) {
    auto lo = images_.lower_bound(ImageKey{id, segment, 0});
    auto hi = images_.lower_bound(ImageKey{id, segment + 1, 0});
    images_.erase(lo, hi);
  }
  std::set<File*> written;
  std::vector<std::string> new_dirs;
  for (const auto& [key, bytes] : images_) {
    SegmentFile* sf = nullptr;
    RAMP_RETURN_IF_ERROR(FileFor(key.partition, key.segment, &sf, &new_dirs));
    const uint64_t offset = uint64_t{key.page_no - key.segment} * record::kPageBytes;
    RAMP_RETURN_IF_ERROR(Preallocate(sf, offset + bytes.size()));
    RAMP_RETURN_IF_ERROR(sf->file->Write(offset, bytes.data(), bytes.size()));
    written.insert(sf->file.get());
  }
  RAMP_RETURN_IF_ERROR(sync_pool_.SyncAll(std::vector<File*>(written.begin(), written.end())));
  std::set<std::string> dirs_made(new_dirs.begin(), new_dirs.end());
  for (const auto& d : dirs_made) RAMP_RETURN_IF_ERROR(env_->SyncDir(d));
  const size_t synced_files = written.size();
  images_.clear();
  pending_bytes_ = 0;
  // Everything the log held is in synced segment files now.
  RAMP_RETURN_IF_ERROR(wal_->Reset());
  last_checkpoint_ = std::chrono::steady_clock::now();
  std::set<std::string> dirs;
  uint64_t removed = 0;
  for (const auto& [id, segment] : retired_) {
    auto pf = files_.find(id);
    if (pf != files_.end()) pf->second.segments.erase(segment);
    const std::string pdir = PartitionDir(id);
    RAMP_RETURN_IF_ERROR(env_->Remove(pdir + "/" + SegmentFileName(segment)));
    dirs.insert(pdir);
    ++removed;
  }
  retired_.clear();
  for (const auto& d : dirs) RAMP_RETURN_IF_ERROR(env_->SyncDir(d));
  // Segment files stay open between checkpoints, up to a bound.
  size_t open = 0;
  for (auto& [id, pf] : files_) open += pf.segments.size();
  if (open > kMaxOpenFiles) files_.clear();
  std::lock_guard lock(mu_);
  stats_.syncs += synced_files + 1;
  stats_.files_removed += removed;
  stats_.checkpoints++;
  const auto us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - started)
                                            .count());
  stats_.checkpoint_us += us;
  stats_.checkpoint_max_us = std::max(stats_.checkpoint_max_us, us);
  return Status::OK();
}

}  // namespace ramp::store
