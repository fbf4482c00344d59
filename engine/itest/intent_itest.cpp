// Write intents (row locks of SQL writers) against real rampd processes: waiting for the
// holder, the grant carrying the holder's commit, deadlocks (one victim, the youngest),
// cancelled waits that leave no queued request behind, and intents of a vanished client.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "ramp/client.h"
#include "ramp/hlc.h"
#include "ramp/write_batch.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;
using Outcome = IntentResult::Outcome;

class IntentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestClusterOptions o;
    o.nodes = 2;
    Status st = TestCluster::Start(o, &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  static std::unique_ptr<Client> Open(std::function<Status()> hook = nullptr) {
    ClientOptions o =
        cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
    o.wait_hook = std::move(hook);
    std::unique_ptr<Client> c;
    Status st = Client::Open(o, &c);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return c;
  }
  KeyspaceId Keyspace() const {
    return KeyHash(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }
  static IntentResult Take(Client& c, uint64_t owner, uint64_t priority, KeyspaceId ks,
                           std::string_view key, bool wait, int deadlock_ms = 100) {
    IntentRequest r;
    r.owner = owner;
    r.priority = priority;
    r.keyspace = ks;
    r.key = key;
    r.wait = wait;
    r.deadlock_check_ms = deadlock_ms;
    IntentResult out;
    Status st = c.AcquireIntent(r, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  // A release goes out without waiting for its reply: asks (nowait, a new owner each time)
  // until the key is granted, for a few seconds at most.
  static IntentResult TakeOnceReleased(Client& c, KeyspaceId ks, std::string_view key) {
    IntentResult r;
    for (int i = 0; i < 500; i++) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      r = Take(c, c.NewIntentOwner(), 3, ks, key, false);
      if (r.outcome == Outcome::kGranted) break;
    }
    return r;
  }
  // Waits (at most a minute) until `f` is ready; false if it is not.
  template <class T>
  static bool Ready(std::future<T>& f) {
    return f.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  }
  // True when f is still waiting after a while (the wait is what is tested, not its speed).
  template <class T>
  static bool StillWaiting(std::future<T>& f) {
    return f.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
  }

  static std::unique_ptr<TestCluster> cluster_;
};
std::unique_ptr<TestCluster> IntentTest::cluster_;

TEST_F(IntentTest, SecondWriterWaitsAndSeesTheHoldersCommit) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  const uint64_t ta = a->NewIntentOwner();
  IntentResult first = Take(*a, ta, 1, ks, "row", true);
  ASSERT_EQ(first.outcome, Outcome::kGranted);
  EXPECT_FALSE(first.live);  // never written

  // NOWAIT: held, at once.
  const uint64_t tb = b->NewIntentOwner();
  EXPECT_EQ(Take(*b, tb, 2, ks, "row", false).outcome, Outcome::kHeld);
  // Readers never wait for intents.
  {
    auto t = b->Begin();
    ReadResult r;
    ASSERT_TRUE(t->Get(ks, "row", &r).ok());
    EXPECT_FALSE(r.found);
  }
  auto waiter =
      std::async(std::launch::async, [&] { return Take(*b, tb, 2, ks, "row", true, 50); });
  EXPECT_TRUE(StillWaiting(waiter));  // waits across several slices and deadlock checks
  // The holder commits a new version, then releases: the grant names that version.
  Timestamp committed;
  {
    auto t = a->Begin();
    ASSERT_TRUE(t->Put(ks, "row", "v1").ok());
    ASSERT_TRUE(t->Commit(&committed).ok());
  }
  a->ReleaseIntents(ta);
  ASSERT_TRUE(Ready(waiter));
  const IntentResult granted = waiter.get();
  EXPECT_EQ(granted.outcome, Outcome::kGranted);
  EXPECT_TRUE(granted.live);
  EXPECT_EQ(granted.latest, committed);
  EXPECT_EQ(granted.value, "v1");
  // Now a holds nothing and b holds the key.
  EXPECT_EQ(Take(*a, a->NewIntentOwner(), 3, ks, "row", false).outcome, Outcome::kHeld);
  b->ReleaseIntents(tb);
  EXPECT_EQ(TakeOnceReleased(*a, ks, "row").outcome, Outcome::kGranted);
}

TEST_F(IntentTest, WriteReleasesTheIntentsBehindItsCommit) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  const uint64_t ta = a->NewIntentOwner();
  ASSERT_EQ(Take(*a, ta, 1, ks, "row", true).outcome, Outcome::kGranted);
  auto waiter = std::async(std::launch::async,
                           [&] { return Take(*b, b->NewIntentOwner(), 2, ks, "row", true); });
  EXPECT_TRUE(StillWaiting(waiter));
  WriteBatch batch;
  ASSERT_TRUE(batch.PutKey(ks, "row", "v2").ok());
  Timestamp committed;
  ASSERT_TRUE(a->Write(batch, &committed, ta).ok());  // no ReleaseIntents call
  ASSERT_TRUE(Ready(waiter));
  const IntentResult granted = waiter.get();
  EXPECT_EQ(granted.outcome, Outcome::kGranted);
  EXPECT_EQ(granted.latest, committed);  // the commit was applied before the release
  EXPECT_EQ(granted.value, "v2");
}

