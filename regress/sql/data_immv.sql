-- Materialized views maintained in the base rows' RAMP PUT (ramp.create_immv): every
-- supported construct (also self-joins, subqueries in FROM, CTEs, EXISTS / NOT EXISTS /
-- IN / NOT IN, outer joins, a nested aggregate, count(DISTINCT)), random DML (multi-row inserts, updates of grouping and join columns,
-- deletes, savepoint rollbacks, aborted transactions, COPY, TRUNCATE) each followed by
-- ramp.verify_immv (rows where the view and a recomputation differ: none), a corrupted
-- log that verify_immv must catch, bad input, privileges and DROP.
CREATE EXTENSION pg_ramp;
\set VERBOSITY terse
CREATE SCHEMA immv;
SET search_path = immv, public;

CREATE TABLE orders (id int, cust int, amount numeric, note text) USING ramp;
CREATE TABLE cust (id int, region int, name text) USING ramp;
CREATE TABLE region (id int, label text) USING ramp;
CREATE TABLE items (oid int, k int, qty int) USING ramp;
INSERT INTO orders SELECT i, i % 20, (i * 7) % 100 + 0.5, CASE WHEN i % 9 = 0 THEN NULL ELSE 'n' || i % 4 END
  FROM generate_series(1, 300) i;
INSERT INTO cust SELECT i, i % 4, 'c' || i FROM generate_series(0, 19) i;
INSERT INTO region SELECT i, 'r' || i FROM generate_series(0, 3) i;
INSERT INTO items SELECT i % 250, CASE WHEN i % 50 = 0 THEN NULL ELSE i % 23 END, i % 5
  FROM generate_series(1, 400) i;

