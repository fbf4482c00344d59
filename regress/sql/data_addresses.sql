-- One-sided reads (GET*) through the address cache the backends of this server share
-- (pg_ramp is in shared_preload_libraries here): an address learnt by one backend makes
-- another backend's first lookup of that row one-sided.
CREATE EXTENSION pg_ramp;
SELECT shared, capacity >= 1024 AS has_capacity FROM ramp.address_cache();
-- Its default size (-1) follows shared_buffers: half as many bytes, 64 per entry.
SELECT current_setting('ramp.address_cache_entries') AS entries_setting,
       capacity >= greatest(524288, pg_size_bytes(current_setting('shared_buffers')) / 128)
         AS sized_from_shared_buffers
  FROM ramp.address_cache();

CREATE TABLE addr (id int PRIMARY KEY, v text) USING ramp;
INSERT INTO addr SELECT g, 'v' || g FROM generate_series(1, 200) g;
-- Point lookups of every row, one statement each (btree, then the row by TID).
CREATE FUNCTION lookup_all() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint := 0;
  found_v text;
BEGIN
  FOR i IN 1..200 LOOP
    SELECT v INTO found_v FROM addr WHERE id = i;
    IF found_v = 'v' || i THEN n := n + 1; END IF;
  END LOOP;
  RETURN n;
END
$$;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT lookup_all() AS rows_found;   -- learns the addresses (GET+ replies carry them)

-- A new backend: its own client, but the addresses are already shared.
\c
SET enable_seqscan = off;
SET enable_bitmapscan = off;
CREATE TEMP TABLE before AS SELECT * FROM ramp.address_cache();
SELECT lookup_all() AS rows_found;
SELECT a.hits - b.hits >= 200 AS every_lookup_one_sided,
       a.lookups - b.lookups >= 200 AS looked_up,
       a.fallbacks - b.fallbacks AS fallbacks
  FROM ramp.address_cache() a, before b;

-- Updated rows: their old addresses no longer hold the current version (the reader's check
-- refuses them and falls back to a request); after one read, the new addresses are shared.
UPDATE addr SET v = 'w' || id WHERE id <= 10;
\c
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FILTER (WHERE v = 'w' || id) AS updated_rows_read
  FROM generate_series(1, 10) i, LATERAL (SELECT id, v FROM addr WHERE id = i) r;
CREATE TEMP TABLE before AS SELECT * FROM ramp.address_cache();
SELECT count(*) FILTER (WHERE v = 'w' || id) AS updated_rows_read
  FROM generate_series(1, 10) i, LATERAL (SELECT id, v FROM addr WHERE id = i) r;
SELECT a.hits - b.hits >= 10 AS new_addresses_one_sided, a.fallbacks - b.fallbacks AS fallbacks
  FROM ramp.address_cache() a, before b;

RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE addr;
DROP FUNCTION lookup_all();
DROP EXTENSION pg_ramp;
