// Basic vocabulary (types.h): key hashing, partition placement, names of read/write paths.
#include "ramp/types.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/little_endian.h"

namespace ramp {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd
constexpr uint64_t kMixMul1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kMixMul2 = 0x94D049BB133111EBull;

// A bijective 64-bit mixer (xor-shift / multiply rounds): every input bit affects every
// output bit with probability close to one half.
constexpr uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= kMixMul1;
  x ^= x >> 27;
  x *= kMixMul2;
  x ^= x >> 31;
  return x;
}

}  // namespace

// Keys are absorbed eight bytes at a time, each word through a full mixing round, so short
// keys (8-byte row ids are the common case) cost one or two rounds. The length enters the
// initial state, so keys that differ only by trailing zero bytes hash differently.
// Changing anything here moves every key to another bucket: the function is frozen.
uint64_t KeyHash(std::string_view key) {
  const auto* p = reinterpret_cast<const uint8_t*>(key.data());
  size_t n = key.size();
  uint64_t h = Mix(n * kGolden + kGolden);
  for (; n >= 8; n -= 8, p += 8) h = Mix(h ^ le::Load64(p)) + kGolden;
  if (n > 0) {
    // The tail as a little-endian word padded with zeros (what Load64 of a zero-padded copy
    // gives), assembled in a register: byte stores to a buffer and a word load of it stall
    // on store forwarding, which cost more than the rest of the hash of a short key.
    uint64_t tail = 0;
    for (size_t i = 0; i < n; i++) tail |= uint64_t{p[i]} << (8 * i);
    h = Mix(h ^ tail) + kGolden;
  }
  return Mix(h);
}

// Buckets of one keyspace go round-robin over the servers from a keyspace-dependent start,
// so B buckets spread over N servers differ by at most one per server, and different
// keyspaces start on different servers.
uint32_t HomeOf(const PartitionId& p, uint32_t node_count) {
  if (node_count == 0) return 0;
  const uint64_t start = Mix(p.keyspace) % node_count;
  return static_cast<uint32_t>((start + p.bucket) % node_count);
}

size_t PartitionIdHash::operator()(const PartitionId& p) const noexcept {
  return static_cast<size_t>(Mix(p.keyspace + kGolden * (uint64_t{p.bucket} + 1)));
}

std::string PartitionId::ToString() const {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "ks:%" PRIu64 "/b%" PRIu32, keyspace, bucket);
  return buf;
}

std::string Timestamp::ToString() const {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%" PRIu64 ".%" PRIu64, time, client);
  return buf;
}

const char* ReadPathName(ReadPath p) {
  switch (p) {
    case ReadPath::kRpc:
      return "rpc";
    case ReadPath::kGetPlus:
      return "get+";
    case ReadPath::kGetStar:
      return "get*";
  }
  return "unknown";
}

const char* WritePathName(WritePath p) {
  switch (p) {
    case WritePath::kRpc:
      return "rpc";
    case WritePath::kPutPlus:
      return "put+";
  }
  return "unknown";
}

bool ParseReadPath(std::string_view s, ReadPath* out) {
  for (ReadPath p : {ReadPath::kRpc, ReadPath::kGetPlus, ReadPath::kGetStar}) {
    if (s == ReadPathName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool ParseWritePath(std::string_view s, WritePath* out) {
  for (WritePath p : {WritePath::kRpc, WritePath::kPutPlus}) {
    if (s == WritePathName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace ramp
