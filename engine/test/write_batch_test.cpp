// WriteBatch: command-id visibility, subtransaction undo, ordered per-group visits, in-place
// updates, keys of the caller's layout, and the one size check.
#include "ramp/write_batch.h"

#include <gtest/gtest.h>

#include <vector>

#include "ramp/keys.h"

namespace ramp {
namespace {

const KeyspaceRef kTable{0x7AB1E, 16, false, false};
const KeyspaceRef kIndex{0x1DE5, 16, true, false};

TEST(WriteBatchTest, CommandIdsDecideWhatAReaderSees) {
  WriteBatch b;
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 1}, "one", 5, kTopSubTxn).ok());
  const BatchEntry* w = b.Find(kTable.id, EntryKey{0, 1});
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(Visibility{5}.SeesInsert(*w));  // the inserting command does not see it
  EXPECT_TRUE(Visibility{6}.SeesInsert(*w));
  EXPECT_TRUE(Visibility{}.SeesInsert(*w));
  b.Delete(kTable, EntryKey{0, 1}, 7, kTopSubTxn, false, nullptr);
  w = b.Find(kTable.id, EntryKey{0, 1});
  EXPECT_FALSE(Visibility{7}.SeesDelete(*w));
  EXPECT_TRUE(Visibility{8}.SeesDelete(*w));
  EXPECT_FALSE((Visibility{8, true}.SeesDelete(*w)));  // SnapshotAny keeps it visible
  EXPECT_FALSE(w->sent());                             // inserted and deleted here: never sent
  EXPECT_EQ(b.size(), 1u);
}

TEST(WriteBatchTest, RollbackOfASubtransactionUndoesItsWritesOnly) {
  WriteBatch b;
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 1}, "top", 1, kTopSubTxn).ok());
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 2}, "sub2", 2, 2).ok());
  b.Delete(kTable, EntryKey{0, 1}, 2, 2, false, nullptr);
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 3}, "sub3", 3, 3).ok());
  b.RollbackSubtransaction(3);
  EXPECT_EQ(b.Find(kTable.id, EntryKey{0, 3}), nullptr);
  EXPECT_NE(b.Find(kTable.id, EntryKey{0, 2}), nullptr);
  b.RollbackSubtransaction(2);
  EXPECT_EQ(b.Find(kTable.id, EntryKey{0, 2}), nullptr);
  const BatchEntry* top = b.Find(kTable.id, EntryKey{0, 1});
  ASSERT_NE(top, nullptr);
  EXPECT_FALSE(top->deleted);  // the delete of subtransaction 2 is undone
  EXPECT_EQ(top->value, "top");
  EXPECT_EQ(b.size(), 1u);
}

TEST(WriteBatchTest, GroupsAreVisitedInRowIdOrderWithUndoneEntriesSkipped) {
  WriteBatch b;
  for (uint64_t id : {9, 3, 7, 1}) {
    ASSERT_TRUE(b.Insert(kIndex, EntryKey{42, id}, "", 1, kTopSubTxn).ok());
  }
  ASSERT_TRUE(b.Insert(kIndex, EntryKey{41, 5}, "", 1, kTopSubTxn).ok());
  ASSERT_TRUE(b.Insert(kIndex, EntryKey{42, 4}, "", 1, 2).ok());
  b.RollbackSubtransaction(2);
  std::vector<uint64_t> seen;
  b.Of(kIndex.id)->ForEachInGroup(42, 3, [&](const EntryKey& k, const BatchEntry&) {
    seen.push_back(k.rowid);
    return true;
  });
  EXPECT_EQ(seen, (std::vector<uint64_t>{3, 7, 9}));
  // Rows appended later (growing ids) merge into the sorted list.
  ASSERT_TRUE(b.Insert(kIndex, EntryKey{42, 2}, "", 2, kTopSubTxn).ok());
  seen.clear();
  b.Of(kIndex.id)->ForEachInGroup(42, 0, [&](const EntryKey& k, const BatchEntry&) {
    seen.push_back(k.rowid);
    return k.rowid < 3;
  });
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(WriteBatchTest, InPlaceUpdatesKeepTheirExpectedVersion) {
  WriteBatch b;
  const Timestamp read{100, 1};
  ASSERT_TRUE(b.UpdateInPlace(kTable, EntryKey{0, 8}, "new", 4, kTopSubTxn, read).ok());
  const BatchEntry* w = b.Find(kTable.id, EntryKey{0, 8});
  EXPECT_TRUE(w->in_place && w->remote && w->has_expected);
  EXPECT_EQ(w->expected, read);
  EXPECT_FALSE(Visibility{4}.SeesInsert(*w));  // the updating command sees the old version
  const Timestamp other{200, 2};
  b.Delete(kTable, EntryKey{0, 8}, 5, kTopSubTxn, true, &other);
  w = b.Find(kTable.id, EntryKey{0, 8});
  EXPECT_EQ(w->expected, read);  // the first expected version stays
  EXPECT_TRUE(w->sent());        // a committed row's deletion is sent
}

TEST(WriteBatchTest, OneSizeCheckRefusesOversizedValuesAndBuffersNothing) {
  WriteBatch b(WriteLimits{16, 8});
  Status st = b.Insert(kTable, EntryKey{0, 1}, std::string(9, 'x'), 1, kTopSubTxn);
  EXPECT_TRUE(st.Is(Status::Code::kTooLarge)) << st.ToString();
  st = b.UpdateInPlace(kTable, EntryKey{0, 1}, std::string(9, 'x'), 1, kTopSubTxn, {});
  EXPECT_TRUE(st.Is(Status::Code::kTooLarge));
  EXPECT_TRUE(b.PutKey(1, "k", std::string(9, 'x')).Is(Status::Code::kTooLarge));
  EXPECT_TRUE(b.PutKey(1, std::string(17, 'k'), "v").Is(Status::Code::kTooLarge));
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.Insert(kTable, EntryKey{0, 1}, std::string(8, 'x'), 1, kTopSubTxn).ok());
}

