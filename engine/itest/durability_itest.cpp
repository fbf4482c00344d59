// Durable partition servers with real rampd processes: restart after SIGKILL keeps every
// acknowledged commit; the termination protocol resolves transactions whose client
// vanished in every ordering of PREPARE and COMMIT; SIGKILL at random points under
// concurrent RAMP load (the read-atomicity checker, a ledger of acknowledged commits and a
// reader that must never go back in time); COMMITs acknowledged before their own sync
// survive a crash that loses them, and no reader sees them disappear;
// bad data directories give clear errors at start-up.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "checker/atomicity_checker.h"
#include "client/client_impl.h"
#include "common/record.h"
#include "itest_util.h"
#include "protocol/messages.h"
#include "raw_txn.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

constexpr int kTxnTimeoutMs = 1500;

TestClusterOptions DurableOptions(int nodes = 3) {
  TestClusterOptions o;
  o.nodes = nodes;
  o.shm = false;
  o.data = true;
  o.extra_args = {"--txn-timeout-ms", std::to_string(kTxnTimeoutMs)};
  return o;
}

std::unique_ptr<Client> OpenClient(const TestCluster& c, bool round2 = true,
                                   int timeout_ms = 10000) {
  ClientOptions o = c.ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  o.disable_round2 = !round2;
  o.timeout_ms = timeout_ms;
  std::unique_ptr<Client> client;
  Status st = Client::Open(o, &client);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return client;
}

Status PutAll(Client& c, KeyspaceId ks, const std::vector<std::string>& keys,
              const std::string& value) {
  auto txn = c.Begin();
  for (const auto& k : keys) RAMP_RETURN_IF_ERROR(txn->Put(ks, k, value));
  return txn->Commit();
}

// Reads keys; *values gets "" for a key not found.
Status ReadAll(Client& c, KeyspaceId ks, const std::vector<std::string>& keys,
               std::vector<std::string>* values) {
  std::vector<ReadItem> items;
  for (const auto& k : keys) items.push_back(ReadItem{ks, k, Timestamp()});
  std::vector<ReadResult> results;
  auto txn = c.Begin();
  RAMP_RETURN_IF_ERROR(txn->GetAll(items, &results));
  values->clear();
  for (const auto& r : results) values->push_back(r.found ? r.value : "");
  return Status::OK();
}

// Reads keys like ReadAll, retrying while a restarted server refuses them (a partition
// recovering a transaction in doubt answers Unavailable); *refused counts the refusals.
Status ReadServed(Client& c, KeyspaceId ks, const std::vector<std::string>& keys,
                  std::vector<std::string>* values, int* refused) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    Status st = ReadAll(c, ks, keys, values);
    if (!st.Is(Status::Code::kUnavailable) || std::chrono::steady_clock::now() > deadline) {
      return st;
    }
    ++*refused;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(DurabilityTest, CommitsSurviveSigkillOfEveryServer) {
  std::unique_ptr<TestCluster> cluster;
  ASSERT_TRUE(TestCluster::Start(DurableOptions(), &cluster).ok());
  const KeyspaceId ks = 0xD1;
  {
    auto client = OpenClient(*cluster);
    for (int i = 0; i < 200; ++i) {
      std::vector<std::string> keys;
      for (int m = 0; m < 4; ++m) keys.push_back("k" + std::to_string(i) + "/" + std::to_string(m));
      ASSERT_TRUE(PutAll(*client, ks, keys, "v" + std::to_string(i)).ok());
    }
  }
  for (int n = 0; n < cluster->size(); ++n) ASSERT_TRUE(cluster->Kill(n, SIGKILL).ok());
  for (int n = 0; n < cluster->size(); ++n) {
    Status st = cluster->Restart(n);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_NE(cluster->ReadLog(n).find("recovered"), std::string::npos);
  }
  auto client = OpenClient(*cluster, /*round2=*/false);
  int refused = 0;  // the last COMMITs may be in doubt (acknowledged before their sync)
  for (int i = 0; i < 200; ++i) {
    std::vector<std::string> keys, values;
    for (int m = 0; m < 4; ++m) keys.push_back("k" + std::to_string(i) + "/" + std::to_string(m));
    ASSERT_TRUE(ReadServed(*client, ks, keys, &values, &refused).ok());
    for (const auto& v : values) EXPECT_EQ(v, "v" + std::to_string(i));
  }
}

