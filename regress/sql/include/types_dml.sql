-- Statements of data_types.sql, run once on the ramp table and once on its heap twin
-- (psql variable tbl names the table).
INSERT INTO :tbl VALUES
  (1, 12345678901234567890.123456789, 'plain text', '\x00ff10', '2024-02-29',
   '2024-03-10 01:59:59.999999+00', '{1,2,3}', '{"a b", NULL, "c"}', '{"k": [1, 2, {"x": null}]}',
   3.5, true, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 9223372036854775807, -32768, 'ab',
   'vc', '1 year 2 mons 3 days 04:05:06'),
  (2, -0.000001, '', '\x', '4713-01-01 BC', 'infinity', '{}', '{}', '{}',
   'NaN', false, '00000000-0000-0000-0000-000000000000', -9223372036854775808, 32767, '',
   '', '-1 day'),
  (3, 'NaN', E'tab\there\nnewline ''quote'' "dq" \\ backslash', '\x5c00', 'infinity',
   '-infinity', '{{1,2},{3,4}}', '{""}', '[1, "two", 3.0, null, true]',
   '-Infinity', NULL, NULL, 0, 0, 'xyzzy', 'ümlaut ☃', '0'),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL),
  (5, 0, 'null inside arrays', '\xdeadbeef', '2000-01-01', '2000-01-01 00:00:00+05:30',
   '{NULL,NULL}', '{NULL}', 'null', 1e-300, true, 'ffffffff-ffff-ffff-ffff-ffffffffffff',
   1, 1, 'a', 'b', '00:00:00.000001');
-- Generated rows: every column varies, some NULL.
INSERT INTO :tbl
SELECT g, (g * 1.01)::numeric(20, 4), CASE WHEN g % 13 = 0 THEN NULL ELSE 'row ' || g END,
       decode(md5(g::text), 'hex'), date '2020-01-01' + g,
       timestamptz '2020-01-01 00:00+00' + g * interval '1 hour 1 second',
       ARRAY[g, g + 1, NULLIF(g % 3, 0)], ARRAY['t' || g, NULL],
       jsonb_build_object('g', g, 'even', g % 2 = 0, 'tags', jsonb_build_array(g % 5, 'x')),
       g / 7.0, g % 2 = 0, md5(g::text)::uuid, g::bigint * 1000003, (g % 30000)::smallint,
       CASE WHEN g % 17 = 0 THEN NULL ELSE chr(65 + g % 26) END, 'v' || (g % 100),
       g * interval '1 minute'
  FROM generate_series(10, 1009) g;
-- COPY (multi-insert), text format with NULLs and escapes.
COPY :tbl (id, n, t, b, d, arr, j, bo) FROM stdin;
2000	1.5	copied	\\x01	2024-01-01	{7,8}	{"c": 1}	t
2001	\N	\N	\N	\N	\N	\N	\N
2002	-2.25	tab\tand\\backslash	\\x	2024-12-31	{}	[]	f
\.
-- UPDATE (new row ids), DELETE, an UPDATE that sets NULLs and one that clears them.
UPDATE :tbl SET n = n * 2, t = t || ' updated', arr = arr || 99 WHERE id % 7 = 0;
UPDATE :tbl SET j = NULL, u = NULL WHERE id BETWEEN 100 AND 110;
UPDATE :tbl SET t = coalesce(t, 'was null') WHERE t IS NULL AND id < 500;
DELETE FROM :tbl WHERE id % 11 = 0 OR id = 2001;
-- A transaction with savepoints: ROLLBACK TO undoes exactly the subtransaction's share.
BEGIN;
INSERT INTO :tbl (id, t) VALUES (3000, 'kept');
SAVEPOINT a;
UPDATE :tbl SET t = 'undone' WHERE id BETWEEN 20 AND 40;
DELETE FROM :tbl WHERE id BETWEEN 41 AND 60;
INSERT INTO :tbl (id, t) VALUES (3001, 'undone');
ROLLBACK TO SAVEPOINT a;
UPDATE :tbl SET t = 'kept update' WHERE id = 61;
SAVEPOINT b;
DELETE FROM :tbl WHERE id = 62;
RELEASE SAVEPOINT b;
COMMIT;
-- A rolled-back transaction leaves nothing.
BEGIN;
DELETE FROM :tbl;
INSERT INTO :tbl (id) VALUES (4000);
ROLLBACK;
-- TOAST-sized values (heap compresses or moves them out of line; ramp stores them whole):
-- a 1 MiB text, an incompressible 256 KiB bytea, a large array and a large jsonb.
INSERT INTO :tbl (id, t, b, arr, j)
VALUES (5000, repeat('0123456789abcdef', 65536),
        (SELECT string_agg(decode(md5(g::text), 'hex'), ''::bytea) FROM generate_series(1, 16384) g),
        (SELECT array_agg(g) FROM generate_series(1, 100000) g),
        (SELECT jsonb_agg(jsonb_build_object('i', g, 's', md5(g::text))) FROM generate_series(1, 5000) g));
UPDATE :tbl SET t = t || 'tail' WHERE id = 5000;
