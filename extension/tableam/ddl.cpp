// Storage of ramp tables: CREATE, TRUNCATE, SET TABLESPACE, rewrites (VACUUM FULL, CLUSTER,
// ALTER TABLE ... TYPE).
//
// A ramp table's rows live in a keyspace on the cluster; locally it keeps an empty main fork
// (PostgreSQL code such as bitmap-scan prefetching opens it) and a row in ramp.keyspaces
// keyed by its storage. New storage = new keyspace (the next generation): TRUNCATE is
// transactional for free, and the old keyspace is retired at pre-commit and removed from
// the cluster after commit (xact.cpp).
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "tableam/tableam.hpp"

namespace pgramp::tam {

void RelationSetNewFilenode(Relation rel, const RelFileNode* newrnode, char persistence,
                            TransactionId* freezeXid, MultiXactId* minmulti) {
  // Temporary relations never get here: kDispatchMethods sends them to heap.
  // No transaction ids in ramp rows: nothing to freeze.
  *freezeXid = InvalidTransactionId;
  *minmulti = InvalidMultiXactId;
  SMgrRelation srel = RelationCreateStorage(*newrnode, persistence, true);
  smgrclose(srel);
  Boundary([&] { CreateRelationKeyspace(rel, newrnode, kKindTable); });
}

void RelationNontransactionalTruncate(Relation rel) {
  // PostgreSQL only truncates non-transactionally storage created by the current
  // (sub)transaction, whose keyspace has nothing on the cluster: dropping the buffered
  // writes empties it.
  Boundary([&] {
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    if (!ks.fresh) {
      throw SqlError(ERRCODE_INTERNAL_ERROR,
                     "non-transactional truncate of a ramp table with committed rows");
    }
    XactState& x = Xact();
    // Rows a bulk load committed ahead (xact.hpp) are on the cluster: they get tombstones,
    // sent at COMMIT with the rest (the keyspace is seen by no one else until then).
    std::vector<ramp::EntryKey> ahead;
    if (const ramp::WriteBatch::Keyspace* k = x.writes.Of(ks.id)) {
      for (const auto& [key, w] : k->entries()) {
        if (w.streamed || w.remote) ahead.push_back(key);
      }
    }
    x.ahead_pending.erase(ks.id);
    x.writes.DiscardKeyspace(ks.id);
    const CommandId cid = GetCurrentCommandId(false);
    const ramp::SubTxnId sub = GetCurrentSubTransactionId();
    for (const ramp::EntryKey& key : ahead) x.writes.Delete(ks, key, cid, sub, true, nullptr);
  });
}

void RelationCopyData(Relation rel, const RelFileNode* newrnode) {
  // ALTER TABLE SET TABLESPACE: nothing to copy locally; the keyspace follows the storage.
  SMgrRelation dstrel = RelationCreateStorage(*newrnode, rel->rd_rel->relpersistence, true);
  Boundary([&] {
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    PgCall([&] { CatalogMoveStorage(static_cast<int64>(ks.id), newrnode); });
    XactState& x = Xact();
    for (auto it = x.created.begin(); it != x.created.end(); ++it) {
      if (it->second.id == ks.id) {
        x.created.erase(it);
        x.created[StorageId{StorageTablespace(newrnode->spcNode), newrnode->relNode}] = ks;
        break;
      }
    }
  });
  RelationDropStorage(rel);
  smgrclose(dstrel);
}

void RelationCopyForCluster(Relation OldTable, Relation NewTable, Relation OldIndex, bool use_sort,
                            TransactionId OldestXmin, TransactionId* xid_cutoff,
                            MultiXactId* multi_cutoff, double* num_tuples, double* tups_vacuumed,
                            double* tups_recently_dead) {
  // VACUUM FULL / CLUSTER: the rows are copied into the new relation's keyspace (new row
  // ids; order means nothing on the cluster). The servers compact their own storage; this
  // exists so that database-wide VACUUM FULL and CLUSTER work on ramp tables.
  *xid_cutoff = InvalidTransactionId;
  *multi_cutoff = InvalidMultiXactId;
  *num_tuples = 0;
  *tups_vacuumed = 0;
  *tups_recently_dead = 0;
  TupleTableSlot* slot = table_slot_create(OldTable, nullptr);
  TableScanDesc scan = table_beginscan(OldTable, SnapshotSelf, 0, nullptr);
  const CommandId cid = GetCurrentCommandId(true);
  while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
    CHECK_FOR_INTERRUPTS();
    table_tuple_insert(NewTable, slot, cid, 0, nullptr);
    *num_tuples += 1;
  }
  table_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
}

}  // namespace pgramp::tam
