#include "protocol/page_messages.h"

#include <string>

#include "ramp/bytes.h"

namespace ramp::protocol {
namespace {

constexpr size_t kItemBytes = 8 + 4 + 4 + 4 + 4 + 8;
constexpr size_t kResultMinBytes = kItemBytes + 2 + 2;
constexpr uint16_t kMaxStatusCode = static_cast<uint16_t>(Status::Code::kInternal);

Status Malformed(const char* what, const char* why) {
  return Status::Corruption(std::string("malformed ") + what + ": " + why);
}

Status CheckCount(uint32_t count, size_t remaining, size_t min_item, const char* what) {
  if (count > remaining / min_item) {
    return Status::Corruption(std::string("malformed ") + what + ": " + std::to_string(count) +
                              " items cannot fit in " + std::to_string(remaining) + " bytes");
  }
  return Status::OK();
}

void PutItem(StringByteWriter& w, const PageReadItem& i) {
  w.PutU64(i.page.part.keyspace);
  w.PutU32(i.page.part.bucket);
  w.PutU32(i.page.page_no);
  w.PutU32(i.page.epoch);
  w.PutU32(i.length);
  w.PutU64(i.dest_offset);
}
bool GetItem(ByteReader& r, PageReadItem* i) {
  return r.GetU64(&i->page.part.keyspace) && r.GetU32(&i->page.part.bucket) &&
         r.GetU32(&i->page.page_no) && r.GetU32(&i->page.epoch) && r.GetU32(&i->length) &&
         r.GetU64(&i->dest_offset);
}

}  // namespace

void Encode(const ReadPagesRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU64(m.dest.id);
  w.PutU64(m.dest.key);
  w.PutU64(m.dest.length);
  w.PutU32(m.dest.access);
  w.PutU32(m.dest.reserved);
  w.PutU8(m.flags);
  w.PutU8(0);
  w.PutU16(0);
  w.PutU32(0);
  for (const auto& i : m.items) PutItem(w, i);
}

Status Decode(std::string_view body, uint32_t count, ReadPagesRequest* out) {
  ByteReader r(body);
  uint8_t pad8 = 0;
  uint16_t pad16 = 0;
  uint32_t pad32 = 0;
  if (!r.GetU64(&out->dest.id) || !r.GetU64(&out->dest.key) || !r.GetU64(&out->dest.length) ||
      !r.GetU32(&out->dest.access) || !r.GetU32(&out->dest.reserved) || !r.GetU8(&out->flags) ||
      !r.GetU8(&pad8) || !r.GetU16(&pad16) || !r.GetU32(&pad32)) {
    return Malformed("READ_PAGES", "truncated");
  }
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kItemBytes, "READ_PAGES"));
  out->items.resize(count);
  for (auto& i : out->items) {
    if (!GetItem(r, &i)) return Malformed("READ_PAGES", "truncated");
  }
  return r.ExpectEnd("READ_PAGES");
}

void Encode(const ReadPagesReply& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& res : m.results) {
    PutItem(w, res.item);
    w.PutU16(static_cast<uint16_t>(res.status.code()));
    const std::string& msg = res.status.message();
    const size_t n = msg.size() > 0xFFFF ? 0xFFFF : msg.size();
    w.PutU16(static_cast<uint16_t>(n));
    w.PutBytes(msg.data(), n);
  }
}

Status Decode(std::string_view body, uint32_t count, ReadPagesReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), kResultMinBytes, "READ_PAGES reply"));
  out->results.resize(count);
  for (auto& res : out->results) {
    uint16_t code = 0;
    uint16_t len = 0;
    const uint8_t* msg = nullptr;
    if (!GetItem(r, &res.item) || !r.GetU16(&code) || !r.GetU16(&len) || !r.GetView(len, &msg)) {
      return Malformed("READ_PAGES reply", "truncated");
    }
    if (code > kMaxStatusCode) return Malformed("READ_PAGES reply", "unknown status code");
    if (code == 0 && len != 0) return Malformed("READ_PAGES reply", "message on a success");
    res.status = code == 0 ? Status::OK()
                           : Status(static_cast<Status::Code>(code),
                                    std::string_view(reinterpret_cast<const char*>(msg), len));
  }
  return r.ExpectEnd("READ_PAGES reply");
}

void Encode(const ScanOpenRequest& m, std::string* out) {
  StringByteWriter w(out);
  w.PutU64(m.snapshot.time);
  w.PutU64(m.snapshot.client);
  for (const auto& p : m.partitions) {
    w.PutU64(p.keyspace);
    w.PutU32(p.bucket);
  }
}

Status Decode(std::string_view body, uint32_t count, ScanOpenRequest* out) {
  ByteReader r(body);
  if (!r.GetU64(&out->snapshot.time) || !r.GetU64(&out->snapshot.client)) {
    return Malformed("SCAN_OPEN", "truncated");
  }
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 12, "SCAN_OPEN"));
  out->partitions.resize(count);
  for (auto& p : out->partitions) {
    if (!r.GetU64(&p.keyspace) || !r.GetU32(&p.bucket)) return Malformed("SCAN_OPEN", "truncated");
  }
  return r.ExpectEnd("SCAN_OPEN");
}

void Encode(const ScanOpenReply& m, std::string* out) {
  StringByteWriter w(out);
  for (const auto& p : m.partitions) {
    w.PutU32(p.epoch);
    w.PutU32(p.page_count);
    w.PutU32(p.pending);
  }
}

Status Decode(std::string_view body, uint32_t count, ScanOpenReply* out) {
  ByteReader r(body);
  RAMP_RETURN_IF_ERROR(CheckCount(count, r.remaining(), 12, "SCAN_OPEN reply"));
  out->partitions.resize(count);
  for (auto& p : out->partitions) {
    if (!r.GetU32(&p.epoch) || !r.GetU32(&p.page_count) || !r.GetU32(&p.pending)) {
      return Malformed("SCAN_OPEN reply", "truncated");
    }
  }
  return r.ExpectEnd("SCAN_OPEN reply");
}

}  // namespace ramp::protocol
