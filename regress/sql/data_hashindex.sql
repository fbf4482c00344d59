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

-- Index scans read the row of a value's smallest row id first and the others only when the
-- executor asks for a second row (EXISTS, semi and anti joins stop at the first): the same
-- rows as reading every row at once (ramp.debug_hash_all_rows), own writes overlaid, and
-- far fewer rows read for existence.
CREATE TEMP TABLE probe (k int);
INSERT INTO probe SELECT g FROM generate_series(0, 60) g;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SET enable_memoize = off;
CREATE TEMP TABLE first_rows (mode text, q text, result text);
CREATE FUNCTION probe_results() RETURNS TABLE (q text, result text) LANGUAGE sql AS $$
  SELECT 'counts', string_agg(format('%s:%s:%s', k,
      (SELECT count(*) FROM orders o WHERE o.o_cust = p.k),
      (SELECT sum(o_id) FROM orders o WHERE o.o_cust = p.k)), ' ' ORDER BY k) FROM probe p
  UNION ALL
  SELECT 'exists', string_agg(k::text, ' ' ORDER BY k)
    FROM probe p WHERE EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = p.k)
  UNION ALL
  SELECT 'exists filtered', string_agg(k::text, ' ' ORDER BY k)
    FROM probe p WHERE EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = p.k AND o.o_id > 985)
  UNION ALL
  SELECT 'not exists', string_agg(k::text, ' ' ORDER BY k)
    FROM probe p WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = p.k
                                     AND o.o_id % 50 <> 7)
  UNION ALL
  SELECT 'limit 2', string_agg(k::text || '=' || ids, ' ' ORDER BY k)
    FROM probe p, LATERAL (SELECT string_agg(o_id::text, ',') AS ids
                             FROM (SELECT o_id FROM orders o WHERE o.o_cust = p.k LIMIT 2) l) x
$$;
EXPLAIN (COSTS OFF)
SELECT k FROM probe p WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = p.k);
SELECT lookups AS l0 FROM ramp.address_cache() \gset
SELECT count(*) FROM probe p WHERE EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = p.k);
SELECT lookups AS l1 FROM ramp.address_cache() \gset
SET ramp.debug_hash_all_rows = on;
SELECT count(*) FROM probe p WHERE EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = p.k);
SELECT lookups AS l2 FROM ramp.address_cache() \gset
SELECT :l1 - :l0 < (:l2 - :l1) / 4 AS far_fewer_rows_read;
RESET ramp.debug_hash_all_rows;
INSERT INTO first_rows SELECT 'first', * FROM probe_results();
SET ramp.debug_hash_all_rows = on;
INSERT INTO first_rows SELECT 'all', * FROM probe_results();
RESET ramp.debug_hash_all_rows;
-- Own writes: rows inserted into, deleted from and moved between values.
BEGIN;
INSERT INTO orders (o_id, o_cust) SELECT 3000 + g, g % 5 FROM generate_series(1, 20) g;
INSERT INTO orders (o_id, o_cust) VALUES (4000, 55);
DELETE FROM orders WHERE o_cust = 3 AND o_id < 500;
DELETE FROM orders WHERE o_cust = 11;
UPDATE orders SET o_cust = 12 WHERE o_cust = 13 AND o_id % 100 = 13;
SELECT string_agg(q || ': ' || result, E'\n' ORDER BY q) AS own_first FROM probe_results() \gset
SET LOCAL ramp.debug_hash_all_rows = on;
SELECT string_agg(q || ': ' || result, E'\n' ORDER BY q) AS own_all FROM probe_results() \gset
ROLLBACK;
INSERT INTO first_rows SELECT 'first, after rollback', * FROM probe_results();
SELECT q, count(DISTINCT result) AS results, count(*) AS modes FROM first_rows
 GROUP BY q ORDER BY q;
SELECT :'own_first' = :'own_all' AS same_rows_with_own_writes,
       :'own_first' <> (SELECT string_agg(q || ': ' || result, E'\n' ORDER BY q)
                          FROM first_rows WHERE mode = 'first') AS own_writes_seen;
SELECT regexp_replace(regexp_replace(:'own_first', '^counts: [^\n]*\n', ''),
                      'limit 2: [^\n]*\n', '') AS own_writes_results;
DROP FUNCTION probe_results();
DROP TABLE first_rows, probe;
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
RESET enable_memoize;

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

-- Kept group entries: a lookup of a value read before is served again without a request
-- while the index partition is unchanged (one 8-byte one-sided read of its group version;
-- a request per lookup without it), and a commit from another session is seen at once.
CREATE EXTENSION dblink;
CREATE TABLE kept (k int, v text) USING ramp;
CREATE INDEX kept_k ON kept USING ramp_hash (k);
INSERT INTO kept SELECT g % 50, 'v' || g FROM generate_series(1, 500) g;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM kept WHERE k = 7;
SELECT count(*) FROM kept WHERE k = 8;
SELECT count(*) FROM kept WHERE k = 9;
CREATE TEMP TABLE ops_before AS SELECT sum(ops) AS n FROM ramp.cluster_status();
CREATE TEMP TABLE ops_idle AS SELECT sum(ops) AS n FROM ramp.cluster_status();
SELECT sum((SELECT count(*) FROM kept WHERE k = g % 3 + 7)) FROM generate_series(1, 60) g;
-- Server operations of the 60 lookups (the two status reads between subtracted): well
-- below one per lookup.
SELECT (SELECT sum(ops) FROM ramp.cluster_status()) - i.n - (i.n - b.n) < 30 AS served_kept
  FROM ops_before b, ops_idle i;
SELECT dblink_connect('other', format('dbname=%s port=%s host=%s', current_database(),
       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT dblink_exec('other', 'INSERT INTO kept VALUES (7, ''other session'')');
SELECT count(*) FROM kept WHERE k = 7;
SELECT v FROM kept WHERE k = 7 AND v = 'other session';
SELECT dblink_exec('other', 'DELETE FROM kept WHERE k = 8 AND v = ''v8''');
SELECT count(*) FROM kept WHERE k = 8;
SELECT dblink_disconnect('other');
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE kept;
DROP EXTENSION dblink;

-- Index statistics (pg_stat_user_indexes): a ramp_hash scan counts as an index scan, as a
-- btree's does, and the rows it hands out are counted.
CREATE TABLE ist (k int, v text) USING ramp;
CREATE INDEX ist_k ON ist USING ramp_hash (k);
INSERT INTO ist SELECT g % 10, 'v' || g FROM generate_series(1, 100) g;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM ist WHERE k = 3;
SELECT count(*) FROM ist WHERE k = 4;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SELECT count(*) FROM ist WHERE k = 5;
RESET enable_indexscan;
RESET enable_seqscan;
SELECT pg_stat_force_next_flush();
SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'ist_k';
DROP TABLE ist;

DROP TABLE orders, fresh;
DROP EXTENSION pg_ramp;
