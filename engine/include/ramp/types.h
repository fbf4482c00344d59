// Basic vocabulary of the engine: keyspaces, partitions, timestamps, read/write paths.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace ramp {

// A keyspace is one relation (table, index, view) or one raw key-value table. Its id is
// chosen by the client (the PostgreSQL extension derives it from the relation's identity so
// that several PostgreSQL servers agree on it).
using KeyspaceId = uint64_t;

inline constexpr uint32_t kDefaultBuckets = 16;

// A partition: (keyspace, bucket), bucket = KeyHash(key) mod buckets-of-keyspace. The unit
// of placement and migration.
struct PartitionId {
  KeyspaceId keyspace = 0;
  uint32_t bucket = 0;
  auto operator<=>(const PartitionId&) const = default;
  bool operator==(const PartitionId&) const = default;
  std::string ToString() const;  // "ks:<decimal id>/b<bucket>"
};

struct PartitionIdHash {
  size_t operator()(const PartitionId& p) const noexcept;
};

// The stable 64-bit hash of a key; buckets and placement depend on it, so it must never
// change between versions of pg_ramp.
uint64_t KeyHash(std::string_view key);
inline uint32_t BucketOf(std::string_view key, uint32_t buckets) {
  return static_cast<uint32_t>(KeyHash(key) % buckets);
}
// Home server of a partition among node_count servers (static: hash mod N).
uint32_t HomeOf(const PartitionId& p, uint32_t node_count);

// A transaction timestamp: hybrid logical clock reading (physical milliseconds << 16 |
// logical counter) plus the id of the client that drew it, which makes it unique.
struct Timestamp {
  uint64_t time = 0;
  uint64_t client = 0;
  auto operator<=>(const Timestamp&) const = default;
  bool operator==(const Timestamp&) const = default;
  bool zero() const { return time == 0 && client == 0; }
  std::string ToString() const;  // "<time>.<client>"
};

struct TimestampHash {
  size_t operator()(const Timestamp& t) const noexcept {
    return static_cast<size_t>(t.time * 0x9E3779B97F4A7C15ull ^ t.client);
  }
};

// How reads reach the servers (DESIGN §5):
//   kRpc     — request/response messages over the tcp provider (the socket baseline)
//   kGetPlus — request/response messages through rings of the preferred provider
//   kGetStar — one-sided read of the committed version at a cached address; unknown or
//              invalid addresses fall back to GET+
enum class ReadPath : uint8_t { kRpc = 0, kGetPlus = 1, kGetStar = 2 };
// How writes reach the servers: kRpc over tcp, kPutPlus through rings of the preferred provider.
enum class WritePath : uint8_t { kRpc = 0, kPutPlus = 1 };
// Concurrency control: RAMP-Fast, or strict two-phase locking (the benchmark baseline).
enum class Protocol : uint8_t { kRamp = 0, kS2pl = 1 };

const char* ReadPathName(ReadPath p);    // "rpc", "get+", "get*"
const char* WritePathName(WritePath p);  // "rpc", "put+"
bool ParseReadPath(std::string_view s, ReadPath* out);
bool ParseWritePath(std::string_view s, WritePath* out);

}  // namespace ramp
