// The cluster file: "homes", the digest, and which changes a running server accepts
// (CheckReload; the servers' side is in engine/itest/membership_itest.cpp).
#include "server/cluster_config.h"

#include <gtest/gtest.h>

namespace ramp::server {
namespace {

ClusterConfig Parse(const std::string& text) {
  ClusterConfig c;
  Status st = ClusterConfig::Parse(text, &c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

const auto kOwnsNothing = [](uint32_t, std::string*) { return false; };

TEST(ClusterConfigTest, HomesDefaultToEveryNodeAndMayNotExceedThem) {
  EXPECT_EQ(Parse("node tcp://a:1\nnode tcp://b:1\n").home_count(), 2u);
  EXPECT_EQ(Parse("homes 1\nnode tcp://a:1\nnode tcp://b:1\n").home_count(), 1u);
  ClusterConfig c;
  Status st = ClusterConfig::Parse("homes 3\nnode tcp://a:1\nnode tcp://b:1\n", &c);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("homes 3 but names 2 nodes"), std::string::npos) << st.ToString();
  EXPECT_FALSE(ClusterConfig::Parse("homes x\nnode tcp://a:1\n", &c).ok());
}

TEST(ClusterConfigTest, DigestIgnoresCommentsButNotNodes) {
  const ClusterConfig a = Parse("node tcp://a:1\nnode tcp://b:1\n");
  EXPECT_EQ(a.Digest(), Parse("# x\nnode   tcp://a:1  # first\n\nnode tcp://b:1\n").Digest());
  EXPECT_EQ(a.Digest(), Parse("homes 2\nnode tcp://a:1\nnode tcp://b:1\n").Digest());
  EXPECT_NE(a.Digest(), Parse("node tcp://a:1\nnode tcp://c:1\n").Digest());
  EXPECT_NE(a.Digest(), Parse("node tcp://b:1\nnode tcp://a:1\n").Digest());
}

TEST(ClusterConfigTest, ReloadTakesNodesAddedAtTheEndAndNewAddresses) {
  const ClusterConfig now = Parse("node tcp://a:1\nnode tcp://b:1\n");
  EXPECT_TRUE(CheckReload(now, Parse("homes 2\nnode tcp://a:1\nnode tcp://b:1\nnode tcp://c:1\n"),
                          kOwnsNothing)
                  .ok());
  EXPECT_TRUE(CheckReload(now, Parse("node tcp://a:1\nnode tcp://b:2\n"), kOwnsNothing).ok());
}

TEST(ClusterConfigTest, ReloadRefusesWhatWouldMisplacePartitions) {
  const ClusterConfig now = Parse("homes 2\nnode tcp://a:1\nnode tcp://b:1\nnode tcp://c:1\n");
  // Another number of homes (a node added without "homes").
  Status st =
      CheckReload(now, Parse("node tcp://a:1\nnode tcp://b:1\nnode tcp://c:1\n"), kOwnsNothing);
  EXPECT_NE(st.message().find("has 3 home nodes, not 2"), std::string::npos) << st.ToString();
  // Other default buckets.
  st = CheckReload(now,
                   Parse("buckets 8\nhomes 2\nnode tcp://a:1\nnode tcp://b:1\nnode tcp://c:1\n"),
                   kOwnsNothing);
  EXPECT_NE(st.message().find("changes buckets from 16 to 8"), std::string::npos) << st.ToString();
  // Node 1's line deleted: node 2 becomes node 1.
  st = CheckReload(now, Parse("homes 2\nnode tcp://a:1\nnode tcp://c:1\n"), kOwnsNothing);
  EXPECT_NE(st.message().find("gives node 1 the address tcp://c:1, which is node 2's"),
            std::string::npos)
      << st.ToString();
  // The last node removed while it owns a partition, then once it owns none.
  const ClusterConfig without = Parse("homes 2\nnode tcp://a:1\nnode tcp://b:1\n");
  st = CheckReload(now, without, [](uint32_t node, std::string* what) {
    *what = "owns partition 7/3";
    return node == 2;
  });
  EXPECT_NE(st.message().find("removes node 2 (tcp://c:1), which still owns partition 7/3"),
            std::string::npos)
      << st.ToString();
  EXPECT_TRUE(CheckReload(now, without, kOwnsNothing).ok());
}

}  // namespace
}  // namespace ramp::server
