// The client API a SQL engine uses (WriteBatch + Client::Write, ReadSession) against real
// rampd processes.
#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include "ramp/address_cache.h"
#include "ramp/client.h"
#include "ramp/keys.h"
#include "ramp/read_session.h"
#include "ramp/write_batch.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

class ClientApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestClusterOptions o;
    o.nodes = 3;
    Status st = TestCluster::Start(o, &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  std::unique_ptr<Client> Open() {
    std::unique_ptr<Client> c;
    Status st = Client::Open(
        cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus), &c);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return c;
  }
  // A keyspace per test so that tests do not see each other's keys.
  KeyspaceRef Table() const {
    return KeyspaceRef{
        KeyHash(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())), 8,
        false, false};
  }
  KeyspaceRef Index() const {
    KeyspaceRef r = Table();
    r.id ^= 0x1DE5;
    r.grouped = true;
    return r;
  }
  static std::vector<RowResult> Read(ReadSession& s, const KeyspaceRef& ks,
                                     std::vector<uint64_t> ids, RowReads how) {
    std::vector<RowRequest> rows;
    for (uint64_t id : ids) rows.push_back(RowRequest{ks.id, id, {}});
    std::vector<RowResult> out;
    Status st = s.ReadRows(rows, how, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  // Polls until a kLatest read of row `id` returns `value`: a commit reached the row's node.
  static void AwaitLatest(Client& c, const KeyspaceRef& ks, uint64_t id, std::string_view value) {
    for (;;) {
      auto probe = c.NewReadSession();
      if (Read(*probe, ks, {id}, RowReads::kLatest)[0].value == value) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  static std::unique_ptr<TestCluster> cluster_;
};
std::unique_ptr<TestCluster> ClientApiTest::cluster_;

TEST_F(ClientApiTest, WriteCommitsRowsAndGroupedEntriesAsOneTransaction) {
  auto c = Open();
  const KeyspaceRef table = Table(), index = Index();
  WriteBatch b(c->write_limits());
  for (uint64_t id = 1; id <= 50; id++) {
    ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "row" + std::to_string(id), 1, kTopSubTxn).ok());
    ASSERT_TRUE(b.Insert(index, EntryKey{id % 2, id}, "", 1, kTopSubTxn).ok());
  }
  // Inserted and deleted in the same transaction: never sent.
  b.Delete(table, EntryKey{0, 50}, 2, kTopSubTxn, false, nullptr);
  Timestamp ts;
  Status st = c->Write(b, &ts);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(ts.zero());
  EXPECT_EQ(b.size(), 100u);  // Write leaves the batch as it was

  auto r = c->NewReadSession();
  r->SetStatement(StatementTag{1, 0}, Timestamp());
  auto rows = Read(*r, table, {1, 49, 50, 51}, RowReads::kStatement);
  EXPECT_TRUE(rows[0].found);
  EXPECT_EQ(rows[0].value, "row1");
  EXPECT_EQ(rows[0].ts, ts);
  EXPECT_TRUE(rows[1].found);
  EXPECT_FALSE(rows[2].found);
  EXPECT_TRUE(rows[2].ts.zero());  // never written
  EXPECT_FALSE(rows[3].found);
  Timestamp remembered;
  ASSERT_TRUE(r->RecallVersion(table.id, 49, &remembered));
  EXPECT_EQ(remembered, ts);
  EXPECT_FALSE(r->RecallVersion(table.id, 50, &remembered));

  // The index keyspace is grouped (the Write defined it): one group, one partition.
  std::vector<GroupEntry> entries;
  ASSERT_TRUE(r->GetGroup(index.id, RowKey(1), &entries).ok());
  EXPECT_EQ(entries.size(), 25u);
  for (const GroupEntry& e : entries) {
    uint64_t id = 0;
    ASSERT_TRUE(DecodeRowKey(e.suffix, &id));
    EXPECT_EQ(id % 2, 1u);
    EXPECT_EQ(e.ts, ts);
  }
}

// ReadSession::GetGroup keeps a group's entries and serves them again after a one-sided
// read of the partition's group version: another client's commit to the group is seen at
// once (the version changed), and an unchanged group costs the servers nothing. With the
// check switched off (debug_trust_group_cache) the same reader misses the commit: the
// version check is what keeps the entries current.
TEST_F(ClientApiTest, KeptGroupEntriesAreServedOnlyWhileTheirPartitionIsUnchanged) {
  auto writer = Open();
  const KeyspaceRef table = Table(), index = Index();
  auto insert = [&](uint64_t from, uint64_t to) {
    WriteBatch b(writer->write_limits());
    for (uint64_t id = from; id <= to; id++) {
      ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "row", 1, kTopSubTxn).ok());
      ASSERT_TRUE(b.Insert(index, EntryKey{7, id}, "", 1, kTopSubTxn).ok());
    }
    Timestamp ts;
    Status st = writer->Write(b, &ts);
    ASSERT_TRUE(st.ok()) << st.ToString();
  };
  insert(1, 10);
  for (bool trust : {false, true}) {
    SCOPED_TRACE(trust ? "without the version check" : "with the version check");
    ClientOptions o =
        cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
    o.debug_trust_group_cache = trust;
    std::unique_ptr<Client> reader;
    ASSERT_TRUE(Client::Open(o, &reader).ok());
    auto r = reader->NewReadSession();
    std::vector<GroupEntry> entries;
    ASSERT_TRUE(r->GetGroup(index.id, RowKey(7), &entries).ok());
    const size_t before = entries.size();
    ASSERT_GE(before, 10u);
    EXPECT_EQ(reader->stats().group_cache_hits, 0u);
    // Unchanged: served from the kept entries.
    ASSERT_TRUE(r->GetGroup(index.id, RowKey(7), &entries).ok());
    EXPECT_EQ(entries.size(), before);
    EXPECT_EQ(reader->stats().group_cache_hits, 1u);
    // Another client commits an entry to the group.
    const uint64_t next = 100 + before;
    insert(next, next);
    ASSERT_TRUE(r->GetGroup(index.id, RowKey(7), &entries).ok());
    if (!trust) {
      EXPECT_EQ(entries.size(), before + 1);
      EXPECT_EQ(reader->stats().group_cache_hits, 1u);  // the version had changed
      // fresh: always the server's answer.
      ASSERT_TRUE(r->GetGroup(index.id, RowKey(7), &entries, /*fresh=*/true).ok());
      EXPECT_EQ(entries.size(), before + 1);
      EXPECT_EQ(reader->stats().group_cache_hits, 1u);
    } else {
      EXPECT_EQ(entries.size(), before);  // stale: what the version check prevents
      EXPECT_EQ(reader->stats().group_cache_hits, 2u);
    }
  }
}

