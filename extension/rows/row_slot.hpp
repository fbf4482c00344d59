// The tuple slot of ramp tables (row_slot.cpp): a minimal-tuple slot that also knows who
// wrote the row version it holds, for the system columns PostgreSQL reads from rows.
//
// What the system columns of a ramp row return (see NOTES.md, "System columns"):
//  - xmin: for a version this transaction wrote (inserted or updated, in any command or
//    subtransaction), the top-level transaction id (assigned on first need), so that
//    TransactionIdIsCurrentTransactionId(xmin) holds as for heap -- the RI trigger on an
//    UPDATE of a referencing table asks that of the old row. For a committed version, a
//    normal transaction id derived from the version's commit timestamp: never the current
//    transaction's, stable while the version is the newest, different for each committed
//    version (an optimistic-concurrency token, as ORMs use xmin), but it names no real
//    transaction (age(xmin) is meaningless).
//  - xmax: 0 (InvalidTransactionId), except for a version this transaction wrote by updating
//    a row it had locked (ON CONFLICT DO UPDATE, BEFORE row triggers, FOR UPDATE): its xid,
//    as heap's (the lock carried to the new version). Rows it locked or deleted still read 0.
//  - cmin, cmax: the command id of the write for the transaction's own versions; 0 otherwise.
//  - ctid, tableoid: the row id's TID and the table (PostgreSQL answers those itself).
// A slot filled otherwise (a virtual tuple the executor computed) counts as committed until
// the table AM marks it (insert, update).
#pragma once

#include <cstdint>

#include "boundary/pg.hpp"

namespace pgramp {

extern const TupleTableSlotOps kRowSlotOps;

inline bool IsRowSlot(const TupleTableSlot* slot) {
  return slot->tts_ops == &kRowSlotOps;
}

// Stores a minimal tuple into a row slot (ExecStoreMinimalTuple, which refuses slot types
// other than TTSOpsMinimalTuple). Marks the version committed with timestamp hash 0: callers
// mark it afterwards. Cannot fail.
void StoreMinimalTupleInRowSlot(TupleTableSlot* slot, MinimalTuple tuple, bool should_free);

// Who wrote the slot's version (no-op for other slot types): this transaction, in command
// cid (locked: by updating a row it had locked); or a committed transaction, with the
// version's timestamp (ramp::Timestamp's time and client).
void MarkOwnVersion(TupleTableSlot* slot, CommandId cid, bool locked = false);
void MarkCommittedVersion(TupleTableSlot* slot, uint64_t ts_time, uint64_t ts_client);

}  // namespace pgramp
