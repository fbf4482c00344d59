#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <set>
#include <string>
#include <vector>

#include "ramp/client.h"
#include "ramp/keyspace_catalog.h"

#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "catalog/keyspace_catalog.hpp"

namespace pgramp {

namespace {

// Columns of ramp.keyspaces (sql/pg_ramp--1.0.sql).
constexpr AttrNumber kAttKeyspace = 1;
constexpr AttrNumber kAttRelid = 2;
constexpr AttrNumber kAttTablespace = 3;
constexpr AttrNumber kAttRelfilenode = 4;
constexpr AttrNumber kAttBuckets = 5;
constexpr AttrNumber kAttKind = 6;
constexpr AttrNumber kAttGeneration = 7;
constexpr int kNatts = 7;

constexpr int64 kFirstKeyspace = int64{1} << 16;  // lower ids are reserved

KeyspaceRow RowFromTuple(HeapTuple tuple, TupleDesc desc) {
  Datum values[kNatts];
  bool nulls[kNatts];
  heap_deform_tuple(tuple, desc, values, nulls);
  KeyspaceRow row;
  row.found = true;
  row.keyspace = DatumGetInt64(values[kAttKeyspace - 1]);
  row.relid = DatumGetObjectId(values[kAttRelid - 1]);
  row.reltablespace =
      nulls[kAttTablespace - 1] ? InvalidOid : DatumGetObjectId(values[kAttTablespace - 1]);
  row.relfilenode =
      nulls[kAttRelfilenode - 1] ? InvalidOid : DatumGetObjectId(values[kAttRelfilenode - 1]);
  row.buckets = DatumGetInt32(values[kAttBuckets - 1]);
  row.kind = DatumGetChar(values[kAttKind - 1]);
  row.generation = DatumGetInt32(values[kAttGeneration - 1]);
  return row;
}

KeyspaceRow NotFound() {
  KeyspaceRow row;
  memset(&row, 0, sizeof row);
  row.found = false;
  return row;
}

Oid KeyspacesIndexId(const char* name) {
  Oid nsp = get_namespace_oid("ramp", false);
  Oid index = get_relname_relid(name, nsp);
  if (!OidIsValid(index)) elog(ERROR, "pg_ramp: index ramp.%s is missing", name);
  return index;
}

// First row matching one key, with the given snapshot (NULL = catalog snapshot).
KeyspaceRow FindOne(const char* index_name, ScanKeyData* keys, int nkeys, Snapshot snapshot) {
  Relation rel = table_open(KeyspacesRelationId(false), AccessShareLock);
  SysScanDesc scan =
      systable_beginscan(rel, KeyspacesIndexId(index_name), true, snapshot, nkeys, keys);
  HeapTuple tuple = systable_getnext(scan);
  KeyspaceRow row =
      HeapTupleIsValid(tuple) ? RowFromTuple(tuple, RelationGetDescr(rel)) : NotFound();
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return row;
}

KeyspaceRow FindByKeyspace(int64 keyspace, Snapshot snapshot) {
  ScanKeyData key[1];
  ScanKeyInit(&key[0], kAttKeyspace, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(keyspace));
  return FindOne("keyspaces_pkey", key, 1, snapshot);
}

// Replaces columns of the row with the given keyspace (SnapshotSelf: sees this command's rows).
void UpdateRow(int64 keyspace, const bool* replace, const Datum* values, const bool* nulls) {
  Relation rel = table_open(KeyspacesRelationId(false), RowExclusiveLock);
  ScanKeyData key[1];
  ScanKeyInit(&key[0], kAttKeyspace, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(keyspace));
  SysScanDesc scan =
      systable_beginscan(rel, KeyspacesIndexId("keyspaces_pkey"), true, SnapshotSelf, 1, key);
  HeapTuple tuple = systable_getnext(scan);
  if (HeapTupleIsValid(tuple)) {
    HeapTuple updated = heap_modify_tuple(tuple, RelationGetDescr(rel), const_cast<Datum*>(values),
                                          const_cast<bool*>(nulls), const_cast<bool*>(replace));
    CatalogTupleUpdate(rel, &updated->t_self, updated);
    heap_freetuple(updated);
  }
  systable_endscan(scan);
  table_close(rel, RowExclusiveLock);
}

}  // namespace

int64 DeriveKeyspace(const KeyspaceIdentity& id, int32 generation) {
  // No allocation: this runs inside PostgreSQL code paths (see boundary.hpp).
  static const char kSeparator = '\0';
  uint64_t h = StableHash64("pg_ramp/keyspace/v2");
  char numbers[64];
  snprintf(numbers, sizeof numbers, "%llu/%u/%d", static_cast<unsigned long long>(id.system_id),
           static_cast<unsigned>(id.database_oid), static_cast<int>(generation));
  for (const char* part :
       {static_cast<const char*>(numbers), id.database, id.schema, id.relation}) {
    h = StableHash64(std::string_view(&kSeparator, 1), h);
    h = StableHash64(part, h);
  }
  int64 ks = static_cast<int64>(h & 0x7FFFFFFFFFFFFFFFull);
  if (ks < kFirstKeyspace) ks += kFirstKeyspace;
  return ks;
}

KeyspaceIdentity IdentityOf(Relation rel) {
  KeyspaceIdentity id;
  memset(&id, 0, sizeof id);
  const char* db = get_database_name(MyDatabaseId);
  const char* nsp = get_namespace_name(RelationGetNamespace(rel));
  strlcpy(id.database, db != nullptr ? db : "", sizeof id.database);
  strlcpy(id.schema, nsp != nullptr ? nsp : "", sizeof id.schema);
  strlcpy(id.relation, RelationGetRelationName(rel), sizeof id.relation);
  id.system_id = GetSystemIdentifier();
  id.database_oid = MyDatabaseId;
  return id;
}

int32 CatalogFreeGeneration(const KeyspaceIdentity& id, int32 min_generation) {
  // The same name was used before (DROP + CREATE, REINDEX, ...): move on to a generation whose
  // keyspace is unused, so old data (even if its removal from the cluster is still pending)
  // never shows up in the new relation.
  int32 generation = std::max(min_generation, 1);
  while (FindByKeyspace(DeriveKeyspace(id, generation), SnapshotSelf).found) generation++;
  return generation;
}

bool CatalogHasKeyspace(int64 keyspace) {
  SnapshotData dirty;
  InitDirtySnapshot(dirty);
  return FindByKeyspace(keyspace, &dirty).found;
}

Oid KeyspacesRelationId(bool missing_ok) {
  Oid nsp = get_namespace_oid("ramp", missing_ok);
  Oid rel = OidIsValid(nsp) ? get_relname_relid("keyspaces", nsp) : InvalidOid;
  if (!OidIsValid(rel) && !missing_ok) {
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("ramp.keyspaces does not exist"),
                    errhint("Run CREATE EXTENSION pg_ramp in this database.")));
  }
  return rel;
}

