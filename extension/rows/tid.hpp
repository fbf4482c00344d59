// TIDs ↔ row ids (the mapping is described in rows/keys.hpp): the table AM hands TIDs to
// PostgreSQL, ramp_hash entries point at rows by row id, and both convert here.
#pragma once

#include <cstdint>

#include "boundary/pg.hpp"

namespace pgramp {

inline bool RowIdOfTid(ItemPointer tid, uint64_t* rowid) {
  if (!ItemPointerIsValid(tid)) return false;
  const uint16_t offset = ItemPointerGetOffsetNumberNoCheck(tid);
  if (offset < 1 || offset > 256) return false;
  *rowid = uint64_t{ItemPointerGetBlockNumberNoCheck(tid)} * 256 + (offset - 1);
  return true;
}
inline void SetTid(ItemPointer tid, uint64_t rowid) {
  ItemPointerSet(tid, static_cast<BlockNumber>(rowid / 256),
                 static_cast<OffsetNumber>(rowid % 256 + 1));
}

}  // namespace pgramp
