// Store under concurrent writers, readers and the GC/compaction thread on a small arena:
// every read must return a well-formed committed version, and in the end every key's
// current version must be the newest one committed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "numbered.h"
#include "ramp/hlc.h"
#include "store_test_util.h"

namespace ramp::store {
namespace {

using ::ramp::testing::Numbered;

using testing::Part;

constexpr int kKeys = 6;
constexpr int kWriters = 3;
constexpr int kReaders = 2;
constexpr int kTxnsPerWriter = 10000;

std::string KeyName(int k) {
  return Numbered("key", k);
}

// "<key>|<ts.time>|<ts.client>|" padded: a reader can tell which version it got.
std::string ValueFor(const std::string& key, const Timestamp& ts) {
  std::string v = key + Numbered("|", ts.time) + Numbered("|", ts.client) + "|";
  v.append(200 + ts.time % 300, '#');
  return v;
}

class StoreConcurrencyTest : public testing::StoreTest {
 protected:
  void SetUp() override {
    options_.memory_bytes = size_t{16} << 20;
    // Views returned by Get stay intact for the grace: long enough for a reader to copy
    // them even when the scheduler preempts it, short enough to recycle pages often.
    options_.gc_grace_ms = 100;
    options_.now_ms = nullptr;  // the real clock: threads race with the grace for real
    store_.reset();
    ASSERT_TRUE(Store::Open(options_, transport::Memory::Create(), &store_).ok());
  }
};

TEST_F(StoreConcurrencyTest, CompactionUnderConcurrentReadersAndWriters) {
  HybridClock clock;
  std::mutex newest_mu;
  std::map<std::string, Timestamp> newest;  // per key, the newest committed timestamp
  std::atomic<bool> writers_done{false};
  std::atomic<uint64_t> bad_reads{0}, reads{0}, written_bytes{0};

  auto writer = [&](uint64_t client) {
    for (int i = 0; i < kTxnsPerWriter; ++i) {
      // Two keys per transaction, like a row and its index entry.
      const std::string k1 = KeyName(static_cast<int>((client + i) % kKeys));
      const std::string k2 = KeyName(static_cast<int>((client + 2 * i + 1) % kKeys));
      const Timestamp ts{clock.Now(), client};
      const std::string v1 = ValueFor(k1, ts), v2 = ValueFor(k2, ts);
      const std::string meta = testing::SiblingKeys(k1 == k2 ? std::vector<std::string>{}
                                                             : std::vector<std::string>{k2});
      std::vector<WriteItem> items{{Part(), k1, v1, 0, {}, meta}};
      if (k2 != k1) items.push_back({Part(), k2, v2, 0, {}, meta});
      WriteError err;
      Status s;
      // Busy: the arena waits for retired pages to come back; anything else is a bug.
      while ((s = store_->Prepare(ts, items, &err)).Is(Status::Code::kBusy)) {
        std::this_thread::yield();
      }
      ASSERT_TRUE(s.ok()) << s.ToString();
      const PartitionId parts[] = {Part()};
      while ((s = store_->Commit(ts, parts)).Is(Status::Code::kBusy)) std::this_thread::yield();
      ASSERT_TRUE(s.ok()) << s.ToString();
      for (const auto& item : items) {
        written_bytes += record::RecordBytes(item.key.size(), item.value.size(), meta.size());
      }
      std::lock_guard lock(newest_mu);
      for (const auto& k : {k1, k2}) {
        if (newest[k] < ts) newest[k] = ts;
      }
    }
  };

  auto reader = [&] {
    while (!writers_done.load()) {
      for (int k = 0; k < kKeys; ++k) {
        const std::string key = KeyName(k);
        ReadResult r;
        store_->Get(ReadItem{Part(), key, {}}, kReadWantAddress, &r);
        ++reads;
        if (r.status == ReadStatus::kNotFound) continue;
        if (r.status != ReadStatus::kOk || std::string(r.value) != ValueFor(key, r.ts)) {
          ++bad_reads;
          continue;
        }
        // A round-2 read of the same version while it may be relocated or overwritten.
        ReadResult again;
        store_->Get(ReadItem{Part(), key, r.ts}, 0, &again);
        if (again.status == ReadStatus::kOk && std::string(again.value) != ValueFor(key, r.ts)) {
          ++bad_reads;
        }
        // A one-sided copy of the address: if it verifies and is valid, it is this key.
        std::vector<uint8_t> copy(r.address.length);
        std::memcpy(copy.data(), store_->arena_base() + r.address.offset, copy.size());
        record::RecordView v;
        if (record::DecodeRecord(copy.data(), copy.size(), &v).ok() && v.valid() && v.key == key &&
            std::string(v.value) != ValueFor(key, v.ts)) {
          ++bad_reads;
        }
      }
    }
  };

  std::thread gc([&] {
    while (!writers_done.load()) {
      store_->CollectGarbage();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) threads.emplace_back(reader);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) writers.emplace_back(writer, 100 + w);
  for (auto& t : writers) t.join();
  writers_done = true;
  for (auto& t : threads) t.join();
  gc.join();

  EXPECT_EQ(bad_reads.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = KeyName(k);
    ReadResult r = Get(key, {}, kReadWantAddress);
    ASSERT_EQ(r.status, ReadStatus::kOk) << key;
    EXPECT_EQ(r.ts, newest[key]) << key;
    EXPECT_EQ(r.value, ValueFor(key, r.ts));
  }
  // More was written than the arena holds: every write succeeding needed compaction.
  EXPECT_GT(written_bytes.load(), options_.memory_bytes);
  EXPECT_GT(store_->stats().collected_versions, 0u);
  std::map<uint64_t, ValidRecord> valid = ValidRecords();
  EXPECT_EQ(valid.size(), static_cast<size_t>(kKeys));
}

}  // namespace
}  // namespace ramp::store
