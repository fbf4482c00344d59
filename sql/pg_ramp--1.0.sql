-- pg_ramp 1.0: tables and indexes stored on a rampd cluster, committed with RAMP-Fast.
\echo Use "CREATE EXTENSION pg_ramp" to load this file. \quit

-- Which keyspace on the cluster holds the data of which relation storage. Keyspace ids are
-- never reused: they hash this server's system identifier, the database oid, the names and
-- the generation, and ids already known locally or in the cluster's keyspace catalog
-- (ramp.cluster_keyspaces()) are skipped; a server running the same DDL as another one
-- attaches to that server's keyspace through the cluster's catalog. Rows follow the
-- storage (tablespace, relfilenode) rather than the relation's OID: TRUNCATE and table
-- rewrites (ALTER TABLE ... TYPE, VACUUM FULL, CLUSTER) give a relation new storage, and a
-- rewrite swaps storage between two pg_class rows. relid is kept up to date at the commit of
-- such changes. kind: 't' table, 'i' ramp_hash index, 'd' relation dropped and keyspace not
-- yet removed from the cluster (ramp.collect_garbage() retries).
-- Maintained by the extension only.
CREATE TABLE ramp.keyspaces (
    keyspace      bigint PRIMARY KEY,
    relid         oid NOT NULL,
    reltablespace oid,
    relfilenode   oid,
    buckets       int NOT NULL CHECK (buckets > 0),
    kind          "char" NOT NULL CHECK (kind IN ('t', 'i', 'd')),
    generation    int NOT NULL,
    CHECK ((kind = 'd') = (relfilenode IS NULL))
);
CREATE UNIQUE INDEX keyspaces_storage ON ramp.keyspaces (reltablespace, relfilenode);
REVOKE ALL ON ramp.keyspaces FROM PUBLIC;
GRANT SELECT ON ramp.keyspaces TO PUBLIC;

-- Table access method.
CREATE FUNCTION ramp.ramp_tableam_handler(internal) RETURNS table_am_handler
    AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE ACCESS METHOD ramp TYPE TABLE HANDLER ramp.ramp_tableam_handler;
COMMENT ON ACCESS METHOD ramp IS 'rows stored on the ramp cluster, read-atomic';

-- Index access method: equality on one column, entries on the cluster.
CREATE FUNCTION ramp.ramp_hash_handler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE ACCESS METHOD ramp_hash TYPE INDEX HANDLER ramp.ramp_hash_handler;
COMMENT ON ACCESS METHOD ramp_hash IS 'shared hash index on the ramp cluster, read-atomic with its table';

-- Operator classes mirror PostgreSQL's hash opfamilies: FUNCTION 1 is the type's extended
-- hash function (seed 0); a family groups types whose equal values hash alike, which is what
-- makes cross-type lookups (int4 column = int8 value) find their entries.
CREATE OPERATOR FAMILY ramp.integer_ops USING ramp_hash;
CREATE OPERATOR CLASS ramp.int2_ops DEFAULT FOR TYPE int2 USING ramp_hash FAMILY ramp.integer_ops AS
    OPERATOR 1 = (int2, int2), FUNCTION 1 hashint2extended(int2, int8);
CREATE OPERATOR CLASS ramp.int4_ops DEFAULT FOR TYPE int4 USING ramp_hash FAMILY ramp.integer_ops AS
    OPERATOR 1 = (int4, int4), FUNCTION 1 hashint4extended(int4, int8);
CREATE OPERATOR CLASS ramp.int8_ops DEFAULT FOR TYPE int8 USING ramp_hash FAMILY ramp.integer_ops AS
    OPERATOR 1 = (int8, int8), FUNCTION 1 hashint8extended(int8, int8);
ALTER OPERATOR FAMILY ramp.integer_ops USING ramp_hash ADD
    OPERATOR 1 = (int2, int4), OPERATOR 1 = (int2, int8),
    OPERATOR 1 = (int4, int2), OPERATOR 1 = (int4, int8),
    OPERATOR 1 = (int8, int2), OPERATOR 1 = (int8, int4);

