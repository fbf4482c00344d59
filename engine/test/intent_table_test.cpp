// IntentTable's migration half (server/intent_table.h), in process: what Export takes, a
// rollback giving it back, a move back not resurrecting it, an end forwarded before the
// import, and the ends of exported holders passed on to where they went.
#include "server/intent_table.h"

#include <gtest/gtest.h>

namespace ramp::server {
namespace {

using Outcome = IntentTable::Outcome;
const PartitionId kPart{7, 3};
const IntentTable::Owner kA{1, 10};
const IntentTable::Owner kB{2, 20};

IntentTable::GrantFn NoGrant() {
  return [](const protocol::Header&, const PartitionId&, std::string_view, std::string*) {};
}

Outcome Take(IntentTable& t, const IntentTable::Owner& o) {
  std::vector<protocol::IntentHolder> holders;
  return t.Acquire(o, 1, kPart, "k", protocol::kIntentExclusive, false, protocol::Header(),
                   DeferredReply(), &holders);
}

TEST(IntentTableMigrationTest, ExportTakesTheHoldersAndARollbackGivesThemBack) {
  IntentTable t(NoGrant());
  ASSERT_EQ(Take(t, kA), Outcome::kGranted);
  std::vector<protocol::MovedIntent> out;
  t.Export(kPart, 2, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].owner, kA);
  EXPECT_EQ(out[0].key, "k");
  EXPECT_EQ(Take(t, kB), Outcome::kMoved);
  std::vector<protocol::MovedIntent> again;
  t.Export(kPart, 2, &again);  // a retried release
  EXPECT_EQ(again, out);
  t.Import(kPart, {}, /*take_back=*/true);
  EXPECT_EQ(Take(t, kB), Outcome::kHeld);
  t.Release(kA);
  EXPECT_EQ(Take(t, kB), Outcome::kGranted);
}

TEST(IntentTableMigrationTest, AMoveBackTakesWhatTheOwnerSinceHandsOver) {
  IntentTable t(NoGrant());
  ASSERT_EQ(Take(t, kA), Outcome::kGranted);
  std::vector<protocol::MovedIntent> out;
  t.Export(kPart, 2, &out);
  t.Import(kPart, {}, /*take_back=*/false);  // A's intent ended at the other server
  EXPECT_EQ(Take(t, kB), Outcome::kGranted);
}

TEST(IntentTableMigrationTest, AnEndForwardedBeforeTheImportIsNotImported) {
  IntentTable source(NoGrant());
  ASSERT_EQ(Take(source, kA), Outcome::kGranted);
  std::vector<protocol::MovedIntent> out;
  source.Export(kPart, 2, &out);
  IntentTable target(NoGrant());
  target.Expect(kPart);
  target.ReleaseForwarded(kA, kPart);
  target.Import(kPart, out, false);
  EXPECT_EQ(Take(target, kB), Outcome::kGranted);
  // Without the early end the holder is imported.
  IntentTable other(NoGrant());
  other.Expect(kPart);
  other.Import(kPart, out, false);
  EXPECT_EQ(Take(other, kB), Outcome::kHeld);
}

TEST(IntentTableMigrationTest, TheEndsOfExportedHoldersArePassedOn) {
  std::vector<std::pair<uint32_t, IntentTable::Released>> sent;
  IntentTable t(NoGrant(), {},
                [&](uint32_t node, IntentTable::Released r) { sent.emplace_back(node, r); });
  ASSERT_EQ(Take(t, kA), Outcome::kGranted);
  std::vector<protocol::MovedIntent> out;
  t.Export(kPart, 2, &out);
  t.Release(kA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, 2u);
  ASSERT_EQ(sent[0].second.size(), 1u);
  EXPECT_EQ(sent[0].second[0].first, kA);
  EXPECT_EQ(t.exported(), 0u);
  t.Release(kA);  // once only
  EXPECT_EQ(sent.size(), 1u);
  // A client that closed its last connection: its exported holders' ends go too.
  ASSERT_EQ(Take(t, kA), Outcome::kMoved);  // the partition is closed here
  IntentTable u(NoGrant(), {},
                [&](uint32_t node, IntentTable::Released r) { sent.emplace_back(node, r); });
  ASSERT_EQ(Take(u, kB), Outcome::kGranted);
  u.Export(kPart, 1, &out);
  u.ReleaseClient(kB.client);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].first, 1u);
}

}  // namespace
}  // namespace ramp::server
