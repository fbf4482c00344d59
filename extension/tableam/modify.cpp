// INSERT, COPY, UPDATE, DELETE and row locks on ramp tables. Every write goes to the
// transaction's buffer and reaches the cluster with the commit (xact.cpp).
//
// UPDATE = delete the old row id + insert a new one: local indexes on the old TID then never
// return the new row, and no update chains are needed (or, when no indexed column changes,
// a new version under the same row id: UpdateInPlace). UPDATE, DELETE and SELECT FOR
// UPDATE/SHARE first lock the row on the cluster (row_locks.cpp): a concurrent writer is
// waited for and its newest version re-checked by the executor (EvalPlanQual). DELETE and
// UPDATE still carry the version timestamp the transaction read, so a change that slipped
// past the locks (ramp.row_locks off, a client without intents) makes the commit fail with
// 40001.
#include <memory>
#include <string>
#include <vector>

#include "ramp/client.h"

#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "xact/row_ids.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "rows/access_methods.hpp"
#include "tableam/tableam.hpp"

namespace pgramp::tam {

namespace {

// The row was updated or deleted by this transaction, at command cmax (heap's
// TM_SelfModified). xmax names the transaction as heap's does: MERGE tells "cannot affect row
// a second time" from an internal error by TransactionIdIsCurrentTransactionId(xmax).
TM_Result SelfModified(TM_FailureData* tmfd, ItemPointer tid, CommandId cmax) {
  FillFailure(tmfd, tid, cmax);
  tmfd->xmax = PgCall([] { return GetCurrentTransactionId(); });
  return TM_SelfModified;
}

// How many rows of the current command CheckCommandDeletesCurrent re-reads at most (an
// UPDATE of one row by key needs one; a bulk UPDATE's rows are checked at commit).
constexpr size_t kMaxCommandDeletes = 64;

// Deletes the row at tid in the transaction's buffer (and its ramp_hash entries).
// moved: the row lives on under a new row id (an UPDATE) or in another partition; its
// tombstone says so (ramp::kMovedTombstone), for writers waiting for it.
TM_Result DeleteRow(Relation rel, ItemPointer tid, CommandId cid, TM_FailureData* tmfd,
                    bool moved) {
  uint64_t rowid = 0;
  if (!RowIdOfTid(tid, &rowid)) {
    FillFailure(tmfd, tid, InvalidCommandId);
    return TM_Deleted;
  }
  const ramp::KeyspaceRef ks = RelationKeyspace(rel);
  XactState& x = Xact();
  const ramp::SubTxnId sub = GetCurrentSubTransactionId();
  const ramp::EntryKey key{0, rowid};
  const bool indexed = HasRampHashIndexes(rel);

  if (const ramp::BatchEntry* own = x.writes.Find(ks.id, key)) {
    if (own->in_place && own->insert_cid == cid) {
      // Updated by this very command already (heap: the old tuple's xmax/cmax are ours).
      return SelfModified(tmfd, tid, cid);
    }
    if (own->in_place) {
      // Updated in place by an earlier command: deleting it deletes the committed version
      // that update read (its expected version stays).
      x.writes.Delete(ks, key, cid, sub, true, nullptr, moved);
      return TM_Ok;
    }
    if (own->deleted) {
      // Deleted by this transaction already (by this command when cmax == cid: the executor
      // then skips the row, as for heap).
      return SelfModified(tmfd, tid, own->delete_cid);
    }
    if (own->inserted && !own->remote) {
      const std::string value = own->value;  // copy: Delete may move the entry
      x.writes.Delete(ks, key, cid, sub, false, nullptr);
      if (indexed) DeleteEntriesOfRow(rel, rowid, value, cid, false);
      return TM_Ok;
    }
  }

  // A committed row: delete it with the version this transaction read as the expected one.
  ramp::Timestamp expected;
  const bool have_expected = RecallVersion(ks.id, rowid, &expected);
  std::string value;
  if (!have_expected || indexed) {
    RowVersion row;
    if (!FetchRow(ks, ramp::Visibility{}, rowid, &row, nullptr)) {
      FillFailure(tmfd, tid, InvalidCommandId);
      return TM_Deleted;  // gone meanwhile: the executor skips it (or 40001 if serializable)
    }
    if (have_expected && !(row.ts == expected)) {
      throw RampError(ramp::Status::Conflict("row " + std::to_string(rowid) +
                                             " changed after this transaction read it"),
                      std::string("updating ramp table \"") + RelationGetRelationName(rel) + "\"");
    }
    if (!have_expected) expected = row.ts;
    value = std::move(row.value);
  }
  x.writes.Delete(ks, key, cid, sub, true, &expected, moved);
  if (indexed) DeleteEntriesOfRow(rel, rowid, value, cid, true);
  if (x.command_deletes_cid != cid) {
    x.command_deletes.clear();
    x.command_deletes_cid = cid;
  }
  if (x.command_deletes.size() < kMaxCommandDeletes) {
    x.command_deletes.push_back(XactState::CommandDelete{ks, rowid, expected});
  }
  return TM_Ok;
}

}  // namespace

bool CheckCommandDeletesCurrent(const ramp::KeyspaceRef& found_ks, uint64_t found_rowid,
                                bool remote) {
  XactState* x = XactIfAny();
  if (x == nullptr || x->command_deletes.empty() ||
      x->command_deletes_cid != GetCurrentCommandId(false)) {
    return true;
  }
  Session& session = Session::Get();
  // The live row goes into the same read-atomic read: if its transaction also deleted one
  // of our rows, RAMP's metadata makes the read return that deletion even while the
  // transaction's COMMIT is still on its way to the other partition.
  // An own row (remote = false) is not read: only this command's deletes are.
  const size_t first = remote ? 1 : 0;
  std::vector<ramp::RowRequest> rows;
  rows.reserve(x->command_deletes.size() + 1);
  if (remote) {
    session.Define(found_ks);
    rows.push_back(ramp::RowRequest{found_ks.id, found_rowid, {}});
  }
  for (const auto& d : x->command_deletes) {
    session.Define(d.ks);
    rows.push_back(ramp::RowRequest{d.ks.id, d.rowid, {}});
  }
  // The latest versions, not the statement's snapshot: the point is what committed since.
  std::vector<ramp::RowResult> results;
  session.Check(session.reads().ReadRows(rows, ramp::RowReads::kLatest, &results),
                "re-reading rows this command changed");
  for (size_t i = first; i < results.size() && i - first < x->command_deletes.size(); i++) {
    const XactState::CommandDelete& d = x->command_deletes[i - first];
    if (!(results[i].ts == d.expected)) {
      throw RampError(ramp::Status::Conflict("row " + std::to_string(d.rowid) +
                                             " was changed by a concurrent transaction after "
                                             "this one read it"),
                      "checking a unique index of a ramp table");
    }
  }
  // The same read may show the row deleted after all: it was the old version of a row whose
  // updating transaction had committed at the new row's partition but not yet at this one.
  return !remote || (!results.empty() && results[0].found);
}

void InsertSlots(Relation rel, TupleTableSlot** slots, int nslots, CommandId cid) {
  const ramp::KeyspaceRef ks = RelationKeyspace(rel);
  XactState& x = Xact();
  Session& session = Session::Get();
  const ramp::SubTxnId sub = GetCurrentSubTransactionId();
  x.writes.set_limits(session.client().write_limits());
  std::vector<uint64_t> rowids(static_cast<size_t>(nslots));
  for (int i = 0; i < nslots; i++) {
    std::string value = EncodeSlot(slots[i]);
    const uint64_t rowid = NextRowId(ks);
    // The batch refuses a row over the client's limit here, at the statement that made it.
    const ramp::Status st =
        x.writes.Insert(ks, ramp::EntryKey{0, rowid}, std::move(value), cid, sub);
    if (!st.ok()) {
      session.Check(st,
                    std::string("writing to ramp table \"") + RelationGetRelationName(rel) + "\"");
    }
    slots[i]->tts_tableOid = RelationGetRelid(rel);
    SetTid(&slots[i]->tts_tid, rowid);
    MarkOwnVersion(slots[i], cid);  // RETURNING xmin, AFTER triggers
    rowids[i] = rowid;
  }
  // A bulk load into a table of this transaction commits ahead (xact.hpp).
  NoteInsertedAhead(x, ks, rowids.data(), nslots);
}

void TupleInsert(Relation rel, TupleTableSlot* slot, CommandId cid, int options,
                 struct BulkInsertStateData* bistate) {
  Boundary([&] { InsertSlots(rel, &slot, 1, cid); });
  // Row counts for pgstat as heap reports them (at transaction end they become live/dead
  // tuples): autovacuum then vacuums ramp tables too, which drops dead local index entries.
  pgstat_count_heap_insert(rel, 1);
}

void TupleInsertSpeculative(Relation rel, TupleTableSlot* slot, CommandId cid, int options,
                            struct BulkInsertStateData* bistate, uint32 specToken) {
  // Unique checks happen in local indexes against the buffered row; if the insertion loses,
  // TupleCompleteSpeculative takes the row back.
  Boundary([&] { InsertSlots(rel, &slot, 1, cid); });
}

void TupleCompleteSpeculative(Relation rel, TupleTableSlot* slot, uint32 specToken,
                              bool succeeded) {
  if (succeeded) return;
  Boundary([&] {
    uint64_t rowid = 0;
    if (!RowIdOfTid(&slot->tts_tid, &rowid)) return;
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    const CommandId cid = GetCurrentCommandId(false);
    Xact().writes.Delete(ks, ramp::EntryKey{0, rowid}, cid, GetCurrentSubTransactionId(), false,
                         nullptr);
    // The executor inserted ramp_hash entries for the speculative row: take them back too.
    const ramp::BatchEntry* own = Xact().writes.Find(ks.id, ramp::EntryKey{0, rowid});
    if (own != nullptr && HasRampHashIndexes(rel)) {
      const std::string value = own->value;
      DeleteEntriesOfRow(rel, rowid, value, cid, false);
    }
  });
}

void MultiInsert(Relation rel, TupleTableSlot** slots, int nslots, CommandId cid, int options,
                 struct BulkInsertStateData* bistate) {
  Boundary([&] { InsertSlots(rel, slots, nslots, cid); });
  pgstat_count_heap_insert(rel, nslots);
}

TM_Result TupleDelete(Relation rel, ItemPointer tid, CommandId cid, Snapshot snapshot,
                      Snapshot crosscheck, bool wait, TM_FailureData* tmfd, bool changingPart) {
  const TM_Result result = Boundary([&] {
    const TM_Result locked = LockForWrite(rel, tid, ramp::IntentMode::kExclusive, tmfd);
    if (locked != TM_Ok) return locked;
    return DeleteRow(rel, tid, cid, tmfd, changingPart);
  });
  if (result == TM_Ok) pgstat_count_heap_delete(rel);
  return result;
}

namespace {

// Row-level triggers fetch OLD and NEW by TID when they fire, and a row updated in place has
// one TID for both. Statement triggers are fine, with transition tables too (the views'
// triggers): NEW rows are captured from the executor's slot, and OLD by TID right after the
// update, while the TID still stands for the version it replaced (fetch.cpp, AnyVisibility).
// Foreign-key triggers are fine too, so that a table with foreign keys keeps its updates in
// place (a concurrent writer of the row then follows the update instead of failing with
// 40001): an UPDATE queues their event only when a key column changed (or the row is the
// transaction's own, which is never updated in place). On the referenced side the key has a
// unique index, and on the referencing side UpdateInPlace counts the foreign key's columns
// as indexed ones, so an update that queues such an event always moves the row.
bool HasRowTriggers(Relation rel) {
  const TriggerDesc* t = rel->trigdesc;
  if (t == nullptr) return false;
  for (int i = 0; i < t->numtriggers; ++i) {
    const Trigger& trigger = t->triggers[i];
    if (TRIGGER_FOR_ROW(trigger.tgtype) &&
        RI_FKey_trigger_type(trigger.tgfoid) == RI_TRIGGER_NONE) {
      return true;
    }
  }
  return false;
}

// Adds the referencing columns of rel's foreign keys to *columns (offset as
// RelationGetIndexAttrBitmap's are).
void AddForeignKeyColumns(Relation rel, Bitmapset** columns) {
  ListCell* lc = nullptr;
  foreach (lc, RelationGetFKeyList(rel)) {
    const auto* fk = static_cast<const ForeignKeyCacheInfo*>(lfirst(lc));
    for (int i = 0; i < fk->nkeys; ++i) {
      *columns = bms_add_member(*columns, fk->conkey[i] - FirstLowInvalidHeapAttributeNumber);
    }
  }
}

// An UPDATE may keep the row id (like heap's HOT) when no column of any index changes, the
// table has no ramp_hash index (their entries are maintained by the table AM) and no
// row-level triggers, and the row is a committed one this transaction has not written yet.
// Then nothing is inserted into local indexes, the row's key gets a new version with the
// read version as expected (write-write conflicts as before), and the key never moves to
// another partition: a writer waiting for the row follows the update (EvalPlanQual), where a
// moved row fails it with 40001. Returns false (and changes nothing) otherwise.
bool UpdateInPlace(Relation rel, ItemPointer otid, TupleTableSlot* slot, CommandId cid) {
  if (HasRowTriggers(rel) || HasRampHashIndexes(rel)) return false;
  uint64_t rowid = 0;
  if (!RowIdOfTid(otid, &rowid)) return false;
  const ramp::KeyspaceRef ks = RelationKeyspace(rel);
  if (ks.fresh) return false;
  XactState& x = Xact();
  if (x.writes.Find(ks.id, ramp::EntryKey{0, rowid}) != nullptr) return false;
  // The version the executor's new row was computed from: the one this statement read.
  // (Recalled before any re-read: a commit in flight when the statement started may land
  // in between, and the new value must replace exactly the version it came from.)
  ramp::Timestamp expected;
  const bool have_expected = RecallVersion(ks.id, rowid, &expected);
  Bitmapset* indexed = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_ALL);
  // The referencing columns of the table's foreign keys: a change of one queues the check
  // trigger, which reads NEW by TID after the command, when the TID of a row updated in place
  // still gives the old version (HasRowTriggers).
  AddForeignKeyColumns(rel, &indexed);
  if (indexed != nullptr || !have_expected) {
    RowVersion old;
    if (!FetchRow(ks, ramp::Visibility{}, rowid, &old, nullptr)) {
      bms_free(indexed);
      return false;  // gone meanwhile: the ordinary path reports it
    }
    if (!have_expected) {
      expected = old.ts;
    } else if (!(old.ts == expected)) {
      bms_free(indexed);
      throw RampError(ramp::Status::Conflict("row " + std::to_string(rowid) +
                                             " changed after this transaction read it"),
                      std::string("updating ramp table \"") + RelationGetRelationName(rel) + "\"");
    }
    if (indexed != nullptr) {
      TupleTableSlot* before = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
      StoreRow(before, rel, rowid, old.value);
      slot_getallattrs(before);
      slot_getallattrs(slot);
      bool same = true;
      int member = -1;
      while (same && (member = bms_next_member(indexed, member)) >= 0) {
        const AttrNumber att = member + FirstLowInvalidHeapAttributeNumber;
        if (att <= 0) {  // a system column or a whole-row expression: be conservative
          same = false;
          break;
        }
        const Form_pg_attribute a = TupleDescAttr(RelationGetDescr(rel), att - 1);
        const bool null_before = before->tts_isnull[att - 1];
        const bool null_after = slot->tts_isnull[att - 1];
        same = null_before == null_after &&
               (null_before || datumIsEqual(before->tts_values[att - 1], slot->tts_values[att - 1],
                                            a->attbyval, a->attlen));
      }
      ExecDropSingleTupleTableSlot(before);
      bms_free(indexed);
      if (!same) return false;
    }
  }
  x.writes.set_limits(Session::Get().client().write_limits());
  // Over the size limit, nothing is buffered: the ordinary path raises the clear error.
  if (!x.writes
           .UpdateInPlace(ks, ramp::EntryKey{0, rowid}, EncodeSlot(slot), cid,
                          GetCurrentSubTransactionId(), expected)
           .ok()) {
    return false;
  }
  slot->tts_tableOid = RelationGetRelid(rel);
  slot->tts_tid = *otid;
  MarkOwnVersion(slot, cid);
  return true;
}

// After an UPDATE of otid wrote the slot's row: a row this transaction had locked keeps
// the lock in its new version (XactState::tuple_locked).
void CarryLock(Relation rel, ItemPointer otid, TupleTableSlot* slot, CommandId cid) {
  XactState* x = XactIfAny();
  uint64_t old_rowid = 0;
  uint64_t new_rowid = 0;
  if (x == nullptr || x->tuple_locked.empty() || !RowIdOfTid(otid, &old_rowid) ||
      !RowIdOfTid(&slot->tts_tid, &new_rowid)) {
    return;
  }
  const ramp::KeyspaceId ks = RelationKeyspace(rel).id;
  if (x->tuple_locked.count({ks, old_rowid}) == 0) return;
  x->tuple_locked.insert({ks, new_rowid});
  MarkOwnVersion(slot, cid, /*locked=*/true);
}

}  // namespace