// ---- termination: a client that vanishes between and during PREPARE and COMMIT --------

class TerminationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Status st = TestCluster::Start(DurableOptions(), &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  // Three keys on three different servers.
  std::vector<std::string> Keys(int salt) {
    return {KeyOnNode(ks_, 0, 3, salt), KeyOnNode(ks_, 1, 3, salt), KeyOnNode(ks_, 2, 3, salt)};
  }
  // Waits (bounded) until a reader without RAMP's second round sees all keys with `want`
  // ("" = none of them): then every partition decided the same way.
  void ExpectResolvedTo(const std::vector<std::string>& keys, const std::string& want) {
    auto reader = OpenClient(*cluster_, /*round2=*/false);
    std::vector<std::string> values;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int refused = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      Status st = ReadServed(*reader, ks_, keys, &values, &refused);
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (values == std::vector<std::string>(keys.size(), want)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::string seen;
    for (const auto& v : values) seen += " '" + v + "'";
    ADD_FAILURE() << "not resolved to '" << want << "' in time; seen:" << seen;
  }

  // Waits (bounded) until the partitions of the keys listed in `which` decided t as `want`
  // (none left prepared).
  void ExpectDecided(RawTxn& t, std::vector<size_t> which, protocol::TxnState want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::string seen;
    while (std::chrono::steady_clock::now() < deadline) {
      seen.clear();
      bool all = true;
      for (size_t i : which) {
        protocol::TxnState s = protocol::TxnState::kUnknown;
        Status st = t.State(i, &s);
        all = all && st.ok() && s == want;
        seen += " " + std::to_string(static_cast<int>(s));
      }
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "not decided as " << static_cast<int>(want) << " in time; states:" << seen;
  }

  static std::unique_ptr<TestCluster> cluster_;
  const KeyspaceId ks_ = 0x7E;
};
std::unique_ptr<TestCluster> TerminationTest::cluster_;

TEST_F(TerminationTest, DiedMidPrepareIsAbortedAndALatePrepareRefused) {
  auto c = OpenClient(*cluster_);
  auto keys = Keys(1);
  RawTxn t(*c, ks_, keys);
  ASSERT_TRUE(t.Prepare(0, "x").ok());
  ASSERT_TRUE(t.Prepare(1, "x").ok());
  // The client dies: key 2's PREPARE never leaves. Both prepared ones are aborted (the
  // termination fenced key 2's partition, which now knows the transaction as aborted).
  ExpectDecided(t, {0, 1, 2}, protocol::TxnState::kAborted);
  ExpectResolvedTo(keys, "");
  // The PREPARE that was still on its way arrives late: refused, so the transaction can
  // never become visible at one partition only.
  Status late = t.Prepare(2, "x");
  EXPECT_TRUE(late.Is(Status::Code::kAborted)) << late.ToString();
  ExpectResolvedTo(keys, "");
}

TEST_F(TerminationTest, DiedAfterAllPreparesIsCommitted) {
  auto c = OpenClient(*cluster_);
  auto keys = Keys(2);
  RawTxn t(*c, ks_, keys);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(t.Prepare(i, "all").ok());
  ExpectDecided(t, {0, 1, 2}, protocol::TxnState::kCommitted);
  ExpectResolvedTo(keys, "all");
}

TEST_F(TerminationTest, DiedMidCommitIsCommittedEverywhere) {
  for (size_t committed : {1u, 2u}) {
    auto c = OpenClient(*cluster_);
    auto keys = Keys(10 + static_cast<int>(committed));
    RawTxn t(*c, ks_, keys);
    for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(t.Prepare(i, "mid").ok());
    for (size_t i = 0; i < committed; ++i) ASSERT_TRUE(t.Commit(i).ok());
    ExpectDecided(t, {0, 1, 2}, protocol::TxnState::kCommitted);
    ExpectResolvedTo(keys, "mid");
  }
}

TEST_F(TerminationTest, CommitLostInAServerCrashIsRecoveredAndCommitted) {
  auto c = OpenClient(*cluster_);
  auto keys = Keys(20);
  RawTxn t(*c, ks_, keys);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(t.Prepare(i, "crash").ok());
  ASSERT_TRUE(t.Commit(0).ok());
  // The server of key 2 dies before its COMMIT; it comes back with the version prepared
  // (the PREPARE was acknowledged, hence durable) and resolves it with its siblings.
  const int victim = static_cast<int>(t.node_of(2));
  ASSERT_TRUE(cluster_->Kill(victim, SIGKILL).ok());
  ASSERT_TRUE(cluster_->Restart(victim).ok());
  ExpectDecided(t, {0, 1, 2}, protocol::TxnState::kCommitted);
  ExpectResolvedTo(keys, "crash");
}

TEST_F(TerminationTest, DiedMidPrepareWhileAServerCrashedIsAborted) {
  auto c = OpenClient(*cluster_);
  auto keys = Keys(30);
  RawTxn t(*c, ks_, keys);
  ASSERT_TRUE(t.Prepare(0, "gone").ok());
  const int victim = static_cast<int>(t.node_of(0));
  ASSERT_TRUE(cluster_->Kill(victim, SIGKILL).ok());
  ASSERT_TRUE(cluster_->Restart(victim).ok());
  // Recovered prepared, then aborted: its siblings never saw the transaction.
  ExpectDecided(t, {0, 1, 2}, protocol::TxnState::kAborted);
  ExpectResolvedTo(keys, "");
  auto again = OpenClient(*cluster_);
  RawTxn probe(*again, ks_, keys);  // a fresh transaction still works on those keys
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(probe.Prepare(i, "after").ok());
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(probe.Commit(i).ok());
  ExpectResolvedTo(keys, "after");
}

// A COMMIT acknowledged to its client, seen by a reader, that never reached the server of
// key 2 (it crashed first; the client's staggered COMMIT reached node 0 only): after the
// restart a reader must not go back in time. The restarted server holds the transaction
// prepared; it refuses reads of that partition until it has resolved it with node 0.
TEST_F(TerminationTest, CommitThatNeverReachedACrashedServerIsNotReadBackInTime) {
  auto keys = Keys(40);
  ClientOptions o = cluster_->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  o.debug_commit_delay_us = 1500 * 1000;  // COMMIT at node 0, a pause, then at nodes 1 and 2
  std::unique_ptr<Client> writer;
  ASSERT_TRUE(Client::Open(o, &writer).ok());
  Status committed;
  std::thread commit([&] { committed = PutAll(*writer, ks_, keys, "seen"); });
  // A reader sees the transaction at node 0 (committed there), then node 2 crashes before
  // its COMMIT arrives; the client acknowledges the commit all the same (every PREPARE was).
  auto reader = OpenClient(*cluster_, /*round2=*/false);
  std::vector<std::string> values;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(ReadAll(*reader, ks_, {keys[0]}, &values).ok());
    if (values[0] == "seen") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(values[0], "seen");
  ASSERT_TRUE(cluster_->Kill(2, SIGKILL).ok());
  commit.join();
  ASSERT_TRUE(committed.ok()) << committed.ToString();
  ASSERT_TRUE(cluster_->Restart(2).ok());
  EXPECT_NE(cluster_->ReadLog(2).find("in doubt at restart"), std::string::npos);
  // At once after the restart: every key, read one at a time and together without RAMP's
  // second round, shows the commit (reads of the recovering partition are refused until
  // then, never answered with the older version).
  auto late = OpenClient(*cluster_, /*round2=*/false);
  int refused = 0;
  for (const auto& k : std::vector<std::vector<std::string>>{{keys[2]}, {keys[1]}, keys}) {
    ASSERT_TRUE(ReadServed(*late, ks_, k, &values, &refused).ok());
    for (const auto& v : values) EXPECT_EQ(v, "seen") << "a read went back in time";
  }
  std::cerr << "reads refused while recovering: " << refused << "\n";
}

// ---- early COMMIT acknowledgement: the COMMIT's own sync has not happened --------------

// Servers whose group commit waits kLogDelayMs before it writes each batch (a slow disk,
// RAMP_TEST_LOG_DELAY_MS): a COMMIT is acknowledged at once, its record stays in memory for
// that long, and a SIGKILL in that window loses it. Whatever a reader saw must survive.
class EarlyAckTest : public ::testing::Test {
 protected:
  static constexpr int kLogDelayMs = 700;
  static constexpr int kTimeoutMs = 5000;  // --txn-timeout-ms: above a PREPARE's latency

  void SetUp() override {
    TestClusterOptions o = DurableOptions(3);
    o.extra_args = {"--txn-timeout-ms", std::to_string(kTimeoutMs)};
    setenv("RAMP_TEST_LOG_DELAY_MS", std::to_string(kLogDelayMs).c_str(), 1);
    Status st = TestCluster::Start(o, &cluster_);
    unsetenv("RAMP_TEST_LOG_DELAY_MS");  // restarted servers sync at full speed
    ASSERT_TRUE(st.ok()) << st.ToString();
    keys_ = {KeyOnNode(ks_, 0, 3, 7), KeyOnNode(ks_, 1, 3, 7), KeyOnNode(ks_, 2, 3, 7)};
    writer_ = OpenClient(*cluster_, true, kTimeoutMs / 2);
    reader_ = OpenClient(*cluster_, /*round2=*/false, kTimeoutMs / 2);
    // The older version, made durable (every log writer idle again) before the test.
    ASSERT_TRUE(PutAll(*writer_, ks_, keys_, "old").ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kLogDelayMs));
  }

  // Commits "new" (acknowledged before its COMMIT records are written), reads key i at its
  // server, kills the servers in `victims` at once, restarts them, and checks that every
  // key, read alone and together, still shows "new".
  void CommitReadKillRestart(size_t i, const std::vector<int>& victims) {
    const auto started = std::chrono::steady_clock::now();
    ASSERT_TRUE(PutAll(*writer_, ks_, keys_, "new").ok());
    std::vector<std::string> values;
    ASSERT_TRUE(ReadAll(*reader_, ks_, {keys_[i]}, &values).ok());
    ASSERT_EQ(values[0], "new");
    for (int v : victims) ASSERT_TRUE(cluster_->Kill(v, SIGKILL).ok());
    // Only meaningful if the kill came before the COMMIT's batch was written.
    const auto acked_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
    std::cerr << "commit, read and kill took " << acked_ms << " ms\n";
    for (int v : victims) {
      Status st = cluster_->Restart(v);
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    // The COMMIT was really lost: the restarted servers found the transaction in doubt.
    for (int v : victims) {
      EXPECT_NE(cluster_->ReadLog(v).find("in doubt at restart"), std::string::npos)
          << "node " << v << " did not lose its COMMIT: the test proves nothing";
    }
    auto late = OpenClient(*cluster_, /*round2=*/false, kTimeoutMs / 2);
    int refused = 0;
    for (size_t k = 0; k < keys_.size(); ++k) {
      ASSERT_TRUE(ReadServed(*late, ks_, {keys_[k]}, &values, &refused).ok());
      EXPECT_EQ(values[0], "new") << "key " << k << ": a read went back in time";
    }
    ASSERT_TRUE(ReadServed(*late, ks_, keys_, &values, &refused).ok());
    EXPECT_EQ(values, std::vector<std::string>(3, "new"));
    std::cerr << "reads refused while recovering: " << refused << "\n";
  }

  std::unique_ptr<TestCluster> cluster_;
  const KeyspaceId ks_ = 0xEA;
  std::vector<std::string> keys_;
  std::unique_ptr<Client> writer_, reader_;
};

TEST_F(EarlyAckTest, ReadAfterAckedCommitSurvivesAServerCrashBeforeTheSync) {
  // Node 2 loses its COMMIT record; nodes 0 and 1 still have theirs (in memory): the
  // restarted node 2 learns from them that the transaction committed.
  CommitReadKillRestart(2, {2});
}

TEST_F(EarlyAckTest, ReadAfterAckedCommitSurvivesEveryServerCrashingBeforeTheSync) {
  // Every COMMIT record is lost: each server comes back with the transaction prepared and
  // asks the others while they ask it; all hold it prepared, so it commits (once older than
  // the termination timeout: its client could still have aborted it before that).
  CommitReadKillRestart(1, {0, 1, 2});
}

// ---- crash test: SIGKILL at random points under concurrent RAMP load -------------------

// log_delay_ms > 0: a slow disk (RAMP_TEST_LOG_DELAY_MS), so that every kill loses COMMITs
// that were acknowledged (early, before their sync) and already read.
void RunCrashTest(int log_delay_ms) {
  TestClusterOptions o = DurableOptions(3);
  o.workers = 2;
  std::unique_ptr<TestCluster> cluster;
  // Restarted servers inherit it too; unset whatever way this test ends.
  if (log_delay_ms > 0) setenv("RAMP_TEST_LOG_DELAY_MS", std::to_string(log_delay_ms).c_str(), 1);
  struct Unset {
    ~Unset() { unsetenv("RAMP_TEST_LOG_DELAY_MS"); }
  } unset;
  Status started = TestCluster::Start(o, &cluster);
  ASSERT_TRUE(started.ok()) << started.ToString();
  const KeyspaceId ks = 0xC4A5;
  const KeyspaceId ledger_ks = 0x1ED6;
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rng.seed(seed);

  std::atomic<bool> stop{false};
  // The atomicity checker: writers and readers on groups of keys over all servers.
  checker::AtomicityCheckOptions co;
  co.client = cluster->ClientOptionsFor(Provider::kTcp, ReadPath::kRpc, WritePath::kRpc);
  co.client.timeout_ms = 1000;  // below --txn-timeout-ms, as termination requires
  co.keyspace = ks;
  co.writers = 2;
  co.readers = 2;
  co.groups = 6;
  co.keys_per_group = 5;
  co.duration_ms = 9000;
  co.tolerate_unavailable = true;
  checker::AtomicityReport report;
  std::thread checker([&] { report = checker::RunAtomicityCheck(co); });

  // The ledger: transactions of fresh keys; every acknowledged one must survive.
  std::mutex mu;
  std::vector<int> acked, attempted;
  std::string ledger_error;
  auto LedgerKeys = [](int i) {
    std::vector<std::string> keys;
    for (int m = 0; m < 4; ++m)
      keys.push_back("ledger" + std::to_string(i) + "/" + std::to_string(m));
    return keys;
  };
  std::thread ledger([&] {
    ClientOptions lo = co.client;
    std::unique_ptr<Client> c;
    for (int i = 0; !stop; ++i) {
      if (c == nullptr && !Client::Open(lo, &c).ok()) {
        c.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        --i;
        continue;
      }
      std::vector<std::string> keys = LedgerKeys(i);
      keys.push_back("counter");  // one key every ledger transaction overwrites
      Status st = PutAll(*c, ledger_ks, keys, std::to_string(i));
      std::lock_guard lock(mu);
      (st.ok() ? acked : attempted).push_back(i);
      if (!st.ok() && !st.Is(Status::Code::kUnavailable) && !st.Is(Status::Code::kTimeout) &&
          ledger_error.empty()) {
        ledger_error = st.ToString();
      }
    }
  });

  // No read goes back in time: the ledger's counter key, read alone (no second round to
  // repair anything) over and over, across the kills and restarts, never decreases.
  std::string back_in_time;
  int counter_reads = 0;
  std::thread monotonic([&] {
    ClientOptions ro = co.client;
    ro.disable_round2 = true;
    std::unique_ptr<Client> c;
    int highest = -1;
    while (!stop) {
      if (c == nullptr && !Client::Open(ro, &c).ok()) {
        c.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<std::string> values;
      if (!ReadAll(*c, ledger_ks, {"counter"}, &values).ok() || values[0].empty()) continue;
      const int seen = std::stoi(values[0]);
      std::lock_guard lock(mu);
      ++counter_reads;
      if (seen < highest && back_in_time.empty()) {
        back_in_time = "counter read " + values[0] + " after " + std::to_string(highest);
      }
      highest = std::max(highest, seen);
    }
  });

  // Several kill points: a random server, at a random moment, restarted after a while.
  int kills = 0;
  for (int k = 0; k < 4; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500 + rng() % 1200));
    const int victim = static_cast<int>(rng() % 3);
    ASSERT_TRUE(cluster->Kill(victim, SIGKILL).ok());
    ++kills;
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
    Status st = cluster->Restart(victim);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  checker.join();
  stop = true;
  ledger.join();
  monotonic.join();
  EXPECT_EQ(kills, 4);
  EXPECT_TRUE(back_in_time.empty()) << "a read went back in time: " << back_in_time;
  EXPECT_GT(counter_reads, 0);
  EXPECT_TRUE(report.error.ok()) << report.Summary();
  EXPECT_GT(report.commits, 0u) << report.Summary();
  EXPECT_GT(report.reads, 0u) << report.Summary();
  EXPECT_EQ(report.fractured, 0u) << report.Summary();
  EXPECT_TRUE(ledger_error.empty()) << ledger_error;
  EXPECT_GT(acked.size(), 0u);

  // Every acknowledged ledger transaction is there, read by a client without RAMP's second
  // round: only once every partition decided alike does it see whole transactions. Those
  // left in doubt must be all or nothing after the termination timeout.
  auto reader = OpenClient(*cluster, /*round2=*/false);
  int refused = 0;  // partitions still resolving what the last kill left in doubt
  for (int i : acked) {
    std::vector<std::string> values;
    Status st = ReadServed(*reader, ledger_ks, LedgerKeys(i), &values, &refused);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (const auto& v : values)
      ASSERT_EQ(v, std::to_string(i)) << "acknowledged commit " << i << " lost";
  }
  std::vector<int> unresolved = attempted;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!unresolved.empty() && std::chrono::steady_clock::now() < deadline) {
    std::vector<int> still;
    for (int i : unresolved) {
      std::vector<std::string> values;
      Status st = ReadAll(*reader, ledger_ks, LedgerKeys(i), &values);
      const bool none = values == std::vector<std::string>(4, "");
      const bool all = values == std::vector<std::string>(4, std::to_string(i));
      if (!st.ok() || !(none || all)) still.push_back(i);
    }
    unresolved.swap(still);
    if (!unresolved.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(unresolved.empty()) << unresolved.size() << " transactions of " << attempted.size()
                                  << " in doubt stayed half decided past the termination timeout";
  // The checker's groups too: whole with round 1 alone once everything is decided.
  std::vector<int> groups;
  for (int g = 0; g < co.groups; ++g) groups.push_back(g);
  const auto deadline2 = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!groups.empty() && std::chrono::steady_clock::now() < deadline2) {
    std::vector<int> still;
    for (int g : groups) {
      std::vector<std::string> keys, values;
      for (int m = 0; m < co.keys_per_group; ++m) keys.push_back(checker::GroupMemberKey(g, m));
      Status st = ReadAll(*reader, ks, keys, &values);
      if (!st.ok() || values != std::vector<std::string>(keys.size(), values[0]))
        still.push_back(g);
    }
    groups.swap(still);
    if (!groups.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(groups.empty()) << groups.size() << " groups stayed half decided";
  int in_doubt_restarts = 0;
  for (int n = 0; n < cluster->size(); ++n) {
    const std::string log = cluster->ReadLog(n);
    for (size_t at = log.find("found in doubt at restart"); at != std::string::npos;
         at = log.find("found in doubt at restart", at + 1)) {
      ++in_doubt_restarts;
    }
  }
  if (log_delay_ms > 0) {
    EXPECT_GT(in_doubt_restarts, 0) << "no kill left a transaction in doubt";
  }
  std::cerr << "crash test (log delay " << log_delay_ms << " ms): " << report.Summary()
            << "; ledger " << acked.size() << " acknowledged, " << attempted.size()
            << " in doubt; counter read " << counter_reads << " times; " << in_doubt_restarts
            << " restarts found transactions in doubt\n";
}

TEST(CrashTest, SigkillUnderLoadLosesNoAcknowledgedCommitAndFracturesNoRead) {
  RunCrashTest(0);
}

// The same on a slow disk: COMMITs are acknowledged 20 ms or more before they are written,
// so kills lose acknowledged (and read) COMMITs; recovery must bring every one back before
// their partitions serve reads again.
TEST(CrashTest, SigkillLosingAcknowledgedUnsyncedCommitsLosesNothingAndNeverGoesBackInTime) {
  RunCrashTest(20);
}

// ---- bad data directories: a clear error at start-up, no crash loop -------------------

class BadDataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(TestCluster::Start(DurableOptions(1), &cluster_).ok());
    auto c = OpenClient(*cluster_);
    ASSERT_TRUE(PutAll(*c, 5, {"a", "b", "c"}, "v").ok());
    data_ = cluster_->dir() + "/data0";
  }
  // Stops the server (cleanly: a checkpoint, so the write-ahead log holds nothing that
  // would repair the damage), runs f on its data directory, starts it again.
  Status RestartAfter(const std::function<void()>& f) {
    EXPECT_TRUE(cluster_->Kill(0, SIGTERM).ok());
    f();
    return cluster_->Restart(0);
  }
  std::unique_ptr<TestCluster> cluster_;
  std::string data_;
};

TEST_F(BadDataDirTest, AnotherClustersDataDirectoryIsRefused) {
  Status st = RestartAfter([&] {
    std::string text;
    {
      std::ifstream f(data_ + "/RAMP_DATA");
      std::stringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    }
    // Sealed with a valid checksum but another cluster's id.
    text = text.substr(0, text.rfind("crc "));
    const size_t at = text.find("cluster ") + 8;
    text[at] = text[at] == '0' ? '1' : '0';
    char crc[32];
    std::snprintf(crc, sizeof(crc), "crc %08x\n", record::Crc32c(text.data(), text.size()));
    std::ofstream(data_ + "/RAMP_DATA", std::ios::trunc) << text << crc;
  });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("belongs to another cluster"), std::string::npos) << st.ToString();
}

TEST_F(BadDataDirTest, CorruptedPageInTheMiddleIsRefusedWithItsFileAndPage) {
  // Enough data for more than one page in one partition.
  auto c = OpenClient(*cluster_);
  const std::string big(3000, 'z');
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(PutAll(*c, 5, {"a"}, big + std::to_string(i)).ok());
  c.reset();
  std::string victim;
  Status st = RestartAfter([&] {
    // The first segment file of the partition of "a" (page 1 of ~15 written).
    char dir[64];
    std::snprintf(dir, sizeof(dir), "/p-%016llx-%u/0000000000.seg", 5ull,
                  BucketOf("a", kDefaultBuckets));
    victim = data_ + dir;
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8192 + 700);
    f.put('\x42');
  });
  ASSERT_FALSE(victim.empty());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Corruption"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(victim), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("page 1"), std::string::npos) << st.ToString();
}

