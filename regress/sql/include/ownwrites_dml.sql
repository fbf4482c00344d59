-- Statements whose command meets rows written by itself or by later commands of its own
-- transaction (PostgreSQL's regression SQL found these). Run once per access method (:am)
-- in its own schema; data_ownwrites.sql compares the two runs.
SET statement_timeout = '10s';  -- the hangs this guards against end here, not in the suite

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
