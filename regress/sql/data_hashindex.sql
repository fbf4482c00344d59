-- The ramp_hash index AM's data path, against a real rampd cluster (see data_tableam.sql).
CREATE EXTENSION pg_ramp;

CREATE TABLE orders (o_id bigint, o_cust int, o_code varchar(10), o_total numeric,
                     o_day date, o_ref uuid, o_paid bool, o_tag bytea, o_kind char(4))
  USING ramp;
INSERT INTO orders
SELECT g, g % 50, 'c' || (g % 20), (g % 7) + 0.5, date '2024-01-01' + (g % 30),
       ('00000000-0000-0000-0000-' || lpad((g % 40)::text, 12, '0'))::uuid,
       g % 2 = 0, decode(lpad(to_hex(g % 16), 2, '0'), 'hex'), 'k' || (g % 3)
  FROM generate_series(1, 1000) g;
INSERT INTO orders (o_id) VALUES (1001);  -- NULLs everywhere: not indexed

-- Indexes built over existing rows.
CREATE INDEX orders_cust ON orders USING ramp_hash (o_cust);
CREATE INDEX orders_code ON orders USING ramp_hash (o_code);
CREATE INDEX orders_total ON orders USING ramp_hash (o_total);
CREATE INDEX orders_day ON orders USING ramp_hash (o_day);
CREATE INDEX orders_ref ON orders USING ramp_hash (o_ref);
CREATE INDEX orders_paid ON orders USING ramp_hash (o_paid);
CREATE INDEX orders_tag ON orders USING ramp_hash (o_tag);
CREATE INDEX orders_kind ON orders USING ramp_hash (o_kind);
SELECT c.relname, k.kind FROM ramp.keyspaces k JOIN pg_class c ON c.oid = k.relid
 WHERE k.kind <> 'd' ORDER BY 1;
ANALYZE orders;

-- Selective equality uses the index without any forcing.
EXPLAIN (COSTS OFF) SELECT o_id FROM orders WHERE o_cust = 7;
SELECT count(*), min(o_id), max(o_id) FROM orders WHERE o_cust = 7;

-- Index scans and bitmap scans return exactly the matching rows (the executor rechecks:
-- entries are grouped by hash).
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT o_id FROM orders WHERE o_code = 'c3';
SELECT count(*) FROM orders WHERE o_code = 'c3';
SELECT count(*) FROM orders WHERE o_code = 'c3'::text;
SELECT count(*) FROM orders WHERE o_total = 2.50;   -- numeric: 2.5 = 2.50
SELECT count(*) FROM orders WHERE o_day = '2024-01-05';
SELECT count(*) FROM orders WHERE o_ref = '00000000-0000-0000-0000-000000000005';
SELECT count(*) FROM orders WHERE o_paid;
SELECT count(*) FROM orders WHERE o_paid = false;
SELECT count(*) FROM orders WHERE o_tag = '\x0a';
SELECT count(*) FROM orders WHERE o_kind = 'k1';
-- Cross-type equality within an operator family (int4 column, int8 and int2 values).
EXPLAIN (COSTS OFF) SELECT o_id FROM orders WHERE o_cust = 7::bigint;
SELECT count(*) FROM orders WHERE o_cust = 7::bigint;
SELECT count(*) FROM orders WHERE o_cust = 7::smallint;
SELECT count(*) FROM orders WHERE o_cust = 4000000000;  -- beyond int4: no match
SELECT count(*) FROM orders WHERE o_cust = 7 AND o_cust = 8;
SELECT count(*) FROM orders WHERE o_cust IS NULL;
RESET enable_bitmapscan;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT o_id FROM orders WHERE o_cust = 7;
SELECT count(*) FROM orders WHERE o_cust = 7;
EXPLAIN (COSTS OFF) SELECT o_id FROM orders WHERE o_cust IN (7, 8);
SELECT count(*) FROM orders WHERE o_cust IN (7, 8);
SELECT count(*) FROM orders WHERE o_cust = 7 OR o_code = 'c3';
RESET enable_indexscan;