Oid StorageTablespace(Oid spcnode) {
  return spcnode == MyDatabaseTableSpace ? InvalidOid : spcnode;
}

KeyspaceRow CatalogFindByStorage(Oid reltablespace, Oid relfilenode) {
  ScanKeyData key[2];
  ScanKeyInit(&key[0], kAttTablespace, BTEqualStrategyNumber, F_OIDEQ,
              ObjectIdGetDatum(reltablespace));
  ScanKeyInit(&key[1], kAttRelfilenode, BTEqualStrategyNumber, F_OIDEQ,
              ObjectIdGetDatum(relfilenode));
  return FindOne("keyspaces_storage", key, 2, nullptr);
}

KeyspaceRow CatalogFindByRelid(Oid relid) {
  Relation catalog = table_open(KeyspacesRelationId(false), AccessShareLock);
  ScanKeyData key[1];
  ScanKeyInit(&key[0], kAttRelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
  SysScanDesc scan = systable_beginscan(catalog, InvalidOid, false, nullptr, 1, key);
  KeyspaceRow best = NotFound();
  HeapTuple tuple;
  while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
    KeyspaceRow row = RowFromTuple(tuple, RelationGetDescr(catalog));
    if (row.kind != kKindDropped && (!best.found || row.generation > best.generation)) best = row;
  }
  systable_endscan(scan);
  table_close(catalog, AccessShareLock);
  return best;
}

