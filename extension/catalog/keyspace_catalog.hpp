// ramp.keyspaces: which keyspace holds the data of which relation storage.
//
// Rows are keyed by the relation's storage (tablespace, relfilenode), not by its OID: a table
// rewrite (ALTER TABLE ... TYPE, VACUUM FULL, CLUSTER, SET ACCESS METHOD) builds the new
// contents under a temporary relation and then swaps the storage of the two pg_class rows,
// and TRUNCATE gives the relation a new relfilenode. Following the storage keeps the data
// with the relation through all of them. Keyspace ids are derived from the database,
// schema, relation name and a generation (FNV-1a), so PostgreSQL servers running the same
// DDL agree on them.
#pragma once

#include <cstdint>

#include "ramp/write_batch.h"

#include "boundary/pg.hpp"

namespace pgramp {

inline constexpr char kKindTable = 't';
inline constexpr char kKindIndex = 'i';
inline constexpr char kKindDropped = 'd';  // relation gone, keyspace removal pending

struct KeyspaceRow {
  bool found;
  int64 keyspace;
  int32 buckets;
  char kind;
  int32 generation;
  Oid relid;
  Oid reltablespace;  // pg_class convention: InvalidOid = the database's default tablespace
  Oid relfilenode;
};

// ---- PostgreSQL side: these may ereport (call them through PgCall from C++) ----

// OID of ramp.keyspaces (InvalidOid if missing_ok and the extension is being dropped).
Oid KeyspacesRelationId(bool missing_ok);
Oid StorageTablespace(Oid spcnode);
KeyspaceRow CatalogFindByStorage(Oid reltablespace, Oid relfilenode);
// The newest keyspace (not dropped) recorded for a relation OID.
KeyspaceRow CatalogFindByRelid(Oid relid);
// Inserts the row for new storage of rel; the keyspace id is derived from the relation's
// name and the next generation not yet used.
KeyspaceRow CatalogCreate(Relation rel, const RelFileNode* node, char kind, int32 buckets,
                          int32 min_generation);
// ALTER TABLE SET TABLESPACE: the keyspace follows the storage.
void CatalogMoveStorage(int64 keyspace, const RelFileNode* node);
// Marks rows whose storage no longer exists in pg_class as dropped and returns up to max of
// their keyspaces (the count of all marked rows is returned).
int CatalogRetireOrphans(int64* out, int max);
// Lists rows marked dropped; CatalogForget deletes one after its keyspace was removed.
int CatalogListDropped(int64* out, int max);
void CatalogForget(int64 keyspace);

// ---- C++ side (throws) ----

// The keyspace of a ramp table or ramp_hash index, cached in rd_amcache.
ramp::KeyspaceRef RelationKeyspace(Relation rel);
// Creates the keyspace of new storage of rel (registers it as fresh in this transaction).
ramp::KeyspaceRef CreateRelationKeyspace(Relation rel, const RelFileNode* node, char kind);

}  // namespace pgramp