// Groups of at most one entry also go to a shared address cache: a second client attached
// to it (a parallel worker, say) is served what the first read, after the same version check,
// and sees a commit to the group at once; an empty group is kept too.
TEST_F(ClientApiTest, OneEntryGroupsAreSharedThroughTheSharedAddressCache) {
  auto writer = Open();
  const KeyspaceRef table = Table(), index = Index();
  auto insert = [&](uint64_t group, uint64_t id) {
    WriteBatch b(writer->write_limits());
    ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "row", 1, kTopSubTxn).ok());
    ASSERT_TRUE(b.Insert(index, EntryKey{group, id}, "", 1, kTopSubTxn).ok());
    Status st = writer->Write(b);
    ASSERT_TRUE(st.ok()) << st.ToString();
  };
  {
    // A bulk write (its metadata names partitions): entries without siblings, one per group.
    WriteBatch bulk(writer->write_limits());
    for (uint64_t id = 1; id <= 70; id++) {
      ASSERT_TRUE(bulk.Insert(table, EntryKey{0, id}, "row", 1, kTopSubTxn).ok());
      ASSERT_TRUE(bulk.Insert(index, EntryKey{id, id}, "", 1, kTopSubTxn).ok());
    }
    ASSERT_TRUE(writer->Write(bulk).ok());
  }
  std::vector<char> memory(SharedAddressCacheBytes(4096) + 64);
  void* aligned =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.address_cache = AttachSharedAddressCache(aligned, SharedAddressCacheBytes(4096), true);
  ASSERT_NE(o.address_cache, nullptr);
  std::unique_ptr<Client> a, b;
  ASSERT_TRUE(Client::Open(o, &a).ok());
  ASSERT_TRUE(Client::Open(o, &b).ok());
  auto ra = a->NewReadSession();
  auto rb = b->NewReadSession();
  std::vector<GroupEntry> got_a, got_b;
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(5), &got_a).ok());
  ASSERT_EQ(got_a.size(), 1u);
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(600), &got_a).ok());  // empty
  EXPECT_TRUE(got_a.empty());
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(5), &got_a).ok());
  // b reads what a kept.
  ASSERT_TRUE(rb->GetGroup(index.id, RowKey(5), &got_b).ok());
  ASSERT_EQ(got_b.size(), 1u);
  EXPECT_EQ(got_b[0].suffix, got_a[0].suffix);
  EXPECT_EQ(got_b[0].ts, got_a[0].ts);
  EXPECT_EQ(got_b[0].value, got_a[0].value);
  EXPECT_TRUE(got_b[0].siblings.empty());
  ASSERT_TRUE(rb->GetGroup(index.id, RowKey(600), &got_b).ok());
  EXPECT_TRUE(got_b.empty());
  EXPECT_EQ(b->stats().shared_group_hits, 2u);
  // A commit to group 600: b sees it (the version changed), not the empty group it shared.
  insert(600, 600);
  ASSERT_TRUE(rb->GetGroup(index.id, RowKey(600), &got_b).ok());
  EXPECT_EQ(got_b.size(), 1u);
  EXPECT_EQ(b->stats().shared_group_hits, 2u);
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(600), &got_a).ok());
  EXPECT_EQ(got_a.size(), 1u);
}

