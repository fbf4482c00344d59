#include "ramp/transport/memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

namespace ramp::transport {
namespace {

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_ = Memory::Create();
    ASSERT_TRUE(mem_->Allocate(10000, kAccessReadWrite, &a_).ok());
    ASSERT_TRUE(mem_->Allocate(4096, kAccessReadWrite, &b_).ok());
    ASSERT_TRUE(mem_->Allocate(4096, kAccessRead, &ro_).ok());
  }
  std::shared_ptr<Memory> mem_;
  uint8_t* a_ = nullptr;
  uint8_t* b_ = nullptr;
  uint8_t* ro_ = nullptr;
};

TEST_F(MemoryTest, AllocateIsZeroedPageRoundedAndSealed) {
  for (int i = 0; i < 10000; i++) ASSERT_EQ(a_[i], 0);
  a_[12287] = 1;  // rounded up to 3 pages
  EXPECT_TRUE(mem_->Contains(a_, 12288));
  EXPECT_FALSE(mem_->Contains(a_, 12289));
  EXPECT_FALSE(mem_->Contains(a_ - 1, 2));
  RemoteRegion r;
  ASSERT_TRUE(mem_->Register(a_, 100, kAccessRead, &r).ok());
  RemoteRegion h;
  std::vector<SegmentPiece> pieces;
  ASSERT_TRUE(mem_->Describe(r.id, &h, &pieces).ok());
  Segment seg;
  ASSERT_TRUE(mem_->GetSegment(pieces[0].segment_id, &seg).ok());
  EXPECT_EQ(seg.base, a_);
  EXPECT_EQ(seg.length, 12288u);
  EXPECT_EQ(seg.max_access, uint32_t{kAccessReadWrite});
  // A peer holding the fd can neither shrink nor grow it, nor add seals (F_SEAL_WRITE).
  int seals = fcntl(seg.fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_NE(ftruncate(seg.fd, 4096), 0);

  uint8_t* p;
  EXPECT_TRUE(mem_->Allocate(0, kAccessRead, &p).Is(Status::Code::kInvalidArgument));
  EXPECT_TRUE(mem_->Allocate(10, 0, &p).Is(Status::Code::kInvalidArgument));
  EXPECT_TRUE(mem_->Allocate(10, 8, &p).Is(Status::Code::kInvalidArgument));
}

TEST_F(MemoryTest, RegisterChecksBuffersAndRights) {
  RemoteRegion r;
  EXPECT_TRUE(mem_->Register(a_, 12288, kAccessReadWrite, &r).ok());
  EXPECT_TRUE(mem_->Register(a_, 12289, kAccessRead, &r).Is(Status::Code::kInvalidArgument));
  uint8_t stack[16];
  Status s = mem_->Register(stack, sizeof(stack), kAccessRead, &r);
  EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument));
  EXPECT_NE(s.message().find("does not lie inside one Memory allocation"), std::string::npos);
  EXPECT_TRUE(mem_->Register(a_, 0, kAccessRead, &r).Is(Status::Code::kInvalidArgument));
  EXPECT_TRUE(mem_->Register(a_, 10, 0, &r).Is(Status::Code::kInvalidArgument));
  // The read-only allocation cannot back a writable registration.
  s = mem_->Register(ro_, 10, kAccessWrite, &r);
  EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  EXPECT_TRUE(mem_->Register(ro_, 10, kAccessRead, &r).ok());
  // A buffer straddling two allocations is refused even if they happen to be adjacent.
  iovec bad{a_ + 12280, 16};
  EXPECT_FALSE(mem_->RegisterV(&bad, 1, kAccessRead, &r).ok());
}

