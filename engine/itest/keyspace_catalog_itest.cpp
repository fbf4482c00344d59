// The cluster's keyspace catalog (ramp/keyspace_catalog.h) against real rampd processes:
// registration, attachment by another PostgreSQL server, never by the same one, listing and
// dropping.
#include <gtest/gtest.h>

#include <thread>

#include "ramp/client.h"
#include "ramp/keyspace_catalog.h"
#include "ramp/write_batch.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

KeyspaceEntry Entry(KeyspaceId id, uint64_t system, uint32_t db_oid, const char* relation) {
  KeyspaceEntry e;
  e.id = id;
  e.kind = 't';
  e.buckets = 4;
  e.database = "d";
  e.schema = "public";
  e.relation = relation;
  e.system_id = system;
  e.database_oid = db_oid;
  return e;
}

TEST(KeyspaceEntryTest, EncodesAndDecodes) {
  KeyspaceEntry e = Entry(123456, 7, 16384, "t");
  e.created_ms = 99;
  e.state = KeyspaceState::kDropped;
  e.dropped_ms = 100;
  KeyspaceEntry d;
  ASSERT_TRUE(DecodeKeyspaceEntry(EncodeKeyspaceEntry(e), &d));
  EXPECT_EQ(d.id, e.id);
  EXPECT_EQ(d.relation, "t");
  EXPECT_EQ(d.system_id, 7u);
  EXPECT_EQ(d.database_oid, 16384u);
  EXPECT_EQ(d.state, KeyspaceState::kDropped);
  EXPECT_EQ(d.dropped_ms, 100u);
  std::string bad = EncodeKeyspaceEntry(e);
  bad.pop_back();
  EXPECT_FALSE(DecodeKeyspaceEntry(bad, &d));
}

TEST(KeyspaceCatalogTest, RegistersAttachesListsAndDrops) {
  std::unique_ptr<TestCluster> cluster;
  TestClusterOptions o;
  o.nodes = 2;
  ASSERT_TRUE(TestCluster::Start(o, &cluster).ok());
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(cluster->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar,
                                                     WritePath::kPutPlus),
                           &client)
                  .ok());
  KeyspaceCatalog catalog(client.get());
  bool attached = false, taken = false;

  // Server 1 creates t.
  KeyspaceEntry a = Entry(100001, 1, 500, "t");
  ASSERT_TRUE(catalog.Register(&a, &attached, &taken).ok());
  EXPECT_FALSE(attached);
  EXPECT_FALSE(taken);
  // The same id again is refused.
  KeyspaceEntry again = Entry(100001, 1, 501, "u");
  ASSERT_TRUE(catalog.Register(&again, &attached, &taken).ok());
  EXPECT_TRUE(taken);
  // Server 2 runs the same DDL: it attaches to server 1's keyspace.
  KeyspaceEntry b = Entry(200001, 2, 600, "t");
  ASSERT_TRUE(catalog.Register(&b, &attached, &taken).ok());
  EXPECT_TRUE(attached);
  EXPECT_EQ(b.id, 100001u);
  EXPECT_EQ(b.system_id, 1u);
  // Server 1 re-creates the database (new oid): never its own old keyspace.
  KeyspaceEntry c = Entry(100002, 1, 502, "t");
  ASSERT_TRUE(catalog.Register(&c, &attached, &taken).ok());
  EXPECT_FALSE(attached);
  EXPECT_FALSE(taken);
  EXPECT_EQ(c.id, 100002u);

  // Data in the old keyspace, then drop it.
  WriteBatch batch(client->write_limits());
  client->DefineKeyspace(100001, 4);
  ASSERT_TRUE(batch.PutKey(100001, "k", "v", nullptr).ok());
  ASSERT_TRUE(client->Write(batch).ok());

  std::vector<KeyspaceEntry> all;
  ASSERT_TRUE(catalog.List(&all).ok());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, 100001u);
  EXPECT_EQ(all[1].id, 100002u);
  EXPECT_TRUE(all[0].live());

  bool was_live = false;
  ASSERT_TRUE(catalog.Drop(100001, &was_live).ok());
  EXPECT_TRUE(was_live);
  ASSERT_TRUE(catalog.Drop(100001, &was_live).ok());  // idempotent
  EXPECT_FALSE(was_live);
  KeyspaceEntry got;
  bool found = false;
  ASSERT_TRUE(catalog.Get(100001, &got, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(got.state, KeyspaceState::kDropped);
  std::vector<PartitionStatus> parts;
  ASSERT_TRUE(client->Partitions(&parts).ok());
  for (const auto& p : parts) EXPECT_NE(p.id.keyspace, 100001u);

  // Server 2 attaches to the newest live incarnation, not to a dropped one.
  KeyspaceEntry b2 = Entry(200002, 2, 600, "t");
  ASSERT_TRUE(catalog.Register(&b2, &attached, &taken).ok());
  EXPECT_TRUE(attached);
  EXPECT_EQ(b2.id, 100002u);
  ASSERT_TRUE(catalog.Drop(100002).ok());
  KeyspaceEntry b3 = Entry(200003, 2, 600, "t");
  ASSERT_TRUE(catalog.Register(&b3, &attached, &taken).ok());
  EXPECT_FALSE(attached);
  EXPECT_EQ(b3.id, 200003u);
  EXPECT_FALSE(catalog.Drop(kCatalogKeyspace).ok());
}

// Two servers run the same CREATE at the same time, many times over: each time exactly one
// registers the keyspace and the other attaches to it (conflict-checked registration).
TEST(KeyspaceCatalogTest, ConcurrentRegistrationsAgreeOnOneKeyspace) {
  std::unique_ptr<TestCluster> cluster;
  TestClusterOptions o;
  o.nodes = 2;
  ASSERT_TRUE(TestCluster::Start(o, &cluster).ok());
  const ClientOptions co =
      cluster->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  constexpr int kTables = 20;
  KeyspaceEntry results[2][kTables];
  bool attached[2][kTables] = {};
  std::vector<std::thread> threads;
  for (int server = 0; server < 2; server++) {
    threads.emplace_back([&, server] {
      std::unique_ptr<Client> client;
      ASSERT_TRUE(Client::Open(co, &client).ok());
      KeyspaceCatalog catalog(client.get());
      for (int t = 0; t < kTables; t++) {
        const std::string name = "t" + std::to_string(t);
        KeyspaceEntry e = Entry(100000 * (server + 1) + t, server + 1, 500, name.c_str());
        bool taken = false;
        Status st = catalog.Register(&e, &attached[server][t], &taken);
        ASSERT_TRUE(st.ok()) << st.ToString();
        ASSERT_FALSE(taken);
        results[server][t] = e;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kTables; t++) {
    EXPECT_EQ(results[0][t].id, results[1][t].id) << "table " << t;
    EXPECT_NE(attached[0][t], attached[1][t]) << "table " << t;
  }
}

}  // namespace
}  // namespace ramp::testing