CREATE OPERATOR FAMILY ramp.float_ops USING ramp_hash;
CREATE OPERATOR CLASS ramp.float4_ops DEFAULT FOR TYPE float4 USING ramp_hash FAMILY ramp.float_ops AS
    OPERATOR 1 = (float4, float4), FUNCTION 1 hashfloat4extended(float4, int8);
CREATE OPERATOR CLASS ramp.float8_ops DEFAULT FOR TYPE float8 USING ramp_hash FAMILY ramp.float_ops AS
    OPERATOR 1 = (float8, float8), FUNCTION 1 hashfloat8extended(float8, int8);
ALTER OPERATOR FAMILY ramp.float_ops USING ramp_hash ADD
    OPERATOR 1 = (float4, float8), OPERATOR 1 = (float8, float4);

-- text also serves varchar (binary coercible), as in PostgreSQL's own hash opclasses.
CREATE OPERATOR CLASS ramp.text_ops DEFAULT FOR TYPE text USING ramp_hash AS
    OPERATOR 1 = (text, text), FUNCTION 1 hashtextextended(text, int8);
CREATE OPERATOR CLASS ramp.bpchar_ops DEFAULT FOR TYPE bpchar USING ramp_hash AS
    OPERATOR 1 = (bpchar, bpchar), FUNCTION 1 hashbpcharextended(bpchar, int8);
CREATE OPERATOR CLASS ramp.numeric_ops DEFAULT FOR TYPE numeric USING ramp_hash AS
    OPERATOR 1 = (numeric, numeric), FUNCTION 1 hash_numeric_extended(numeric, int8);
CREATE OPERATOR CLASS ramp.date_ops DEFAULT FOR TYPE date USING ramp_hash AS
    OPERATOR 1 = (date, date), FUNCTION 1 hashint4extended(int4, int8);
CREATE OPERATOR CLASS ramp.timestamp_ops DEFAULT FOR TYPE timestamp USING ramp_hash AS
    OPERATOR 1 = (timestamp, timestamp), FUNCTION 1 timestamp_hash_extended(timestamp, int8);
CREATE OPERATOR CLASS ramp.timestamptz_ops DEFAULT FOR TYPE timestamptz USING ramp_hash AS
    OPERATOR 1 = (timestamptz, timestamptz), FUNCTION 1 timestamp_hash_extended(timestamp, int8);
CREATE OPERATOR CLASS ramp.uuid_ops DEFAULT FOR TYPE uuid USING ramp_hash AS
    OPERATOR 1 = (uuid, uuid), FUNCTION 1 uuid_hash_extended(uuid, int8);
CREATE OPERATOR CLASS ramp.bool_ops DEFAULT FOR TYPE bool USING ramp_hash AS
    OPERATOR 1 = (bool, bool), FUNCTION 1 hashcharextended("char", int8);
CREATE OPERATOR CLASS ramp.oid_ops DEFAULT FOR TYPE oid USING ramp_hash AS
    OPERATOR 1 = (oid, oid), FUNCTION 1 hashoidextended(oid, int8);
CREATE OPERATOR CLASS ramp.bytea_ops DEFAULT FOR TYPE bytea USING ramp_hash AS
    OPERATOR 1 = (bytea, bytea), FUNCTION 1 hashvarlenaextended(internal, int8);

-- Status of the cluster's servers. When no server can be reached, one row per seed of
-- ramp.nodes with reachable = false and the reason.
CREATE FUNCTION ramp.cluster_status(
    OUT node int, OUT endpoints text, OUT reachable bool, OUT error text,
    OUT partitions bigint, OUT keys bigint, OUT bytes bigint, OUT ops bigint,
    OUT uptime_ms bigint)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_cluster_status' LANGUAGE C VOLATILE;

