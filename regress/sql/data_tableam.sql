-- The ramp table AM's data path, against a real rampd cluster (run_regress.sh starts one).
CREATE EXTENSION pg_ramp;
CREATE EXTENSION dblink;

CREATE TABLE items (id int, name text, price numeric, tags text[], day date, flag bool,
                    blob bytea) USING ramp;
INSERT INTO items VALUES
  (1, 'apple', 1.25, '{fruit,red}', '2024-01-01', true, '\x00ff'),
  (2, 'bread', 3.10, '{bakery}', '2024-01-02', false, NULL),
  (3, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM items ORDER BY id;
-- TIDs encode row ids with offsets 1..256.
SELECT count(*) FILTER (WHERE (ctid::text::point)[1] BETWEEN 1 AND 256) AS valid_tids
  FROM items;

-- UPDATE makes a new row id (the old TID stays dead); DELETE; RETURNING.
UPDATE items SET price = price * 2 WHERE id = 1 RETURNING id, price;
DELETE FROM items WHERE id = 3 RETURNING id;
SELECT id, price FROM items ORDER BY id;

-- Command-id visibility: a statement does not see its own writes.
UPDATE items SET id = id + 10;
SELECT id FROM items ORDER BY id;
INSERT INTO items (id, name) SELECT id + 100, name FROM items;
SELECT count(*) FROM items;
WITH moved AS (DELETE FROM items WHERE id > 100 RETURNING *)
INSERT INTO items (id, name) SELECT id + 100, name FROM moved;
SELECT id, name FROM items ORDER BY id;

-- Inside a transaction: own writes visible to later statements, discarded by ROLLBACK.
BEGIN;
INSERT INTO items (id, name) VALUES (50, 'pending');
SELECT id, name FROM items WHERE id = 50;
UPDATE items SET name = 'pending, updated' WHERE id = 50;
SELECT id, name FROM items WHERE id = 50;
DELETE FROM items WHERE id = 11;
SELECT count(*) FROM items;
ROLLBACK;
SELECT id, name FROM items ORDER BY id;

-- Savepoints: ROLLBACK TO undoes exactly the subtransaction's writes.
BEGIN;
INSERT INTO items (id, name) VALUES (60, 'kept');
SAVEPOINT s1;
INSERT INTO items (id, name) VALUES (61, 'undone');
UPDATE items SET name = 'undone too' WHERE id = 60;
DELETE FROM items WHERE id = 11;
SAVEPOINT s2;
INSERT INTO items (id, name) VALUES (62, 'undone as well');
RELEASE SAVEPOINT s2;
SELECT id, name FROM items ORDER BY id;
ROLLBACK TO SAVEPOINT s1;
SELECT id, name FROM items ORDER BY id;
COMMIT;
SELECT id, name FROM items ORDER BY id;

-- PL/pgSQL exception blocks are subtransactions too.
DO $$
BEGIN
  INSERT INTO items (id, name) VALUES (70, 'in block');
  RAISE EXCEPTION 'roll back the block';
EXCEPTION WHEN raise_exception THEN
  INSERT INTO items (id, name) VALUES (71, 'after block');
END
$$;
SELECT id, name FROM items WHERE id >= 70 ORDER BY id;

-- COPY (multi-insert).
COPY items (id, name, price) FROM stdin;
200	copied one	1
201	copied two	2
202	copied three	3
\.
SELECT id, name, price FROM items WHERE id >= 200 ORDER BY id;

-- Values that were TOASTed (external or compressed) elsewhere are stored in full.
CREATE TABLE heap_src (id int, payload text);
ALTER TABLE heap_src ALTER COLUMN payload SET STORAGE EXTERNAL;
INSERT INTO heap_src VALUES (1, repeat('abcdefgh', 5000));
CREATE TABLE heap_src2 (id int, payload text);
INSERT INTO heap_src2 VALUES (2, repeat('z', 50000));
CREATE TABLE docs (id int, payload text) USING ramp;
INSERT INTO docs SELECT * FROM heap_src UNION ALL SELECT * FROM heap_src2;
SELECT id, length(payload), md5(payload) = md5((SELECT payload FROM heap_src UNION ALL
       SELECT payload FROM heap_src2 ORDER BY 1 LIMIT 1 OFFSET (d.id - 1))) AS same
  FROM docs d ORDER BY id;
SELECT id, pg_column_size(payload) > length(payload) AS stored_uncompressed FROM docs ORDER BY id;

-- Local indexes (btree) on ramp tables: unique constraints, ON CONFLICT, foreign keys.
CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric) USING ramp;
INSERT INTO accounts SELECT g, 'owner' || g, 100 FROM generate_series(1, 300) g;
INSERT INTO accounts VALUES (1, 'dup', 0);
INSERT INTO accounts VALUES (1, 'dup', 0) ON CONFLICT (id) DO UPDATE SET owner = 'upserted';
INSERT INTO accounts VALUES (1, 'dup', 0) ON CONFLICT DO NOTHING;
INSERT INTO accounts VALUES (301, 'new', 0) ON CONFLICT DO NOTHING;
SELECT id, owner, balance FROM accounts WHERE id IN (1, 301) ORDER BY id;
CREATE TABLE transfers (id int, account int REFERENCES accounts (id), amount numeric) USING ramp;
INSERT INTO transfers VALUES (1, 5, 10);
INSERT INTO transfers VALUES (2, 999, 10);
DELETE FROM accounts WHERE id = 5;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT owner FROM accounts WHERE id = 42;
SELECT owner FROM accounts WHERE id = 42;
SELECT count(*) FROM accounts WHERE id BETWEEN 100 AND 199;
RESET enable_seqscan;

