// ImportTable: what an shm peer exposed to us. Segments are the peer's memfds mapped into
// our address space (read-only when the peer handed a read-only descriptor); regions are
// descriptions in segment coordinates. One-sided operations are checked against the
// description (key, bounds, rights: core/region.h) before any byte is copied.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/fd.h"
#include "core/wire.h"
#include "ramp/status.h"
#include "ramp/transport/memory.h"

namespace ramp::transport::detail {

class ImportTable {
 public:
  ImportTable() = default;
  ~ImportTable();
  ImportTable(const ImportTable&) = delete;
  ImportTable& operator=(const ImportTable&) = delete;

  // Maps a segment the peer sent. Checks the descriptor: a memfd sealed against shrinking
  // (else the peer could truncate it under our copies: SIGBUS), at least as long as said,
  // and writable only when claimed writable.
  Status AddSegment(const wire::SegmentInfo& info, UniqueFd fd);
  // Records a region; its pieces must lie inside segments we mapped.
  Status AddRegion(const wire::Expose& expose);
  bool HasRegion(uint64_t id) const { return regions_.count(id) != 0; }

  // Copies [offset, offset+len) of the region into local (access = read) or local into it
  // (access = write) after checking key, rights and bounds. NotFound for an unknown region.
  Status Copy(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
              void* local) const;
  // Direct access to a whole mapped segment range (the peer's ring block).
  Status MapRange(uint64_t segment_id, uint64_t offset, uint64_t len, bool writable,
                  uint8_t** out) const;

 private:
  struct Mapping {
    uint8_t* base = nullptr;
    uint64_t length = 0;
  };
  struct Piece {
    uint8_t* data;
    uint64_t length;
    uint64_t region_offset;
  };
  struct Region {
    RemoteRegion handle;
    std::vector<Piece> pieces;
  };
  // Keyed by (segment id, writable): a segment may be imported once read-only and once
  // writable, when both kinds of region live in it.
  std::map<std::pair<uint64_t, bool>, Mapping> segments_;
  std::unordered_map<uint64_t, Region> regions_;
};

}  // namespace ramp::transport::detail
