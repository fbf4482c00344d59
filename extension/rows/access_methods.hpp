// What each of the two access methods needs from the other, declared here so that neither
// includes the other's header nor names the other's namespace. Each function is defined by
// the access method that owns the concept:
//  - the table AM (tableam/handler.cpp) tells ramp tables apart;
//  - ramp_hash (hashindex/group_key.cpp) tells its indexes apart and deletes the entries of a
//    row: the table AM must maintain them for DELETE and for the old row of an UPDATE
//    (entries of new rows are inserted by PostgreSQL through the index AM's aminsert).
#pragma once

#include <cstdint>
#include <string_view>

#include "boundary/pg.hpp"

namespace pgramp {

// ---- table AM `ramp` ----
bool IsRampTable(Relation rel);

// ---- index AM `ramp_hash` ----
bool IsRampHashIndex(Relation index);
bool HasRampHashIndexes(Relation heap);
// The row's entries in every ramp_hash index of heap are deleted in the transaction's
// buffer (the table AM calls this for DELETE and for the old row of an UPDATE).
// remote: the row is committed on the cluster (its entries are too).
void DeleteEntriesOfRow(Relation heap, uint64_t rowid, std::string_view encoded_row, CommandId cid,
                        bool remote);

}  // namespace pgramp
