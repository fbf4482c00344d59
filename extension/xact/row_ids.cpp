// Row-id allocation from the per-table sequence key (xact/row_ids.hpp).
#include "xact/row_ids.hpp"

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>

#include "ramp/client.h"
#include "ramp/read_session.h"

#include "rows/keys.hpp"
#include "xact/session.hpp"

#include "boundary/boundary.hpp"

namespace pgramp {

namespace {

constexpr uint64_t kMaxRowIdChunk = 65536;
constexpr int kRowIdAttempts = 64;

struct RowIdRange {
  uint64_t next = 0;
  uint64_t end = 0;
  uint64_t chunk = 32;
};
struct HighWaterEntry {
  uint64_t hw = 0;
  std::chrono::steady_clock::time_point at;
};

// Backend-wide, like the session: ranges outlive transactions.
std::unordered_map<ramp::KeyspaceId, RowIdRange>& Ranges() {
  static auto* ranges = new std::unordered_map<ramp::KeyspaceId, RowIdRange>();
  return *ranges;
}
std::unordered_map<ramp::KeyspaceId, HighWaterEntry>& HighWaters() {
  static auto* high_water = new std::unordered_map<ramp::KeyspaceId, HighWaterEntry>();
  return *high_water;
}

void RefillRowIds(const ramp::KeyspaceRef& ks) {
  Session& session = Session::Get();
  session.Define(ks);
  std::minstd_rand jitter(static_cast<unsigned>(ks.id ^ reinterpret_cast<uintptr_t>(&session)));
  for (int attempt = 0; attempt < kRowIdAttempts; attempt++) {
    RowIdRange& range = Ranges()[ks.id];
    ramp::ReadResult current;
    session.Check(session.reads().Get(ks.id, RowIdSequenceKey(), &current, /*latest=*/true),
                  "reading the row-id sequence");
    uint64_t next = 0;
    if (current.found && !DecodeU64(current.value, &next)) {
      throw RampError(
          ramp::Status::Corruption("the row-id sequence holds " +
                                   std::to_string(current.value.size()) + " bytes instead of 8"),
          "allocating row ids");
    }
    const uint64_t want = range.chunk;
    if (next > kMaxRowId || kMaxRowId - next < want) {
      throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "the row ids of a ramp table are exhausted",
                     "Row ids are limited to the TID space (2^40).", "");
    }
    // Expected = the version just read (zero when the sequence was never written): two
    // allocators that read the same value cannot both commit.
    ramp::WriteBatch batch(session.client().write_limits());
    session.Check(batch.PutKey(ks.id, RowIdSequenceKey(), EncodeU64(next + want), &current.ts),
                  "allocating row ids");
    ramp::Status s = session.client().Write(batch);
    if (s.ok()) {
      range.next = next;
      range.end = next + want;
      range.chunk = std::min(range.chunk * 2, kMaxRowIdChunk);
      HighWaters()[ks.id] = HighWaterEntry{next + want, std::chrono::steady_clock::now()};
      return;
    }
    if (!s.Is(ramp::Status::Code::kConflict)) session.Check(s, "allocating row ids");
    // Another allocator won the race: back off a little (random, growing) and retry.
    const int max_ms = 1 << std::min(attempt, 6);
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(jitter() % (max_ms * 1000 + 1));
    while (std::chrono::steady_clock::now() < until) {
      session.Check(WaitHook(), "allocating row ids");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  throw RampError(ramp::Status::Conflict("too many concurrent allocations of the row-id sequence"),
                  "allocating row ids");
}

}  // namespace

uint64_t NextRowId(const ramp::KeyspaceRef& ks) {
  RowIdRange& range = Ranges()[ks.id];  // a map node: RefillRowIds leaves it in place
  if (range.next == range.end) RefillRowIds(ks);
  return range.next++;
}

uint64_t HighWater(const ramp::KeyspaceRef& ks) {
  Session& session = Session::Get();
  session.Define(ks);
  ramp::ReadResult current;
  session.Check(session.reads().Get(ks.id, RowIdSequenceKey(), &current),
                "reading the row-id sequence");
  uint64_t hw = 0;
  if (current.found && !DecodeU64(current.value, &hw)) {
    throw RampError(ramp::Status::Corruption("the row-id sequence is not 8 bytes"),
                    "reading the row-id sequence");
  }
  HighWaters()[ks.id] = HighWaterEntry{hw, std::chrono::steady_clock::now()};
  return hw;
}

bool CachedHighWater(ramp::KeyspaceId ks, std::chrono::milliseconds max_age, uint64_t* hw) {
  auto& high_water = HighWaters();
  auto it = high_water.find(ks);
  if (it == high_water.end() || std::chrono::steady_clock::now() - it->second.at > max_age) {
    return false;
  }
  *hw = it->second.hw;
  return true;
}

}  // namespace pgramp
