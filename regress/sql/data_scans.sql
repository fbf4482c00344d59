-- Scans of ramp tables and their plans: sequential, index and bitmap scans through local
-- btree indexes and shared ramp_hash indexes, index-driven joins, LIMIT/ORDER BY through a
-- btree, and the same after writes. Every query is also run on a heap twin (with btree and
-- hash indexes) and the results are compared: zero differing rows.
CREATE EXTENSION pg_ramp;
\i sql/include/twin.sql

CREATE TABLE scan_ramp (id int, k int, cat text, v numeric, d date, note text) USING ramp;
CREATE TABLE scan_heap (LIKE scan_ramp);
INSERT INTO scan_ramp
SELECT g, g % 97, 'cat' || (g % 13), (g % 1000) / 10.0, date '2024-01-01' + g % 365,
       CASE WHEN g % 5 = 0 THEN NULL ELSE repeat('n', g % 40) END
  FROM generate_series(1, 6000) g;
INSERT INTO scan_heap SELECT * FROM scan_ramp;
-- Right after the load, without ANALYZE: the planner's row count comes from the cluster.
CREATE FUNCTION estimated_rows(query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN ' || query LOOP
    RETURN (regexp_match(line, 'rows=(\d+)'))[1]::bigint;
  END LOOP;
END
$$;
SELECT reltuples AS pg_class_reltuples, estimated_rows('SELECT * FROM scan_ramp') AS estimated_rows
  FROM pg_class WHERE relname = 'scan_ramp';
CREATE INDEX scan_ramp_id ON scan_ramp (id);
CREATE INDEX scan_ramp_d ON scan_ramp (d, id);
CREATE INDEX scan_ramp_k ON scan_ramp USING ramp_hash (k);
CREATE INDEX scan_ramp_cat ON scan_ramp USING ramp_hash (cat);
CREATE INDEX scan_heap_id ON scan_heap (id);
CREATE INDEX scan_heap_d ON scan_heap (d, id);
CREATE INDEX scan_heap_k ON scan_heap USING hash (k);
CREATE INDEX scan_heap_cat ON scan_heap USING hash (cat);
ANALYZE scan_ramp, scan_heap;

-- Without forcing: a selective equality on a ramp_hash column and a btree range use their
-- indexes; aggregates over the whole table scan it sequentially.
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE k = 5;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE id BETWEEN 10 AND 20;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE id = 42;
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM scan_ramp;
RESET max_parallel_workers_per_gather;
SELECT twin_diff('SELECT count(*), sum(v), min(d), max(note) FROM %I', 'scan_ramp', 'scan_heap')
  AS seqscan_aggregate;
SELECT twin_diff('SELECT * FROM %I', 'scan_ramp', 'scan_heap') AS seqscan_all;

-- Index scans (no bitmaps).
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE k = 5;
SELECT twin_diff('SELECT * FROM %I WHERE k = 5', 'scan_ramp', 'scan_heap') AS ramp_hash_index;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE cat = 'cat7';
SELECT twin_diff($$SELECT * FROM %I WHERE cat = 'cat7'$$, 'scan_ramp', 'scan_heap')
  AS ramp_hash_index_text;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE id BETWEEN 100 AND 250;
SELECT twin_diff('SELECT * FROM %I WHERE id BETWEEN 100 AND 250', 'scan_ramp', 'scan_heap')
  AS btree_range;
EXPLAIN (COSTS OFF) SELECT id, v FROM scan_ramp WHERE d = '2024-03-01' ORDER BY id;
SELECT id, v FROM scan_ramp WHERE d = '2024-03-01' ORDER BY id;
EXPLAIN (COSTS OFF) SELECT id FROM scan_ramp ORDER BY id DESC LIMIT 5;
SELECT id FROM scan_ramp ORDER BY id DESC LIMIT 5;
SELECT twin_diff('SELECT * FROM %I WHERE k = 5 AND id > 3000', 'scan_ramp', 'scan_heap')
  AS index_with_filter;
-- A parameterized nested loop: the inner side is a ramp_hash lookup per outer row.
CREATE TABLE probe (k int);
INSERT INTO probe VALUES (1), (2), (3), (96), (1000);
ANALYZE probe;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT p.k, s.id FROM probe p JOIN scan_ramp s ON s.k = p.k;
SELECT twin_diff('SELECT p.k, s.id FROM probe p JOIN %I s ON s.k = p.k', 'scan_ramp', 'scan_heap')
  AS nested_loop_ramp_hash;
EXPLAIN (COSTS OFF) SELECT p.k, s.v FROM probe p JOIN scan_ramp s ON s.id = p.k;
SELECT twin_diff('SELECT p.k, s.v FROM probe p JOIN %I s ON s.id = p.k', 'scan_ramp', 'scan_heap')
  AS nested_loop_btree;
RESET enable_hashjoin;
RESET enable_mergejoin;
-- Prepared statements (custom and generic plans) look values up through the index.
PREPARE by_k(int) AS SELECT count(*), sum(v) FROM scan_ramp WHERE k = $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE by_k(3);
EXECUTE by_k(3);
SELECT count(*), sum(v) FROM scan_heap WHERE k = 3;
RESET plan_cache_mode;
DEALLOCATE by_k;
RESET enable_bitmapscan;

-- Bitmap scans: a btree range, ramp_hash equality, OR and AND of several indexes.
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE id < 300;
SELECT twin_diff('SELECT * FROM %I WHERE id < 300', 'scan_ramp', 'scan_heap') AS bitmap_btree;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE k = 11;
SELECT twin_diff('SELECT * FROM %I WHERE k = 11', 'scan_ramp', 'scan_heap') AS bitmap_ramp_hash;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE k = 11 OR cat = 'cat2';
SELECT twin_diff($$SELECT * FROM %I WHERE k = 11 OR cat = 'cat2'$$, 'scan_ramp', 'scan_heap')
  AS bitmap_or;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE k = 11 AND id < 3000;
SELECT twin_diff('SELECT * FROM %I WHERE k = 11 AND id < 3000', 'scan_ramp', 'scan_heap')
  AS bitmap_and;
EXPLAIN (COSTS OFF) SELECT * FROM scan_ramp WHERE k IN (1, 2, 3);
SELECT twin_diff('SELECT * FROM %I WHERE k IN (1, 2, 3)', 'scan_ramp', 'scan_heap')
  AS bitmap_in_list;
RESET enable_indexscan;

-- Writes: indexes follow INSERT, UPDATE (of indexed and unindexed columns), DELETE.
\set tbl scan_ramp
\i sql/include/scans_dml.sql
\set tbl scan_heap
\i sql/include/scans_dml.sql
SELECT twin_diff('SELECT * FROM %I', 'scan_ramp', 'scan_heap') AS all_after_writes;
SELECT twin_diff('SELECT * FROM %I WHERE k = 5', 'scan_ramp', 'scan_heap') AS index_after_writes;
SELECT twin_diff('SELECT * FROM %I WHERE k = 200', 'scan_ramp', 'scan_heap') AS moved_key;
SELECT twin_diff($$SELECT * FROM %I WHERE cat = 'new'$$, 'scan_ramp', 'scan_heap') AS new_value;
SET enable_bitmapscan = off;
SELECT twin_diff('SELECT * FROM %I WHERE k = 5', 'scan_ramp', 'scan_heap') AS index_scan_after_writes;
SELECT twin_diff('SELECT * FROM %I WHERE id BETWEEN 1 AND 700', 'scan_ramp', 'scan_heap')
  AS btree_after_writes;
RESET enable_bitmapscan;
-- Inside a transaction: the indexes see the transaction's own writes (and not those a
-- statement makes while it runs).
BEGIN;
UPDATE scan_ramp SET k = 500 WHERE k = 7;
UPDATE scan_heap SET k = 500 WHERE k = 7;
SELECT twin_diff('SELECT * FROM %I WHERE k = 500', 'scan_ramp', 'scan_heap') AS own_writes_index;
SELECT twin_diff('SELECT * FROM %I WHERE k = 7', 'scan_ramp', 'scan_heap') AS own_writes_old_key;
SELECT count(*) FROM scan_ramp WHERE k = 500;
ROLLBACK;
SELECT count(*) FROM scan_ramp WHERE k = 500;
RESET enable_seqscan;

