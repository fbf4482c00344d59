// Store: garbage collection with the grace, compaction, the memory budget, dropping.
#include <gtest/gtest.h>

#include <string>

#include "numbered.h"
#include "store_test_util.h"

namespace ramp::store {
namespace {

using ::ramp::testing::Numbered;

using testing::Part;
using testing::Ts;

class StoreGcTest : public testing::StoreTest {
 protected:
  void SetUp() override {
    options_.gc_grace_ms = 1000;
    Open();
  }
  // Value of update i of a key: distinct and a few hundred bytes long.
  static std::string Value(const std::string& key, uint64_t i) {
    return key + Numbered("@", i) + std::string(300 + i % 200, static_cast<char>('a' + i % 26));
  }
  // Every key has exactly one valid record in the whole arena: its current version.
  void ExpectValidBitsOnCurrentVersionsOnly(const std::vector<std::string>& keys) {
    std::map<uint64_t, ValidRecord> valid = ValidRecords();
    EXPECT_EQ(valid.size(), keys.size());
    for (const std::string& key : keys) {
      ReadResult r = Get(key, {}, kReadWantAddress);
      ASSERT_EQ(r.status, ReadStatus::kOk) << key;
      auto it = valid.find(r.address.offset);
      ASSERT_NE(it, valid.end()) << key;
      EXPECT_EQ(it->second.key, key);
      EXPECT_EQ(it->second.ts, r.ts);
    }
  }
};

TEST_F(StoreGcTest, OverwrittenVersionIsKeptForTheGraceThenCollected) {
  Put(Ts(10), "x", "old");
  Put(Ts(20), "x", "new");
  store_->CollectGarbage();
  EXPECT_EQ(Get("x", Ts(10)).value, "old");
  now_ += 999;
  store_->CollectGarbage();
  EXPECT_EQ(Get("x", Ts(10)).value, "old");
  now_ += 1;
  store_->CollectGarbage();
  EXPECT_EQ(Get("x", Ts(10)).status, ReadStatus::kCollected);
  // Older than what was collected: may have existed, so the reader must retry.
  EXPECT_EQ(Get("x", Ts(5)).status, ReadStatus::kCollected);
  // Newer than anything collected: certainly never existed.
  EXPECT_EQ(Get("x", Ts(15)).status, ReadStatus::kNotFound);
  EXPECT_EQ(Get("x").value, "new");
  const StoreStats s = store_->stats();
  EXPECT_EQ(s.collected_versions, 1u);
  EXPECT_EQ(s.versions, 1u);
}

TEST_F(StoreGcTest, PreparedVersionsAreNeverCollected) {
  Put(Ts(10), "x", "a");
  ASSERT_TRUE(Prepare(Ts(20), Part(), "x", "pending").ok());
  now_ += 100000;
  store_->CollectGarbage();
  EXPECT_EQ(Get("x", Ts(20)).value, "pending");
  EXPECT_EQ(store_->PendingOlderThan(now_).size(), 1u);
}

TEST_F(StoreGcTest, LateCommitStartsItsOwnGrace) {
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "late").ok());
  Put(Ts(20), "x", "current");
  now_ += 900;
  ASSERT_TRUE(Commit(Ts(10)).ok());
  now_ += 200;
  store_->CollectGarbage();
  EXPECT_EQ(Get("x", Ts(10)).value, "late");
  now_ += 800;
  store_->CollectGarbage();
  EXPECT_EQ(Get("x", Ts(10)).status, ReadStatus::kCollected);
}

