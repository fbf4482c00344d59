// Live migration of partitions (DESIGN §7) on real rampd servers: a move keeps every
// version and serves reads and writes throughout; bad requests are refused with the reason;
// the read-atomicity checker sees no fractured read on any read path while partitions move
// continuously between three servers; a GET* client holding an address from before a move
// never takes the old copy's (or reused) memory for data; and SIGKILL of the home, the
// source or the target at each step of a move leaves exactly one owner and every
// acknowledged write after restart.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "checker/atomicity_checker.h"
#include "client/client_impl.h"
#include "itest_util.h"
#include "ramp/keys.h"
#include "ramp/rebalance.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

Status Put(Client* c, KeyspaceId ks, const std::string& key, const std::string& value) {
  auto t = c->Begin();
  t->Put(ks, key, value);
  return t->Commit();
}

Status Get(Client* c, KeyspaceId ks, const std::string& key, std::string* value, bool* found) {
  auto t = c->Begin();
  ReadResult r;
  RAMP_RETURN_IF_ERROR(t->Get(ks, key, &r));
  *found = r.found;
  *value = r.value;
  return Status::OK();
}

std::unique_ptr<Client> Open(const TestCluster& tc, Provider p, ReadPath r, WritePath w,
                             bool trust = false, bool deaf = false) {
  ClientOptions o = tc.ClientOptionsFor(p, r, w);
  o.debug_trust_one_sided = trust;
  o.debug_ignore_placement_pushes = deaf;
  std::unique_ptr<Client> c;
  Status st = Client::Open(o, &c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

// A pushed placement is taken when the client next polls its connections (Client::Begin
// does, once per coarse clock tick): polls until c holds epoch for p, or the time is up.
void AwaitPush(Client* c, const PartitionId& p, uint64_t epoch, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (c->impl()->EpochOf(p) != epoch && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    (void)c->Begin();
  }
}

// The owners the servers claim for a partition (each server lists what it serves).
std::vector<uint32_t> Owners(Client* c, const PartitionId& p, uint64_t* epoch = nullptr) {
  std::vector<PartitionStatus> parts;
  Status st = c->Partitions(&parts);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<uint32_t> out;
  for (const auto& s : parts) {
    if (s.id != p) continue;
    out.push_back(s.owner);
    if (epoch) *epoch = s.epoch;
  }
  return out;
}

// A move that may roll back on its own and is then tried again, a few times: with the crash
// test's short transaction timeout a peer answers a step within half of it (a second) or the
// home rolls the move back, which a loaded machine's stall can cause. A rollback is not a
// partition stuck; a move that never completes still fails.
Status MoveRetryingRollbacks(Client* c, const PartitionId& p, uint32_t to) {
  Status st;
  for (int attempt = 0; attempt < 5; attempt++) {
    st = c->MigratePartition(p, to);
    if (!st.Is(Status::Code::kAborted)) return st;
    std::printf("move of %s to node %u rolled back, trying again: %s\n", p.ToString().c_str(), to,
                st.ToString().c_str());
  }
  return st;
}

// Whether the owner's intent request is queued at node (WAITS_FOR names whom it waits for).
bool QueuedAt(Client* c, uint32_t node, const protocol::IntentOwner& o) {
  protocol::WaitsForRequest req{{o}};
  std::string body;
  protocol::Encode(req, &body);
  PendingCall reply;
  if (!c->impl()
           ->CallAndWait(node, c->impl()->WriteChannel(), protocol::Op::kWaitsFor, 1, body, &reply)
           .ok()) {
    return false;
  }
  protocol::WaitsForReply r;
  return protocol::Decode(reply.body(), reply.header.count, &r).ok() && r.edges.size() == 1 &&
         !r.edges[0].empty();
}

// Polls QueuedAt for up to a minute.
bool AwaitQueued(Client* c, uint32_t node, const protocol::IntentOwner& o) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!QueuedAt(c, node, o)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

IntentRequest IntentOn(Client* c, KeyspaceId ks, const std::string& key, uint64_t priority) {
  IntentRequest r;
  r.owner = c->NewIntentOwner();
  r.priority = priority;
  r.keyspace = ks;
  r.key = key;
  return r;
}

class MigrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestClusterOptions o;
    o.nodes = 3;
    o.extra_args = {"--gc-grace-ms", "300"};
    Status st = TestCluster::Start(o, &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }
  static std::unique_ptr<TestCluster> cluster_;
};
std::unique_ptr<TestCluster> MigrationTest::cluster_;

TEST_F(MigrationTest, MovesAPartitionWithEveryVersionAndServesItFromTheTarget) {
  const KeyspaceId ks = 0x4D01;
  auto c = Open(*cluster_, Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 300; i++) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_TRUE(Put(c.get(), ks, k, "v1-" + k).ok());
    want[k] = "v1-" + k;
  }
  // Overwrites and deletes: old versions and tombstones move too.
  for (int i = 0; i < 300; i += 3) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_TRUE(Put(c.get(), ks, k, "v2-" + k).ok());
    want[k] = "v2-" + k;
  }
  for (int i = 1; i < 300; i += 7) {
    const std::string k = "k" + std::to_string(i);
    auto t = c->Begin();
    t->Delete(ks, k);
    ASSERT_TRUE(t->Commit().ok());
    want.erase(k);
  }
  const std::string k0 = KeyOnNode(ks, 0, 3);
  ASSERT_TRUE(Put(c.get(), ks, k0, "on-node-0").ok());
  want[k0] = "on-node-0";
  const PartitionId p{ks, BucketOf(k0, kDefaultBuckets)};
  ASSERT_EQ(Owners(c.get(), p), std::vector<uint32_t>{0});

  std::vector<std::string> phases;
  Status st =
      c->MigratePartition(p, 2, true, [&](const MigrationStatus& m) { phases.push_back(m.phase); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  uint64_t epoch = 0;
  EXPECT_EQ(Owners(c.get(), p, &epoch), std::vector<uint32_t>{2});
  EXPECT_EQ(epoch, 2u);
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases.back(), "done");

  // Every read path, from clients that cached the old placement and from fresh ones.
  for (auto [prov, read, write] :
       {std::tuple{Provider::kTcp, ReadPath::kRpc, WritePath::kRpc},
        std::tuple{Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus},
        std::tuple{Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus}}) {
    auto r = Open(*cluster_, prov, read, write);
    for (Client* client : {c.get(), r.get()}) {
      for (int i = 0; i < 300; i++) {
        const std::string k = "k" + std::to_string(i);
        std::string v;
        bool found = false;
        ASSERT_TRUE(Get(client, ks, k, &v, &found).ok());
        ASSERT_EQ(found, want.count(k) == 1) << k;
        if (found) {
          ASSERT_EQ(v, want[k]) << k;
        }
      }
    }
  }
  // Writes go to the new owner; and the partition moves back.
  ASSERT_TRUE(Put(c.get(), ks, k0, "after-move").ok());
  ASSERT_TRUE(c->MigratePartition(p, 0).ok());
  EXPECT_EQ(Owners(c.get(), p, &epoch), std::vector<uint32_t>{0});
  EXPECT_EQ(epoch, 3u);
  std::string v;
  bool found = false;
  ASSERT_TRUE(Get(c.get(), ks, k0, &v, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(v, "after-move");
  std::vector<MigrationStatus> moves;
  ASSERT_TRUE(c->Migrations(&moves).ok());
  int done = 0;
  for (const auto& m : moves) done += m.id == p && m.phase == "done";
  EXPECT_EQ(done, 2);
}

TEST_F(MigrationTest, RefusesBadRequestsWithTheReason) {
  const KeyspaceId ks = 0x4D02;
  auto c = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  const std::string k = KeyOnNode(ks, 1, 3);
  ASSERT_TRUE(Put(c.get(), ks, k, "x").ok());
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  Status st = c->MigratePartition(p, 7);
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  EXPECT_NE(st.message().find("unknown node 7"), std::string::npos) << st.ToString();
  st = c->MigratePartition(p, 1);
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  EXPECT_NE(st.message().find("already on node 1"), std::string::npos) << st.ToString();
  const PartitionId nowhere{0x4D0FF, 3};
  st = c->MigratePartition(nowhere, (HomeOf(nowhere, 3) + 1) % 3);
  EXPECT_TRUE(st.Is(Status::Code::kNotFound)) << st.ToString();
  EXPECT_NE(st.message().find("unknown partition"), std::string::npos) << st.ToString();
  // A concurrent move of the same partition: a big partition keeps the first one busy.
  std::string big(60000, 'b');
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 150; i++) {
    std::string kk = "big" + std::to_string(i);
    if (BucketOf(kk, kDefaultBuckets) == p.bucket) keys.push_back(kk);
  }
  for (const auto& kk : keys) ASSERT_TRUE(Put(c.get(), ks, kk, big).ok());
  ASSERT_TRUE(c->MigratePartition(p, 2, false).ok());
  st = c->MigratePartition(p, 0, false);
  EXPECT_TRUE(st.Is(Status::Code::kConflict)) << st.ToString();
  EXPECT_NE(st.message().find("already migrating"), std::string::npos) << st.ToString();
  // Let it finish.
  for (int i = 0; i < 500; i++) {
    std::vector<MigrationStatus> moves;
    ASSERT_TRUE(c->Migrations(&moves).ok());
    bool busy = false;
    for (const auto& m : moves) busy |= m.in_flight;
    if (!busy) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Owners(c.get(), p), std::vector<uint32_t>{2});
  // A target that is down: refused, the partition stays where it is.
  ASSERT_TRUE(cluster_->Kill(0, SIGKILL).ok());
  st = c->MigratePartition(p, 0);
  EXPECT_TRUE(st.Is(Status::Code::kUnavailable)) << st.ToString();
  EXPECT_NE(st.message().find("target node 0 is down"), std::string::npos) << st.ToString();
  ASSERT_TRUE(cluster_->Restart(0).ok());
  c = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  EXPECT_EQ(Owners(c.get(), p), std::vector<uint32_t>{2});
  std::string v;
  bool found = false;
  ASSERT_TRUE(Get(c.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, "x");
}

// A target without room for the partition: refused with the sizes, nothing moves.
TEST(MigrationRoomTest, RefusesATargetWithoutRoom) {
  TestClusterOptions o;
  o.nodes = 3;
  std::unique_ptr<TestCluster> tc;
  ASSERT_TRUE(TestCluster::Start(o, &tc).ok());
  tc->SetNodeArgs(2, {"--memory-mb", "16"});
  ASSERT_TRUE(tc->Kill(2, SIGTERM).ok());
  ASSERT_TRUE(tc->Restart(2).ok());
  const KeyspaceId ks = 0x4D60;
  auto c = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  const std::string k = KeyOnNode(ks, 0, 3);
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  int n = 0;
  for (int i = 0; n < 200; i++) {
    const std::string kk = "room" + std::to_string(i);
    if (BucketOf(kk, kDefaultBuckets) != p.bucket) continue;
    ASSERT_TRUE(Put(c.get(), ks, kk, std::string(100000, 'r')).ok());
    n++;
  }
  Status st = c->MigratePartition(p, 2);
  EXPECT_TRUE(st.Is(Status::Code::kNoSpace)) << st.ToString();
  EXPECT_NE(st.message().find("MiB of page memory free"), std::string::npos) << st.ToString();
  EXPECT_EQ(Owners(c.get(), p), std::vector<uint32_t>{0});
  ASSERT_TRUE(c->MigratePartition(p, 1).ok());  // a target with room takes it
  EXPECT_EQ(Owners(c.get(), p), std::vector<uint32_t>{1});
}

// A GET* client that cached a record's address before a move reads the key after it: the
// old copy lost its valid bits when the source stopped serving, and later its memory is
// reused; the reader's checks (valid bit, key, epoch) send it to the directory. With the
// checks switched off (the injected bug) it returns the stale value.
void StaleAddressCase(TestCluster& tc, KeyspaceId ks, bool trust, bool reuse, std::string* got) {
  auto writer = Open(tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  // A reader that misses the home's push of the new placement (as a vanished or slow sharer
  // would): only the one-sided checks stand between it and the old copy.
  auto reader = Open(tc, Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus, trust, true);
  const std::string k = KeyOnNode(ks, 1, 3);
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  ASSERT_TRUE(Put(writer.get(), ks, k, "old-value").ok());
  std::string v;
  bool found = false;
  ASSERT_TRUE(Get(reader.get(), ks, k, &v, &found).ok());
  ASSERT_TRUE(Get(reader.get(), ks, k, &v, &found).ok());
  ASSERT_GT(reader->stats().one_sided_hits, 0u) << "the address was not cached";
  ASSERT_EQ(v, "old-value");
  ASSERT_TRUE(writer->MigratePartition(p, 2).ok());
  ASSERT_TRUE(Put(writer.get(), ks, k, "new-value").ok());
  if (reuse) {
    // The old copy is dropped; after the GC grace its frames are reused by other writes.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    for (int i = 0; i < 400; i++) {
      const std::string f = KeyOnNode(ks + 1, 1, 3, i);
      ASSERT_TRUE(Put(writer.get(), ks + 1, f, std::string(500, 'f')).ok());
    }
  }
  const uint64_t hits = reader->stats().one_sided_hits;
  ASSERT_TRUE(Get(reader.get(), ks, k, &v, &found).ok());
  *got = v;
  if (!trust) {
    EXPECT_EQ(reader->stats().one_sided_hits, hits) << "the stale address was used";
    EXPECT_GT(reader->stats().one_sided_fallbacks, 0u);
  }
}

TEST_F(MigrationTest, StaleOneSidedAddressAfterAMoveIsDetected) {
  std::string got;
  StaleAddressCase(*cluster_, 0x4D10, false, false, &got);
  EXPECT_EQ(got, "new-value");
  StaleAddressCase(*cluster_, 0x4D20, false, true, &got);
  EXPECT_EQ(got, "new-value");
}

TEST_F(MigrationTest, WithoutTheChecksAStaleAddressReturnsOldMemory) {
  std::string got;
  StaleAddressCase(*cluster_, 0x4D30, true, false, &got);
  EXPECT_NE(got, "new-value") << "the injected bug (no one-sided checks) went unnoticed";
}

// At a cutover the home pushes the new owner and epoch to the partition's sharers (paper
// 004): a sharer's next request goes straight to the new owner, without a MOVED. Sharers
// that vanished (a closed client) or never read (a client left idle) do not hold the move.
// A sharer that misses the push (debug_ignore_placement_pushes) still meets MOVED.
TEST_F(MigrationTest, TheHomePushesTheNewOwnerToItsSharers) {
  const KeyspaceId ks = 0x4D50;
  auto admin = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  const std::string k = KeyOnNode(ks, 1, 3);
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  ASSERT_TRUE(Put(admin.get(), ks, k, "before").ok());
  std::vector<std::unique_ptr<Client>> live;
  live.push_back(Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc));
  live.push_back(Open(*cluster_, Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus));
  auto deaf = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc, false, true);
  auto idle = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  auto gone = Open(*cluster_, Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  std::string v;
  bool found = false;
  for (Client* c : {live[0].get(), live[1].get(), deaf.get(), idle.get(), gone.get()}) {
    ASSERT_TRUE(Get(c, ks, k, &v, &found).ok());  // LOOKUP at the home: a sharer
    ASSERT_TRUE(Get(c, ks, k, &v, &found).ok());
    ASSERT_EQ(v, "before");
  }
  gone.reset();  // vanished; idle is never polled again
  uint64_t epoch = 0;
  ASSERT_TRUE(admin->MigratePartition(p, 2).ok());
  ASSERT_EQ(Owners(admin.get(), p, &epoch), std::vector<uint32_t>{2});
  ASSERT_TRUE(Put(admin.get(), ks, k, "after").ok());
  std::string last = "after";
  for (auto& c : live) {
    AwaitPush(c.get(), p, epoch, std::chrono::seconds(20));
    ASSERT_EQ(c->impl()->EpochOf(p), epoch) << "the new placement was not pushed";
    ASSERT_EQ(c->impl()->OwnerOf(p), 2u);
    EXPECT_GE(c->stats().placements_pushed, 1u);
    const uint64_t moved = c->stats().moved_replies;
    ASSERT_TRUE(Get(c.get(), ks, k, &v, &found).ok());
    EXPECT_EQ(v, last);
    last = "by-a-sharer-" + std::to_string(c->stats().placements_pushed) + v;
    ASSERT_TRUE(Put(c.get(), ks, k, last).ok());
    EXPECT_EQ(c->stats().moved_replies, moved) << "a MOVED round trip despite the push";
  }
  // The sharer that missed the push is sent on by MOVED, as before.
  const uint64_t moved = deaf->stats().moved_replies;
  ASSERT_TRUE(Get(deaf.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, last);
  EXPECT_GT(deaf->stats().moved_replies, moved);
  EXPECT_EQ(deaf->stats().placements_pushed, 0u);
  // The idle one too reads the new value.
  ASSERT_TRUE(Get(idle.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, last);
}

// The strict 2PL baseline follows MOVED too: a 2PL client whose cached owner of a partition
// is stale after a move (it ignores the home's push) has its LOCK refused by the old owner
// with MOVED, asks the home again and reads and writes at the new owner.
TEST_F(MigrationTest, TwoPhaseLockingFollowsAMovedPartition) {
  const KeyspaceId ks = 0x4D60;
  auto admin = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  ClientOptions o = cluster_->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  o.protocol = Protocol::kS2pl;
  o.debug_ignore_placement_pushes = true;
  std::unique_ptr<Client> locker;
  ASSERT_TRUE(Client::Open(o, &locker).ok());
  const std::string k = KeyOnNode(ks, 1, 3);
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  ASSERT_TRUE(Put(locker.get(), ks, k, "2pl-before").ok());
  std::string v;
  bool found = false;
  ASSERT_TRUE(Get(locker.get(), ks, k, &v, &found).ok());
  ASSERT_EQ(v, "2pl-before");
  ASSERT_EQ(locker->impl()->OwnerOf(p), 1u);
  ASSERT_TRUE(admin->MigratePartition(p, 2).ok());
  ASSERT_EQ(Owners(admin.get(), p), std::vector<uint32_t>{2});
  ASSERT_EQ(locker->impl()->OwnerOf(p), 1u) << "the 2PL client learnt of the move another way";
  const uint64_t moved = locker->stats().moved_replies;
  Status st = Put(locker.get(), ks, k, "2pl-after");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(locker->stats().moved_replies, moved);
  EXPECT_EQ(locker->impl()->OwnerOf(p), 2u);
  ASSERT_TRUE(Get(admin.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, "2pl-after");
  ASSERT_TRUE(Get(locker.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, "2pl-after");
  // A WRITE_LOCKED that reaches the old owner (the partition moved after its LOCK) is refused
  // with MOVED and writes nothing, there or at the new owner.
  protocol::LockRequest req{locker->impl()->next_txn++,
                            {protocol::LockItem{p, k, protocol::kLockExclusive, "2pl-lost", 0}}};
  std::string body;
  protocol::Encode(req, &body);
  PendingCall reply;
  st = locker->impl()->CallAndWait(1, locker->impl()->WriteChannel(), protocol::Op::kWriteLocked, 1,
                                   body, &reply);
  EXPECT_TRUE(st.Is(Status::Code::kMoved)) << st.ToString();
  ASSERT_TRUE(Get(admin.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, "2pl-after");
}

// The scene of the intent-move tests below: clients A and B and an admin, a key k on node 1
// written as "v0", and A holding k's intent.
struct HeldIntent {
  std::unique_ptr<Client> a, b, admin;
  std::string k;
  PartitionId p;
  IntentRequest ra;  // A's request (its key points into k)
};

// A request for an intent asked on a thread of its own: it blocks while queued.
class IntentWaiter {
 public:
  IntentWaiter(Client* c, const IntentRequest& r)
      : thread_([this, c, r] {
          status = c->AcquireIntent(r, &result);
          granted.store(true);
        }) {}
  ~IntentWaiter() {
    if (thread_.joinable()) thread_.join();
  }
  void Join() { thread_.join(); }

  std::atomic<bool> granted{false};
  IntentResult result;
  Status status;

 private:
  std::thread thread_;  // last: started once the members above exist
};

void HoldIntent(const TestCluster& tc, KeyspaceId ks, HeldIntent* h) {
  h->a = Open(tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  h->b = Open(tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  h->admin = Open(tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  h->k = KeyOnNode(ks, 1, 3);
  h->p = PartitionId{ks, BucketOf(h->k, kDefaultBuckets)};
  ASSERT_TRUE(Put(h->admin.get(), ks, h->k, "v0").ok());
  h->ra = IntentOn(h->a.get(), ks, h->k, 1);
  IntentResult res;
  ASSERT_TRUE(h->a->AcquireIntent(h->ra, &res).ok());
  ASSERT_EQ(res.outcome, IntentResult::Outcome::kGranted);
}

// A commits "vA" to k and releases its intents: the waiting B is granted k, with A's value.
void ReleaseToWaiter(HeldIntent& h, KeyspaceId ks, IntentWaiter& b) {
  ASSERT_TRUE(Put(h.a.get(), ks, h.k, "vA").ok());
  h.a->ReleaseIntents(h.ra.owner);
  b.Join();
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_EQ(b.result.outcome, IntentResult::Outcome::kGranted);
  EXPECT_EQ(b.result.value, "vA");
}

// Write intents move with a partition (issue 11 / issue 16 item 1): txn A holds an intent on
// k; k's partition moves to node 2; txn B asks for k at the new owner and must wait until A
// commits, then sees A's value; A's release reaches the server that holds the intent.
TEST_F(MigrationTest, AnIntentHeldAcrossAMoveStillMakesTheNextWriterWait) {
  const KeyspaceId ks = 0x4D80;
  HeldIntent h;
  ASSERT_NO_FATAL_FAILURE(HoldIntent(*cluster_, ks, &h));
  ASSERT_TRUE(h.admin->MigratePartition(h.p, 2).ok());
  ASSERT_EQ(Owners(h.admin.get(), h.p), std::vector<uint32_t>{2});
  IntentWaiter b(h.b.get(), IntentOn(h.b.get(), ks, h.k, 2));
  // B must still wait (a slow machine can only hide the bug here, never fake it).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(b.granted.load()) << "B was granted k at the new owner while A holds it";
  ASSERT_NO_FATAL_FAILURE(ReleaseToWaiter(h, ks, b));
}

// A request queued at the source when the partition moves is answered MOVED there and queues
// again at the new owner, behind the holder whose intent moved too.
TEST_F(MigrationTest, AWriterQueuedAtTheSourceWhenItMovesWaitsOnAtTheNewOwner) {
  const KeyspaceId ks = 0x4D81;
  HeldIntent h;
  ASSERT_NO_FATAL_FAILURE(HoldIntent(*cluster_, ks, &h));
  const IntentRequest rb = IntentOn(h.b.get(), ks, h.k, 2);
  const protocol::IntentOwner ob{h.b->impl()->client_id, rb.owner};
  IntentWaiter b(h.b.get(), rb);
  ASSERT_TRUE(AwaitQueued(h.admin.get(), 1, ob)) << "B never queued at the source";
  ASSERT_TRUE(h.admin->MigratePartition(h.p, 2).ok());
  ASSERT_EQ(Owners(h.admin.get(), h.p), std::vector<uint32_t>{2});
  EXPECT_TRUE(AwaitQueued(h.admin.get(), 2, ob)) << "B did not queue again at the new owner";
  EXPECT_FALSE(b.granted.load()) << "B was granted k while A holds it";
  ASSERT_NO_FATAL_FAILURE(ReleaseToWaiter(h, ks, b));
  h.b->ReleaseIntents(rb.owner);
}

// The holder's client vanishes after its intent moved: the source, where its connection
// closed, passes that on, and the new owner grants the waiter.
TEST_F(MigrationTest, AMovedIntentOfAVanishedClientIsReleasedAtTheNewOwner) {
  const KeyspaceId ks = 0x4D82;
  HeldIntent h;
  ASSERT_NO_FATAL_FAILURE(HoldIntent(*cluster_, ks, &h));
  ASSERT_TRUE(h.admin->MigratePartition(h.p, 2).ok());
  const IntentRequest rb = IntentOn(h.b.get(), ks, h.k, 2);
  const protocol::IntentOwner ob{h.b->impl()->client_id, rb.owner};
  IntentWaiter b(h.b.get(), rb);
  ASSERT_TRUE(AwaitQueued(h.admin.get(), 2, ob)) << "B was not made to wait at the new owner";
  EXPECT_FALSE(b.granted.load());
  h.a.reset();  // A's connections close (a killed backend)
  b.Join();
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_EQ(b.result.outcome, IntentResult::Outcome::kGranted);
  EXPECT_EQ(b.result.value, "v0");
  h.b->ReleaseIntents(rb.owner);
}

// A COMMIT that carries the release of its writer's intents and is refused with MOVED (one of
// its partitions moved away between the PREPARE and the COMMIT) releases nothing: the commit
// is not applied there, and a writer granted a key now would read it without the commit and
// fail its own with 40001 (pgbench's TPC-B on a branch row while accounts partitions moved).
// The client commits at the new owner and releases after.
TEST_F(MigrationTest, ACommitRefusedWithMovedKeepsTheIntentsItWouldRelease) {
  const KeyspaceId ks = 0x4D84;
  HeldIntent h;
  ASSERT_NO_FATAL_FAILURE(HoldIntent(*cluster_, ks, &h));
  std::string moving;
  for (int salt = 1; moving.empty() || BucketOf(moving, kDefaultBuckets) == h.p.bucket; salt++) {
    moving = KeyOnNode(ks, 1, 3, salt);
  }
  const PartitionId q{ks, BucketOf(moving, kDefaultBuckets)};
  ASSERT_TRUE(Put(h.admin.get(), ks, moving, "m0").ok());
  ASSERT_TRUE(h.admin->MigratePartition(q, 2).ok());
  Client::Impl& a = *h.a->impl();
  protocol::Decision d{Timestamp{a.clock.Now(), a.client_id}, {h.p, q}, h.ra.owner};
  std::string body;
  protocol::Encode(d, &body);
  PendingCall reply;
  Status st = a.CallAndWait(1, a.WriteChannel(), protocol::Op::kCommit, 2, body, &reply);
  EXPECT_TRUE(st.Is(Status::Code::kMoved)) << st.ToString();
  IntentRequest rb = IntentOn(h.b.get(), ks, h.k, 2);
  rb.wait = false;
  IntentResult res;
  ASSERT_TRUE(h.b->AcquireIntent(rb, &res).ok());
  EXPECT_EQ(res.outcome, IntentResult::Outcome::kHeld)
      << "a COMMIT refused with MOVED released A's intent";
  if (res.outcome == IntentResult::Outcome::kGranted) h.b->ReleaseIntents(rb.owner);
  h.a->ReleaseIntents(h.ra.owner);
}

// There and back: the partition returns to the server its holder asked, which holds the
// intent again; the holder's release there frees it.
TEST_F(MigrationTest, AnIntentMovesThereAndBackAndIsReleasedWhereItWasAsked) {
  const KeyspaceId ks = 0x4D83;
  HeldIntent h;
  ASSERT_NO_FATAL_FAILURE(HoldIntent(*cluster_, ks, &h));
  ASSERT_TRUE(h.admin->MigratePartition(h.p, 2).ok());
  ASSERT_TRUE(h.admin->MigratePartition(h.p, 1).ok());
  ASSERT_EQ(Owners(h.admin.get(), h.p), std::vector<uint32_t>{1});
  const IntentRequest rb = IntentOn(h.b.get(), ks, h.k, 2);
  const protocol::IntentOwner ob{h.b->impl()->client_id, rb.owner};
  IntentWaiter b(h.b.get(), rb);
  ASSERT_TRUE(AwaitQueued(h.admin.get(), 1, ob)) << "B was not made to wait after the move back";
  EXPECT_FALSE(b.granted.load());
  ASSERT_NO_FATAL_FAILURE(ReleaseToWaiter(h, ks, b));
  h.b->ReleaseIntents(rb.owner);
}

// A home that restarts has forgotten its sharers and their routes (memory only): a sharer
// whose connection to the home reopens LOOKUPs its cached partitions of that home again, so
// the restarted home pushes it their next move.
TEST(MigrationHomeRestartTest, SharersRegisterAgainWithARestartedHome) {
  TestClusterOptions o;
  o.nodes = 3;
  o.data = true;
  std::unique_ptr<TestCluster> tc;
  ASSERT_TRUE(TestCluster::Start(o, &tc).ok());
  const KeyspaceId ks = 0x4D70;
  auto admin = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  auto sharer = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  const std::string k = KeyOnNode(ks, 0, 3);  // home and owner: node 0
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  ASSERT_TRUE(Put(admin.get(), ks, k, "v1").ok());
  std::string v;
  bool found = false;
  ASSERT_TRUE(Get(sharer.get(), ks, k, &v, &found).ok());  // LOOKUP at node 0: a sharer
  ASSERT_EQ(v, "v1");
  ASSERT_TRUE(tc->Kill(0, SIGTERM).ok());
  ASSERT_TRUE(tc->Restart(0).ok());
  // The sharer's next read meets the broken connection, then reconnects (and registers).
  Status st;
  for (int i = 0; i < 5; i++) {
    st = Get(sharer.get(), ks, k, &v, &found);
    if (st.ok()) break;
  }
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(v, "v1");
  EXPECT_GE(sharer->stats().sharer_lookups, 1u);
  st = admin->MigratePartition(p, 1);
  for (int i = 0; i < 5 && !st.ok(); i++) st = admin->MigratePartition(p, 1);  // admin reconnects
  ASSERT_TRUE(st.ok()) << st.ToString();
  uint64_t epoch = 0;
  ASSERT_EQ(Owners(admin.get(), p, &epoch), std::vector<uint32_t>{1});
  AwaitPush(sharer.get(), p, epoch, std::chrono::seconds(10));
  ASSERT_EQ(sharer->impl()->EpochOf(p), epoch) << "the restarted home pushed nothing";
  EXPECT_EQ(sharer->impl()->OwnerOf(p), 1u);
  EXPECT_GE(sharer->stats().placements_pushed, 1u);
  ASSERT_TRUE(Get(sharer.get(), ks, k, &v, &found).ok());
  EXPECT_EQ(v, "v1");
}

// Scans (remote page I/O) while the keyspace's partitions move: a partition that moves while
// it is read is opened again at its new owner and read again; every scan sees every key once
// with its value.
TEST_F(MigrationTest, ScansSeeEveryRowWhilePartitionsMove) {
  const KeyspaceId ks = 0x4D40;
  auto c = Open(*cluster_, Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus);
  constexpr int kKeys = 2000;
  for (int i = 0; i < kKeys; i += 100) {
    auto t = c->Begin();
    for (int j = i; j < i + 100; j++)
      t->Put(ks, "s" + std::to_string(j), "value-" + std::to_string(j));
    ASSERT_TRUE(t->Commit().ok());
  }
  std::atomic<bool> done{false};
  std::atomic<int> moves{0};
  Status mover_error;
  std::thread mover([&] {
    auto m = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
    for (uint32_t b = 0; !done.load(); b = (b + 1) % kDefaultBuckets) {
      const PartitionId p{ks, b};
      std::vector<uint32_t> owners = Owners(m.get(), p);
      if (owners.size() != 1) continue;
      Status st = m->MigratePartition(p, (owners[0] + 1) % 3);
      if (!st.ok()) {
        mover_error = st;
        return;
      }
      moves++;
    }
  });
  int scans = 0;
  for (; scans < 200 && (scans < 3 || moves.load() < 8); scans++) {
    std::unique_ptr<Scanner> scan;
    ASSERT_TRUE(c->OpenScan(ks, ScanOptions(), &scan).ok());
    std::map<std::string, std::string> rows;
    for (;;) {
      ScanRow row;
      bool end = false;
      Status st = scan->Next(&row, &end);
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (end) break;
      ASSERT_TRUE(rows.emplace(std::string(row.key), std::string(row.value)).second)
          << "key seen twice: " << row.key;
    }
    ASSERT_EQ(rows.size(), static_cast<size_t>(kKeys));
    for (const auto& [k, v] : rows) ASSERT_EQ(v, "value-" + k.substr(1));
  }
  done.store(true);
  mover.join();
  ASSERT_TRUE(mover_error.ok()) << mover_error.ToString();
  EXPECT_GE(moves.load(), 8);
  std::printf("%d scans during %d migrations\n", scans, moves.load());
}

// A scan hands out the rows of each batch of pages as it arrives. When the partition moves
// after some batches, the scan reads it again from its first page at the new owner: the rows
// handed out already must not come again, and every other row must come once, at the
// snapshot. One page per batch, one batch in flight: the move falls between two batches.
TEST_F(MigrationTest, ScanOfAPartitionThatMovesMidwayReturnsEachRowOnce) {
  auto c = Open(*cluster_, Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus);
  auto m = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  for (bool row_keys : {true, false}) {
    SCOPED_TRACE(row_keys ? "row keys" : "string keys");
    const KeyspaceId ks = row_keys ? 0x4D42 : 0x4D43;
    c->DefineKeyspace(ks, 1);
    m->DefineKeyspace(ks, 1);
    auto key = [&](int i) {
      return row_keys ? RowKey(static_cast<uint64_t>(i)) : "k" + std::to_string(i);
    };
    constexpr int kKeys = 1500;
    std::map<std::string, std::string> want;
    for (int i = 0; i < kKeys; i += 100) {
      auto t = c->Begin();
      for (int j = i; j < i + 100; j++) {
        std::string v = "v" + std::to_string(j);
        v.resize(300, '.');
        ASSERT_TRUE(t->Put(ks, key(j), v).ok());
        want[key(j)] = v;
      }
      ASSERT_TRUE(t->Commit().ok());
    }
    // Older versions without the valid bit in the first pages, and tombstones.
    auto t = c->Begin();
    for (int i = 0; i < kKeys; i += 5) {
      ASSERT_TRUE(t->Put(ks, key(i), "new").ok());
      want[key(i)] = "new";
    }
    for (int i = 2; i < kKeys; i += 9) {
      ASSERT_TRUE(t->Delete(ks, key(i)).ok());
      want.erase(key(i));
    }
    ASSERT_TRUE(t->Commit().ok());

    ScanOptions so;
    so.batch_pages = 1;
    so.batches_in_flight = 1;
    so.connections_per_node = 1;
    std::unique_ptr<Scanner> scan;
    ASSERT_TRUE(c->OpenScan(ks, so, &scan).ok());
    std::map<std::string, std::string> rows;
    int batches = 0;
    for (;;) {
      std::span<const ScanRow> part;
      bool end = false;
      Status st = scan->NextRows(&part, &end);
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (end) break;
      for (const ScanRow& row : part) {
        ASSERT_TRUE(rows.emplace(std::string(row.key), std::string(row.value)).second)
            << "key returned twice after " << batches << " batches";
      }
      if (++batches == 3) {
        const PartitionId p{ks, 0};
        std::vector<uint32_t> owners = Owners(m.get(), p);
        ASSERT_EQ(owners.size(), 1u);
        st = m->MigratePartition(p, (owners[0] + 1) % 3);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
    }
    EXPECT_GT(batches, 10);
    EXPECT_EQ(rows.size(), want.size());
    EXPECT_TRUE(rows == want);
  }
}

// rampctl: migrate shows progress and the result, status lists the moves, bad input fails
// with the reason and exit code 2.
std::string Rampctl(const TestCluster& tc, const std::string& args, int* code) {
  std::string p = RampdPath();
  p = p.substr(0, p.size() - std::strlen("rampd")) + "rampctl";
  const std::string token = tc.dir() + "/token";
  const std::string cmd =
      p + " --node " + tc.tcp(0).ToString() + " --token-file " + token + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while (f != nullptr && (n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int st = f == nullptr ? -1 : pclose(f);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST_F(MigrationTest, RampctlMigratesAndShowsTheMoves) {
  const KeyspaceId ks = 0x4D50;
  auto c = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  const std::string k = KeyOnNode(ks, 2, 3);
  const PartitionId p{ks, BucketOf(k, kDefaultBuckets)};
  for (int i = 0; i < 50; i++) ASSERT_TRUE(Put(c.get(), ks, k + std::to_string(i), "x").ok());
  ASSERT_TRUE(Put(c.get(), ks, k, "x").ok());
  int code = 0;
  const std::string args = "migrate " + std::to_string(ks) + " " + std::to_string(p.bucket) + " 0";
  std::string out = Rampctl(*cluster_, args, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("copied"), std::string::npos) << out;
  EXPECT_NE(out.find("moved " + p.ToString() + " to node 0"), std::string::npos) << out;
  EXPECT_EQ(Owners(c.get(), p), std::vector<uint32_t>{0});
  out = Rampctl(*cluster_, "status", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("phase"), std::string::npos) << out;
  EXPECT_NE(out.find("done"), std::string::npos) << out;
  out = Rampctl(*cluster_, "partitions", &code);
  EXPECT_NE(out.find("migrating"), std::string::npos) << out;
  out = Rampctl(*cluster_, args, &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("already on node 0"), std::string::npos) << out;
  out = Rampctl(*cluster_, "migrate " + std::to_string(ks) + " x 0", &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("bucket 'x' is not a decimal number"), std::string::npos) << out;
  out = Rampctl(*cluster_, "migrate " + std::to_string(ks) + " 1", &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("usage: rampctl migrate KEYSPACE BUCKET NODE"), std::string::npos) << out;
}

// The checker under continuous migrations of its keyspace's partitions among 3 servers.
struct PathCase {
  Provider provider;
  ReadPath read;
  WritePath write;
  const char* name;
};
class MigrationAtomicityTest : public MigrationTest,
                               public ::testing::WithParamInterface<PathCase> {};

TEST_P(MigrationAtomicityTest, NoFracturedReadsWhilePartitionsMove) {
  checker::AtomicityCheckOptions o;
  o.client = cluster_->ClientOptionsFor(GetParam().provider, GetParam().read, GetParam().write);
  o.keyspace = 0x4E00 + static_cast<int>(GetParam().read);
  o.writers = 2;
  o.readers = 3;
  o.groups = 4;
  o.keys_per_group = 6;
  o.duration_ms = 3000;
  std::atomic<bool> done{false};
  std::atomic<int> moves{0};
  Status mover_error;
  std::thread mover([&] {
    auto c = Open(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
    std::mt19937 rng(42);
    // The checker's keys: their partitions.
    std::vector<PartitionId> parts;
    for (int g = 0; g < o.groups; g++) {
      for (int m = 0; m < o.keys_per_group; m++) {
        PartitionId p{o.keyspace, BucketOf(checker::GroupMemberKey(g, m), kDefaultBuckets)};
        if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.push_back(p);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the keys exist
    while (!done.load()) {
      const PartitionId p = parts[rng() % parts.size()];
      std::vector<uint32_t> owners = Owners(c.get(), p);
      if (owners.size() != 1) continue;
      const uint32_t to = (owners[0] + 1 + rng() % 2) % 3;
      Status st = c->MigratePartition(p, to);
      if (!st.ok() && !st.Is(Status::Code::kNotFound)) {
        mover_error = st;
        return;
      }
      if (st.ok()) moves++;
    }
  });
  checker::AtomicityReport r = checker::RunAtomicityCheck(o);
  done.store(true);
  mover.join();
  ASSERT_TRUE(mover_error.ok()) << mover_error.ToString();
  ASSERT_TRUE(r.error.ok()) << r.Summary();
  EXPECT_GT(moves.load(), 3) << "too few migrations to mean anything";
  EXPECT_GT(r.commits, 0u) << r.Summary();
  EXPECT_GT(r.reads, 0u) << r.Summary();
  EXPECT_EQ(r.fractured, 0u) << r.Summary();
  std::printf("%s: %d migrations, %s\n", GetParam().name, moves.load(), r.Summary().c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Paths, MigrationAtomicityTest,
    ::testing::Values(PathCase{Provider::kTcp, ReadPath::kRpc, WritePath::kRpc, "rpc"},
                      PathCase{Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus, "getplus"},
                      PathCase{Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus, "getstar"}),
    [](const ::testing::TestParamInfo<PathCase>& i) { return std::string(i.param.name); });

// ---- the hot-partition rebalancer ---------------------------------------------------------

// Three partitions homed at node 0 take all the load, read one-sided (GET*: the servers only
// learn of those reads from the clients' load reports). The rebalancer moves two of them away
// until every server carries one, and no partition moves twice (cool-down, hysteresis).
TEST(RebalancerTest, MovesHotPartitionsOffTheBusyServerAndSettles) {
  TestClusterOptions o;
  o.nodes = 3;
  o.extra_args = {"--rebalance-interval-ms", "300", "--rebalance-cooldown-ms", "600000"};
  std::unique_ptr<TestCluster> tc;
  ASSERT_TRUE(TestCluster::Start(o, &tc).ok());
  const KeyspaceId ks = 0x4D70;
  auto admin = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  std::vector<std::string> hot;
  std::set<uint32_t> buckets;
  for (int salt = 0; hot.size() < 3; salt++) {
    const std::string k = KeyOnNode(ks, 0, 3, salt);
    if (buckets.insert(BucketOf(k, kDefaultBuckets)).second) hot.push_back(k);
  }
  for (const auto& k : hot) ASSERT_TRUE(Put(admin.get(), ks, k, "hot").ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; r++) {
    readers.emplace_back([&] {
      auto c = Open(*tc, Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
      while (!stop.load()) {
        for (const auto& k : hot) {
          std::string v;
          bool found = false;
          (void)Get(c.get(), ks, k, &v, &found);
        }
      }
    });
  }
  bool balanced = false;
  RebalancePlan plan;
  for (int i = 0; i < 600 && !balanced; i++) {  // an upper bound only
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::vector<uint32_t> owners;
    for (const auto& k : hot) {
      const auto o = Owners(admin.get(), PartitionId{ks, BucketOf(k, kDefaultBuckets)});
      if (o.size() == 1) owners.push_back(o[0]);
    }
    balanced = std::set<uint32_t>(owners.begin(), owners.end()).size() == 3;
  }
  // Steady load a while longer: nothing moves again.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(admin->PlanRebalance(RebalanceOptions(), &plan).ok());
  stop.store(true);
  for (auto& t : readers) t.join();
  ASSERT_TRUE(balanced) << "the hot partitions did not spread over the servers";
  EXPECT_LE(plan.imbalance_before, 1.25);
  std::vector<MigrationStatus> moves;
  ASSERT_TRUE(admin->Migrations(&moves).ok());
  std::map<PartitionId, int> per_partition;
  for (const auto& m : moves) per_partition[m.id]++;
  EXPECT_EQ(moves.size(), 2u);
  for (const auto& [p, n] : per_partition) EXPECT_EQ(n, 1) << p.ToString() << " moved " << n;
  std::printf("rebalanced with %zu moves; max/mean load now %.2f\n", moves.size(),
              plan.imbalance_before);
}

// ---- crashes at every step ----------------------------------------------------------------

struct CrashCase {
  const char* step;
  int node;  // the node that reaches the step: 0 home, 1 source, 2 target
};

class MigrationCrashTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(MigrationCrashTest, OneOwnerAndNoAcknowledgedWriteLost) {
  TestClusterOptions o;
  o.nodes = 3;
  o.data = true;
  o.extra_args = {"--txn-timeout-ms", "2000"};
  std::unique_ptr<TestCluster> tc;
  ASSERT_TRUE(TestCluster::Start(o, &tc).ok());
  const KeyspaceId ks = 0x4F00;
  auto c = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  // A partition homed at node 0, moved to node 1 first: home, source and target differ.
  const std::string k0 = KeyOnNode(ks, 0, 3);
  const PartitionId p{ks, BucketOf(k0, kDefaultBuckets)};
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 40; i++) {
    std::string k = "c" + std::to_string(i);
    if (BucketOf(k, kDefaultBuckets) == p.bucket) keys.push_back(k);
  }
  std::map<std::string, std::string> acked;
  for (const auto& k : keys) {
    ASSERT_TRUE(Put(c.get(), ks, k, k + "@0").ok());
    acked[k] = k + "@0";
  }
  Status moved = MoveRetryingRollbacks(c.get(), p, 1);
  ASSERT_TRUE(moved.ok()) << moved.ToString();
  // Arm the hook at the node of the step.
  const int node = GetParam().node;
  tc->SetNodeArgs(node, {"--test-crash-at", GetParam().step});
  ASSERT_TRUE(tc->Kill(node, SIGTERM).ok());
  ASSERT_TRUE(tc->Restart(node).ok());
  tc->SetNodeArgs(node, {});

  // Writes go on (acknowledged ones are remembered) while the move runs and crashes.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::thread writer([&] {
    auto w = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
    for (int round = 1; !stop.load(); round++) {
      for (const auto& k : keys) {
        if (stop.load()) break;
        const std::string v = k + "@" + std::to_string(round);
        if (Put(w.get(), ks, k, v).ok()) {
          std::lock_guard lock(mu);
          acked[k] = v;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a node is down
        }
      }
    }
  });
  std::thread mover([&] {
    auto m = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
    (void)m->MigratePartition(p, 2);  // fails when the home dies, or rolls back
  });
  // The node kills itself at the step; restart it.
  bool crashed = false;
  for (int i = 0; i < 1000 && !crashed; i++) {
    crashed = tc->Exited(node);
    if (!crashed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(crashed) << "node " << node << " never reached step " << GetParam().step;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(tc->Restart(node).ok());
  mover.join();
  // The move settles: completed or rolled back.
  auto admin = Open(*tc, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  bool settled = false;
  for (int i = 0; i < 1000 && !settled; i++) {
    std::vector<MigrationStatus> moves;
    settled = admin->Migrations(&moves).ok();
    for (const auto& m : moves) settled = settled && !m.in_flight;
    if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(settled);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop.store(true);
  writer.join();
  std::vector<uint32_t> owners = Owners(admin.get(), p);
  ASSERT_EQ(owners.size(), 1u) << "owners of " << p.ToString() << " after the crash";
  std::printf("%s: owner after the crash and restart: node %u\n", GetParam().step, owners[0]);
  for (const auto& [k, v] : acked) {
    std::string got;
    bool found = false;
    Status st = Get(admin.get(), ks, k, &got, &found);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(found) << k;
    EXPECT_EQ(got, v) << k;
  }
  // And the partition still moves.
  const uint32_t next = owners[0] == 2 ? 0 : 2;
  Status st = MoveRetryingRollbacks(admin.get(), p, next);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Owners(admin.get(), p), std::vector<uint32_t>{next});
}

INSTANTIATE_TEST_SUITE_P(
    Steps, MigrationCrashTest,
    ::testing::Values(CrashCase{"home-after-begin", 0}, CrashCase{"home-after-cutover", 0},
                      CrashCase{"home-after-release", 0}, CrashCase{"home-after-commit", 0},
                      CrashCase{"source-after-release", 1}, CrashCase{"target-during-copy", 2},
                      CrashCase{"target-after-finish", 2}),
    [](const ::testing::TestParamInfo<CrashCase>& i) {
      std::string n = i.param.step;
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace ramp::testing