// Groups of several entries (up to kMaxSharedGroupEntries, from writes at two timestamps here)
// are shared too: a second client gets exactly the first one's entries without a request,
// and sees a commit to the group at once.
TEST_F(ClientApiTest, SmallGroupsOfSeveralEntriesAreSharedThroughTheSharedAddressCache) {
  auto writer = Open();
  const KeyspaceRef table = Table(), index = Index();
  auto insert = [&](uint64_t group, uint64_t from, uint64_t to) {
    WriteBatch b(writer->write_limits());
    for (uint64_t id = from; id <= to; id++) {
      ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "row", 1, kTopSubTxn).ok());
      ASSERT_TRUE(b.Insert(index, EntryKey{group, id}, "", 1, kTopSubTxn).ok());
    }
    Status st = writer->Write(b);
    ASSERT_TRUE(st.ok()) << st.ToString();
  };
  {
    // Bulk writes (entries without siblings): group 9 gets 4 + 3 entries at two timestamps,
    // group 10 more than a shared group holds.
    WriteBatch bulk(writer->write_limits());
    for (uint64_t id = 1; id <= 70; id++) {
      ASSERT_TRUE(bulk.Insert(table, EntryKey{0, id}, "row", 1, kTopSubTxn).ok());
      ASSERT_TRUE(bulk.Insert(index, EntryKey{id <= 4 ? 9u : 10u, id}, "", 1, kTopSubTxn).ok());
    }
    ASSERT_TRUE(writer->Write(bulk).ok());
    bulk.Clear();
    for (uint64_t id = 71; id <= 140; id++) {
      ASSERT_TRUE(bulk.Insert(table, EntryKey{0, id}, "row", 1, kTopSubTxn).ok());
      ASSERT_TRUE(bulk.Insert(index, EntryKey{id <= 73 ? 9u : 11u, id}, "", 1, kTopSubTxn).ok());
    }
    ASSERT_TRUE(writer->Write(bulk).ok());
  }
  std::vector<char> memory(SharedAddressCacheBytes(4096) + 64);
  void* aligned =
      reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(memory.data()) + 63) & ~uintptr_t{63});
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.address_cache = AttachSharedAddressCache(aligned, SharedAddressCacheBytes(4096), true);
  ASSERT_NE(o.address_cache, nullptr);
  std::unique_ptr<Client> a, b;
  ASSERT_TRUE(Client::Open(o, &a).ok());
  ASSERT_TRUE(Client::Open(o, &b).ok());
  a->DefineKeyspace(index.id, index.buckets, index.grouped);
  b->DefineKeyspace(index.id, index.buckets, index.grouped);
  auto ra = a->NewReadSession();
  auto rb = b->NewReadSession();
  std::vector<GroupEntry> got_a, got_b;
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(9), &got_a).ok());
  ASSERT_EQ(got_a.size(), 7u);
  EXPECT_NE(got_a.front().ts, got_a.back().ts);
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(10), &got_a).ok());
  EXPECT_EQ(got_a.size(), 66u);
  ASSERT_TRUE(ra->GetGroup(index.id, RowKey(9), &got_a).ok());
  ASSERT_TRUE(rb->GetGroup(index.id, RowKey(9), &got_b).ok());
  EXPECT_EQ(b->stats().shared_group_hits, 1u);
  ASSERT_EQ(got_b.size(), got_a.size());
  for (size_t i = 0; i < got_a.size(); i++) {
    EXPECT_EQ(got_b[i].suffix, got_a[i].suffix) << i;
    EXPECT_EQ(got_b[i].ts, got_a[i].ts) << i;
    EXPECT_EQ(got_b[i].value, got_a[i].value) << i;
    EXPECT_TRUE(got_b[i].siblings.empty());
  }
  // Too large to share: b asks the server.
  ASSERT_TRUE(rb->GetGroup(index.id, RowKey(10), &got_b).ok());
  EXPECT_EQ(got_b.size(), 66u);
  EXPECT_EQ(b->stats().shared_group_hits, 1u);
  // A commit to group 9 (b kept nothing of it privately): b sees the new entry.
  insert(9, 200, 200);
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(o, &c).ok());
  c->DefineKeyspace(index.id, index.buckets, index.grouped);
  auto rcs = c->NewReadSession();
  ASSERT_TRUE(rcs->GetGroup(index.id, RowKey(9), &got_b).ok());
  EXPECT_EQ(got_b.size(), 8u);
  EXPECT_EQ(c->stats().shared_group_hits, 0u);
}