-- Row triggers see OLD and NEW.
CREATE TABLE audit (op text, old_id int, new_id int);
CREATE FUNCTION audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit VALUES (TG_OP,
    CASE WHEN TG_OP <> 'INSERT' THEN OLD.id END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.id END);
  RETURN NULL;
END
$$;
CREATE TRIGGER items_audit AFTER INSERT OR UPDATE OR DELETE ON items
  FOR EACH ROW EXECUTE FUNCTION audit_fn();
INSERT INTO items (id, name) VALUES (300, 'audited');
UPDATE items SET id = 301 WHERE id = 300;
DELETE FROM items WHERE id = 301;
SELECT * FROM audit;

-- Cursors, also WITH HOLD (materialized at commit).
BEGIN;
DECLARE cur CURSOR WITH HOLD FOR SELECT id FROM items WHERE id < 20 ORDER BY id;
COMMIT;
FETCH ALL FROM cur;
CLOSE cur;

-- Write-write conflicts: another session commits a change to a row this transaction read
-- and then changes: the commit fails with a serialization failure (SQLSTATE 40001). The
-- other session takes no row locks (ramp.row_locks = off), or it would wait for this one.
SELECT dblink_connect('other', format('dbname=%s port=%s host=%s options=''-c ramp.row_locks=off''', current_database(),
       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
BEGIN;
UPDATE accounts SET balance = balance - 10 WHERE id = 7;
SELECT dblink_exec('other', 'UPDATE accounts SET balance = balance + 1000 WHERE id = 7');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
SELECT id, balance FROM accounts WHERE id = 7;
-- Concurrent deletes of the same row: the second one loses.
BEGIN;
DELETE FROM accounts WHERE id = 8;
SELECT dblink_exec('other', 'DELETE FROM accounts WHERE id = 8');
\set VERBOSITY terse
COMMIT;
\set VERBOSITY default
SELECT count(*) FROM accounts WHERE id = 8;
-- Writes of another session are visible at once (latest committed versions).
SELECT dblink_exec('other', 'INSERT INTO accounts VALUES (400, ''remote'', 1)');
SELECT id, owner FROM accounts WHERE id = 400;
SELECT dblink_disconnect('other');

-- Two-phase commit is refused after ramp writes; read-only transactions may prepare.
BEGIN;
INSERT INTO items (id, name) VALUES (500, 'never');
PREPARE TRANSACTION 'ramp_write';
SELECT count(*) FROM items WHERE id = 500;
BEGIN;
SELECT count(*) FROM items;
PREPARE TRANSACTION 'ramp_read';
COMMIT PREPARED 'ramp_read';

-- TRUNCATE is transactional (a new keyspace generation; rollback keeps the old one).
CREATE TABLE scratch (a int) USING ramp;
INSERT INTO scratch SELECT generate_series(1, 10);
BEGIN;
TRUNCATE scratch;
SELECT count(*) FROM scratch;
INSERT INTO scratch VALUES (42);
SELECT * FROM scratch;
ROLLBACK;
SELECT count(*) FROM scratch;
TRUNCATE scratch;
SELECT count(*) FROM scratch;
-- Created and truncated in one transaction (non-transactional truncate).
BEGIN;
CREATE TABLE scratch2 (a int) USING ramp;
INSERT INTO scratch2 VALUES (1), (2);
TRUNCATE scratch2;
INSERT INTO scratch2 VALUES (3);
COMMIT;
SELECT * FROM scratch2;

-- Rewrites keep the rows: ALTER COLUMN TYPE, VACUUM FULL, CLUSTER.
CREATE TABLE rw (a int, b text) USING ramp;
INSERT INTO rw SELECT g, 'r' || g FROM generate_series(1, 500) g;
ALTER TABLE rw ALTER COLUMN a TYPE bigint;
SELECT count(*), sum(a), pg_typeof(min(a)) FROM rw;
VACUUM FULL rw;
SELECT count(*), sum(a) FROM rw;
CREATE INDEX rw_a ON rw (a);
CLUSTER rw USING rw_a;
SELECT count(*), sum(a) FROM rw;
SELECT count(*) AS keyspaces_in_use FROM ramp.keyspaces
 WHERE kind <> 'd' AND keyspace = ramp.keyspace_of('rw');

-- Scans: parallel, sample, TID.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(a) FROM rw;
SELECT count(*), sum(a) FROM rw;
BEGIN;
INSERT INTO rw VALUES (1000, 'not for workers');
EXPLAIN (COSTS OFF) SELECT count(*) FROM rw;
SELECT count(*) FROM rw;
ROLLBACK;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
SELECT count(*) FROM rw TABLESAMPLE BERNOULLI (100);
SELECT count(*) FROM rw TABLESAMPLE SYSTEM (0);
SELECT count(*) FROM rw TABLESAMPLE SYSTEM (100);
SELECT a FROM rw WHERE ctid = (SELECT ctid FROM rw WHERE a = 250);

-- ANALYZE and VACUUM.
ANALYZE rw;
SELECT relpages > 0 AS has_pages, reltuples FROM pg_class WHERE relname = 'rw';
DELETE FROM rw WHERE a > 400;
VACUUM rw;
SET enable_seqscan = off;
SELECT count(*) FROM rw WHERE a > 0;
RESET enable_seqscan;

-- Dropped relations: keyspaces are retired at commit and removed from the cluster.
DROP TABLE scratch, scratch2;
SELECT ramp.collect_garbage() >= 0 AS collected;
SELECT count(*) FROM ramp.keyspaces WHERE kind = 'd';
SELECT relation, sum(keys) > 0 AS has_keys FROM ramp.partitions()
 WHERE relation::text IN ('items', 'accounts') GROUP BY 1 ORDER BY 1;

DROP TABLE items, docs, transfers, accounts, rw, heap_src, heap_src2, audit;
DROP FUNCTION audit_fn();
DROP EXTENSION dblink;
DROP EXTENSION pg_ramp;
