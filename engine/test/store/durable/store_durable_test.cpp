// Store with a data directory: the log on disk, recovery (RAMP state, prepared
// transactions, fences), the torn tail, corruption in the middle, the identity of the data
// directory, a full disk and a read-only one, compaction freeing files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "fault_env.h"
#include "numbered.h"
#include "store/durable/data_dir.h"
#include "store_test_util.h"

namespace ramp::store {
namespace {

using ::ramp::testing::Numbered;
using testing::Part;
using testing::SiblingKeys;
using testing::Ts;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

class StoreDurableTest : public testing::StoreTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ramp-durable-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.data_dir = dir_ + "/data";
    options_.cluster_id = 42;
    options_.gc_grace_ms = 1000;
    options_.env = &env_;
    Open();
  }
  void TearDown() override {
    store_.reset();
    [[maybe_unused]] int rc = std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // Closes the store without its final flush having any say: everything acknowledged was
  // synced before (the tests sync explicitly), so this is what a crash leaves.
  void Reopen() {
    ASSERT_TRUE(store_->SyncLog().ok());
    Open();
  }
  void ConcurrentPreparesSurviveACrash(bool inline_flush);
  void UnwaitedWritesBecomeDurable(bool inline_flush);
  void SegmentFilesAllocatedAhead(bool fallocate);
  Status TryOpen() {
    store_.reset();
    options_.now_ms = [this] { return now_.load(); };
    return Store::Open(options_, transport::Memory::Create(), &store_);
  }
  std::string PartDir(const PartitionId& p = Part()) {
    return options_.data_dir + "/" + PartitionDirName(p);
  }
  std::vector<std::string> Segments(const PartitionId& p = Part()) {
    std::vector<std::string> names, out;
    PosixEnv()->List(PartDir(p), &names);
    for (auto& n : names) {
      uint32_t first;
      if (ParseSegmentFileName(n, &first)) out.push_back(PartDir(p) + "/" + n);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string Value(int i) { return Numbered("value-", i) + std::string(200, 'v'); }

  std::string dir_;
  testing::FaultEnv env_;
};

TEST_F(StoreDurableTest, CommittedPreparedAndAbortedSurviveARestart) {
  Put(Ts(10), "a", "a10");
  Put(Ts(20), "a", "a20");
  Put(Ts(30), "b", "b30", Part(), kWriteTombstone);
  // Prepared, never decided: the termination protocol will ask about it after restart.
  ASSERT_TRUE(Prepare(Ts(40), Part(), "c", "c40", SiblingKeys({"d"}, 3)).ok());
  // Aborted: dropped, and fenced against a late PREPARE.
  ASSERT_TRUE(Prepare(Ts(50), Part(), "e", "e50").ok());
  ASSERT_TRUE(Abort(Ts(50)).ok());
  // A fence by query (termination) must also survive.
  EXPECT_EQ(store_->QueryTxn(Ts(60), Part(), true), TxnState::kUnknown);
  Reopen();
  EXPECT_EQ(Get("a").value, "a20");
  EXPECT_EQ(Get("a").ts, Ts(20));
  EXPECT_EQ(Get("a", Ts(10)).value, "a10");  // still inside the grace
  EXPECT_EQ(Get("b").flags & record::kRecordTombstone, record::kRecordTombstone);
  EXPECT_EQ(Get("c").status, ReadStatus::kNotFound);
  EXPECT_EQ(Get("c", Ts(40)).value, "c40");  // round 2 still finds the prepared version
  EXPECT_EQ(store_->QueryTxn(Ts(40), Part(), false), TxnState::kPrepared);
  std::vector<PendingTxn> pending = store_->PendingOlderThan(now_ + 1);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].ts, Ts(40));
  EXPECT_EQ(pending[0].siblings.size(), 2u);  // this partition and bucket 3
  EXPECT_EQ(Get("e").status, ReadStatus::kNotFound);
  EXPECT_TRUE(Prepare(Ts(50), Part(), "e", "late").Is(Status::Code::kAborted));
  EXPECT_TRUE(Prepare(Ts(60), Part(), "f", "late").Is(Status::Code::kAborted));
  // The prepared one can still be committed after the restart.
  ASSERT_TRUE(Commit(Ts(40)).ok());
  Reopen();
  EXPECT_EQ(Get("c").value, "c40");
}

// A crash between checkpoints: the segment files lost what was written to them after the
// last checkpoint (never synced); the write-ahead log has it.
TEST_F(StoreDurableTest, WriteAheadLogRestoresWhatTheSegmentFilesLost) {
  Put(Ts(5), "before", "checkpoint");
  Reopen();  // a clean stop: a checkpoint
  // What the segment files hold, synced, at the checkpoint.
  std::map<std::string, std::string> synced;
  for (uint32_t b = 0; b < 3; ++b) {
    for (const std::string& f : Segments(Part(b))) synced[f] = ReadAll(f);
  }
  for (int i = 0; i < 300; ++i) Put(Ts(10 + i), Numbered("k", i), Value(i), Part(i % 3));
  ASSERT_TRUE(store_->SyncLog().ok());
  env_.fail_sync = true;  // no final checkpoint: the store stops as in a crash
  store_.reset();
  env_.fail_sync = false;
  // The writes made after the checkpoint were never synced: a power failure loses them.
  for (uint32_t b = 0; b < 3; ++b) {
    for (const std::string& f : Segments(Part(b))) WriteAll(f, synced.count(f) ? synced[f] : "");
  }
  Status st = TryOpen();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(store_->recovery().wal_bytes, 0u);
  EXPECT_EQ(Get("before").value, "checkpoint");
  for (int i = 0; i < 300; ++i) {
    ReadResult r = Get(Numbered("k", i), {}, 0, Part(i % 3));
    ASSERT_EQ(r.status, ReadStatus::kOk) << i;
    EXPECT_EQ(r.value, Value(i));
  }
  // Written back and checkpointed: a second restart needs no log.
  Reopen();
  int missing = 0;
  for (int i = 0; i < 300; ++i) {
    missing += Get(Numbered("k", i), {}, 0, Part(i % 3)).status != ReadStatus::kOk;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(store_->recovery().wal_bytes, 0u);
  EXPECT_EQ(Get(Numbered("k", 299), {}, 0, Part(299 % 3)).value, Value(299));
}

TEST_F(StoreDurableTest, ManyPartitionsAndPagesRecover) {
  for (int i = 0; i < 3000; ++i) {
    Put(Ts(100 + i), Numbered("k", i % 700), Value(i), Part(i % 5));
  }
  Reopen();
  for (int i = 3000 - 700; i < 3000; ++i) {
    ReadResult r = Get(Numbered("k", i % 700), {}, 0, Part(i % 5));
    ASSERT_EQ(r.status, ReadStatus::kOk) << i;
    EXPECT_EQ(r.value, Value(i));
  }
  EXPECT_EQ(store_->stats().partitions, 5u);
}

TEST_F(StoreDurableTest, TornTailIsCutAndEverythingBeforeItKept) {
  for (int i = 0; i < 50; ++i) Put(Ts(10 + i), Numbered("k", i), Value(i));
  Reopen();
  store_.reset();
  std::vector<std::string> segs = Segments();
  ASSERT_FALSE(segs.empty());
  std::string bytes = ReadAll(segs.back());
  ASSERT_GE(bytes.size(), record::kPageBytes);
  // The last page's header claims more than was written (a write cut short): scribble over
  // the end of its records, then add half a page of garbage after it.
  // The last page written (the file is preallocated with zeros past it).
  size_t last = bytes.size();
  record::PageHeader h;
  do {
    ASSERT_GE(last, record::kPageBytes);
    last -= record::kPageBytes;
  } while (!record::ReadPageHeader(reinterpret_cast<const uint8_t*>(bytes.data()) + last,
                                   record::kPageBytes, &h)
                .ok());
  ASSERT_GT(h.used, 600u);
  for (size_t i = last + h.used - 100; i < last + h.used; ++i) bytes[i] ^= 0x5a;
  bytes.resize(last + record::kPageBytes);
  bytes += std::string(record::kPageBytes / 2, '\x17');
  WriteAll(segs.back(), bytes);
  ASSERT_TRUE(TryOpen().ok());
  EXPECT_GT(store_->recovery().torn_cut, 0u);
  int found = 0;
  for (int i = 0; i < 50; ++i) found += Get(Numbered("k", i)).status == ReadStatus::kOk;
  EXPECT_GE(found, 40);  // all but the records of the damaged end
  EXPECT_LT(found, 50);
  for (int i = 0; i < 50; ++i) {
    ReadResult r = Get(Numbered("k", i));
    if (r.status == ReadStatus::kOk) {
      EXPECT_EQ(r.value, Value(i));
    }
  }
  // The log goes on from the cut, and a second restart is clean.
  Put(Ts(1000), "after", "cut");
  Reopen();
  EXPECT_EQ(Get("after").value, "cut");
  EXPECT_EQ(store_->recovery().torn_cut, 0u);
}

// Segment files are allocated ahead of the checkpoint's page writes, a chunk at a time
// (LogWriter::Preallocate): with fallocate, blocks reserved without writing zeros (the
// zeros were as many bytes as the images, flushed at every checkpoint); where there is no
// fallocate, zeros written. Either way the file covers whole chunks with its blocks
// allocated, reads zeros past the last page, and everything comes back.
void StoreDurableTest::SegmentFilesAllocatedAhead(bool fallocate) {
  env_.no_allocate = !fallocate;
  for (int i = 0; i < 400; ++i) Put(Ts(10 + i), Numbered("k", i), Value(i), Part(i % 2));
  Reopen();  // a checkpoint writes the pages
  constexpr uint64_t kChunk = 32 * record::kPageBytes;
  int files = 0;
  for (uint32_t b = 0; b < 2; ++b) {
    for (const std::string& f : Segments(Part(b))) {
      struct stat st;
      ASSERT_EQ(stat(f.c_str(), &st), 0) << f;
      const auto size = static_cast<uint64_t>(st.st_size);
      EXPECT_GT(size, 0u) << f;
      EXPECT_EQ(size % kChunk, 0u) << f << ": not grown by whole chunks";
      EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, size) << f << ": blocks not allocated";
      // Past the last page written: zeros (recovery's end of the file).
      const std::string bytes = ReadAll(f);
      size_t used = 0;
      for (size_t at = 0; at + record::kPageBytes <= bytes.size(); at += record::kPageBytes) {
        record::PageHeader h;
        if (record::ReadPageHeader(reinterpret_cast<const uint8_t*>(bytes.data()) + at,
                                   record::kPageBytes, &h)
                .ok()) {
          used = at + record::kPageBytes;
        }
      }
      EXPECT_GT(used, 0u) << f;
      EXPECT_EQ(bytes.find_first_not_of('\0', used), std::string::npos) << f;
      ++files;
    }
  }
  EXPECT_GE(files, 2);
  store_.reset();
  ASSERT_TRUE(TryOpen().ok());
  for (int i = 0; i < 400; ++i)
    EXPECT_EQ(Get(Numbered("k", i), {}, 0, Part(i % 2)).value, Value(i));
}

TEST_F(StoreDurableTest, SegmentFilesAreAllocatedAheadWithFallocate) {
  SegmentFilesAllocatedAhead(true);
}

TEST_F(StoreDurableTest, SegmentFilesAreAllocatedAheadWithZerosWithoutFallocate) {
  SegmentFilesAllocatedAhead(false);
}

TEST_F(StoreDurableTest, CorruptionInTheMiddleIsAnErrorNotSilentLoss) {
  // Enough pages for two segment files.
  for (int i = 0; i < 6000; ++i) Put(Ts(10 + i), Numbered("k", i), Value(i));
  Reopen();
  store_.reset();
  std::vector<std::string> segs = Segments();
  ASSERT_GE(segs.size(), 2u);
  std::string bytes = ReadAll(segs.front());
  bytes[10 * record::kPageBytes + 500] ^= 1;
  WriteAll(segs.front(), bytes);
  Status st = TryOpen();
  EXPECT_TRUE(st.Is(Status::Code::kCorruption)) << st.ToString();
  EXPECT_NE(st.message().find(segs.front()), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("page 10"), std::string::npos) << st.ToString();
  // Refused every time, never "repaired" by dropping what follows.
  EXPECT_TRUE(TryOpen().Is(Status::Code::kCorruption));
}

TEST_F(StoreDurableTest, DataDirectoryOfAnotherClusterNodeOrFormatIsRefused) {
  Put(Ts(10), "a", "x");
  Reopen();
  store_.reset();
  options_.cluster_id = 43;
  Status st = TryOpen();
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  EXPECT_NE(st.message().find("another cluster"), std::string::npos) << st.ToString();
  options_.cluster_id = 42;
  options_.node = 1;
  st = TryOpen();
  EXPECT_NE(st.message().find("belongs to node 0"), std::string::npos) << st.ToString();
  options_.node = 0;
  // A data directory written by a future format version.
  const std::string id_file = options_.data_dir + "/RAMP_DATA";
  const std::string good = ReadAll(id_file);
  std::string text = good;
  text.replace(text.find("format 1"), 8, "format 2");
  WriteAll(id_file, text);
  st = TryOpen();
  EXPECT_TRUE(st.Is(Status::Code::kCorruption) || st.Is(Status::Code::kNotSupported))
      << st.ToString();  // the checksum catches the edit
  // Re-sealed properly, it is a clean version refusal.
  text = good;
  text.replace(text.find("format 1"), 8, "format 2");
  text = text.substr(0, text.rfind("crc "));
  char crc[32];
  std::snprintf(crc, sizeof(crc), "crc %08x\n", record::Crc32c(text.data(), text.size()));
  WriteAll(id_file, text + crc);
  st = TryOpen();
  EXPECT_TRUE(st.Is(Status::Code::kNotSupported)) << st.ToString();
  EXPECT_NE(st.message().find("format version 2"), std::string::npos) << st.ToString();
  WriteAll(id_file, good);
  ASSERT_TRUE(TryOpen().ok());
  EXPECT_EQ(Get("a").value, "x");
}

TEST_F(StoreDurableTest, FullDiskFailsTheRequestsAndLosesNothingAcknowledged) {
  for (int i = 0; i < 20; ++i) Put(Ts(10 + i), Numbered("k", i), Value(i));
  ASSERT_TRUE(store_->SyncLog().ok());
  env_.bytes_left = 3 * record::kPageBytes;
  Status failure;
  int acked = 0;
  for (int i = 20; i < 2000 && failure.ok(); ++i) {
    Status st = Prepare(Ts(10 + i), Part(), Numbered("k", i), Value(i));
    if (st.ok()) st = Commit(Ts(10 + i));
    if (st.ok()) st = store_->SyncLog();
    if (st.ok()) {
      ++acked;
    } else {
      failure = st;
    }
  }
  EXPECT_TRUE(failure.Is(Status::Code::kNoSpace)) << failure.ToString();
  EXPECT_NE(failure.message().find("No space"), std::string::npos) << failure.ToString();
  // Later writes are refused at once with the reason; reads go on.
  Status st = Prepare(Ts(5000), Part(), "late", "x");
  EXPECT_TRUE(st.Is(Status::Code::kNoSpace)) << st.ToString();
  EXPECT_EQ(Get(Numbered("k", 3)).value, Value(3));
  // Space again, restart: everything acknowledged is there.
  env_.bytes_left = -1;
  store_.reset();
  ASSERT_TRUE(TryOpen().ok());
  for (int i = 0; i < 20 + acked; ++i) {
    EXPECT_EQ(Get(Numbered("k", i)).value, Value(i)) << i;
  }
}

// The group commit's pipeline (log_writer.h): while one batch's fdatasync is in flight the
// next batch is written and synced. Writers PREPARE concurrently and count a write only
// when its ticket is reported durable; the disk then stops, and everything never synced is
// undone (FaultEnv::Crash). Every write reported durable must come back.
// inline_flush: the threads write the batches themselves, as server workers do
// (LogWriter::FlushInline): register with caller_flushes, then flush.
void StoreDurableTest::ConcurrentPreparesSurviveACrash(bool inline_flush) {
  store_->SetInlineLogFlush(inline_flush);
  env_.track_unsynced = true;
  env_.sync_delay_us = 2000;  // a slow disk: batches wait for syncs in flight
  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<int> acked;  // ts.time of each durable PREPARE
  std::atomic<int> outstanding{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const int n = 1000 + i * kThreads + t;
        if (!Prepare(Ts(n), Part(n % 3), Numbered("k", n), Value(n)).ok()) break;
        ++outstanding;
        store_->WhenDurable(
            store_->DurableTicket(),
            [&, n](const Status& st) {
              if (st.ok()) {
                std::lock_guard lock(mu);
                acked.push_back(n);
              }
              --outstanding;
            },
            inline_flush);
        if (inline_flush) store_->FlushLogInline();
      }
    });
  }
  // Run until a few hundred writes were reported durable, then stop the disk.
  for (int i = 0; i < 3000; ++i) {
    {
      std::lock_guard lock(mu);
      if (acked.size() >= 300) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Syncs fail first, so that the last batch is written but never synced; then writes.
  env_.fail_sync = true;
  for (int i = 0; i < 3000 && env_.failed_syncs == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  env_.bytes_left = 0;
  stop = true;
  for (auto& w : writers) w.join();
  store_.reset();  // its last flush fails: nothing more reaches the disk
  ASSERT_EQ(outstanding.load(), 0);
  const size_t undone = env_.Crash();
  env_.bytes_left = -1;
  env_.fail_sync = false;
  env_.track_unsynced = false;
  env_.sync_delay_us = 0;
  ASSERT_TRUE(TryOpen().ok());
  std::vector<int> copy;
  {
    std::lock_guard lock(mu);
    copy = acked;
  }
  ASSERT_GE(copy.size(), 300u);
  std::printf("%zu PREPAREs reported durable, %zu unsynced writes undone\n", copy.size(), undone);
  int lost = 0;
  for (int n : copy) {
    lost += store_->QueryTxn(Ts(n), Part(n % 3), false) != TxnState::kPrepared;
  }
  EXPECT_EQ(lost, 0) << "of " << copy.size() << " PREPAREs reported durable";
}

TEST_F(StoreDurableTest, ConcurrentPreparesReportedDurableSurviveACrash) {
  ConcurrentPreparesSurviveACrash(false);
}

// The same with the batches written by the writers' own threads (server workers' inline
// flush): a waiter completed before its batch's sync would be lost here.
TEST_F(StoreDurableTest, ConcurrentInlineFlushedPreparesReportedDurableSurviveACrash) {
  ConcurrentPreparesSurviveACrash(true);
}

// A server takes a ticket, then registers for it; the batch may have started and completed
// in between. The registration must still complete, also on an idle server (no later batch).
TEST_F(StoreDurableTest, TicketWhoseBatchCompletedBeforeRegistrationCompletes) {
  ASSERT_TRUE(Prepare(Ts(10), Part(), "a", "x").ok());
  const uint64_t ticket = store_->DurableTicket();
  ASSERT_TRUE(store_->SyncLog().ok());  // runs that ticket's batch to completion
  std::promise<Status> done;
  store_->WhenDurable(ticket, [&](const Status& st) { done.set_value(st); });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a ticket registered after its batch completed was never completed";
  EXPECT_TRUE(f.get().ok());
}

// The group commit defers writes nobody waits for (a COMMIT is acknowledged before its
// sync) until a batch someone waits for: they must still reach the disk on their own, with
// no waiter ever coming, and survive a crash once they have.
void StoreDurableTest::UnwaitedWritesBecomeDurable(bool inline_flush) {
  store_->SetInlineLogFlush(inline_flush);
  ASSERT_TRUE(Prepare(Ts(10), Part(), "a", "a10").ok());
  ASSERT_TRUE(store_->SyncLog().ok());
  env_.track_unsynced = true;
  const int before = env_.durable_ops;
  ASSERT_TRUE(Commit(Ts(10)).ok());  // nobody waits for its batch
  for (int i = 0; i < 30000 && env_.durable_ops == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(env_.durable_ops.load(), before) << "a write nobody waited for was never synced";
  // Crash: nothing more reaches the disk, whatever was not synced is undone.
  env_.fail_sync = true;
  env_.bytes_left = 0;
  store_.reset();
  env_.Crash();
  env_.fail_sync = false;
  env_.bytes_left = -1;
  env_.track_unsynced = false;
  ASSERT_TRUE(TryOpen().ok());
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), false), TxnState::kCommitted);
  EXPECT_EQ(Get("a").value, "a10");
}

