package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// statements are the hot path's statements, prepared once on the store's
// single connection.
type statements struct {
	insert, dedupGet, dedupClear, fenceGet, fenceAdd, claim, extend, complete, current, promote *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&st.insert, `INSERT INTO leasehold_messages (queue, key, dedup_id, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind)
			VALUES (?1, ?2, ?3, ?4, ?5,
				CASE WHEN ?2 IS NOT NULL AND EXISTS (SELECT 1 FROM leasehold_messages WHERE queue = ?1 AND key = ?2 AND state IN (0, 2)) THEN 1 ELSE 0 END,
				?6, ?7, ?8, ?9)`},
		{&st.dedupGet, `SELECT id, enqueued_at FROM leasehold_messages WHERE queue = ? AND dedup_id = ?`},
		{&st.dedupClear, `UPDATE leasehold_messages SET dedup_id = NULL WHERE id = ?`},
		{&st.fenceGet, `SELECT value FROM leasehold_meta WHERE name = 'fence'`},
		{&st.fenceAdd, `UPDATE leasehold_meta SET value = value + ? WHERE name = 'fence'`},
		{&st.claim, `UPDATE leasehold_messages AS m
			SET state = 2, deliveries = m.deliveries + 1, fencing_token = ?1 + c.rn, worker_id = ?2, locked_until = ?3
			FROM (SELECT id, row_number() OVER (ORDER BY visible_at, id) AS rn
				-- LIMIT inside, so the numbering never walks the backlog.
				FROM (SELECT id, visible_at FROM leasehold_messages
					WHERE queue = ?4 AND state = 0 AND visible_at <= ?5
					ORDER BY visible_at, id LIMIT ?6)) AS c
			WHERE m.id = c.id
			RETURNING id, key, payload, reply_to, dedup_id, deliveries, max_deliveries, enqueued_at, fencing_token, kind`},
		// Batches of leases arrive as a JSON array of [id, fencing token]
		// pairs, so a batch is one statement.
		{&st.extend, `UPDATE leasehold_messages AS m SET locked_until = ?1
			FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?3)) AS j
			WHERE m.id = j.id AND m.fencing_token = j.fence AND m.state = 2 AND m.locked_until > ?2
			RETURNING id, fencing_token`},
		{&st.complete, `UPDATE leasehold_messages AS m SET state = 3, finished_at = ?1
			FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?2)) AS j
			WHERE m.id = j.id AND m.fencing_token = j.fence AND m.state = 2 AND m.locked_until > ?1
			RETURNING id, fencing_token, queue, key`},
		{&st.current, `SELECT deliveries, max_deliveries, queue, key FROM leasehold_messages
			WHERE id = ? AND fencing_token = ? AND state = 2 AND locked_until > ?`},
		{&st.promote, `UPDATE leasehold_messages SET state = 0 WHERE id = (
			SELECT id FROM leasehold_messages WHERE queue = ? AND key = ? AND state = 1 ORDER BY id LIMIT 1)`},
	} {
		s, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", p.sql[:40], err)
		}
		*p.dst = s
	}
	return nil
}

func (st *statements) close() {
	for _, s := range []*sql.Stmt{st.insert, st.dedupGet, st.dedupClear, st.fenceGet, st.fenceAdd, st.claim, st.extend, st.complete, st.current, st.promote} {
		if s != nil {
			s.Close()
		}
	}
}

// statsSQL counts a queue's messages without reading its history: each
// live state through its partial index (the state is a literal so that
// SQLite can use it), completed messages from the count that triggers keep.
const statsSQL = `SELECT
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = 0),
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = 1),
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = 2),
	(SELECT coalesce(sum(n), 0) FROM leasehold_completed_counts WHERE queue = ?1),
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = 4),
	(SELECT count(DISTINCT key) FROM leasehold_messages WHERE queue = ?1 AND state = 1),
	(SELECT min(visible_at) FROM leasehold_messages WHERE queue = ?1 AND state = 0 AND visible_at <= ?2)`
