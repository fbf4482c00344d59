-- Transactions on ramp tables: savepoints and ROLLBACK TO with rows and index entries,
-- errors inside transactions, write-write conflicts (SQLSTATE 40001), the isolation level
-- (read-atomic, latest committed versions: not snapshot isolation), and error cases.
CREATE EXTENSION pg_ramp;
CREATE EXTENSION dblink;
\i sql/include/twin.sql

CREATE TABLE acct (id int PRIMARY KEY, owner text NOT NULL, balance numeric CHECK (balance >= 0),
                   branch int) USING ramp;
CREATE INDEX acct_branch ON acct USING ramp_hash (branch);
CREATE TABLE acct_heap (id int PRIMARY KEY, owner text NOT NULL,
                        balance numeric CHECK (balance >= 0), branch int);
CREATE INDEX acct_heap_branch ON acct_heap USING hash (branch);
\set tbl acct
\i sql/include/xact_dml.sql
\set tbl acct_heap
\i sql/include/xact_dml.sql
SELECT twin_diff('SELECT * FROM %I', 'acct', 'acct_heap') AS differing_rows,
       (SELECT count(*) FROM acct) AS ramp_rows;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT twin_diff('SELECT * FROM %I WHERE branch = 3', 'acct', 'acct_heap') AS via_ramp_hash;
SELECT twin_diff('SELECT * FROM %I WHERE branch = 77', 'acct', 'acct_heap') AS rolled_back_key;
SELECT twin_diff('SELECT * FROM %I WHERE id BETWEEN 1 AND 50', 'acct', 'acct_heap') AS via_btree;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT id, owner, balance, branch FROM acct WHERE id > 1000 OR owner LIKE '%sp%' ORDER BY id;

-- Errors inside a transaction: the statement's writes are gone, ROLLBACK TO recovers.
BEGIN;
INSERT INTO acct VALUES (2000, 'will stay', 1, 1);
SAVEPOINT s;
INSERT INTO acct VALUES (2001, 'failed statement', 1, 1), (2000, 'duplicate', 1, 1);
ROLLBACK TO s;
UPDATE acct SET balance = balance - 1000 WHERE id = 2000;
ROLLBACK TO s;
INSERT INTO acct VALUES (2002, NULL, 1, 1);
ROLLBACK TO s;
SELECT id, owner FROM acct WHERE id >= 2000 ORDER BY id;
COMMIT;
SELECT id, owner FROM acct WHERE id >= 2000 ORDER BY id;
-- An error without a savepoint aborts the whole transaction: nothing of it commits.
BEGIN;
INSERT INTO acct VALUES (2100, 'never', 1, 1);
SELECT 1 / 0;
COMMIT;
SELECT count(*) FROM acct WHERE id = 2100;

