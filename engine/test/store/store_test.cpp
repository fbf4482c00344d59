// Store: RAMP-Fast semantics of PREPARE / COMMIT / ABORT / GET, termination, watermarks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "numbered.h"
#include "store_test_util.h"

namespace ramp::store {
namespace {

using ::ramp::testing::Numbered;

using testing::Part;
using testing::SiblingKeys;
using testing::Ts;

class RampStoreTest : public testing::StoreTest {};

TEST_F(RampStoreTest, PreparedVersionIsVisibleByTimestampOnlyUntilCommit) {
  const std::string meta = SiblingKeys({"y"});
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "v10", meta).ok());
  EXPECT_EQ(Get("x").status, ReadStatus::kNotFound);
  // Round 2 may fetch a version that is prepared but not committed here yet.
  ReadResult r = Get("x", Ts(10));
  ASSERT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(r.value, "v10");
  EXPECT_EQ(r.metadata, meta);

  ASSERT_TRUE(Commit(Ts(10)).ok());
  r = Get("x");
  ASSERT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(r.ts, Ts(10));
  EXPECT_EQ(r.value, "v10");
  EXPECT_EQ(r.metadata, meta);
  EXPECT_EQ(r.flags, 0);
}

// KeyHash is a bijection on 8-byte keys (types.cpp: Mix, xor, add, Mix), so an 8-byte key
// with any given hash can be built: here one that collides with a key of another length.
uint64_t Mix(uint64_t x) {  // types.cpp's mixer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}
uint64_t UndoXorShift(uint64_t y, int shift) {
  uint64_t x = y;
  for (int i = 0; i < 64 / shift + 1; ++i) x = y ^ (x >> shift);
  return x;
}
uint64_t InverseOfOdd(uint64_t m) {  // m * result = 1 mod 2^64 (Newton)
  uint64_t inv = m;
  for (int i = 0; i < 6; ++i) inv *= 2 - m * inv;
  return inv;
}
uint64_t UndoMix(uint64_t x) {
  x = UndoXorShift(x, 31);
  x *= InverseOfOdd(0x94D049BB133111EBull);
  x = UndoXorShift(x, 27);
  x *= InverseOfOdd(0xBF58476D1CE4E5B9ull);
  return UndoXorShift(x, 30);
}
std::string EightByteKeyWithHash(uint64_t hash) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  const uint64_t word = UndoMix(UndoMix(hash) - kGolden) ^ Mix(8 * kGolden + kGolden);
  std::string key(8, '\0');
  for (int i = 0; i < 8; ++i) key[i] = static_cast<char>(word >> (8 * i));  // little-endian
  return key;
}

// A partition of 8-byte keys finds a key by its hash alone (no read of the record to compare
// keys); a key of another length ends that, also when its hash equals a row key's.
TEST_F(RampStoreTest, KeysOfOtherLengthsWithTheHashOfAnEightByteKeyStayApart) {
  const std::string other("\0immv-writers", 13);
  const std::string row = EightByteKeyWithHash(KeyHash(other));
  ASSERT_EQ(row.size(), 8u);
  ASSERT_EQ(KeyHash(row), KeyHash(other)) << "KeyHash changed: update EightByteKeyWithHash";
  // The other key first, then the row key (bucket 1), and the other way round (bucket 2).
  Put(Ts(10), other, "other", Part(1));
  Put(Ts(20), row, "row", Part(1));
  Put(Ts(10), row, "row", Part(2));
  Put(Ts(20), other, "other", Part(2));
  for (uint32_t bucket : {1u, 2u}) {
    const ReadResult r = Get(row, {}, 0, Part(bucket));
    const ReadResult o = Get(other, {}, 0, Part(bucket));
    EXPECT_EQ(r.value, "row") << "bucket " << bucket;
    EXPECT_EQ(o.value, "other") << "bucket " << bucket;
    EXPECT_NE(r.ts, o.ts) << "bucket " << bucket;
  }
}

TEST_F(RampStoreTest, OverwrittenVersionStaysReadableByTimestamp) {
  Put(Ts(10), "x", "old");
  Put(Ts(20), "x", "new");
  EXPECT_EQ(Get("x").value, "new");
  EXPECT_EQ(Get("x", Ts(10)).value, "old");
  EXPECT_EQ(Get("x", Ts(20)).value, "new");
  EXPECT_EQ(Get("x", Ts(15)).status, ReadStatus::kNotFound);
}

