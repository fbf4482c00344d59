// RAMP transactions against a cluster of real rampd processes, over every read/write path.
#include <gtest/gtest.h>
#include <chrono>
#include <csignal>

#include <map>
#include <thread>

#include "client/client_impl.h"
#include "common/record.h"
#include "itest_util.h"
#include "protocol/messages.h"
#include "protocol/page_messages.h"
#include "ramp/client.h"
#include "ramp/hlc.h"
#include "ramp/transport/transport.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

constexpr KeyspaceId kKs = 0x5EED;

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestClusterOptions o;
    o.nodes = 3;
    o.memory_mb = 256;  // the bulk test writes tens of MiB per path
    Status st = TestCluster::Start(o, &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  std::unique_ptr<Client> Open(Provider p, ReadPath r, WritePath w) {
    std::unique_ptr<Client> c;
    Status st = Client::Open(cluster_->ClientOptionsFor(p, r, w), &c);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return c;
  }

  static std::unique_ptr<TestCluster> cluster_;
};
std::unique_ptr<TestCluster> ClusterTest::cluster_;

struct PathCase {
  Provider provider;
  ReadPath read;
  WritePath write;
  const char* name;
};

class PathTest : public ClusterTest, public ::testing::WithParamInterface<PathCase> {
 protected:
  std::unique_ptr<Client> OpenParam() {
    return Open(GetParam().provider, GetParam().read, GetParam().write);
  }
  // A keyspace per test so that tests do not see each other's keys.
  KeyspaceId Ks() const {
    return KeyHash(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }
};

TEST_P(PathTest, WritesAcrossNodesAreReadBack) {
  auto c = OpenParam();
  ASSERT_TRUE(c);
  const KeyspaceId ks = Ks();
  std::vector<std::string> keys;
  auto txn = c->Begin();
  for (int i = 0; i < 100; i++) {
    keys.push_back("k" + std::to_string(i));
    ASSERT_TRUE(txn->Put(ks, keys.back(), "v" + std::to_string(i)).ok());
  }
  Timestamp ts;
  ASSERT_TRUE(txn->Commit(&ts).ok());
  std::vector<ReadItem> items;
  for (const auto& k : keys) items.push_back(ReadItem{ks, k, {}});
  // Twice: the second time GET* reads one-sided from cached addresses.
  for (int round = 0; round < 2; round++) {
    std::vector<ReadResult> out;
    auto r = c->Begin();
    Status st = r->GetAll(items, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int i = 0; i < 100; i++) {
      ASSERT_TRUE(out[i].found) << keys[i];
      EXPECT_EQ(out[i].value, "v" + std::to_string(i));
      EXPECT_EQ(out[i].ts, ts);
    }
  }
  if (GetParam().read == ReadPath::kGetStar) {
    EXPECT_GE(c->stats().one_sided_hits, 100u) << "one-sided reads " << c->stats().one_sided_reads
                                               << ", fallbacks " << c->stats().one_sided_fallbacks;
  } else {
    EXPECT_EQ(c->stats().one_sided_reads, 0u);
  }
}

TEST_P(PathTest, OverwriteDeleteAndNeverWritten) {
  auto c = OpenParam();
  const KeyspaceId ks = Ks();
  for (int v = 0; v < 5; v++) {
    auto t = c->Begin();
    ASSERT_TRUE(t->Put(ks, "x", "value" + std::to_string(v)).ok());
    ASSERT_TRUE(t->Commit().ok());
    ReadResult r;
    ASSERT_TRUE(c->Begin()->Get(ks, "x", &r).ok());
    EXPECT_TRUE(r.found);
    EXPECT_EQ(r.value, "value" + std::to_string(v));
  }
  auto t = c->Begin();
  ASSERT_TRUE(t->Delete(ks, "x").ok());
  ASSERT_TRUE(t->Commit().ok());
  ReadResult r;
  ASSERT_TRUE(c->Begin()->Get(ks, "x", &r).ok());
  EXPECT_FALSE(r.found);
  EXPECT_FALSE(r.ts.zero());  // a tombstone still has the version that deleted it
  ASSERT_TRUE(c->Begin()->Get(ks, "never-written", &r).ok());
  EXPECT_FALSE(r.found);
  EXPECT_TRUE(r.ts.zero());
}

TEST_P(PathTest, ReaderSeesUpdatesFromAnotherClient) {
  auto reader = OpenParam();
  auto writer = OpenParam();
  const KeyspaceId ks = Ks();
  for (int v = 0; v < 20; v++) {
    auto t = writer->Begin();
    ASSERT_TRUE(t->Put(ks, "shared", std::to_string(v)).ok());
    ASSERT_TRUE(t->Commit().ok());
    ReadResult r;
    ASSERT_TRUE(reader->Begin()->Get(ks, "shared", &r).ok());
    ASSERT_EQ(r.value, std::to_string(v));
  }
  if (GetParam().read == ReadPath::kGetStar) {
    // Each update invalidated the cached address: the valid bit sent the reader to GET+.
    EXPECT_GT(reader->stats().one_sided_fallbacks, 0u);
  }
}

// A read snapshot returns the newest version committed at or before it: a transaction that
// commits after the snapshot is invisible to every read that uses it (one-sided reads too:
// a cached address of a newer version goes to the request path), metadata comes back when
// asked for, and the latest read sees the new version.
TEST_P(PathTest, SnapshotReadsSeeTheVersionBeforeALaterCommit) {
  auto reader = OpenParam();
  auto writer = OpenParam();
  const KeyspaceId ks = Ks();
  auto t = writer->Begin();
  ASSERT_TRUE(t->Put(ks, "a", "old-a").ok());
  ASSERT_TRUE(t->Put(ks, "b", "old-b").ok());
  Timestamp first;
  ASSERT_TRUE(t->Commit(&first).ok());
  const std::vector<ReadItem> items{ReadItem{ks, "a", {}}, ReadItem{ks, "b", {}}};
  std::vector<ReadResult> out;
  auto r = reader->Begin();
  ASSERT_TRUE(r->GetAll(items, &out).ok());  // caches the addresses (GET*)
  const Timestamp snapshot = r->SnapshotNow();
  EXPECT_GE(snapshot, first);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a later millisecond
  t = writer->Begin();
  ASSERT_TRUE(t->Put(ks, "a", "new-a").ok());
  ASSERT_TRUE(t->Delete(ks, "b").ok());
  Timestamp second;
  ASSERT_TRUE(t->Commit(&second).ok());
  ASSERT_GT(second, snapshot);

  r->SetReadSnapshot(snapshot);
  r->ReturnMetadata(true);
  for (int round = 0; round < 2; round++) {
    Status st = r->GetAll(items, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(out[0].found);
    EXPECT_EQ(out[0].value, "old-a");
    EXPECT_EQ(out[0].ts, first);
    EXPECT_FALSE(out[0].metadata.empty());  // names b, the other key of its transaction
    EXPECT_TRUE(out[1].found);
    EXPECT_EQ(out[1].value, "old-b");
  }
  r->SetReadSnapshot(Timestamp());
  ASSERT_TRUE(r->GetAll(items, &out).ok());
  EXPECT_EQ(out[0].value, "new-a");
  EXPECT_EQ(out[0].ts, second);
  EXPECT_FALSE(out[1].found);
}

TEST_P(PathTest, WriteWriteConflictAbortsAndLeavesNothing) {
  auto a = OpenParam();
  auto b = OpenParam();
  const KeyspaceId ks = Ks();
  {
    auto t = a->Begin();
    ASSERT_TRUE(t->Put(ks, "acct", "100").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  auto ta = a->Begin();
  ReadResult seen;
  ASSERT_TRUE(ta->Get(ks, "acct", &seen).ok());
  {
    auto tb = b->Begin();
    ASSERT_TRUE(tb->Put(ks, "acct", "200", &seen.ts).ok());
    ASSERT_TRUE(tb->Commit().ok());
  }
  ASSERT_TRUE(ta->Put(ks, "acct", "150", &seen.ts).ok());
  ASSERT_TRUE(ta->Put(ks, "audit", "a-wrote").ok());
  Status st = ta->Commit();
  EXPECT_TRUE(st.Is(Status::Code::kConflict)) << st.ToString();
  ReadResult r;
  ASSERT_TRUE(a->Begin()->Get(ks, "acct", &r).ok());
  EXPECT_EQ(r.value, "200");
  ASSERT_TRUE(a->Begin()->Get(ks, "audit", &r).ok());
  EXPECT_FALSE(r.found) << "a conflicting transaction must leave nothing visible";
}

TEST_P(PathTest, ReadYourOwnWritesAndLargeValues) {
  auto c = OpenParam();
  const KeyspaceId ks = Ks();
  const std::string big(1 << 20, 'z');  // a TOAST-sized value crosses the rings in fragments
  auto t = c->Begin();
  ASSERT_TRUE(t->Put(ks, "big", big).ok());
  ReadResult r;
  ASSERT_TRUE(t->Get(ks, "big", &r).ok());
  EXPECT_TRUE(r.found);
  ASSERT_TRUE(t->Commit().ok());
  ASSERT_TRUE(c->Begin()->Get(ks, "big", &r).ok());
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.value.size(), big.size());
  EXPECT_EQ(r.value, big);
}

// A bulk transaction (a COPY) is larger than one message can carry: the client splits each
// node's PREPARE and GET into bounded messages, all under one timestamp.
TEST_P(PathTest, BulkTransactionsSpanManyMessages) {
  auto c = OpenParam();
  const KeyspaceId ks = Ks();
  auto t = c->Begin();
  const int n = 40000;
  for (int i = 0; i < n; i++)
    ASSERT_TRUE(t->Put(ks, "row" + std::to_string(i), std::to_string(i * 7)).ok());
  const std::string mb(1 << 20, 'm');
  // 40 MiB over three nodes: more than one PREPARE message per node (8 MiB each).
  for (int i = 0; i < 40; i++) ASSERT_TRUE(t->Put(ks, "blob" + std::to_string(i), mb).ok());
  Timestamp ts;
  Status st = t->Commit(&ts);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> keys;
  for (int i = 0; i < n; i++) keys.push_back("row" + std::to_string(i));
  std::vector<ReadItem> items;
  for (const auto& k : keys) items.push_back(ReadItem{ks, k, {}});
  std::vector<ReadResult> out;
  st = c->Begin()->GetAll(items, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int i = 0; i < n; i++) {
    ASSERT_TRUE(out[i].found) << keys[i];
    ASSERT_EQ(out[i].value, std::to_string(i * 7));
    ASSERT_EQ(out[i].ts, ts);
  }
  ReadResult r;
  ASSERT_TRUE(c->Begin()->Get(ks, "blob39", &r).ok());
  EXPECT_EQ(r.value.size(), mb.size());
}

TEST_P(PathTest, OversizedKeyIsRefusedClearly) {
  auto c = OpenParam();
  auto t = c->Begin();
  Status st = t->Put(Ks(), std::string(c->options().max_key_bytes + 1, 'k'), "v");
  EXPECT_TRUE(st.Is(Status::Code::kTooLarge)) << st.ToString();
  EXPECT_NE(st.message().find("limit"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(
    Paths, PathTest,
    ::testing::Values(PathCase{Provider::kTcp, ReadPath::kRpc, WritePath::kRpc, "rpc"},
                      PathCase{Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus, "getplus"},
                      PathCase{Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus, "getstar"},
                      PathCase{Provider::kTcp, ReadPath::kGetStar, WritePath::kRpc,
                               "getstar_over_tcp"}),
    [](const ::testing::TestParamInfo<PathCase>& i) { return std::string(i.param.name); });

// A key deleted longer ago than the GC grace is forgotten by its server; a version written
// by the same transaction on another server still names it in its metadata. A read of both
// must see the key as deleted (not retry round 2 until it gives up).
TEST(ForgottenKeyTest, ReadOfAForgottenKeyAndItsLiveSibling) {
  TestClusterOptions o;
  o.nodes = 2;
  o.extra_args = {"--gc-grace-ms", "100"};
  std::unique_ptr<TestCluster> cluster;
  Status st = TestCluster::Start(o, &cluster);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::unique_ptr<Client> c;
  ASSERT_TRUE(
      Client::Open(
          cluster->ClientOptionsFor(Provider::kTcp, ReadPath::kGetPlus, WritePath::kPutPlus), &c)
          .ok());
  const std::string gone = KeyOnNode(kKs, 0, 2, 1);
  const std::string kept = KeyOnNode(kKs, 1, 2, 2);
  {
    auto t = c->Begin();
    ASSERT_TRUE(t->Put(kKs, gone, "old").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  {
    auto t = c->Begin();  // deletes one key and writes the other: siblings
    ASSERT_TRUE(t->Delete(kKs, gone).ok());
    ASSERT_TRUE(t->Put(kKs, kept, "new").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  // Past the grace and at least one GC pass (every second): the tombstone is forgotten.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const ReadItem items[] = {{kKs, gone, {}}, {kKs, kept, {}}};
  std::vector<ReadResult> out;
  st = c->Begin()->GetAll(items, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(out[0].found);
  EXPECT_TRUE(out[1].found);
  EXPECT_EQ(out[1].value, "new");
}

// A commit learns where its writes now live (COMMIT_ADDRESSES): the writer's next read of
// them is one-sided, with no request that learns the address first.
TEST_F(ClusterTest, CommitTeachesTheAddressesOfItsWrites) {
  auto commit_options =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  commit_options.learn_commit_addresses = true;
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(commit_options, &c).ok());
  const KeyspaceId ks = KeyHash("commit-addresses");
  std::vector<std::string> keys;
  auto t = c->Begin();
  for (int i = 0; i < 50; i++) {
    keys.push_back("k" + std::to_string(i));
    ASSERT_TRUE(t->Put(ks, keys.back(), "v" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(t->Commit().ok());
  std::vector<ReadItem> items;
  for (const auto& k : keys) items.push_back(ReadItem{ks, k, {}});
  std::vector<ReadResult> out;
  ASSERT_TRUE(c->Begin()->GetAll(items, &out).ok());
  for (int i = 0; i < 50; i++) EXPECT_EQ(out[i].value, "v" + std::to_string(i));
  EXPECT_EQ(c->stats().one_sided_hits, 50u) << "fallbacks " << c->stats().one_sided_fallbacks;
  // An overwrite: the old addresses lose their valid bit, the commit brings the new ones.
  auto u = c->Begin();
  for (int i = 0; i < 50; i++) ASSERT_TRUE(u->Put(ks, keys[i], "w" + std::to_string(i)).ok());
  ASSERT_TRUE(u->Commit().ok());
  ASSERT_TRUE(c->Begin()->GetAll(items, &out).ok());
  for (int i = 0; i < 50; i++) EXPECT_EQ(out[i].value, "w" + std::to_string(i));
  EXPECT_EQ(c->stats().one_sided_hits, 100u);
  EXPECT_EQ(c->stats().one_sided_fallbacks, 0u);
}

// Clients that share an address cache (the backends of one PostgreSQL server): what one
// learnt, the other reads one-sided; a stale shared address is refused by the reader's
// checks (the value read is always the current one).
TEST_F(ClusterTest, ClientsSharingAnAddressCache) {
  std::vector<char> memory(SharedAddressCacheBytes(4096) + 64);
  void* aligned =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  std::shared_ptr<AddressCache> shared =
      AttachSharedAddressCache(aligned, SharedAddressCacheBytes(4096), true);
  ASSERT_NE(shared, nullptr);
  auto options =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  options.address_cache = shared;
  std::unique_ptr<Client> a, b;
  ASSERT_TRUE(Client::Open(options, &a).ok());
  ASSERT_TRUE(Client::Open(options, &b).ok());
  // A third client with a cache of its own writes behind their backs.
  auto other = Open(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  const KeyspaceId ks = KeyHash("shared-addresses");
  std::vector<ReadItem> items;
  std::vector<std::string> keys;
  for (int i = 0; i < 40; i++) keys.push_back("s" + std::to_string(i));
  for (const auto& k : keys) items.push_back(ReadItem{ks, k, {}});
  auto t = other->Begin();
  for (int i = 0; i < 40; i++) ASSERT_TRUE(t->Put(ks, keys[i], "x" + std::to_string(i)).ok());
  ASSERT_TRUE(t->Commit().ok());
  std::vector<ReadResult> out;
  ASSERT_TRUE(a->Begin()->GetAll(items, &out).ok());
  EXPECT_EQ(a->stats().one_sided_hits, 0u) << "nothing was cached yet";
  ASSERT_TRUE(b->Begin()->GetAll(items, &out).ok());
  EXPECT_EQ(b->stats().one_sided_hits, 40u) << "b did not use the addresses a learnt";
  for (int i = 0; i < 40; i++) EXPECT_EQ(out[i].value, "x" + std::to_string(i));
  // Overwritten by the outsider: the shared addresses are stale now.
  auto u = other->Begin();
  for (int i = 0; i < 40; i++) ASSERT_TRUE(u->Put(ks, keys[i], "y" + std::to_string(i)).ok());
  ASSERT_TRUE(u->Commit().ok());
  ASSERT_TRUE(b->Begin()->GetAll(items, &out).ok());
  for (int i = 0; i < 40; i++) EXPECT_EQ(out[i].value, "y" + std::to_string(i));
  EXPECT_EQ(b->stats().one_sided_fallbacks, 40u);
  const uint64_t a_hits = a->stats().one_sided_hits;
  ASSERT_TRUE(a->Begin()->GetAll(items, &out).ok());
  for (int i = 0; i < 40; i++) EXPECT_EQ(out[i].value, "y" + std::to_string(i));
  EXPECT_EQ(a->stats().one_sided_hits, a_hits + 40) << "a did not use the addresses b relearnt";
  const AddressCacheStats st = shared->Stats();
  EXPECT_TRUE(st.shared);
  EXPECT_EQ(st.hits, 80u);
  EXPECT_EQ(st.fallbacks, 40u);
}

// A bulk commit (more writes than one COMMIT_ADDRESSES reply may carry) asks each partition
// separately: with a shared cache large enough, every key it wrote is read one-sided next.
std::string BulkKey(int i) {
  return "bulk-commit-address-key-" + std::to_string(1000000 + i);  // 31 bytes
}

TEST_F(ClusterTest, BulkCommitTeachesItsAddressesPartitionByPartition) {
  constexpr int kKeys = 300000;  // 100 000 a server: more than one reply's 4 MiB of addresses
  std::vector<char> memory(SharedAddressCacheBytes(1 << 20) + 64);
  void* aligned =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  auto options =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  options.address_cache = AttachSharedAddressCache(aligned, SharedAddressCacheBytes(1 << 20), true);
  ASSERT_NE(options.address_cache, nullptr);
  options.learn_commit_addresses = true;
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(options, &c).ok());
  const KeyspaceId ks = KeyHash("bulk-commit-addresses");
  auto t = c->Begin();
  for (int i = 0; i < kKeys; i++) ASSERT_TRUE(t->Put(ks, BulkKey(i), "v").ok());
  ASSERT_TRUE(t->Commit().ok());
  EXPECT_GE(c->address_cache_stats().stores, static_cast<uint64_t>(kKeys));
  for (int i = 0; i < kKeys; i += 997) {
    ReadResult r;
    ASSERT_TRUE(c->Begin()->Get(ks, BulkKey(i), &r).ok());
    EXPECT_EQ(r.value, "v");
  }
  // A 4-way set can overflow (a few keys in a thousand); one reply per server would have
  // brought back about two thirds of the addresses.
  const uint64_t reads = (kKeys + 996) / 997;
  EXPECT_GE(c->stats().one_sided_hits, reads * 97 / 100) << "of " << reads << " reads";
}

// A counter (like the table AM's row-id sequence) bumped by several clients that share one
// address cache, with commit addresses on: most reads are one-sided, which bring no server
// clock. Every value must be handed out once. Before conditional writes had to be above the
// version they replace, a client whose clock was behind the last writer's committed "late"
// (a version never current, the counter unchanged) and handed out the same value again:
// about 1 run in 5 (the row-id ranges pgbench_invariants saw handed out twice).
TEST_F(ClusterTest, SharedCacheCounterAllocationsAreUnique) {
  std::vector<char> memory(SharedAddressCacheBytes(4096) + 64);
  void* aligned =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  auto options =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  options.address_cache = AttachSharedAddressCache(aligned, SharedAddressCacheBytes(4096), true);
  ASSERT_NE(options.address_cache, nullptr);
  options.learn_commit_addresses = true;
  const KeyspaceId ks = KeyHash("shared-counter");
  const std::string key("\0rowid-seq", 10);
  constexpr int kThreads = 4;
  constexpr int kAllocations = 400;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Client> c;
      Status st = Client::Open(options, &c);
      if (!st.ok()) {
        errors[t] = st.ToString();
        return;
      }
      while (static_cast<int>(got[t].size()) < kAllocations) {
        auto txn = c->Begin();
        ReadResult r;
        st = txn->Get(ks, key, &r);
        if (!st.ok()) {
          errors[t] = st.ToString();
          return;
        }
        uint64_t next = r.found ? std::stoull(r.value) : 0;
        st = txn->Put(ks, key, std::to_string(next + 1), &r.ts);
        if (!st.ok()) {
          errors[t] = st.ToString();
          return;
        }
        st = txn->Commit();
        if (st.Is(Status::Code::kConflict)) continue;
        if (!st.ok()) {
          errors[t] = st.ToString();
          return;
        }
        got[t].push_back(next);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::map<uint64_t, int> seen;
  for (int t = 0; t < kThreads; t++) {
    EXPECT_EQ(errors[t], "");
    for (uint64_t v : got[t]) {
      auto [it, fresh] = seen.emplace(v, t);
      EXPECT_TRUE(fresh) << "value " << v << " handed out to thread " << it->second << " and " << t;
    }
  }
  EXPECT_EQ(seen.size(), size_t{kThreads * kAllocations});
}

TEST_F(ClusterTest, StrictTwoPhaseLockingBaseline) {
  ClientOptions o = cluster_->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  o.protocol = Protocol::kS2pl;
  std::unique_ptr<Client> a, b;
  ASSERT_TRUE(Client::Open(o, &a).ok());
  ASSERT_TRUE(Client::Open(o, &b).ok());
  {
    auto t = a->Begin();
    ASSERT_TRUE(t->Put(kKs, "s2pl", "one").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  auto ta = a->Begin();
  ReadResult r;
  ASSERT_TRUE(ta->Get(kKs, "s2pl", &r).ok());  // shared lock held until commit
  EXPECT_EQ(r.value, "one");
  {
    auto tb = b->Begin();
    ASSERT_TRUE(tb->Put(kKs, "s2pl", "two").ok());
    Status st = tb->Commit();
    EXPECT_TRUE(st.Is(Status::Code::kConflict)) << st.ToString();
  }
  ASSERT_TRUE(ta->Commit().ok());  // releases the lock
  auto tb = b->Begin();
  ASSERT_TRUE(tb->Put(kKs, "s2pl", "two").ok());
  ASSERT_TRUE(tb->Commit().ok());
  ASSERT_TRUE(a->Begin()->Get(kKs, "s2pl", &r).ok());
  EXPECT_EQ(r.value, "two");
}

// A scan's watermark can be above a server's clock: a migration carries it from a server
// whose clock is ahead, or (here) a SCAN_OPEN's snapshot is ahead of the clock its request
// carries. A strict-2PL write there is committed above the watermark, not at the server's
// clock below it, where it would appear in the pages of the scan at that snapshot late.
TEST(WatermarkTest, StrictTwoPhaseLockingWritesAboveTheScanWatermark) {
  TestClusterOptions co;
  co.nodes = 1;
  std::unique_ptr<TestCluster> cluster;
  ASSERT_TRUE(TestCluster::Start(co, &cluster).ok());
  const KeyspaceId ks = KeyHash(std::string("s2pl-watermark"));
  std::unique_ptr<Client> scanner, locker;
  ASSERT_TRUE(
      Client::Open(cluster->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc),
                   &scanner)
          .ok());
  ClientOptions o = cluster->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  o.protocol = Protocol::kS2pl;
  ASSERT_TRUE(Client::Open(o, &locker).ok());
  {
    auto t = locker->Begin();
    ASSERT_TRUE(t->Put(ks, "before", "v").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  // A minute ahead of every clock here.
  const Timestamp snapshot{HybridClock::PhysicalNow() + (uint64_t{60000} << 16), 0};
  Client::Impl& c = *scanner->impl();
  protocol::ScanOpenRequest open;
  open.snapshot = snapshot;
  for (uint32_t b = 0; b < kDefaultBuckets; b++) open.partitions.push_back(PartitionId{ks, b});
  std::string body;
  protocol::Encode(open, &body);
  PendingCall reply;
  Status st = c.CallAndWait(0, ChannelKind::kRpc, protocol::Op::kScanOpen,
                            static_cast<uint32_t>(open.partitions.size()), body, &reply);
  ASSERT_TRUE(st.ok()) << st.ToString();
  {
    auto t = locker->Begin();
    ASSERT_TRUE(t->Put(ks, "after", "v").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  ScanOptions so;
  so.snapshot = snapshot;
  std::unique_ptr<Scanner> scan;
  ASSERT_TRUE(scanner->OpenScan(ks, so, &scan).ok());
  std::vector<std::string> keys;
  for (;;) {
    ScanRow row;
    bool done = false;
    ASSERT_TRUE(scan->Next(&row, &done).ok());
    if (done) break;
    keys.emplace_back(row.key);
    EXPECT_LE(row.ts, snapshot);
  }
  EXPECT_EQ(keys, std::vector<std::string>{"before"})
      << "a write made after the scan opened is in its snapshot";
}

// Values larger than a page (8-64 KiB) are records that span a run of pages; only the first
// page of a run has a page header, the others are the record's bytes. A page scan returns
// them (read by key) and never parses a continuation page as a page, even when the value
// holds, where that page starts, the bytes of a page header and of a valid record: that
// would hand out a row nobody wrote. Point reads and scans agree, across a restart.
TEST(WideRowTest, ValuesLargerThanAPageScanAndReadBackAndForgeNoRow) {
  TestClusterOptions co;
  co.nodes = 2;
  co.data = true;
  std::unique_ptr<TestCluster> cluster;
  ASSERT_TRUE(TestCluster::Start(co, &cluster).ok());
  const KeyspaceId ks = KeyHash(std::string("wide-rows"));
  const std::string forger = "forger";
  const uint32_t bucket = BucketOf(forger, kDefaultBuckets);
  // The forger's record is the first of its partition: a run from page 0, whose page 1
  // starts at this offset of its value (page header, record header, key before it).
  const size_t page1_at =
      record::kPageBytes - record::kPageHeaderBytes - record::kRecordHeaderBytes - forger.size();
  std::string forged_value(20 << 10, 'f');
  {
    std::string fake_record(record::RecordBytes(6, 4, 0), '\0');
    record::RecordFields f;
    f.keyspace = ks;
    f.bucket = bucket;
    f.epoch = 1;
    f.ts = Timestamp{1, 1};
    f.key = "forged";
    f.value = "evil";
    record::EncodeRecord(f, reinterpret_cast<uint8_t*>(fake_record.data()));
    fake_record[record::kStateOffset] = static_cast<char>(record::kStateValid);
    record::PageHeader h;
    h.keyspace = ks;
    h.bucket = bucket;
    h.page_no = 1;
    h.used = static_cast<uint32_t>(record::kPageHeaderBytes + fake_record.size());
    uint8_t header[record::kPageHeaderBytes];
    record::WritePageHeader(h, header);
    forged_value.replace(page1_at, sizeof(header), reinterpret_cast<char*>(header), sizeof(header));
    forged_value.replace(page1_at + sizeof(header), fake_record.size(), fake_record);
  }
  std::map<std::string, std::string> want{{forger, forged_value}};
  for (size_t kib : {8, 9, 16, 33, 64}) {
    std::string v(kib << 10, '\0');
    for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<char>('a' + (i * 7 + kib) % 26);
    want["wide" + std::to_string(kib)] = v;
  }
  for (int i = 0; i < 20; i++) want["small" + std::to_string(i)] = "s" + std::to_string(i);
  auto check = [&](const char* when) {
    std::unique_ptr<Client> c;
    ASSERT_TRUE(
        Client::Open(
            cluster->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus), &c)
            .ok());
    std::map<std::string, std::string> got;
    std::unique_ptr<Scanner> scan;
    Status st = c->OpenScan(ks, ScanOptions(), &scan);
    ASSERT_TRUE(st.ok()) << when << ": " << st.ToString();
    for (;;) {
      ScanRow row;
      bool done = false;
      st = scan->Next(&row, &done);
      ASSERT_TRUE(st.ok()) << when << ": " << st.ToString();
      if (done) break;
      EXPECT_TRUE(got.emplace(row.key, row.value).second) << when << ": " << row.key << " twice";
    }
    EXPECT_EQ(got.count("forged"), 0u) << when << ": a row read out of a value's bytes";
    EXPECT_EQ(got.size(), want.size()) << when;
    for (const auto& [k, v] : want) {
      EXPECT_TRUE(got.count(k) && got[k] == v) << when << ": scan of " << k;
      ReadResult r;
      ASSERT_TRUE(c->Begin()->Get(ks, k, &r).ok());
      EXPECT_TRUE(r.found && r.value == v) << when << ": read of " << k;
    }
  };
  {
    std::unique_ptr<Client> c;
    ASSERT_TRUE(
        Client::Open(cluster->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc), &c)
            .ok());
    auto t = c->Begin();
    ASSERT_TRUE(t->Put(ks, forger, forged_value).ok());
    ASSERT_TRUE(t->Commit().ok());
    for (const auto& [k, v] : want) {
      if (k == forger) continue;
      auto u = c->Begin();
      ASSERT_TRUE(u->Put(ks, k, v).ok());
      ASSERT_TRUE(u->Commit().ok());
    }
  }
  ASSERT_NO_FATAL_FAILURE(check("written"));
  for (int n = 0; n < 2; n++) {
    ASSERT_TRUE(cluster->Kill(n, SIGTERM).ok());  // a clean stop: no transaction left in doubt
    ASSERT_TRUE(cluster->Restart(n).ok());
  }
  ASSERT_NO_FATAL_FAILURE(check("after a restart"));
  // The forger's partition moves to the other server (its records copied into that log).
  {
    std::unique_ptr<Client> c;
    ASSERT_TRUE(
        Client::Open(cluster->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc), &c)
            .ok());
    const PartitionId p{ks, bucket};
    std::vector<PartitionStatus> parts;
    ASSERT_TRUE(c->Partitions(&parts).ok());
    uint32_t owner = 0;
    for (const PartitionStatus& ps : parts) {
      if (ps.id == p) owner = ps.owner;
    }
    Status st = c->MigratePartition(p, 1 - owner);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ASSERT_NO_FATAL_FAILURE(check("after a migration"));
}

// A transaction over the client's batch limit is refused at Commit with a clear error that
// counts its writes, and nothing of it is written.
TEST_F(ClusterTest, TransactionOverTheBatchLimitIsRefusedAndWritesNothing) {
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus);
  o.max_batch_items = 10;
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(o, &c).ok());
  const KeyspaceId ks = KeyHash(std::string("batch-limit"));
  auto t = c->Begin();
  for (int i = 0; i < 11; i++) ASSERT_TRUE(t->Put(ks, "k" + std::to_string(i), "v").ok());
  Status st = t->Commit();
  EXPECT_TRUE(st.Is(Status::Code::kTooLarge)) << st.ToString();
  EXPECT_NE(st.message().find("transaction of 11 writes exceeds the batch limit of 10"),
            std::string::npos)
      << st.ToString();
  ReadResult r;
  ASSERT_TRUE(c->Begin()->Get(ks, "k0", &r).ok());
  EXPECT_FALSE(r.found);
}

TEST_F(ClusterTest, StatusAndPartitions) {
  auto c = Open(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  auto t = c->Begin();
  for (int i = 0; i < 64; i++) ASSERT_TRUE(t->Put(kKs + 1, "s" + std::to_string(i), "v").ok());
  ASSERT_TRUE(t->Commit().ok());
  std::vector<ServerStatus> servers;
  ASSERT_TRUE(c->ClusterStatus(&servers).ok());
  ASSERT_EQ(servers.size(), 3u);
  for (const auto& s : servers) {
    EXPECT_TRUE(s.reachable) << s.error;
    EXPECT_GT(s.ops, 0u);
  }
  std::vector<PartitionStatus> parts;
  ASSERT_TRUE(c->Partitions(&parts).ok());
  uint64_t keys = 0;
  for (const auto& p : parts) {
    if (p.id.keyspace != kKs + 1) continue;
    EXPECT_EQ(p.owner, p.home);  // static placement
    keys += p.keys;
  }
  EXPECT_EQ(keys, 64u);
}

TEST_F(ClusterTest, WrongTokenIsRefused) {
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.token = "not-the-token";
  std::unique_ptr<Client> c;
  Status st = Client::Open(o, &c);
  EXPECT_TRUE(st.Is(Status::Code::kPermissionDenied)) << st.ToString();
}

// A raw connection speaking the protocol directly, for the bad-input and crash cases.
class RawPeer {
 public:
  Status Connect(const transport::Endpoint& ep, const std::string& token) {
    transport::TransportOptions t;
    t.token = token;
    t.responder_thread = false;
    return transport::Connect(ep, t, transport::Memory::Create(), &conn_);
  }
  Status Send(protocol::Op op, uint32_t count, const std::string& body, uint64_t id) {
    protocol::Header h;
    h.op = static_cast<uint16_t>(op);
    h.count = count;
    h.request_id = id;
    std::string msg;
    protocol::EncodeHeader(h, &msg);
    msg += body;
    return conn_->Send(msg.data(), msg.size());
  }
  // Waits for the next message; false if the connection closed first.
  bool Receive(std::string* out) {
    for (int i = 0; i < 5000; i++) {
      transport::MessageView m;
      if (conn_->Receive(&m)) {
        out->assign(reinterpret_cast<const char*>(m.data), m.size);
        conn_->Release();
        return true;
      }
      if (conn_->closed()) return false;
      conn_->Wait(1);
    }
    return false;
  }
  Status Hello() {
    protocol::Hello h;
    h.client_id = 0xBADC0DE;
    std::string body;
    protocol::Encode(h, &body);
    RAMP_RETURN_IF_ERROR(Send(protocol::Op::kHello, 0, body, 1));
    std::string reply;
    if (!Receive(&reply)) return Status::Unavailable("no HELLO reply");
    return Status::OK();
  }
  transport::Connection* conn() { return conn_.get(); }

 private:
  std::unique_ptr<transport::Connection> conn_;
};

TEST_F(ClusterTest, UnknownOpcodeClosesThatConnectionOnly) {
  RawPeer raw;
  ASSERT_TRUE(raw.Connect(cluster_->tcp(0), cluster_->token()).ok());
  ASSERT_TRUE(raw.Hello().ok());
  protocol::Header h;
  h.op = 999;
  std::string msg;
  protocol::EncodeHeader(h, &msg);
  ASSERT_TRUE(raw.conn()->Send(msg.data(), msg.size()).ok());
  std::string reply;
  EXPECT_FALSE(raw.Receive(&reply)) << "the server must close a connection sending opcode 999";
  // Everyone else is still served.
  auto c = Open(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  auto t = c->Begin();
  ASSERT_TRUE(t->Put(kKs, KeyOnNode(kKs, 0, 3), "still-served").ok());
  EXPECT_TRUE(t->Commit().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(cluster_->ReadLog(0).find("unknown opcode 999"), std::string::npos);
}

TEST_F(ClusterTest, MalformedBodyClosesThatConnectionWithReason) {
  RawPeer raw;
  ASSERT_TRUE(raw.Connect(cluster_->shm(1), cluster_->token()).ok());
  ASSERT_TRUE(raw.Hello().ok());
  // A GET claiming 1000 items in 3 bytes.
  ASSERT_TRUE(raw.Send(protocol::Op::kGet, 1000, std::string("\0\1\2", 3), 2).ok());
  std::string reply;
  EXPECT_FALSE(raw.Receive(&reply));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(cluster_->ReadLog(1).find("malformed GET"), std::string::npos) << cluster_->ReadLog(1);
}

// A client that dies between PREPARE and COMMIT: its transaction is committed at one
// partition only. A reader that sees the committed half must also see the other half
// (round 2 fetches the prepared version by timestamp); nothing is half visible.
TEST_F(ClusterTest, ClientVanishingBetweenPrepareAndCommitLeavesNothingHalfVisible) {
  const std::string ka = KeyOnNode(kKs + 2, 0, 3), kb = KeyOnNode(kKs + 2, 1, 3);
  const PartitionId pa{kKs + 2, BucketOf(ka, kDefaultBuckets)};
  const PartitionId pb{kKs + 2, BucketOf(kb, kDefaultBuckets)};
  {
    auto c = Open(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
    auto t = c->Begin();
    ASSERT_TRUE(t->Put(kKs + 2, ka, "old").ok());
    ASSERT_TRUE(t->Put(kKs + 2, kb, "old").ok());
    ASSERT_TRUE(t->Commit().ok());
  }
  const Timestamp ts{HybridClock::PhysicalNow() + (1 << 20), 0xDEAD};
  auto prepare = [&](RawPeer& p, const std::string& key, const PartitionId& part,
                     const std::string& other, const PartitionId& other_part) {
    record::Metadata md;
    md.mode = record::Metadata::Mode::kKeys;
    md.keys.push_back(record::Sibling{kKs + 2, other_part.bucket, other});
    std::string meta;
    record::EncodeMetadata(md, &meta);
    protocol::PrepareRequest req;
    req.ts = ts;
    req.items.push_back(protocol::PrepareItem{part, key, "new", 0, {}, meta});
    std::string body;
    protocol::Encode(req, &body);
    ASSERT_TRUE(p.Send(protocol::Op::kPrepare, 1, body, 10).ok());
    std::string reply;
    ASSERT_TRUE(p.Receive(&reply));
    protocol::Header h;
    ASSERT_TRUE(protocol::DecodeHeader(reply, &h).ok());
    ASSERT_EQ(h.status, 0);
  };
  RawPeer a, b;
  ASSERT_TRUE(a.Connect(cluster_->tcp(0), cluster_->token()).ok());
  ASSERT_TRUE(b.Connect(cluster_->tcp(1), cluster_->token()).ok());
  ASSERT_TRUE(a.Hello().ok());
  ASSERT_TRUE(b.Hello().ok());
  prepare(a, ka, pa, kb, pb);
  prepare(b, kb, pb, ka, pa);
  protocol::Decision d{ts, {pa}};
  std::string body;
  protocol::Encode(d, &body);
  ASSERT_TRUE(a.Send(protocol::Op::kCommit, 1, body, 11).ok());
  std::string reply;
  ASSERT_TRUE(a.Receive(&reply));
  a.conn()->Close();  // the client vanishes: node 1 never hears COMMIT
  b.conn()->Close();

  for (auto path : {ReadPath::kGetStar, ReadPath::kGetPlus}) {
    auto reader = Open(Provider::kShm, path, WritePath::kPutPlus);
    std::vector<ReadItem> items{{kKs + 2, ka, {}}, {kKs + 2, kb, {}}};
    std::vector<ReadResult> out;
    ASSERT_TRUE(reader->Begin()->GetAll(items, &out).ok());
    EXPECT_EQ(out[0].value, "new");
    EXPECT_EQ(out[1].value, out[0].value) << "fractured: saw half of a transaction";
    EXPECT_GT(reader->stats().round2_reads, 0u);
  }
}

TEST_F(ClusterTest, KilledServerGivesClearErrorNotHang) {
  TestClusterOptions o;
  o.nodes = 2;
  std::unique_ptr<TestCluster> small;
  ASSERT_TRUE(TestCluster::Start(o, &small).ok());
  ClientOptions co = small->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  co.timeout_ms = 2000;
  co.connect_timeout_ms = 1000;
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(co, &c).ok());
  const std::string k1 = KeyOnNode(kKs, 1, 2);
  auto t = c->Begin();
  ASSERT_TRUE(t->Put(kKs, k1, "v").ok());
  ASSERT_TRUE(t->Commit().ok());
  ASSERT_TRUE(small->Kill(1, SIGKILL).ok());
  ReadResult r;
  Status st = c->Begin()->Get(kKs, k1, &r);
  EXPECT_TRUE(st.Is(Status::Code::kUnavailable) || st.Is(Status::Code::kTimeout)) << st.ToString();
  EXPECT_NE(st.message().find("node 1"), std::string::npos) << st.message();
  // Node 0 still serves.
  const std::string k0 = KeyOnNode(kKs, 0, 2);
  auto t2 = c->Begin();
  ASSERT_TRUE(t2->Put(kKs, k0, "v0").ok());
  EXPECT_TRUE(t2->Commit().ok());
}

}  // namespace
}  // namespace ramp::testing
