// Version record and page header format: round trips and every kind of corruption.
#include "common/record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/crc32c.h"

namespace ramp::record {
namespace {

std::vector<uint8_t> Encode(const RecordFields& f) {
  std::vector<uint8_t> buf(RecordBytes(f.key.size(), f.value.size(), f.metadata.size()), 0xAB);
  EXPECT_EQ(EncodeRecord(f, buf.data()), buf.size());
  return buf;
}

RecordFields SampleFields() {
  RecordFields f;
  f.kind = kKindVersion;
  f.flags = 0;
  f.keyspace = 0x1122334455667788ull;
  f.bucket = 13;
  f.epoch = 4;
  f.ts = {0xABCDEF0123ull, 77};
  f.key = "row-00042";
  f.value = "hello, version";
  f.metadata = "meta!";
  return f;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 B.4: 32 bytes of zeros.
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32cTest, SeedChainsPieces) {
  const std::string s = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    const uint32_t first = Crc32c(s.data(), cut);
    EXPECT_EQ(Crc32c(s.data() + cut, s.size() - cut, first), Crc32c(s.data(), s.size()));
  }
}

TEST(Crc32cTest, PortableAndHardwareAgree) {
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  const uint32_t check =
      ~crc32c::ExtendPortable(~0u, reinterpret_cast<const uint8_t*>("123456789"), 9);
  EXPECT_EQ(check, 0xE3069283u);
  if (!crc32c::HaveSse42()) GTEST_SKIP() << "CPU without SSE4.2: only the portable CRC runs";
  // Every length and misalignment, so the 8-byte loop and the byte tail both run.
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= data.size(); len += 1 + len / 7) {
      ASSERT_EQ(crc32c::ExtendPortable(~0u, data.data() + start, len),
                crc32c::ExtendSse42(~0u, data.data() + start, len))
          << "start " << start << " len " << len;
    }
  }
}

TEST(RecordTest, RoundTrip) {
  const RecordFields f = SampleFields();
  const std::vector<uint8_t> buf = Encode(f);
  EXPECT_EQ(buf.size() % kRecordAlign, 0u);
  RecordView v;
  ASSERT_TRUE(DecodeRecord(buf.data(), buf.size(), &v).ok());
  EXPECT_EQ(v.state, 0);
  EXPECT_EQ(v.kind, kKindVersion);
  EXPECT_EQ(v.total_len, buf.size());
  EXPECT_EQ(v.keyspace, f.keyspace);
  EXPECT_EQ(v.bucket, f.bucket);
  EXPECT_EQ(v.epoch, f.epoch);
  EXPECT_EQ(v.ts, f.ts);
  EXPECT_EQ(v.key, f.key);
  EXPECT_EQ(v.value, f.value);
  EXPECT_EQ(v.metadata, f.metadata);
  EXPECT_FALSE(v.valid());
  EXPECT_FALSE(v.tombstone());

  const RecordView peeked = PeekRecord(buf.data());
  EXPECT_EQ(peeked.key, v.key);
  EXPECT_EQ(peeked.value, v.value);
  EXPECT_EQ(peeked.metadata, v.metadata);
  EXPECT_EQ(peeked.total_len, v.total_len);
}

TEST(RecordTest, RoundTripShapes) {
  // Empty everything (a commit mark), tombstones, and every padding length.
  RecordFields mark;
  mark.kind = kKindCommitMark;
  mark.ts = {5, 6};
  std::vector<uint8_t> buf = Encode(mark);
  EXPECT_EQ(buf.size(), kRecordHeaderBytes);
  RecordView v;
  ASSERT_TRUE(DecodeRecord(buf.data(), buf.size(), &v).ok());
  EXPECT_EQ(v.kind, kKindCommitMark);
  EXPECT_TRUE(v.key.empty() && v.value.empty() && v.metadata.empty());

  RecordFields tomb = SampleFields();
  tomb.flags = kRecordTombstone;
  tomb.value = {};
  buf = Encode(tomb);
  ASSERT_TRUE(DecodeRecord(buf.data(), buf.size(), &v).ok());
  EXPECT_TRUE(v.tombstone());

  const std::string value(40, 'v');
  for (size_t n = 0; n < 16; ++n) {
    RecordFields f = SampleFields();
    f.value = std::string_view(value).substr(0, n);
    buf = Encode(f);
    ASSERT_TRUE(DecodeRecord(buf.data(), buf.size(), &v).ok()) << n;
    EXPECT_EQ(v.value, f.value);
  }
}

