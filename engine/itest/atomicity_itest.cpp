// The read-atomicity checker against three real servers, on every provider available; and
// the proof that it catches fractured reads: with RAMP's second round switched off (and
// COMMIT staggered between servers to open the window) it must report them.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "checker/atomicity_checker.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

class AtomicityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestClusterOptions o;
    o.nodes = 3;
    Status st = TestCluster::Start(o, &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }
  static std::unique_ptr<TestCluster> cluster_;
};
std::unique_ptr<TestCluster> AtomicityTest::cluster_;

checker::AtomicityCheckOptions Options(const TestCluster& c, Provider p, ReadPath r, WritePath w,
                                       KeyspaceId ks) {
  checker::AtomicityCheckOptions o;
  o.client = c.ClientOptionsFor(p, r, w);
  o.keyspace = ks;
  o.writers = 2;
  o.readers = 3;
  o.groups = 4;  // few groups: readers meet writers often
  o.keys_per_group = 6;
  o.duration_ms = 2000;
  return o;
}

struct Case {
  Provider provider;
  ReadPath read;
  WritePath write;
  const char* name;
};

class AtomicityPathTest : public AtomicityTest, public ::testing::WithParamInterface<Case> {};

TEST_P(AtomicityPathTest, NoFracturedReadsUnderConcurrentWrites) {
  auto o = Options(*cluster_, GetParam().provider, GetParam().read, GetParam().write,
                   0xA000 + static_cast<int>(GetParam().read));
  checker::AtomicityReport r = checker::RunAtomicityCheck(o);
  ASSERT_TRUE(r.error.ok()) << r.Summary();
  EXPECT_GT(r.commits, 0u) << r.Summary();
  EXPECT_GT(r.reads, 0u) << r.Summary();
  EXPECT_EQ(r.fractured, 0u) << r.Summary();
}

TEST_P(AtomicityPathTest, StaggeredCommitsAreRepairedByRoundTwo) {
  auto o = Options(*cluster_, GetParam().provider, GetParam().read, GetParam().write,
                   0xB000 + static_cast<int>(GetParam().read));
  o.client.debug_commit_delay_us = 2000;
  checker::AtomicityReport r = checker::RunAtomicityCheck(o);
  ASSERT_TRUE(r.error.ok()) << r.Summary();
  EXPECT_GT(r.commits, 0u) << r.Summary();
  EXPECT_EQ(r.fractured, 0u) << r.Summary();
}

INSTANTIATE_TEST_SUITE_P(
    Paths, AtomicityPathTest,
    ::testing::Values(Case{Provider::kTcp, ReadPath::kRpc, WritePath::kRpc, "rpc"},
                      Case{Provider::kShm, ReadPath::kGetPlus, WritePath::kPutPlus, "getplus"},
                      Case{Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus, "getstar"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// Two checkers at once on the same keys (the fault harness runs a short probe beside its
// workload): their writers must never share a client id, or two transactions may draw the
// same timestamp, and a server takes the second one's PREPARE for a resend of the first's.
TEST_F(AtomicityTest, ConcurrentCheckersNeverShareClientIds) {
  auto o = Options(*cluster_, Provider::kTcp, ReadPath::kRpc, WritePath::kRpc, 0xD000);
  o.duration_ms = 1000;
  checker::AtomicityReport a, b;
  std::thread other([&] { b = checker::RunAtomicityCheck(o); });
  a = checker::RunAtomicityCheck(o);
  other.join();
  for (const auto* r : {&a, &b}) {
    ASSERT_TRUE(r->error.ok()) << r->Summary();
    EXPECT_GT(r->commits, 0u) << r->Summary();
    EXPECT_EQ(r->fractured, 0u) << r->Summary();
    ASSERT_EQ(r->writer_client_ids.size(), static_cast<size_t>(o.writers));
  }
  for (uint64_t id : a.writer_client_ids) {
    EXPECT_EQ(std::count(b.writer_client_ids.begin(), b.writer_client_ids.end(), id), 0)
        << "both checkers have a writer with client id " << id;
  }
}

// The injected bug: no round 2. The checker must see it.
TEST_F(AtomicityTest, CheckerCatchesFracturedReadsWithoutRoundTwo) {
  for (auto read : {ReadPath::kGetStar, ReadPath::kRpc}) {
    const Provider p = read == ReadPath::kRpc ? Provider::kTcp : Provider::kShm;
    auto o =
        Options(*cluster_, p, read, read == ReadPath::kRpc ? WritePath::kRpc : WritePath::kPutPlus,
                0xC000 + static_cast<int>(read));
    o.client.disable_round2 = true;
    o.client.debug_commit_delay_us = 3000;
    o.stop_at_first_fracture = true;
    o.duration_ms = 30000;  // an upper bound: it stops at the first fractured read
    checker::AtomicityReport r = checker::RunAtomicityCheck(o);
    ASSERT_TRUE(r.error.ok()) << r.Summary();
    EXPECT_GT(r.fractured, 0u) << "the checker missed the injected bug: " << r.Summary();
    EXPECT_FALSE(r.first_fracture.empty());
  }
}

}  // namespace
}  // namespace ramp::testing
