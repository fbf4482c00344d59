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
-- The extension's own catalogs are heap tables (USING heap: a server whose
-- default_table_access_method is ramp must still be able to create the extension).
CREATE TABLE ramp.keyspaces (
    keyspace      bigint PRIMARY KEY,
    relid         oid NOT NULL,
    reltablespace oid,
    relfilenode   oid,
    buckets       int NOT NULL CHECK (buckets > 0),
    kind          "char" NOT NULL CHECK (kind IN ('t', 'i', 'd')),
    generation    int NOT NULL,
    CHECK ((kind = 'd') = (relfilenode IS NULL))
) USING heap;
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

-- The address cache of one-sided reads (GET*) this backend uses: shared by every backend of
-- this server when pg_ramp is in shared_preload_libraries (shared = true; capacity =
-- ramp.address_cache_entries rounded), else this backend's own. lookups: keys that point
-- reads looked up; found: of them, with an address; hits: one-sided reads that returned the
-- row; fallbacks: stale addresses (the read went by request); stores: addresses learnt.
CREATE FUNCTION ramp.address_cache(
    OUT shared bool, OUT capacity bigint, OUT lookups bigint, OUT found bigint,
    OUT hits bigint, OUT fallbacks bigint, OUT stores bigint)
    RETURNS record AS 'MODULE_PATHNAME', 'ramp_address_cache' LANGUAGE C VOLATILE;

-- The cluster's keyspace catalog: every keyspace registered by any PostgreSQL server of the
-- cluster, with the server (pg_control_system().system_identifier) and database oid that
-- created it. rampctl keyspaces shows the same, with sizes.
CREATE FUNCTION ramp.cluster_keyspaces(
    OUT keyspace bigint, OUT state text, OUT kind "char", OUT database text, OUT schema text,
    OUT relation text, OUT system_identifier bigint, OUT database_oid oid,
    OUT created timestamptz, OUT buckets int)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_cluster_keyspaces' LANGUAGE C VOLATILE;

-- Foreign data wrapper over raw key-value keyspaces (extension/fdw/): CREATE SERVER ...
-- FOREIGN DATA WRAPPER ramp, foreign tables (key, value) OPTIONS (keyspace 'ID' or
-- 'SCHEMA.NAME'), IMPORT FOREIGN SCHEMA from the cluster's keyspace catalog.
CREATE FUNCTION ramp.ramp_fdw_handler() RETURNS fdw_handler
    AS 'MODULE_PATHNAME' LANGUAGE C STRICT;
CREATE FUNCTION ramp.ramp_fdw_validator(text[], oid) RETURNS void
    AS 'MODULE_PATHNAME' LANGUAGE C STRICT;
CREATE FOREIGN DATA WRAPPER ramp HANDLER ramp.ramp_fdw_handler VALIDATOR ramp.ramp_fdw_validator;
COMMENT ON FOREIGN DATA WRAPPER ramp IS 'raw key-value keyspaces of the ramp cluster, read-atomic';

-- DROP of ramp tables and indexes: the keyspaces are retired at commit.
CREATE FUNCTION ramp.on_sql_drop() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'ramp_on_sql_drop' LANGUAGE C;
CREATE EVENT TRIGGER ramp_sql_drop ON sql_drop EXECUTE FUNCTION ramp.on_sql_drop();

-- ---------------------------------------------------------------------------------------
-- Incrementally maintained materialized views (ramp.create_immv; extension/immv/NOTES.md).
-- A view NAME is a plain view over its log table __ramp_immv_NAME (a ramp table of signed
-- contributions per group or output row). Statement triggers on every base table append the
-- delta of each INSERT, UPDATE, DELETE, COPY and TRUNCATE to the log in the writer's
-- transaction: one RAMP PUT holds base rows and view delta.

