// The region check (core/region.h) on every provider: a one-sided write to a read-only
// region and a read outside a region are refused with the check's own verdict, even where
// the memory underneath would allow them (the region is registered read-only, and smaller
// than its read-write allocation: an shm peer maps whole segments and a verbs registration
// covers the whole allocation with its max_access). The tcp target applies the check in
// Memory::Resolve, the shm and verbs initiators before touching the peer's memory. verbs
// runs only where an RDMA device exists and says so when skipped.
#include <gtest/gtest.h>

#include <cstring>

#include "core/region.h"
#include "test_pair.h"

namespace ramp::transport::testing {
namespace {

constexpr size_t kAllocation = 8192;
constexpr size_t kRegion = 4096;

class RegionCheckProviderTest : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ProviderAvailable(GetParam().provider, &why)) GTEST_SKIP() << why;
    TransportOptions opts = TestOptions(GetParam());
    Status s = MakePair(GetParam(), dir_, opts, opts, &p_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(p_.server_memory->Allocate(kAllocation, kAccessReadWrite, &remote_).ok());
    FillPattern(remote_, kAllocation, 5);
    ASSERT_TRUE(p_.server_memory->Register(remote_, kRegion, kAccessRead, &ro_).ok());
    ASSERT_TRUE(p_.server->Expose(ro_).ok());
    ASSERT_TRUE(p_.client_memory->Allocate(kAllocation, kAccessReadWrite, &local_).ok());
    std::memset(local_, 0xee, kAllocation);
  }
  Status Complete(Status posted, uint64_t wr_id) {
    if (!posted.ok()) return posted;
    Completion c = NextCompletion(p_.client.get(), {p_.server.get()});
    EXPECT_EQ(c.wr_id, wr_id);
    return c.status;
  }
  // The provider's verdict carries the check's: same code, the check's message inside
  // (providers prefix it with the operation and the peer).
  static void ExpectVerdictOfTheCheck(const Status& got, const Status& check) {
    ASSERT_FALSE(check.ok());
    EXPECT_EQ(got.code(), check.code()) << got.ToString();
    EXPECT_NE(got.message().find(check.message()), std::string::npos)
        << got.ToString() << " does not carry " << check.ToString();
  }
  bool RemoteUntouched() {
    std::string expect = Pattern(kAllocation, 5);
    return std::memcmp(remote_, expect.data(), kAllocation) == 0;
  }
  bool LocalUntouched() {
    for (size_t i = 0; i < kAllocation; i++) {
      if (local_[i] != 0xee) return false;
    }
    return true;
  }

  TempDir dir_;
  Pair p_;
  uint8_t* remote_ = nullptr;
  uint8_t* local_ = nullptr;
  RemoteRegion ro_;
};

TEST_P(RegionCheckProviderTest, WriteToReadOnlyRegionIsRefused) {
  FillPattern(local_, kAllocation, 9);
  for (uint64_t len : {uint64_t{1}, uint64_t{64}, uint64_t{kRegion}}) {
    Status s = Complete(p_.client->PostWrite(local_, ro_, 0, len, 11), 11);
    ExpectVerdictOfTheCheck(s, detail::CheckRegionAccess(ro_, ro_, 0, len, kAccessWrite));
    EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  }
  EXPECT_TRUE(RemoteUntouched());
  // Reading it is allowed, and the connection still serves.
  std::memset(local_, 0xee, kAllocation);
  Status s = Complete(p_.client->PostRead(local_, ro_, 0, kRegion, 12), 12);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(std::memcmp(local_, remote_, kRegion), 0);
}

TEST_P(RegionCheckProviderTest, OutOfBoundsReadIsRefused) {
  const uint64_t max = ~uint64_t{0};
  // Past the end of the region but inside the allocation, straddling the end, and offsets
  // whose sum with the length wraps around.
  for (auto [offset, len] : {std::pair<uint64_t, uint64_t>{kRegion, 16},
                             {kRegion - 8, 16},
                             {kRegion + 1, 0},
                             {max - 7, 16},
                             {max, 1}}) {
    Status s = Complete(p_.client->PostRead(local_, ro_, offset, len, 21), 21);
    ExpectVerdictOfTheCheck(s, detail::CheckRegionAccess(ro_, ro_, offset, len, kAccessRead));
    EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument))
        << offset << "+" << len << ": " << s.ToString();
    EXPECT_TRUE(LocalUntouched()) << offset << "+" << len;
  }
  Status s = Complete(p_.client->PostRead(local_, ro_, kRegion - 16, 16, 22), 22);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(std::memcmp(local_, remote_ + kRegion - 16, 16), 0);
}

INSTANTIATE_TEST_SUITE_P(Providers, RegionCheckProviderTest, ::testing::ValuesIn(AllProviders()),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

}  // namespace
}  // namespace ramp::transport::testing