// Remembered versions are bounded (the oldest 2^18 rows back are forgotten first), and a row
// remembered again keeps its place but takes the new version.
TEST_F(ClientApiTest, RememberedVersionsForgetTheOldestFirst) {
  auto c = Open();
  auto r = c->NewReadSession();
  const KeyspaceId ks = Table().id;
  constexpr uint64_t kBound = uint64_t{1} << 18;
  for (uint64_t id = 1; id <= kBound; id++) r->RememberVersion(ks, id, Timestamp{id, 1});
  r->RememberVersion(ks, 1, Timestamp{7, 7});  // again: still the oldest
  Timestamp ts;
  ASSERT_TRUE(r->RecallVersion(ks, 1, &ts));
  EXPECT_EQ(ts, (Timestamp{7, 7}));
  for (uint64_t id = kBound + 1; id <= kBound + 1000; id++) {
    r->RememberVersion(ks, id, Timestamp{id, 1});
  }
  for (uint64_t id = 1; id <= 1000; id++) EXPECT_FALSE(r->RecallVersion(ks, id, &ts)) << id;
  for (uint64_t id = 1001; id <= kBound + 1000; id += 997) {
    ASSERT_TRUE(r->RecallVersion(ks, id, &ts)) << id;
    EXPECT_EQ(ts, (Timestamp{id, 1}));
  }
  EXPECT_FALSE(r->RecallVersion(ks ^ 1, 5000, &ts)) << "another keyspace";
}

TEST_F(ClientApiTest, InPlaceUpdateWithAStaleExpectedVersionConflicts) {
  auto c = Open();
  const KeyspaceRef table = Table();
  WriteBatch b(c->write_limits());
  ASSERT_TRUE(b.Insert(table, EntryKey{0, 7}, "v1", 1, kTopSubTxn).ok());
  Timestamp first;
  ASSERT_TRUE(c->Write(b, &first).ok());
  b.Clear();
  ASSERT_TRUE(b.UpdateInPlace(table, EntryKey{0, 7}, "v2", 1, kTopSubTxn, first).ok());
  Timestamp second;
  ASSERT_TRUE(c->Write(b, &second).ok());
  // A second writer that read v1 loses.
  b.Clear();
  ASSERT_TRUE(b.UpdateInPlace(table, EntryKey{0, 7}, "v3", 1, kTopSubTxn, first).ok());
  Status st = c->Write(b);
  EXPECT_TRUE(st.Is(Status::Code::kConflict)) << st.ToString();
  // Deleting with the right expected version works and leaves a tombstone.
  b.Clear();
  b.Delete(table, EntryKey{0, 7}, 1, kTopSubTxn, true, &second);
  ASSERT_TRUE(c->Write(b).ok());
  auto r = c->NewReadSession();
  auto rows = Read(*r, table, {7}, RowReads::kLatest);
  EXPECT_FALSE(rows[0].found);
  EXPECT_FALSE(rows[0].ts.zero());
}