TEST_F(RampStoreTest, SnapshotReadsReturnNewestCommittedAtOrBefore) {
  Put(Ts(10), "x", "a");
  Put(Ts(20), "x", "b");
  ASSERT_TRUE(Prepare(Ts(30), Part(), "x", "prepared").ok());
  EXPECT_EQ(Get("x", Ts(5), kReadSnapshot).status, ReadStatus::kNotFound);
  EXPECT_EQ(Get("x", Ts(10), kReadSnapshot).value, "a");
  EXPECT_EQ(Get("x", Ts(19), kReadSnapshot).value, "a");
  EXPECT_EQ(Get("x", Ts(25), kReadSnapshot).value, "b");
  // A prepared version is not part of any snapshot.
  EXPECT_EQ(Get("x", Ts(40), kReadSnapshot).value, "b");
}

// A bulk PREPARE (a COPY's): fresh keys, keys with a committed version and a key another
// transaction holds prepared, whose versions share their KeyVersions. An ABORT leaves
// exactly what was there; a COMMIT makes every key current with the new value.
TEST_F(RampStoreTest, BulkPrepareThenAbortOrCommitLeavesExactlyTheDecidedVersions) {
  constexpr int kKeys = 3000;
  for (int i = 0; i < kKeys; i += 3) Put(Ts(100 + i), "k" + std::to_string(i), "old");
  ASSERT_TRUE(Prepare(Ts(5000), Part(), "k1", "other").ok());
  const StoreStats before = store_->stats();
  auto bulk = [&](const Timestamp& ts) {
    std::vector<std::string> keys;
    for (int i = 0; i < kKeys; i++) keys.push_back("k" + std::to_string(i));
    std::vector<WriteItem> items;
    for (const std::string& k : keys) items.push_back(WriteItem{Part(), k, "new"});
    WriteError err;
    return store_->Prepare(ts, items, &err);
  };
  ASSERT_TRUE(bulk(Ts(10000)).ok());
  EXPECT_EQ(store_->stats().versions, before.versions + kKeys);
  // Prepared after the bulk: its version follows the bulk's in k2's list.
  ASSERT_TRUE(Prepare(Ts(15000), Part(), "k2", "later").ok());
  ASSERT_TRUE(Abort(Ts(10000)).ok());
  EXPECT_EQ(Get("k2", Ts(15000)).value, "later");
  ASSERT_TRUE(Abort(Ts(15000)).ok());
  const StoreStats after = store_->stats();
  EXPECT_EQ(after.keys, before.keys);
  EXPECT_EQ(after.versions, before.versions);
  EXPECT_EQ(after.prepared_txns, 1u);
  for (int i = 0; i < kKeys; i++) {
    const std::string k = "k" + std::to_string(i);
    EXPECT_EQ(Get(k, Ts(10000)).status, ReadStatus::kNotFound) << k;
    EXPECT_EQ(Get(k).status, i % 3 == 0 ? ReadStatus::kOk : ReadStatus::kNotFound) << k;
  }
  EXPECT_EQ(Get("k1", Ts(5000)).value, "other");  // the other transaction's version stays

  ASSERT_TRUE(bulk(Ts(20000)).ok());
  ASSERT_TRUE(Commit(Ts(20000)).ok());
  ASSERT_TRUE(Commit(Ts(5000)).ok());  // older: committed late, never current
  for (int i = 0; i < kKeys; i++) {
    const std::string k = "k" + std::to_string(i);
    ReadResult r = Get(k);
    EXPECT_EQ(r.ts, Ts(20000)) << k;
    EXPECT_EQ(r.value, "new") << k;
  }
  EXPECT_EQ(Get("k0", Ts(100)).value, "old");
  EXPECT_EQ(Get("k1", Ts(5000)).value, "other");
  EXPECT_EQ(store_->stats().prepared_txns, 0u);
}