TEST(RecordTest, StateByteIsOutsideTheChecksum) {
  std::vector<uint8_t> buf = Encode(SampleFields());
  buf[kStateOffset] = kStateValid;
  RecordView v;
  ASSERT_TRUE(DecodeRecord(buf.data(), buf.size(), &v).ok());
  EXPECT_TRUE(v.valid());
}

TEST(RecordTest, EveryFlippedByteButTheStateIsDetected) {
  const std::vector<uint8_t> good = Encode(SampleFields());
  for (size_t i = 0; i < good.size(); ++i) {
    if (i == kStateOffset) continue;
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= mask;
      RecordView v;
      const Status s = DecodeRecord(bad.data(), bad.size(), &v);
      EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << "byte " << i << " mask " << int(mask);
    }
  }
}

// DecodeCompleteRecord (page scans' pages below the head page) skips the checksum alone:
// a changed value byte passes, but every structural check still holds.
TEST(RecordTest, CompleteRecordsSkipTheChecksumButNotTheStructure) {
  const std::vector<uint8_t> good = Encode(SampleFields());
  RecordView v;
  ASSERT_TRUE(DecodeCompleteRecord(good.data(), good.size(), &v).ok());
  EXPECT_EQ(v.value, SampleFields().value);
  std::vector<uint8_t> changed = good;
  changed[kRecordHeaderBytes + SampleFields().key.size()] ^= 0xFF;  // first value byte
  EXPECT_TRUE(DecodeRecord(changed.data(), changed.size(), &v).Is(Status::Code::kCorruption));
  ASSERT_TRUE(DecodeCompleteRecord(changed.data(), changed.size(), &v).ok());
  EXPECT_NE(v.value, SampleFields().value);
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_TRUE(DecodeCompleteRecord(good.data(), len, &v).Is(Status::Code::kCorruption)) << len;
  }
  std::vector<uint8_t> lying = good;
  const uint16_t key_len = 200;
  std::memcpy(lying.data() + 14, &key_len, 2);
  EXPECT_TRUE(DecodeCompleteRecord(lying.data(), lying.size(), &v).Is(Status::Code::kCorruption));
  lying = good;
  lying[12] = 9;  // kind
  EXPECT_TRUE(DecodeCompleteRecord(lying.data(), lying.size(), &v).Is(Status::Code::kCorruption));
}

TEST(RecordTest, TruncationIsDetected) {
  const std::vector<uint8_t> good = Encode(SampleFields());
  for (size_t len = 0; len < good.size(); ++len) {
    RecordView v;
    const Status s = DecodeRecord(good.data(), len, &v);
    EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << len;
  }
  // Extra bytes after the record are someone else's.
  std::vector<uint8_t> longer = good;
  longer.resize(good.size() + 64, 0x55);
  RecordView v;
  ASSERT_TRUE(DecodeRecord(longer.data(), longer.size(), &v).ok());
  EXPECT_EQ(v.total_len, good.size());
}

// Rewrites a header field and fixes the checksum, as a buggy or hostile writer would.
void Forge(std::vector<uint8_t>* buf, size_t offset, const void* bytes, size_t n) {
  std::memcpy(buf->data() + offset, bytes, n);
  uint32_t total;
  std::memcpy(&total, buf->data() + 8, 4);
  const size_t end = std::min<size_t>(total, buf->size());
  const uint32_t crc = end > 8 ? Crc32c(buf->data() + 8, end - 8) : 0;
  std::memcpy(buf->data(), &crc, 4);
}