TM_Result TupleUpdate(Relation rel, ItemPointer otid, TupleTableSlot* slot, CommandId cid,
                      Snapshot snapshot, Snapshot crosscheck, bool wait, TM_FailureData* tmfd,
                      LockTupleMode* lockmode, bool* update_indexes) {
  // The mode of the row lock the executor asks TupleLock for if this returns TM_Updated.
  *lockmode = LockTupleNoKeyExclusive;
  *update_indexes = true;  // a new row id: every index needs the new entry
  const TM_Result locked =
      Boundary([&] { return LockForWrite(rel, otid, ramp::IntentMode::kNoKeyExclusive, tmfd); });
  if (locked != TM_Ok) return locked;
  const bool in_place = Boundary([&] { return UpdateInPlace(rel, otid, slot, cid); });
  if (in_place) {
    Boundary([&] { CarryLock(rel, otid, slot, cid); });
    *update_indexes = false;
    pgstat_count_heap_update(rel, true);
    return TM_Ok;
  }
  const TM_Result result = Boundary([&] {
    const TM_Result deleted = DeleteRow(rel, otid, cid, tmfd, /*moved=*/true);
    if (deleted != TM_Ok) return deleted;
    InsertSlots(rel, &slot, 1, cid);
    // The old row's tombstone names the new row id: a writer waiting for the old row
    // follows the update there (LockCommittedRow), as heap follows the ctid chain.
    uint64_t old_rowid = 0;
    uint64_t new_rowid = 0;
    if (RowIdOfTid(otid, &old_rowid) && RowIdOfTid(&slot->tts_tid, &new_rowid)) {
      Xact().writes.SetMovedTo(RelationKeyspace(rel).id, ramp::EntryKey{0, old_rowid}, new_rowid);
    }
    CarryLock(rel, otid, slot, cid);
    return TM_Ok;
  });
  if (result == TM_Ok) pgstat_count_heap_update(rel, false);
  return result;
}