TEST_F(RampStoreTest, CommitAndAbortAreIdempotent) {
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "v").ok());
  ASSERT_TRUE(Commit(Ts(10)).ok());
  ASSERT_TRUE(Commit(Ts(10)).ok());
  EXPECT_EQ(store_->stats().versions, 1u);
  EXPECT_EQ(Get("x").ts, Ts(10));
  // A COMMIT of a timestamp never prepared is a no-op; one for an unknown partition too.
  EXPECT_TRUE(Commit(Ts(99)).ok());
  EXPECT_TRUE(Commit(Ts(99), {Part(5, 1234)}).ok());

  ASSERT_TRUE(Prepare(Ts(20), Part(), "y", "v").ok());
  ASSERT_TRUE(Abort(Ts(20)).ok());
  ASSERT_TRUE(Abort(Ts(20)).ok());
  EXPECT_EQ(Get("y", Ts(20)).status, ReadStatus::kNotFound);
  EXPECT_EQ(store_->stats().keys, 1u);  // "y" had no other version: it is gone

  // Contradicting decisions are bugs of the caller.
  EXPECT_TRUE(Abort(Ts(10)).Is(Status::Code::kInternal));
  EXPECT_TRUE(Commit(Ts(20)).Is(Status::Code::kInternal));
}

TEST_F(RampStoreTest, PreparingTheSameVersionTwiceIsIdempotent) {
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "v").ok());
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "v").ok());
  EXPECT_EQ(store_->stats().versions, 1u);
  ASSERT_TRUE(Commit(Ts(10)).ok());
  // A PREPARE resent after the COMMIT changes nothing either.
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "v").ok());
  EXPECT_EQ(store_->stats().versions, 1u);
  EXPECT_EQ(store_->stats().prepared_txns, 0u);
}

// Two transactions that drew the same timestamp (two clients sharing a client id): the second
// one's PREPARE must not pass for a resend of the first one's, or the key would keep the first
// one's value while its siblings get the second one's (a fractured read nobody can repair).
TEST_F(RampStoreTest, PrepareOfAnotherVersionAtAUsedTimestampIsRefused) {
  const std::string meta = SiblingKeys({"x", "y"});
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "first", meta).ok());
  Status st = Prepare(Ts(10), Part(), "x", "second", meta);
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  ASSERT_TRUE(Commit(Ts(10)).ok());
  st = Prepare(Ts(10), Part(), "x", "second", meta);
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  st = Prepare(Ts(10), Part(), "x", "first", SiblingKeys({"x", "z"}));
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  st = Prepare(Ts(10), Part(), "x", {}, meta, kWriteTombstone);
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  // The same version again is still a resend.
  EXPECT_TRUE(Prepare(Ts(10), Part(), "x", "first", meta).ok());
  EXPECT_EQ(Get("x").value, "first");
  EXPECT_EQ(store_->stats().versions, 1u);
}

TEST_F(RampStoreTest, AbortDropsPreparedVersionsAndRestoresNothingElse) {
  Put(Ts(10), "x", "committed");
  ASSERT_TRUE(Prepare(Ts(20), Part(), "x", "doomed").ok());
  ASSERT_TRUE(Abort(Ts(20)).ok());
  EXPECT_EQ(Get("x").value, "committed");
  EXPECT_EQ(Get("x", Ts(20)).status, ReadStatus::kNotFound);
  EXPECT_EQ(store_->stats().versions, 1u);
  EXPECT_EQ(store_->stats().prepared_txns, 0u);
  // The aborted timestamp is fenced.
  WriteItem item{Part(), "x", "late"};
  WriteError err;
  EXPECT_TRUE(store_->Prepare(Ts(20), std::span(&item, 1), &err).Is(Status::Code::kAborted));
}

TEST_F(RampStoreTest, OlderTransactionCommittingLateDoesNotBecomeCurrent) {
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "older").ok());
  ASSERT_TRUE(Prepare(Ts(20), Part(), "x", "newer").ok());
  ASSERT_TRUE(Commit(Ts(20)).ok());
  ASSERT_TRUE(Commit(Ts(10)).ok());
  ReadResult r = Get("x", {}, kReadWantAddress);
  EXPECT_EQ(r.ts, Ts(20));
  EXPECT_EQ(r.value, "newer");
  EXPECT_TRUE(ReadAddress(r.address).valid());
  // The late version is committed (snapshot reads see it) but never valid.
  EXPECT_EQ(Get("x", Ts(15), kReadSnapshot).value, "older");
  ReadResult late = Get("x", Ts(10), kReadWantAddress);
  ASSERT_EQ(late.status, ReadStatus::kOk);
  EXPECT_FALSE(late.address.valid());  // only the current version has an address
}