KeyspaceRow CatalogInsert(Relation rel, const RelFileNode* node, int64 keyspace, char kind,
                          int32 buckets, int32 generation) {
  Relation catalog = table_open(KeyspacesRelationId(false), RowExclusiveLock);
  Datum values[kNatts];
  bool nulls[kNatts] = {false, false, false, false, false, false, false};
  values[kAttKeyspace - 1] = Int64GetDatum(keyspace);
  values[kAttRelid - 1] = ObjectIdGetDatum(RelationGetRelid(rel));
  values[kAttTablespace - 1] = ObjectIdGetDatum(StorageTablespace(node->spcNode));
  values[kAttRelfilenode - 1] = ObjectIdGetDatum(node->relNode);
  values[kAttBuckets - 1] = Int32GetDatum(buckets);
  values[kAttKind - 1] = CharGetDatum(kind);
  values[kAttGeneration - 1] = Int32GetDatum(generation);
  HeapTuple tuple = heap_form_tuple(RelationGetDescr(catalog), values, nulls);
  CatalogTupleInsert(catalog, tuple);
  heap_freetuple(tuple);
  table_close(catalog, RowExclusiveLock);

  KeyspaceRow row;
  row.found = true;
  row.keyspace = keyspace;
  row.buckets = buckets;
  row.kind = kind;
  row.generation = generation;
  row.relid = RelationGetRelid(rel);
  row.reltablespace = StorageTablespace(node->spcNode);
  row.relfilenode = node->relNode;
  return row;
}

void CatalogMoveStorage(int64 keyspace, const RelFileNode* node) {
  Datum values[kNatts] = {};
  bool nulls[kNatts] = {};
  bool replace[kNatts] = {};
  values[kAttTablespace - 1] = ObjectIdGetDatum(StorageTablespace(node->spcNode));
  values[kAttRelfilenode - 1] = ObjectIdGetDatum(node->relNode);
  replace[kAttTablespace - 1] = replace[kAttRelfilenode - 1] = true;
  UpdateRow(keyspace, replace, values, nulls);
}

