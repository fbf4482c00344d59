-- Column types, NULLs, COPY, UPDATE/DELETE, savepoints and TOAST-sized values on a ramp
-- table, checked against a heap twin: the same statements run on both tables and every
-- comparison must find zero differing rows (EXCEPT ALL in both directions).
CREATE EXTENSION pg_ramp;
\i sql/include/twin.sql
SET timezone = 'UTC';

CREATE TABLE types_ramp (id int, n numeric, t text, b bytea, d date, ts timestamptz,
                         arr int[], tarr text[], j jsonb, f float8, bo bool, u uuid,
                         i8 bigint, i2 smallint, c char(5), vc varchar(20), iv interval)
  USING ramp;
CREATE TABLE types_heap (LIKE types_ramp);
SELECT c.relname, a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam
 WHERE c.relname LIKE 'types_%' ORDER BY 1;

\set tbl types_ramp
\i sql/include/types_dml.sql
\set tbl types_heap
\i sql/include/types_dml.sql

-- Whole tables: zero rows differ, same count.
SELECT twin_diff('SELECT * FROM %I', 'types_ramp', 'types_heap') AS differing_rows,
       (SELECT count(*) FROM types_ramp) AS ramp_rows,
       (SELECT count(*) FROM types_heap) AS heap_rows;
-- Column by column (a type whose values differ would show up here by name).
SELECT a.attname,
       twin_diff(format('SELECT id, %I FROM %%I', a.attname), 'types_ramp', 'types_heap')
         AS differing_rows
  FROM pg_attribute a
 WHERE a.attrelid = 'types_ramp'::regclass AND a.attnum > 0
 ORDER BY a.attnum;
-- Expressions over every type, filters, aggregates, sorting, joins with the twin.
SELECT twin_diff($$SELECT id, n * 3 - 1, length(t), upper(t), encode(b, 'hex'), d + 1,
                          date_trunc('day', ts), array_length(arr, 1), arr[2], tarr[1],
                          j -> 'tags', j ->> 'g', f::text, NOT bo, u::text, mod(i8, 97), i2 + 1,
                          c || '|', vc, iv * 2
                     FROM %I$$, 'types_ramp', 'types_heap') AS expressions;
SELECT twin_diff($$SELECT id FROM %I
                   WHERE n > 100 AND t LIKE 'row 1%%' AND d < '2021-06-01' AND bo
                     AND arr @> '{2}' IS NOT TRUE AND j @> '{"even": true}'$$,
                 'types_ramp', 'types_heap') AS filters;
SELECT twin_diff($$SELECT bo, count(*), count(t), sum(n), min(d), max(ts), avg(f::numeric)
                     FILTER (WHERE f <> 'NaN'), string_agg(vc, ',' ORDER BY id)
                     FROM %I GROUP BY bo$$, 'types_ramp', 'types_heap') AS aggregates;
SELECT twin_diff($$SELECT row_number() OVER (ORDER BY ts NULLS FIRST, id) AS pos, id
                     FROM %I$$, 'types_ramp', 'types_heap') AS ordering;
SELECT count(*) AS joined_rows, count(*) FILTER (WHERE r IS DISTINCT FROM h) AS differing
  FROM types_ramp r JOIN types_heap h USING (id);

-- The edge-case rows as a user sees them.
SELECT id, n, t, encode(b, 'hex') AS b, d, ts, arr, tarr, j, f, bo, u, i8, i2, c, vc, iv
  FROM types_ramp WHERE id < 10 ORDER BY id;
SELECT id, n, t, encode(b, 'hex') AS b, d, arr, j, bo FROM types_ramp
 WHERE id >= 2000 AND id < 5000 ORDER BY id;
-- NULLs: IS NULL per column agrees with the heap twin.
SELECT count(*) FILTER (WHERE n IS NULL) AS n_null, count(*) FILTER (WHERE t IS NULL) AS t_null,
       count(*) FILTER (WHERE j IS NULL) AS j_null, count(*) FILTER (WHERE c IS NULL) AS c_null
  FROM types_ramp;
SELECT twin_diff($$SELECT id, n IS NULL, t IS NULL, b IS NULL, j IS NULL, u IS NULL, c IS NULL
                     FROM %I$$, 'types_ramp', 'types_heap') AS null_flags;
-- The TOAST-sized row: stored and returned whole (ramp has no TOAST table; the heap twin
-- compressed or moved its values out of line).
SELECT id, length(t) AS t_len, md5(t) = md5(repeat('0123456789abcdef', 65536) || 'tail') AS t_ok,
       length(b) AS b_len, array_length(arr, 1) AS arr_len, jsonb_array_length(j) AS j_len
  FROM types_ramp WHERE id = 5000;
SELECT c.relname, c.reltoastrelid <> 0 AS has_toast_table FROM pg_class c
 WHERE c.relname IN ('types_ramp', 'types_heap') ORDER BY 1;
SELECT pg_column_size(t) > 1000000 AS stored_uncompressed FROM types_ramp WHERE id = 5000;
-- Every read path returns the same rows.
SET ramp.read_path = 'rpc';
SELECT twin_diff('SELECT * FROM %I', 'types_ramp', 'types_heap') AS differing_rpc;
SET ramp.read_path = 'get+';
SELECT twin_diff('SELECT * FROM %I', 'types_ramp', 'types_heap') AS differing_get_plus;
RESET ramp.read_path;

-- COPY out of a ramp table and back in (text and binary) reproduces it.
CREATE TABLE types_copy (LIKE types_ramp) USING ramp;
\copy types_ramp TO 'results/types_ramp.copy'
\copy types_copy FROM 'results/types_ramp.copy'
SELECT twin_diff('SELECT * FROM %I', 'types_copy', 'types_heap') AS differing_after_copy;
TRUNCATE types_copy;
\copy types_ramp TO 'results/types_ramp.bin' WITH (FORMAT binary)
\copy types_copy FROM 'results/types_ramp.bin' WITH (FORMAT binary)
SELECT twin_diff('SELECT * FROM %I', 'types_copy', 'types_heap') AS differing_after_binary_copy;

-- A wide row (100 columns).
SELECT format('CREATE TABLE wide (%s) USING ramp',
              string_agg(format('c%s int', g), ', ')) FROM generate_series(1, 100) g \gexec
SELECT format('INSERT INTO wide VALUES (%s)', string_agg(CASE WHEN g % 3 = 0 THEN 'NULL' ELSE g::text END, ', '))
  FROM generate_series(1, 100) g \gexec
SELECT c1, c2, c3, c99, c100 FROM wide;

DROP TABLE types_ramp, types_heap, types_copy, wide;
DROP FUNCTION twin_diff(text, text, text);
DROP EXTENSION pg_ramp;
