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

-- Cursors: forward fetches, and backward ones (more in data_cursors.sql).
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
-- Parallel page scans: each participant takes whole partitions and reads them at the
-- snapshot the leader drew. Every row exactly once, the same rows as heap.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(g), sum(length(payload)) FROM big_ramp;
SELECT count(*), sum(g), sum(length(payload)) FROM big_ramp;
SELECT count(*), sum(g), sum(length(payload)) FROM big_heap;
CREATE TEMP TABLE par_ids AS SELECT id FROM big_ramp;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids FROM par_ids;
SELECT count(*) AS missing FROM big_heap h WHERE NOT EXISTS (SELECT 1 FROM par_ids p WHERE p.id = h.id);
DROP TABLE par_ids;
SELECT v.x, s.* FROM (VALUES (1), (3)) v(x),
  LATERAL (SELECT count(*), sum(g) FROM big_ramp WHERE g > v.x) s ORDER BY 1;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- ANALYZE reads a random share of each row-id block (enough for twice its sample) and
-- weighs each row it reads: its row count and statistics match heap's on the same data.
SET default_statistics_target = 10;
ANALYZE big_ramp;
ANALYZE big_heap;
RESET default_statistics_target;
SELECT abs(r.reltuples - h.reltuples) / h.reltuples < 0.05 AS reltuples_close
  FROM pg_class r, pg_class h WHERE r.relname = 'big_ramp' AND h.relname = 'big_heap';
SELECT r.attname, r.null_frac = h.null_frac AS same_null_frac, r.avg_width = h.avg_width AS same_width,
       (SELECT array_agg(v ORDER BY v) FROM unnest((r.most_common_vals::text::int[])[1:7]) v) AS ramp_top7,
       (SELECT array_agg(v ORDER BY v) FROM unnest((h.most_common_vals::text::int[])[1:7]) v) AS heap_top7,
       abs(r.most_common_freqs[1] - h.most_common_freqs[1]) < 0.05 AS close_top_freq
  FROM pg_stats r JOIN pg_stats h ON h.attname = r.attname AND h.tablename = 'big_heap'
 WHERE r.tablename = 'big_ramp' AND r.attname = 'g';
SELECT r.attname, abs(r.avg_width - h.avg_width) <= 0.05 * h.avg_width AS close_width,
       (r.n_distinct < 0) = (h.n_distinct < 0) AS same_kind_of_n_distinct
  FROM pg_stats r JOIN pg_stats h ON h.attname = r.attname AND h.tablename = 'big_heap'
 WHERE r.tablename = 'big_ramp' AND r.attname IN ('id', 'payload') ORDER BY 1;
-- big_ramp's rows were inserted in id order, so its row ids (TIDs) follow id: ANALYZE sorts
-- its sample by TID, and the planner's index costs see the correlation. (big_heap was
-- filled from a scan of big_ramp, in partition order: its ids do not follow its TIDs.)
SELECT correlation > 0.9 AS id_follows_tids FROM pg_stats
 WHERE tablename = 'big_ramp' AND attname = 'id';
-- A nested loop rescans its inner bitmap heap scan once per outer row: each pass reads the
-- blocks of its own key. Rescans of bitmap scans are not replayed (the rescan cache is for
-- sequential scans): filling it read the rest of the table, here all of big_ramp. With
-- row-id probes (not pages) every read of the table counts in the servers' operations.
CREATE INDEX big_ramp_id ON big_ramp (id);
CREATE INDEX big_heap_id ON big_heap (id);
SET max_parallel_workers_per_gather = 0;
SET enable_seqscan = off;
SET enable_indexscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
SET ramp.scan_method = probe;
SET work_mem = '64MB';
EXPLAIN (COSTS OFF)
  SELECT count(*), sum(b.g) FROM generate_series(1, 40) o(x) JOIN big_ramp b ON b.id = o.x * 97;
SELECT sum(ops) AS bops0 FROM ramp.cluster_status() \gset
SELECT count(*) FROM big_ramp;
SELECT sum(ops) AS bops1 FROM ramp.cluster_status() \gset
SELECT count(*), sum(b.g) FROM generate_series(1, 40) o(x) JOIN big_ramp b ON b.id = o.x * 97;
SELECT sum(ops) AS bops2 FROM ramp.cluster_status() \gset
SELECT (:bops2 - :bops1) < (:bops1 - :bops0) / 4 AS far_fewer_operations_than_one_table_scan;
SELECT count(*), sum(b.g) FROM generate_series(1, 40) o(x) JOIN big_heap b ON b.id = o.x * 97;
-- The same rescans with the transaction's own writes: deleted and updated rows, a new row.
BEGIN;
DELETE FROM big_ramp WHERE id IN (97, 194);
UPDATE big_ramp SET g = g + 1000 WHERE id IN (291, 388);
INSERT INTO big_ramp VALUES (485, -5, 'own');
SELECT count(*), sum(b.g) FROM generate_series(1, 40) o(x) JOIN big_ramp b ON b.id = o.x * 97;
ROLLBACK;
BEGIN;
DELETE FROM big_heap WHERE id IN (97, 194);
UPDATE big_heap SET g = g + 1000 WHERE id IN (291, 388);
INSERT INTO big_heap VALUES (485, -5, 'own');
SELECT count(*), sum(b.g) FROM generate_series(1, 40) o(x) JOIN big_heap b ON b.id = o.x * 97;
ROLLBACK;
RESET max_parallel_workers_per_gather;
RESET enable_seqscan;
RESET enable_indexscan;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;
RESET ramp.scan_method;
RESET work_mem;
DROP TABLE big_ramp, big_heap;