int CatalogRetireOrphans(int64* out, int max) {
  Oid catalog_id = KeyspacesRelationId(true);
  if (!OidIsValid(catalog_id)) return 0;  // DROP EXTENSION in progress
  Relation catalog = table_open(catalog_id, RowExclusiveLock);
  Relation pg_class = table_open(RelationRelationId, AccessShareLock);

  // Collect first, update afterwards (the scan must not meet its own updates).
  List* retire = NIL;
  List* relink = NIL;  // (keyspace, relid) pairs whose relid changed (storage swapped)
  List* moved = NIL;   // (keyspace, reltablespace, relfilenode) of storage that moved
  SysScanDesc scan = systable_beginscan(catalog, InvalidOid, false, SnapshotSelf, 0, nullptr);
  HeapTuple tuple;
  while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
    KeyspaceRow row = RowFromTuple(tuple, RelationGetDescr(catalog));
    if (row.kind == kKindDropped) continue;
    ScanKeyData key[2];
    ScanKeyInit(&key[0], Anum_pg_class_reltablespace, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(row.reltablespace));
    ScanKeyInit(&key[1], Anum_pg_class_relfilenode, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(row.relfilenode));
    SysScanDesc cscan =
        systable_beginscan(pg_class, ClassTblspcRelfilenodeIndexId, true, SnapshotSelf, 2, key);
    HeapTuple ctuple = systable_getnext(cscan);
    if (!HeapTupleIsValid(ctuple)) {
      // The storage is gone. If the relation still exists and its current storage has no
      // keyspace, the storage moved without telling the AM (ALTER INDEX ... SET TABLESPACE
      // copies index files itself): the keyspace follows it. Otherwise the relation was
      // dropped, truncated or rewritten, and the keyspace is retired.
      Oid moved_spc = InvalidOid;
      Oid moved_node = InvalidOid;
      HeapTuple rtuple = SearchSysCacheCopy1(RELOID, ObjectIdGetDatum(row.relid));
      if (HeapTupleIsValid(rtuple)) {
        Form_pg_class form = reinterpret_cast<Form_pg_class>(GETSTRUCT(rtuple));
        ScanKeyData skey[2];
        ScanKeyInit(&skey[0], kAttTablespace, BTEqualStrategyNumber, F_OIDEQ,
                    ObjectIdGetDatum(form->reltablespace));
        ScanKeyInit(&skey[1], kAttRelfilenode, BTEqualStrategyNumber, F_OIDEQ,
                    ObjectIdGetDatum(form->relfilenode));
        if (OidIsValid(form->relfilenode) &&
            !FindOne("keyspaces_storage", skey, 2, SnapshotSelf).found) {
          moved_spc = form->reltablespace;
          moved_node = form->relfilenode;
        }
        heap_freetuple(rtuple);
      }
      if (OidIsValid(moved_node)) {
        int64* move = static_cast<int64*>(palloc(3 * sizeof(int64)));
        move[0] = row.keyspace;
        move[1] = moved_spc;
        move[2] = moved_node;
        moved = lappend(moved, move);
      } else {
        int64* ks = static_cast<int64*>(palloc(sizeof(int64)));
        *ks = row.keyspace;
        retire = lappend(retire, ks);
      }
    } else {
      Oid relid = ((Form_pg_class)GETSTRUCT(ctuple))->oid;
      if (relid != row.relid) {
        int64* pair = static_cast<int64*>(palloc(2 * sizeof(int64)));
        pair[0] = row.keyspace;
        pair[1] = relid;
        relink = lappend(relink, pair);
      }
    }
    systable_endscan(cscan);
  }
  systable_endscan(scan);
  table_close(pg_class, AccessShareLock);
  table_close(catalog, RowExclusiveLock);

  int n = 0;
  ListCell* lc;
  foreach (lc, retire) {
    int64 keyspace = *static_cast<int64*>(lfirst(lc));
    Datum values[kNatts] = {};
    bool nulls[kNatts] = {};
    bool replace[kNatts] = {};
    values[kAttKind - 1] = CharGetDatum(kKindDropped);
    nulls[kAttTablespace - 1] = nulls[kAttRelfilenode - 1] = true;
    replace[kAttKind - 1] = replace[kAttTablespace - 1] = replace[kAttRelfilenode - 1] = true;
    UpdateRow(keyspace, replace, values, nulls);
    if (n < max) out[n] = keyspace;
    n++;
  }
  foreach (lc, moved) {
    int64* move = static_cast<int64*>(lfirst(lc));
    Datum values[kNatts] = {};
    bool nulls[kNatts] = {};
    bool replace[kNatts] = {};
    values[kAttTablespace - 1] = ObjectIdGetDatum(static_cast<Oid>(move[1]));
    values[kAttRelfilenode - 1] = ObjectIdGetDatum(static_cast<Oid>(move[2]));
    replace[kAttTablespace - 1] = replace[kAttRelfilenode - 1] = true;
    UpdateRow(move[0], replace, values, nulls);
  }
  foreach (lc, relink) {
    int64* pair = static_cast<int64*>(lfirst(lc));
    Datum values[kNatts] = {};
    bool nulls[kNatts] = {};
    bool replace[kNatts] = {};
    values[kAttRelid - 1] = ObjectIdGetDatum(static_cast<Oid>(pair[1]));
    replace[kAttRelid - 1] = true;
    UpdateRow(pair[0], replace, values, nulls);
  }
  return n;
}

int CatalogListDropped(int64* out, int max) {
  Relation catalog = table_open(KeyspacesRelationId(false), AccessShareLock);
  ScanKeyData key[1];
  ScanKeyInit(&key[0], kAttKind, BTEqualStrategyNumber, F_CHAREQ, CharGetDatum(kKindDropped));
  SysScanDesc scan = systable_beginscan(catalog, InvalidOid, false, nullptr, 1, key);
  int n = 0;
  HeapTuple tuple;
  while (n < max && HeapTupleIsValid(tuple = systable_getnext(scan))) {
    out[n++] = RowFromTuple(tuple, RelationGetDescr(catalog)).keyspace;
  }
  systable_endscan(scan);
  table_close(catalog, AccessShareLock);
  return n;
}

void CatalogForget(int64 keyspace) {
  Relation catalog = table_open(KeyspacesRelationId(false), RowExclusiveLock);
  ScanKeyData key[1];
  ScanKeyInit(&key[0], kAttKeyspace, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(keyspace));
  SysScanDesc scan =
      systable_beginscan(catalog, KeyspacesIndexId("keyspaces_pkey"), true, nullptr, 1, key);
  HeapTuple tuple = systable_getnext(scan);
  if (HeapTupleIsValid(tuple)) CatalogTupleDelete(catalog, &tuple->t_self);
  systable_endscan(scan);
  table_close(catalog, RowExclusiveLock);
}