// The release travels in the COMMIT (Decision::release_intents_of): a one-row Write costs its
// server a PREPARE and a COMMIT, no INTENT_RELEASE of its own. An intent at a key the
// transaction did not write is released as well (by its COMMIT or an INTENT_RELEASE).
TEST_F(IntentTest, TheCommitCarriesTheRelease) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  auto ops = [&] {  // requests served by all servers, counting this STATUS round's own
    std::vector<ServerStatus> servers;
    EXPECT_TRUE(a->ClusterStatus(&servers).ok());
    uint64_t n = 0;
    for (const ServerStatus& s : servers) n += s.ops;
    return std::pair<uint64_t, uint64_t>(n, servers.size());
  };
  const uint64_t ta = a->NewIntentOwner();
  ASSERT_EQ(Take(*a, ta, 1, ks, "written", true).outcome, Outcome::kGranted);
  ASSERT_EQ(Take(*a, ta, 1, ks, "only locked", true).outcome, Outcome::kGranted);
  auto waiter = std::async(std::launch::async, [&] {
    return Take(*b, b->NewIntentOwner(), 2, ks, "only locked", true);
  });
  EXPECT_TRUE(StillWaiting(waiter));
  WriteBatch batch;
  ASSERT_TRUE(batch.PutKey(ks, "written", "v").ok());
  ASSERT_TRUE(a->Write(batch, nullptr, ta).ok());
  ASSERT_TRUE(Ready(waiter));
  EXPECT_EQ(waiter.get().outcome, Outcome::kGranted);
  EXPECT_EQ(TakeOnceReleased(*b, ks, "written").outcome, Outcome::kGranted);

  // One row, one server: PREPARE + COMMIT, plus the STATUS requests of the second count.
  const uint64_t tc = a->NewIntentOwner();
  ASSERT_EQ(Take(*a, tc, 1, ks, "alone", true).outcome, Outcome::kGranted);
  const auto [before, nodes] = ops();
  WriteBatch one;
  ASSERT_TRUE(one.PutKey(ks, "alone", "v").ok());
  ASSERT_TRUE(a->Write(one, nullptr, tc).ok());
  const auto [after, nodes_after] = ops();
  EXPECT_EQ(after - before, 2 + nodes_after);
  EXPECT_EQ(TakeOnceReleased(*b, ks, "alone").outcome, Outcome::kGranted);
}