CREATE FUNCTION ramp._partitions(
    OUT keyspace bigint, OUT bucket int, OUT owner int, OUT home int, OUT epoch bigint,
    OUT keys bigint, OUT bytes bigint, OUT ops_per_sec float8, OUT migrating bool)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_partitions_raw' LANGUAGE C VOLATILE;

-- Every partition of the cluster: owner (where it is served now), home (which holds its
-- directory entry), epoch (raised by every move), size, load (ops_per_sec, a decaying
-- average), whether a migration of it is in flight, and the relation of this database it
-- belongs to (NULL: another database's, or a raw key-value keyspace).
CREATE FUNCTION ramp.partitions(
    OUT relation regclass, OUT keyspace bigint, OUT bucket int, OUT owner int, OUT home int,
    OUT epoch bigint, OUT keys bigint, OUT bytes bigint, OUT ops_per_sec float8,
    OUT migrating bool)
    RETURNS SETOF record LANGUAGE sql VOLATILE AS $$
  SELECT c.oid::regclass, p.keyspace, p.bucket, p.owner, p.home, p.epoch, p.keys, p.bytes,
         p.ops_per_sec, p.migrating
    FROM ramp._partitions() p
    LEFT JOIN ramp.keyspaces k ON k.keyspace = p.keyspace AND k.kind <> 'd'
    LEFT JOIN pg_catalog.pg_class c
           ON c.relfilenode = k.relfilenode AND c.reltablespace = k.reltablespace
   ORDER BY p.keyspace, p.bucket
$$;

-- Partition migration (DESIGN §7). ramp.migrate_partition moves partition `bucket` of a ramp
-- table or index to server `node` while it stays readable and writable (writes pause only
-- at the cutover) and returns once the move is done; superuser only. Refused with the
-- reason: not a ramp relation, a bucket it does not have, an unknown node, the node it is
-- on already, a move of it already in flight, a target that is down or has no room.
CREATE FUNCTION ramp._migrate_partition(keyspace bigint, bucket int, node int) RETURNS void
    AS 'MODULE_PATHNAME', 'ramp_migrate_partition' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION ramp.migrate_partition(rel regclass, bucket int, node int) RETURNS void
    LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
  ks bigint;
  nb int;
BEGIN
  SELECT k.keyspace, k.buckets INTO ks, nb
    FROM ramp.keyspaces k
    JOIN pg_catalog.pg_class c
      ON c.relfilenode = k.relfilenode AND c.reltablespace = k.reltablespace
   WHERE c.oid = rel AND k.kind <> 'd';
  IF ks IS NULL THEN
    RAISE EXCEPTION '"%" is not a ramp table or index', rel
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF bucket < 0 OR bucket >= nb THEN
    RAISE EXCEPTION 'unknown partition: "%" has buckets 0 to %, not %', rel, nb - 1, bucket
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM ramp._migrate_partition(ks, bucket, node);
END
$$;
REVOKE ALL ON FUNCTION ramp._migrate_partition(bigint, int, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION ramp.migrate_partition(regclass, int, int) FROM PUBLIC;

CREATE FUNCTION ramp._migrations(
    OUT keyspace bigint, OUT bucket int, OUT home int, OUT source int, OUT target int,
    OUT phase text, OUT in_flight bool, OUT bytes_copied bigint, OUT bytes_total bigint,
    OUT started timestamptz, OUT error text)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_migrations_raw' LANGUAGE C VOLATILE;

-- Migrations in flight and recently finished (in the spirit of pg_stat_progress_*): the
-- partition, where from and to, the phase (copying, cutover, committed; then done, rolled
-- back), the bytes of its log copied so far of the total, when it started, and why a move
-- rolled back.
CREATE VIEW ramp.migrations AS
  SELECT c.oid::regclass AS relation, m.keyspace, m.bucket, m.source, m.target, m.phase,
         m.bytes_copied, m.bytes_total, m.started, m.in_flight, m.home, m.error
    FROM ramp._migrations() m
    LEFT JOIN ramp.keyspaces k ON k.keyspace = m.keyspace AND k.kind <> 'd'
    LEFT JOIN pg_catalog.pg_class c
           ON c.relfilenode = k.relfilenode AND c.reltablespace = k.reltablespace
   ORDER BY m.in_flight DESC, m.started DESC;

-- The hot-partition rebalancer's plan (DESIGN §7): the moves that bring the most loaded
-- server's load (decaying ops/s of its partitions, one-sided reads included) to at most
-- threshold x the mean, hottest first, skipping partitions moved within the cool-down, with
-- the max/mean load before and after. dry_run => false also makes the moves (superuser).
CREATE FUNCTION ramp._rebalance(dry_run bool, threshold float8,
    OUT keyspace bigint, OUT bucket int, OUT source int, OUT target int, OUT ops_per_sec float8,
    OUT imbalance_before float8, OUT imbalance_after float8)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_rebalance' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION ramp.rebalance(dry_run bool DEFAULT true, threshold float8 DEFAULT 1.25,
    OUT relation regclass, OUT keyspace bigint, OUT bucket int, OUT source int, OUT target int,
    OUT ops_per_sec float8, OUT imbalance_before float8, OUT imbalance_after float8)
    RETURNS SETOF record LANGUAGE sql VOLATILE AS $$
  SELECT c.oid::regclass, r.keyspace, r.bucket, r.source, r.target, r.ops_per_sec,
         r.imbalance_before, r.imbalance_after
    FROM ramp._rebalance(dry_run, threshold) r
    LEFT JOIN ramp.keyspaces k ON k.keyspace = r.keyspace AND k.kind <> 'd'
    LEFT JOIN pg_catalog.pg_class c
           ON c.relfilenode = k.relfilenode AND c.reltablespace = k.reltablespace
$$;

-- The keyspace holding a ramp table's rows or a ramp_hash index's entries (NULL otherwise).
CREATE FUNCTION ramp.keyspace_of(rel regclass) RETURNS bigint LANGUAGE sql STABLE STRICT AS $$
  SELECT k.keyspace
    FROM ramp.keyspaces k
    JOIN pg_catalog.pg_class c
      ON c.relfilenode = k.relfilenode AND c.reltablespace = k.reltablespace
   WHERE c.oid = rel AND k.kind <> 'd'
$$;

-- Removes from the cluster the keyspaces of dropped relations whose removal after their
-- transaction committed did not succeed (cluster unreachable then), the keyspaces this
-- PostgreSQL server registered for databases that no longer exist (DROP DATABASE without
-- pg_ramp preloaded), and those registered for this database that ramp.keyspaces does not
-- know (DROP EXTENSION, an aborted CREATE TABLE). Returns how many keyspaces it removed.
CREATE FUNCTION ramp.collect_garbage() RETURNS int
    AS 'MODULE_PATHNAME', 'ramp_collect_garbage' LANGUAGE C VOLATILE;

-- The cluster's keyspace catalog: every keyspace registered by any PostgreSQL server of the
-- cluster, with the server (pg_control_system().system_identifier) and database oid that
-- created it. rampctl keyspaces shows the same, with sizes.
CREATE FUNCTION ramp.cluster_keyspaces(
    OUT keyspace bigint, OUT state text, OUT kind "char", OUT database text, OUT schema text,
    OUT relation text, OUT system_identifier bigint, OUT database_oid oid,
    OUT created timestamptz, OUT buckets int)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_cluster_keyspaces' LANGUAGE C VOLATILE;

-- DROP of ramp tables and indexes: the keyspaces are retired at commit.
CREATE FUNCTION ramp.on_sql_drop() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'ramp_on_sql_drop' LANGUAGE C;
CREATE EVENT TRIGGER ramp_sql_drop ON sql_drop EXECUTE FUNCTION ramp.on_sql_drop();
