-- pg_ramp without a ramp cluster: packaging, settings, catalog, DDL, and the errors a user
-- sees when the cluster cannot be reached (the backend must stay usable afterwards).
CREATE EXTENSION pg_ramp;
SELECT extname, extversion, extnamespace::regnamespace, extrelocatable
  FROM pg_extension WHERE extname = 'pg_ramp';
SELECT amname, amtype, amhandler FROM pg_am WHERE amname IN ('ramp', 'ramp_hash') ORDER BY 1;

-- Settings: defaults, valid values, and clear errors for invalid ones.
SELECT name, setting, context FROM pg_settings WHERE name LIKE 'ramp.%' ORDER BY 1;
SET ramp.read_path = 'rpc';
SHOW ramp.read_path;
SET ramp.read_path = 'get+';
SHOW ramp.read_path;
SET ramp.read_path = 'fast';
SET ramp.transport = 'carrier-pigeon';
SET ramp.timeout_ms = 0;
SET ramp.nodes = 'tcp://localhost';
SET ramp.nodes = 'tcp://127.0.0.1:7400,udp://127.0.0.1:7401';
SET ramp.nodes = 'tcp://127.0.0.1:7400, tcp://[::1]:7401';
SHOW ramp.nodes;
RESET ramp.nodes;
RESET ramp.read_path;
SET ramp.no_such_setting = 1;
CREATE ROLE ramp_regress_user;
SET ROLE ramp_regress_user;
SET ramp.token_file = '/tmp/token';
RESET ROLE;

-- Operator classes of ramp_hash pass amvalidate.
SELECT opc.opcname, opf.opfname, opc.opcintype::regtype, amvalidate(opc.oid)
  FROM pg_opclass opc JOIN pg_opfamily opf ON opf.oid = opc.opcfamily
 WHERE opc.opcmethod = (SELECT oid FROM pg_am WHERE amname = 'ramp_hash')
 ORDER BY 1;

-- A ramp table: creating it needs no cluster; its keyspace is recorded in ramp.keyspaces.
CREATE TABLE orders (o_id bigint, o_cust int, o_total numeric, o_note text) USING ramp;
SELECT c.relname, k.kind, k.buckets, k.generation, k.keyspace = ramp.keyspace_of('orders') AS same
  FROM ramp.keyspaces k JOIN pg_class c ON c.oid = k.relid ORDER BY 1;
SELECT ramp.keyspace_of('pg_class') AS not_a_ramp_relation;
CREATE TEMP TABLE orders_tmp (a int) USING ramp;

-- Unreachable cluster: writes and reads fail with a clear error and hint.
SET ramp.nodes = 'tcp://127.0.0.1:1';
SET ramp.connect_timeout_ms = 2000;
\set VERBOSITY terse
INSERT INTO orders VALUES (1, 10, 9.99, 'first');
SELECT count(*) FROM orders;
\set VERBOSITY default
DO $$
DECLARE
  hint text;
BEGIN
  INSERT INTO orders VALUES (1, 10, 9.99, 'first');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
  RAISE NOTICE 'SQLSTATE %: %', SQLSTATE, SQLERRM;
  RAISE NOTICE 'HINT: %', hint;
END
$$;
-- ... and the session is still usable, also inside a transaction with a savepoint.
SELECT 1 AS still_usable;
BEGIN;
SAVEPOINT before_insert;
\set VERBOSITY terse
INSERT INTO orders VALUES (2, 20, 5, 'second');
\set VERBOSITY default
ROLLBACK TO SAVEPOINT before_insert;
SELECT 2 AS usable_after_rollback_to;
COMMIT;
-- A server that accepts connections and never answers: the client library waits, its wait
-- hook sees the pending cancel, and PostgreSQL reports its own error (statement_timeout
-- here; pg_cancel_backend takes the same path). The session stays usable.
SELECT set_config('ramp.nodes',
                  'tcp://127.0.0.1:' || current_setting('ramp_regress.silent_port'), false)
         IS NOT NULL AS silent_server,
       set_config('ramp.token_file', current_setting('ramp_regress.token_file'), false)
         IS NOT NULL AS token_file;
SET ramp.connect_timeout_ms = 60000;
SET ramp.timeout_ms = 60000;
SET statement_timeout = '300ms';
INSERT INTO orders VALUES (4, 40, 4, 'fourth');
RESET statement_timeout;
SELECT 3 AS usable_after_cancel;
RESET ramp.timeout_ms;
RESET ramp.token_file;
SET ramp.nodes = 'tcp://127.0.0.1:1';
SET ramp.connect_timeout_ms = 2000;
-- The status function lists the seeds it could not reach instead of failing.
SELECT node, endpoints, reachable, error IS NOT NULL AS has_error FROM ramp.cluster_status();
-- Planning does not need the cluster (estimates fall back to pg_class).
EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE o_cust = 10;

-- No cluster configured at all.
RESET ramp.nodes;
INSERT INTO orders VALUES (3, 30, 1, 'third');

-- ramp_hash: what it does not support is refused with clear messages.
CREATE INDEX ON orders USING ramp_hash (o_cust, o_id);
CREATE UNIQUE INDEX ON orders USING ramp_hash (o_id);
CREATE INDEX ON orders USING ramp_hash (o_cust) INCLUDE (o_id);
CREATE INDEX ON orders USING ramp_hash ((o_cust + 1));
CREATE INDEX ON orders USING ramp_hash (o_cust) WHERE o_total > 0;
CREATE INDEX ON orders USING ramp_hash (o_note text_pattern_ops);
CREATE TABLE local_heap (a int);
CREATE INDEX ON local_heap USING ramp_hash (a);
DROP TABLE local_heap;

