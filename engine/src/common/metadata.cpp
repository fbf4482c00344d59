// Transaction metadata of RAMP-Fast versions (record.h): the sibling keys or partitions.
#include <map>
#include <string>
#include <vector>

#include "common/little_endian.h"
#include "common/record.h"

namespace ramp::record {
namespace {

constexpr size_t kKeyEntryFixedBytes = 8 + 4 + 2;  // keyspace, bucket, key_len
constexpr size_t kPartitionEntryBytes = 8 + 4;     // keyspace, bucket

template <typename T>
void Append(std::string* out, T v) {
  char bytes[sizeof(T)];
  le::Store(reinterpret_cast<uint8_t*>(bytes), v);
  out->append(bytes, sizeof(T));
}

Status MetaCorruption(const std::string& what) {
  return Status::Corruption("metadata: " + what);
}

// A bounds-checked cursor over the metadata bytes.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  size_t remaining() const { return bytes_.size() - pos_; }
  template <typename T>
  bool Read(T* v) {
    if (remaining() < sizeof(T)) return false;
    *v = le::Load<T>(reinterpret_cast<const uint8_t*>(bytes_.data() + pos_));
    pos_ += sizeof(T);
    return true;
  }
  bool ReadBytes(size_t n, std::string_view* v) {
    if (remaining() < n) return false;
    *v = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Reads the entry count and checks that the remaining bytes can hold that many entries of
// at least min_entry bytes each, so a lying count cannot make us allocate.
Status ReadCount(Cursor* in, size_t min_entry, uint32_t* count) {
  if (!in->Read(count)) return MetaCorruption("truncated count");
  if (*count > in->remaining() / min_entry) {
    return MetaCorruption("count " + std::to_string(*count) + " exceeds what " +
                          std::to_string(in->remaining()) + " bytes can hold");
  }
  return Status::OK();
}

Status DecodeKeys(Cursor* in, std::vector<Sibling>* keys) {
  uint32_t count = 0;
  RAMP_RETURN_IF_ERROR(ReadCount(in, kKeyEntryFixedBytes, &count));
  keys->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Sibling s;
    uint16_t key_len = 0;
    std::string_view key;
    if (!in->Read(&s.keyspace) || !in->Read(&s.bucket) || !in->Read(&key_len)) {
      return MetaCorruption("truncated sibling " + std::to_string(i));
    }
    if (!in->ReadBytes(key_len, &key)) {
      return MetaCorruption("key_len " + std::to_string(key_len) + " of sibling " +
                            std::to_string(i) + " exceeds the remaining bytes");
    }
    s.key.assign(key);
    keys->push_back(std::move(s));
  }
  return Status::OK();
}

Status DecodePartitions(Cursor* in, std::vector<PartitionId>* partitions) {
  uint32_t count = 0;
  RAMP_RETURN_IF_ERROR(ReadCount(in, kPartitionEntryBytes, &count));
  partitions->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    PartitionId p;
    // Cannot fail: ReadCount checked that count entries fit.
    in->Read(&p.keyspace);
    in->Read(&p.bucket);
    partitions->push_back(p);
  }
  return Status::OK();
}

// Bulk loads write many partitions in one transaction; their versions each carry the list.
// Listing 16 partitions of one keyspace took 197 bytes per row (46 % of a TPC-H lineitem
// row on the servers); as a bitmap of buckets per keyspace it takes 17.
//   u8 kPartitionBitmaps | u16 groups | groups x (u64 keyspace, u16 bitmap bytes, bitmap)
// bit b of a group's bitmap (byte b / 8, bit b % 8) is bucket b of its keyspace. Used when
// it is shorter than the list; decodes to Mode::kPartitions, sorted by keyspace and bucket.
constexpr uint8_t kPartitionBitmaps = 3;
constexpr size_t kBitmapGroupFixedBytes = 8 + 2;
constexpr uint32_t kMaxBitmapBucket = 65535 * 8 - 1;

// Only for a list in strictly increasing order (what the writer makes, and what the bitmaps
// decode to): any list a decoder accepted then encodes to bytes that decode to it again.
bool EncodePartitionBitmaps(const std::vector<PartitionId>& partitions, std::string* out) {
  for (size_t i = 1; i < partitions.size(); i++) {
    if (!(partitions[i - 1] < partitions[i])) return false;
  }
  std::map<KeyspaceId, std::vector<uint8_t>> groups;
  for (const PartitionId& p : partitions) {
    if (p.bucket > kMaxBitmapBucket) return false;
    std::vector<uint8_t>& bits = groups[p.keyspace];
    if (bits.size() <= p.bucket / 8) bits.resize(p.bucket / 8 + 1, 0);
    bits[p.bucket / 8] |= static_cast<uint8_t>(1u << (p.bucket % 8));
  }
  if (groups.size() > 65535) return false;
  Append(out, kPartitionBitmaps);
  Append(out, static_cast<uint16_t>(groups.size()));
  for (const auto& [keyspace, bits] : groups) {
    Append(out, keyspace);
    Append(out, static_cast<uint16_t>(bits.size()));
    out->append(reinterpret_cast<const char*>(bits.data()), bits.size());
  }
  return true;
}

Status DecodePartitionBitmaps(Cursor* in, std::vector<PartitionId>* partitions) {
  uint16_t groups = 0;
  if (!in->Read(&groups)) return MetaCorruption("truncated group count");
  if (groups > in->remaining() / kBitmapGroupFixedBytes) {
    return MetaCorruption("group count " + std::to_string(groups) + " exceeds what " +
                          std::to_string(in->remaining()) + " bytes can hold");
  }
  for (uint32_t g = 0; g < groups; ++g) {
    KeyspaceId keyspace = 0;
    uint16_t len = 0;
    std::string_view bits;
    if (!in->Read(&keyspace) || !in->Read(&len) || !in->ReadBytes(len, &bits)) {
      return MetaCorruption("truncated partition group " + std::to_string(g));
    }
    if (!partitions->empty() && keyspace <= partitions->back().keyspace) {
      return MetaCorruption("partition groups out of order");
    }
    for (uint32_t b = 0; b < uint32_t{len} * 8; ++b) {
      if (static_cast<uint8_t>(bits[b / 8]) & (1u << (b % 8))) {
        partitions->push_back(PartitionId{keyspace, b});
      }
    }
  }
  return Status::OK();
}

}  // namespace

