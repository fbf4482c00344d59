-- The ramp foreign data wrapper over raw key-value keyspaces (extension/fdw/, DESIGN §8):
-- options and their errors, writes as RAMP PUTs at commit, key pushdown (=, IN, = ANY, several
-- quals intersected, parameters) to one multi-key read, scans at one snapshot, own writes,
-- savepoints, values that do not decode. Keyspaces written by other clients and IMPORT
-- FOREIGN SCHEMA: regress/itest/fdw.sh.
CREATE EXTENSION pg_ramp;
SELECT fdwname, fdwhandler::regproc, fdwvalidator::regproc FROM pg_foreign_data_wrapper;

-- Options.
CREATE SERVER bad_opt FOREIGN DATA WRAPPER ramp OPTIONS (host 'x');
CREATE SERVER other FOREIGN DATA WRAPPER ramp OPTIONS (nodes 'tcp://127.0.0.1:1');
CREATE SERVER kv FOREIGN DATA WRAPPER ramp;
CREATE FOREIGN TABLE no_ks (key text, value text) SERVER kv;
CREATE FOREIGN TABLE bad_buckets (key text, value text) SERVER kv OPTIONS (keyspace '900001', buckets '0');
CREATE FOREIGN TABLE bad_role (key text OPTIONS (role 'primary'), value text) SERVER kv OPTIONS (keyspace '900001');
CREATE FOREIGN TABLE three (key text, value text, extra int) SERVER kv OPTIONS (keyspace '900001');
SELECT * FROM three;
DROP FOREIGN TABLE three;
CREATE FOREIGN TABLE reserved (key text, value text) SERVER kv OPTIONS (keyspace '3239');
SELECT * FROM reserved;
DROP FOREIGN TABLE reserved;
CREATE FOREIGN TABLE unknown_name (key text, value text) SERVER kv OPTIONS (keyspace 'nowhere.nothing');
SELECT * FROM unknown_name;
DROP FOREIGN TABLE unknown_name;
-- A server naming another cluster than the session's is refused, not read.
CREATE FOREIGN TABLE elsewhere (key text, value text) SERVER other OPTIONS (keyspace '900001');
SELECT * FROM elsewhere;
DROP FOREIGN TABLE elsewhere;

-- A keyspace of 8 partitions.
CREATE FOREIGN TABLE kv1 (key text, value text) SERVER kv OPTIONS (keyspace '900001', buckets '8');
SELECT count(*) FROM kv1;
INSERT INTO kv1 SELECT 'k' || i, 'v' || i FROM generate_series(1, 50) i;
SELECT count(*), count(DISTINCT key), min(value), max(value) FROM kv1;

-- Pushdown: equality, IN, = ANY, parameters; several key quals are intersected.
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv1 WHERE key = 'k7';
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv1 WHERE key IN ('k1', 'k2', 'k3');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv1 WHERE key = ANY (ARRAY['k1', 'k2']) AND key IN ('k2', 'k3');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv1 WHERE value = 'v7';
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv1 WHERE key LIKE 'k1%';
SELECT * FROM kv1 WHERE key = 'k7';
SELECT * FROM kv1 WHERE key IN ('k1', 'k2', 'k3', 'nope') ORDER BY key;
SELECT * FROM kv1 WHERE key = ANY (ARRAY['k1', 'k2']) AND key IN ('k2', 'k3');
SELECT * FROM kv1 WHERE key = 'k7' AND value = 'v8';
SELECT * FROM kv1 WHERE key IN (NULL, 'k9');
SELECT count(*) FROM kv1 WHERE key LIKE 'k1%';
PREPARE get(text) AS SELECT value FROM kv1 WHERE key = $1;
EXECUTE get('k42');
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE get('k42');
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE get('k42');
EXECUTE get('k43');
RESET plan_cache_mode;
DEALLOCATE get;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT * FROM kv1 WHERE key IN ('k1', 'k2', 'nope');
-- A join: the inner side's keys come from the outer rows (one read per outer row).
CREATE TABLE wanted (k text);
INSERT INTO wanted VALUES ('k5'), ('k6'), ('absent');
ANALYZE wanted;
EXPLAIN (VERBOSE, COSTS OFF) SELECT w.k, kv1.value FROM wanted w LEFT JOIN kv1 ON kv1.key = w.k;
SELECT w.k, kv1.value FROM wanted w LEFT JOIN kv1 ON kv1.key = w.k ORDER BY w.k;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT w.k, kv1.value FROM wanted w LEFT JOIN kv1 ON kv1.key = w.k;