// ---- C++ side ----

namespace {

constexpr uint32_t kAmCacheMagic = 0x52414d50;  // "RAMP"

// What rd_amcache holds for ramp tables and ramp_hash indexes (plain data: the relcache
// pfree()s it on invalidation).
struct AmCache {
  uint32_t magic;
  Oid reltablespace;
  Oid relfilenode;
  ramp::KeyspaceId keyspace;
  uint32_t buckets;
  bool grouped;
  // The commit of a bulk load that wrote this keyspace ahead (AheadMarkerKey), zero if none
  // or if the storage's creator finished before this transaction's first snapshot.
  uint64_t visible_from_time;
  uint64_t visible_from_client;
};

// When the relation's storage may have been created by a transaction that ended after this
// transaction's first snapshot (its pg_class row is that new), the commit time of a bulk
// load that wrote it ahead, from its marker key (zero: none, or not readable now: the reads
// then report the cluster's state themselves).
ramp::Timestamp AheadCommitOf(Relation rel, const ramp::KeyspaceRef& ref) {
  const bool young = PgCall([&] {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(RelationGetRelid(rel)));
    if (!HeapTupleIsValid(tuple)) return false;
    const TransactionId xmin = HeapTupleHeaderGetXmin(tuple->t_data);
    ReleaseSysCache(tuple);
    return !TransactionIdIsValid(TransactionXmin) || !TransactionIdIsNormal(xmin) ||
           TransactionIdFollowsOrEquals(xmin, TransactionXmin);
  });
  if (!young) return ramp::Timestamp();
  Session& session = Session::Get();
  try {
    session.Define(ref);
    ramp::ReadResult marker;
    if (session.reads().Get(ref.id, AheadMarkerKey(), &marker, /*latest=*/true).ok() &&
        marker.found) {
      return marker.ts;
    }
  } catch (const RampError&) {
  }
  return ramp::Timestamp();
}

// A statement that started before a bulk load committed ahead into the keyspace reads
// none of it (as a statement that started before its commit reads none of a PUT).
ramp::KeyspaceRef GuardAhead(ramp::KeyspaceRef ref, const AmCache& cache) {
  const ramp::Timestamp from{cache.visible_from_time, cache.visible_from_client};
  if (!from.zero() && Session::Get().StatementSnapshot() < from) ref.fresh = true;
  return ref;
}

StorageId StorageOf(const RelFileNode& node) {
  return StorageId{StorageTablespace(node.spcNode), node.relNode};
}

}  // namespace

ramp::KeyspaceRef RelationKeyspace(Relation rel) {
  const StorageId storage = StorageOf(rel->rd_node);
  if (XactState* x = XactIfAny()) {
    auto it = x->created.find(storage);
    if (it != x->created.end()) return it->second;
  }
  auto* cache = static_cast<AmCache*>(rel->rd_amcache);
  if (cache != nullptr && cache->magic == kAmCacheMagic && cache->reltablespace == storage.first &&
      cache->relfilenode == storage.second) {
    return GuardAhead(ramp::KeyspaceRef{cache->keyspace, cache->buckets, cache->grouped, false},
                      *cache);
  }
  KeyspaceRow row = PgCall([&] { return CatalogFindByStorage(storage.first, storage.second); });
  if ((!row.found || row.kind == kKindDropped) && rel->rd_rel->relkind == RELKIND_INDEX) {
    // The index's storage moved without an AM callback (ALTER INDEX ... SET TABLESPACE);
    // the next reconciliation of ramp.keyspaces records the move.
    const Oid relid = RelationGetRelid(rel);
    row = PgCall([&] { return CatalogFindByRelid(relid); });
  }
  if (!row.found || row.kind == kKindDropped) {
    throw SqlError(
        ERRCODE_UNDEFINED_OBJECT,
        std::string("relation \"") + RelationGetRelationName(rel) + "\" has no ramp keyspace",
        "ramp.keyspaces has no row for its storage (tablespace " + std::to_string(storage.first) +
            ", relfilenode " + std::to_string(storage.second) + ").",
        "ramp.keyspaces must not be modified by hand.");
  }
  ramp::KeyspaceRef ref{static_cast<ramp::KeyspaceId>(row.keyspace),
                        static_cast<uint32_t>(row.buckets), row.kind == kKindIndex, false};
  const ramp::Timestamp ahead =
      row.kind == kKindTable ? AheadCommitOf(rel, ref) : ramp::Timestamp();
  auto* fresh = static_cast<AmCache*>(
      PgCall([&] { return MemoryContextAllocZero(CacheMemoryContext, sizeof(AmCache)); }));
  *fresh = AmCache{kAmCacheMagic, storage.first, storage.second, ref.id,
                   ref.buckets,   ref.grouped,   ahead.time,     ahead.client};
  if (rel->rd_amcache != nullptr) PgCall([&] { pfree(rel->rd_amcache); });
  rel->rd_amcache = fresh;
  return GuardAhead(ref, *fresh);
}

