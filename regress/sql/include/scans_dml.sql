-- Writes of data_scans.sql, run on the ramp table and on its heap twin (psql variable tbl).
INSERT INTO :tbl SELECT g, g % 97, 'new', g, date '2025-01-01', 'inserted'
  FROM generate_series(6001, 6100) g;
UPDATE :tbl SET k = 200 WHERE k = 6;
UPDATE :tbl SET v = v + 1000 WHERE k = 5;
UPDATE :tbl SET id = id + 10000 WHERE id BETWEEN 500 AND 600;
DELETE FROM :tbl WHERE k = 8 OR id % 50 = 0;
COPY :tbl FROM stdin;
7001	5	cat5	1.5	2024-06-01	copied
7002	200	new	2.5	2024-06-02	\N
\.
