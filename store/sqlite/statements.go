package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/store"
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
		{&st.insert, `INSERT INTO leasehold_messages (queue, key, dedup_id, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind, priority, attributes)
			VALUES (?1, ?2, ?3, ?4, ?5,
				CASE WHEN ?2 IS NOT NULL AND EXISTS (SELECT 1 FROM leasehold_messages WHERE queue = ?1 AND key = ?2 AND state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END,
				?6, ?7, ?8, ?9, ?10, ?11)`},
		{&st.dedupGet, `SELECT id, enqueued_at FROM leasehold_messages WHERE queue = ? AND dedup_id = ?`},
		{&st.dedupClear, `UPDATE leasehold_messages SET dedup_id = NULL WHERE id = ?`},
		{&st.fenceGet, `SELECT value FROM leasehold_meta WHERE name = 'fence'`},
		{&st.fenceAdd, `UPDATE leasehold_meta SET value = value + ? WHERE name = 'fence'`},
		{&st.claim, claimSQL},
		// Batches of leases arrive as a JSON array of [id, fencing token]
		// pairs, so a batch is one statement.
		{&st.extend, `UPDATE leasehold_messages AS m SET locked_until = ?1
			FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?3)) AS j
			WHERE m.id = j.id AND m.fencing_token = j.fence AND m.state = {processing} AND m.locked_until > ?2
			RETURNING id, fencing_token`},
		{&st.complete, `UPDATE leasehold_messages AS m SET state = {completed}, finished_at = ?1
			FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?2)) AS j
			WHERE m.id = j.id AND m.fencing_token = j.fence AND m.state = {processing} AND m.locked_until > ?1
			RETURNING id, fencing_token, queue, key`},
		{&st.current, `SELECT deliveries, max_deliveries, queue, key FROM leasehold_messages
			WHERE id = ? AND fencing_token = ? AND state = {processing} AND locked_until > ?`},
		{&st.promote, `UPDATE leasehold_messages SET state = {pending} WHERE id = (
			SELECT id FROM leasehold_messages WHERE queue = ? AND key = ? AND state = {waiting} ORDER BY id LIMIT 1)`},
	} {
		s, err := db.PrepareContext(ctx, sqlstate.Expand(p.sql))
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

// claimSQL claims up to ?6 visible pending messages of queue ?4 at time
// ?5, in claim order, for worker ?2 until ?3, fencing them from ?1 on. A
// message's first claim records its time.
const claimSQL = `UPDATE leasehold_messages AS m
			SET state = {processing}, deliveries = m.deliveries + 1, fencing_token = ?1 + c.rn, worker_id = ?2, locked_until = ?3,
				first_claimed_at = coalesce(m.first_claimed_at, ?5)
			FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, visible_at, id) AS rn
				-- LIMIT inside, so the numbering never walks the backlog.
				FROM (SELECT id, priority, visible_at FROM leasehold_messages
					WHERE queue = ?4 AND state = {pending} AND visible_at <= ?5
						AND NOT EXISTS (SELECT 1 FROM leasehold_queues WHERE queue = ?4 AND paused)
					ORDER BY priority DESC, visible_at, id LIMIT ?6)) AS c
			WHERE m.id = c.id
			RETURNING id, key, payload, reply_to, dedup_id, deliveries, max_deliveries, enqueued_at, fencing_token, kind, priority,
				attributes, first_claimed_at`

// statsSQL counts a queue's messages at time ?2 without reading its
// history: each live state through its partial index (the state is a
// literal so that SQLite can use it), completed messages from the count
// that triggers keep. The one scan of the pending messages counts the
// delayed ones too.
var statsSQL = sqlstate.Expand(`SELECT
	pending.n,
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = {waiting}),
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = {processing}),
	(SELECT coalesce(sum(n), 0) FROM leasehold_completed_counts WHERE queue = ?1),
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = {dead}),
	(SELECT count(DISTINCT key) FROM leasehold_messages WHERE queue = ?1 AND state = {waiting}),
	(WITH RECURSIVE p(priority) AS (
		-- Each priority of the queue's pending messages, one index probe
		-- each: the oldest visible message of a priority is its first.
		SELECT max(priority) FROM leasehold_messages WHERE queue = ?1 AND state = {pending}
		UNION ALL
		SELECT (SELECT max(priority) FROM leasehold_messages WHERE queue = ?1 AND state = {pending} AND priority < p.priority)
		FROM p WHERE p.priority IS NOT NULL)
	SELECT min(v) FROM (SELECT (SELECT visible_at FROM leasehold_messages WHERE queue = ?1 AND state = {pending} AND priority = p.priority
		ORDER BY visible_at LIMIT 1) AS v FROM p WHERE p.priority IS NOT NULL) WHERE v <= ?2),
	(SELECT coalesce(max(paused), 0) FROM leasehold_queues WHERE queue = ?1),
	(SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = {cancelled}),
	pending.delayed
FROM (SELECT count(*) AS n, coalesce(sum(visible_at > ?2), 0) AS delayed
	FROM leasehold_messages WHERE queue = ?1 AND state = {pending}) AS pending`)

// Statements run as they are, not prepared.
var (
	// sqlKill dead-letters a message that failed for good.
	sqlKill = sqlstate.Expand(`UPDATE leasehold_messages SET state = {dead}, dead_reason = ?, last_error = ?, finished_at = ? WHERE id = ?`)
	// sqlRetry makes a message pending again, visible from ?1; with ?3,
	// ?2 becomes its last error.
	sqlRetry = sqlstate.Expand(`UPDATE leasehold_messages SET state = {pending}, visible_at = ?1,
		last_error = CASE WHEN ?3 THEN ?2 ELSE last_error END WHERE id = ?4`)
	// sqlRelease gives a message back under its lease, uncounted.
	sqlRelease = sqlstate.Expand(`UPDATE leasehold_messages SET state = {pending}, visible_at = ?, deliveries = deliveries - 1
			WHERE id = ? AND fencing_token = ? AND state = {processing} AND locked_until > ? RETURNING queue`)
	// sqlExpired lists the processing messages whose leases expired by ?1.
	sqlExpired = sqlstate.Expand(`SELECT id, fencing_token, queue, key, deliveries, max_deliveries, locked_until FROM leasehold_messages
		WHERE state = {processing} AND locked_until <= ?1`)
	// sqlDeadIDs lists a queue's dead messages.
	sqlDeadIDs = sqlstate.Expand(`SELECT id FROM leasehold_messages WHERE queue = ? AND state = {dead} ORDER BY id`)
	// sqlIsDead tells whether a message of the queue is dead.
	sqlIsDead = sqlstate.Expand(`SELECT 1 FROM leasehold_messages WHERE id = ? AND queue = ? AND state = {dead}`)
	// sqlRedrive brings a dead message back: behind its key's unfinished head, or pending.
	sqlRedrive = sqlstate.Expand(`UPDATE leasehold_messages SET deliveries = 0, dead_reason = NULL, finished_at = NULL, visible_at = ?1,
		state = CASE WHEN key IS NOT NULL AND EXISTS (SELECT 1 FROM leasehold_messages h
			WHERE h.queue = leasehold_messages.queue AND h.key = leasehold_messages.key AND h.state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END
		WHERE id = ?2 AND state = {dead}`)
	// sqlPurge deletes a dead message.
	sqlPurge = sqlstate.Expand(`DELETE FROM leasehold_messages WHERE id = ?2 AND state = {dead}`)
	// sqlCancelledOf lists, of a batch of leases (?1, a JSON array of [id,
	// fencing token] pairs), those whose message was cancelled under them.
	sqlCancelledOf = sqlstate.Expand(`SELECT m.id, m.fencing_token FROM leasehold_messages AS m
		JOIN (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?1)) AS j ON m.id = j.id AND m.fencing_token = j.fence
		WHERE m.state = {cancelled}`)
	// sqlMessageOf reads what cancelling a message needs.
	sqlMessageOf = `SELECT queue, state, key FROM leasehold_messages WHERE id = ?`
	// sqlCancel cancels a message that has not finished.
	sqlCancel = sqlstate.Expand(`UPDATE leasehold_messages SET state = {cancelled}, finished_at = ?1
		WHERE id = ?2 AND state IN ({pending}, {waiting}, {processing})`)
	// sqlHoldMaintainer takes or renews the maintainer lease for ?1 at time
	// ?2 until ?3; sqlMaintainer reads it.
	sqlHoldMaintainer = `INSERT INTO leasehold_maintainer (id, holder, token, expires) VALUES (1, ?1, 1, ?3)
		ON CONFLICT (id) DO UPDATE SET
			token = CASE WHEN holder = ?1 AND expires > ?2 THEN token ELSE token + 1 END,
			holder = ?1, expires = ?3
		WHERE holder = ?1 OR expires <= ?2`
	sqlMaintainer = `SELECT holder, token, expires FROM leasehold_maintainer WHERE id = 1`
	// sqlReleaseMaintainer lets the lease lapse, if ?1 holds it under ?2.
	sqlReleaseMaintainer = `UPDATE leasehold_maintainer SET expires = 0 WHERE id = 1 AND holder = ?1 AND token = ?2`
	// sqlDeleteQueue deletes every message of a queue.
	sqlDeleteQueue = `DELETE FROM leasehold_messages WHERE queue = ?`
	// sqlForgetQueue deletes a queue's settings: its pause and its record.
	sqlForgetQueue = `DELETE FROM leasehold_queues WHERE queue = ?`
	// sqlPause pauses a queue.
	sqlPause = `INSERT INTO leasehold_queues (queue, paused) VALUES (?, 1) ON CONFLICT (queue) DO UPDATE SET paused = 1`
	// sqlResume lets a queue run.
	sqlResume = `UPDATE leasehold_queues SET paused = 0 WHERE queue = ?`
	// sqlCreateQueue records queue ?1 with attributes ?2 at time ?3, in
	// its row if Pause made one, unless it has a record: then it changes
	// nothing, and no row.
	sqlCreateQueue = `INSERT INTO leasehold_queues (queue, attributes, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
		ON CONFLICT (queue) DO UPDATE SET attributes = ?2, created_at = ?3, updated_at = ?3 WHERE created_at IS NULL`
	// sqlQueueRecord reads a queue's record.
	sqlQueueRecord = `SELECT paused, attributes, created_at, updated_at FROM leasehold_queues WHERE queue = ? AND created_at IS NOT NULL`
	// sqlSetQueueAttributes sets queue ?1's attributes to ?2 at time ?3.
	sqlSetQueueAttributes = `UPDATE leasehold_queues SET attributes = ?2, updated_at = ?3 WHERE queue = ?1`
	// sqlPrune deletes up to ?4 messages in one state (its code is
	// written in, so that SQLite can use the state's partial index) that
	// finished by ?1 and were enqueued by ?2 (the dedup window), of queue
	// ?3 or of any queue when it is NULL.
	// It returns each deleted message's queue, for the completed counts.
	sqlPrune = `DELETE FROM leasehold_messages WHERE id IN (
				SELECT id FROM leasehold_messages WHERE state = %d AND finished_at <= ?1 AND enqueued_at <= ?2
					AND (?3 IS NULL OR queue = ?3) LIMIT ?4)
				RETURNING queue`
	// sqlUncount takes ?1 completed messages off queue ?2's count.
	sqlUncount = `UPDATE leasehold_completed_counts SET n = n - ?1 WHERE queue = ?2`
	// sqlForgetCounts deletes a queue's completed count.
	sqlForgetCounts = `DELETE FROM leasehold_completed_counts WHERE queue = ?`
)

// infoColumns are the columns of a message that an Info describes, in the
// order scanInfo reads them; prefixed with a table's alias by columnsOf.
var infoColumns = []string{"id", "queue", "state", "key", "dedup_id", "payload", "deliveries", "max_deliveries", "fencing_token",
	"worker_id", "last_error", "dead_reason", "enqueued_at", "visible_at", "locked_until", "finished_at", "kind", "priority",
	"attributes", "first_claimed_at"}

func columnsOf(alias string) string {
	cols := make([]string, len(infoColumns))
	for i, c := range infoColumns {
		cols[i] = alias + c
	}
	return strings.Join(cols, ", ")
}

// sqlGet reads one message by its id, through the primary key.
var sqlGet = `SELECT ` + columnsOf("") + ` FROM leasehold_messages WHERE id = ?`

// listIndex is the index each listing reads, by state: without a key or
// a kind, the state's own (or for the processing messages, which have
// none by queue, their expiry's, which holds live rows only); with a key,
// the key's: leasehold_key_head holds a key's head, pending or processing,
// leasehold_finished_key its finished messages. Completed messages of a
// kind have an index of their own (migration 10 explains each choice).
var listIndex = [store.States]struct{ all, key, kind string }{
	store.Pending:    {"leasehold_ready", "leasehold_key_head", "leasehold_ready"},
	store.Waiting:    {"leasehold_waiting", "leasehold_waiting", "leasehold_waiting"},
	store.Processing: {"leasehold_processing", "leasehold_key_head", "leasehold_processing"},
	store.Completed:  {"leasehold_completed_queue", "leasehold_finished_key", "leasehold_completed_kind"},
	store.Dead:       {"leasehold_dead", "leasehold_finished_key", "leasehold_dead"},
	store.Cancelled:  {"leasehold_cancelled", "leasehold_finished_key", "leasehold_cancelled"},
}

// keyIndexTerm is, by state, the term of the WHERE clause of the key's
// index that a listing with a key repeats: SQLite uses a partial index only
// for a query whose WHERE clause holds each term of the index's.
var keyIndexTerm = [store.States]string{
	store.Pending:    sqlstate.Expand(` AND state IN ({pending}, {processing})`),
	store.Processing: sqlstate.Expand(` AND state IN ({pending}, {processing})`),
	store.Completed:  sqlstate.Expand(` AND state IN ({completed}, {dead}, {cancelled})`),
	store.Dead:       sqlstate.Expand(` AND state IN ({completed}, {dead}, {cancelled})`),
	store.Cancelled:  sqlstate.Expand(` AND state IN ({completed}, {dead}, {cancelled})`),
}

// listSQL returns the statement that lists f and its arguments. The
// state's code is written in rather than bound, and the index named with
// INDEXED BY, so that SQLite reads the index the listing needs whatever it
// guesses of the table: ordered by id, the primary key would look cheaper
// for a state without an index by queue and id, and reading it walks every
// row, history included. A filter that is not set is left out.
func listSQL(f store.ListFilter) (string, []any) {
	var b strings.Builder
	index := listIndex[f.State].all
	switch {
	case f.Key != "":
		index = listIndex[f.State].key
	case f.Kind != "":
		index = listIndex[f.State].kind
	}
	fmt.Fprintf(&b, "SELECT %s FROM leasehold_messages INDEXED BY %s WHERE queue = ? AND state = %d AND id > ?",
		columnsOf(""), index, int(f.State))
	args := []any{f.Queue, f.AfterID}
	if f.Key != "" {
		b.WriteString(" AND key = ?" + keyIndexTerm[f.State])
		args = append(args, f.Key)
	}
	if f.Kind != "" {
		b.WriteString(" AND kind = ?")
		args = append(args, f.Kind)
	}
	if f.Reason != "" {
		b.WriteString(" AND dead_reason = ?")
		args = append(args, string(f.Reason))
	}
	if f.BeforeID > 0 {
		b.WriteString(" AND id < ? ORDER BY id DESC LIMIT ?")
		args = append(args, f.BeforeID, f.Limit)
	} else {
		b.WriteString(" ORDER BY id LIMIT ?")
		args = append(args, f.Limit)
	}
	return b.String(), args
}

// sqlBlockedKeys lists up to ?3 keys of queue ?1 after key ?2 that have
// waiting messages, with how many and their head. The keys come from
// leasehold_waiting one probe each (a loose index scan: the next key is
// the first entry past the last one), so the cost is in proportion to
// the keys listed and their waiting messages; the head is the key's entry
// in leasehold_key_head, NULL when there is none. The recursion's LIMIT
// ends it: its last row, once the keys run out, is a NULL.
var sqlBlockedKeys = sqlstate.Expand(`WITH RECURSIVE k(key) AS (
	SELECT (SELECT key FROM leasehold_messages WHERE queue = ?1 AND state = {waiting} AND key > ?2 ORDER BY key LIMIT 1)
	UNION ALL
	SELECT (SELECT key FROM leasehold_messages WHERE queue = ?1 AND state = {waiting} AND key > k.key ORDER BY key LIMIT 1)
	FROM k WHERE k.key IS NOT NULL
	LIMIT ?3)
SELECT k.key, (SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = {waiting} AND key = k.key), ` + columnsOf("h.") + `
FROM k LEFT JOIN leasehold_messages AS h ON h.queue = ?1 AND h.key = k.key AND h.state IN ({pending}, {processing})
WHERE k.key IS NOT NULL
ORDER BY k.key`)

// sqlQueues lists the queues that hold messages, are paused or have a
// record, without reading the completed rows: the queues with completed
// messages are those with a positive count; those with pending, waiting,
// dead or cancelled ones are read from each state's index by queue with a
// loose index scan, one probe per queue; those with processing ones from
// their index, which holds live rows only.
var sqlQueues = sqlstate.Expand(`WITH RECURSIVE
	` + queuesOf("pending", "{pending}") + `,
	` + queuesOf("waiting", "{waiting}") + `,
	` + queuesOf("dead", "{dead}") + `,
	` + queuesOf("cancelled", "{cancelled}") + `
SELECT q FROM pending WHERE q IS NOT NULL
UNION SELECT q FROM waiting WHERE q IS NOT NULL
UNION SELECT q FROM dead WHERE q IS NOT NULL
UNION SELECT q FROM cancelled WHERE q IS NOT NULL
UNION SELECT queue FROM leasehold_messages WHERE state = {processing}
UNION SELECT queue FROM leasehold_completed_counts WHERE n > 0
UNION SELECT queue FROM leasehold_queues WHERE paused OR created_at IS NOT NULL
ORDER BY 1`)

// queuesOf is a recursive table, name(q), of the queues that hold
// messages in a state, a loose index scan of the state's index by queue:
// each row is the first queue past the one before, and the last is NULL.
func queuesOf(name, state string) string {
	first := `SELECT queue FROM leasehold_messages WHERE state = ` + state
	return name + `(q) AS (SELECT (` + first + ` ORDER BY queue LIMIT 1)
		UNION ALL SELECT (` + first + ` AND queue > p.q ORDER BY queue LIMIT 1) FROM ` + name + ` AS p WHERE p.q IS NOT NULL)`
}