-- The views (dumped with the database: pg_dump restores the rows, the log tables, views and
-- the triggers on the base tables). name and log_table are schema-qualified and quoted.
CREATE TABLE ramp.immvs (
    name        text PRIMARY KEY,
    query       text NOT NULL,
    base_tables text[] NOT NULL,
    log_table   text NOT NULL,
    owner       name NOT NULL DEFAULT current_user,
    created     timestamptz NOT NULL DEFAULT now(),
    populated   bool NOT NULL DEFAULT true
) USING heap;
-- The SQL that fills, refreshes and maintains each view (made by ramp._immv_compile from the
-- query; kind 'INSERT', 'DELETE', 'UPDATE', 'TRUNCATE' for base table number base).
CREATE TABLE ramp.immv_sql (
    immv text NOT NULL,
    kind text NOT NULL,
    base int NOT NULL,
    sql  text NOT NULL,
    PRIMARY KEY (immv, kind, base)
) USING heap;
-- Anyone may create views; rows name their owner, and the maintenance trigger runs a view's
-- SQL only as that owner and only if the owner owns the view's log table.
ALTER TABLE ramp.immvs ENABLE ROW LEVEL SECURITY;
ALTER TABLE ramp.immv_sql ENABLE ROW LEVEL SECURITY;
CREATE POLICY immvs_read ON ramp.immvs FOR SELECT USING (true);
CREATE POLICY immvs_own ON ramp.immvs FOR ALL USING (pg_has_role(owner, 'MEMBER'))
    WITH CHECK (owner = current_user);
CREATE POLICY immv_sql_read ON ramp.immv_sql FOR SELECT USING (true);
CREATE POLICY immv_sql_own ON ramp.immv_sql FOR ALL
    USING (EXISTS (SELECT 1 FROM ramp.immvs i WHERE i.name = immv AND pg_has_role(i.owner, 'MEMBER')))
    WITH CHECK (EXISTS (SELECT 1 FROM ramp.immvs i WHERE i.name = immv AND i.owner = current_user));
GRANT SELECT, INSERT, UPDATE, DELETE ON ramp.immvs, ramp.immv_sql TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('ramp.immvs', '');
SELECT pg_catalog.pg_extension_config_dump('ramp.immv_sql', '');

CREATE FUNCTION ramp._immv_compile(query text, log_table text,
    OUT kind text, OUT base int, OUT base_table text, OUT sql text)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'ramp_immv_compile' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION ramp._immv_maintain() RETURNS trigger
    AS 'MODULE_PATHNAME', 'ramp_immv_maintain' LANGUAGE C;

-- Creates (install) or drops the maintenance triggers of a view on its base tables.
CREATE FUNCTION ramp._immv_triggers(view_name text, install bool) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v ramp.immvs;
  t record;
  i int;
BEGIN
  -- Existing triggers of this view (found by function and first argument).
  FOR t IN SELECT tg.tgname, tg.tgrelid::regclass AS rel FROM pg_trigger tg
            WHERE tg.tgfoid = 'ramp._immv_maintain()'::regprocedure
              AND split_part(encode(tg.tgargs, 'escape'), '\000', 1) = view_name LOOP
    EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
  END LOOP;
  IF NOT install THEN RETURN; END IF;
  SELECT * INTO STRICT v FROM ramp.immvs WHERE name = view_name;
  FOR i IN 1 .. cardinality(v.base_tables) LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %s REFERENCING NEW TABLE AS __ramp_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION ramp._immv_maintain(%L, %s)',
                   '__ramp_immv_ins_' || md5(v.name), v.base_tables[i], v.name, i);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %s REFERENCING OLD TABLE AS __ramp_old '
                   'FOR EACH STATEMENT EXECUTE FUNCTION ramp._immv_maintain(%L, %s)',
                   '__ramp_immv_del_' || md5(v.name), v.base_tables[i], v.name, i);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %s REFERENCING OLD TABLE AS __ramp_old '
                   'NEW TABLE AS __ramp_new FOR EACH STATEMENT '
                   'EXECUTE FUNCTION ramp._immv_maintain(%L, %s)',
                   '__ramp_immv_upd_' || md5(v.name), v.base_tables[i], v.name, i);
    EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION ramp._immv_maintain(%L, %s)',
                   '__ramp_immv_trn_' || md5(v.name), v.base_tables[i], v.name, i);
  END LOOP;
