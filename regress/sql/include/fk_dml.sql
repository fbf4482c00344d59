-- Foreign keys, row triggers and system columns. Run once per pair of access methods, in
-- its own schema: :pk_am for referenced tables, :fk_am for referencing tables and for the
-- tables with triggers; data_fk.sql compares the runs.
SET statement_timeout = '10s';  -- a hang fails the suite here

-- 1. Referential actions: ON DELETE / ON UPDATE CASCADE, ON DELETE SET NULL, NO ACTION.
CREATE TABLE parent (id int PRIMARY KEY, name text) USING :pk_am;
CREATE TABLE child (id int PRIMARY KEY, note text,
                    pid int REFERENCES parent ON DELETE CASCADE ON UPDATE CASCADE) USING :fk_am;
CREATE TABLE orphan (id int PRIMARY KEY, note text,
                     pid int REFERENCES parent ON DELETE SET NULL) USING :fk_am;
CREATE TABLE guard (id int PRIMARY KEY, note text, pid int REFERENCES parent) USING :fk_am;
INSERT INTO parent VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four');
INSERT INTO child VALUES (10, 'a', 1), (11, 'b', 2), (12, 'c', 2);
INSERT INTO orphan VALUES (20, 'd', 3);
INSERT INTO guard VALUES (30, 'e', 4);
INSERT INTO child VALUES (13, 'no parent', 99);
-- An UPDATE of a referencing table (PostgreSQL reads the old row's xmin).
UPDATE child SET note = note || '!';
UPDATE child SET pid = 3 WHERE id = 12;
UPDATE child SET pid = 99 WHERE id = 12;
UPDATE parent SET id = 5 WHERE id = 2;
UPDATE parent SET name = 'uno' WHERE id = 1;
DELETE FROM parent WHERE id = 1;
DELETE FROM parent WHERE id = 3;
DELETE FROM parent WHERE id = 4;
UPDATE parent SET id = 6 WHERE id = 4;
UPDATE guard SET pid = 5, note = 'moved' WHERE id = 30;
DELETE FROM parent WHERE id = 4;
SELECT * FROM parent ORDER BY id;
SELECT * FROM child ORDER BY id;
SELECT * FROM orphan ORDER BY id;
SELECT * FROM guard ORDER BY id;

-- A key within one table (a tree): deleting the root cascades level by level, each level
-- deleting rows of the table the statement is deleting from.
CREATE TABLE tree (id int PRIMARY KEY, up int REFERENCES tree ON DELETE CASCADE) USING :fk_am;
INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 1), (4, 2), (5, 4), (6, NULL), (7, 6);
DELETE FROM tree WHERE id = 1;
UPDATE tree SET up = 5 WHERE id = 7;
SELECT * FROM tree ORDER BY id;
-- A partitioned referenced table (rows moving between partitions), ON DELETE SET DEFAULT,
-- ON UPDATE SET NULL, MATCH FULL on two columns.
CREATE TABLE pparent (id int PRIMARY KEY, k int, UNIQUE (id, k)) PARTITION BY RANGE (id);
CREATE TABLE pparent1 PARTITION OF pparent FOR VALUES FROM (0) TO (100) USING :pk_am;
CREATE TABLE pparent2 PARTITION OF pparent FOR VALUES FROM (100) TO (200) USING :pk_am;
INSERT INTO pparent VALUES (0, 0), (1, 10), (2, 20), (150, 30);
CREATE TABLE pchild (id int PRIMARY KEY,
                     p int DEFAULT 0 REFERENCES pparent ON DELETE SET DEFAULT ON UPDATE SET NULL,
                     pk int, FOREIGN KEY (p, pk) REFERENCES pparent (id, k) MATCH FULL)
  USING :fk_am;
INSERT INTO pchild VALUES (1, 1, 10), (2, 2, 20), (3, 150, 30);
INSERT INTO pchild VALUES (4, 1, NULL);
UPDATE pchild SET pk = NULL, p = NULL WHERE id = 3;
DELETE FROM pparent WHERE id = 150;
UPDATE pparent SET id = 120 WHERE id = 1;
ALTER TABLE pchild DROP CONSTRAINT pchild_p_pk_fkey;
UPDATE pparent SET id = 121 WHERE id = 2;
DELETE FROM pparent WHERE id = 121;
COPY pparent FROM stdin;
3	30
130	31
\.
SELECT tableoid::regclass AS part, * FROM pparent ORDER BY id;
SELECT * FROM pchild ORDER BY id;