-- The index follows the transaction's own writes (command-id visibility included).
BEGIN;
INSERT INTO orders (o_id, o_cust, o_code) VALUES (2000, 7, 'new');
SELECT o_id FROM orders WHERE o_code = 'new';
SELECT count(*) FROM orders WHERE o_cust = 7;
UPDATE orders SET o_cust = 99 WHERE o_id = 2000;
SELECT o_id FROM orders WHERE o_cust = 99;
SELECT count(*) FROM orders WHERE o_cust = 7;
DELETE FROM orders WHERE o_cust = 8;
SELECT count(*) FROM orders WHERE o_cust = 8;
SAVEPOINT s;
UPDATE orders SET o_cust = 8 WHERE o_id = 2000;
SELECT o_id FROM orders WHERE o_cust = 8;
ROLLBACK TO s;
SELECT o_id FROM orders WHERE o_cust = 8;
SELECT o_id FROM orders WHERE o_cust = 99;
COMMIT;
SELECT o_id FROM orders WHERE o_cust = 99;
SELECT count(*) FROM orders WHERE o_cust = 8;
-- An UPDATE that changes the key moves the row between groups; old TIDs return nothing.
BEGIN;
UPDATE orders SET o_cust = 100 WHERE o_cust = 9;
SELECT count(*) FROM orders WHERE o_cust = 9;
SELECT count(*) FROM orders WHERE o_cust = 100;
-- An UPDATE that keeps the key still gets a new row id and a new entry.
UPDATE orders SET o_total = 0 WHERE o_cust = 100;
SELECT count(*), sum(o_total) FROM orders WHERE o_cust = 100;
ROLLBACK;

-- Moving storage between tablespaces keeps the keyspaces (the table AM is told; for the
-- index PostgreSQL copies the files itself, and the keyspace follows at the next catalog
-- reconciliation).
SET allow_in_place_tablespaces = on;
CREATE TABLESPACE ramp_regress_space LOCATION '';
SET enable_seqscan = off;
ALTER INDEX orders_cust SET TABLESPACE ramp_regress_space;
SELECT count(*) FROM orders WHERE o_cust = 7;
CREATE TABLE reconcile_now (a int) USING ramp;
DROP TABLE reconcile_now;
SELECT count(*) FROM orders WHERE o_cust = 7;
SELECT reltablespace <> 0 AS moved FROM ramp.keyspaces
 WHERE keyspace = ramp.keyspace_of('orders_cust');
ALTER TABLE orders SET TABLESPACE ramp_regress_space;
SELECT count(*) FROM orders WHERE o_cust = 7;
SELECT reltablespace <> 0 AS moved FROM ramp.keyspaces
 WHERE keyspace = ramp.keyspace_of('orders');
ALTER TABLE orders SET TABLESPACE pg_default;
ALTER INDEX orders_cust SET TABLESPACE pg_default;
SELECT count(*) FROM orders WHERE o_cust = 7;
DROP TABLESPACE ramp_regress_space;
RESET enable_seqscan;

-- A table created, filled and indexed in one transaction.
BEGIN;
CREATE TABLE fresh (k int, v text) USING ramp;
INSERT INTO fresh SELECT g % 10, 'v' || g FROM generate_series(1, 100) g;
CREATE INDEX fresh_k ON fresh USING ramp_hash (k);
SELECT count(*) FROM fresh WHERE k = 3;
INSERT INTO fresh VALUES (3, 'more');
SELECT count(*) FROM fresh WHERE k = 3;
COMMIT;
SELECT count(*) FROM fresh WHERE k = 3;

-- TRUNCATE and REINDEX give the index a new keyspace; DROP INDEX retires it.
TRUNCATE fresh;
SELECT count(*) FROM fresh WHERE k = 3;
INSERT INTO fresh VALUES (3, 'after truncate');
SELECT v FROM fresh WHERE k = 3;
REINDEX INDEX fresh_k;
SELECT v FROM fresh WHERE k = 3;
SELECT c.relname, k.generation FROM ramp.keyspaces k JOIN pg_class c ON c.oid = k.relid
 WHERE k.kind <> 'd' AND c.relname LIKE 'fresh%' ORDER BY 1;
DROP INDEX fresh_k;
SELECT count(*) > 0 AS retired FROM ramp.keyspaces WHERE kind = 'd';
RESET enable_seqscan;

DROP TABLE orders, fresh;
DROP EXTENSION pg_ramp;
