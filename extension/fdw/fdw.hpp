// The foreign data wrapper `ramp` (DESIGN §8): foreign tables over raw key-value keyspaces of
// the cluster, such as YCSB's usertable written by the C++ client.
//
// A foreign table maps one keyspace: a key column (the RAMP key) and at most one value column
// (the RAMP value). bytea columns hold the bytes as they are; text and varchar columns hold
// them as text of the database encoding; any other type holds its text form (its input and
// output functions). A value that does not decode as its column's type is an ERROR naming the
// column and the key (22P02; 22021 for bytes that are not valid in the database encoding).
//
// Reads: `key = c`, `key IN (...)` and `key = ANY(array)` (constants, parameters, stable
// expressions; several of them are intersected) become ONE multi-key RAMP read (GET* or GET+,
// as ramp.read_path says), read-atomic across the keys; anything else reads every partition
// through the page I/O scan path. Both read at the statement's snapshot, the one the
// statement's ramp tables are read at, so a scan returns every key once and never half of a
// transaction. Writes (INSERT = PUT, UPDATE, DELETE) are buffered per transaction with
// command-id visibility and subtransaction undo, and join the transaction's RAMP PUT at
// pre-commit (xact/xact.hpp SetPreCommitFlush), with the version read as the expected one.
//
// Files: handler.cpp (the FdwRoutine, options, planning, EXPLAIN; PostgreSQL code),
// codec.cpp (datums <-> bytes; PostgreSQL code), reads.cpp and writes.cpp (the C++ side:
// point reads, scans, the write buffer; called inside Boundary), import.cpp (IMPORT FOREIGN
// SCHEMA from the cluster's keyspace catalog).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/types.h"

#include "boundary/pg.hpp"

namespace pgramp::fdw {

// ---- C++ side (throws; call inside Boundary) ---------------------------------------------

// A foreign table's keyspace, from its `keyspace` option: a decimal id, or SCHEMA.NAME of a
// raw key-value entry (kind 'k') of the cluster's keyspace catalog. buckets: the table's
// `buckets` option (0: the catalog entry's, else the default).
struct Keyspace {
  ramp::KeyspaceId id = 0;
  uint32_t buckets = 0;
  char label[2 * NAMEDATALEN + 2];  // "schema.name" of its catalog entry, or ""
};
Keyspace ResolveKeyspace(const char* option, uint32_t buckets, const char* server_nodes,
                         const char* server_token_file, const char* server_name);

// One row of a read: views valid until the next call on the reader.
struct RawRow {
  const char* key;
  size_t key_len;
  const char* value;
  size_t value_len;
};

struct ReadStats {
  uint64_t keys = 0;        // keys asked for (point reads)
  uint64_t found = 0;       // rows returned
  uint64_t partitions = 0;  // partitions read (scan)
  uint64_t pages = 0;
  uint64_t own_writes = 0;  // rows that came from this transaction's buffered writes
};

class Reader {
 public:
  virtual ~Reader() = default;
  virtual bool Next(RawRow* row) = 0;
  virtual ReadStats stats() const = 0;
};

// keys: distinct keys, read in one RAMP read. cid: the reading command's id (own writes of
// earlier commands are seen). remember: note the versions read (UPDATE/DELETE send them).
std::unique_ptr<Reader> PointReader(const Keyspace& ks, std::vector<std::string> keys, uint32_t cid,
                                    bool remember);
std::unique_ptr<Reader> ScanReader(const Keyspace& ks, uint32_t cid, bool remember);

// Buffered writes of the current transaction. value == nullptr: delete. old_key (UPDATE,
// DELETE): the key the row was read under; its remembered version is the expected one.
void BufferPut(const Keyspace& ks, std::string_view key, std::string_view value, uint32_t cid,
               uint32_t sub);
void BufferDelete(const Keyspace& ks, std::string_view key, uint32_t cid, uint32_t sub);

// ---- PostgreSQL side (may ereport) ---------------------------------------------------------

// Bytes of a datum of type typid, as stored in a keyspace (palloc'd, *len set).
char* EncodeDatum(Datum value, Oid typid, int* len);
// Whether keys of this type can be pushed down (their stored form is canonical).
bool KeyTypePushable(Oid typid);
// The datum of attribute att for bytes read under key (errors name the column and the key).
Datum DecodeDatum(const char* data, size_t len, Form_pg_attribute att, Relation rel,
                  const char* key, size_t key_len);
// The key as a message shows it ('user1', or \x... for bytes that are not text).
char* KeyForMessage(const char* key, size_t len);

// IMPORT FOREIGN SCHEMA.
List* ImportForeignSchema(ImportForeignSchemaStmt* stmt, Oid server_oid);

void InstallXactCallbacks();

}  // namespace pgramp::fdw