-- Rescans replay the rows of an earlier pass (tableam/rescan_cache.hpp): a subplan or the
-- inner side of a nested loop reads the table from the cluster twice, not once per outer
-- row, and the transaction's own writes are overlaid on every pass.
CREATE TABLE rs_ramp (id int, g int, payload text) USING ramp;
CREATE TABLE rs_heap (id int, g int, payload text);
INSERT INTO rs_ramp SELECT i, i % 7, 'p' || i FROM generate_series(1, 3000) i;
INSERT INTO rs_heap SELECT * FROM rs_ramp;
CREATE TABLE rs_outer (x int);
INSERT INTO rs_outer SELECT generate_series(0, 39);
CREATE FUNCTION server_ops() RETURNS bigint LANGUAGE sql AS
  $$ SELECT sum(ops)::bigint FROM ramp.cluster_status() $$;
-- A correlated subquery rescans its scan once per outer row.
EXPLAIN (COSTS OFF) SELECT o.x, (SELECT count(*) FROM rs_ramp r WHERE r.g = o.x % 7) FROM rs_outer o;
SELECT server_ops() AS ops0 \gset
SELECT count(*) FROM rs_ramp;
SELECT server_ops() AS ops1 \gset
SELECT sum(c), sum(s) FROM (SELECT o.x, (SELECT count(*) FROM rs_ramp r WHERE r.g = o.x % 7) c,
  (SELECT sum(id) FROM rs_ramp r WHERE r.g = o.x % 5) s FROM rs_outer o) j;
SELECT server_ops() AS ops2 \gset
-- 80 passes over rs_ramp: without the cache, the servers see 80 scans' requests.
SELECT (:ops2 - :ops1) < 6 * (:ops1 - :ops0) AS rescans_replayed;
SET ramp.rescan_cache = off;
SELECT server_ops() AS ops3 \gset
SELECT sum(c), sum(s) FROM (SELECT o.x, (SELECT count(*) FROM rs_ramp r WHERE r.g = o.x % 7) c,
  (SELECT sum(id) FROM rs_ramp r WHERE r.g = o.x % 5) s FROM rs_outer o) j;
SELECT server_ops() AS ops4 \gset
-- (Compared with the cached passes, not with one scan: a pass of a statement that closed
-- rs_ramp's partitions at its snapshot needs no RAMP round 2, and costs less than the
-- first scan of a statement.)
SELECT (:ops4 - :ops3) > 5 * (:ops2 - :ops1) AS rescans_read_again;
RESET ramp.rescan_cache;
SELECT sum(c), sum(s) FROM (SELECT o.x, (SELECT count(*) FROM rs_heap r WHERE r.g = o.x % 7) c,
  (SELECT sum(id) FROM rs_heap r WHERE r.g = o.x % 5) s FROM rs_outer o) j;
-- A nested loop with the ramp table inside.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT count(*), sum(r.id) FROM (SELECT x FROM rs_outer ORDER BY x LIMIT 40) o
  JOIN rs_ramp r ON r.g = o.x % 7;
SELECT count(*), sum(r.id) FROM rs_outer o JOIN rs_heap r ON r.g = o.x % 7;
-- Own writes between and during passes; a semi join stops its passes at the first match.
BEGIN;
UPDATE rs_ramp SET g = g + 1 WHERE id <= 50;
DELETE FROM rs_ramp WHERE id BETWEEN 100 AND 150;
INSERT INTO rs_ramp VALUES (-1, 3, 'own'), (-2, 5, 'own');
UPDATE rs_heap SET g = g + 1 WHERE id <= 50;
DELETE FROM rs_heap WHERE id BETWEEN 100 AND 150;
INSERT INTO rs_heap VALUES (-1, 3, 'own'), (-2, 5, 'own');
SELECT o.x, (SELECT count(*) FROM rs_ramp r WHERE r.g = o.x % 7) AS ramp_count,
       (SELECT count(*) FROM rs_heap r WHERE r.g = o.x % 7) AS heap_count
  FROM rs_outer o WHERE o.x < 9 ORDER BY 1;
SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM rs_ramp r WHERE r.id = o.x * 7 + 90)) AS ramp_semi,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM rs_heap r WHERE r.id = o.x * 7 + 90)) AS heap_semi
  FROM rs_outer o;
UPDATE rs_ramp SET payload = 'again' WHERE id IN (SELECT id FROM rs_ramp WHERE g = 2 LIMIT 5);
SELECT o.x, (SELECT count(*) FROM rs_ramp r WHERE r.payload = 'again' AND r.g = o.x) AS again
  FROM rs_outer o WHERE o.x < 4 ORDER BY 1;
ROLLBACK;
-- Beyond work_mem nothing is kept: every pass reads the table again, with the same result.
SET work_mem = '64kB';
SELECT sum(c), sum(s) FROM (SELECT o.x, (SELECT count(*) FROM rs_ramp r WHERE r.g = o.x % 7) c,
  (SELECT sum(id) FROM rs_ramp r WHERE r.g = o.x % 5) s FROM rs_outer o) j;
RESET work_mem;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
DROP TABLE rs_ramp, rs_heap, rs_outer;
DROP FUNCTION server_ops();

-- Index scans of ramp tables pay ramp.row_fetch_cost per row they fetch (a read from the
-- cluster each), so that the planner prefers a hash join over many index lookups where
-- heap would not mind them.
CREATE TABLE fc_ramp (id int PRIMARY KEY, v int) USING ramp;
INSERT INTO fc_ramp SELECT g, g % 10 FROM generate_series(1, 2000) g;
ANALYZE fc_ramp;
CREATE FUNCTION plan_cost(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'Total Cost')::float8;
END $$;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET ramp.row_fetch_cost = 0;
SELECT plan_cost('SELECT * FROM fc_ramp WHERE id <= 400') AS c0 \gset
RESET ramp.row_fetch_cost;
SELECT plan_cost('SELECT * FROM fc_ramp WHERE id <= 400') AS c1 \gset
SHOW ramp.row_fetch_cost;
SELECT round(((:c1 - :c0) / 400)::numeric, 1) AS cost_per_row_fetched;
-- Every row the index condition selects is fetched, also those another condition drops
-- (here 9 of 10): the cost counts the 400 fetched rows, not the 40 returned.
SET ramp.row_fetch_cost = 0;
SELECT plan_cost('SELECT * FROM fc_ramp WHERE id <= 400 AND v = 3') AS c2 \gset
RESET ramp.row_fetch_cost;
SELECT plan_cost('SELECT * FROM fc_ramp WHERE id <= 400 AND v = 3') AS c3 \gset
SELECT round(((:c3 - :c2) / 400)::numeric, 1) AS cost_per_row_fetched_and_filtered;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- Sequential scans pay ramp.scan_row_cost per row they read (the client decodes and checks
-- each), also those a condition drops; each participant of a parallel scan its share.
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET ramp.scan_row_cost = 0;
SELECT plan_cost('SELECT * FROM fc_ramp WHERE v = 3') AS s0 \gset
RESET ramp.scan_row_cost;
SELECT plan_cost('SELECT * FROM fc_ramp WHERE v = 3') AS s1 \gset
SHOW ramp.scan_row_cost;
SELECT round(((:s1 - :s0) / 2000)::numeric, 3) AS cost_per_row_scanned;
RESET enable_indexscan;
RESET enable_bitmapscan;
DROP TABLE fc_ramp;
-- Parallel workers follow the rows, as heap's do: PostgreSQL adds a worker at every tripling
-- of a table's pages, and a ramp table's pages are its bytes on the servers (several times
-- heap's here). With ramp.heap_parallel_workers (on by default) a ramp table gets the workers
-- heap plans for the same rows.
CREATE TABLE pw_ramp (id int, g int, note text) USING ramp;
CREATE TABLE pw_heap (LIKE pw_ramp);
INSERT INTO pw_ramp SELECT i, i % 13, 'note ' || i FROM generate_series(1, 20000) i;
INSERT INTO pw_heap SELECT * FROM pw_ramp;
ANALYZE pw_ramp;
ANALYZE pw_heap;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = '8kB';
SET max_parallel_workers_per_gather = 8;
EXPLAIN (COSTS OFF) SELECT count(*) FROM pw_heap;
EXPLAIN (COSTS OFF) SELECT count(*) FROM pw_ramp;
SET ramp.heap_parallel_workers = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM pw_ramp;
RESET ramp.heap_parallel_workers;
-- A parallel_workers reloption wins.
ALTER TABLE pw_ramp SET (parallel_workers = 1);
EXPLAIN (COSTS OFF) SELECT count(*) FROM pw_ramp;
SELECT count(*), sum(g) FROM pw_ramp;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE pw_ramp, pw_heap;
DROP FUNCTION plan_cost(text);

-- Scan statistics (pg_stat_user_tables): sequential scans and the rows they return are
-- counted as for heap, on the same table contents and queries.
CREATE TABLE st_ramp (id int, v text) USING ramp;
CREATE TABLE st_heap (id int, v text) USING heap;
INSERT INTO st_ramp SELECT i, 'v' || i FROM generate_series(1, 300) i;
INSERT INTO st_heap SELECT i, 'v' || i FROM generate_series(1, 300) i;
SELECT count(*) FROM st_ramp;
SELECT count(*) FROM st_heap;
SELECT count(*) FROM st_ramp WHERE id % 3 = 0;
SELECT count(*) FROM st_heap WHERE id % 3 = 0;
SELECT pg_stat_force_next_flush();
SELECT r.seq_scan AS ramp_scans, h.seq_scan AS heap_scans,
       r.seq_tup_read AS ramp_rows_read, h.seq_tup_read AS heap_rows_read
  FROM pg_stat_user_tables r, pg_stat_user_tables h
 WHERE r.relname = 'st_ramp' AND h.relname = 'st_heap';
DROP TABLE st_ramp, st_heap;

-- Page scans hand a row out through a fast path when the transaction wrote none of the
-- table's rows (tableam/scan.cpp NextStableRow); the transaction's deletions, updates and
-- inserts are overlaid by the full path, as with ramp.debug_scan_full_path (every row
-- through the full path). Both agree, and agree with heap.
CREATE TABLE fp_ramp (id int, g int, note text) USING ramp;
CREATE TABLE fp_heap (LIKE fp_ramp);
INSERT INTO fp_ramp SELECT i, i % 7, 'n' || i FROM generate_series(1, 3000) i;
INSERT INTO fp_heap SELECT i, i % 7, 'n' || i FROM generate_series(1, 3000) i;
SET ramp.scan_method = pages;
SET max_parallel_workers_per_gather = 0;
SELECT count(*), sum(g), sum(id) FROM fp_ramp;
SELECT count(*), sum(g), sum(id) FROM fp_heap;
-- Rows handed out by the fast path count in seq_tup_read as heap's do.
SELECT pg_stat_force_next_flush();
SELECT r.seq_scan AS ramp_scans, h.seq_scan AS heap_scans,
       r.seq_tup_read AS ramp_rows_read, h.seq_tup_read AS heap_rows_read
  FROM pg_stat_user_tables r, pg_stat_user_tables h
 WHERE r.relname = 'fp_ramp' AND h.relname = 'fp_heap';
BEGIN;
DELETE FROM fp_ramp WHERE id % 100 = 0;
UPDATE fp_ramp SET g = g + 1000 WHERE id % 100 = 1;
INSERT INTO fp_ramp VALUES (5001, -5, 'own');
UPDATE fp_ramp SET g = -6 WHERE id = 5001;
SELECT count(*), sum(g), sum(id), min(g), max(g) FROM fp_ramp;
SET LOCAL ramp.debug_scan_full_path = on;
SELECT count(*), sum(g), sum(id), min(g), max(g) FROM fp_ramp;
ROLLBACK;
BEGIN;
DELETE FROM fp_heap WHERE id % 100 = 0;
UPDATE fp_heap SET g = g + 1000 WHERE id % 100 = 1;
INSERT INTO fp_heap VALUES (5001, -5, 'own');
UPDATE fp_heap SET g = -6 WHERE id = 5001;
SELECT count(*), sum(g), sum(id), min(g), max(g) FROM fp_heap;
ROLLBACK;
SELECT count(*), sum(g), sum(id) FROM fp_ramp;
-- A scan rescanned for every outer row (a correlated subquery) replays its cached rows from
-- the third pass on; with an insert of the transaction overlaid after them, the rows of the
-- table are handed out once per pass, not twice (the fast path once did not know the
-- replay had ended).
CREATE TABLE fp_outer (g int);
INSERT INTO fp_outer SELECT generate_series(0, 6);
BEGIN;
INSERT INTO fp_ramp VALUES (5002, 3, 'own');
INSERT INTO fp_heap VALUES (5002, 3, 'own');
SELECT o.g, (SELECT count(*) FROM fp_ramp r WHERE r.g = o.g) AS ramp_rows,
       (SELECT count(*) FROM fp_heap h WHERE h.g = o.g) AS heap_rows
  FROM fp_outer o ORDER BY o.g;
ROLLBACK;
DROP TABLE fp_outer;
RESET ramp.scan_method;
RESET max_parallel_workers_per_gather;
DROP TABLE fp_ramp, fp_heap;

DROP TABLE scan_ramp, scan_heap, probe;
DROP FUNCTION estimated_rows(text);
DROP FUNCTION twin_diff(text, text, text);
DROP EXTENSION pg_ramp;