TEST_F(MemoryTest, ResolveChecksKeyBoundsRights) {
  RemoteRegion r;
  ASSERT_TRUE(mem_->Register(a_ + 100, 1000, kAccessRead, &r).ok());
  EXPECT_EQ(r.length, 1000u);
  EXPECT_NE(r.key, 0u);
  std::vector<Span> spans;
  ASSERT_TRUE(mem_->Resolve(r, 10, 20, kAccessRead, &spans).ok());
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].data, a_ + 110);
  EXPECT_EQ(spans[0].length, 20u);
  EXPECT_TRUE(mem_->Resolve(r, 0, 1000, kAccessRead, &spans).ok());
  EXPECT_TRUE(mem_->Resolve(r, 1000, 0, kAccessRead, &spans).ok());

  RemoteRegion forged = r;
  forged.key ^= 1;
  EXPECT_TRUE(mem_->Resolve(forged, 0, 8, kAccessRead, &spans).Is(Status::Code::kPermissionDenied));
  EXPECT_TRUE(mem_->Resolve(r, 0, 8, kAccessWrite, &spans).Is(Status::Code::kPermissionDenied));
  EXPECT_TRUE(mem_->Resolve(r, 1, 1000, kAccessRead, &spans).Is(Status::Code::kInvalidArgument));
  EXPECT_TRUE(mem_->Resolve(r, 1001, 0, kAccessRead, &spans).Is(Status::Code::kInvalidArgument));
  // Offsets that would wrap around 2^64 are out of bounds, not small.
  EXPECT_TRUE(mem_->Resolve(r, ~uint64_t{0} - 4, 10, kAccessRead, &spans)
                  .Is(Status::Code::kInvalidArgument));
  EXPECT_TRUE(
      mem_->Resolve(r, 8, ~uint64_t{0}, kAccessRead, &spans).Is(Status::Code::kInvalidArgument));
  RemoteRegion unknown = r;
  unknown.id = 9999;
  EXPECT_TRUE(mem_->Resolve(unknown, 0, 8, kAccessRead, &spans).Is(Status::Code::kNotFound));

  ASSERT_TRUE(mem_->Deregister(r.id).ok());
  EXPECT_TRUE(mem_->Resolve(r, 0, 8, kAccessRead, &spans).Is(Status::Code::kNotFound));
  EXPECT_TRUE(mem_->Deregister(r.id).Is(Status::Code::kNotFound));
}

TEST_F(MemoryTest, IovecRegistrationAddressedByOffset) {
  // Three discrete buffers in two allocations, one handle: offsets run across them.
  iovec iov[3] = {{a_ + 5000, 100}, {b_ + 10, 50}, {a_, 30}};
  RemoteRegion r;
  ASSERT_TRUE(mem_->RegisterV(iov, 3, kAccessReadWrite, &r).ok());
  EXPECT_EQ(r.length, 180u);
  std::vector<Span> spans;
  ASSERT_TRUE(mem_->Resolve(r, 90, 80, kAccessRead, &spans).ok());
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].data, a_ + 5090);
  EXPECT_EQ(spans[0].length, 10u);
  EXPECT_EQ(spans[1].data, b_ + 10);
  EXPECT_EQ(spans[1].length, 50u);
  EXPECT_EQ(spans[2].data, a_);
  EXPECT_EQ(spans[2].length, 20u);
  ASSERT_TRUE(mem_->Resolve(r, 100, 50, kAccessRead, &spans).ok());
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].data, b_ + 10);

  RemoteRegion h;
  std::vector<SegmentPiece> pieces;
  ASSERT_TRUE(mem_->Describe(r.id, &h, &pieces).ok());
  EXPECT_EQ(h, r);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].offset, 5000u);
  EXPECT_EQ(pieces[1].offset, 10u);
  EXPECT_NE(pieces[0].segment_id, pieces[1].segment_id);
  EXPECT_EQ(pieces[0].segment_id, pieces[2].segment_id);
}

