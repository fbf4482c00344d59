// The server's write-ahead log (store/durable/wal.h) on its own, with both ways of appending
// (O_DIRECT | O_DSYNC writes, and buffered writes + fdatasync where the former is refused):
// entries come back in order after a reopen, also when batches share the log's last block
// (the direct path rewrites it from memory) and when a reopened log is appended to; a log
// written again from its start after a checkpoint never replays the entries of an earlier
// generation that lie past its new end.
#include "store/durable/wal.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fault_env.h"

namespace ramp::store {
namespace {

constexpr uint64_t kLogBytes = uint64_t{1} << 20;

class WalTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ramp-wal-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/wal";
    env_.no_sync_writes = !GetParam();
  }
  void TearDown() override {
    wal_.reset();
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  // Drops the open log without any cleanup (what a crash leaves: every Append returned
  // after its bytes were durable) and opens it again.
  std::vector<WalPatch> Reopen() {
    wal_.reset();
    std::vector<WalPatch> entries;
    Status st = Wal::Open(&env_, path_, kLogBytes, &wal_, &entries);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (wal_ != nullptr) {
      EXPECT_EQ(wal_->sync_writes(), GetParam());
    }
    return entries;
  }
  static WalPatch Entry(uint32_t n, size_t len) {
    return WalPatch{PartitionId{7, n % 3}, n, n * 10,
                    std::string(len, static_cast<char>('a' + n % 26))};
  }
  static std::vector<uint32_t> Ids(const std::vector<WalPatch>& entries) {
    std::vector<uint32_t> ids;
    for (const auto& e : entries) ids.push_back(e.segment);
    return ids;
  }

  testing::FaultEnv env_;
  std::string dir_, path_;
  std::unique_ptr<Wal> wal_;
};

TEST_P(WalTest, BatchesSharingABlockAndAppendsAfterAReopenAllComeBack) {
  EXPECT_TRUE(Reopen().empty());
  std::vector<uint32_t> want;
  // Small batches: several per 4 KiB block, and some that cross a block boundary.
  for (uint32_t n = 0; n < 40; ++n) {
    ASSERT_TRUE(wal_->Append({Entry(n, 50 + 37 * n)}).ok());
    want.push_back(n);
    if (n % 13 == 12) {
      const auto got = Reopen();
      ASSERT_EQ(Ids(got), want) << "after batch " << n;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].bytes, Entry(got[i].segment, 50 + 37 * got[i].segment).bytes);
        EXPECT_EQ(got[i].offset, got[i].segment * 10);
      }
    }
  }
  EXPECT_EQ(Ids(Reopen()), want);
}

TEST_P(WalTest, EntriesOfAnEarlierGenerationPastTheNewEndAreNotReplayed) {
  EXPECT_TRUE(Reopen().empty());
  // One entry fills a block exactly (entry header + bytes = 4096), so that after the
  // checkpoint the new generation's last entry ends where an old entry begins: only the
  // generation tells them apart (zero padding would end the log otherwise).
  const size_t fill = 4096 - Wal::kEntryHeaderBytes;
  for (uint32_t n = 0; n < 6; ++n) ASSERT_TRUE(wal_->Append({Entry(n, fill)}).ok());
  ASSERT_EQ(Reopen().size(), 6u);
  ASSERT_TRUE(wal_->Reset().ok());
  ASSERT_TRUE(wal_->Append({Entry(100, fill)}).ok());
  EXPECT_EQ(Ids(Reopen()), std::vector<uint32_t>{100})
      << "entries of the generation before the checkpoint were replayed";
  // And the reopened log goes on from there.
  ASSERT_TRUE(wal_->Append({Entry(101, 10)}).ok());
  EXPECT_EQ(Ids(Reopen()), (std::vector<uint32_t>{100, 101}));
}

TEST_P(WalTest, AFailedSyncIsReturned) {
  EXPECT_TRUE(Reopen().empty());
  ASSERT_TRUE(wal_->Append({Entry(1, 100)}).ok());
  env_.fail_sync = true;
  EXPECT_FALSE(wal_->Append({Entry(2, 100)}).ok());
  env_.fail_sync = false;
}

INSTANTIATE_TEST_SUITE_P(Appends, WalTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "SyncWrites" : "Buffered"; });

}  // namespace
}  // namespace ramp::store
