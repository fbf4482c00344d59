-- A command meeting its own writes, or those of later commands of its transaction:
-- transition tables after in-place updates, ON CONFLICT / MERGE affecting a row twice,
-- cursors FOR UPDATE, row movement skipped by a trigger. Every case runs on ramp tables and
-- on heap tables (sql/include/ownwrites_dml.sql, one schema each); the outputs of the two
-- runs must be the same, and the tables are compared at the end.
CREATE EXTENSION pg_ramp;
\i sql/include/twin.sql

CREATE SCHEMA on_ramp;
SET search_path = on_ramp, public;
\set am ramp
\i sql/include/ownwrites_dml.sql

CREATE SCHEMA on_heap;
SET search_path = on_heap, public;
\set am heap
\i sql/include/ownwrites_dml.sql

RESET search_path;
SELECT t AS "table", twin_diff('SELECT * FROM %s', 'on_ramp.' || t, 'on_heap.' || t) AS differing_rows
  FROM unnest(ARRAY['transitions', 'pt', 'u', 'c', 'rm', 'bt']) t;

\set VERBOSITY terse
DROP SCHEMA on_ramp, on_heap CASCADE;
\set VERBOSITY default
DROP FUNCTION twin_diff(text, text, text);
DROP EXTENSION pg_ramp;