TEST(RecordTest, LyingFieldsAreDetectedEvenWithAValidChecksum) {
  const std::vector<uint8_t> good = Encode(SampleFields());
  auto expect_corrupt = [](const std::vector<uint8_t>& b, const char* field) {
    RecordView v;
    const Status s = DecodeRecord(b.data(), b.size(), &v);
    EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << field;
    return s;
  };
  {
    std::vector<uint8_t> b = good;
    const uint16_t key_len = 200;
    Forge(&b, 14, &key_len, 2);
    EXPECT_NE(expect_corrupt(b, "key_len").message().find("key_len"), std::string::npos);
  }
  {
    std::vector<uint8_t> b = good;
    const uint32_t value_len = 0xFFFFFFF0u;
    Forge(&b, 16, &value_len, 4);
    expect_corrupt(b, "value_len");
  }
  {
    std::vector<uint8_t> b = good;
    const uint32_t meta_len = 1;
    Forge(&b, 20, &meta_len, 4);
    expect_corrupt(b, "meta_len");
  }
  {
    std::vector<uint8_t> b = good;
    const uint32_t total = static_cast<uint32_t>(good.size()) - 8;
    Forge(&b, 8, &total, 4);
    expect_corrupt(b, "shorter total_len");
  }
  {
    std::vector<uint8_t> b = good;
    const uint32_t total = static_cast<uint32_t>(good.size()) + 3;
    Forge(&b, 8, &total, 4);
    expect_corrupt(b, "unaligned total_len");
  }
  {
    std::vector<uint8_t> b = good;
    const uint8_t kind = 9;
    Forge(&b, 12, &kind, 1);
    EXPECT_NE(expect_corrupt(b, "kind").message().find("kind"), std::string::npos);
  }
  {
    std::vector<uint8_t> b = good;
    const uint8_t flags = 0x40;
    Forge(&b, 13, &flags, 1);
    EXPECT_NE(expect_corrupt(b, "flags").message().find("flags"), std::string::npos);
  }
}

TEST(PageHeaderTest, RoundTrip) {
  std::vector<uint8_t> page(kPageBytes, 0);
  PageHeader h;
  h.keyspace = 99;
  h.bucket = 3;
  h.page_no = 123456;
  h.used = 4000;
  h.run_pages = 1;
  h.flags = kPageSealed;
  h.checksum = 0xDEADBEEF;
  WritePageHeader(h, page.data());
  PageHeader r;
  ASSERT_TRUE(ReadPageHeader(page.data(), page.size(), &r).ok());
  EXPECT_EQ(r.magic, kPageMagic);
  EXPECT_EQ(r.checksum, h.checksum);
  EXPECT_EQ(r.keyspace, h.keyspace);
  EXPECT_EQ(r.bucket, h.bucket);
  EXPECT_EQ(r.page_no, h.page_no);
  EXPECT_EQ(r.used, h.used);
  EXPECT_EQ(r.run_pages, h.run_pages);
  EXPECT_EQ(r.flags, h.flags);
}

TEST(PageHeaderTest, MalformedHeadersAreRefused) {
  auto refused = [](PageHeader h, size_t len = kPageHeaderBytes) {
    std::vector<uint8_t> page(kPageBytes, 0);
    WritePageHeader(h, page.data());
    PageHeader r;
    return ReadPageHeader(page.data(), len, &r).Is(Status::Code::kCorruption);
  };
  PageHeader ok;
  EXPECT_FALSE(refused(ok));
  EXPECT_TRUE(refused(ok, kPageHeaderBytes - 1));
  PageHeader h = ok;
  h.magic = 0x12345678;
  EXPECT_TRUE(refused(h));
  h = ok;
  h.run_pages = 0;
  EXPECT_TRUE(refused(h));
  h = ok;
  h.used = kPageHeaderBytes - 1;
  EXPECT_TRUE(refused(h));
  h = ok;
  h.used = kPageBytes + 1;
  EXPECT_TRUE(refused(h));
  h.run_pages = 2;
  EXPECT_FALSE(refused(h));
  h = ok;
  h.flags = 0x80;
  EXPECT_TRUE(refused(h));
}

}  // namespace
}  // namespace ramp::record
