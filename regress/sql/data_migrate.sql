-- Partition migration (DESIGN §7) through SQL: ramp.migrate_partition moves a partition of a
-- ramp table to another server while it stays readable and writable; ramp.partitions()
-- shows the new owner and epoch, ramp.migrations the finished move; bad requests are
-- refused with the reason; only a superuser may move partitions. Node numbers depend on
-- the keyspace's hash, so the output shows relations between them, not the numbers.
CREATE EXTENSION pg_ramp;
CREATE TABLE mig (id int, v text) USING ramp;
CREATE INDEX mig_id ON mig USING ramp_hash (id);
INSERT INTO mig SELECT g, 'v' || g FROM generate_series(1, 2000) g;
-- The partition of bucket 3 and where it is.
SELECT bucket, owner AS old_owner, epoch AS old_epoch
  FROM ramp.partitions() WHERE relation = 'mig'::regclass AND bucket = 3 \gset
SELECT ramp.migrate_partition('mig', :bucket, (:old_owner + 1) % 3);
SELECT owner = (:old_owner + 1) % 3 AS moved, epoch = :old_epoch + 1 AS next_epoch,
       home = :old_owner AS home_unchanged, migrating
  FROM ramp.partitions() WHERE relation = 'mig'::regclass AND bucket = :bucket;
SELECT phase, source = :old_owner AS from_old, target = (:old_owner + 1) % 3 AS to_new,
       bytes_copied > 0 AS copied, bytes_total > 0 AS has_total, in_flight, error
  FROM ramp.migrations WHERE relation = 'mig'::regclass;
-- Every row is there, through the table and through the index, and writes go on.
SELECT count(*), sum(id), count(DISTINCT v) FROM mig;
SELECT v FROM mig WHERE id = 1234;
UPDATE mig SET v = 'updated' WHERE id % 100 = 0;
DELETE FROM mig WHERE id > 1990;
SELECT count(*), count(*) FILTER (WHERE v = 'updated') AS updated FROM mig;
-- And it moves back.
SELECT ramp.migrate_partition('mig', :bucket, :old_owner);
SELECT owner = :old_owner AS back, epoch = :old_epoch + 2 AS epoch_again
  FROM ramp.partitions() WHERE relation = 'mig'::regclass AND bucket = :bucket;
SELECT count(*), count(*) FILTER (WHERE v = 'updated') AS updated FROM mig;

-- Bad requests: the error says why (node numbers masked).
CREATE FUNCTION try_migrate(rel regclass, bucket int, node int) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
  detail text;
BEGIN
  PERFORM ramp.migrate_partition(rel, bucket, node);
  RETURN 'moved';
EXCEPTION WHEN others THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' ||
         regexp_replace(regexp_replace(SQLERRM || coalesce(' (' || nullif(detail, '') || ')', ''),
                                       'ks:[0-9]+', 'ks:K', 'g'),
                        '[0-9]+', 'N', 'g');
END
$$;
SELECT try_migrate('mig', :bucket, 7) AS unknown_node;
SELECT try_migrate('mig', :bucket, -1) AS negative_node;
SELECT try_migrate('mig', :bucket, :old_owner) AS to_itself;
SELECT try_migrate('mig', 99, 0) AS unknown_bucket;
SELECT try_migrate('pg_class', 0, 0) AS not_ramp;
-- Only a superuser.
CREATE ROLE ramp_migrate_user;
GRANT USAGE ON SCHEMA ramp TO ramp_migrate_user;
SET ROLE ramp_migrate_user;
SELECT ramp.migrate_partition('mig', 3, 0);
SELECT ramp._migrate_partition(1, 3, 0);
RESET ROLE;
-- The rebalancer's plan: anyone may look (dry run), moving needs a superuser; the threshold
-- is checked.
SET ROLE ramp_migrate_user;
SELECT count(*) >= 0 AS planned FROM ramp.rebalance(dry_run => true);
SELECT * FROM ramp.rebalance(dry_run => false);
RESET ROLE;
SELECT * FROM ramp.rebalance(threshold => 0.5);
REVOKE USAGE ON SCHEMA ramp FROM ramp_migrate_user;
DROP ROLE ramp_migrate_user;
-- Nothing moved meanwhile.
SELECT owner = :old_owner AS still_there, migrating
  FROM ramp.partitions() WHERE relation = 'mig'::regclass AND bucket = :bucket;
DROP TABLE mig;
DROP FUNCTION try_migrate(regclass, int, int);
DROP EXTENSION pg_ramp;