bool ClusterCatalogEnabled() {
  return guc::nodes != nullptr && guc::nodes[0] != '\0';
}

ramp::KeyspaceRef CreateRelationKeyspace(Relation rel, const RelFileNode* node, char kind) {
  const StorageId storage = StorageOf(*node);
  XactState& x = Xact();
  auto it = x.created.find(storage);
  if (it != x.created.end()) return it->second;
  KeyspaceRow existing =
      PgCall([&] { return CatalogFindByStorage(storage.first, storage.second); });
  if (existing.found && existing.kind != kKindDropped) {
    return ramp::KeyspaceRef{static_cast<ramp::KeyspaceId>(existing.keyspace),
                             static_cast<uint32_t>(existing.buckets), existing.kind == kKindIndex,
                             false};
  }
  // New storage for an existing relation (TRUNCATE): the next generation of its keyspace.
  int32 min_generation = 1;
  if (rel->rd_node.relNode != node->relNode || rel->rd_node.spcNode != node->spcNode) {
    const StorageId current = StorageOf(rel->rd_node);
    KeyspaceRow old = PgCall([&] { return CatalogFindByStorage(current.first, current.second); });
    if (old.found) min_generation = old.generation + 1;
  }
  const KeyspaceIdentity identity = PgCall([&] { return IdentityOf(rel); });
  int32 buckets = guc::buckets;
  int32 generation = min_generation;
  int64 keyspace = 0;
  bool attached = false;
  for (;;) {
    generation = PgCall([&] { return CatalogFreeGeneration(identity, generation); });
    keyspace = DeriveKeyspace(identity, generation);
    if (!ClusterCatalogEnabled()) break;
    // Register the keyspace in the cluster's catalog, or attach to the live keyspace another
    // PostgreSQL server created under the same name.
    Session& session = Session::Get();
    ramp::KeyspaceCatalog catalog(&session.client());
    ramp::KeyspaceEntry entry;
    entry.id = static_cast<ramp::KeyspaceId>(keyspace);
    entry.kind = kind;
    entry.buckets = static_cast<uint32_t>(buckets);
    entry.database = identity.database;
    entry.schema = identity.schema;
    entry.relation = identity.relation;
    entry.system_id = identity.system_id;
    entry.database_oid = identity.database_oid;
    bool taken = false;
    session.Check(catalog.Register(&entry, &attached, &taken),
                  "registering the keyspace in the cluster's catalog");
    if (attached && PgCall([&] { return CatalogHasKeyspace(static_cast<int64>(entry.id)); })) {
      // This relation already uses that keyspace (TRUNCATE, REINDEX of a table this server
      // attached to): the new storage gets a keyspace of its own.
      entry.id = static_cast<ramp::KeyspaceId>(keyspace);
      entry.buckets = static_cast<uint32_t>(buckets);
      entry.system_id = identity.system_id;
      entry.database_oid = identity.database_oid;
      entry.created_ms = 0;
      session.Check(catalog.Register(&entry, &attached, &taken, /*allow_attach=*/false),
                    "registering the keyspace in the cluster's catalog");
    }
    if (taken) {  // an id of another incarnation (or a hash collision): never reuse it
      generation++;
      continue;
    }
    if (attached) {
      keyspace = static_cast<int64>(entry.id);
      buckets = static_cast<int32>(entry.buckets);
    }
    break;
  }
  KeyspaceRow row =
      PgCall([&] { return CatalogInsert(rel, node, keyspace, kind, buckets, generation); });
  // An attached keyspace holds the other servers' rows: reads must go to the cluster.
  ramp::KeyspaceRef ref{static_cast<ramp::KeyspaceId>(row.keyspace),
                        static_cast<uint32_t>(row.buckets), kind == kKindIndex, !attached};
  x.created[storage] = ref;
  if (attached) x.attached.push_back(ref.id);
  x.catalog_changed = true;
  return ref;
}