// A small tmpfs (20 MiB) as the data directory: the disk fills up under writes. Needs root (mount);
// skipped otherwise, the unit tests cover it with an injected fault.
TEST(FullDiskTest, FullDiskGivesClearErrorsAndKeepsAcknowledgedCommits) {
  char tmpl[] = "/tmp/ramp-fulldisk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string mnt = tmpl;
  // Room for the 16 MiB write-ahead log and a few MiB of partition logs.
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=20m") != 0) {
    rmdir(mnt.c_str());
    GTEST_SKIP() << "cannot mount a tmpfs here (not root?): covered by store_durable_test";
  }
  TestClusterOptions o = DurableOptions(1);
  o.data = false;
  o.extra_args.push_back("--data");
  o.extra_args.push_back(mnt + "/data");
  {
    std::unique_ptr<TestCluster> cluster;
    ASSERT_TRUE(TestCluster::Start(o, &cluster).ok());
    auto c = OpenClient(*cluster);
    const std::string value(4000, 'f');
    int acked = 0;
    Status failure;
    for (int i = 0; i < 5000 && failure.ok(); ++i) {
      failure = PutAll(*c, 9, {"f" + std::to_string(i)}, value);
      if (failure.ok()) ++acked;
    }
    EXPECT_TRUE(failure.Is(Status::Code::kNoSpace)) << failure.ToString();
    EXPECT_NE(failure.message().find("No space left"), std::string::npos) << failure.ToString();
    EXPECT_GT(acked, 0);
    // Further writes are refused with the reason, reads still served.
    Status again = PutAll(*c, 9, {"late"}, "x");
    EXPECT_FALSE(again.ok());
    std::vector<std::string> values;
    ASSERT_TRUE(ReadAll(*c, 9, {"f0"}, &values).ok());
    EXPECT_EQ(values[0], value);
    // The server is still up (no crash loop). The operator makes room (here: a bigger
    // tmpfs) and restarts it: everything acknowledged is there.
    EXPECT_TRUE(cluster->running(0));
    ASSERT_TRUE(cluster->Kill(0, SIGKILL).ok());
    ASSERT_EQ(mount("tmpfs", mnt.c_str(), "tmpfs", MS_REMOUNT, "size=64m"), 0);
    Status st = cluster->Restart(0);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto r = OpenClient(*cluster);
    for (int i = 0; i < acked; ++i) {
      int refused = 0;
      ASSERT_TRUE(ReadServed(*r, 9, {"f" + std::to_string(i)}, &values, &refused).ok());
      EXPECT_EQ(values[0], value) << i;
    }
  }
  umount2(mnt.c_str(), MNT_DETACH);
  rmdir(mnt.c_str());
}

