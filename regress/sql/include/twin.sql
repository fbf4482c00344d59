-- Heap twins: the same statements run on a ramp table and on a heap table, and the results
-- are compared in both directions with EXCEPT ALL (duplicates count). twin_diff(query)
-- runs the query (with %1$I standing for the table) on both twins and returns the rows
-- found only on one side: 0 when ramp and heap agree.
CREATE FUNCTION twin_diff(query text, ramp_table text, heap_table text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  r text := format(query, ramp_table);
  h text := format(query, heap_table);
  n bigint;
BEGIN
  EXECUTE format('SELECT (SELECT count(*) FROM ((%s) EXCEPT ALL (%s)) a) + '
                 '(SELECT count(*) FROM ((%s) EXCEPT ALL (%s)) b)', r, h, h, r) INTO n;
  RETURN n;
END
$$;