-- Write-write conflicts: another session changes a row this transaction read and then
-- writes; the COMMIT fails with SQLSTATE 40001 and nothing of the transaction commits.
-- The other session takes no row locks (ramp.row_locks = off; with them it would wait for
-- this one, which waits for it): the commit's version check is what is tested here.
SELECT dblink_connect('other', format('dbname=%s port=%s host=%s options=''-c ramp.row_locks=off''', current_database(),
       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
-- UPDATE vs UPDATE.
BEGIN;
UPDATE acct SET balance = balance + 1 WHERE id = 10;
INSERT INTO acct VALUES (3000, 'part of the loser', 1, 1);
SELECT dblink_exec('other', 'UPDATE acct SET balance = balance + 100 WHERE id = 10');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT id, balance FROM acct WHERE id IN (10, 3000) ORDER BY id;
-- UPDATE vs DELETE, DELETE vs UPDATE.
BEGIN;
UPDATE acct SET balance = 0 WHERE id = 11;
SELECT dblink_exec('other', 'DELETE FROM acct WHERE id = 11');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM acct WHERE id = 11;
BEGIN;
DELETE FROM acct WHERE id = 12;
SELECT dblink_exec('other', 'UPDATE acct SET owner = ''moved'' WHERE id = 12');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT id, owner FROM acct WHERE id = 12;
-- A row read by SELECT ... FOR UPDATE and changed by another session before this
-- transaction writes it: the version read is what the commit checks.
BEGIN;
SELECT balance FROM acct WHERE id = 13 FOR UPDATE;
SELECT dblink_exec('other', 'UPDATE acct SET balance = 999 WHERE id = 13');
UPDATE acct SET balance = balance + 1 WHERE id = 13;
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT balance FROM acct WHERE id = 13;
-- Disjoint rows never conflict; neither do readers.
BEGIN;
UPDATE acct SET balance = balance + 1 WHERE id = 14;
SELECT dblink_exec('other', 'UPDATE acct SET balance = balance + 1 WHERE id = 15');
SELECT dblink_exec('other', 'INSERT INTO acct VALUES (3001, ''other'', 1, 1)');
COMMIT;
SELECT id, balance FROM acct WHERE id IN (14, 15, 3001) ORDER BY id;
-- The failed transaction can simply be retried.
BEGIN;
UPDATE acct SET balance = balance + 1 WHERE id = 10;
COMMIT;
SELECT id, balance FROM acct WHERE id = 10;

-- Isolation: every statement reads the latest committed versions, read-atomically; a
-- REPEATABLE READ transaction sees rows other sessions commit meanwhile (ramp tables do
-- not take part in PostgreSQL's snapshots), while heap tables keep their snapshot.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS ramp_before FROM acct WHERE branch = 9;
SELECT count(*) AS heap_before FROM acct_heap WHERE branch = 9;
SELECT dblink_exec('other', 'INSERT INTO acct VALUES (3002, ''concurrent'', 1, 9)');
SELECT dblink_exec('other', 'INSERT INTO acct_heap VALUES (3002, ''concurrent'', 1, 9)');
SELECT count(*) AS ramp_after FROM acct WHERE branch = 9;
SELECT count(*) AS heap_after FROM acct_heap WHERE branch = 9;
COMMIT;
SELECT dblink_disconnect('other');

-- Ramp writes and heap writes of one transaction: both commit or both roll back when the
-- transaction ends normally.
BEGIN;
INSERT INTO acct VALUES (4000, 'mixed', 1, 1);
INSERT INTO acct_heap VALUES (4000, 'mixed', 1, 1);
ROLLBACK;
SELECT (SELECT count(*) FROM acct WHERE id = 4000) AS ramp, (SELECT count(*) FROM acct_heap WHERE id = 4000) AS heap;
BEGIN;
INSERT INTO acct VALUES (4000, 'mixed', 1, 1);
INSERT INTO acct_heap VALUES (4000, 'mixed', 1, 1);
COMMIT;
SELECT (SELECT count(*) FROM acct WHERE id = 4000) AS ramp, (SELECT count(*) FROM acct_heap WHERE id = 4000) AS heap;

-- Error cases.
-- A row over the client's value limit (32 MiB) is refused at the INSERT.
INSERT INTO acct VALUES (5000, repeat('x', 33 * 1024 * 1024), 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- Two-phase commit after ramp writes.
BEGIN;
INSERT INTO acct VALUES (5001, 'prepared', 1, 1);
PREPARE TRANSACTION 'ramp_2pc';
\echo :LAST_ERROR_SQLSTATE
-- System columns: xmin of a committed row is a normal xid that is not this transaction's,
-- xmax 0, cmin 0 (data_fk tests them in detail).
SELECT xmin::text::bigint >= 3 AS normal_xmin, xmin = pg_current_xact_id()::xid AS own,
       xmax, cmin, cmax FROM acct WHERE id = 1;
SELECT tableoid::regclass, ctid IS NOT NULL AS has_ctid FROM acct WHERE id = 1;
-- Temporary and unlogged ramp tables.
CREATE TEMP TABLE tmp_ramp (a int) USING ramp;
CREATE TEMP TABLE tmp_ramp_as USING ramp AS SELECT 1 AS a;
-- With ramp as the default access method, temporary tables are local heap tables (they
-- belong to one backend): no keyspace, TOAST, indexes, updates and ON COMMIT work as heap's.
SET default_table_access_method = ramp;
CREATE TEMP TABLE tmp_default (a int PRIMARY KEY, b text);
INSERT INTO tmp_default SELECT g, repeat('t', 3000 * (g % 3)) FROM generate_series(1, 200) g;
UPDATE tmp_default SET b = 'short' WHERE a % 10 = 0;
DELETE FROM tmp_default WHERE a > 150;
SELECT count(*), sum(length(b)), max(a) FROM tmp_default;
SELECT b FROM tmp_default WHERE a = 20;
SELECT count(*) AS keyspaces_of_temp_tables FROM ramp.keyspaces k
  JOIN pg_class c ON c.oid = k.relid WHERE c.relpersistence = 't';
SELECT ramp.keyspace_of('tmp_default');
CREATE TEMP TABLE tmp_as AS SELECT a, b FROM tmp_default WHERE a <= 5;
SELECT count(*) FROM tmp_as;
BEGIN;
CREATE TEMP TABLE tmp_drop (a int) ON COMMIT DROP;
INSERT INTO tmp_drop VALUES (1);
COMMIT;
SELECT to_regclass('tmp_drop') IS NULL AS dropped_at_commit;
VACUUM FULL tmp_default;
SELECT count(*) FROM tmp_default;
-- REFRESH MATERIALIZED VIEW CONCURRENTLY makes a temporary table of the view's access method.
CREATE TABLE mv_base (k int, v int);
INSERT INTO mv_base SELECT g % 5, g FROM generate_series(1, 50) g;
CREATE MATERIALIZED VIEW mv_sums AS SELECT k, sum(v) AS s FROM mv_base GROUP BY k;
CREATE UNIQUE INDEX ON mv_sums (k);
INSERT INTO mv_base VALUES (7, 70), (1, 1000);
DELETE FROM mv_base WHERE k = 2;
REFRESH MATERIALIZED VIEW CONCURRENTLY mv_sums;
SELECT * FROM mv_sums ORDER BY k;
SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = 'mv_sums';
DROP MATERIALIZED VIEW mv_sums;
DROP TABLE mv_base, tmp_default, tmp_as;
RESET default_table_access_method;
CREATE UNLOGGED TABLE unlogged_ramp (a int) USING ramp;
INSERT INTO unlogged_ramp VALUES (1);
SELECT * FROM unlogged_ramp;
DROP TABLE unlogged_ramp;
-- A ramp_hash index on a heap table, and what ramp_hash cannot do.
CREATE INDEX ON acct_heap USING ramp_hash (branch);
CREATE UNIQUE INDEX ON acct USING ramp_hash (id);
CREATE INDEX ON acct USING ramp_hash (branch, id);
CREATE INDEX CONCURRENTLY acct_branch_cc ON acct USING ramp_hash (branch);
DROP INDEX acct_branch_cc;
-- Constraints are PostgreSQL's: checked before anything reaches the cluster.
INSERT INTO acct VALUES (5002, 'negative', -1, 1);
INSERT INTO acct VALUES (1, 'duplicate key', 1, 1);
UPDATE acct SET owner = NULL WHERE id = 1;

-- A commit keeps the backend's cached table sizes (adding its own new rows): the next plan
-- does not ask every server for its partitions and migrations again (that was two requests
-- per server in every pgbench transaction). Two one-row UPDATE transactions sent 14 requests
-- here (reads, intent, PREPARE, COMMIT, release); more than 20 when every commit dropped it.
CREATE TABLE ops_t (id int PRIMARY KEY, v int) USING ramp;
INSERT INTO ops_t VALUES (1, 0);
CREATE FUNCTION server_ops() RETURNS bigint LANGUAGE sql AS
  $$ SELECT sum(ops)::bigint FROM ramp.cluster_status() $$;
UPDATE ops_t SET v = v + 1 WHERE id = 1;
SELECT server_ops() AS u0 \gset
BEGIN; UPDATE ops_t SET v = v + 1 WHERE id = 1; COMMIT;
BEGIN; UPDATE ops_t SET v = v + 1 WHERE id = 1; COMMIT;
SELECT server_ops() AS u1 \gset
SELECT :u1 - :u0 - 3 <= 20 AS few_requests_per_commit, v FROM ops_t;
DROP TABLE ops_t;
DROP FUNCTION server_ops();

DROP TABLE acct, acct_heap;
DROP FUNCTION twin_diff(text, text, text);
DROP EXTENSION dblink;
DROP EXTENSION pg_ramp;