-- Own writes: visible to the transaction's later statements only; UPDATE of the key.
BEGIN;
UPDATE kv1 SET value = 'changed' WHERE key = 'k1';
DELETE FROM kv1 WHERE key = 'k2';
INSERT INTO kv1 VALUES ('new1', 'n1');
UPDATE kv1 SET key = 'k3moved' WHERE key = 'k3';
SELECT * FROM kv1 WHERE key IN ('k1', 'k2', 'k3', 'k3moved', 'new1') ORDER BY key;
SELECT count(*) FROM kv1;
-- An UPDATE of every row does not meet the rows it writes (50 - 1 deleted + 1 new).
UPDATE kv1 SET key = key || 'x';
SELECT count(*), count(*) FILTER (WHERE key LIKE '%x') FROM kv1;
ROLLBACK;
SELECT count(*), min(value), max(value) FROM kv1;
BEGIN;
UPDATE kv1 SET value = 'changed' WHERE key = 'k1';
DELETE FROM kv1 WHERE key = 'k2';
INSERT INTO kv1 VALUES ('new1', 'n1');
COMMIT;
SELECT * FROM kv1 WHERE key IN ('k1', 'k2', 'new1') ORDER BY key;
SELECT count(*) FROM kv1;
-- INSERT of an existing key is a PUT: it overwrites.
INSERT INTO kv1 VALUES ('k4', 'overwritten');
SELECT * FROM kv1 WHERE key = 'k4';
DELETE FROM kv1 WHERE key = 'k5' RETURNING key;

-- Savepoints: a rolled-back subtransaction's writes are undone, the rest commit.
BEGIN;
INSERT INTO kv1 VALUES ('sp1', 'kept');
SAVEPOINT s;
INSERT INTO kv1 VALUES ('sp2', 'undone');
UPDATE kv1 SET value = 'undone' WHERE key = 'sp1';
DELETE FROM kv1 WHERE key = 'k6';
ROLLBACK TO s;
SELECT * FROM kv1 WHERE key IN ('sp1', 'sp2', 'k6') ORDER BY key;
COMMIT;
SELECT * FROM kv1 WHERE key IN ('sp1', 'sp2', 'k6') ORDER BY key;