TEST_F(ClientApiTest, BatchOverTheItemLimitIsRefusedAndWritesNothing) {
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.max_batch_items = 10;
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(o, &c).ok());
  const KeyspaceRef table = Table();
  WriteBatch b(c->write_limits());
  for (uint64_t id = 0; id < 11; id++) {
    ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "x", 1, kTopSubTxn).ok());
  }
  Status st = c->Write(b);
  EXPECT_TRUE(st.Is(Status::Code::kTooLarge)) << st.ToString();
  EXPECT_NE(st.message().find("transaction of 11 writes exceeds the batch limit of 10"),
            std::string::npos)
      << st.ToString();
  auto r = c->NewReadSession();
  auto rows = Read(*r, table, {0}, RowReads::kLatest);
  EXPECT_FALSE(rows[0].found);
}

// Client::WriteAhead commits the rows it is given as PUTs of their own and marks exactly
// those entries streamed: Write then sends only the rest (and counts only those against the
// batch limit). A row inserted and deleted in the batch is neither written ahead nor sent.
TEST_F(ClientApiTest, RowsWrittenAheadAreCommittedOnceAndWriteSendsOnlyTheRest) {
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.max_batch_items = 10;  // far fewer than the rows: only what was not written ahead counts
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::Open(o, &c).ok());
  KeyspaceRef table = Table();
  table.fresh = true;
  WriteBatch b(c->write_limits());
  std::vector<EntryKey> keys;
  for (uint64_t id = 1; id <= 300; id++) {
    ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "row" + std::to_string(id), 1, kTopSubTxn).ok());
    keys.push_back(EntryKey{0, id});
  }
  b.Delete(table, EntryKey{0, 5}, 2, kTopSubTxn, false, nullptr);
  // Pieces as a COPY makes them, more than WriteAhead keeps in flight before it waits for
  // the oldest: each is committed once, whichever call collects it.
  for (size_t first = 0; first < keys.size(); first += 30) {
    ASSERT_TRUE(c->WriteAhead(b, table, std::span(keys).subspan(first, 30)).ok());
  }
  for (uint64_t id = 1; id <= 300; id++) {
    const BatchEntry* e = b.Find(table.id, EntryKey{0, id});
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->streamed, id != 5) << "row " << id;
  }
  ASSERT_TRUE(c->FinishWriteAhead(&b).ok());
  ASSERT_TRUE(b.Insert(table, EntryKey{0, 301}, "row301", 3, kTopSubTxn).ok());
  Timestamp ts;
  Status st = c->Write(b, &ts);
  ASSERT_TRUE(st.ok()) << st.ToString();

  auto reader = Open();  // reads too are bounded by max_batch_items
  reader->DefineKeyspace(table.id, table.buckets);
  auto r = reader->NewReadSession();
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= 301; id++) ids.push_back(id);
  auto rows = Read(*r, table, ids, RowReads::kLatest);
  ASSERT_EQ(rows.size(), ids.size());
  for (size_t i = 0; i < rows.size(); i++) {
    const uint64_t id = ids[i];
    if (id == 5) {
      EXPECT_FALSE(rows[i].found);
      EXPECT_TRUE(rows[i].ts.zero()) << "row 5 was never to be written";
      continue;
    }
    ASSERT_TRUE(rows[i].found) << "row " << id;
    EXPECT_EQ(rows[i].value, "row" + std::to_string(id));
    // Written ahead: committed before the transaction's own PUT, not sent again by it.
    if (id <= 300) {
      EXPECT_LT(rows[i].ts, ts) << "row " << id << " was sent again at commit";
    } else {
      EXPECT_EQ(rows[i].ts, ts);
    }
  }
}

// A statement reads one snapshot: a commit after it is invisible until the next statement.
TEST_F(ClientApiTest, AStatementReadsItsSnapshotAndTheNextStatementSeesLaterCommits) {
  auto reader = Open();
  auto writer = Open();
  const KeyspaceRef table = Table();
  reader->DefineKeyspace(table.id, table.buckets, table.grouped);  // Write defines the writer's
  WriteBatch b(writer->write_limits());
  ASSERT_TRUE(b.Insert(table, EntryKey{0, 1}, "old", 1, kTopSubTxn).ok());
  Timestamp first;
  ASSERT_TRUE(writer->Write(b, &first).ok());
  auto probe = reader->Begin();
  const Timestamp snapshot = probe->SnapshotNow();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  b.Clear();
  ASSERT_TRUE(b.UpdateInPlace(table, EntryKey{0, 1}, "new", 1, kTopSubTxn, first).ok());
  ASSERT_TRUE(writer->Write(b).ok());

  auto r = reader->NewReadSession();
  r->SetStatement(StatementTag{10, 0}, snapshot);
  EXPECT_EQ(Read(*r, table, {1}, RowReads::kStatement)[0].value, "old");
  r->SetStatement(StatementTag{10, 0}, Timestamp());  // same statement: same snapshot
  EXPECT_EQ(Read(*r, table, {1}, RowReads::kSnapshot)[0].value, "old");
  EXPECT_EQ(Read(*r, table, {1}, RowReads::kLatest)[0].value, "new");
  ReadResult seq;
  ASSERT_TRUE(r->Get(table.id, RowKey(1), &seq).ok());
  EXPECT_EQ(seq.value, "old");
  r->SetStatement(StatementTag{10, 1}, Timestamp());
  EXPECT_EQ(Read(*r, table, {1}, RowReads::kStatement)[0].value, "new");
}