-- One view per construct; create_immv returns the number of rows of the view.
SELECT ramp.create_immv('v_select', 'SELECT id, amount FROM orders WHERE amount > 50');
SELECT ramp.create_immv('v_bag', 'SELECT cust % 3 AS k, note FROM orders');  -- duplicates kept
SELECT ramp.create_immv('v_distinct', 'SELECT DISTINCT cust % 5 AS k, note FROM orders');
SELECT ramp.create_immv('v_join3',
  'SELECT o.id, c.name, r.label FROM orders o JOIN cust c ON o.cust = c.id
     JOIN region r ON c.region = r.id WHERE o.amount < 80');
SELECT ramp.create_immv('v_agg',
  'SELECT cust, count(*) AS n, count(note) AS notes, sum(amount) AS total, avg(amount) AS mean,
          min(amount) AS lo, max(note) AS hi FROM orders GROUP BY cust');
SELECT ramp.create_immv('v_having',
  'SELECT r.label, c.region % 2 AS parity, sum(o.amount) / count(*) AS per_order, count(*) AS n
     FROM orders o, cust c, region r WHERE o.cust = c.id AND c.region = r.id
    GROUP BY r.label, c.region % 2 HAVING sum(o.amount) > 3000');
SELECT ramp.create_immv('v_global', 'SELECT count(*) AS n, sum(amount) AS s, max(id) AS top FROM orders');
SELECT ramp.create_immv('v_nullgroup',
  'SELECT note, count(*) AS n, min(id) AS first FROM orders GROUP BY note ORDER BY note');
-- A table twice (self-joins), a CTE and a subquery in FROM.
SELECT ramp.create_immv('v_self', 'SELECT a.id, b.id AS other FROM cust a JOIN cust b
  ON a.region = b.region AND a.id < b.id');
SELECT ramp.create_immv('v_sub',
  'WITH big AS (SELECT id, cust, amount FROM orders WHERE amount > 20)
   SELECT r1.label AS a, r2.label AS b, count(*) AS n, sum(b.amount) AS s
     FROM big b JOIN (SELECT id, region FROM cust) c ON b.cust = c.id, region r1, region r2
    WHERE c.region = r1.id AND r2.id = (c.region + 1) % 4 GROUP BY 1, 2');
-- Subqueries in WHERE: EXISTS (with a max: groups that lose rows are recomputed),
-- NOT EXISTS, IN and NOT IN (NULLs in the subquery's column).
SELECT ramp.create_immv('v_exists',
  'SELECT cust, count(*) AS n, max(amount) AS top FROM orders o
    WHERE EXISTS (SELECT 1 FROM items i WHERE i.oid = o.id AND i.qty > 2) GROUP BY cust');
SELECT ramp.create_immv('v_notexists',
  'SELECT id, cust FROM orders o WHERE NOT EXISTS (SELECT FROM items i WHERE i.oid = o.id)');
SELECT ramp.create_immv('v_in',
  'SELECT id, note FROM orders WHERE cust NOT IN (SELECT region * 5 FROM cust WHERE id < 12)
      AND cust IN (SELECT k FROM items WHERE qty = 4 AND oid < 60)');
-- Outer joins, a nested aggregate over a LEFT JOIN (as TPC-H Q13), count(DISTINCT).
SELECT ramp.create_immv('v_left', 'SELECT c.id, c.name, o.id AS oid, o.amount
  FROM cust c LEFT JOIN orders o ON o.cust = c.id AND o.amount > 50');
SELECT ramp.create_immv('v_full', 'SELECT r.label, c.name FROM region r FULL JOIN cust c ON c.region = r.id');
SELECT ramp.create_immv('v_nested',
  'SELECT n, count(*) AS custs FROM (SELECT c.id, count(o.id) AS n FROM cust c
     LEFT JOIN orders o ON o.cust = c.id AND o.note <> ''n1'' GROUP BY c.id) x GROUP BY n');
SELECT ramp.create_immv('v_cdist', 'SELECT cust % 5 AS k, count(DISTINCT note) AS notes FROM orders
  WHERE cust NOT IN (SELECT k FROM items WHERE qty = 1 AND oid < 40) GROUP BY cust % 5');
SELECT name, base_tables, query IS NOT NULL AS has_query FROM ramp.immvs ORDER BY name;
SELECT * FROM v_nested ORDER BY n;
SELECT * FROM v_having ORDER BY label, parity;
SELECT * FROM v_nullgroup ORDER BY note;

-- The check run after each step: differing rows per view (0 everywhere when correct).
CREATE FUNCTION diffs() RETURNS TABLE (view text, differing bigint) LANGUAGE sql AS $$
  SELECT i.name, (SELECT count(*) FROM ramp.verify_immv(i.name)) FROM ramp.immvs i ORDER BY 1
$$;
SELECT * FROM diffs();

-- Random DML. Each statement fires the views' triggers; the seed makes the run repeatable.
SELECT setseed(0.14);
DO $$
DECLARE
  step int;
  r float8;
BEGIN
  FOR step IN 1 .. 80 LOOP
    r := random();
    IF r < 0.25 THEN
      INSERT INTO orders SELECT 1000 + step * 10 + i, (random() * 24)::int,
                                round((random() * 120)::numeric, 1),
                                CASE WHEN random() < 0.2 THEN NULL ELSE 'n' || (random() * 5)::int END
        FROM generate_series(1, 1 + (random() * 6)::int) i;
    ELSIF r < 0.4 THEN
      UPDATE orders SET cust = (random() * 24)::int WHERE id % 13 = step % 13;   -- group and join column
    ELSIF r < 0.5 THEN
      UPDATE orders SET amount = amount + 1, note = 'u' || step % 3 WHERE id % 17 = step % 17;
    ELSIF r < 0.6 THEN
      DELETE FROM orders WHERE id % 23 = step % 23;
    ELSIF r < 0.7 THEN
      UPDATE cust SET region = (random() * 4)::int WHERE id = step % 20;       -- other join table
    ELSIF r < 0.75 THEN
      BEGIN                                      -- a subtransaction rolled back by an error
        DELETE FROM orders WHERE cust = step % 20;
        INSERT INTO orders VALUES (-1, 1, 1, 'x');
        PERFORM 1 / 0;
      EXCEPTION WHEN division_by_zero THEN NULL;
      END;
    ELSIF r < 0.8 THEN
      UPDATE region SET id = id, label = 'r' || (random() * 4)::int WHERE id = step % 4;
    ELSIF r < 0.85 THEN
      INSERT INTO items SELECT (random() * 300)::int, (random() * 25)::int, (random() * 5)::int
        FROM generate_series(1, 1 + (random() * 4)::int);
    ELSIF r < 0.9 THEN
      UPDATE items SET qty = (qty + 1) % 5, k = CASE WHEN random() < 0.1 THEN NULL ELSE k + 1 END
       WHERE oid % 11 = step % 11;
    ELSIF r < 0.95 THEN
      DELETE FROM items WHERE oid % 17 = step % 17;
    ELSE
      DELETE FROM orders WHERE id IN (SELECT id FROM orders ORDER BY amount DESC LIMIT 2);  -- maxima
    END IF;
  END LOOP;
END
$$;
SELECT * FROM diffs();

-- Savepoints and aborted transactions.
BEGIN;
INSERT INTO orders VALUES (5000, 3, 99.5, 'sp'), (5001, 3, 0.25, 'sp');
SAVEPOINT a;
DELETE FROM orders WHERE cust = 3;
UPDATE cust SET region = 0;
ROLLBACK TO a;
UPDATE orders SET cust = 4 WHERE id = 5000;
SAVEPOINT b;
TRUNCATE region;
ROLLBACK TO b;
COMMIT;
BEGIN;
DELETE FROM orders;
INSERT INTO cust VALUES (99, 1, 'never');
DELETE FROM items;
ROLLBACK;
SELECT * FROM diffs();

-- COPY, then TRUNCATE of a base table (the views are recomputed).
COPY orders FROM stdin;
6000	1	12.5	copied
6001	21	\N	\N
6002	2	100.5	copied
\.
SELECT * FROM diffs();
TRUNCATE cust;
SELECT count(*) AS join_rows FROM v_join3;
INSERT INTO cust SELECT i, (i * 3) % 4, 'c' || i FROM generate_series(0, 23) i;
SELECT * FROM diffs();
TRUNCATE items;
SELECT count(*) AS not_exists_rows FROM v_notexists;
INSERT INTO items SELECT i, i % 7, i % 5 FROM generate_series(1, 400, 3) i;
TRUNCATE orders;
SELECT * FROM v_global;
INSERT INTO orders SELECT i, i % 24, i % 50, 'n' || i % 2 FROM generate_series(1, 100) i;
DELETE FROM orders WHERE amount = 49;     -- every group's maximum of amount where it is 49
SELECT * FROM diffs();

-- Compaction merges the log; the views do not change.
-- (v_bag has no min/max: every statement appended rows.)
INSERT INTO orders VALUES (9001, 1, 5, 'a');
INSERT INTO orders VALUES (9002, 1, 6, 'b');
UPDATE orders SET cust = 2 WHERE id IN (9001, 9002);
SELECT count(*) AS log_rows FROM __ramp_immv_v_bag \gset
SELECT ramp.compact_immv('v_bag');
SELECT :log_rows AS log_rows_before, count(*) AS log_rows_after FROM __ramp_immv_v_bag;
SELECT * FROM diffs();

-- verify_immv catches a view that went wrong: a delta written behind its back.
INSERT INTO __ramp_immv_v_agg (__g1, __ramp_cnt, __c1, __m6) VALUES (7, 1, 1, 'zz');
SELECT side, row_data FROM ramp.verify_immv('v_agg') ORDER BY side;
SELECT ramp.refresh_immv('v_agg', true) AS rows_after_refresh;
SELECT count(*) AS differing FROM ramp.verify_immv('v_agg');

-- refresh without data empties the view and stops maintenance until refreshed with data.
SELECT ramp.refresh_immv('v_select', false);
INSERT INTO orders VALUES (7000, 1, 77, 'late');
SELECT count(*) AS rows_while_unpopulated FROM v_select;
SELECT count(*) AS triggers_while_unpopulated FROM pg_trigger
 WHERE tgfoid = 'ramp._immv_maintain()'::regprocedure AND tgargs::text LIKE '%v\\_select%';
SELECT ramp.refresh_immv('v_select', true) > 0 AS refilled;
INSERT INTO orders VALUES (7001, 1, 78, 'later');
SELECT * FROM diffs();

-- Concurrent writers (a second session through dblink). Writers of a table that sits on
-- the nullable side of an outer join or under a nested aggregate of some view wait for each
-- other (on one server): those views go first, so that the orders writers below do not.
DROP VIEW v_left, v_nested, v_cdist;
-- A new backend: the one above wrote several base tables of the join views in one
-- transaction (the savepoint tests), after which its transaction blocks take their views'
-- writer intents exclusive (see the end of this section).
\c
SET search_path = immv, public;
CREATE EXTENSION dblink;
-- Until the other session waits for one of our intents (wait event Extension; at most 30 s).
CREATE FUNCTION wait_for_waiter() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 300 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension');
    PERFORM pg_sleep(0.1);
  END LOOP;
END
$$;
SELECT dblink_connect('other', format('dbname=%s port=%s host=%s', current_database(),
       current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT dblink_exec('other', 'SET search_path = immv, public');
-- Same group, both commit: deltas are appended, so neither conflicts nor loses the other's
-- change, also when this one recomputes the group (its min/max lost a row) while the other
-- appends to it.
BEGIN;
DELETE FROM orders WHERE id = (SELECT min(id) FROM orders WHERE cust = 5);
SELECT dblink_exec('other', 'INSERT INTO orders VALUES (9100, 5, 0.5, ''other'')');
INSERT INTO orders VALUES (9101, 5, 2, 'mine');
COMMIT;
SELECT n, lo FROM v_agg WHERE cust = 5;
SELECT * FROM diffs();
-- Writers of two base tables of one join view: the second waits for the first's commit (an
-- intent per view on the cluster, shown as wait event "Extension") and its delta then joins
-- the first one's rows.
BEGIN;
INSERT INTO orders VALUES (9200, 40, 10, 'pair');          -- customer 40 does not exist yet
SELECT dblink_send_query('other', 'INSERT INTO cust VALUES (40, 1, ''c40'')');
SELECT wait_for_waiter();
SELECT count(*) AS waiting_writers FROM pg_stat_activity WHERE wait_event_type = 'Extension';
COMMIT;
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT * FROM v_join3 WHERE id = 9200;
SELECT * FROM diffs();
-- Writers of the table in EXISTS / NOT EXISTS of the same order wait for each other (an
-- order's first item must be counted once): the second one's delta then sees the first
-- one's item. The lock is per view and order (the subquery's i.oid = o.id): writers of
-- items of different orders do not wait (a wait would end in the statement timeout).
SELECT * FROM dblink_get_result('other') AS t(status text);  -- (done)
DELETE FROM items WHERE oid = 9300;
INSERT INTO orders VALUES (9300, 6, 70, 'ex');
BEGIN;
INSERT INTO items VALUES (9300, 1, 3);
SELECT dblink_send_query('other', 'INSERT INTO items VALUES (9300, 2, 4)');
SELECT wait_for_waiter();
SELECT wait_event_type, wait_event, count(*) AS waiting_writers FROM pg_stat_activity
 WHERE wait_event_type = 'Extension' GROUP BY 1, 2;
COMMIT;
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT * FROM dblink_get_result('other') AS t(status text);  -- (done)
SELECT n FROM v_exists WHERE cust = 6;
SELECT dblink_exec('other', 'SET statement_timeout = ''30s''');
BEGIN;
INSERT INTO items VALUES (9301, 1, 3);
SELECT dblink_exec('other', 'INSERT INTO items VALUES (9302, 2, 4)');
COMMIT;
SELECT * FROM diffs();
-- min/max: a writer that removes a row recomputes its group only when the row held the
-- group's min or max; removers of one group therefore wait for each other (an intent per
-- view and group), so that the second decides on the first one's result. Here this one
-- removes group 0's max (20: recomputed to 18) and the other then removes 18, which must
-- see 18 as the max and recompute again (without the wait it would skip: 18 < 20).
-- Removers of other groups do not wait (a wait would end in the statement timeout).
CREATE TABLE mm (id int PRIMARY KEY, g int, v int) USING ramp;
INSERT INTO mm SELECT i, i % 2, i FROM generate_series(1, 20) i;
SELECT ramp.create_immv('v_mm', 'SELECT g, max(v) AS hi, min(v) AS lo, count(*) AS n FROM mm GROUP BY g');
BEGIN;
DELETE FROM mm WHERE id = 20;
SELECT dblink_exec('other', 'DELETE FROM mm WHERE id = 19');   -- group 1: no wait
SELECT dblink_send_query('other', 'DELETE FROM mm WHERE id = 18');
SELECT wait_for_waiter();
SELECT count(*) AS waiting_writers FROM pg_stat_activity WHERE wait_event_type = 'Extension';
COMMIT;
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT * FROM dblink_get_result('other') AS t(status text);  -- (done)
SELECT * FROM v_mm ORDER BY g;
-- Removing rows below the max and above the min leaves both (no recomputation needed).
UPDATE mm SET v = v + 1 WHERE id IN (5, 6);
DELETE FROM mm WHERE id = 7;
SELECT * FROM v_mm ORDER BY g;
SELECT * FROM diffs();
-- A base table of a view keeps a row's id when an UPDATE changes no indexed column (the
-- views' triggers are statement triggers): a second writer of the row waits, then applies
-- its change on top of the first one's, as heap's EvalPlanQual does. (When the row moved to
-- a new row id, the second writer failed with 40001.)
BEGIN;
UPDATE mm SET v = v + 100 WHERE id = 5;
SELECT dblink_send_query('other', 'UPDATE mm SET v = v + 1000 WHERE id = 5');
SELECT wait_for_waiter();
COMMIT;
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT * FROM dblink_get_result('other') AS t(status text);  -- (done)
SELECT id, g, v FROM mm WHERE id = 5;
SELECT * FROM v_mm ORDER BY g;
SELECT * FROM diffs();
-- A transaction that writes two base tables of a join view (an order, then its customer)
-- holds the first table's writer intent when it asks for the second's; two of them at once
-- waited for each other (40P01 after deadlock_timeout, every time). Having written both in
-- one transaction, this backend's transaction blocks take the view's writer intent
-- exclusive at their first write: the other session's order waits for this whole
-- transaction, and neither deadlocks. (Without it, this session's INSERT INTO cust would
-- wait for the other's order, which waits for nothing: the statement timeout ends it.)
BEGIN;
INSERT INTO orders VALUES (9500, 45, 5, 'learn');
INSERT INTO cust VALUES (45, 2, 'c45');
COMMIT;
SET statement_timeout = '20s';
BEGIN;
INSERT INTO orders VALUES (9501, 46, 6, 'first');
SELECT dblink_send_query('other', 'BEGIN; INSERT INTO orders VALUES (9502, 46, 7, ''second'')');
SELECT wait_for_waiter();
SELECT count(*) AS waiting_writers FROM pg_stat_activity WHERE wait_event_type = 'Extension';
INSERT INTO cust VALUES (46, 3, 'c46');
COMMIT;
RESET statement_timeout;
SELECT * FROM dblink_get_result('other') AS t(status text);  -- BEGIN
SELECT * FROM dblink_get_result('other') AS t(status text);  -- INSERT
SELECT * FROM dblink_get_result('other') AS t(status text);  -- (done)
SELECT dblink_exec('other', 'UPDATE cust SET name = ''c46b'' WHERE id = 46');
SELECT dblink_exec('other', 'COMMIT');
SELECT id, name FROM v_join3 WHERE id IN (9500, 9501, 9502) ORDER BY id;
SELECT * FROM diffs();
SELECT dblink_disconnect('other');
DROP EXTENSION dblink;

-- Bad input: unsupported queries (0A000, naming the construct), a heap table, a name
-- clash, a query that is not a SELECT, an unknown view.
CREATE TABLE heap_t (id int, g int) USING heap;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT ramp.create_immv('bad', 'SELECT g, count(*) FROM heap_t GROUP BY g');
\set SHOW_CONTEXT errors
\set VERBOSITY terse
SELECT ramp.create_immv('bad', 'SELECT id, row_number() OVER () FROM orders');
SELECT ramp.create_immv('bad', 'SELECT id FROM orders LIMIT 3');
SELECT ramp.create_immv('bad', 'SELECT id, random() AS r FROM orders');
SELECT ramp.create_immv('bad', 'SELECT * FROM v_agg');
SELECT ramp.create_immv('bad', 'SELECT string_agg(note, '','') FROM orders');
SELECT ramp.create_immv('bad', 'SELECT id FROM orders WHERE amount > (SELECT avg(amount) FROM orders)');
SELECT ramp.create_immv('bad', 'SELECT id FROM orders o WHERE o.cust = 1 OR EXISTS (SELECT FROM cust c WHERE c.id = o.cust)');
SELECT ramp.create_immv('bad', 'SELECT id FROM orders o WHERE EXISTS (SELECT FROM orders p WHERE p.cust = o.cust AND p.id <> o.id)');
SELECT ramp.create_immv('bad', 'SELECT c.id, x.n FROM cust c, (SELECT cust, count(*) AS n FROM orders GROUP BY cust) x WHERE x.cust = c.id');
SELECT ramp.create_immv('bad', 'SELECT m, count(*) FROM (SELECT cust, max(amount) AS m FROM orders GROUP BY cust) x GROUP BY m');
SELECT ramp.create_immv('bad', 'SELECT c.id FROM cust c LEFT JOIN (orders o JOIN items i ON i.oid = o.id) ON o.cust = c.id');
SELECT ramp.create_immv('bad', 'SELECT id FROM (SELECT id FROM orders LIMIT 5) x');
SELECT ramp.create_immv('bad', 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT id FROM orders, r');
SELECT ramp.create_immv('bad', 'SELECT count(DISTINCT cust), sum(amount) FROM orders');
SELECT ramp.create_immv('bad', 'SELECT id FROM orders UNION SELECT id FROM cust');
SELECT ramp.create_immv('bad', 'SELECT id, id FROM orders');
SELECT ramp.create_immv('bad', 'DELETE FROM orders');
SELECT ramp.create_immv('bad', 'SELECT id FROM no_such_table');
SELECT ramp.create_immv('v_agg', 'SELECT id FROM orders');
SELECT ramp.verify_immv('orders');
SELECT to_regclass('bad') IS NULL AS nothing_left, count(*) AS catalog_rows FROM ramp.immvs;

-- Privileges: a writer with rights on a base table only keeps the views right (the
-- maintenance runs as the view's owner); a non-owner can neither refresh nor drop a view,
-- nor create one over a table it may not read.
CREATE ROLE immv_writer;
CREATE ROLE immv_other;
GRANT USAGE ON SCHEMA immv TO immv_writer, immv_other;
GRANT SELECT, INSERT, UPDATE, DELETE ON orders TO immv_writer;
SET ROLE immv_writer;
INSERT INTO orders VALUES (8000, 2, 50, 'writer'), (8001, 22, 60, 'writer');
UPDATE orders SET amount = 1, cust = 23 WHERE id = 8000;
DELETE FROM orders WHERE id = 8001;
INSERT INTO __ramp_immv_v_agg (__g1, __ramp_cnt) VALUES (1, 1);
RESET ROLE;
SELECT * FROM diffs();
GRANT USAGE ON SCHEMA ramp TO immv_other;
GRANT CREATE ON SCHEMA immv TO immv_other;
SET ROLE immv_other;
SELECT ramp.refresh_immv('v_agg', true);
SELECT ramp.compact_immv('v_agg');
DROP VIEW v_agg;
SELECT ramp.create_immv('mine', 'SELECT count(*) AS n FROM orders');
RESET ROLE;

-- DROP: a base table of a view cannot be dropped; DROP VIEW removes the log table, the
-- triggers and the catalog rows; the config tables are dumped by pg_dump.
DROP TABLE region;
DROP VIEW v_join3;
DROP VIEW v_having;
DROP VIEW v_sub, v_full;
DROP TABLE region;
SELECT to_regclass('__ramp_immv_v_join3') AS log_table,
       (SELECT count(*) FROM ramp.immvs WHERE name = 'immv.v_join3') AS catalog_rows,
       (SELECT count(*) FROM ramp.immv_sql WHERE immv = 'immv.v_join3') AS sql_rows,
       (SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relname = 'cust' AND t.tgname LIKE '%' || md5('immv.v_join3')) AS cust_triggers;
SELECT extconfig::regclass[] FROM pg_extension WHERE extname = 'pg_ramp';

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA immv CASCADE;
RESET client_min_messages;
SELECT count(*) AS views_left FROM ramp.immvs;
REVOKE USAGE ON SCHEMA ramp FROM immv_other;
DROP ROLE immv_writer;
DROP ROLE immv_other;
DROP EXTENSION pg_ramp;
