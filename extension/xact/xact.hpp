// Per-transaction state and the transaction callbacks (DESIGN §8): the buffered writes of a
// PostgreSQL transaction are committed as ONE RAMP PUT at XACT_EVENT_PRE_COMMIT, where an
// ERROR still aborts the transaction cleanly (an error at COMMIT itself would be a PANIC);
// abort discards them; ROLLBACK TO undoes a subtransaction's share.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "ramp/types.h"

#include "ramp/client.h"
#include "ramp/write_batch.h"

namespace pgramp {

// (tablespace as in pg_class.reltablespace, relfilenode)
using StorageId = std::pair<uint32_t, uint32_t>;

struct XactState {
  ramp::WriteBatch writes;
  // Storage created by this transaction (CREATE, TRUNCATE, rewrite, REINDEX) → its keyspace.
  // Such keyspaces hold nothing on the cluster before this transaction commits.
  std::map<StorageId, ramp::KeyspaceRef> created;
  // Keyspaces of `created` that another PostgreSQL server created (attached through the
  // cluster's keyspace catalog): they hold that server's data, a build must not clear them.
  std::vector<ramp::KeyspaceId> attached;
  // Keyspaces whose relation storage went away in this transaction: dropped on the cluster
  // after commit (best effort; ramp.collect_garbage() retries).
  std::vector<ramp::KeyspaceId> drop_after_commit;
  // Keyspaces created by this transaction that already hold committed data (index builds
  // write their entries directly), with the subtransaction that wrote them: removed from the
  // cluster if the transaction aborts, or after commit if that subtransaction rolled back.
  std::vector<std::pair<ramp::KeyspaceId, ramp::SubTxnId>> drop_after_abort;
  // Such keyspaces of rolled-back subtransactions: removed when the transaction ends.
  std::vector<ramp::KeyspaceId> drop_at_end;
  // Relation storage was created or dropped: ramp.keyspaces is reconciled with pg_class at
  // pre-commit.
  bool catalog_changed = false;
  // Keyspaces of materialized-view logs this transaction wrote, noted only when the test
  // switch ramp.debug_immv_separate_put_ms splits their deltas off into a PUT of their own.
  std::vector<ramp::KeyspaceId> view_logs;
  // A subtransaction's writes could not be undone (out of memory): the commit must fail.
  bool poisoned = false;
  // Committed rows deleted (or updated away) by the current command, with the version this
  // transaction read: a unique check that meets a live row re-reads them (see
  // tam::CheckCommandDeletesCurrent). Bounded; only the latest command's rows are kept.
  struct CommandDelete {
    ramp::KeyspaceRef ks;
    uint64_t rowid = 0;
    ramp::Timestamp expected;
  };
  ramp::CommandId command_deletes_cid = 0;
  std::vector<CommandDelete> command_deletes;

  // Row locks on the cluster (write intents, tableam/row_locks.cpp): the owner naming this
  // transaction at the servers (0: none taken yet), the client it belongs to, its start
  // time (the youngest of a deadlock gives way), and the rows it holds, in which mode.
  uint64_t intent_owner = 0;
  uint64_t intent_client = 0;
  uint64_t intent_priority = 0;
  std::map<std::pair<ramp::KeyspaceId, uint64_t>, ramp::IntentMode> intents;
  // The newest committed version of rows locked in a mode no writer can get past (share or
  // stronger), as the lock's grant (or a read under it) told it: it cannot change any more.
  std::map<std::pair<ramp::KeyspaceId, uint64_t>, ramp::Timestamp> locked_latest;
  // Rows read by this transaction whose lock's grant found them deleted by another one (not
  // moved to a new row id): writing or locking them is heap's TM_Deleted (READ COMMITTED
  // skips the row, the executor raises 40001 under REPEATABLE READ).
  std::set<std::pair<ramp::KeyspaceId, uint64_t>> locked_deleted;
  // Rows read by this transaction whose lock's grant found them moved to a new row id by
  // another one (an UPDATE of an indexed column): writing or locking them is heap's
  // TM_Updated, and tuple_lock follows them to that row id, which the same commit wrote.
  struct MovedRow {
    uint64_t rowid = 0;
    ramp::Timestamp commit;  // the moving transaction's (the old row's tombstone's)
  };
  std::map<std::pair<ramp::KeyspaceId, uint64_t>, MovedRow> locked_moved;
  // Intents on keys that are not rows (tam::LockKey: materialized views' waits), by mode.
  std::map<std::pair<ramp::KeyspaceId, std::string>, ramp::IntentMode> key_intents;
  // Rows tuple_lock handed to a locker of this transaction (ON CONFLICT DO UPDATE, BEFORE
  // row triggers, FOR UPDATE/SHARE, EvalPlanQual), and the new row ids an UPDATE gave them.
  // Heap keeps such a lock in the row's xmax and an UPDATE carries it to the new version:
  // the new version's xmax is then this transaction (rows/row_slot.hpp), as heap's, so that
  // `RETURNING xmax = 0` tells an upsert's insertions from its updates.
  std::set<std::pair<ramp::KeyspaceId, uint64_t>> tuple_locked;

  // Writes ahead of the commit (bulk loading; ramp.write_ahead_rows, Client::WriteAhead):
  // rows inserted into fresh table keyspaces, not yet written ahead, per keyspace; the
  // client that writes ahead (0: none yet); whether writing ahead stopped (an error, or
  // the client changed: then ahead_lost, and the commit fails).
  std::map<ramp::KeyspaceId, std::vector<ramp::EntryKey>> ahead_pending;
  std::set<ramp::KeyspaceId> ahead_keyspaces;  // written ahead: get AheadMarkerKey at commit
  uint64_t ahead_client = 0;
  bool ahead_stopped = false;
  bool ahead_lost = false;

  bool IsFresh(ramp::KeyspaceId ks) const;
};

// The current transaction's state, created on first use.
XactState& Xact();
// The current transaction's state if something created it.
XactState* XactIfAny();

void InstallXactCallbacks();

// Notes rows just inserted at top level into a fresh table keyspace; once
// ramp.write_ahead_rows of them are pending, they are committed ahead (Client::WriteAhead).
void NoteInsertedAhead(XactState& x, const ramp::KeyspaceRef& ks, const uint64_t* rowids, int n);

// Writes buffered outside XactState::writes (the ramp FDW's key writes, fdw/) join it first
// thing at pre-commit and pre-prepare: one RAMP PUT with the ramp tables' writes. flush may
// throw (it runs inside the pre-commit boundary).
void SetPreCommitFlush(void (*flush)());

}  // namespace pgramp