END
$$;

-- Creates the materialized view NAME (optionally schema-qualified) of QUERY over ramp tables,
-- fills it and maintains it from then on. Returns the number of rows of the view.
-- Unsupported queries fail with SQLSTATE 0A000 naming the construct.
CREATE FUNCTION ramp.create_immv(name text, query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  parts text[] := pg_catalog.parse_ident(name);
  view_schema text;
  view_name text;
  log_name text;
  fill text;
  body text;
  attached bool;
  n bigint;
BEGIN
  IF pg_catalog.cardinality(parts) = 2 THEN
    view_schema := parts[1];
    parts := parts[2:2];
  ELSIF pg_catalog.cardinality(parts) = 1 THEN
    view_schema := pg_catalog.current_schema();
    IF view_schema IS NULL THEN
      RAISE EXCEPTION 'no schema has been selected to create the view in'
        USING ERRCODE = '3F000';
    END IF;
  ELSE
    RAISE EXCEPTION 'improper view name: %', name USING ERRCODE = '42602';
  END IF;
  view_name := pg_catalog.format('%I.%I', view_schema, parts[1]);
  log_name := pg_catalog.format('%I.%I', view_schema, '__ramp_immv_' || parts[1]);
  IF pg_catalog.to_regclass(view_name) IS NOT NULL THEN
    RAISE EXCEPTION 'relation % already exists', view_name USING ERRCODE = '42P07';
  END IF;
  INSERT INTO ramp.immvs (name, query, base_tables, log_table)
    SELECT view_name, query, COALESCE(pg_catalog.array_agg(c.base_table ORDER BY c.base)
                                        FILTER (WHERE c.kind = 'INSERT'), '{}'), log_name
      FROM ramp._immv_compile(query, log_name) c;
  INSERT INTO ramp.immv_sql (immv, kind, base, sql)
    SELECT view_name, c.kind, c.base, c.sql FROM ramp._immv_compile(query, log_name) c;
  SELECT s.sql INTO fill FROM ramp.immv_sql s WHERE s.immv = view_name AND s.kind = 'fill';
  SELECT s.sql INTO body FROM ramp.immv_sql s WHERE s.immv = view_name AND s.kind = 'view';
  -- A second PostgreSQL server of the cluster running the same create_immv attaches to the
  -- log the first one filled (as identical CREATE TABLEs attach): it must not add it twice.
  EXECUTE pg_catalog.format('CREATE TABLE %s USING ramp AS %s WITH NO DATA', log_name, fill);
  EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %s)', log_name) INTO attached;
  IF NOT attached THEN
    EXECUTE pg_catalog.format('INSERT INTO %s %s', log_name, fill);
  END IF;
  EXECUTE pg_catalog.format('CREATE VIEW %s AS %s', view_name, body);
  PERFORM ramp._immv_triggers(view_name, true);
  EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s', view_name) INTO n;
  RETURN n;
END
$$;

-- The catalog name of the materialized view NAME (as the user writes it), or an error.
CREATE FUNCTION ramp._immv_name(name text) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
  found text;
BEGIN
  SELECT i.name INTO found
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    JOIN ramp.immvs i ON i.name = pg_catalog.format('%I.%I', n.nspname, c.relname)
   WHERE c.oid = pg_catalog.to_regclass(_immv_name.name);
  IF found IS NULL THEN
    RAISE EXCEPTION '"%" is not a materialized view of ramp.create_immv', _immv_name.name
      USING ERRCODE = '42809';
  END IF;
  RETURN found;
END
$$;

-- Recomputes the view from its base tables (with_data), or empties it and stops maintaining
-- it until the next refresh with data (with_data = false).
CREATE FUNCTION ramp.refresh_immv(name text, with_data bool) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v ramp.immvs;
  n bigint;
