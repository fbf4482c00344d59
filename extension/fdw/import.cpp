// IMPORT FOREIGN SCHEMA remote FROM SERVER s INTO local: one foreign table per live
// key-value keyspace (kind 'k') of the cluster's keyspace catalog whose schema is `remote`
// (rampctl kv-register names them). Options: key_type (default text) and value_type
// (default bytea), the types of the key and value columns.
#include <string>
#include <vector>

#include "ramp/keyspace_catalog.h"

#include "xact/session.hpp"

#include "boundary/boundary.hpp"
#include "fdw/fdw.hpp"

namespace pgramp::fdw {

namespace {

// A type name of an IMPORT option, checked and spelled as PostgreSQL spells it.
char* TypeOption(ImportForeignSchemaStmt* stmt, const char* name, const char* fallback) {
  ListCell* lc;
  foreach (lc, stmt->options) {
    DefElem* d = static_cast<DefElem*>(lfirst(lc));
    if (strcmp(d->defname, name) != 0) continue;
    Oid type = InvalidOid;
    int32 typmod = -1;
    parseTypeString(defGetString(d), &type, &typmod, false);
    return format_type_with_typemod(type, typmod);
  }
  return pstrdup(fallback);
}

bool Listed(ImportForeignSchemaStmt* stmt, const char* relation) {
  if (stmt->list_type == FDW_IMPORT_SCHEMA_ALL) return true;
  bool in = false;
  ListCell* lc;
  foreach (lc, stmt->table_list) {
    in |= strcmp(static_cast<RangeVar*>(lfirst(lc))->relname, relation) == 0;
  }
  return stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO ? in : !in;
}

}  // namespace

List* ImportForeignSchema(ImportForeignSchemaStmt* stmt, Oid server_oid) {
  ListCell* lc;
  foreach (lc, stmt->options) {
    DefElem* d = static_cast<DefElem*>(lfirst(lc));
    if (strcmp(d->defname, "key_type") != 0 && strcmp(d->defname, "value_type") != 0) {
      ereport(ERROR, (errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
                      errmsg("invalid option \"%s\"", d->defname),
                      errhint("Valid options of IMPORT FOREIGN SCHEMA are: key_type, value_type")));
    }
  }
  const char* key_type = TypeOption(stmt, "key_type", "text");
  const char* value_type = TypeOption(stmt, "value_type", "bytea");
  ForeignServer* server = GetForeignServer(server_oid);
  const char* server_name = quote_identifier(server->servername);
  const char* remote = stmt->remote_schema;
  List* commands = NIL;
  Boundary([&] {
    Session& session = Session::Get();
    ramp::KeyspaceCatalog catalog(&session.client());
    std::vector<ramp::KeyspaceEntry> entries;
    session.Check(catalog.List(&entries), "reading the cluster's keyspace catalog");
    // The newest live entry of each name.
    for (size_t i = 0; i < entries.size(); i++) {
      const ramp::KeyspaceEntry& e = entries[i];
      if (e.kind != 'k' || !e.live() || e.schema != remote) continue;
      bool newer_exists = false;
      for (const ramp::KeyspaceEntry& o : entries) {
        newer_exists |= o.kind == 'k' && o.live() && o.schema == e.schema &&
                        o.relation == e.relation && o.created_ms > e.created_ms;
      }
      if (newer_exists) continue;
      const char* relation = e.relation.c_str();
      const unsigned long long id = e.id;
      const unsigned buckets = e.buckets;
      commands = PgCall([&] {
        if (!Listed(stmt, relation)) return commands;
        return lappend(commands, psprintf("CREATE FOREIGN TABLE %s (key %s, value %s) SERVER %s "
                                          "OPTIONS (keyspace '%llu', buckets '%u')",
                                          quote_identifier(relation), key_type, value_type,
                                          server_name, id, buckets));
      });
    }
  });
  return commands;
}

}  // namespace pgramp::fdw