TEST_F(RampStoreTest, ValidBitIsOnExactlyTheCurrentRecord) {
  std::vector<RecordAddress> addresses;
  for (uint64_t t = 1; t <= 5; ++t) {
    Put(Ts(t * 10), "x", Numbered("v", t));
    ReadResult r = Get("x", {}, kReadWantAddress);
    ASSERT_EQ(r.status, ReadStatus::kOk);
    ASSERT_TRUE(r.address.valid());
    EXPECT_EQ(r.address.length, record::RecordBytes(1, r.value.size(), r.metadata.size()));
    addresses.push_back(r.address);
    for (size_t i = 0; i < addresses.size(); ++i) {
      const record::RecordView v = ReadAddress(addresses[i]);
      EXPECT_EQ(v.key, "x");
      EXPECT_EQ(v.keyspace, Part().keyspace);
      EXPECT_EQ(v.bucket, Part().bucket);
      EXPECT_EQ(v.ts, Ts((i + 1) * 10));
      EXPECT_EQ(v.valid(), i + 1 == addresses.size()) << "record " << i << " after " << t;
    }
  }
  // A prepared newer version does not touch the valid bit (invalidate_at_prepare is off).
  ASSERT_TRUE(Prepare(Ts(60), Part(), "x", "pending").ok());
  EXPECT_TRUE(ReadAddress(addresses.back()).valid());
}

TEST_F(RampStoreTest, InvalidateAtPrepareClearsAndRestoresTheValidBit) {
  options_.invalidate_at_prepare = true;
  Open();
  Put(Ts(10), "x", "a");
  const RecordAddress a = Get("x", {}, kReadWantAddress).address;
  ASSERT_TRUE(ReadAddress(a).valid());
  ASSERT_TRUE(Prepare(Ts(20), Part(), "x", "b").ok());
  EXPECT_FALSE(ReadAddress(a).valid());
  ASSERT_TRUE(Abort(Ts(20)).ok());
  EXPECT_TRUE(ReadAddress(a).valid());
  ASSERT_TRUE(Prepare(Ts(30), Part(), "x", "c").ok());
  ASSERT_TRUE(Commit(Ts(30)).ok());
  const RecordAddress c = Get("x", {}, kReadWantAddress).address;
  EXPECT_FALSE(ReadAddress(a).valid());
  EXPECT_TRUE(ReadAddress(c).valid());
}

TEST_F(RampStoreTest, TombstonesReadAsDeletedButKeepTheirTimestamp) {
  const std::string meta = SiblingKeys({"other"});
  Put(Ts(10), "x", "alive");
  ASSERT_TRUE(Prepare(Ts(20), Part(), "x", "", meta, kWriteTombstone).ok());
  ASSERT_TRUE(Commit(Ts(20)).ok());
  ReadResult r = Get("x", {}, kReadWantAddress);
  ASSERT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(r.flags, record::kRecordTombstone);
  EXPECT_EQ(r.ts, Ts(20));
  EXPECT_TRUE(r.value.empty());
  EXPECT_EQ(r.metadata, meta);
  EXPECT_TRUE(ReadAddress(r.address).tombstone());
  EXPECT_EQ(Get("x", Ts(10)).value, "alive");
  int seen = 0;
  store_->ScanPartition(Part(), {}, [&](auto, auto&, auto, auto) { return ++seen > 0; });
  EXPECT_EQ(seen, 0);
  // A writer that read the deletion may overwrite it.
  EXPECT_TRUE(Prepare(Ts(30), Part(), "x", "back", {}, kWriteHasExpected, Ts(20)).ok());
}

TEST_F(RampStoreTest, ConflictsNeedExpectedTimestamps) {
  Put(Ts(10), "x", "a");
  const uint8_t kExpect = kWriteHasExpected;
  // The writer read an older version than the latest committed one.
  Status s = Prepare(Ts(20), Part(), "x", "b", {}, kExpect, Ts(5));
  EXPECT_TRUE(s.Is(Status::Code::kConflict)) << s.ToString();
  // The writer read the latest: fine.
  ASSERT_TRUE(Prepare(Ts(20), Part(), "x", "b", {}, kExpect, Ts(10)).ok());
  // Another transaction has the key prepared and undecided.
  s = Prepare(Ts(30), Part(), "x", "c", {}, kExpect, Ts(10));
  EXPECT_TRUE(s.Is(Status::Code::kConflict)) << s.ToString();
  // Blind writes (no expected version) never conflict.
  EXPECT_TRUE(Prepare(Ts(31), Part(), "x", "d").ok());
  // A key never written: the writer expects nothing.
  EXPECT_TRUE(Prepare(Ts(32), Part(), "fresh", "e", {}, kExpect, Timestamp()).ok());
  EXPECT_TRUE(
      Prepare(Ts(33), Part(), "fresh2", "e", {}, kExpect, Ts(1)).Is(Status::Code::kConflict));
  // Once decided, the key is free again.
  ASSERT_TRUE(Commit(Ts(20)).ok());
  ASSERT_TRUE(Abort(Ts(31)).ok());
  EXPECT_TRUE(Prepare(Ts(40), Part(), "x", "f", {}, kExpect, Ts(20)).ok());
}