-- A table created in the same transaction has nothing on the cluster yet: it can be
-- indexed, planned and scanned without one (scans then read only the transaction's writes).
BEGIN;
CREATE TABLE fresh (k int, v text, d date, u uuid) USING ramp;
CREATE INDEX fresh_k ON fresh USING ramp_hash (k);
CREATE INDEX fresh_v ON fresh USING ramp_hash (v);
CREATE INDEX fresh_btree ON fresh (d);
SELECT * FROM fresh;
SET LOCAL enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM fresh WHERE k = 1;
EXPLAIN (COSTS OFF) SELECT * FROM fresh WHERE k = 1::bigint;
EXPLAIN (COSTS OFF) SELECT * FROM fresh WHERE v = 'x'::varchar;
EXPLAIN (COSTS OFF) SELECT * FROM fresh WHERE k > 1;
SELECT * FROM fresh WHERE k = 1;
SELECT * FROM fresh WHERE d = '2024-01-01';
SET LOCAL enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM fresh WHERE k = 1;
SELECT * FROM fresh WHERE k = 1;
COMMIT;
-- A small table never analyzed is planned as heap plans one (10 pages of rows): a TID
-- condition reads the row by its TID, not the whole table.
EXPLAIN (COSTS OFF) SELECT * FROM fresh WHERE ctid = '(0,1)';
SELECT c.relname, k.kind, k.generation
  FROM ramp.keyspaces k JOIN pg_class c ON c.oid = k.relid
 WHERE k.kind <> 'd' ORDER BY 1;

-- TRUNCATE gives the table a new keyspace generation; the old keyspace is retired.
SELECT generation FROM ramp.keyspaces WHERE keyspace = ramp.keyspace_of('orders');
TRUNCATE orders;
SELECT generation FROM ramp.keyspaces WHERE keyspace = ramp.keyspace_of('orders');
SELECT count(*) AS retired FROM ramp.keyspaces WHERE kind = 'd';
-- ... and a rolled-back TRUNCATE keeps the old one.
BEGIN;
TRUNCATE orders;
ROLLBACK;
SELECT generation FROM ramp.keyspaces WHERE keyspace = ramp.keyspace_of('orders');

-- An ERROR raised by PostgreSQL inside the extension's C++ code (here: reading the catalog
-- from a new session after ramp.keyspaces was renamed) reaches the client unchanged.
ALTER TABLE ramp.keyspaces RENAME TO keyspaces_renamed;
\c
SELECT count(*) FROM orders;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ramp.keyspaces_renamed RENAME TO keyspaces;
SELECT count(*) FROM ramp.keyspaces WHERE keyspace = ramp.keyspace_of('orders');

-- VACUUM without local indexes has nothing to do locally (no cluster needed).
VACUUM orders;

-- DROP retires the keyspaces of the table and its indexes.
DROP TABLE fresh;
SELECT kind, count(*) FROM ramp.keyspaces GROUP BY kind ORDER BY kind;
DROP TABLE orders;
SELECT kind, count(*) FROM ramp.keyspaces GROUP BY kind ORDER BY kind;
-- Removing them from the cluster needs the cluster.
SET ramp.nodes = 'tcp://127.0.0.1:1';
\set VERBOSITY terse
SELECT ramp.collect_garbage();
\set VERBOSITY default
RESET ramp.nodes;

-- Any role can still drop what it owns in a database with pg_ramp, without USAGE on schema
-- ramp: the views' sql_drop trigger fires for every DROP (a column too).
GRANT CREATE ON SCHEMA public TO ramp_regress_user;
SET ROLE ramp_regress_user;
CREATE TABLE public.user_heap (a int, b int) USING heap;
ALTER TABLE public.user_heap DROP COLUMN b;
DROP TABLE public.user_heap;
CREATE TABLE public.user_ramp (a int, b int) USING ramp;
ALTER TABLE public.user_ramp DROP COLUMN b;
DROP TABLE public.user_ramp;
-- ... and cannot make that trigger drop a table of someone else: a catalog row naming
-- another owner's table as its log table leaves that table alone.
CREATE TABLE public.user_view_base (a int) USING heap;
RESET ROLE;
GRANT USAGE ON SCHEMA ramp TO ramp_regress_user;
SET ROLE ramp_regress_user;
INSERT INTO ramp.immvs (name, query, base_tables, log_table)
  VALUES ('public.user_view_base', 'SELECT 1', '{}', 'public.superuser_table');
RESET ROLE;
REVOKE USAGE ON SCHEMA ramp FROM ramp_regress_user;
CREATE TABLE public.superuser_table (a int) USING heap;
SET ROLE ramp_regress_user;
DROP TABLE public.user_view_base;
RESET ROLE;
SELECT to_regclass('public.superuser_table') IS NOT NULL AS superuser_table_kept,
       (SELECT count(*) FROM ramp.immvs) AS catalog_rows;
DROP TABLE public.superuser_table;
REVOKE CREATE ON SCHEMA public FROM ramp_regress_user;

DROP ROLE ramp_regress_user;
DROP EXTENSION pg_ramp;

-- A server whose default_table_access_method is ramp (set here while the extension exists,
-- then kept after DROP EXTENSION) can create the extension: its own catalogs are heap.
CREATE EXTENSION pg_ramp;
SET default_table_access_method = ramp;
DROP EXTENSION pg_ramp;
CREATE EXTENSION pg_ramp;
SELECT c.relname, a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam
  WHERE c.relnamespace = 'ramp'::regnamespace AND c.relkind = 'r' ORDER BY 1;
RESET default_table_access_method;
DROP EXTENSION pg_ramp;