-- 2. Deferred constraints. A row inserted with a missing key, then updated by the same
-- transaction without changing the key: the UPDATE's check still runs at COMMIT (the old
-- row's xmin is the transaction's own), and fails.
CREATE TABLE dchild (id int PRIMARY KEY, note text,
                     pid int REFERENCES parent DEFERRABLE INITIALLY DEFERRED) USING :fk_am;
BEGIN;
INSERT INTO dchild VALUES (40, 'missing', 77);
UPDATE dchild SET note = 'still missing' WHERE id = 40;
COMMIT;
BEGIN;
INSERT INTO dchild VALUES (41, 'parent comes later', 77);
UPDATE dchild SET note = 'parent came' WHERE id = 41;
INSERT INTO parent VALUES (77, 'late');
COMMIT;
BEGIN;
DELETE FROM parent WHERE id = 77;
INSERT INTO parent VALUES (77, 'back');
COMMIT;
BEGIN;
DELETE FROM parent WHERE id = 77;
COMMIT;
BEGIN;
INSERT INTO dchild VALUES (42, 'checked now', 88);
SET CONSTRAINTS ALL IMMEDIATE;
ROLLBACK;
SELECT * FROM dchild ORDER BY id;
SELECT * FROM parent ORDER BY id;

-- 3. Row triggers with OLD and NEW: BEFORE triggers that change NEW or skip the row,
-- AFTER triggers (one with WHEN, one deferred to COMMIT) that log what they see.
CREATE TABLE trg (id int PRIMARY KEY, v int, note text) USING :fk_am;
CREATE SEQUENCE stmt;
CREATE TABLE trg_log (stmt int DEFAULT currval('stmt'), op text, old_v int, new_v int,
                      note text) USING heap;
CREATE FUNCTION next_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM nextval('stmt'); RETURN NULL; END $$;
CREATE FUNCTION trg_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.v < 0 THEN RETURN NULL; END IF;
    NEW.note := NEW.note || ' [ins]';
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' THEN
    IF OLD.note LIKE 'frozen%' THEN RETURN NULL; END IF;
    NEW.v := NEW.v + 1000;
    RETURN NEW;
  END IF;
  IF OLD.v = 2 THEN RETURN NULL; END IF;
  RETURN OLD;
END $$;
CREATE FUNCTION trg_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO trg_log (op, old_v, new_v, note)
  VALUES (TG_NAME || ' ' || TG_OP,
          CASE WHEN TG_OP <> 'INSERT' THEN OLD.v END,
          CASE WHEN TG_OP <> 'DELETE' THEN NEW.v END,
          CASE WHEN TG_OP <> 'DELETE' THEN NEW.note ELSE OLD.note END);
  RETURN NULL;
END $$;
CREATE TRIGGER s BEFORE INSERT OR UPDATE OR DELETE ON trg
  FOR EACH STATEMENT EXECUTE FUNCTION next_stmt();
CREATE TRIGGER b BEFORE INSERT OR UPDATE OR DELETE ON trg
  FOR EACH ROW EXECUTE FUNCTION trg_before();
CREATE TRIGGER a AFTER INSERT OR UPDATE OR DELETE ON trg
  FOR EACH ROW EXECUTE FUNCTION trg_after();
CREATE TRIGGER w AFTER UPDATE ON trg
  FOR EACH ROW WHEN (OLD.note IS DISTINCT FROM NEW.note) EXECUTE FUNCTION trg_after();
CREATE CONSTRAINT TRIGGER d AFTER INSERT OR UPDATE OR DELETE ON trg
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION trg_after();
WITH r AS (INSERT INTO trg VALUES (1, 1, 'a'), (2, 2, 'b'), (3, -3, 'skipped'), (4, 4, 'frozen')
           RETURNING *)
SELECT * FROM r ORDER BY id;
WITH r AS (UPDATE trg SET v = v * 10 RETURNING *) SELECT * FROM r ORDER BY id;
UPDATE trg SET note = note || '+' WHERE id = 1 RETURNING *;
WITH r AS (DELETE FROM trg WHERE id IN (1, 2) RETURNING *) SELECT * FROM r ORDER BY id;
COPY trg FROM stdin;
8	8	copied
9	-9	skipped
\.
DELETE FROM trg WHERE id = 8;
BEGIN;
INSERT INTO trg VALUES (5, 5, 'e');
UPDATE trg SET v = 6 WHERE id = 5;
UPDATE trg SET note = 'e2' WHERE id = 5;
INSERT INTO trg VALUES (6, 6, 'f');
DELETE FROM trg WHERE id = 6;
COMMIT;
SELECT * FROM trg ORDER BY id;
SELECT * FROM trg_log ORDER BY stmt, op, old_v, new_v, note;