// A row read in one request names its siblings; a sibling read later in the statement is
// read at least at that version even when the snapshot predates it (RAMP's round 2 across
// requests), and a sibling read before at an older version makes the statement fail when
// the caller requires the newer version (it cannot read around it).
TEST_F(ClientApiTest, StatementBoundsCarryFromRequestToRequest) {
  auto reader = Open();
  auto writer = Open();
  const KeyspaceRef table = Table();
  reader->DefineKeyspace(table.id, table.buckets, table.grouped);  // Write defines the writer's
  WriteBatch b(writer->write_limits());
  for (uint64_t id : {1, 2, 3, 4}) {
    ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "old", 1, kTopSubTxn).ok());
  }
  ASSERT_TRUE(writer->Write(b).ok());
  auto probe = reader->Begin();
  const Timestamp snapshot = probe->SnapshotNow();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  b.Clear();
  for (uint64_t id : {1, 2, 3, 4}) {
    ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "new", 1, kTopSubTxn).ok());
  }
  Timestamp second;
  ASSERT_TRUE(writer->Write(b, &second).ok());

  auto r = reader->NewReadSession();
  r->SetStatement(StatementTag{20, 0}, snapshot);
  // Row 2 is read at the new version (as if an index entry written with it led there).
  std::vector<RowResult> out;
  const RowRequest two{table.id, 2, second};
  ASSERT_TRUE(r->ReadRows(std::span<const RowRequest>(&two, 1), RowReads::kStatement, &out).ok());
  EXPECT_EQ(out[0].value, "new");
  // Row 1, at the statement's older snapshot, is still read at the version row 2 names.
  auto rows = Read(*r, table, {1}, RowReads::kStatement);
  EXPECT_EQ(rows[0].value, "new");
  EXPECT_EQ(rows[0].ts, second);
  // Per request only (kSnapshot): the snapshot's version.
  EXPECT_EQ(Read(*r, table, {3}, RowReads::kSnapshot)[0].value, "old");

  // Another statement reads row 3 at the old version first, then row 4 at the new one.
  r->SetStatement(StatementTag{20, 1}, snapshot);
  EXPECT_EQ(Read(*r, table, {3}, RowReads::kStatement)[0].value, "old");
  const RowRequest four{table.id, 4, second};
  Status st = r->ReadRows(std::span<const RowRequest>(&four, 1), RowReads::kStatement, &out);
  EXPECT_TRUE(st.Is(Status::Code::kConflict)) << st.ToString();
}

