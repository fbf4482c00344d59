// The arena's frame allocator: runs of pages, the reserve, retirement with a grace.
#include "store/memory/arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

namespace ramp::store {
namespace {

class ArenaTest : public ::testing::Test {
 protected:
  std::unique_ptr<Arena> Make(size_t frames, int grace_ms = 100) {
    std::unique_ptr<Arena> arena;
    EXPECT_TRUE(
        Arena::Create(
            memory_, frames * record::kPageBytes, grace_ms, [this] { return now_.load(); }, &arena)
            .ok());
    return arena;
  }
  std::shared_ptr<transport::Memory> memory_ = transport::Memory::Create();
  std::atomic<uint64_t> now_{1000};
};

TEST_F(ArenaTest, RegistersTheWholeArenaReadOnly) {
  auto arena = Make(64);
  ASSERT_NE(arena, nullptr);
  EXPECT_TRUE(arena->region().valid());
  EXPECT_EQ(arena->region().length, 64 * record::kPageBytes);
  EXPECT_EQ(arena->region().access, transport::kAccessRead);
  EXPECT_TRUE(memory_->Contains(arena->base(), arena->bytes()));
}

TEST_F(ArenaTest, RefusesAnEmptyArena) {
  std::unique_ptr<Arena> arena;
  EXPECT_TRUE(Arena::Create(
                  memory_, 100, 0, [] { return uint64_t{0}; }, &arena)
                  .Is(Status::Code::kInvalidArgument));
}

TEST_F(ArenaTest, HandsOutDistinctFramesAndKeepsTheReserve) {
  auto arena = Make(64);  // reserve: 8 frames
  std::set<uint32_t> frames;
  uint32_t f = 0;
  while (arena->Allocate(1, Arena::Use::kNormal, &f).ok()) {
    ASSERT_LT(f, 64u);
    ASSERT_TRUE(frames.insert(f).second);
  }
  EXPECT_EQ(frames.size(), 56u);
  const Status s = arena->Allocate(1, Arena::Use::kNormal, &f);
  EXPECT_TRUE(s.Is(Status::Code::kNoSpace));
  EXPECT_NE(s.message().find("memory budget of 512 KiB exhausted"), std::string::npos);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(arena->Allocate(1, Arena::Use::kReserve, &f).ok());
  EXPECT_TRUE(arena->Allocate(1, Arena::Use::kReserve, &f).Is(Status::Code::kNoSpace));
}

TEST_F(ArenaTest, RunsAreContiguousAndFreedRunsMerge) {
  auto arena = Make(64);
  uint32_t a, b, c;
  ASSERT_TRUE(arena->Allocate(10, Arena::Use::kNormal, &a).ok());
  ASSERT_TRUE(arena->Allocate(20, Arena::Use::kNormal, &b).ok());
  ASSERT_TRUE(arena->Allocate(34, Arena::Use::kReserve, &c).ok());
  EXPECT_EQ(arena->counts().free, 0u);
  // Retired pieces come back after the grace and merge into one run again.
  arena->Retire(a, 10);
  arena->Retire(c, 34);
  arena->Retire(b, 20);
  EXPECT_EQ(arena->counts().retired, 64u);
  uint32_t all;
  EXPECT_TRUE(arena->Allocate(64, Arena::Use::kReserve, &all).Is(Status::Code::kBusy));
  now_ += 100;
  ASSERT_TRUE(arena->Allocate(64, Arena::Use::kReserve, &all).ok());
  EXPECT_EQ(all, 0u);
}

TEST_F(ArenaTest, RetiredFramesWaitOutTheGrace) {
  auto arena = Make(16);  // reserve 4
  std::vector<uint32_t> frames(12);
  for (auto& f : frames) ASSERT_TRUE(arena->Allocate(1, Arena::Use::kNormal, &f).ok());
  arena->Retire(frames[3], 1);
  uint32_t f;
  const Status busy = arena->Allocate(1, Arena::Use::kNormal, &f);
  EXPECT_TRUE(busy.Is(Status::Code::kBusy)) << busy.ToString();
  EXPECT_NE(busy.message().find("GC grace"), std::string::npos);
  now_ += 99;
  EXPECT_TRUE(arena->Allocate(1, Arena::Use::kNormal, &f).Is(Status::Code::kBusy));
  now_ += 1;
  ASSERT_TRUE(arena->Allocate(1, Arena::Use::kNormal, &f).ok());
  EXPECT_EQ(f, frames[3]);
  EXPECT_EQ(arena->counts().retired, 0u);
}

TEST_F(ArenaTest, BestFitKeepsLongRunsForLongRecords) {
  auto arena = Make(64);
  uint32_t small, gap, big;
  ASSERT_TRUE(arena->Allocate(1, Arena::Use::kNormal, &small).ok());
  ASSERT_TRUE(arena->Allocate(2, Arena::Use::kNormal, &gap).ok());
  ASSERT_TRUE(arena->Allocate(1, Arena::Use::kNormal, &big).ok());
  arena->Retire(gap, 2);
  now_ += 100;
  // Frees: the 2-frame hole and the long tail. A single frame goes into the hole.
  uint32_t f;
  ASSERT_TRUE(arena->Allocate(1, Arena::Use::kNormal, &f).ok());
  EXPECT_TRUE(f == gap || f == gap + 1);
  ASSERT_TRUE(arena->Allocate(40, Arena::Use::kNormal, &f).ok());
  EXPECT_GT(f, big);
}

}  // namespace
}  // namespace ramp::store
