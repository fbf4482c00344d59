// The region check every provider applies to one-sided accesses (core/region.h).
#include "core/region.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ramp::transport::detail {
namespace {

RemoteRegion Region(uint32_t access, uint64_t length = 4096) {
  RemoteRegion r;
  r.id = 7;
  r.key = 0x1234567890abcdefull;
  r.length = length;
  r.access = access;
  return r;
}

TEST(RegionCheckTest, AllowsWhatTheRegionGrantsInsideItsBounds) {
  const RemoteRegion rw = Region(kAccessReadWrite);
  EXPECT_TRUE(CheckRegionAccess(rw, rw, 0, 4096, kAccessRead).ok());
  EXPECT_TRUE(CheckRegionAccess(rw, rw, 4000, 96, kAccessWrite).ok());
  EXPECT_TRUE(CheckRegionAccess(rw, rw, 0, 1, kAccessReadWrite).ok());
  EXPECT_TRUE(CheckRegionAccess(rw, rw, 4096, 0, kAccessRead).ok());  // empty, at the end
  const RemoteRegion ro = Region(kAccessRead);
  EXPECT_TRUE(CheckRegionAccess(ro, ro, 10, 20, kAccessRead).ok());
}

TEST(RegionCheckTest, WrongKeyIsPermissionDeniedBeforeAnythingElse) {
  const RemoteRegion ro = Region(kAccessRead);
  RemoteRegion forged = ro;
  forged.key ^= 1;
  Status s = CheckRegionAccess(ro, forged, ~uint64_t{0}, 8, kAccessWrite);
  EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  EXPECT_EQ(s.message(), "region 7: wrong key");
}

TEST(RegionCheckTest, AccessBitsMustBeReadAndOrWrite) {
  const RemoteRegion rw = Region(kAccessReadWrite);
  for (uint32_t bad : {0u, 4u, 5u, 0x80000000u}) {
    Status s = CheckRegionAccess(rw, rw, 0, 8, bad);
    EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument)) << bad << ": " << s.ToString();
    EXPECT_NE(s.message().find("invalid access bits"), std::string::npos) << s.ToString();
  }
  // Stray bits in what a region claims to grant give nothing beyond read and write.
  const RemoteRegion odd = Region(kAccessRead | 4u);
  EXPECT_TRUE(CheckRegionAccess(odd, odd, 0, 8, 4u).Is(Status::Code::kInvalidArgument));
  EXPECT_TRUE(CheckRegionAccess(odd, odd, 0, 8, kAccessWrite).Is(Status::Code::kPermissionDenied));
}

TEST(RegionCheckTest, WriteToReadOnlyRegionIsPermissionDenied) {
  const RemoteRegion ro = Region(kAccessRead);
  for (uint32_t access : {uint32_t{kAccessWrite}, uint32_t{kAccessReadWrite}}) {
    Status s = CheckRegionAccess(ro, ro, 0, 8, access);
    EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
    EXPECT_EQ(s.message(), "region 7 does not grant write access");
  }
  const RemoteRegion wo = Region(kAccessWrite);
  Status s = CheckRegionAccess(wo, wo, 0, 8, kAccessRead);
  EXPECT_EQ(s.message(), "region 7 does not grant read access");
}

TEST(RegionCheckTest, OutOfBoundsIsInvalidArgumentWithoutOverflow) {
  const RemoteRegion rw = Region(kAccessReadWrite);
  const uint64_t max = ~uint64_t{0};
  for (auto [offset, len] : {std::pair<uint64_t, uint64_t>{4000, 97},
                             {4097, 0},
                             {0, 4097},
                             {max - 10, 64},
                             {max, 1},
                             {8, max},
                             {max, max}}) {
    Status s = CheckRegionAccess(rw, rw, offset, len, kAccessRead);
    EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument)) << offset << "+" << len;
    EXPECT_NE(s.message().find("outside its 4096 bytes"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(CheckRegionAccess(rw, rw, 4000, 97, kAccessRead).message(),
            "region 7: bytes [4000, 4000+97) outside its 4096 bytes");
  // A right that is missing is reported before the bounds.
  const RemoteRegion ro = Region(kAccessRead);
  EXPECT_TRUE(CheckRegionAccess(ro, ro, max, 8, kAccessWrite).Is(Status::Code::kPermissionDenied));
}

}  // namespace
}  // namespace ramp::transport::detail