TEST_F(MemoryTest, FreeDropsRegistrationsButPinsKeepBytesMapped) {
  RemoteRegion r;
  ASSERT_TRUE(mem_->Register(b_, 4096, kAccessRead, &r).ok());
  std::memset(b_, 0x5a, 4096);
  std::vector<Span> spans;
  std::shared_ptr<const void> pin;
  ASSERT_TRUE(mem_->Resolve(r, 0, 4096, kAccessRead, &spans, &pin).ok());
  ASSERT_TRUE(mem_->Free(b_).ok());
  EXPECT_TRUE(mem_->Resolve(r, 0, 8, kAccessRead, &spans).Is(Status::Code::kNotFound));
  EXPECT_FALSE(mem_->Contains(b_, 1));
  // The pinned access can still finish its copy.
  uint8_t copy[4096];
  std::vector<Span> pinned;
  ASSERT_TRUE(mem_->Resolve(r, 0, 0, kAccessRead, &pinned).Is(Status::Code::kNotFound));
  std::memcpy(copy, b_, sizeof(copy));  // still mapped through the pin
  EXPECT_EQ(copy[4095], 0x5a);
  pin.reset();
  EXPECT_TRUE(mem_->Free(b_).Is(Status::Code::kInvalidArgument));
}

TEST_F(MemoryTest, RegistrationCacheHitsMissesEvictions) {
  auto small = Memory::Create(Memory::Options{2});
  uint8_t* base;
  ASSERT_TRUE(small->Allocate(4096, kAccessReadWrite, &base).ok());
  iovec x{base, 100}, y{base + 100, 100}, z{base + 200, 100};
  RemoteRegion rx, rx2, ry, rz;
  ASSERT_TRUE(small->RegisterCached(&x, 1, kAccessRead, &rx).ok());
  ASSERT_TRUE(small->RegisterCached(&x, 1, kAccessRead, &rx2).ok());
  EXPECT_EQ(rx, rx2);
  // Same buffer, different access: another registration.
  RemoteRegion rxw;
  ASSERT_TRUE(small->RegisterCached(&x, 1, kAccessReadWrite, &rxw).ok());
  EXPECT_NE(rxw.id, rx.id);
  auto st = small->cache_stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(st.evictions, 0u);
  // x/read is now least recently used; adding y evicts it (deregistered).
  ASSERT_TRUE(small->RegisterCached(&y, 1, kAccessRead, &ry).ok());
  st = small->cache_stats();
  EXPECT_EQ(st.evictions, 1u);
  std::vector<Span> spans;
  EXPECT_TRUE(small->Resolve(rx, 0, 1, kAccessRead, &spans).Is(Status::Code::kNotFound));
  EXPECT_TRUE(small->Resolve(ry, 0, 1, kAccessRead, &spans).ok());
  // A cached handle deregistered behind the cache's back is a miss, not a dead handle.
  ASSERT_TRUE(small->Deregister(ry.id).ok());
  RemoteRegion ry2;
  ASSERT_TRUE(small->RegisterCached(&y, 1, kAccessRead, &ry2).ok());
  EXPECT_NE(ry2.id, ry.id);
  EXPECT_TRUE(small->Resolve(ry2, 0, 1, kAccessRead, &spans).ok());
  ASSERT_TRUE(small->RegisterCached(&z, 1, kAccessRead, &rz).ok());
  st = small->cache_stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 5u);
  EXPECT_EQ(st.evictions, 2u);
}

TEST_F(MemoryTest, ConcurrentResolveAndRegister) {
  RemoteRegion stable;
  ASSERT_TRUE(mem_->Register(a_, 4096, kAccessRead, &stable).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> resolved{0};
  std::atomic<bool> reader_failed{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; t++) {
    readers.emplace_back([&] {
      std::vector<Span> spans;
      while (!stop.load()) {
        if (!mem_->Resolve(stable, 8, 64, kAccessRead, &spans).ok()) {
          reader_failed = true;
          return;
        }
        resolved++;
      }
    });
  }
  // Keep churning registrations until the readers have really overlapped
  // with it: on a loaded machine the reader threads may not get scheduled
  // during a fixed number of iterations.
  for (int i = 0; i < 2000 || (resolved.load() < 1000 && !reader_failed.load()); i++) {
    RemoteRegion r;
    ASSERT_TRUE(mem_->Register(a_ + (i % 100), 64, kAccessRead, &r).ok());
    ASSERT_TRUE(mem_->Deregister(r.id).ok());
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_FALSE(reader_failed.load());
  EXPECT_GE(resolved.load(), 1000u);
}

}  // namespace
}  // namespace ramp::transport
