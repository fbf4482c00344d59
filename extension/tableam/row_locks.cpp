// Row locks on the cluster (write intents, DESIGN §5): UPDATE, DELETE and SELECT ... FOR
// UPDATE/SHARE take an intent on the row's key at its partition when they reach the row.
// A row another transaction holds is waited for (cancellable: statement_timeout,
// lock_timeout, pg_cancel_backend; deadlocks give 40P01); NOWAIT fails at once (55P03),
// SKIP LOCKED skips the row. Once granted, the grant says whether the version the statement
// read is still the newest: if not, the caller returns TM_Updated and PostgreSQL's executor
// re-reads the row through TupleLock and re-checks it (EvalPlanQual) in READ COMMITTED, or
// raises 40001 in REPEATABLE READ / SERIALIZABLE, as for heap. Intents are released when
// the transaction ends (xact.cpp), or by the servers when this backend's connections close.
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "ramp/client.h"
#include "ramp/hlc.h"
#include "ramp/keys.h"

#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "tableam/tableam.hpp"

extern "C" {
#include "pgstat.h"
#include "storage/proc.h"
#include "utils/timeout.h"
}

namespace pgramp::tam {

namespace {

bool Covers(ramp::IntentMode held, ramp::IntentMode wanted) {
  using M = ramp::IntentMode;
  return held == wanted || held == M::kExclusive || wanted == M::kKeyShare ||
         (held == M::kNoKeyExclusive && wanted == M::kKeyShare);
}

ramp::IntentMode Combine(ramp::IntentMode a, ramp::IntentMode b) {
  using M = ramp::IntentMode;
  if ((a == M::kShare && b == M::kNoKeyExclusive) || (a == M::kNoKeyExclusive && b == M::kShare)) {
    return M::kExclusive;
  }
  return std::max(a, b);
}

std::string Relname(Relation rel) {
  return RelationGetRelationName(rel);
}

}  // namespace

ramp::IntentMode IntentModeOf(LockTupleMode mode) {
  switch (mode) {
    case LockTupleKeyShare:
      return ramp::IntentMode::kKeyShare;
    case LockTupleShare:
      return ramp::IntentMode::kShare;
    case LockTupleNoKeyExclusive:
      return ramp::IntentMode::kNoKeyExclusive;
    case LockTupleExclusive:
      return ramp::IntentMode::kExclusive;
  }
  return ramp::IntentMode::kExclusive;
}

namespace {

// The transaction's intent owner, for the session's current client.
void EnsureIntentOwner(XactState& x, ramp::Client& client) {
  if (x.intent_owner != 0 && x.intent_client != client.client_id()) {
    // The session reconnected (a new client): the servers released the old client's
    // intents when its connections closed. The commit's version check still guards.
    x.intents.clear();
    x.locked_latest.clear();
    x.locked_deleted.clear();
    x.locked_moved.clear();
    x.key_intents.clear();
    x.intent_owner = 0;
  }
  if (x.intent_owner == 0) {
    x.intent_owner = client.NewIntentOwner();
    x.intent_client = client.client_id();
    x.intent_priority = ramp::HybridClock::PhysicalNow();
  }
}

// Takes an intent (a row's or another key's) for the current transaction (its owner
// exists): at once, or (policy block) waiting cancellably, lock_timeout counting from the
// wait, shown as wait event "Extension". False: held by another transaction and the policy
// is SKIP LOCKED. `relname` names the relation in messages, `context` the errors of the
// cluster, `waiting` a deadlock. check_ms: how often a wait looks for a deadlock
// (deadlock_timeout when 0).
bool AcquireFor(const XactState& x, const ramp::KeyspaceRef& ks, std::string_view key,
                ramp::IntentMode mode, LockWaitPolicy policy, const std::string& relname,
                const std::string& context, const std::string& waiting, ramp::IntentResult* r,
                int check_ms = 0) {
  Session& session = Session::Get();
  ramp::Client& client = session.client();
  session.Define(ks);
  ramp::IntentRequest req;
  req.owner = x.intent_owner;
  req.priority = x.intent_priority;
  req.keyspace = ks.id;
  req.key = key;
  req.mode = mode;
  req.wait = false;
  req.deadlock_check_ms = check_ms > 0 ? check_ms : DeadlockTimeout > 0 ? DeadlockTimeout : 1000;
  session.Check(client.AcquireIntent(req, r), context, /*keep_on_cancel=*/true);
  if (r->outcome != ramp::IntentResult::Outcome::kHeld) return true;
  if (policy == LockWaitSkip) return false;
  if (policy == LockWaitError) {
    throw SqlError(ERRCODE_LOCK_NOT_AVAILABLE,
                   "could not obtain lock on row in relation \"" + relname + "\"",
                   "The row is " + r->detail + ".");
  }
  // Wait. lock_timeout counts from here, as heap's does from its lock wait.
  req.wait = true;
  const bool timed = LockTimeout > 0;
  if (timed) PgCall([] { enable_timeout_after(LOCK_TIMEOUT, LockTimeout); });
  // Shown in pg_stat_activity (wait_event_type and wait_event "Extension").
  pgstat_report_wait_start(PG_WAIT_EXTENSION);
  const ramp::Status st = client.AcquireIntent(req, r);
  pgstat_report_wait_end();
  // A cancel keeps the timeout's indicator: CHECK_FOR_INTERRUPTS then reports "canceling
  // statement due to lock timeout" (55P03) rather than a user cancel.
  const bool keep_indicator = st.Is(ramp::Status::Code::kCancelled);
  if (timed) PgCall([keep_indicator] { disable_timeout(LOCK_TIMEOUT, keep_indicator); });
  session.Check(st, context, /*keep_on_cancel=*/true);
  if (r->outcome == ramp::IntentResult::Outcome::kDeadlock) {
    throw SqlError(ERRCODE_T_R_DEADLOCK_DETECTED, "deadlock detected",
                   "While " + waiting + ": " + r->detail + ".",
                   "The transaction that started last gave way; retry it.");
  }
  return true;
}

}  // namespace

bool LockRow(Relation rel, const ramp::KeyspaceRef& ks, uint64_t rowid, ramp::IntentMode mode,
             LockWaitPolicy policy, RowLock* out) {
  *out = RowLock();
  XactState& x = Xact();
  EnsureIntentOwner(x, Session::Get().client());
  const auto held = x.intents.find({ks.id, rowid});
  if (held != x.intents.end() && Covers(held->second, mode)) return true;
  const std::string relname = Relname(rel);
  ramp::IntentResult r;
  if (!AcquireFor(x, ks, ramp::RowKey(rowid), mode, policy, relname,
                  "locking a row of ramp table \"" + relname + "\"",
                  "locking a row of relation \"" + relname + "\"", &r)) {
    return false;
  }
  if (held != x.intents.end()) {
    held->second = Combine(held->second, mode);
  } else {
    x.intents.emplace(std::pair(ks.id, rowid), mode);
  }
  out->taken_now = true;
  out->live = r.live;
  out->latest = r.latest;
  out->value = std::move(r.value);
  if (mode != ramp::IntentMode::kKeyShare) x.locked_latest[{ks.id, rowid}] = r.latest;
  return true;
}

bool LockKey(const ramp::KeyspaceRef& ks, std::string_view key, ramp::IntentMode mode,
             const std::string& what, ramp::Timestamp* latest) {
  XactState& x = Xact();
  EnsureIntentOwner(x, Session::Get().client());
  auto held = x.key_intents.find({ks.id, std::string(key)});
  if (held != x.key_intents.end() &&
      (held->second == mode || held->second == ramp::IntentMode::kExclusive)) {
    return false;
  }
  // Two different modes held together are exclusive (as at the server).
  const ramp::IntentMode want = held == x.key_intents.end() ? mode : ramp::IntentMode::kExclusive;
  ramp::IntentResult r;
  // Asking for more than it holds (another table of a view, see immv/maintain.cpp), the
  // transaction waits for holders that may be asking for more as well: such a deadlock is
  // common, so it is looked for early rather than after deadlock_timeout.
  constexpr int kUpgradeCheckMs = 20;
  AcquireFor(x, ks, key, want, LockWaitBlock, what, "waiting for " + what, "waiting for " + what,
             &r, held == x.key_intents.end() ? 0 : kUpgradeCheckMs);
  x.key_intents[{ks.id, std::string(key)}] = want;
  *latest = r.latest;
  return true;
}

void FillFailure(TM_FailureData* tmfd, ItemPointer tid, CommandId cmax) {
  tmfd->ctid = *tid;
  tmfd->xmax = InvalidTransactionId;
  tmfd->cmax = cmax;
  tmfd->traversed = false;
}

TM_Result MovedTo(uint64_t moved_to, TM_FailureData* tmfd) {
  ItemPointerData next;
  SetTid(&next, moved_to);
  FillFailure(tmfd, &next, InvalidCommandId);
  return TM_Updated;
}

namespace {

// Heap's TM_Deleted for a row another transaction deleted.
TM_Result Deleted(ItemPointer tid, TM_FailureData* tmfd) {
  FillFailure(tmfd, tid, InvalidCommandId);
  return TM_Deleted;
}

}  // namespace

void AwaitCommitHere(const ramp::KeyspaceRef& ks, uint64_t rowid, const ramp::Timestamp& version) {
  Session& session = Session::Get();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(guc::timeout_ms, 1));
  const ramp::RowRequest req{ks.id, rowid, {}};
  std::vector<ramp::RowResult> results;
  while (std::chrono::steady_clock::now() < deadline) {
    session.Check(session.reads().ReadRows(std::span<const ramp::RowRequest>(&req, 1),
                                           ramp::RowReads::kLatest, &results),
                  "reading a locked row of a ramp table");
    if (!results.empty() && !(results[0].ts < version)) return;
    PgCall([] { CHECK_FOR_INTERRUPTS(); });
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Still not there: the write goes on, and the commit's version check decides (40001).
}

TM_Result LockForWrite(Relation rel, ItemPointer tid, ramp::IntentMode mode, TM_FailureData* tmfd) {
  if (!guc::row_locks) return TM_Ok;
  uint64_t rowid = 0;
  if (!RowIdOfTid(tid, &rowid)) return TM_Ok;  // the write path reports it
  const ramp::KeyspaceRef ks = RelationKeyspace(rel);
  if (ks.fresh) return TM_Ok;  // created by this transaction: no one else sees it
  const XactState* x = XactIfAny();
  if (x != nullptr && x->writes.Find(ks.id, ramp::EntryKey{0, rowid}) != nullptr) {
    return TM_Ok;  // inserted here, or written (and locked) by an earlier command
  }
  RowLock lock;
  LockRow(rel, ks, rowid, mode, LockWaitBlock, &lock);
  ramp::Timestamp read;
  const bool have_read = RecallVersion(ks.id, rowid, &read);
  if (!lock.taken_now) {
    // Held already (locked by the executor's fetch of the row, FetchLockedRow, by a FOR
    // UPDATE, or this is the write after EvalPlanQual): what its grant said is the newest.
    if (Xact().locked_deleted.count({ks.id, rowid}) != 0) return Deleted(tid, tmfd);
    if (const auto m = Xact().locked_moved.find({ks.id, rowid}); m != Xact().locked_moved.end()) {
      return MovedTo(m->second.rowid, tmfd);
    }
    const auto it = Xact().locked_latest.find({ks.id, rowid});
    if (!have_read || it == Xact().locked_latest.end() || it->second == read) return TM_Ok;
    FillFailure(tmfd, tid, InvalidCommandId);
    return TM_Updated;
  }
  // A grant older than the version the statement read: that commit has not reached the row's
  // server yet (a RAMP commit reaches its servers one by one); it is the newest version, and
  // the lock keeps it so.
  if (have_read && lock.latest < read) {
    AwaitCommitHere(ks, rowid, read);
    return TM_Ok;
  }
  if (lock.live && (!have_read || lock.latest == read)) {
    // The grant brought the newest version, which no one can change now: the write's
    // re-reads of the row (UpdateInPlace, DeleteRow) need not ask the cluster again.
    if (have_read) {
      Session::Get().reads().Prefetch(ks.id, rowid, lock.latest, true, std::move(lock.value));
    }
    return TM_Ok;
  }
  if (!have_read) return TM_Ok;  // the write path reads and checks it
  // Changed since this statement read it (by the holder we waited for, or by a commit
  // between the read and the lock): EvalPlanQual in READ COMMITTED, 40001 otherwise.
  uint64_t moved_to = 0;
  if (lock.moved(&moved_to)) {
    if (moved_to == 0) throw RowGone(rel, rowid);  // to another partition: heap fails too
    Xact().locked_moved[{ks.id, rowid}] = {moved_to, lock.latest};
    return MovedTo(moved_to, tmfd);
  }
  if (!lock.live) {
    Xact().locked_deleted.insert({ks.id, rowid});
    return Deleted(tid, tmfd);
  }
  // For TupleLock, which the executor calls next to follow the update (EvalPlanQual).
  Session::Get().reads().Prefetch(ks.id, rowid, lock.latest, true, std::move(lock.value));
  // An update in place keeps the row id: the newest version is at this TID.
  FillFailure(tmfd, tid, InvalidCommandId);
  return TM_Updated;
}

bool FetchLockedRow(Relation rel, const ramp::KeyspaceRef& ks, uint64_t rowid,
                    TupleTableSlot* slot) {
  if (!guc::row_locks || ks.fresh) return false;
  const XactState* x = XactIfAny();
  if (x != nullptr && x->writes.Find(ks.id, ramp::EntryKey{0, rowid}) != nullptr) return false;
  RowLock lock;
  LockRow(rel, ks, rowid, ramp::IntentMode::kNoKeyExclusive, LockWaitBlock, &lock);
  if (!lock.taken_now) return false;
  ramp::Timestamp read;
  const bool have_read = RecallVersion(ks.id, rowid, &read);
  // A grant older than the version the statement read (LockForWrite): the caller reads that.
  if (have_read && lock.latest < read) {
    AwaitCommitHere(ks, rowid, read);
    return false;
  }
  if (!lock.live) {
    // Deleted, or moved to a new row id: the caller hands out the version its statement
    // read, and the write that follows is told TM_Deleted, or TM_Updated and follows the row
    // (LockForWrite, then LockCommittedRow).
    // (Also when the statement's read of the row is not remembered: the grant is what the
    // lock keeps, and tuple_lock, which a BEFORE UPDATE trigger calls next, needs it.)
    uint64_t moved_to = 0;
    if (lock.moved(&moved_to)) {
      if (moved_to == 0 && have_read) throw RowGone(rel, rowid);  // another partition
      if (moved_to != 0) Xact().locked_moved[{ks.id, rowid}] = {moved_to, lock.latest};
    } else if (!lock.latest.zero()) {  // a deletion's tombstone (zero: no commit here yet)
      Xact().locked_deleted.insert({ks.id, rowid});
    }
    return false;
  }
  // The newest version, which the lock keeps: the write's re-reads and EvalPlanQual's find it
  // here. The version the statement read stays the remembered one: when they differ, the
  // UPDATE that follows returns TM_Updated (LockForWrite) and EvalPlanQual redoes it.
  ramp::ReadSession& reads = Session::Get().reads();
  if (!have_read) reads.RememberVersion(ks.id, rowid, lock.latest);
  StoreRow(slot, rel, rowid, lock.value);
  MarkCommittedVersion(slot, lock.latest.time, lock.latest.client);
  reads.Prefetch(ks.id, rowid, lock.latest, true, std::move(lock.value));
  return true;
}

RampError RowGone(Relation rel, uint64_t rowid) {
  // What is left after the cases heap handles too (a deleted row is skipped, a row moved to
  // a new row id followed): a row moved to another partition (heap fails as well), or one
  // whose end was read without the grant that tells which it was.
  return RampError(ramp::Status::Conflict("row " + std::to_string(rowid) +
                                          " was deleted, or moved by an update, by a "
                                          "concurrent transaction"),
                   "locking a row of ramp table \"" + Relname(rel) + "\"");
}

}  // namespace pgramp::tam