TEST_F(IntentTest, SharedModesGoTogetherExclusiveWaits) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  IntentRequest r;
  r.keyspace = ks;
  r.key = "k";
  r.wait = false;
  IntentResult out;
  r.owner = a->NewIntentOwner();
  r.mode = IntentMode::kShare;
  ASSERT_TRUE(a->AcquireIntent(r, &out).ok());
  EXPECT_EQ(out.outcome, Outcome::kGranted);
  r.owner = b->NewIntentOwner();
  ASSERT_TRUE(b->AcquireIntent(r, &out).ok());
  EXPECT_EQ(out.outcome, Outcome::kGranted);
  // KEY SHARE does not conflict with NO KEY EXCLUSIVE (a foreign-key check and an update).
  r.owner = b->NewIntentOwner();
  r.mode = IntentMode::kNoKeyExclusive;
  ASSERT_TRUE(b->AcquireIntent(r, &out).ok());
  EXPECT_EQ(out.outcome, Outcome::kHeld);  // conflicts with the SHARE holders
  r.mode = IntentMode::kExclusive;
  ASSERT_TRUE(b->AcquireIntent(r, &out).ok());
  EXPECT_EQ(out.outcome, Outcome::kHeld);
}

// Groups (a materialized view's writers per base table): one group goes together, two
// groups conflict, exclusive conflicts with a group, key-share does not; a holder of two
// groups holds them as exclusive.
TEST_F(IntentTest, GroupsGoTogetherOtherGroupsWait) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  auto ask = [&](Client& c, uint64_t owner, IntentMode mode) {
    IntentRequest r;
    r.owner = owner;
    r.priority = 1;
    r.keyspace = ks;
    r.key = "view";
    r.mode = mode;
    r.wait = false;
    IntentResult out;
    EXPECT_TRUE(c.AcquireIntent(r, &out).ok());
    return out.outcome;
  };
  const uint64_t ta = a->NewIntentOwner();
  ASSERT_EQ(ask(*a, ta, GroupIntent(1)), Outcome::kGranted);
  auto c = Open();  // b waits below: a client serves one thread at a time
  std::vector<uint64_t> of_c;
  auto ask_c = [&](IntentMode mode) {
    of_c.push_back(c->NewIntentOwner());
    return ask(*c, of_c.back(), mode);
  };
  EXPECT_EQ(ask_c(GroupIntent(1)), Outcome::kGranted);
  EXPECT_EQ(ask_c(GroupIntent(2)), Outcome::kHeld);
  EXPECT_EQ(ask_c(IntentMode::kExclusive), Outcome::kHeld);
  EXPECT_EQ(ask_c(IntentMode::kShare), Outcome::kHeld);
  EXPECT_EQ(ask_c(IntentMode::kKeyShare), Outcome::kGranted);
  // A waiter of group 2 is granted once every group-1 holder released.
  const uint64_t tb = b->NewIntentOwner();
  auto waiter = std::async(std::launch::async, [&] {
    IntentRequest r;
    r.owner = tb;
    r.priority = 5;
    r.keyspace = ks;
    r.key = "view";
    r.mode = GroupIntent(2);
    IntentResult out;
    EXPECT_TRUE(b->AcquireIntent(r, &out).ok());
    return out.outcome;
  });
  EXPECT_TRUE(StillWaiting(waiter));
  a->ReleaseIntents(ta);
  EXPECT_TRUE(StillWaiting(waiter));  // c's group-1 holder is still there
  for (uint64_t o : of_c) c->ReleaseIntents(o);
  ASSERT_TRUE(Ready(waiter));
  EXPECT_EQ(waiter.get(), Outcome::kGranted);
  // tb adds group 3 on the key: it now holds both, as exclusive (a's group 2 waits).
  EXPECT_EQ(ask(*b, tb, GroupIntent(3)), Outcome::kGranted);
  EXPECT_EQ(ask(*a, a->NewIntentOwner(), GroupIntent(2)), Outcome::kHeld);
  EXPECT_EQ(ask(*a, a->NewIntentOwner(), GroupIntent(3)), Outcome::kHeld);
  b->ReleaseIntents(tb);
}