// A conditional write at a timestamp below the version it read would commit "late" (never
// the current version) while its writer is told it committed: a lost update (a counter
// handed out one value twice). It is refused with the version to exceed.
TEST_F(RampStoreTest, ConditionalWriteBelowTheVersionItReplacesIsRefused) {
  Put(Ts(20), "counter", "7");
  WriteItem item{Part(), "counter", "8", kWriteHasExpected, Ts(20), {}};
  WriteError err;
  Status s = store_->Prepare(Ts(15), std::span(&item, 1), &err);
  EXPECT_TRUE(s.Is(Status::Code::kAborted)) << s.ToString();
  EXPECT_EQ(err.watermark, Ts(20));
  EXPECT_EQ(Get("counter").value, "7");
  // Above it: fine, and it is the current version after COMMIT.
  ASSERT_TRUE(Prepare(Ts(21), Part(), "counter", "8", {}, kWriteHasExpected, Ts(20)).ok());
  ASSERT_TRUE(Commit(Ts(21)).ok());
  EXPECT_EQ(Get("counter").value, "8");
}

TEST_F(RampStoreTest, PrepareAtOrBelowTheWatermarkIsRefused) {
  ASSERT_TRUE(Prepare(Ts(10), Part(), "pending", "v").ok());
  ASSERT_TRUE(Prepare(Ts(30), Part(), "later", "v").ok());
  const std::vector<Timestamp> below = store_->RaiseWatermark(Part(), Ts(20));
  EXPECT_EQ(below, std::vector<Timestamp>{Ts(10)});
  // Lowering is a no-op.
  EXPECT_TRUE(store_->RaiseWatermark(Part(), Ts(15)).size() == 1);

  // Items: one in another partition (fine), then one here at the watermark.
  const std::string k1 = "a", k2 = "b";
  WriteItem items[] = {{Part(1), k1, "v"}, {Part(), k2, "v"}};
  WriteError err;
  Status s = store_->Prepare(Ts(20), items, &err);
  EXPECT_TRUE(s.Is(Status::Code::kAborted)) << s.ToString();
  EXPECT_EQ(err.item, 1u);
  EXPECT_EQ(err.watermark, Ts(20));
  EXPECT_TRUE(store_->Prepare(Ts(21), items, &err).ok());
}

TEST_F(RampStoreTest, FencedTimestampRefusesALatePrepare) {
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), false), TxnState::kUnknown);
  EXPECT_TRUE(Prepare(Ts(10), Part(), "x", "v").ok());  // no fence: accepted
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), true), TxnState::kPrepared);

  EXPECT_EQ(store_->QueryTxn(Ts(20), Part(3), true), TxnState::kUnknown);
  WriteItem item{Part(3), "y", "late"};
  WriteError err;
  const Status s = store_->Prepare(Ts(20), std::span(&item, 1), &err);
  EXPECT_TRUE(s.Is(Status::Code::kAborted)) << s.ToString();
  EXPECT_EQ(err.watermark, Ts(20));
  EXPECT_EQ(store_->QueryTxn(Ts(20), Part(3), false), TxnState::kAborted);

  ASSERT_TRUE(Commit(Ts(10)).ok());
  EXPECT_EQ(store_->QueryTxn(Ts(10), Part(), true), TxnState::kCommitted);
}