namespace {

// ExecOnConflictUpdate's error for a row the same command inserted or updated. Heap returns
// TM_Invisible with the row in the slot, and the executor raises it after reading the row's
// xmin; tuple_lock hands out no row with TM_Invisible, so it is raised here, with the same
// SQLSTATE, message and hint.
[[noreturn]] void ThrowAffectedTwice() {
  throw SqlError(ERRCODE_CARDINALITY_VIOLATION,
                 "ON CONFLICT DO UPDATE command cannot affect row a second time", {},
                 "Ensure that no rows proposed for insertion within the same command have "
                 "duplicate constrained values.");
}

}  // namespace

namespace {

// TupleLock of a committed row: the row's intent, then the version to hand back. Unchanged
// since the locker's snapshot: that one. Changed: the newest one when the caller follows
// updates (READ COMMITTED: TUPLE_LOCK_FLAG_FIND_LAST_VERSION, then EvalPlanQual re-checks
// it; ON CONFLICT DO UPDATE, flags 0, retries with it) -- it becomes the version this
// statement sees of the row and the one its UPDATE/DELETE replaces; otherwise TM_Updated
// (REPEATABLE READ: 40001). Deleted meanwhile: TM_Deleted. Moved to a new row id meanwhile
// (the old row's tombstone names it): followed there as heap follows a tuple's ctid chain
// (*tid becomes the new row's TID), or TM_Updated; moved to another partition, or not known
// which: 40001, RowGone. followed: rowid is where an earlier call followed a moved row to,
// written by the commit at `moved_by`.
TM_Result LockCommittedRow(Relation rel, const ramp::KeyspaceRef& ks, uint64_t rowid,
                           ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                           LockTupleMode mode, LockWaitPolicy wait_policy, uint8 flags,
                           TM_FailureData* tmfd, int followed = 0, ramp::Timestamp moved_by = {}) {
  XactState& x = Xact();
  const bool find_last = (flags & TUPLE_LOCK_FLAG_FIND_LAST_VERSION) != 0;
  // Goes on at the row's new row id (heap: the next tuple of the update chain).
  auto follow_to = [&](uint64_t moved_to, const ramp::Timestamp& commit) -> TM_Result {
    if (moved_to == 0 || followed >= 100) throw RowGone(rel, rowid);
    if (!find_last) {
      // REPEATABLE READ (the executor raises 40001), or ON CONFLICT DO UPDATE (it starts
      // over and finds the row at its new row id through the index).
      return MovedTo(moved_to, tmfd);
    }
    SetTid(tid, moved_to);
    return LockCommittedRow(rel, ks, moved_to, tid, snapshot, slot, mode, wait_policy, flags, tmfd,
                            followed + 1, commit);
  };
  if (const auto m = x.locked_moved.find({ks.id, rowid}); m != x.locked_moved.end()) {
    return follow_to(m->second.rowid, m->second.commit);  // learnt by LockForWrite / FetchLockedRow
  }
  RowLock lock;
  if (!LockRow(rel, ks, rowid, IntentModeOf(mode), wait_policy, &lock)) return TM_WouldBlock;
  Session& session = Session::Get();
  ramp::ReadSession& reads = session.reads();
  // The newest version, which the lock keeps as it is: told by this grant, or by an earlier
  // one (UPDATE/DELETE prefetched it before returning TM_Updated), or read now.
  ramp::RowResult latest;
  bool known = false;
  uint64_t moved_to = 0;
  const bool moved = lock.taken_now && lock.moved(&moved_to);
  if (lock.taken_now) {
    latest.found = lock.live;
    latest.ts = lock.latest;
    latest.value = std::move(lock.value);
    known = true;
  } else if (const ramp::PrefetchedRow* p = reads.Prefetched(ks.id, rowid)) {
    auto it = x.locked_latest.find({ks.id, rowid});
    if (it != x.locked_latest.end() && it->second == p->ts) {
      latest.found = p->live;
      latest.ts = p->ts;
      latest.value = p->value;
      known = true;
    }
  }
  // A grant older than a version this statement knows of: the commit that wrote it has not
  // reached the row's server yet (a RAMP commit reaches its servers one by one), and its
  // version, prepared there, is the newest (the lock keeps it so). The version known: the
  // one the commit that moved the row here wrote, or the one the statement read.
  ramp::Timestamp required = moved_by;
  if (followed == 0) {
    ramp::Timestamp read_before;
    if (RecallVersion(ks.id, rowid, &read_before)) required = read_before;
  }
  const bool grant_behind = known && latest.ts < required;
  if (grant_behind) known = false;
  if (!known) {
    const ramp::RowRequest req{ks.id, rowid, required};
    std::vector<ramp::RowResult> results;
    session.Check(
        reads.ReadRows(std::span<const ramp::RowRequest>(&req, 1), ramp::RowReads::kLatest,
                       &results),
        std::string("reading a locked row of ramp table \"") + RelationGetRelationName(rel) + "\"");
    if (results.empty()) return TM_Deleted;
    latest = std::move(results[0]);
    if (mode != LockTupleKeyShare) x.locked_latest[{ks.id, rowid}] = latest.ts;
    if (grant_behind && latest.found) AwaitCommitHere(ks, rowid, latest.ts);
  }
  if (moved) {
    // The write of the old row id that follows (LockForWrite) is told TM_Updated too.
    if (followed == 0) x.locked_moved[{ks.id, rowid}] = {moved_to, latest.ts};
    return follow_to(moved_to, latest.ts);
  }
  // The version the locker holds: the one its statement read (none for a row it followed
  // an update to).
  ramp::Timestamp read;
  bool have_read = followed == 0 && RecallVersion(ks.id, rowid, &read);
  if (!have_read && followed == 0) {
    RowVersion row;
    if (FetchRow(ks, VisibilityOf(snapshot), rowid, &row, nullptr)) {
      read = row.ts;
      have_read = true;
    }
  }
  if (!latest.found) {
    if (!have_read) return TM_Deleted;
    // Deleted (the grant says it was not moved): heap's TM_Deleted, READ COMMITTED skips
    // the row. Not known which: 40001.
    if (lock.taken_now) {
      x.locked_deleted.insert({ks.id, rowid});
      FillFailure(tmfd, tid, InvalidCommandId);
      return TM_Deleted;
    }
    throw RowGone(rel, rowid);
  }
  if (followed == 0 && (!have_read || read == latest.ts)) {
    StoreRow(slot, rel, rowid, latest.value);
    MarkCommittedVersion(slot, latest.ts.time, latest.ts.client);
    return TM_Ok;
  }
  const bool follow = find_last || (flags == 0 && !IsolationUsesXactSnapshot());
  if (!follow) {
    tmfd->ctid = *tid;
    return TM_Updated;
  }
  // The newest version becomes the one this statement sees and writes over.
  reads.RememberVersion(ks.id, rowid, latest.ts);
  reads.Prefetch(ks.id, rowid, latest.ts, true, latest.value);
  StoreRow(slot, rel, rowid, latest.value);
  MarkCommittedVersion(slot, latest.ts.time, latest.ts.client);
  tmfd->traversed = find_last;
  return TM_Ok;
}

// TupleLock's verdict and the version it hands out.
TM_Result LockVersion(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                      CommandId cid, LockTupleMode mode, LockWaitPolicy wait_policy, uint8 flags,
                      TM_FailureData* tmfd) {
  uint64_t rowid = 0;
  if (!RowIdOfTid(tid, &rowid)) return TM_Deleted;
  const ramp::KeyspaceRef ks = RelationKeyspace(rel);
  // The transaction's own writes, judged against the locker's command id as heap's
  // HeapTupleSatisfiesUpdate does: a row written by a command the locker does not see
  // (insert_cid >= cid) is not the version the locker holds.
  const XactState* x = XactIfAny();
  const ramp::BatchEntry* own =
      x == nullptr ? nullptr : x->writes.Find(ks.id, ramp::EntryKey{0, rowid});
  if (own != nullptr && own->deleted) {
    // Deleted by this command or a later one: heap's TM_SelfModified (the executor skips
    // the row, or raises its own error when cmax is not its command). Deleted earlier:
    // gone for the locker.
    if (own->delete_cid >= cid) return SelfModified(tmfd, tid, own->delete_cid);
    return TM_Deleted;
  }
  if (own != nullptr && own->inserted && own->insert_cid >= cid) {
    // ON CONFLICT DO UPDATE (the one caller that locks with flags 0 a row it found with a
    // dirty snapshot) met a row this command inserted or updated, or a later one (a
    // function called by it): the row would be affected twice. Heap: TM_Invisible and the
    // executor's error; returning TM_Deleted made the executor retry the insertion forever.
    if (flags == 0) ThrowAffectedTwice();
    if (own->in_place) {
      // Updated in place by a later command (a cursor FOR UPDATE opened before an UPDATE of
      // its rows; or one of the same command, e.g. a writable CTE): the locker holds the
      // version before it. Heap: that old version was updated → TM_SelfModified, skipped.
      return SelfModified(tmfd, tid, own->insert_cid);
    }
    // Inserted by a command the locker does not see: heap's TM_Invisible (an error for
    // every caller: the locker's scan cannot have returned the row).
    return TM_Invisible;
  }
  if (ks.fresh || !guc::row_locks || own != nullptr) {
    // No new lock on the cluster: a table created by this transaction, a row it wrote
    // (inserted here, or updated by an earlier command, which locked it), or
    // ramp.row_locks off. The row's version is read (and remembered, so that a later
    // UPDATE/DELETE of it detects concurrent changes at commit).
    RowVersion row;
    if (!FetchRow(ks, VisibilityOf(snapshot), rowid, &row, nullptr)) return TM_Deleted;
    StoreVersion(slot, rel, row);
    return TM_Ok;
  }
  return LockCommittedRow(rel, ks, rowid, tid, snapshot, slot, mode, wait_policy, flags, tmfd);
}

}  // namespace

TM_Result TupleLock(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                    CommandId cid, LockTupleMode mode, LockWaitPolicy wait_policy, uint8 flags,
                    TM_FailureData* tmfd) {
  // Callers read tmfd->traversed on success too (GetTupleForTrigger, ExecLockRows: true
  // means "a newer version was locked, re-check it with EvalPlanQual"). Left unset, a BEFORE
  // DELETE trigger of a row moving to another partition saw garbage, ran EvalPlanQual, and
  // ExecCrossPartitionUpdate retried the row forever.
  FillFailure(tmfd, tid, InvalidCommandId);
  return Boundary([&] {
    const TM_Result result =
        LockVersion(rel, tid, snapshot, slot, cid, mode, wait_policy, flags, tmfd);
    uint64_t rowid = 0;
    if (result == TM_Ok && RowIdOfTid(tid, &rowid)) {
      Xact().tuple_locked.insert({RelationKeyspace(rel).id, rowid});  // for xmax (CarryLock)
    }
    return result;
  });
}

}  // namespace pgramp::tam
