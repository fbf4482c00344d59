// Version records and page headers: the layout documented in record.h.
#include "common/record.h"

#include <cstring>
#include <string>

#include "common/little_endian.h"

namespace ramp::record {
namespace {

// Field offsets inside the record header (see record.h).
constexpr size_t kOffCrc = 0;
constexpr size_t kOffReserved = 5;
constexpr size_t kOffTotalLen = 8;
constexpr size_t kOffKind = 12;
constexpr size_t kOffFlags = 13;
constexpr size_t kOffKeyLen = 14;
constexpr size_t kOffValueLen = 16;
constexpr size_t kOffMetaLen = 20;
constexpr size_t kOffKeyspace = 24;
constexpr size_t kOffBucket = 32;
constexpr size_t kOffEpoch = 36;
constexpr size_t kOffTsTime = 40;
constexpr size_t kOffTsClient = 48;
static_assert(kOffTsClient + 8 == kRecordHeaderBytes);

// Checksummed part of a record: everything after the crc, state and reserved bytes.
constexpr size_t kChecksumStart = 8;

constexpr uint8_t kKnownRecordFlags = kRecordTombstone | kRecordGrouped;

// Page header offsets.
constexpr size_t kPageOffMagic = 0;
constexpr size_t kPageOffCrc = 4;
constexpr size_t kPageOffKeyspace = 8;
constexpr size_t kPageOffBucket = 16;
constexpr size_t kPageOffPageNo = 20;
constexpr size_t kPageOffUsed = 24;
constexpr size_t kPageOffRun = 28;
constexpr size_t kPageOffFlags = 30;
static_assert(kPageOffFlags + 2 == kPageHeaderBytes);

constexpr uint16_t kKnownPageFlags = kPageSealed;

Status RecordCorruption(const std::string& what) {
  return Status::Corruption("record: " + what);
}

void FillView(const uint8_t* src, RecordView* out) {
  out->state = src[kStateOffset];
  out->total_len = le::Load32(src + kOffTotalLen);
  out->kind = static_cast<RecordKind>(src[kOffKind]);
  out->flags = src[kOffFlags];
  out->keyspace = le::Load64(src + kOffKeyspace);
  out->bucket = le::Load32(src + kOffBucket);
  out->epoch = le::Load32(src + kOffEpoch);
  out->ts.time = le::Load64(src + kOffTsTime);
  out->ts.client = le::Load64(src + kOffTsClient);
  const uint16_t key_len = le::Load16(src + kOffKeyLen);
  const uint32_t value_len = le::Load32(src + kOffValueLen);
  const uint32_t meta_len = le::Load32(src + kOffMetaLen);
  const char* body = reinterpret_cast<const char*>(src + kRecordHeaderBytes);
  out->key = std::string_view(body, key_len);
  out->value = std::string_view(body + key_len, value_len);
  out->metadata = std::string_view(body + key_len + value_len, meta_len);
}

}  // namespace

size_t EncodeRecord(const RecordFields& f, uint8_t* dst) {
  const size_t total = RecordBytes(f.key.size(), f.value.size(), f.metadata.size());
  std::memset(dst, 0, kRecordHeaderBytes);
  le::Store32(dst + kOffTotalLen, static_cast<uint32_t>(total));
  dst[kOffKind] = f.kind;
  dst[kOffFlags] = f.flags;
  le::Store16(dst + kOffKeyLen, static_cast<uint16_t>(f.key.size()));
  le::Store32(dst + kOffValueLen, static_cast<uint32_t>(f.value.size()));
  le::Store32(dst + kOffMetaLen, static_cast<uint32_t>(f.metadata.size()));
  le::Store64(dst + kOffKeyspace, f.keyspace);
  le::Store32(dst + kOffBucket, f.bucket);
  le::Store32(dst + kOffEpoch, f.epoch);
  le::Store64(dst + kOffTsTime, f.ts.time);
  le::Store64(dst + kOffTsClient, f.ts.client);
  uint8_t* p = dst + kRecordHeaderBytes;
  // memcpy with a null source is undefined even for zero bytes: empty views may be null.
  if (!f.key.empty()) std::memcpy(p, f.key.data(), f.key.size());
  p += f.key.size();
  if (!f.value.empty()) std::memcpy(p, f.value.data(), f.value.size());
  p += f.value.size();
  if (!f.metadata.empty()) std::memcpy(p, f.metadata.data(), f.metadata.size());
  p += f.metadata.size();
  std::memset(p, 0, dst + total - p);  // padding is checksummed, so it must be defined
  le::Store32(dst + kOffCrc, Crc32c(dst + kChecksumStart, total - kChecksumStart));
  return total;
}

namespace {

Status Decode(const uint8_t* src, size_t len, bool verify_checksum, RecordView* out) {
  if (len < kRecordHeaderBytes) {
    return RecordCorruption("truncated: " + std::to_string(len) + " bytes, header needs " +
                            std::to_string(kRecordHeaderBytes));
  }
  if (src[kOffReserved] != 0 || src[kOffReserved + 1] != 0 || src[kOffReserved + 2] != 0) {
    return RecordCorruption("reserved header bytes are not zero");
  }
  const uint32_t total_len = le::Load32(src + kOffTotalLen);
  if (total_len < kRecordHeaderBytes || total_len % kRecordAlign != 0) {
    return RecordCorruption("total_len " + std::to_string(total_len) + " is malformed");
  }
  if (total_len > len) {
    return RecordCorruption("total_len " + std::to_string(total_len) + " exceeds the " +
                            std::to_string(len) + " bytes available");
  }
  if (verify_checksum &&
      Crc32c(src + kChecksumStart, total_len - kChecksumStart) != le::Load32(src + kOffCrc)) {
    return RecordCorruption("checksum mismatch");
  }
  // The checksum matched, but the writer may still be buggy or hostile: check every field.
  const uint8_t kind = src[kOffKind];
  if (kind < kKindVersion || kind > kKindAbortMark) {
    return RecordCorruption("unknown kind " + std::to_string(kind));
  }
  if ((src[kOffFlags] & ~kKnownRecordFlags) != 0) {
    return RecordCorruption("unknown flags " + std::to_string(src[kOffFlags]));
  }
  const uint64_t key_len = le::Load16(src + kOffKeyLen);
  const uint64_t value_len = le::Load32(src + kOffValueLen);
  const uint64_t meta_len = le::Load32(src + kOffMetaLen);
  if (RecordBytes(key_len, value_len, meta_len) != total_len) {
    return RecordCorruption("key_len " + std::to_string(key_len) + ", value_len " +
                            std::to_string(value_len) + " and meta_len " +
                            std::to_string(meta_len) + " do not add up to total_len " +
                            std::to_string(total_len));
  }
  FillView(src, out);
  return Status::OK();
}

}  // namespace

Status DecodeRecord(const uint8_t* src, size_t len, RecordView* out) {
  return Decode(src, len, true, out);
}

Status DecodeCompleteRecord(const uint8_t* src, size_t len, RecordView* out) {
  return Decode(src, len, false, out);
}

RecordView PeekRecord(const uint8_t* src) {
  RecordView view;
  FillView(src, &view);
  return view;
}

void WritePageHeader(const PageHeader& h, uint8_t* page) {
  le::Store32(page + kPageOffMagic, h.magic);
  le::Store32(page + kPageOffCrc, h.checksum);
  le::Store64(page + kPageOffKeyspace, h.keyspace);
  le::Store32(page + kPageOffBucket, h.bucket);
  le::Store32(page + kPageOffPageNo, h.page_no);
  le::Store32(page + kPageOffUsed, h.used);
  le::Store16(page + kPageOffRun, h.run_pages);
  le::Store16(page + kPageOffFlags, h.flags);
}

Status ReadPageHeader(const uint8_t* page, size_t len, PageHeader* out) {
  if (len < kPageHeaderBytes) {
    return Status::Corruption("page: truncated header (" + std::to_string(len) + " bytes)");
  }
  PageHeader h;
  h.magic = le::Load32(page + kPageOffMagic);
  h.checksum = le::Load32(page + kPageOffCrc);
  h.keyspace = le::Load64(page + kPageOffKeyspace);
  h.bucket = le::Load32(page + kPageOffBucket);
  h.page_no = le::Load32(page + kPageOffPageNo);
  h.used = le::Load32(page + kPageOffUsed);
  h.run_pages = le::Load16(page + kPageOffRun);
  h.flags = le::Load16(page + kPageOffFlags);
  if (h.magic != kPageMagic) return Status::Corruption("page: bad magic");
  if (h.run_pages == 0) return Status::Corruption("page: run_pages is zero");
  if (h.used < kPageHeaderBytes || h.used > size_t{h.run_pages} * kPageBytes) {
    return Status::Corruption("page: used " + std::to_string(h.used) + " outside [" +
                              std::to_string(kPageHeaderBytes) + ", " +
                              std::to_string(size_t{h.run_pages} * kPageBytes) + "]");
  }
  if ((h.flags & ~kKnownPageFlags) != 0) {
    return Status::Corruption("page: unknown flags " + std::to_string(h.flags));
  }
  *out = h;
  return Status::OK();
}

}  // namespace ramp::record
