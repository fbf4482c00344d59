// The cluster's catalog of keyspaces: which keyspace ids were handed out, to what (database,
// schema, relation, kind), by which PostgreSQL server and database, and whether they are
// still live. It is stored on the cluster itself, as ordinary RAMP items of one reserved
// keyspace (kCatalogKeyspace, one bucket), so it is replicated, persisted and read-atomic
// like any other data and every client (PostgreSQL servers, rampctl) sees the same catalog.
//
// Keys of the catalog keyspace:
//   "seq"                     how many entries were registered (8 bytes, little endian)
//   "slot/<20-digit n>"       the id of the n-th registered entry (listing without a scan)
//   "ks/<20-digit id>"        the entry of one keyspace (EncodeKeyspaceEntry)
//   "name/<kind>\0<db>\0<schema>\0<relation>"
//                             the id most recently registered under that name
// Register writes all four in one RAMP PUT with expected versions (conflict-checked like the
// row-id sequence): two registrations that read the same state cannot both commit, and an id
// that already has an entry is refused (AlreadyRegistered: the caller picks another id).
// The caller chooses ids that are unique per incarnation (pg_ramp hashes the PostgreSQL
// system identifier, the database oid, the names and a generation), so a table incarnation
// never sees the rows of another.
//
// Sharing a table between PostgreSQL servers: Register attaches to the keyspace the name
// points at when that entry is live and was created by ANOTHER PostgreSQL server (another
// system identifier). A server never attaches to its own entries: a re-created database, a
// TRUNCATE, a DROP + CREATE or a restore on the same server always gets a new keyspace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp {

class Client;

// Ids below 2^16 are reserved (pg_ramp never hands them out).
inline constexpr KeyspaceId kCatalogKeyspace = 0xCA7;  // 3239
inline constexpr uint32_t kCatalogBuckets = 1;
inline constexpr KeyspaceId kFirstUserKeyspace = KeyspaceId{1} << 16;

enum class KeyspaceState : uint8_t { kLive = 0, kDropped = 1 };

struct KeyspaceEntry {
  KeyspaceId id = 0;
  char kind = 't';  // 't' table, 'i' ramp_hash index
  uint32_t buckets = kDefaultBuckets;
  std::string database;
  std::string schema;
  std::string relation;
  // The creating PostgreSQL server (pg_control's system identifier) and database (its oid
  // on that server: a re-created database has a new one).
  uint64_t system_id = 0;
  uint32_t database_oid = 0;
  uint64_t created_ms = 0;  // wall clock, Unix milliseconds
  KeyspaceState state = KeyspaceState::kLive;
  uint64_t dropped_ms = 0;

  bool live() const { return state == KeyspaceState::kLive; }
};

std::string EncodeKeyspaceEntry(const KeyspaceEntry& e);
bool DecodeKeyspaceEntry(std::string_view data, KeyspaceEntry* out);
const char* KeyspaceStateName(KeyspaceState s);  // "live", "dropped"

class KeyspaceCatalog {
 public:
  // The client must outlive the catalog. Defines kCatalogKeyspace on the client.
  explicit KeyspaceCatalog(Client* client);

  // Registers *entry (every field but state; created_ms = now when zero): either attaches
  // to the live entry of the same name created by another system (*attached = true, *entry
  // becomes that entry) or records entry->id. *id_taken: the id already has an entry (nothing
  // was written; choose another id). allow_attach = false: never attach.
  Status Register(KeyspaceEntry* entry, bool* attached, bool* id_taken, bool allow_attach = true);
  // Every entry, by id.
  Status List(std::vector<KeyspaceEntry>* out);
  Status Get(KeyspaceId id, KeyspaceEntry* out, bool* found);
  // Marks the entry dropped (idempotent; NotFound-free: an id without an entry is fine) and
  // removes the keyspace's partitions from every server. *was_live: the entry was live.
  Status Drop(KeyspaceId id, bool* was_live = nullptr);
  // Only marks the entry dropped (the caller removes the data itself).
  Status MarkDropped(KeyspaceId id, bool* was_live = nullptr);

 private:
  Client* client_;
};

}  // namespace ramp