void EncodeMetadata(const Metadata& m, std::string* out) {
  switch (m.mode) {
    case Metadata::Mode::kNone:
      return;
    case Metadata::Mode::kKeys:
      Append(out, static_cast<uint8_t>(m.mode));
      Append(out, static_cast<uint32_t>(m.keys.size()));
      for (const Sibling& s : m.keys) {
        Append(out, s.keyspace);
        Append(out, s.bucket);
        // Keys are at most 65535 bytes (the record format); longer ones never get here.
        Append(out, static_cast<uint16_t>(s.key.size()));
        out->append(s.key);
      }
      return;
    case Metadata::Mode::kPartitions: {
      std::string bitmaps;
      const size_t list_bytes = 1 + 4 + m.partitions.size() * kPartitionEntryBytes;
      if (EncodePartitionBitmaps(m.partitions, &bitmaps) && bitmaps.size() < list_bytes) {
        out->append(bitmaps);
        return;
      }
      Append(out, static_cast<uint8_t>(m.mode));
      Append(out, static_cast<uint32_t>(m.partitions.size()));
      for (const PartitionId& p : m.partitions) {
        Append(out, p.keyspace);
        Append(out, p.bucket);
      }
      return;
    }
  }
}

Status DecodeMetadata(std::string_view bytes, Metadata* out) {
  *out = Metadata();
  if (bytes.empty()) return Status::OK();
  Cursor in(bytes);
  uint8_t mode = 0;
  in.Read(&mode);
  switch (static_cast<Metadata::Mode>(mode)) {
    case Metadata::Mode::kNone:
      break;
    case Metadata::Mode::kKeys:
      out->mode = Metadata::Mode::kKeys;
      RAMP_RETURN_IF_ERROR(DecodeKeys(&in, &out->keys));
      break;
    case Metadata::Mode::kPartitions:
      out->mode = Metadata::Mode::kPartitions;
      RAMP_RETURN_IF_ERROR(DecodePartitions(&in, &out->partitions));
      break;
    default:
      if (mode == kPartitionBitmaps) {
        out->mode = Metadata::Mode::kPartitions;
        RAMP_RETURN_IF_ERROR(DecodePartitionBitmaps(&in, &out->partitions));
        break;
      }
      return MetaCorruption("unknown mode " + std::to_string(mode));
  }
  if (in.remaining() != 0) {
    return MetaCorruption(std::to_string(in.remaining()) + " trailing bytes");
  }
  return Status::OK();
}

}  // namespace ramp::record
