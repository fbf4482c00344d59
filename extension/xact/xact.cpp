#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "ramp/client.h"
#include "ramp/hlc.h"

#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "catalog/keyspace_catalog.hpp"

namespace pgramp {

namespace {

std::unique_ptr<XactState> current;
void (*pre_commit_flush)() = nullptr;

constexpr int kMaxRetire = 1024;

void ReconcileCatalog(XactState& x) {
  int64 retired[kMaxRetire];
  const int n = PgCall([&] { return CatalogRetireOrphans(retired, kMaxRetire); });
  for (int i = 0; i < n && i < kMaxRetire; i++) {
    x.drop_after_commit.push_back(static_cast<ramp::KeyspaceId>(retired[i]));
  }
  x.catalog_changed = false;
}

// Releases the transaction's row locks (after its COMMIT went out on the same connections,
// so whoever waited reads it). No reply is waited for; never throws.
void ReleaseRowLocks() noexcept {
  if (current == nullptr || current->intent_owner == 0) return;
  Session& session = Session::Get();
  try {
    if (session.has_client() && session.client_if_any()->client_id() == current->intent_client) {
      session.client_if_any()->ReleaseIntents(current->intent_owner);
    }
  } catch (...) {
    // Out of memory: the servers release them when this backend's connections close.
  }
  // Otherwise the client that took them is gone, and its intents with its connections.
  current->intent_owner = 0;
  current->intents.clear();
  current->locked_latest.clear();
  current->locked_deleted.clear();
  current->locked_moved.clear();
  current->key_intents.clear();
}

// Ends the writes ahead before the transaction's own PUT: each is committed (one whose
// PREPAREs failed is aborted, its rows unmarked: the PUT sends them). Fails if the client
// that wrote ahead is gone (its PUTs in flight went with it).
void FinishWritesAhead(XactState& x) {
  if (x.ahead_client == 0) return;
  Session& session = Session::Get();
  if (x.ahead_lost || !session.has_client() ||
      session.client_if_any()->client_id() != x.ahead_client) {
    throw SqlError(ERRCODE_CONNECTION_FAILURE,
                   "lost the connection that wrote rows of this transaction ahead of its commit",
                   "The rows a bulk load committed ahead may be incomplete; the transaction is "
                   "aborted.");
  }
  const ramp::Status st = session.client_if_any()->FinishWriteAhead(&x.writes);
  if (!st.ok()) {
    ereport(DEBUG1, (errmsg("ramp: a write ahead failed (%s); COMMIT sends its rows",
                            st.ToString().c_str())));
  }
  x.ahead_client = 0;
  // The marker goes with the transaction's own PUT, at its timestamp: statements that
  // started before it read none of these keyspaces (RelationKeyspace), though the rows
  // written ahead carry older timestamps.
  for (ramp::KeyspaceId ks : x.ahead_keyspaces) {
    session.Check(x.writes.PutKey(ks, AheadMarkerKey(), ""), "marking a bulk load's commit");
  }
}

// After an abort: what was written ahead and is still only prepared is aborted, and what
// is committing is waited for, before the fresh keyspaces are removed. Best effort.
void AbortWritesAhead(XactState& x) {
  if (x.ahead_client == 0) return;
  Session& session = Session::Get();
  if (session.has_client() && session.client_if_any()->client_id() == x.ahead_client) {
    session.client_if_any()->FinishWriteAhead(nullptr, /*abort=*/true);
  }
  x.ahead_client = 0;
}

// About what a server's record costs beyond the row's value (header, key, alignment).
constexpr uint64_t kRecordOverheadBytes = 72;

// Sends the buffered writes as one RAMP transaction (PREPARE everywhere, then COMMIT): the
// batch goes to the client as it is (Client::Write encodes the keys and defines the
// keyspaces; the values are not copied again).
void CommitWrites(ramp::WriteBatch& writes) {
  Session& session = Session::Get();
  // Statement snapshots are wall-clock microseconds (Session::StatementSnapshot). This
  // commit must be invisible to every statement that started before its writes (its index
  // entries) existed, and visible to every statement that starts after it is acknowledged:
  // its timestamp goes to the next microsecond, and the acknowledgement waits for the clock
  // to reach that microsecond (already passed after the commit's round trips, unless the
  // cluster's clocks run ahead of this machine's).
  session.client().AdvanceClock(ramp::HybridClock::NextMicro(ramp::HybridClock::PhysicalNow()));
  ramp::Timestamp committed;
  // The row locks of this transaction go out right behind its COMMITs (ReleaseRowLocks
  // below then has nothing left to send): a row's COMMIT reaches its server before the
  // release does. Not so for a materialized view's waits (key_intents, immv/maintain.cpp):
  // their keys live elsewhere than the rows they guard, so they are released only once every
  // COMMIT is acknowledged, when a waiter's reads find the commit applied on every server.
  const XactState* x = XactIfAny();
  const uint64_t owner =
      x != nullptr && x->key_intents.empty() && x->intent_client == session.client().client_id()
          ? x->intent_owner
          : 0;
  session.Check(session.client().Write(writes, &committed, owner),
                "committing to the ramp cluster");
  session.NoteOwnCommit(committed);
  // The commit is applied everywhere: whoever waits for a row of it may go on now (it reads
  // the newest version, not a snapshot), not only after the clock wait below.
  ReleaseRowLocks();
  for (int spins = 0; !ramp::HybridClock::Reached(committed.time) && spins < 1000; spins++) {
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  // The next plan sees this transaction's new rows: a key (and a record, about its value
  // and a header) each, as the servers count them. Deleted rows stay keys for a while there.
  for (const auto& [id, ks] : writes.keyspaces()) {
    uint64_t rows = 0, bytes = 0;
    for (const auto& [key, w] : ks.entries()) {
      if (w.inserted && !w.deleted && !w.in_place && !w.has_expected) {
        rows++;
        bytes += w.value.size() + kRecordOverheadBytes;
      }
    }
    session.AddOwnRows(id, rows, bytes);
  }
  writes.Clear();
}

// Test only (ramp.debug_immv_separate_put_ms): breaks the atomicity of materialized views on
// purpose, so that a test can show its reader catches it: the base rows commit first, the
// views' deltas in a second RAMP PUT after a pause.
void CommitViewDeltasApart(XactState& x) {
  // The views' row writes move to a batch of their own (what Client::Write sends of them:
  // inserted values, deletions of committed rows with the version read); keys of the
  // caller's layout (row-id sequences) stay with the base rows.
  ramp::WriteBatch deltas(x.writes.limits());
  for (ramp::KeyspaceId id : x.view_logs) {
    const ramp::WriteBatch::Keyspace* ks = x.writes.Of(id);
    if (ks == nullptr) continue;
    for (const auto& [key, w] : ks->entries()) {
      if (!w.sent()) continue;
      if (w.deleted) {
        deltas.Delete(ks->ref(), key, 0, ramp::kTopSubTxn, true,
                      w.has_expected ? &w.expected : nullptr);
      } else {
        Session::Get().Check(deltas.Insert(ks->ref(), key, w.value, 0, ramp::kTopSubTxn),
                             "moving a view delta to its own PUT");
      }
    }
    x.writes.DiscardKeyspace(id);
  }
  if (!x.writes.empty()) CommitWrites(x.writes);
  std::this_thread::sleep_for(std::chrono::milliseconds(guc::debug_immv_separate_put_ms));
  if (!deltas.empty()) CommitWrites(deltas);
}

void PreCommit() {
  if (pre_commit_flush != nullptr) pre_commit_flush();
  XactState* x = XactIfAny();
  if (x == nullptr) return;
  if (x->poisoned) {
    throw SqlError(ERRCODE_INTERNAL_ERROR,
                   "could not undo the ramp writes of a rolled-back subtransaction",
                   "The transaction is aborted instead of committing wrong data.");
  }
  if (x->catalog_changed) ReconcileCatalog(*x);
  FinishWritesAhead(*x);
  if (!x->view_logs.empty() && guc::debug_immv_separate_put_ms > 0) {
    CommitViewDeltasApart(*x);
  } else if (!x->writes.empty()) {
    CommitWrites(x->writes);
  }
}

void PrePrepare() {
  if (pre_commit_flush != nullptr) pre_commit_flush();
  XactState* x = XactIfAny();
  if (x == nullptr) return;
  if (!x->writes.empty() || !x->drop_after_abort.empty()) {
    throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                   "cannot PREPARE a transaction that has written to ramp tables",
                   "Writes to ramp tables commit as one RAMP transaction at COMMIT; they cannot "
                   "take part in two-phase commit.",
                   "");
  }
  if (x->catalog_changed) ReconcileCatalog(*x);
}

// After the commit: errors are not allowed any more (they would become a PANIC), so the
// removal of dropped keyspaces is best effort; ramp.collect_garbage() retries.
void AfterCommit() {
  XactState* x = XactIfAny();
  if (x == nullptr) return;
  x->drop_after_commit.insert(x->drop_after_commit.end(), x->drop_at_end.begin(),
                              x->drop_at_end.end());
  x->drop_at_end.clear();
  if (x->drop_after_commit.empty()) return;
  Session& session = Session::Get();
  const bool nodes_unset = guc::nodes == nullptr || guc::nodes[0] == '\0';
  if (!session.has_client() && (nodes_unset || session.RecentlyFailed())) return;
  for (ramp::KeyspaceId ks : x->drop_after_commit) {
    DropClusterKeyspace(ks);
  }
}

// After an abort: keyspaces this transaction created and already wrote to (index builds)
// are orphans; best effort, like AfterCommit.
void AfterAbort() {
  XactState* x = XactIfAny();
  if (x == nullptr) return;
  AbortWritesAhead(*x);
  // Builds of subtransactions rolled back earlier are orphans as well. (Not
  // drop_after_commit: those relations' DROP was just rolled back.)
  for (ramp::KeyspaceId ks : x->drop_at_end) x->drop_after_abort.emplace_back(ks, 0);
  x->drop_at_end.clear();
  // Keyspaces registered in the cluster's catalog for relations that now never existed.
  if (ClusterCatalogEnabled()) {
    for (const auto& [storage, ref] : x->created) {
      if (std::find(x->attached.begin(), x->attached.end(), ref.id) == x->attached.end()) {
        x->drop_after_abort.emplace_back(ref.id, 0);
      }
    }
  }
  if (x->drop_after_abort.empty()) return;
  Session& session = Session::Get();
  if (session.RecentlyFailed()) return;
  for (const auto& [ks, sub] : x->drop_after_abort) {
    DropClusterKeyspace(ks);
  }
}

void EndTransaction() {
  ReleaseRowLocks();
  if (current != nullptr && current->ahead_client != 0) {
    // Not ended by the commit or abort paths (PREPARE TRANSACTION refuses ramp writes;
    // an error in AfterAbort): nothing written ahead may stay in flight.
    try {
      AbortWritesAhead(*current);
    } catch (...) {
    }
  }
  current.reset();
  Session::Get().EndTransaction();
  ResetBoundaryState();
}

void OnXactEvent(XactEvent event, void* arg) {
  switch (event) {
    case XACT_EVENT_PRE_COMMIT:
      Boundary([] { PreCommit(); });
      break;
    case XACT_EVENT_PRE_PREPARE:
      Boundary([] { PrePrepare(); });
      break;
    case XACT_EVENT_COMMIT:
      BoundaryWarn(
          "could not remove the ramp keyspaces of dropped relations (run SELECT "
          "ramp.collect_garbage() later)",
          [] { AfterCommit(); });
      EndTransaction();
      break;
    case XACT_EVENT_ABORT:
      BoundaryWarn("could not remove the ramp keyspace of an aborted index build",
                   [] { AfterAbort(); });
      EndTransaction();
      break;
    case XACT_EVENT_PREPARE:
    case XACT_EVENT_PARALLEL_COMMIT:
    case XACT_EVENT_PARALLEL_ABORT:
      EndTransaction();
      break;
    case XACT_EVENT_PARALLEL_PRE_COMMIT:
      // Parallel workers never write (PostgreSQL 15 forbids writes in parallel mode).
      break;
  }
}

void OnSubXactEvent(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void* arg) {
  if (event != SUBXACT_EVENT_ABORT_SUB || current == nullptr) return;
  try {
    current->writes.RollbackSubtransaction(sub);
    // Index builds of the rolled-back subtransaction: their catalog rows are gone, their
    // entries are on the cluster; remove them once the transaction ends either way.
    auto& builds = current->drop_after_abort;
    for (auto it = builds.begin(); it != builds.end();) {
      if (it->second >= sub) {
        current->drop_at_end.push_back(it->first);
        it = builds.erase(it);
      } else {
        ++it;
      }
    }
  } catch (...) {
    current->poisoned = true;
  }
}

}  // namespace

bool XactState::IsFresh(ramp::KeyspaceId ks) const {
  for (const auto& [storage, ref] : created) {
    if (ref.id == ks) return true;
  }
  return false;
}

void NoteInsertedAhead(XactState& x, const ramp::KeyspaceRef& ks, const uint64_t* rowids, int n) {
  // ks.fresh alone is not enough: a statement older than a bulk load reads that load's
  // keyspace as fresh (empty) too; only this transaction's own keyspaces are written ahead.
  if (guc::write_ahead_rows <= 0 || x.ahead_stopped || !ks.fresh || ks.grouped ||
      !x.IsFresh(ks.id)) {
    return;
  }
  // Only at top level: no subtransaction is open that could roll these rows (or any row
  // buffered before them) back; a top-level abort removes the whole keyspace.
  if (GetCurrentSubTransactionId() != TopSubTransactionId) return;
  std::vector<ramp::EntryKey>& pending = x.ahead_pending[ks.id];
  for (int i = 0; i < n; i++) pending.push_back(ramp::EntryKey{0, rowids[i]});
  if (pending.size() < static_cast<size_t>(guc::write_ahead_rows)) return;
  Session& session = Session::Get();
  ramp::Client& client = session.client();
  if (x.ahead_client != 0 && x.ahead_client != client.client_id()) {
    x.ahead_stopped = x.ahead_lost = true;  // the commit fails (FinishWritesAhead)
    x.ahead_pending.clear();
    return;
  }
  // Rows committed ahead into a keyspace of this transaction: removed if it aborts (with
  // the cluster's catalog, every keyspace it created is).
  if (!ClusterCatalogEnabled() &&
      std::find_if(x.drop_after_abort.begin(), x.drop_after_abort.end(),
                   [&](const auto& d) { return d.first == ks.id; }) == x.drop_after_abort.end()) {
    x.drop_after_abort.emplace_back(ks.id, ramp::kTopSubTxn);
  }
  x.ahead_client = client.client_id();
  x.ahead_keyspaces.insert(ks.id);
  const ramp::Status st = client.WriteAhead(x.writes, ks, pending);
  pending.clear();
  if (!st.ok()) {
    // Its rows are unmarked (COMMIT sends them); no more writing ahead in this transaction.
    x.ahead_stopped = true;
    x.ahead_pending.clear();
    ereport(DEBUG1, (errmsg("ramp: writing ahead stopped: %s", st.ToString().c_str())));
  }
}

XactState& Xact() {
  if (current == nullptr) current = std::make_unique<XactState>();
  return *current;
}

XactState* XactIfAny() {
  return current.get();
}

void SetPreCommitFlush(void (*flush)()) {
  pre_commit_flush = flush;
}

void InstallXactCallbacks() {
  RegisterXactCallback(OnXactEvent, nullptr);
  RegisterSubXactCallback(OnSubXactEvent, nullptr);
}

}  // namespace pgramp
