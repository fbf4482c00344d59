// RAMP-Fast transaction metadata: round trips and malformed input.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/record.h"

namespace ramp::record {
namespace {

Metadata KeysMeta() {
  Metadata m;
  m.mode = Metadata::Mode::kKeys;
  m.keys = {{1, 2, "alpha"}, {0xFFFFFFFFFFFFFFFFull, 15, ""}, {3, 0, std::string(300, 'k')}};
  return m;
}

Metadata PartitionsMeta() {
  Metadata m;
  m.mode = Metadata::Mode::kPartitions;
  m.partitions = {{1, 0}, {1, 1}, {42, 15}};
  return m;
}

std::string Encoded(const Metadata& m) {
  std::string out;
  EncodeMetadata(m, &out);
  return out;
}

TEST(MetadataTest, RoundTrips) {
  for (const Metadata& m : {Metadata(), KeysMeta(), PartitionsMeta()}) {
    const std::string bytes = Encoded(m);
    Metadata back;
    ASSERT_TRUE(DecodeMetadata(bytes, &back).ok());
    EXPECT_EQ(back, m);
  }
  EXPECT_TRUE(Encoded(Metadata()).empty());
}

TEST(MetadataTest, EncodeAppends) {
  std::string out = "prefix";
  EncodeMetadata(PartitionsMeta(), &out);
  EXPECT_EQ(out.substr(0, 6), "prefix");
  EXPECT_EQ(out.substr(6), Encoded(PartitionsMeta()));
}

TEST(MetadataTest, DecodeReplacesPreviousContent) {
  Metadata m = KeysMeta();
  ASSERT_TRUE(DecodeMetadata("", &m).ok());
  EXPECT_EQ(m, Metadata());
}

TEST(MetadataTest, EveryTruncationIsRefused) {
  for (const Metadata& m : {KeysMeta(), PartitionsMeta()}) {
    const std::string bytes = Encoded(m);
    for (size_t len = 1; len < bytes.size(); ++len) {
      Metadata back;
      EXPECT_TRUE(DecodeMetadata(bytes.substr(0, len), &back).Is(Status::Code::kCorruption)) << len;
    }
  }
}

TEST(MetadataTest, TrailingBytesAreRefused) {
  Metadata back;
  EXPECT_TRUE(DecodeMetadata(Encoded(KeysMeta()) + "x", &back).Is(Status::Code::kCorruption));
  EXPECT_TRUE(DecodeMetadata(std::string(1, '\0') + "x", &back).Is(Status::Code::kCorruption));
}

TEST(MetadataTest, UnknownModeIsRefused) {
  Metadata back;
  const Status s = DecodeMetadata(std::string(1, '\x07'), &back);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("mode"), std::string::npos);
}

TEST(MetadataTest, HugeCountsDoNotAllocate) {
  // A count of 2^32-1 with a few bytes behind it must fail before reserving anything.
  for (uint8_t mode : {uint8_t{1}, uint8_t{2}}) {
    std::string bytes(1, static_cast<char>(mode));
    const uint32_t count = 0xFFFFFFFFu;
    bytes.append(reinterpret_cast<const char*>(&count), 4);
    bytes.append(64, '\0');
    Metadata back;
    const Status s = DecodeMetadata(bytes, &back);
    EXPECT_TRUE(s.Is(Status::Code::kCorruption));
    EXPECT_NE(s.message().find("count"), std::string::npos);
  }
}

TEST(MetadataTest, LyingKeyLengthIsRefused) {
  std::string bytes = Encoded(KeysMeta());
  // First sibling's key_len sits after mode (1), count (4), keyspace (8), bucket (4).
  const uint16_t key_len = 60000;
  std::memcpy(bytes.data() + 17, &key_len, 2);
  Metadata back;
  const Status s = DecodeMetadata(bytes, &back);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("key_len"), std::string::npos);
}

// A bulk load's versions name every partition of the table: a bitmap per keyspace, not a list.
TEST(MetadataTest, ManyPartitionsOfOneKeyspaceAreABitmap) {
  Metadata m;
  m.mode = Metadata::Mode::kPartitions;
  for (uint32_t b = 0; b < 16; b++) m.partitions.push_back({77, b});
  const std::string bytes = Encoded(m);
  EXPECT_EQ(bytes.size(), 1u + 2 + 8 + 2 + 2);  // was 1 + 4 + 16 x 12 = 197
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 3);
  Metadata back;
  ASSERT_TRUE(DecodeMetadata(bytes, &back).ok());
  EXPECT_EQ(back, m);
}

TEST(MetadataTest, OnlySortedListsBecomeBitmapsSoEveryListRoundTrips) {
  Metadata m;
  m.mode = Metadata::Mode::kPartitions;
  // Unsorted, and with a duplicate (a decoder accepts them): kept as a list, so that the
  // bytes decode to the same list (the protocol fuzzer's round-trip property).
  m.partitions = {{9, 3}, {2, 7}, {9, 0}, {2, 1}, {2, 1}};
  std::string bytes = Encoded(m);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 2);
  Metadata back;
  ASSERT_TRUE(DecodeMetadata(bytes, &back).ok());
  EXPECT_EQ(back, m);
  m.partitions = {{2, 1}, {2, 7}, {9, 0}, {9, 3}};
  bytes = Encoded(m);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 3);
  ASSERT_TRUE(DecodeMetadata(bytes, &back).ok());
  EXPECT_EQ(back, m);
  // One partition with a high bucket: a bitmap would take 501 bytes, the list 17.
  m.partitions = {{5, 4000}};
  const std::string list = Encoded(m);
  EXPECT_EQ(list.size(), 17u);
  EXPECT_EQ(static_cast<uint8_t>(list[0]), 2);
  ASSERT_TRUE(DecodeMetadata(list, &back).ok());
  EXPECT_EQ(back, m);
}

TEST(MetadataTest, MalformedBitmapsAreRefused) {
  Metadata back;
  // A group count that the bytes cannot hold.
  std::string lying("\x03\xff\xff", 3);
  lying.append(20, '\0');
  Status s = DecodeMetadata(lying, &back);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("group count"), std::string::npos);
  // Groups out of keyspace order (an encoder never writes them so).
  Metadata m;
  m.mode = Metadata::Mode::kPartitions;
  m.partitions = {{1, 0}, {1, 1}, {2, 0}, {2, 1}};
  std::string bytes = Encoded(m);
  ASSERT_EQ(static_cast<uint8_t>(bytes[0]), 3);
  const uint64_t first = 3;  // the first group's keyspace, after tag (1) and count (2)
  std::memcpy(bytes.data() + 3, &first, 8);
  s = DecodeMetadata(bytes, &back);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("order"), std::string::npos);
}

}  // namespace
}  // namespace ramp::record