TEST_F(RampStoreTest, PendingTransactionsNameTheirSiblingPartitions) {
  record::Metadata m;
  m.mode = record::Metadata::Mode::kPartitions;
  m.partitions = {Part(4), Part(2, 9)};
  std::string by_partition;
  record::EncodeMetadata(m, &by_partition);
  ASSERT_TRUE(Prepare(Ts(10), Part(), "x", "v", SiblingKeys({"p", "q"}, 6)).ok());
  now_ += 100;
  ASSERT_TRUE(Prepare(Ts(20), Part(1), "y", "v", by_partition).ok());

  std::vector<PendingTxn> pending = store_->PendingOlderThan(now_);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].ts, Ts(10));
  EXPECT_EQ(pending[0].partition, Part());
  EXPECT_EQ(pending[0].siblings, (std::vector<PartitionId>{Part(0), Part(6)}));

  pending = store_->PendingOlderThan(now_ + 1);
  ASSERT_EQ(pending.size(), 2u);
  std::sort(pending.begin(), pending.end(), [](auto& a, auto& b) { return a.ts < b.ts; });
  EXPECT_EQ(pending[1].siblings, (std::vector<PartitionId>{Part(1), Part(4), Part(2, 9)}));

  ASSERT_TRUE(Commit(Ts(10)).ok());
  EXPECT_EQ(store_->PendingOlderThan(now_ + 1).size(), 1u);
}

TEST_F(RampStoreTest, MalformedMetadataIsRefused) {
  const Status s = Prepare(Ts(10), Part(), "x", "v", "\x09garbage");
  EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << s.ToString();
  EXPECT_EQ(store_->stats().versions, 0u);
}

TEST_F(RampStoreTest, LargeValuesSpanPageRuns) {
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 2654435761u >> 13);
  Put(Ts(10), "small-before", "s");
  Put(Ts(20), "big", big);
  Put(Ts(30), "small-after", "s");
  ReadResult r = Get("big", {}, kReadWantAddress);
  ASSERT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(r.value, big);
  const record::RecordView v = ReadAddress(r.address);
  EXPECT_TRUE(v.valid());
  EXPECT_EQ(v.value, big);
  EXPECT_EQ(Get("small-before").value, "s");
  EXPECT_EQ(Get("small-after").value, "s");
}

TEST_F(RampStoreTest, LimitsGiveTooLarge) {
  const std::string huge_value(33 << 20, 'v');
  Status s = Prepare(Ts(10), Part(), "k", huge_value);
  EXPECT_TRUE(s.Is(Status::Code::kTooLarge)) << s.ToString();
  EXPECT_NE(s.message().find("bytes a version may take"), std::string::npos);
  const std::string huge_key(70000, 'k');
  s = Prepare(Ts(10), Part(), huge_key, "v");
  EXPECT_TRUE(s.Is(Status::Code::kTooLarge)) << s.ToString();
  EXPECT_TRUE(Prepare(Timestamp(), Part(), "k", "v").Is(Status::Code::kInvalidArgument));
}

TEST_F(RampStoreTest, WriteCommittedInstallsAndCommitsAtOnce) {
  ASSERT_TRUE(store_->WriteCommitted(Part(), "x", "a", false, Ts(10)).ok());
  ASSERT_TRUE(store_->WriteCommitted(Part(), "x", "b", false, Ts(20)).ok());
  ASSERT_TRUE(store_->WriteCommitted(Part(), "x", "stale", false, Ts(15)).ok());
  ReadResult r = Get("x", {}, kReadWantAddress);
  EXPECT_EQ(r.value, "b");
  EXPECT_TRUE(r.metadata.empty());
  EXPECT_TRUE(ReadAddress(r.address).valid());
  ASSERT_TRUE(store_->WriteCommitted(Part(), "x", "", true, Ts(30)).ok());
  EXPECT_EQ(Get("x").flags, record::kRecordTombstone);
  EXPECT_EQ(store_->stats().prepared_txns, 0u);
}

// A page scan opened at a snapshot raised the partition's watermark: a committed write at or
// below it would appear in the scan's pages late (a rescan at the same snapshot would see it,
// a first one not). Strict 2PL's committed writes are refused there as PREPAREs are.
TEST_F(RampStoreTest, WriteCommittedAtOrBelowTheWatermarkIsRefused) {
  ASSERT_TRUE(store_->RaiseWatermark(Part(), Ts(20)).empty());
  for (const Timestamp& ts : {Ts(10), Ts(20)}) {
    const Status s = store_->WriteCommitted(Part(), "late", "v", false, ts);
    EXPECT_TRUE(s.Is(Status::Code::kAborted)) << ts.ToString() << ": " << s.ToString();
  }
  EXPECT_EQ(Get("late").status, ReadStatus::kNotFound);
  ASSERT_TRUE(store_->WriteCommitted(Part(), "late", "v", false, Ts(21)).ok());
  EXPECT_EQ(Get("late").value, "v");
}