TEST(WriteBatchTest, KeysOfTheCallersLayoutKeepTheFirstExpectedVersion) {
  WriteBatch b;
  const Timestamp read{7, 7};
  ASSERT_TRUE(b.PutKey(3, "seq", "1", &read).ok());
  ASSERT_TRUE(b.PutKey(3, "seq", "2").ok());
  ASSERT_TRUE(b.DeleteKey(4, "seq").ok());
  const KeyWrite* w = b.FindKey(3, "seq");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->value, "2");
  EXPECT_TRUE(w->has_expected);
  EXPECT_EQ(w->expected, read);
  EXPECT_TRUE(b.FindKey(4, "seq")->tombstone);
  EXPECT_EQ(b.size(), 2u);
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.FindKey(3, "seq"), nullptr);
}

TEST(WriteBatchTest, DiscardKeyspaceDropsItsWritesAndTheirUndo) {
  WriteBatch b;
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 1}, "a", 1, 2).ok());
  ASSERT_TRUE(b.Insert(kIndex, EntryKey{1, 1}, "", 1, 2).ok());
  b.DiscardKeyspace(kTable.id);
  EXPECT_FALSE(b.HasWritesTo(kTable.id));
  EXPECT_EQ(b.size(), 1u);
  b.RollbackSubtransaction(2);
  EXPECT_TRUE(b.empty());
}

// Rows written ahead (Client::WriteAhead) are not sent again; a later write of one is, as
// a replacement of a committed version (a delete as a tombstone), and undoing that write
// (ROLLBACK TO) brings the written-ahead entry back.
TEST(WriteBatchTest, EntriesWrittenAheadAreSentAgainOnlyWhenWrittenAgain) {
  WriteBatch b;
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 1}, "one", 1, kTopSubTxn).ok());
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 2}, "two", 1, kTopSubTxn).ok());
  ASSERT_TRUE(b.SetStreamed(kTable.id, EntryKey{0, 1}, true));
  ASSERT_TRUE(b.SetStreamed(kTable.id, EntryKey{0, 2}, true));
  EXPECT_FALSE(b.SetStreamed(kTable.id, EntryKey{0, 3}, true));  // no such entry
  EXPECT_FALSE(b.Find(kTable.id, EntryKey{0, 1})->sent());
  // A delete of a row written ahead, inside a subtransaction: a tombstone ...
  b.Delete(kTable, EntryKey{0, 1}, 2, 2, false, nullptr);
  const BatchEntry* w = b.Find(kTable.id, EntryKey{0, 1});
  EXPECT_TRUE(w->sent());
  EXPECT_TRUE(w->remote);
  EXPECT_FALSE(w->streamed);
  // ... until the subtransaction rolls back: written ahead again, nothing to send.
  b.RollbackSubtransaction(2);
  w = b.Find(kTable.id, EntryKey{0, 1});
  EXPECT_TRUE(w->streamed);
  EXPECT_FALSE(w->deleted);
  EXPECT_FALSE(w->sent());
  // A new value at top level is sent (over the version written ahead).
  ASSERT_TRUE(b.Insert(kTable, EntryKey{0, 2}, "two'", 3, kTopSubTxn).ok());
  w = b.Find(kTable.id, EntryKey{0, 2});
  EXPECT_TRUE(w->sent());
  EXPECT_EQ(w->value, "two'");
  // Unmarked (its PUT aborted): sent with the rest.
  ASSERT_TRUE(b.SetStreamed(kTable.id, EntryKey{0, 1}, false));
  EXPECT_TRUE(b.Find(kTable.id, EntryKey{0, 1})->sent());
}

TEST(RowKeyTest, RowKeysAreBigEndianAndOnlyEightBytesDecode) {
  EXPECT_EQ(RowKey(0x0102), std::string("\0\0\0\0\0\0\x01\x02", 8));
  uint64_t id = 0;
  EXPECT_TRUE(DecodeRowKey(RowKey(123456789), &id));
  EXPECT_EQ(id, 123456789u);
  EXPECT_FALSE(DecodeRowKey(std::string_view("\0rowid-seq", 10), &id));
}

}  // namespace
}  // namespace ramp