namespace {

// Keyspaces that have partitions on the cluster.
std::set<ramp::KeyspaceId> KeyspacesWithData(Session& session) {
  std::vector<ramp::PartitionStatus> parts;
  session.Check(session.client().Partitions(&parts), "reading the partition table");
  std::set<ramp::KeyspaceId> out;
  for (const auto& p : parts) out.insert(p.id.keyspace);
  return out;
}

bool DropOne(Session& session, const std::set<ramp::KeyspaceId>& with_data, ramp::KeyspaceId ks) {
  ramp::KeyspaceCatalog catalog(&session.client());
  bool was_live = false;
  session.Check(catalog.Drop(ks, &was_live), "removing a keyspace from the cluster");
  return was_live || with_data.count(ks) > 0;
}

bool DatabaseExists(Oid oid) {
  return SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(oid));
}

// Live catalog entries created by this PostgreSQL server.
std::vector<ramp::KeyspaceEntry> OwnLiveEntries(Session& session) {
  ramp::KeyspaceCatalog catalog(&session.client());
  std::vector<ramp::KeyspaceEntry> all;
  session.Check(catalog.List(&all), "reading the cluster's keyspace catalog");
  const uint64 system_id = PgCall([] { return GetSystemIdentifier(); });
  std::vector<ramp::KeyspaceEntry> own;
  for (auto& e : all) {
    if (e.live() && e.system_id == system_id) own.push_back(std::move(e));
  }
  return own;
}

}  // namespace

bool DropClusterKeyspace(ramp::KeyspaceId ks) {
  Session& session = Session::Get();
  ramp::KeyspaceCatalog catalog(&session.client());
  bool was_live = false;
  session.Check(catalog.Drop(ks, &was_live), "removing the keyspace of a dropped relation");
  return was_live;
}

int CollectClusterGarbage() {
  Session& session = Session::Get();
  const std::set<ramp::KeyspaceId> with_data = KeyspacesWithData(session);
  int removed = 0;
  // 1. Keyspaces of dropped relations whose removal after commit failed.
  constexpr int kBatch = 1024;
  int64 ids[kBatch];
  const int n = PgCall([&] { return CatalogListDropped(ids, kBatch); });
  for (int i = 0; i < n; i++) {
    if (DropOne(session, with_data, static_cast<ramp::KeyspaceId>(ids[i]))) removed++;
    const int64 id = ids[i];
    PgCall([&] { CatalogForget(id); });
  }
  // 2. Keyspaces this server registered for databases that no longer exist, or for this
  //    database while ramp.keyspaces does not know them. A registration is written to the
  //    cluster just before its ramp.keyspaces row: entries younger than a grace period are
  //    left alone.
  constexpr uint64_t kGraceMs = 2000;
  const uint64_t now_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  for (const ramp::KeyspaceEntry& e : OwnLiveEntries(session)) {
    const Oid db = e.database_oid;
    const int64 id = static_cast<int64>(e.id);
    bool orphan;
    if (db == MyDatabaseId) {
      orphan = e.created_ms + kGraceMs < now_ms && !PgCall([&] { return CatalogHasKeyspace(id); });
    } else {
      orphan = !PgCall([&] { return DatabaseExists(db); });
    }
    if (orphan && DropOne(session, with_data, e.id)) removed++;
  }
  return removed;
}

int DropDatabaseKeyspaces(Oid database_oid) {
  Session& session = Session::Get();
  const std::set<ramp::KeyspaceId> with_data = KeyspacesWithData(session);
  int removed = 0;
  for (const ramp::KeyspaceEntry& e : OwnLiveEntries(session)) {
    if (e.database_oid == database_oid && DropOne(session, with_data, e.id)) removed++;
  }
  return removed;
}

}  // namespace pgramp
