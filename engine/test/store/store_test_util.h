// Helpers for Store tests: a store with a settable clock and one-line RAMP operations.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "store/store.h"

namespace ramp::store::testing {

inline Timestamp Ts(uint64_t time, uint64_t client = 1) {
  return {time, client};
}
inline PartitionId Part(uint32_t bucket = 0, KeyspaceId keyspace = 7) {
  return {keyspace, bucket};
}

// Metadata naming sibling keys of keyspace 7 (bucket 0).
inline std::string SiblingKeys(const std::vector<std::string>& keys, uint32_t bucket = 0) {
  record::Metadata m;
  m.mode = record::Metadata::Mode::kKeys;
  for (const auto& k : keys) m.keys.push_back({7, bucket, k});
  std::string out;
  record::EncodeMetadata(m, &out);
  return out;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    store_.reset();
    options_.now_ms = [this] { return now_.load(); };
    Status st = Store::Open(options_, transport::Memory::Create(), &store_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // PREPARE of one item; the strings must outlive nothing (the store copies them).
  Status Prepare(const Timestamp& ts, const PartitionId& part, std::string_view key,
                 std::string_view value, std::string_view metadata = {}, uint8_t flags = 0,
                 const Timestamp& expected = {}) {
    WriteItem item{part, key, value, flags, expected, metadata};
    WriteError err;
    return store_->Prepare(ts, std::span(&item, 1), &err);
  }
  Status Commit(const Timestamp& ts, std::vector<PartitionId> parts = {Part()}) {
    return store_->Commit(ts, parts);
  }
  Status Abort(const Timestamp& ts, std::vector<PartitionId> parts = {Part()}) {
    return store_->Abort(ts, parts);
  }
  // PREPARE + COMMIT of one key.
  void Put(const Timestamp& ts, std::string_view key, std::string_view value,
           const PartitionId& part = Part(), uint8_t flags = 0) {
    ASSERT_TRUE(Prepare(ts, part, key, value, {}, flags).ok());
    ASSERT_TRUE(Commit(ts, {part}).ok());
  }
  ReadResult Get(std::string_view key, const Timestamp& at = {}, uint8_t flags = 0,
                 const PartitionId& part = Part()) {
    ReadResult r;
    store_->Get(ReadItem{part, key, at}, flags, &r);
    return r;
  }
  // The record at a GET* address, decoded and verified as a one-sided reader would.
  record::RecordView ReadAddress(const RecordAddress& a) {
    record::RecordView v;
    EXPECT_TRUE(record::DecodeRecord(store_->arena_base() + a.offset, a.length, &v).ok());
    return v;
  }

  struct ValidRecord {
    std::string key;
    Timestamp ts;
  };
  // Every record anywhere in the arena whose valid bit is set and which verifies, as a
  // one-sided reader might find them, by arena offset. Walks every frame that starts with
  // a page header, stale ones included (their records must all be invalid).
  std::map<uint64_t, ValidRecord> ValidRecords() {
    std::map<uint64_t, ValidRecord> out;
    const uint8_t* base = store_->arena_base();
    const size_t frames = options_.memory_bytes / record::kPageBytes;
    for (size_t f = 0; f < frames; ++f) {
      const uint8_t* page = base + f * record::kPageBytes;
      record::PageHeader h;
      if (!record::ReadPageHeader(page, (frames - f) * record::kPageBytes, &h).ok()) continue;
      for (size_t off = record::kPageHeaderBytes; off < h.used;) {
        record::RecordView v;
        if (!record::DecodeRecord(page + off, h.used - off, &v).ok()) break;
        if (v.valid()) out[f * record::kPageBytes + off] = {std::string(v.key), v.ts};
        off += v.total_len;
      }
    }
    return out;
  }

  StoreOptions options_ = [] {
    StoreOptions o;
    o.memory_bytes = size_t{64} << 20;
    return o;
  }();
  std::atomic<uint64_t> now_{1000000};
  std::unique_ptr<Store> store_;
};

}  // namespace ramp::store::testing
