// Rows ↔ tuples: how a row of a ramp table is stored on the cluster (tuple_codec.cpp). The
// table AM encodes and decodes rows; ramp_hash reads the indexed attribute of a row.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "boundary/pg.hpp"

namespace pgramp {

// The slot's row as stored on the cluster: a format byte and a flat MinimalTuple (external
// and compressed values detoasted first: ramp tables have no TOAST table).
std::string EncodeSlot(TupleTableSlot* slot);
// Stores an encoded row into slot (any slot type), with its TID and table OID. A ramp slot
// (rows/row_slot.hpp) then holds a committed version of unknown timestamp: callers that know
// better mark it.
void StoreRow(TupleTableSlot* slot, Relation rel, uint64_t rowid, std::string_view encoded);
// StoreRow for rows of a sequential scan whose bytes stay in place until the scan's next row:
// a minimal-tuple slot points at them (no copy) when the tuple is aligned; otherwise a copy.
// StoreScannedRow's no-copy case alone: false, with the slot untouched, when the slot is not
// a minimal-tuple slot, the tuple is not aligned or its header does not check (StoreRow
// then copies it or reports it). Never throws or ereports.
bool TryStoreScannedRow(TupleTableSlot* slot, Relation rel, uint64_t rowid,
                        std::string_view encoded) noexcept;
void StoreScannedRow(TupleTableSlot* slot, Relation rel, uint64_t rowid, std::string_view encoded);
// The value of attribute attnum (1-based) of an encoded row, palloc'd in the current memory
// context when by reference. Returns false for NULL.
bool RowAttribute(Relation rel, std::string_view encoded, AttrNumber attnum, Datum* value);

}  // namespace pgramp
