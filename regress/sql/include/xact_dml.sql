-- Writes of data_xact.sql, run on the ramp table and on its heap twin (psql variable tbl).
INSERT INTO :tbl SELECT g, 'owner' || g, 100, g % 10 FROM generate_series(1, 500) g;
-- Nested savepoints: each ROLLBACK TO undoes its level (rows and index entries).
BEGIN;
UPDATE :tbl SET balance = balance - 10 WHERE id BETWEEN 1 AND 20;
SAVEPOINT one;
UPDATE :tbl SET branch = 77 WHERE branch = 3;
INSERT INTO :tbl VALUES (1001, 'sp one', 1, 77);
SAVEPOINT two;
DELETE FROM :tbl WHERE branch = 4;
INSERT INTO :tbl VALUES (1002, 'sp two', 2, 4);
SAVEPOINT three;
UPDATE :tbl SET owner = owner || ' (three)' WHERE id = 1002;
ROLLBACK TO SAVEPOINT two;
INSERT INTO :tbl VALUES (1003, 'after rollback to two', 3, 4);
ROLLBACK TO SAVEPOINT one;
INSERT INTO :tbl VALUES (1004, 'after rollback to one', 4, 3);
SAVEPOINT four;
UPDATE :tbl SET balance = 0 WHERE id = 1004;
RELEASE SAVEPOINT four;
SAVEPOINT five;
DELETE FROM :tbl WHERE id = 1004;
ROLLBACK TO SAVEPOINT five;
COMMIT;
-- The same row updated many times in one transaction, with savepoints in between.
BEGIN;
UPDATE :tbl SET balance = balance + 1 WHERE id = 30;
SAVEPOINT a;
UPDATE :tbl SET balance = balance + 1 WHERE id = 30;
UPDATE :tbl SET balance = balance + 1, branch = 5 WHERE id = 30;
ROLLBACK TO a;
UPDATE :tbl SET balance = balance + 10 WHERE id = 30;
SAVEPOINT b;
DELETE FROM :tbl WHERE id = 30;
INSERT INTO :tbl VALUES (30, 'reinserted', 7, 6);
RELEASE b;
COMMIT;
-- PL/pgSQL exception blocks are subtransactions.
SELECT set_config('regress.tbl', :'tbl', false) IS NOT NULL AS set;
DO $$
BEGIN
  FOR i IN 40..45 LOOP
    BEGIN
      EXECUTE format('UPDATE %I SET balance = balance + 1 WHERE id = $1',
                     current_setting('regress.tbl')) USING i;
      IF i % 2 = 0 THEN
        RAISE EXCEPTION 'undo %', i;
      END IF;
    EXCEPTION WHEN raise_exception THEN
      NULL;
    END;
  END LOOP;
END
$$;