BEGIN
  SELECT * INTO STRICT v FROM ramp.immvs WHERE immvs.name = ramp._immv_name(refresh_immv.name);
  IF NOT with_data THEN
    EXECUTE pg_catalog.format('DELETE FROM %s', v.log_table);
    PERFORM ramp._immv_triggers(v.name, false);
    UPDATE ramp.immvs SET populated = false WHERE immvs.name = v.name;
    RETURN 0;
  END IF;
  IF NOT v.populated THEN
    PERFORM ramp._immv_triggers(v.name, true);
    UPDATE ramp.immvs SET populated = true WHERE immvs.name = v.name;
  END IF;
  EXECUTE (SELECT s.sql FROM ramp.immv_sql s WHERE s.immv = v.name AND s.kind = 'refresh');
  EXECUTE pg_catalog.format('SELECT count(*) FROM %s', v.name) INTO n;
  RETURN n;
END
$$;

-- Rows where the maintained view and a recomputation of its query differ (none when the
-- view is correct): 'view' rows are in the view only, 'query' rows in the query only (with
-- duplicates counted). One statement, so one snapshot for the view and its base tables.
CREATE FUNCTION ramp.verify_immv(name text) RETURNS TABLE (side text, row_data jsonb)
    LANGUAGE plpgsql AS $$
DECLARE
  v text := ramp._immv_name(verify_immv.name);
  q text;
BEGIN
  SELECT s.sql INTO STRICT q FROM ramp.immv_sql s WHERE s.immv = v AND s.kind = 'query';
  RETURN QUERY EXECUTE pg_catalog.format(
    'SELECT ''view''::text, to_jsonb(x) FROM (SELECT * FROM %1$s EXCEPT ALL SELECT * FROM (%2$s) q) x '
    'UNION ALL '
    'SELECT ''query''::text, to_jsonb(y) FROM (SELECT * FROM (%2$s) q EXCEPT ALL SELECT * FROM %1$s) y',
    v, q);
END
$$;

-- Merges the view's log rows (one per group or output row). Runs concurrently with writers:
-- it conflicts (40001) only with another compaction or a min/max recomputation.
CREATE FUNCTION ramp.compact_immv(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE (SELECT s.sql FROM ramp.immv_sql s
            WHERE s.immv = ramp._immv_name(compact_immv.name) AND s.kind = 'compact');
END
$$;

-- DROP VIEW of a materialized view drops its log table, triggers and catalog rows; DROP of
-- a base table of a view is refused while the view exists. SECURITY DEFINER: the trigger
-- fires for every DROP in the database (ALTER TABLE ... DROP COLUMN included), also of roles
-- without USAGE on schema ramp, which could otherwise drop nothing at all. Running as the
-- extension's owner, it drops a log table only when the view's owner owns it (rows of
-- ramp.immvs are written by their owners).
CREATE FUNCTION ramp._immv_on_drop() RETURNS event_trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  dropped text[];
  v ramp.immvs;
BEGIN
  SELECT array_agg(object_identity) INTO dropped FROM pg_event_trigger_dropped_objects()
   WHERE object_type IN ('view', 'table') AND NOT is_temporary;
  IF dropped IS NULL THEN RETURN; END IF;
  FOR v IN SELECT * FROM ramp.immvs
            WHERE immvs.name = ANY (dropped) OR immvs.log_table = ANY (dropped) LOOP
    DELETE FROM ramp.immv_sql WHERE immv = v.name;
    DELETE FROM ramp.immvs WHERE immvs.name = v.name;
    PERFORM ramp._immv_triggers(v.name, false);
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = to_regclass(v.log_table)
                AND pg_has_role(v.owner, c.relowner, 'USAGE')) THEN
      EXECUTE format('DROP TABLE IF EXISTS %s', v.log_table);
    END IF;
  END LOOP;
  FOR v IN SELECT * FROM ramp.immvs WHERE base_tables && dropped LOOP
    RAISE EXCEPTION 'cannot drop a base table of materialized view %', v.name
      USING ERRCODE = '2BP01', HINT = 'Drop the view first.';
  END LOOP;
END
$$;
CREATE EVENT TRIGGER ramp_immv_sql_drop ON sql_drop EXECUTE FUNCTION ramp._immv_on_drop();
