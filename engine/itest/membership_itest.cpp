// Membership an operator can trust (issue 15 item 5), on real rampd servers:
// - a node added to the cluster file of a running cluster (SIGHUP, nobody restarted) takes a
//   partition by migration, and a client opened before it existed (as a PostgreSQL backend
//   would be) writes, reads and scans there;
// - reloads that would lose or misplace partitions are refused with the reason and change
//   nothing: a new number of homes, a line removed in the middle (renumbering), removing a
//   node that owns a partition;
// - every server probes every node (rampctl status's matrix) and agrees on the file;
// - a node whose advertised address is wrong is told so at start, in a sentence naming both
//   ends, and the probes say the same.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

constexpr KeyspaceId kKeyspace = 4242;
constexpr int kKeys = 300;

std::string Key(int i) {
  return "key" + std::to_string(i);
}

int CountScan(Client* c) {
  std::unique_ptr<Scanner> scan;
  Status st = c->OpenScan(kKeyspace, ScanOptions(), &scan);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return -1;
  int rows = 0;
  for (;;) {
    ScanRow row;
    bool end = false;
    st = scan->Next(&row, &end);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok() || end) break;
    rows++;
  }
  return rows;
}

TEST(MembershipTest, NodeAddedToARunningClusterServesAnOldClient) {
  TestClusterOptions o;
  o.nodes = 3;
  std::unique_ptr<TestCluster> tc;
  ASSERT_TRUE(TestCluster::Start(o, &tc).ok());

  // The extension's way: shm, GET*, PUT+ (a backend that stays connected throughout).
  std::unique_ptr<Client> old;
  ASSERT_TRUE(
      Client::Open(tc->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus),
                   &old)
          .ok());
  for (int i = 0; i < kKeys; i += 10) {
    auto t = old->Begin();
    for (int j = i; j < i + 10; j++) t->Put(kKeyspace, Key(j), "v" + std::to_string(j));
    ASSERT_TRUE(t->Commit().ok());
  }
  ASSERT_EQ(old->node_count(), 3u);

  Status st = tc->AddNode();
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int n = 0; n < 3; n++) {
    EXPECT_NE(tc->ReadLog(n).find("node 3 added"), std::string::npos) << tc->ReadLog(n);
  }

  // The old client moves a partition to the new node: it learns of node 3 by itself.
  const PartitionId moved{kKeyspace, 5};
  st = old->MigratePartition(moved, 3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(old->node_count(), 4u);
  std::vector<PartitionStatus> parts;
  ASSERT_TRUE(old->Partitions(&parts).ok());
  bool on_new_node = false;
  for (const auto& p : parts) on_new_node |= p.id == moved && p.owner == 3;
  EXPECT_TRUE(on_new_node);

  // Every key reads back through the old client (the moved bucket from node 3), a write to
  // the moved bucket commits, and a scan (the page reader opened before node 3) sees all.
  int found = 0;
  for (int i = 0; i < kKeys; i++) {
    auto t = old->Begin();
    ReadResult r;
    st = t->Get(kKeyspace, Key(i), &r);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (r.found && r.value == "v" + std::to_string(i)) found++;
  }
  EXPECT_EQ(found, kKeys);
  {
    auto t = old->Begin();
    for (int j = kKeys; j < kKeys + 40; j++) t->Put(kKeyspace, Key(j), "w");
    st = t->Commit();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_EQ(CountScan(old.get()), kKeys + 40);

  // Every server runs the same file and reaches every node.
  std::vector<ServerStatus> servers;
  ASSERT_TRUE(old->ClusterStatus(&servers).ok());
  ASSERT_EQ(servers.size(), 4u);
  for (const auto& s : servers) {
    EXPECT_TRUE(s.reachable) << s.error;
    EXPECT_EQ(s.config_nodes, 4u);
    EXPECT_EQ(s.config_digest, servers[0].config_digest);
    EXPECT_EQ(s.advertised.rfind(tc->tcp(static_cast<int>(s.node)).ToString(), 0), 0u)
        << s.advertised;
    std::vector<NodeProbe> seen;
    st = old->Probe(s.node, {}, &seen);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(seen.size(), 4u);
    for (const auto& p : seen) EXPECT_TRUE(p.ok) << p.error;
  }

  // Refused reloads, each with its reason; the servers keep the file they had.
  const std::string good = tc->ClusterFileText();
  // A fifth node without "homes": every partition's home would change.
  {
    std::string text;
    for (int n = 0; n < 4; n++) text += "node " + tc->tcp(n).ToString() + "\n";
    text += "node tcp://127.0.0.1:1\n";
    ASSERT_TRUE(tc->ApplyClusterFile(text).ok());
    for (int n = 0; n < 4; n++) {
      EXPECT_NE(tc->ReadLog(n).find("has 5 home nodes, not 3"), std::string::npos)
          << tc->ReadLog(n);
    }
  }
  // Node 1's line removed: node 2 would become node 1.
  {
    std::string text = "homes 3\nnode " + tc->tcp(0).ToString() + "\nnode " +
                       tc->tcp(2).ToString() + "\nnode " + tc->tcp(3).ToString() + "\n";
    ASSERT_TRUE(tc->ApplyClusterFile(text).ok());
    for (int n = 0; n < 3; n++) {
      EXPECT_NE(tc->ReadLog(n).find("gives node 1 the address " + tc->tcp(2).ToString() +
                                    ", which is node 2's"),
                std::string::npos)
          << tc->ReadLog(n);
    }
  }
  // Node 3 removed while it owns a partition: its home refuses.
  {
    std::string text = "homes 3\n";
    for (int n = 0; n < 3; n++) {
      text += "node " + tc->tcp(n).ToString() + " " + tc->shm(n).ToString() + "\n";
    }
    ASSERT_TRUE(tc->ApplyClusterFile(text).ok());
    const int home = static_cast<int>(HomeOf(moved, 3));
    EXPECT_NE(tc->ReadLog(home).find("removes node 3 (" + tc->tcp(3).ToString() + "," +
                                     tc->shm(3).ToString() + "), which still owns partition " +
                                     moved.ToString()),
              std::string::npos)
        << tc->ReadLog(home);
  }
  ASSERT_TRUE(tc->ApplyClusterFile(good).ok());

  // Nothing changed: the same four nodes, the same file everywhere, every key still there.
  ASSERT_TRUE(old->ClusterStatus(&servers).ok());
  for (const auto& s : servers) {
    EXPECT_EQ(s.config_nodes, 4u);
    EXPECT_EQ(s.config_digest, servers[0].config_digest);
  }
  EXPECT_EQ(CountScan(old.get()), kKeys + 40);
}

TEST(MembershipTest, UnreachableAdvertisedAddressIsNamedByBothEnds) {
  TestClusterOptions o;
  o.nodes = 2;
  o.shm = false;
  std::unique_ptr<TestCluster> tc;
  ASSERT_TRUE(TestCluster::Start(o, &tc).ok());
  // Node 2 listens on one port, the cluster file advertises another (nobody listens).
  uint16_t wrong = 0;
  {
    // A port that was free a moment ago: nobody listens there.
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    wrong = ntohs(a.sin_port);
    close(s);
  }
  Status st = tc->AddNode(wrong);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::string advertised = "tcp://127.0.0.1:" + std::to_string(wrong);
  // The new node hears it from its peers at start.
  const std::string sentence = "node 2 advertises " + advertised + " but node 0 (" +
                               tc->tcp(0).ToString() + ") cannot reach it: ";
  std::string log;
  for (int waited = 0; waited < 20000; waited += 50) {
    log = tc->ReadLog(2);
    if (log.find(sentence) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(log.find(sentence), std::string::npos) << log;
  EXPECT_NE(log.find("Connection refused"), std::string::npos) << log;

  // The probes say the same; the others reach each other.
  ClientOptions co = tc->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  co.seeds.resize(1);
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(co, &c).ok());
  for (uint32_t from = 0; from < 2; from++) {
    std::vector<NodeProbe> seen;
    st = c->Probe(from, {}, &seen);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_TRUE(seen[0].ok) << seen[0].error;
    EXPECT_TRUE(seen[1].ok) << seen[1].error;
    EXPECT_FALSE(seen[2].ok);
    EXPECT_EQ(seen[2].endpoint, advertised);
    EXPECT_NE(
        seen[2].error.find("node 2 advertises " + advertised + " but node " + std::to_string(from) +
                           " (" + tc->tcp(static_cast<int>(from)).ToString() + ") cannot reach it"),
        std::string::npos)
        << seen[2].error;
  }
}

}  // namespace
}  // namespace ramp::testing