TEST_F(IntentTest, DeadlockOneVictimTheYoungestOtherGoesOn) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  const uint64_t ta = a->NewIntentOwner();
  const uint64_t tb = b->NewIntentOwner();
  // Keys "x" and "y" of one keyspace: with 2 servers and 16 buckets they may live on one
  // server or two; the detector follows edges through every server either way.
  ASSERT_EQ(Take(*a, ta, /*priority=*/10, ks, "x", true).outcome, Outcome::kGranted);
  ASSERT_EQ(Take(*b, tb, /*priority=*/20, ks, "y", true).outcome, Outcome::kGranted);
  auto wa = std::async(std::launch::async, [&] { return Take(*a, ta, 10, ks, "y", true, 50); });
  auto wb = std::async(std::launch::async, [&] { return Take(*b, tb, 20, ks, "x", true, 50); });
  // b is younger (priority 20): it gives way; a is granted once b releases.
  ASSERT_TRUE(Ready(wb));
  const IntentResult rb = wb.get();
  EXPECT_EQ(rb.outcome, Outcome::kDeadlock);
  EXPECT_NE(rb.detail.find("waits for"), std::string::npos) << rb.detail;
  EXPECT_TRUE(StillWaiting(wa));  // the older one never gives way
  b->ReleaseIntents(tb);
  ASSERT_TRUE(Ready(wa));
  EXPECT_EQ(wa.get().outcome, Outcome::kGranted);
  a->ReleaseIntents(ta);
}

TEST_F(IntentTest, CancelledWaitLeavesNoQueuedRequest) {
  std::atomic<bool> cancel{false};
  auto a = Open();
  auto b = Open([&] { return cancel ? Status::Cancelled("test cancel") : Status::OK(); });
  auto c = Open();
  const KeyspaceId ks = Keyspace();
  const uint64_t ta = a->NewIntentOwner();
  ASSERT_EQ(Take(*a, ta, 1, ks, "k", true).outcome, Outcome::kGranted);
  auto waiter = std::async(std::launch::async, [&] {
    IntentRequest r;
    r.owner = b->NewIntentOwner();
    r.priority = 2;
    r.keyspace = ks;
    r.key = "k";
    IntentResult out;
    return b->AcquireIntent(r, &out);
  });
  EXPECT_TRUE(StillWaiting(waiter));
  cancel = true;
  ASSERT_TRUE(Ready(waiter));
  EXPECT_TRUE(waiter.get().Is(Status::Code::kCancelled));
  cancel = false;
  // The withdrawal went out without waiting for its reply; a request b sends after it to the
  // same server on the same connection is answered after the server handled it.
  EXPECT_EQ(Take(*b, b->NewIntentOwner(), 2, ks, "k", false).outcome, Outcome::kHeld);
  // The cancelled request was withdrawn: when a releases, the key is free (not handed to b).
  a->ReleaseIntents(ta);
  // (a's release went out without a reply too: c asks until it arrived. Had b's request
  // stayed queued, the release would have granted the key to b, and c would never get it.)
  const IntentResult r = TakeOnceReleased(*c, ks, "k");
  EXPECT_EQ(r.outcome, Outcome::kGranted) << r.detail;
}

TEST_F(IntentTest, IntentsOfAVanishedClientExpire) {
  auto a = Open();
  auto b = Open();
  const KeyspaceId ks = Keyspace();
  ASSERT_EQ(Take(*a, a->NewIntentOwner(), 1, ks, "k", true).outcome, Outcome::kGranted);
  const uint64_t tb = b->NewIntentOwner();
  auto waiter = std::async(std::launch::async, [&] { return Take(*b, tb, 2, ks, "k", true); });
  EXPECT_TRUE(StillWaiting(waiter));
  a.reset();  // the holder's connections close without a release
  ASSERT_TRUE(Ready(waiter));
  EXPECT_EQ(waiter.get().outcome, Outcome::kGranted);
}

}  // namespace
}  // namespace ramp::testing
