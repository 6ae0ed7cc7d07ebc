-- A message's error history: a JSON array of its attempts' errors, the
-- newest last, at most a given number kept. with_error appends one; the
-- statements that record a message's last error call it, reading the
-- row as it was.
ALTER TABLE {s}.messages ADD COLUMN errors jsonb;
CREATE FUNCTION {s}.with_error(errors jsonb, attempt integer, at timestamptz, worker text, error text, keep integer) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT COALESCE(jsonb_agg(e ORDER BY n), '[]'::jsonb) FROM (
		SELECT e, n FROM jsonb_array_elements(COALESCE(errors, '[]'::jsonb)
			|| jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('attempt', attempt, 'at', at, 'worker', worker, 'error', error))))
			WITH ORDINALITY AS a(e, n)
		ORDER BY n DESC LIMIT keep) AS kept
$$;