TEST_F(StoreGcTest, DeletedKeysAreForgottenAfterTheGrace) {
  Put(Ts(10), "x", "alive");
  Put(Ts(20), "x", "", Part(), kWriteTombstone);
  ASSERT_TRUE(store_->WriteCommitted(Part(), "never-written", "", true, Ts(30)).ok());
  EXPECT_EQ(store_->stats().keys, 2u);
  now_ += 1000;
  store_->CollectGarbage();
  EXPECT_EQ(store_->stats().keys, 0u);
  EXPECT_EQ(store_->stats().versions, 0u);
  EXPECT_EQ(Get("x").status, ReadStatus::kNotFound);
  // A writer still expecting the deletion gets a retryable conflict; one expecting
  // nothing goes through.
  EXPECT_TRUE(
      Prepare(Ts(40), Part(), "x", "v", {}, kWriteHasExpected, Ts(20)).Is(Status::Code::kConflict));
  EXPECT_TRUE(Prepare(Ts(41), Part(), "x", "v", {}, kWriteHasExpected, {}).ok());
}

TEST_F(StoreGcTest, DecisionsAreForgottenAfterTheRetention) {
  options_.decided_retention_ms = 5000;
  Open();
  ASSERT_TRUE(Abort(Ts(10)).ok());
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), false), TxnState::kAborted);
  now_ += 5000;
  store_->CollectGarbage();
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), false), TxnState::kAborted);
  now_ += 1;
  store_->CollectGarbage();
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), false), TxnState::kUnknown);
}

TEST_F(StoreGcTest, CompactionKeepsAnUpdateHeavyLoadWithinTheBudget) {
  options_.memory_bytes = size_t{4} << 20;
  options_.gc_grace_ms = 100;
  Open();
  std::vector<std::string> keys;
  for (int k = 0; k < 50; ++k) keys.push_back(Numbered("key", k));
  // About 15 MiB of versions through a 4 MiB arena.
  uint64_t t = 1;
  for (uint64_t i = 0; i < 40000; ++i, ++t) {
    const std::string& key = keys[i % keys.size()];
    Put(Ts(t), key, Value(key, i));
    if (i % 100 == 99) {
      now_ += 50;
      store_->CollectGarbage();
    }
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    const uint64_t last = 40000 - keys.size() + k;
    EXPECT_EQ(Get(keys[k]).value, Value(keys[k], last));
  }
  ExpectValidBitsOnCurrentVersionsOnly(keys);
  EXPECT_GT(store_->stats().collected_versions, 39000u);
}

TEST_F(StoreGcTest, RelocatedVersionsStayReadableByTimestamp) {
  options_.memory_bytes = size_t{4} << 20;
  Open();
  // Versions of "keep" inside the grace must survive compaction of their segment.
  Put(Ts(1), "keep", "v1");
  Put(Ts(2), "keep", "v2");
  ASSERT_TRUE(Prepare(Ts(3), Part(), "keep", "prepared").ok());
  for (uint64_t i = 0; i < 6000; ++i) Put(Ts(100 + i), "churn", Value("churn", i));
  now_ += 1000;  // "churn" versions expire; "keep"@1 too (replaced at the start)
  store_->CollectGarbage();
  EXPECT_EQ(Get("keep").value, "v2");
  EXPECT_EQ(Get("keep", Ts(3)).value, "prepared");
  EXPECT_EQ(Get("keep", Ts(1)).status, ReadStatus::kCollected);
  ASSERT_TRUE(Commit(Ts(3)).ok());
  EXPECT_EQ(Get("keep").value, "prepared");
  ExpectValidBitsOnCurrentVersionsOnly({"keep", "churn"});
  // The pages of the compacted segments went back to the arena.
  EXPECT_LT(store_->stats().pages, 200u);
}

TEST_F(StoreGcTest, FullArenaReclaimsMemoryOnItsOwn) {
  options_.memory_bytes = size_t{2} << 20;
  options_.gc_grace_ms = 0;
  Open();
  // Nobody calls CollectGarbage: allocation failures do.
  for (uint64_t i = 0; i < 20000; ++i) Put(Ts(i + 1), Numbered("k", i % 10), Value("k", i));
  for (uint64_t k = 0; k < 10; ++k) EXPECT_EQ(Get(Numbered("k", k)).value, Value("k", 19990 + k));
}