// A grouped key: the group's length (2 bytes, big-endian), the group, then the entry's suffix
// (the client's EncodeGroupKey, spelled out: the store links no client code).
std::string group_key(std::string_view group, std::string_view suffix) {
  std::string k;
  k.push_back(static_cast<char>(group.size() >> 8));
  k.push_back(static_cast<char>(group.size()));
  k.append(group);
  k.append(suffix);
  return k;
}

TEST_F(RampStoreTest, GetGroupReturnsTheLiveEntriesOfOneGroup) {
  const uint8_t kGrouped = kWriteGrouped;
  Put(Ts(10), group_key("red", "1"), "r1", Part(), kGrouped);
  Put(Ts(11), group_key("red", "2"), "r2", Part(), kGrouped);
  Put(Ts(12), group_key("redder", "1"), "x", Part(), kGrouped);
  Put(Ts(13), group_key("re", "d1"), "x", Part(), kGrouped);
  Put(Ts(14), group_key("red", "3"), "", Part(), kGrouped | kWriteTombstone);
  ASSERT_TRUE(Prepare(Ts(15), Part(), group_key("red", "4"), "pending", {}, kGrouped).ok());
  ASSERT_TRUE(Prepare(Ts(16), Part(), group_key("red", "5"), "aborted", {}, kGrouped).ok());
  ASSERT_TRUE(Abort(Ts(16)).ok());

  std::vector<GroupEntry> entries;
  store_->GetGroup(Part(), "red", &entries);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].key, group_key("red", "1"));
  EXPECT_EQ(entries[0].value, "r1");
  EXPECT_EQ(entries[0].ts, Ts(10));
  EXPECT_EQ(entries[1].key, group_key("red", "2"));
  store_->GetGroup(Part(), "blue", &entries);
  EXPECT_TRUE(entries.empty());
  store_->GetGroup(Part(9), "red", &entries);
  EXPECT_TRUE(entries.empty());
}

// The group version a GetGroup hands out (a client keeps the entries while the word at its
// offset still holds the value): changed by every commit in the partition, not by a PREPARE
// or an ABORT, zero once the partition stops serving, a new generation when it serves again.
TEST_F(RampStoreTest, GroupVersionChangesBeforeWhatGetGroupReturns) {
  auto word = [&](const GroupVersion& v) {
    uint64_t w = 0;
    std::memcpy(&w, store_->arena_base() + v.offset, sizeof(w));
    return w;
  };
  const uint8_t kGrouped = kWriteGrouped;
  std::vector<GroupEntry> entries;
  GroupVersion none;
  store_->GetGroup(Part(), "red", &entries, &none);
  EXPECT_EQ(none.value, 0u);  // no partition yet: nothing to keep

  Put(Ts(10), group_key("red", "1"), "r1", Part(), kGrouped);
  GroupVersion v1;
  store_->GetGroup(Part(), "red", &entries, &v1);
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_NE(v1.value, 0u);
  EXPECT_EQ(word(v1), v1.value);
  GroupVersion again;
  store_->GetGroup(Part(), "blue", &entries, &again);  // another group: the same word
  EXPECT_EQ(again.offset, v1.offset);
  EXPECT_EQ(again.value, v1.value);

  // Prepared and aborted: GetGroup returns the same entries, the version stays.
  ASSERT_TRUE(Prepare(Ts(11), Part(), group_key("red", "2"), "r2", {}, kGrouped).ok());
  ASSERT_TRUE(Abort(Ts(11)).ok());
  EXPECT_EQ(word(v1), v1.value);
  // A commit of another group of the partition changes it too.
  Put(Ts(12), group_key("blue", "1"), "b1", Part(), kGrouped);
  const uint64_t after_blue = word(v1);
  EXPECT_NE(after_blue, v1.value);
  GroupVersion v2;
  store_->GetGroup(Part(), "red", &entries, &v2);
  EXPECT_EQ(v2.value, after_blue);
  // A deletion (tombstone) too, and a committed write of the 2PL baseline.
  Put(Ts(13), group_key("red", "1"), "", Part(), kGrouped | kWriteTombstone);
  EXPECT_NE(word(v2), v2.value);
  store_->GetGroup(Part(), "red", &entries, &v2);
  EXPECT_TRUE(entries.empty());
  ASSERT_TRUE(
      store_->WriteCommitted(Part(), group_key("red", "9"), "r9", false, Ts(14), true).ok());
  EXPECT_NE(word(v2), v2.value);
  store_->GetGroup(Part(), "red", &entries, &v2);
  EXPECT_EQ(entries.size(), 1u);

  // Released to another server: zero, and no version handed out; serving again: a value
  // the word never had before.
  ASSERT_TRUE(store_->SetServing(Part(), false).ok());
  EXPECT_EQ(word(v2), 0u);
  GroupVersion off;
  store_->GetGroup(Part(), "red", &entries, &off);
  EXPECT_EQ(off.value, 0u);
  ASSERT_TRUE(store_->SetServing(Part(), true).ok());
  GroupVersion back;
  store_->GetGroup(Part(), "red", &entries, &back);
  EXPECT_NE(back.value, 0u);
  EXPECT_NE(back.value, v2.value);
  EXPECT_NE(back.value, v1.value);
  EXPECT_EQ(word(back), back.value);
  store_->DropPartition(Part());
  EXPECT_EQ(word(back), 0u);
}