TEST(ReadOnlyDataDirTest, ReadOnlyDataDirectoryIsRefusedAtStart) {
  char tmpl[] = "/tmp/ramp-rodisk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string mnt = tmpl;
  if (mount("tmpfs", mnt.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
    rmdir(mnt.c_str());
    GTEST_SKIP() << "cannot mount a tmpfs here (not root?): covered by store_durable_test";
  }
  TestClusterOptions o = DurableOptions(1);
  o.data = false;
  o.extra_args.push_back("--data");
  o.extra_args.push_back(mnt);
  std::unique_ptr<TestCluster> cluster;
  Status st = TestCluster::Start(o, &cluster);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not writable"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("Read-only file system"), std::string::npos) << st.ToString();
  umount2(mnt.c_str(), MNT_DETACH);
  rmdir(mnt.c_str());
}

// The page I/O memory budget evicts pages to page files; the durable log checkpoints pages
// from memory. Until the two share files, asking for both is refused with the reason.
TEST(MemoryBudgetTest, BudgetWithADataDirectoryIsRefusedWithTheReason) {
  TestClusterOptions o = DurableOptions(1);
  o.page_files = true;
  o.extra_args.push_back("--memory-budget-mb=8");
  std::unique_ptr<TestCluster> cluster;
  Status st = TestCluster::Start(o, &cluster);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot be combined with --data"), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace ramp::testing