TEST_F(StoreGcTest, ExhaustedBudgetGivesNoSpaceWhenNothingCanBeReclaimed) {
  options_.memory_bytes = size_t{1} << 20;
  Open();
  ASSERT_TRUE(Prepare(Ts(1), Part(), "early", "v").ok());
  Status s;
  int written = 0;
  for (; written < 100000; ++written) {
    const std::string key = Numbered("distinct", written);
    s = Prepare(Ts(100 + written), Part(), key, std::string(1000, 'x'));
    if (!s.ok()) break;
    ASSERT_TRUE(Commit(Ts(100 + written)).ok());
  }
  EXPECT_TRUE(s.Is(Status::Code::kNoSpace)) << s.ToString();
  EXPECT_NE(s.message().find("memory budget of 1 MiB exhausted"), std::string::npos);
  EXPECT_GT(written, 800);
  // Everything written is still there, and decisions still go through (the reserve).
  EXPECT_EQ(Get("distinct0").value, std::string(1000, 'x'));
  EXPECT_EQ(Get(Numbered("distinct", written - 1)).status, ReadStatus::kOk);
  ASSERT_TRUE(Commit(Ts(1)).ok());
  EXPECT_EQ(Get("early").value, "v");
}

TEST_F(StoreGcTest, ReclaimedMemoryIsBusyUntilTheGracePasses) {
  options_.memory_bytes = size_t{4} << 20;
  Open();
  // Overwrites of one key within the grace: all versions are live, nothing to reclaim.
  Status s;
  uint64_t t = 1;
  for (; t < 100000; ++t) {
    s = Prepare(Ts(t), Part(), "k", Value("k", t));
    if (!s.ok()) break;
    ASSERT_TRUE(Commit(Ts(t)).ok());
  }
  EXPECT_TRUE(s.Is(Status::Code::kNoSpace)) << s.ToString();
  // After the grace the versions are garbage: compaction retires their pages, but readers
  // may still copy them for another grace.
  now_ += 1000;
  ++t;
  s = Prepare(Ts(t), Part(), "k", Value("k", t));
  EXPECT_TRUE(s.Is(Status::Code::kBusy)) << s.ToString();
  now_ += 1000;
  ++t;
  EXPECT_TRUE(Prepare(Ts(t), Part(), "k", Value("k", t)).ok());
  ASSERT_TRUE(Commit(Ts(t)).ok());
  EXPECT_EQ(Get("k").value, Value("k", t));
}

TEST_F(StoreGcTest, DropKeyspaceForgetsItsPartitionsAndFreesTheirPages) {
  const size_t frames = options_.memory_bytes / record::kPageBytes;
  Put(Ts(1), "a", "v", Part(0, 7));
  Put(Ts(2), "b", "v", Part(1, 7));
  Put(Ts(3), "c", "v", Part(0, 8));
  const RecordAddress a = Get("a", {}, kReadWantAddress, Part(0, 7)).address;
  ASSERT_TRUE(store_->DropKeyspace(7).ok());
  EXPECT_EQ(store_->PartitionIds(), std::vector<PartitionId>{Part(0, 8)});
  EXPECT_EQ(Get("a", {}, 0, Part(0, 7)).status, ReadStatus::kNotFound);
  EXPECT_EQ(Get("c", {}, 0, Part(0, 8)).value, "v");
  // One-sided readers holding the old address see an invalid record.
  EXPECT_FALSE(ReadAddress(a).valid());
  EXPECT_EQ(store_->stats().pages, 1u);
  now_ += 1000;
  store_->CollectGarbage();
  EXPECT_EQ(store_->stats().free_pages, frames - 1);
  // The keyspace can be written again from scratch.
  Put(Ts(4), "a", "again", Part(0, 7));
  EXPECT_EQ(Get("a", {}, 0, Part(0, 7)).value, "again");
}

}  // namespace
}  // namespace ramp::store