// A statement that meets a commit half done -- applied at one partition, still on its way to
// another -- reads around it: the row it reads after the commit must show what was there
// before it, as the row it read before already did. Before, the statement failed (40001).
TEST_F(ClientApiTest, AStatementReadsAroundACommitItMetHalfDone) {
  auto reader = Open();
  const KeyspaceRef table = Table();
  reader->DefineKeyspace(table.id, table.buckets, table.grouped);
  // Row `first` lives on node 0, whose COMMIT the slow writer sends first; `second` elsewhere.
  auto row_on = [&](bool node0) {
    for (uint64_t id = 1;; id++) {
      const uint32_t home = HomeOf(PartitionId{table.id, BucketOf(RowKey(id), table.buckets)}, 3);
      if ((home == 0) == node0) return id;
    }
  };
  const uint64_t first = row_on(true), second = row_on(false);
  WriteBatch b(reader->write_limits());
  ASSERT_TRUE(b.Insert(table, EntryKey{0, first}, "old", 1, kTopSubTxn).ok());
  ASSERT_TRUE(b.Insert(table, EntryKey{0, second}, "old", 1, kTopSubTxn).ok());
  ASSERT_TRUE(reader->Write(b).ok());

  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.debug_commit_delay_us = 3'000'000;  // COMMIT at node 0, 3 s, then at the others
  std::unique_ptr<Client> slow;
  ASSERT_TRUE(Client::Open(o, &slow).ok());
  std::thread writer([&] {
    WriteBatch w(slow->write_limits());
    ASSERT_TRUE(w.Insert(table, EntryKey{0, first}, "new", 1, kTopSubTxn).ok());
    ASSERT_TRUE(w.Insert(table, EntryKey{0, second}, "new", 1, kTopSubTxn).ok());
    ASSERT_TRUE(slow->Write(w).ok());
  });
  // Until node 0 has the commit.
  AwaitLatest(*reader, table, first, "new");
  auto r = reader->NewReadSession();
  r->SetStatement(StatementTag{25, 0}, reader->Begin()->SnapshotNow());  // after the commit's ts
  const std::string before = Read(*r, table, {second}, RowReads::kStatement)[0].value;
  const uint64_t around = reader->stats().reads_around_commits;
  const std::string after = Read(*r, table, {first}, RowReads::kStatement)[0].value;
  writer.join();
  if (before == "new") GTEST_SKIP() << "the 3 s between the COMMITs passed before the read";
  EXPECT_EQ(after, "old") << "the statement saw half of the commit";
  EXPECT_EQ(reader->stats().reads_around_commits, around + 1);
  // The next statement sees the whole commit.
  r->SetStatement(StatementTag{25, 1}, reader->Begin()->SnapshotNow());
  auto rows = Read(*r, table, {first, second}, RowReads::kStatement);
  EXPECT_EQ(rows[0].value, "new");
  EXPECT_EQ(rows[1].value, "new");
}

// A bulk write names partitions, not keys: a multi-key snapshot read of rows two bulk
// transactions wrote fetches the older one's rows again by timestamp (round 2) to find that
// the newer one did not write them. The first such read closes the partitions at the
// statement's snapshot (as a scan does); later reads of the statement skip round 2 there and
// read the same rows.
TEST_F(ClientApiTest, BulkRowsNeedRoundTwoOnlyUntilTheirPartitionsAreClosed) {
  auto writer = Open();
  const KeyspaceRef table = Table();
  for (uint64_t from : {1, 101}) {
    WriteBatch b(writer->write_limits());
    for (uint64_t id = from; id < from + 100; id++) {
      ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "v" + std::to_string(id), 1, kTopSubTxn).ok());
    }
    ASSERT_TRUE(writer->Write(b).ok());
  }
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= 200; id += 3) ids.push_back(id);
  for (bool closes : {false, true}) {
    SCOPED_TRACE(closes ? "closing" : "debug_no_round2_closes");
    ClientOptions o =
        cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
    o.debug_no_round2_closes = !closes;
    std::unique_ptr<Client> reader;
    ASSERT_TRUE(Client::Open(o, &reader).ok());
    reader->DefineKeyspace(table.id, table.buckets, table.grouped);
    auto r = reader->NewReadSession();
    r->SetStatement(StatementTag{40, closes ? 1u : 0u}, reader->Begin()->SnapshotNow());
    auto first = Read(*r, table, ids, RowReads::kSnapshot);
    const ClientStats one = reader->stats();
    EXPECT_GT(one.round2_reads, 0u);
    auto second = Read(*r, table, ids, RowReads::kSnapshot);
    const ClientStats two = reader->stats();
    for (size_t i = 0; i < ids.size(); i++) {
      ASSERT_TRUE(first[i].found);
      EXPECT_EQ(first[i].value, "v" + std::to_string(ids[i]));
      EXPECT_EQ(second[i].value, first[i].value);
      EXPECT_EQ(second[i].ts, first[i].ts);
    }
    if (closes) {
      EXPECT_GT(one.partitions_closed, 0u);
      EXPECT_EQ(two.round2_reads, one.round2_reads);
      EXPECT_GT(two.round2_skipped, 0u);
    } else {
      EXPECT_EQ(one.partitions_closed, 0u);
      EXPECT_GT(two.round2_reads, one.round2_reads);
    }
  }
}