TEST_F(StoreDurableTest, WritesNobodyWaitsForBecomeDurableWithoutAWaiter) {
  UnwaitedWritesBecomeDurable(false);
}

// Inline mode: nobody is woken for a COMMIT and no worker flushes for it; the log writer's
// backstop must.
TEST_F(StoreDurableTest, InlineFlushWritesNobodyWaitsForBecomeDurableWithoutAWaiter) {
  UnwaitedWritesBecomeDurable(true);
}

// Inline mode on a disk that stalls: after a batch that took long, a worker's FlushInline
// leaves the next batch to the log writer's thread (the worker goes back to its other
// requests at once) and the waiter still completes.
TEST_F(StoreDurableTest, InlineFlushLeavesBatchesToTheLogThreadWhileTheDiskIsSlow) {
  store_->SetInlineLogFlush(true);
  env_.sync_delay_us = 200000;  // 200 ms per synced write: far past kSlowBatch
  std::atomic<int> done{0};
  ASSERT_TRUE(Prepare(Ts(10), Part(), "a", "x").ok());
  store_->WhenDurable(
      store_->DurableTicket(), [&](const Status& st) { done += st.ok(); }, true);
  store_->FlushLogInline();  // nothing slow seen yet: this thread writes the batch
  ASSERT_EQ(done.load(), 1) << "the first batch was not written by the caller";
  ASSERT_TRUE(Prepare(Ts(20), Part(), "b", "y").ok());
  store_->WhenDurable(
      store_->DurableTicket(), [&](const Status& st) { done += st.ok(); }, true);
  store_->FlushLogInline();
  EXPECT_EQ(done.load(), 1) << "the caller wrote a batch itself after a slow one";
  for (int i = 0; i < 30000 && done.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(done.load(), 2) << "the batch left to the log writer's thread never completed";
  env_.sync_delay_us = 0;
}

TEST_F(StoreDurableTest, FailedSyncIsStickyAndReported) {
  Put(Ts(10), "a", "x");
  ASSERT_TRUE(store_->SyncLog().ok());
  env_.fail_sync = true;
  ASSERT_TRUE(Prepare(Ts(20), Part(), "b", "y").ok());
  Status st = store_->SyncLog();
  EXPECT_TRUE(st.Is(Status::Code::kIOError)) << st.ToString();
  env_.fail_sync = false;
  // Not retried: the kernel may have dropped the pages the failed sync was about.
  EXPECT_FALSE(store_->SyncLog().ok());
  EXPECT_FALSE(Prepare(Ts(30), Part(), "c", "z").ok());
}

TEST_F(StoreDurableTest, ReadOnlyDataDirectoryIsRefusedAtStart) {
  Put(Ts(10), "a", "x");
  Reopen();
  store_.reset();
  env_.read_only = true;
  Status st = TryOpen();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not writable"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("Read-only"), std::string::npos) << st.ToString();
  env_.read_only = false;
  ASSERT_TRUE(TryOpen().ok());
  EXPECT_EQ(Get("a").value, "x");
}

TEST_F(StoreDurableTest, CompactionRemovesFilesAndKeepsLiveVersionsAndDecisions) {
  // Overwrite 50 keys many times: most of the log becomes garbage.
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 50; ++k) {
      const int i = round * 50 + k;
      Put(Ts(10 + i), Numbered("k", k), Value(i));
    }
  }
  // One transaction stays prepared in an old segment; one is aborted.
  ASSERT_TRUE(Prepare(Ts(100000), Part(), "pending", "p").ok());
  Reopen();  // a checkpoint: the segment files are written
  const size_t before = Segments().size();
  ASSERT_GE(before, 3u);
  for (int round = 200; round < 400; ++round) {
    for (int k = 0; k < 50; ++k) {
      const int i = round * 50 + k;
      Put(Ts(200000 + i), Numbered("k", k), Value(i));
    }
    now_ += 100;
    store_->CollectGarbage();
  }
  now_ += 5000;
  for (int pass = 0; pass < 5; ++pass) store_->CollectGarbage();
  ASSERT_TRUE(store_->SyncLog().ok());
  store_.reset();  // the retired files go at the checkpoint
  const size_t after = Segments().size();
  ASSERT_TRUE(TryOpen().ok());
  // 400 rounds wrote twice the files of the first 200; compaction left fewer than those.
  EXPECT_LT(after, before) << "files: before " << before << ", after " << after;
  Reopen();
  for (int k = 0; k < 50; ++k) {
    ReadResult r = Get(Numbered("k", k));
    ASSERT_EQ(r.status, ReadStatus::kOk);
    EXPECT_EQ(r.value, Value(399 * 50 + k));
  }
  EXPECT_EQ(store_->QueryTxn(Ts(100000), Part(), false), TxnState::kPrepared);
  EXPECT_EQ(Get("pending", Ts(100000)).value, "p");
}

}  // namespace
}  // namespace ramp::store