-- 4. System columns: xmin is the transaction's own xid for row versions it wrote (RETURNING
-- too), not for committed ones; xmax is 0 for rows it did not lock; cmin the command that
-- wrote the row; a row is found by its ctid.
CREATE TABLE sc (id int, v int) USING :fk_am;
INSERT INTO sc VALUES (1, 1), (2, 2);
BEGIN;
INSERT INTO sc VALUES (3, 3);
SELECT id, xmin = pg_current_xact_id()::xid AS own, xmax, cmin FROM sc ORDER BY id;
UPDATE sc SET v = 20 WHERE id = 2 RETURNING id, v, xmin = pg_current_xact_id()::xid AS own;
SELECT id, xmin = pg_current_xact_id()::xid AS own, xmax, cmin FROM sc ORDER BY id;
SELECT count(*) FROM sc WHERE ctid = (SELECT ctid FROM sc WHERE id = 3);
COMMIT;
SELECT id, v, xmin = pg_current_xact_id()::xid AS own, xmax FROM sc ORDER BY id;
SELECT count(*) FROM sc WHERE ctid = (SELECT ctid FROM sc WHERE id = 1);
-- xmin changes with every committed UPDATE of a row, and only then (a row version token).
CREATE TABLE sc_seen AS SELECT id, xmin::text AS seen FROM sc;
UPDATE sc SET v = v + 1 WHERE id = 1;
SELECT id, sc.xmin::text = seen AS same_xmin FROM sc JOIN sc_seen USING (id) ORDER BY id;
-- xmax: 0, but the transaction's own for the new version of a row it locked (an upsert's
-- update, a BEFORE trigger's row, FOR UPDATE), so that upserts tell inserts from updates.
CREATE UNIQUE INDEX sc_id ON sc (id);
WITH r AS (INSERT INTO sc VALUES (1, 0), (4, 4) ON CONFLICT (id) DO UPDATE SET v = excluded.v
           RETURNING id, v, xmax = 0 AS inserted)
SELECT * FROM r ORDER BY id;
BEGIN;
SELECT id FROM sc WHERE id = 2 FOR UPDATE;
WITH r AS (UPDATE sc SET v = v + 1 WHERE id IN (2, 3)
           RETURNING id, v, xmax = pg_current_xact_id()::xid AS locked)
SELECT * FROM r ORDER BY id;
COMMIT;
WITH r AS (UPDATE trg SET v = 7 RETURNING id, xmax = pg_current_xact_id()::xid AS locked)
SELECT * FROM r ORDER BY id;

-- 5. Two sessions (the other one through dblink, with lock_timeout): a referenced row that
-- an open transaction's key check locked cannot be deleted meanwhile, and its deletion fails
-- after that commit; a referenced row deleted by an open transaction blocks an insertion
-- that refers to it, which fails after that commit.
CREATE TABLE cparent (id int PRIMARY KEY) USING :pk_am;
CREATE TABLE cchild (id int PRIMARY KEY, pid int REFERENCES cparent) USING :fk_am;
INSERT INTO cparent VALUES (1), (2);
SELECT dblink_connect('other', format(
  'dbname=%s port=%s host=%s options=''-c search_path=%s -c lock_timeout=200''',
  current_database(), current_setting('port'),
  split_part(current_setting('unix_socket_directories'), ',', 1), current_schema()));
\set VERBOSITY terse
BEGIN;
INSERT INTO cchild VALUES (10, 1);
SELECT dblink_exec('other', 'DELETE FROM cparent WHERE id = 1', false);
COMMIT;
SELECT dblink_exec('other', 'DELETE FROM cparent WHERE id = 1', false);
BEGIN;
DELETE FROM cparent WHERE id = 2;
SELECT dblink_exec('other', 'INSERT INTO cchild VALUES (11, 2)', false);
COMMIT;
SELECT dblink_exec('other', 'INSERT INTO cchild VALUES (11, 2)', false);
\set VERBOSITY default
SELECT dblink_disconnect('other');
SELECT * FROM cparent ORDER BY id;
SELECT * FROM cchild ORDER BY id;
RESET statement_timeout;
