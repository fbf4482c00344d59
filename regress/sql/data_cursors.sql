-- What PostgreSQL's own regression schedule found, run with default_table_access_method =
-- ramp: cursors that fetch backward, and parallel index builds in a transaction that wrote
-- the table. Each result is compared with a heap twin.
CREATE EXTENSION pg_ramp;

CREATE TABLE cur_ramp (a int, b text) USING ramp;
CREATE TABLE cur_heap (a int, b text) USING heap;
INSERT INTO cur_ramp SELECT g, 'r' || g FROM generate_series(1, 50) g;
INSERT INTO cur_heap SELECT * FROM cur_ramp;

-- A cursor declared without SCROLL over a plan that can go backward is scrollable: FETCH
-- PRIOR, ABSOLUTE and MOVE BACKWARD work on ramp tables as on heap (the sequential scan runs
-- forward once; a Material node on top serves the rest).
CREATE FUNCTION cursor_walk(tab regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  c refcursor := 'walk';
  out text := '';
  r record;
BEGIN
  EXECUTE format('DECLARE walk CURSOR FOR SELECT a FROM %s WHERE a %% 5 = 0', tab);
  FOR r IN EXECUTE 'FETCH 3 FROM walk' LOOP out := out || r.a || ' '; END LOOP;
  FOR r IN EXECUTE 'FETCH PRIOR FROM walk' LOOP out := out || 'prior:' || r.a || ' '; END LOOP;
  FOR r IN EXECUTE 'FETCH ABSOLUTE 7 FROM walk' LOOP out := out || 'abs7:' || r.a || ' '; END LOOP;
  FOR r IN EXECUTE 'FETCH BACKWARD 2 FROM walk' LOOP out := out || 'back:' || r.a || ' '; END LOOP;
  EXECUTE 'MOVE BACKWARD ALL IN walk';
  FOR r IN EXECUTE 'FETCH NEXT FROM walk' LOOP out := out || 'first:' || r.a || ' '; END LOOP;
  FOR r IN EXECUTE 'FETCH LAST FROM walk' LOOP out := out || 'last:' || r.a; END LOOP;
  EXECUTE 'CLOSE walk';
  RETURN out;
END
$$;
-- (The order of an unordered scan is the AM's own: compare sets, and the walk on sorted
-- input.)
BEGIN;
DECLARE s SCROLL CURSOR FOR SELECT a FROM cur_ramp ORDER BY a;
FETCH 3 FROM s;
FETCH PRIOR FROM s;
FETCH ABSOLUTE 40 FROM s;
FETCH BACKWARD 2 FROM s;
MOVE BACKWARD ALL IN s;
FETCH NEXT FROM s;
COMMIT;
CREATE VIEW cur_sorted_ramp AS SELECT * FROM (SELECT a FROM cur_ramp ORDER BY a) s;
CREATE VIEW cur_sorted_heap AS SELECT * FROM (SELECT a FROM cur_heap ORDER BY a) s;
BEGIN;
SELECT cursor_walk('cur_ramp') IS NOT NULL AS walked;
COMMIT;
-- Backward through an unsorted sequential scan of the ramp table: the rows fetched going
-- back are the rows fetched going forward, in reverse.
BEGIN;
DECLARE u SCROLL CURSOR FOR SELECT a FROM cur_ramp;
CREATE TEMP TABLE fwd AS SELECT 0 AS n, 0 AS a WHERE false;
DO $$
DECLARE r record; i int := 0; u refcursor := 'u';
BEGIN
  LOOP
    FETCH u INTO r; EXIT WHEN NOT FOUND;
    i := i + 1; INSERT INTO fwd VALUES (i, r.a);
  END LOOP;
  LOOP
    FETCH PRIOR FROM u INTO r; EXIT WHEN NOT FOUND;
    IF r.a IS DISTINCT FROM (SELECT a FROM fwd WHERE n = i) THEN
      RAISE EXCEPTION 'backward row % is %, forward it was %', i, r.a, (SELECT a FROM fwd WHERE n = i);
    END IF;
    i := i - 1;
  END LOOP;
  IF i <> 0 THEN RAISE EXCEPTION 'backward stopped at %', i; END IF;
END
$$;
SELECT count(*), count(DISTINCT a), sum(a) FROM fwd;
ROLLBACK;
-- UPDATE/DELETE ... WHERE CURRENT OF a scrollable cursor, after moving back.
BEGIN;
DECLARE w SCROLL CURSOR FOR SELECT a, b FROM cur_ramp WHERE a <= 3;
FETCH 2 FROM w \g /dev/null
FETCH PRIOR FROM w \g /dev/null
UPDATE cur_ramp SET b = 'current' WHERE CURRENT OF w;
FETCH LAST FROM w \g /dev/null
DELETE FROM cur_ramp WHERE CURRENT OF w;
SELECT count(*) FILTER (WHERE b = 'current') AS updated, count(*) AS rows FROM cur_ramp;
ROLLBACK;
-- NO SCROLL stays forward-only, with PostgreSQL's own error.
BEGIN;
DECLARE n NO SCROLL CURSOR FOR SELECT a FROM cur_ramp;
FETCH 1 FROM n \g /dev/null
FETCH PRIOR FROM n;
ROLLBACK;
-- The same walk over a sorted subquery on both tables.
SELECT (SELECT cursor_walk('cur_sorted_ramp')) = (SELECT cursor_walk('cur_sorted_heap')) AS same_walk;

-- CREATE INDEX after writing the table in the same transaction, with parallel maintenance
-- workers allowed: the build runs in the leader (workers cannot see the buffered writes).
BEGIN;
INSERT INTO cur_ramp SELECT g, 'w' || g FROM generate_series(51, 20000) g;
SET LOCAL max_parallel_maintenance_workers = 2;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL maintenance_work_mem = '64MB';
CREATE INDEX cur_ramp_a ON cur_ramp (a);
SET LOCAL enable_seqscan = off;
SELECT count(*), sum(a) FROM cur_ramp WHERE a > 19990;
COMMIT;
-- and a materialized view (a ramp table by default here) indexed in its own transaction.
SET default_table_access_method = ramp;
BEGIN;
CREATE MATERIALIZED VIEW cur_mv AS SELECT a % 10 AS k, count(*) AS n FROM cur_ramp GROUP BY 1;
SET LOCAL max_parallel_maintenance_workers = 2;
SET LOCAL min_parallel_table_scan_size = 0;
CREATE UNIQUE INDEX ON cur_mv (k);
SELECT sum(n) FROM cur_mv;
COMMIT;
RESET default_table_access_method;
SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = 'cur_mv';

-- currtid2() of a TID past the table's end is an error, as on heap.
CREATE TABLE cur_tid (a int) USING ramp;
SELECT currtid2('cur_tid'::text, '(0,1)'::tid);
INSERT INTO cur_tid VALUES (1);
SELECT currtid2('cur_tid'::text, ctid) = ctid AS own_tid_valid FROM cur_tid;
SELECT currtid2('cur_tid'::text, '(100000,1)'::tid);
DROP TABLE cur_tid;

-- WHERE CURRENT OF on tables created in the same transaction, after fetching backwards into
-- an earlier child of an inheritance tree (PostgreSQL's portals test, bug #15395): the TID
-- check of a table that has only the transaction's own rows found no blocks and refused it.
BEGIN;
CREATE TABLE current_check (currentid int, payload text) USING ramp;
CREATE TABLE current_check_1 () INHERITS (current_check) USING ramp;
CREATE TABLE current_check_2 () INHERITS (current_check) USING ramp;
INSERT INTO current_check_1 SELECT i, 'p' || i FROM generate_series(1,9) i;
INSERT INTO current_check_2 SELECT i, 'P' || i FROM generate_series(10,19) i;
DECLARE c1 SCROLL CURSOR FOR SELECT * FROM current_check;
FETCH ABSOLUTE 12 FROM c1;
FETCH ABSOLUTE 8 FROM c1;
DELETE FROM current_check WHERE CURRENT OF c1 RETURNING *;
FETCH ABSOLUTE 13 FROM c1;
FETCH ABSOLUTE 1 FROM c1;
DELETE FROM current_check WHERE CURRENT OF c1 RETURNING *;
SELECT * FROM current_check ORDER BY currentid;
ROLLBACK;

DROP MATERIALIZED VIEW cur_mv;
DROP VIEW cur_sorted_ramp, cur_sorted_heap;
DROP FUNCTION cursor_walk(regclass);
DROP TABLE cur_ramp, cur_heap;
DROP EXTENSION pg_ramp;
