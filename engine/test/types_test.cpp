// Key hashing, placement and the names of the engine's vocabulary.
#include "ramp/types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>
#include "numbered.h"

namespace ramp {
namespace {

using ::ramp::testing::Numbered;

std::string RowKey(uint64_t id) {
  std::string k(8, '\0');
  std::memcpy(k.data(), &id, 8);
  return k;
}

TEST(KeyHashTest, IsFrozen) {
  // Buckets of stored data depend on these values: they must never change.
  EXPECT_EQ(KeyHash(""), 0x48218226ff3cd4bfull);
  EXPECT_EQ(KeyHash("a"), 0x4e23c0c98b9a6368ull);
  EXPECT_EQ(KeyHash("row-00042"), 0x29bda2fb2bb289b5ull);
  EXPECT_EQ(KeyHash(RowKey(1)), 0x0854922bb0331d88ull);
}

TEST(KeyHashTest, TrailingZerosAndLengthsMatter) {
  EXPECT_NE(KeyHash(std::string("a")), KeyHash(std::string("a\0", 2)));
  EXPECT_NE(KeyHash(std::string(8, '\0')), KeyHash(std::string(16, '\0')));
  EXPECT_NE(KeyHash(std::string(7, '\0')), KeyHash(""));
}

TEST(KeyHashTest, NoCollisionsAmongSequentialKeys) {
  std::unordered_set<uint64_t> seen;
  for (uint64_t i = 0; i < 200000; ++i) ASSERT_TRUE(seen.insert(KeyHash(RowKey(i))).second);
}

// Keys spread over buckets about as evenly as random placement would: for n keys in b
// buckets, each bucket within 5 standard deviations of n/b.
void ExpectEvenBuckets(const std::vector<std::string>& keys, uint32_t buckets) {
  std::vector<size_t> count(buckets, 0);
  for (const std::string& k : keys) ++count[BucketOf(k, buckets)];
  const double mean = static_cast<double>(keys.size()) / buckets;
  const double sd = std::sqrt(mean * (1.0 - 1.0 / buckets));
  for (uint32_t b = 0; b < buckets; ++b) {
    EXPECT_NEAR(static_cast<double>(count[b]), mean, 5 * sd) << "bucket " << b;
  }
}

TEST(KeyHashTest, SpreadsKeysOverBuckets) {
  std::vector<std::string> rows, names;
  for (uint64_t i = 0; i < 100000; ++i) {
    rows.push_back(RowKey(i));
    names.push_back(Numbered("customer#", i));
  }
  for (uint32_t buckets : {16u, 7u, 64u}) {
    ExpectEvenBuckets(rows, buckets);
    ExpectEvenBuckets(names, buckets);
  }
}

TEST(KeyHashTest, FlippingAnInputBitFlipsAboutHalfTheOutput) {
  double total = 0;
  int samples = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    const std::string key = RowKey(i * 7919);
    const uint64_t h = KeyHash(key);
    for (int bit = 0; bit < 64; ++bit) {
      std::string flipped = key;
      flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
      total += std::popcount(h ^ KeyHash(flipped));
      ++samples;
    }
  }
  EXPECT_NEAR(total / samples, 32.0, 0.5);
}

TEST(HomeOfTest, SpreadsBucketsOfAKeyspaceEvenly) {
  for (KeyspaceId ks : {1ull, 2ull, 0xDEADBEEFull}) {
    for (uint32_t nodes : {1u, 2u, 3u, 5u}) {
      std::vector<int> per_node(nodes, 0);
      for (uint32_t b = 0; b < kDefaultBuckets; ++b) {
        const uint32_t home = HomeOf({ks, b}, nodes);
        ASSERT_LT(home, nodes);
        ++per_node[home];
      }
      const auto [lo, hi] = std::minmax_element(per_node.begin(), per_node.end());
      EXPECT_LE(*hi - *lo, 1) << "keyspace " << ks << " nodes " << nodes;
    }
  }
}

TEST(HomeOfTest, KeyspacesStartOnDifferentNodes) {
  std::unordered_set<uint32_t> starts;
  for (KeyspaceId ks = 1; ks <= 32; ++ks) starts.insert(HomeOf({ks, 0}, 3));
  EXPECT_EQ(starts.size(), 3u);
}

TEST(PartitionIdTest, ToStringAndHash) {
  EXPECT_EQ((PartitionId{0x1f, 3}).ToString(), "ks:31/b3");
  PartitionIdHash hash;
  std::unordered_set<size_t> seen;
  for (KeyspaceId ks = 0; ks < 64; ++ks) {
    for (uint32_t b = 0; b < 16; ++b) seen.insert(hash({ks, b}));
  }
  EXPECT_EQ(seen.size(), 64u * 16u);
}

TEST(TimestampTest, OrderAndToString) {
  EXPECT_LT((Timestamp{1, 9}), (Timestamp{2, 0}));
  EXPECT_LT((Timestamp{1, 1}), (Timestamp{1, 2}));
  EXPECT_TRUE(Timestamp().zero());
  EXPECT_EQ((Timestamp{123, 45}).ToString(), "123.45");
}

TEST(PathNamesTest, RoundTrip) {
  for (ReadPath p : {ReadPath::kRpc, ReadPath::kGetPlus, ReadPath::kGetStar}) {
    ReadPath back = ReadPath::kRpc;
    ASSERT_TRUE(ParseReadPath(ReadPathName(p), &back));
    EXPECT_EQ(back, p);
  }
  for (WritePath p : {WritePath::kRpc, WritePath::kPutPlus}) {
    WritePath back = WritePath::kRpc;
    ASSERT_TRUE(ParseWritePath(WritePathName(p), &back));
    EXPECT_EQ(back, p);
  }
  EXPECT_STREQ(ReadPathName(ReadPath::kGetStar), "get*");
  EXPECT_STREQ(WritePathName(WritePath::kPutPlus), "put+");
  ReadPath r;
  WritePath w;
  EXPECT_FALSE(ParseReadPath("get", &r));
  EXPECT_FALSE(ParseReadPath("", &r));
  EXPECT_FALSE(ParseWritePath("put*", &w));
}

}  // namespace
}  // namespace ramp