-- Cursors: forward fetches; backward fetches are refused (ramp scans run forward only).
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM scan_ramp WHERE k = 5 ORDER BY id;
FETCH 3 FROM c;
FETCH 2 FROM c;
CLOSE c;
DECLARE s SCROLL CURSOR FOR SELECT id FROM scan_ramp;
FETCH 1 FROM s;
FETCH BACKWARD 1 FROM s;
ROLLBACK;

-- Tables beyond 32768 row ids are scanned sequentially through the partition scan (pages of
-- every partition read through remote page I/O, one snapshot) instead of row-id probes:
-- after deletions and updates (holes, new row ids), and with a transaction's own writes.
CREATE TABLE big_ramp (id int, g int, payload text) USING ramp;
CREATE TABLE big_heap (LIKE big_ramp);
INSERT INTO big_ramp SELECT g, g % 7, repeat(md5(g::text), 1 + g % 5) FROM generate_series(1, 50000) g;
INSERT INTO big_heap SELECT * FROM big_ramp;
DELETE FROM big_ramp WHERE id % 10 = 3;
DELETE FROM big_heap WHERE id % 10 = 3;
UPDATE big_ramp SET g = g + 100 WHERE id % 1000 = 7;
UPDATE big_heap SET g = g + 100 WHERE id % 1000 = 7;
SET max_parallel_workers_per_gather = 0;
SELECT count(*), count(DISTINCT id), sum(g), sum(length(payload)) FROM big_ramp;
SELECT twin_diff('SELECT id, g, payload FROM %I', 'big_ramp', 'big_heap') AS rows_differing;
BEGIN;
INSERT INTO big_ramp VALUES (-1, -1, 'own');
DELETE FROM big_ramp WHERE id BETWEEN 100 AND 199;
UPDATE big_ramp SET payload = 'own update' WHERE id = 500;
SELECT count(*), sum(g), count(*) FILTER (WHERE payload LIKE 'own%') AS own_rows FROM big_ramp;
ROLLBACK;
SELECT count(*), sum(g) FROM big_ramp;
-- The rows of a page scan are not copied: the slot points into the scanner's memory until
-- the next row. A LIMIT stops mid-partition, a rescanned inner side starts over, a cursor
-- fetches across partitions, and a sort keeps what it took.
SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM big_ramp LIMIT 30000) s;
SELECT v.x, s.* FROM (VALUES (1), (3)) v(x),
  LATERAL (SELECT count(*), sum(g), sum(length(payload)) FROM big_ramp WHERE g > v.x) s ORDER BY 1;
SELECT v.x, s.* FROM (VALUES (1), (3)) v(x),
  LATERAL (SELECT count(*), sum(g), sum(length(payload)) FROM big_heap WHERE g > v.x) s ORDER BY 1;
SELECT v.x, (SELECT count(*) FROM (SELECT id FROM big_ramp WHERE g = v.x LIMIT 3) l)
  FROM (VALUES (1), (2)) v(x) ORDER BY 1;
DO $$
DECLARE
  c CURSOR FOR SELECT id, payload FROM big_ramp;
  n bigint := 0;
  total bigint := 0;
BEGIN
  FOR r IN c LOOP
    n := n + 1;
    total := total + length(r.payload);
  END LOOP;
  RAISE NOTICE 'cursor: % rows, % payload bytes', n, total;
END
$$;
SELECT count(*), sum(length(payload)) FROM big_heap;
SELECT id, g, payload FROM big_ramp ORDER BY id DESC LIMIT 3;
RESET max_parallel_workers_per_gather;
DROP TABLE big_ramp, big_heap;

DROP TABLE scan_ramp, scan_heap, probe;
DROP FUNCTION estimated_rows(text);
DROP FUNCTION twin_diff(text, text, text);
DROP EXTENSION pg_ramp;
