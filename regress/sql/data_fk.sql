-- Foreign keys, row triggers and system columns on ramp tables. The same statements
-- (sql/include/fk_dml.sql) run in four schemas: referenced (:pk_am) and referencing (:fk_am)
-- tables both ramp, ramp referenced by heap, heap referenced by ramp, and both heap. The
-- outputs of the four runs must be the same, and the tables are compared at the end. A second
-- session (dblink) checks that key checks and deletions of referenced rows wait for each other.
CREATE EXTENSION pg_ramp;
CREATE EXTENSION dblink;
\i sql/include/twin.sql

CREATE SCHEMA ramp_ramp;
SET search_path = ramp_ramp, public;
\set pk_am ramp
\set fk_am ramp
\i sql/include/fk_dml.sql

CREATE SCHEMA ramp_heap;
SET search_path = ramp_heap, public;
\set pk_am ramp
\set fk_am heap
\i sql/include/fk_dml.sql

CREATE SCHEMA heap_ramp;
SET search_path = heap_ramp, public;
\set pk_am heap
\set fk_am ramp
\i sql/include/fk_dml.sql

CREATE SCHEMA heap_heap;
SET search_path = heap_heap, public;
\set pk_am heap
\set fk_am heap
\i sql/include/fk_dml.sql

RESET search_path;
SELECT s AS "schema", t AS "table",
       twin_diff('SELECT * FROM %s', s || '.' || t, 'heap_heap.' || t) AS differing_rows
  FROM unnest(ARRAY['ramp_ramp', 'ramp_heap', 'heap_ramp']) s,
       unnest(ARRAY['parent', 'child', 'orphan', 'guard', 'tree', 'pparent', 'pchild', 'dchild',
                     'trg', 'trg_log', 'sc', 'cparent', 'cchild']) t
 ORDER BY 1, 2;

\set VERBOSITY terse
DROP SCHEMA ramp_ramp, ramp_heap, heap_ramp, heap_heap CASCADE;
\set VERBOSITY default
DROP FUNCTION twin_diff(text, text, text);
DROP EXTENSION dblink;
DROP EXTENSION pg_ramp;
