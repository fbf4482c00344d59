// ramp.keyspaces: which keyspace holds the data of which relation storage.
//
// Rows are keyed by the relation's storage (tablespace, relfilenode), not by its OID: a table
// rewrite (ALTER TABLE ... TYPE, VACUUM FULL, CLUSTER, SET ACCESS METHOD) builds the new
// contents under a temporary relation and then swaps the storage of the two pg_class rows,
// and TRUNCATE gives the relation a new relfilenode. Following the storage keeps the data
// with the relation through all of them.
//
// Keyspace ids identify one incarnation of a relation's storage and are never reused: they
// hash this PostgreSQL server's system identifier, the database's oid (a re-created or
// restored database has a new one), the names and a generation, and an id already in
// ramp.keyspaces or in the cluster's keyspace catalog (ramp/keyspace_catalog.h) is skipped.
// When ramp.nodes is set, every new keyspace is registered in the cluster's catalog; a
// second PostgreSQL server that runs the same DDL attaches there to the live keyspace that
// another server created under the same (database, schema, relation) name (see NOTES.md).
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
// What a new keyspace of rel is registered under in the cluster's catalog.
struct KeyspaceIdentity {
  char database[NAMEDATALEN];
  char schema[NAMEDATALEN];
  char relation[NAMEDATALEN];
  uint64 system_id;
  Oid database_oid;
};
KeyspaceIdentity IdentityOf(Relation rel);
// The keyspace id of generation `generation` of the identity (no catalog access).
int64 DeriveKeyspace(const KeyspaceIdentity& id, int32 generation);
// The first generation >= min_generation whose keyspace id is not in ramp.keyspaces.
int32 CatalogFreeGeneration(const KeyspaceIdentity& id, int32 min_generation);
// Inserts the row for new storage of rel with the given keyspace.
KeyspaceRow CatalogInsert(Relation rel, const RelFileNode* node, int64 keyspace, char kind,
                          int32 buckets, int32 generation);
// Whether ramp.keyspaces has a row for the keyspace, committed or being inserted by a
// transaction in progress (dirty snapshot).
bool CatalogHasKeyspace(int64 keyspace);
// ALTER TABLE SET TABLESPACE: the keyspace follows the storage.
void CatalogMoveStorage(int64 keyspace, const RelFileNode* node);
// Marks rows whose storage no longer exists in pg_class as dropped and returns up to max of
// their keyspaces (the count of all marked rows is returned).
int CatalogRetireOrphans(int64* out, int max);
// Lists rows marked dropped; CatalogForget deletes one after its keyspace was removed.
int CatalogListDropped(int64* out, int max);
void CatalogForget(int64 keyspace);

// ---- C++ side (throws) ----

// Whether new keyspaces are registered in the cluster's catalog (ramp.nodes is set).
bool ClusterCatalogEnabled();
// Removes a keyspace from the cluster: marks its entry in the cluster's catalog dropped and
// drops its partitions on every server (idempotent). Returns whether the entry was live.
bool DropClusterKeyspace(ramp::KeyspaceId ks);
// Keyspaces of this PostgreSQL server's databases that no longer exist (by oid), and of
// this database (MyDatabaseId) that ramp.keyspaces does not know (DROP EXTENSION, aborted
// CREATE): removed from the cluster. Returns how many keyspaces were removed.
int CollectClusterGarbage();
// The keyspaces registered by this server for database `database_oid`, removed from the
// cluster (after DROP DATABASE). Returns how many.
int DropDatabaseKeyspaces(Oid database_oid);
// Installs the ProcessUtility hook that calls DropDatabaseKeyspaces after DROP DATABASE
// (catalog/dropped_databases.cpp; from _PG_init).
void InstallDropDatabaseHook();

// The keyspace of a ramp table or ramp_hash index, cached in rd_amcache.
ramp::KeyspaceRef RelationKeyspace(Relation rel);
// Creates the keyspace of new storage of rel (registers it as fresh in this transaction).
ramp::KeyspaceRef CreateRelationKeyspace(Relation rel, const RelFileNode* node, char kind);

}  // namespace pgramp
