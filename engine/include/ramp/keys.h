// Key layouts the client library knows: grouped keys (secondary indexes) and numbered rows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ramp {

// Grouped keys (secondary indexes): key = EncodeGroupKey(group, suffix). The partition of a
// grouped key is chosen by its group alone, so every entry of one indexed value lives in one
// partition and a group read gets them with one request.
std::string EncodeGroupKey(std::string_view group, std::string_view suffix);
// Splits a grouped key; false when the bytes are not one.
bool DecodeGroupKey(std::string_view key, std::string_view* group, std::string_view* suffix);

// Numbered rows (WriteBatch entries, ReadSession rows): the key of row `id` is its id as 8
// big-endian bytes; in a grouped keyspace an entry (group, id) is
// EncodeGroupKey(RowKey(group), RowKey(id)). Keys of other lengths never collide with rows.
inline constexpr size_t kRowKeyBytes = 8;

inline std::string RowKey(uint64_t id) {
  std::string out(kRowKeyBytes, '\0');
  for (int i = 7; i >= 0; i--) {
    out[i] = static_cast<char>(id & 0xff);
    id >>= 8;
  }
  return out;
}

inline bool DecodeRowKey(std::string_view key, uint64_t* id) {
  if (key.size() != kRowKeyBytes) return false;
  uint64_t v = 0;
  for (unsigned char c : key) v = (v << 8) | c;
  *id = v;
  return true;
}

}  // namespace ramp