-- One transaction writing a ramp table and a foreign table commits both in one RAMP PUT
-- (and aborts both).
CREATE TABLE orders (id int, item text) USING ramp;
BEGIN;
INSERT INTO orders VALUES (1, 'a');
INSERT INTO kv1 VALUES ('order:1', 'a');
ROLLBACK;
SELECT (SELECT count(*) FROM orders) AS orders, (SELECT count(*) FROM kv1 WHERE key = 'order:1') AS kv;
BEGIN;
INSERT INTO orders VALUES (1, 'a');
INSERT INTO kv1 VALUES ('order:1', 'a');
COMMIT;
SELECT (SELECT count(*) FROM orders) AS orders, (SELECT count(*) FROM kv1 WHERE key = 'order:1') AS kv;
-- A key changed by another transaction since this one read it: the COMMIT fails with 40001
-- and nothing of the transaction commits (the version read is the expected one).
CREATE EXTENSION dblink;
SELECT dblink_connect('other', format('dbname=%s port=%s host=%s', current_database(),
       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
BEGIN;
UPDATE kv1 SET value = 'mine' WHERE key = 'k10';
INSERT INTO orders VALUES (2, 'part of the loser');
SELECT dblink_exec('other', 'UPDATE kv1 SET value = ''theirs'' WHERE key = ''k10''');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM kv1 WHERE key = 'k10';
SELECT count(*) FROM orders WHERE id = 2;
BEGIN;
DELETE FROM kv1 WHERE key = 'k11';
SELECT dblink_exec('other', 'DELETE FROM kv1 WHERE key = ''k11''');
SELECT dblink_exec('other', 'INSERT INTO kv1 VALUES (''k11'', ''again'')');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM kv1 WHERE key = 'k11';
SELECT dblink_disconnect('other');
DROP EXTENSION dblink;
-- PREPARE TRANSACTION is refused as for ramp tables.
BEGIN;
INSERT INTO kv1 VALUES ('prepared', 'x');
PREPARE TRANSACTION 'fdw';
SELECT count(*) FROM kv1 WHERE key = 'prepared';

-- COPY FROM writes through the same buffer.
COPY kv1 FROM stdin;
copy1	c1
copy2	c2
\.
SELECT * FROM kv1 WHERE key LIKE 'copy%' ORDER BY key;

-- ON CONFLICT would mean the opposite of a PUT.
INSERT INTO kv1 VALUES ('k7', 'x') ON CONFLICT DO NOTHING;
SELECT * FROM kv1 WHERE key = 'k7';

-- NULLs cannot be stored.
INSERT INTO kv1 VALUES (NULL, 'x');
INSERT INTO kv1 VALUES ('x', NULL);

-- Typed views of one keyspace: integers, jsonb, bytea; a value that does not decode.
CREATE FOREIGN TABLE kv_int (key int, value int) SERVER kv OPTIONS (keyspace '900002');
CREATE FOREIGN TABLE kv_raw (key bytea, value bytea) SERVER kv OPTIONS (keyspace '900002');
CREATE FOREIGN TABLE kv_json (id text OPTIONS (role 'key'), doc jsonb OPTIONS (role 'value'))
  SERVER kv OPTIONS (keyspace '900002');
INSERT INTO kv_int SELECT i, i * 10 FROM generate_series(1, 5) i;
SELECT * FROM kv_int WHERE key = 3;
SELECT * FROM kv_int WHERE key IN (2, 4::bigint) ORDER BY key;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kv_int WHERE key = 3;
SELECT sum(value) FROM kv_int;
SELECT key, value FROM kv_raw WHERE key = '\x33';
SELECT * FROM kv_json WHERE id = '1';
-- Non-pushable key types are still correct (filtered here).
CREATE FOREIGN TABLE kv_num (key numeric, value text) SERVER kv OPTIONS (keyspace '900002');
EXPLAIN (COSTS OFF) SELECT * FROM kv_num WHERE key = 3;
SELECT * FROM kv_num WHERE key = 3;
INSERT INTO kv_raw VALUES ('6', 'sixty');
SELECT * FROM kv_int WHERE key = 6;
SELECT sum(value) FROM kv_int;
SELECT * FROM kv_json WHERE id = '6';
INSERT INTO kv_raw VALUES ('7', '\xff00');
SELECT * FROM kv_int WHERE key = 7;
-- bytea sees every value as it is.
SELECT key, value FROM kv_raw ORDER BY key;

-- IMPORT FOREIGN SCHEMA (the keyspaces rampctl kv-register names; none here).
CREATE SCHEMA imported;
IMPORT FOREIGN SCHEMA ycsb FROM SERVER kv INTO imported;
IMPORT FOREIGN SCHEMA ycsb FROM SERVER kv INTO imported OPTIONS (colour 'red');
IMPORT FOREIGN SCHEMA ycsb FROM SERVER kv INTO imported OPTIONS (value_type 'no_such_type');
SELECT count(*) FROM pg_foreign_table;

DROP TABLE wanted, orders;
DROP SCHEMA imported;
DROP EXTENSION pg_ramp CASCADE;
