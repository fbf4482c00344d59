-- Statements whose command meets rows written by itself or by later commands of its own
-- transaction (PostgreSQL's regression SQL found these). Run once per access method (:am)
-- in its own schema; data_ownwrites.sql compares the two runs.
SET statement_timeout = '10s';  -- the hangs this guards against end here, not in the suite

-- 1. Transition tables of a partitioned table: rows updated in place (same partition)
-- must show their old values in OLD TABLE; rows that move, too.
CREATE TABLE pt (a int, b text) PARTITION BY LIST (a);
CREATE TABLE pt12 PARTITION OF pt FOR VALUES IN (1, 2) USING :am;
CREATE TABLE pt3 PARTITION OF pt FOR VALUES IN (3) USING :am;
INSERT INTO pt VALUES (1, 'one'), (2, 'two');
CREATE TABLE transitions (stmt int, side text, a int, b text);
CREATE FUNCTION log_transitions() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n int := (SELECT coalesce(max(stmt), 0) + 1 FROM transitions);
BEGIN
  IF TG_OP <> 'INSERT' THEN
    INSERT INTO transitions SELECT n, 'old', a, b FROM old_t;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO transitions SELECT n, 'new', a, b FROM new_t;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER pt_upd AFTER UPDATE ON pt REFERENCING OLD TABLE AS old_t NEW TABLE AS new_t
  FOR EACH STATEMENT EXECUTE FUNCTION log_transitions();
CREATE TRIGGER pt_del AFTER DELETE ON pt REFERENCING OLD TABLE AS old_t
  FOR EACH STATEMENT EXECUTE FUNCTION log_transitions();
UPDATE pt SET b = b || '!';
UPDATE pt SET a = 3, b = b || '>' WHERE a = 2;
-- In one transaction: an UPDATE, then an UPDATE and a DELETE of the rows it updated.
BEGIN;
UPDATE pt SET b = b || '?' WHERE a = 1;
UPDATE pt SET b = b || '#' WHERE a = 1;
DELETE FROM pt WHERE a = 1;
COMMIT;
SELECT * FROM transitions ORDER BY stmt, side DESC, a, b;

-- 2./3. ON CONFLICT DO UPDATE affecting one row twice: an error, for an existing key (the
-- first update keeps the row in place), a key the command inserts, and a key a writable
-- CTE of the same command inserts. Nothing of the statement stays.
CREATE TABLE u (i int, t text) USING :am;
CREATE UNIQUE INDEX u_i ON u (i);
INSERT INTO u VALUES (1, 'a'), (2, 'b');
INSERT INTO u VALUES (1, 'a'), (2, 'b'), (2, 'b') ON CONFLICT (i) DO UPDATE SET t = 'x';
INSERT INTO u VALUES (3, 'x'), (3, 'y') ON CONFLICT (i) DO UPDATE SET t = excluded.t;
WITH w AS (INSERT INTO u VALUES (4, 'cte') RETURNING i)
INSERT INTO u SELECT i, 'outer' FROM w ON CONFLICT (i) DO UPDATE SET t = excluded.t;
-- ... and for rows a function called by the command inserted or updated (later commands).
CREATE FUNCTION ins_key(k int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN INSERT INTO u VALUES (k, 'by function'); RETURN k; END $$;
CREATE FUNCTION upd_key(k int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN UPDATE u SET t = 'by function' WHERE i = k; RETURN k; END $$;
INSERT INTO u VALUES (ins_key(20), 'x') ON CONFLICT (i) DO UPDATE SET t = 'y';
INSERT INTO u VALUES (upd_key(1), 'x') ON CONFLICT (i) DO UPDATE SET t = 'y';
SELECT * FROM u ORDER BY i;
-- Rows written by earlier commands of the transaction are fine to update.
BEGIN;
INSERT INTO u VALUES (5, 'e');
UPDATE u SET t = 'a2' WHERE i = 1;
INSERT INTO u VALUES (1, 'a'), (5, 'e'), (6, 'f') ON CONFLICT (i) DO UPDATE SET t = excluded.t || '+';
COMMIT;
INSERT INTO u VALUES (7, 'g'), (7, 'h') ON CONFLICT (i) DO NOTHING;
SELECT * FROM u ORDER BY i;
-- Under REPEATABLE READ, a conflict with a row of the transaction's own is no
-- serialization failure.
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO u VALUES (8, 'h'), (8, 'i') ON CONFLICT (i) DO NOTHING;
INSERT INTO u VALUES (8, 'j') ON CONFLICT (i) DO NOTHING;
UPDATE u SET t = 'h2' WHERE i = 8;
INSERT INTO u VALUES (8, 'k') ON CONFLICT (i) DO UPDATE SET t = u.t || '+';
SAVEPOINT s;
INSERT INTO u VALUES (9, 'l'), (9, 'm') ON CONFLICT (i) DO UPDATE SET t = excluded.t;
ROLLBACK TO s;
COMMIT;
SELECT * FROM u ORDER BY i;
-- MERGE: the same rule.
MERGE INTO u USING (VALUES (1), (1)) s(k) ON u.i = s.k WHEN MATCHED THEN UPDATE SET t = 'm';
SELECT * FROM u ORDER BY i;

-- 4. A cursor FOR UPDATE does not return rows a later command of its transaction updated
-- (in place, or with an index on the changed column) or deleted.
CREATE TABLE c (a int, b int) USING :am;
CREATE INDEX c_b ON c (b);
INSERT INTO c VALUES (1, 1), (2, 2), (3, 3), (4, 4);
BEGIN;
DECLARE c1 NO SCROLL CURSOR FOR SELECT * FROM c ORDER BY a FOR UPDATE;
DECLARE c2 NO SCROLL CURSOR FOR SELECT * FROM c ORDER BY a FOR SHARE;
DECLARE c3 NO SCROLL CURSOR FOR SELECT * FROM c ORDER BY a;
UPDATE c SET a = a + 10 WHERE a = 1;
UPDATE c SET b = b + 10 WHERE a = 2;
DELETE FROM c WHERE a = 3;
FETCH ALL FROM c1;
FETCH ALL FROM c2;
FETCH ALL FROM c3;
COMMIT;
-- A writable CTE and the outer query of one command: the outer query's lock skips the row.
WITH up AS (UPDATE c SET a = a + 100 WHERE a = 4 RETURNING a)
SELECT * FROM c WHERE a = 4 FOR UPDATE;
-- The same row updated twice by one command: once.
WITH up AS (UPDATE c SET b = b + 1 WHERE a = 104 RETURNING a)
UPDATE c SET b = b + 1000 WHERE a = 104;
SELECT * FROM c ORDER BY a;

-- 5. Row movement where a BEFORE DELETE trigger of the source partition skips the row:
-- the row stays; with a trigger that lets it go, it moves.
CREATE TABLE rm (a int, b text) PARTITION BY LIST (a);
CREATE TABLE rm1 PARTITION OF rm FOR VALUES IN (1) USING :am;
CREATE TABLE rm2 PARTITION OF rm FOR VALUES IN (2) USING :am;
INSERT INTO rm VALUES (1, 'x'), (1, 'y');
CREATE FUNCTION skip_y() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.b = 'y' THEN RETURN NULL; END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER rm1_del BEFORE DELETE ON rm1 FOR EACH ROW EXECUTE FUNCTION skip_y();
UPDATE rm SET a = 2;
SELECT tableoid::regclass AS part, * FROM rm ORDER BY b;
-- BEFORE UPDATE/DELETE row triggers of a plain table (they lock the row too).
CREATE TABLE bt (a int, b text) USING :am;
INSERT INTO bt VALUES (1, 'keep'), (2, 'change'), (3, 'drop');
CREATE FUNCTION bt_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.b = 'keep' THEN RETURN NULL; END IF;
  IF TG_OP = 'UPDATE' THEN NEW.b := NEW.b || ' (checked)'; RETURN NEW; END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER bt_guard BEFORE UPDATE OR DELETE ON bt FOR EACH ROW EXECUTE FUNCTION bt_guard();
UPDATE bt SET b = b || '!';
DELETE FROM bt WHERE a <> 2;
SELECT * FROM bt ORDER BY a;
RESET statement_timeout;