TEST_F(RampStoreTest, PartitionsAreCreatedOnDemandAndReported) {
  Put(Ts(10), "a", "v", Part(0));
  Put(Ts(11), "b", "v", Part(1));
  Put(Ts(12), "c", "v", Part(1));
  std::vector<PartitionId> ids = store_->PartitionIds();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<PartitionId>{Part(0), Part(1)}));
  for (int i = 0; i < 100; ++i) Get("b", {}, 0, Part(1));
  now_ += 10000;
  std::vector<PartitionInfo> infos = store_->PartitionInfos();
  std::sort(infos.begin(), infos.end(), [](auto& a, auto& b) { return a.id < b.id; });
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[1].keys, 2u);
  EXPECT_EQ(infos[1].bytes, record::kPageBytes);
  EXPECT_GT(infos[1].ops_per_sec, infos[0].ops_per_sec);
  EXPECT_GT(infos[1].ops_per_sec, 0.0);
  const StoreStats s = store_->stats();
  EXPECT_EQ(s.partitions, 2u);
  EXPECT_EQ(s.keys, 3u);
  EXPECT_EQ(s.versions, 3u);
  EXPECT_EQ(s.pages, 2u);
  EXPECT_EQ(s.bytes, 2 * record::kPageBytes);
  EXPECT_EQ(s.free_pages, (size_t{64} << 20) / record::kPageBytes - 2);
}

TEST_F(RampStoreTest, ScanVisitsCommittedVersionsAtTheSnapshot) {
  Put(Ts(10), "a", "a10");
  Put(Ts(20), "a", "a20");
  Put(Ts(15), "b", "b15");
  Put(Ts(30), "c", "c30");
  Put(Ts(40), "b", "", Part(), kWriteTombstone);
  ASSERT_TRUE(Prepare(Ts(50), Part(), "d", "prepared").ok());
  auto scan = [&](const Timestamp& at) {
    std::map<std::string, std::string> seen;
    store_->ScanPartition(
        Part(), at,
        [&](std::string_view key, const Timestamp& ts, std::string_view value, std::string_view) {
          seen[std::string(key)] = std::string(value) + "@" + ts.ToString();
          return true;
        });
    return seen;
  };
  using Seen = std::map<std::string, std::string>;
  EXPECT_EQ(scan({}), (Seen{{"a", "a20@20.1"}, {"c", "c30@30.1"}}));
  EXPECT_EQ(scan(Ts(16)), (Seen{{"a", "a10@10.1"}, {"b", "b15@15.1"}}));
  EXPECT_EQ(scan(Ts(35)), (Seen{{"a", "a20@20.1"}, {"b", "b15@15.1"}, {"c", "c30@30.1"}}));
  EXPECT_EQ(scan(Ts(5)), Seen{});
  int visited = 0;
  store_->ScanPartition(Part(), {}, [&](auto, auto&, auto, auto) { return ++visited < 1; });
  EXPECT_EQ(visited, 1);
}

TEST_F(RampStoreTest, ReadsOfUnknownPartitionsAndKeysAreNotFound) {
  EXPECT_EQ(Get("nothing").status, ReadStatus::kNotFound);
  EXPECT_EQ(Get("nothing", Ts(5)).status, ReadStatus::kNotFound);
  Put(Ts(10), "x", "v");
  EXPECT_EQ(Get("y").status, ReadStatus::kNotFound);
  EXPECT_EQ(Get("x", Ts(5)).status, ReadStatus::kNotFound);  // nothing collected yet
}

}  // namespace
}  // namespace ramp::store