// A partition with a transaction at or below the snapshot still prepared is not closed: a
// bulk commit that reached node 0 and not yet the others is repaired by round 2 in every
// read of the statement (a partition closed regardless would let the second read return the
// old rows of the other nodes next to the new rows of node 0).
TEST_F(ClientApiTest, APartitionWithAnUndecidedTransactionIsNotClosed) {
  auto reader = Open();
  const KeyspaceRef table = Table();
  reader->DefineKeyspace(table.id, table.buckets, table.grouped);
  {
    WriteBatch b(reader->write_limits());
    for (uint64_t id = 1; id <= 100; id++) {
      ASSERT_TRUE(b.Insert(table, EntryKey{0, id}, "old", 1, kTopSubTxn).ok());
    }
    ASSERT_TRUE(reader->Write(b).ok());
  }
  uint64_t on_node0 = 0;
  for (uint64_t id = 1; on_node0 == 0; id++) {
    if (HomeOf(PartitionId{table.id, BucketOf(RowKey(id), table.buckets)}, 3) == 0) on_node0 = id;
  }
  ClientOptions o =
      cluster_->ClientOptionsFor(Provider::kShm, ReadPath::kGetStar, WritePath::kPutPlus);
  o.debug_commit_delay_us = 3'000'000;  // COMMIT at node 0, 3 s, then at the others
  std::unique_ptr<Client> slow;
  ASSERT_TRUE(Client::Open(o, &slow).ok());
  std::thread writer([&] {
    WriteBatch w(slow->write_limits());
    for (uint64_t id = 1; id <= 100; id++) {
      ASSERT_TRUE(w.Insert(table, EntryKey{0, id}, "new", 1, kTopSubTxn).ok());
    }
    ASSERT_TRUE(slow->Write(w).ok());
  });
  AwaitLatest(*reader, table, on_node0, "new");
  const auto seen = std::chrono::steady_clock::now();
  auto r = reader->NewReadSession();
  r->SetStatement(StatementTag{41, 0}, reader->Begin()->SnapshotNow());  // after the commit's ts
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= 100; id++) ids.push_back(id);
  auto first = Read(*r, table, ids, RowReads::kSnapshot);
  auto second = Read(*r, table, ids, RowReads::kSnapshot);
  const bool in_window = std::chrono::steady_clock::now() - seen < std::chrono::milliseconds(2500);
  writer.join();
  if (!in_window) GTEST_SKIP() << "the 3 s between the COMMITs passed before the reads";
  size_t fresh1 = 0, fresh2 = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    fresh1 += first[i].value == "new";
    fresh2 += second[i].value == "new";
  }
  EXPECT_EQ(fresh1, ids.size()) << "the first read saw half of the bulk commit";
  EXPECT_EQ(fresh2, ids.size()) << "the second read saw half of the bulk commit";
}

TEST_F(ClientApiTest, PrefetchedRowsBelongToTheirStatement) {
  auto c = Open();
  auto r = c->NewReadSession();
  r->SetStatement(StatementTag{30, 0}, Timestamp());
  r->Prefetch(1, 5, Timestamp{9, 9}, true, "row");
  const PrefetchedRow* p = r->Prefetched(1, 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->value, "row");
  EXPECT_EQ(r->Prefetched(1, 6), nullptr);
  r->SetStatement(StatementTag{30, 0}, Timestamp());
  EXPECT_NE(r->Prefetched(1, 5), nullptr);
  r->SetStatement(StatementTag{30, 1}, Timestamp());
  EXPECT_EQ(r->Prefetched(1, 5), nullptr);
}

// Two index scans of one statement (a self-join over one ramp_hash index) read the same row
// ahead; the one that moves on to its next key forgets it, the other still finds it.
TEST_F(ClientApiTest, APrefetchedRowStaysUntilEveryPrefetchOfItIsForgotten) {
  auto c = Open();
  auto r = c->NewReadSession();
  r->SetStatement(StatementTag{31, 0}, Timestamp());
  r->Prefetch(1, 5, Timestamp{9, 9}, true, "row");
  r->Prefetch(1, 5, Timestamp{9, 9}, true, "row");
  r->Unprefetch(1, 5);
  const PrefetchedRow* p = r->Prefetched(1, 5);
  ASSERT_NE(p, nullptr) << "one scan's Unprefetch dropped the row the other read ahead";
  EXPECT_EQ(p->value, "row");
  r->Unprefetch(1, 5);
  EXPECT_EQ(r->Prefetched(1, 5), nullptr);
  r->Unprefetch(1, 5);  // more forgets than prefetches: nothing to do
  r->Prefetch(1, 5, Timestamp{9, 9}, true, "row");
  r->Unprefetch(1, 5);
  EXPECT_EQ(r->Prefetched(1, 5), nullptr);
}

}  // namespace
}  // namespace ramp::testing
