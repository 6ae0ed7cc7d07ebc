package postgres

import (
	"fmt"

	"github.com/leasehold/leasehold/store"
)

// statements holds the SQL of every operation, with the schema filled in.
// Every statement's $1 is the time authority's now, or NULL for the
// database's now().
type statements struct {
	lockKeys, notify, insertBulk, insertOne, dedupGet, dedupClear, claim, extend, complete, promote,
	current, retry, kill, release, reap, deadRows, redrive, purge, stats, countCompleted, deleteCompleted string
	list [store.Dead + 1]string
}

const nowSQL = `COALESCE($1::timestamptz, now())`

func us(param string) string { return param + ` * interval '1 microsecond'` }

// held is the condition that the lease fence on row m is current, for
// statements that name one lease: the planner finds the row through the
// primary key, the only index it can use. "state + 0" keeps it off
// messages_processing, whose predicate "state = {processing}" it would otherwise
// prove: that index keeps an entry for every lease taken since the last
// VACUUM (entries a bitmap scan never marks dead), so a scan of its
// unexpired range costs in proportion to throughput times the lease
// duration, not to the leases asked about.
func held(m, id, fence string) string {
	return m + `.id = ` + id + ` AND ` + m + `.fencing_token = ` + fence + ` AND ` + m + `.state + 0 = {processing} AND ` + m + `.locked_until > ` + nowSQL
}

// heldRows is the condition that row m is one of the leases in the arrays
// ids ($2) and fences ($3), current. Each lease's row is looked up on its
// own, through the primary key, and the ids found are handed to the update
// as one array. A join of the arrays with the table would leave the
// planner a choice between those lookups and a scan of the whole table
// with a hash join, and with statistics gathered at the wrong moment (a
// histogram of lease expiries all in the past, say) it picks the scan,
// whose cost grows with the table. An array computed in the statement has
// a length the planner does not know and guesses small, so the update
// reads its rows through the primary key whatever the statistics say. The
// second test of the fence and the expiry on m is for a row that changed
// while the statement ran; tokens come from one sequence, so a token of
// the batch on that row is a lease of the batch.
func heldRows() string {
	return `m.id = ANY(ARRAY(
				SELECT h.id FROM unnest($2::bigint[], $3::bigint[]) AS l(id, fence)
				CROSS JOIN LATERAL (SELECT h.id FROM {s}.messages h WHERE ` + held("h", "l.id", "l.fence") + ` LIMIT 1) AS h))
			AND m.fencing_token = ANY($3::bigint[]) AND m.state + 0 = {processing} AND m.locked_until > ` + nowSQL
}

func newStatements(schema string) statements {
	x := func(sql string) string { return expand(sql, schema) }
	st := statements{
		lockKeys: `SELECT pg_advisory_xact_lock(hashtextextended(n, 0)) FROM unnest($1::text[]) AS n`,
		notify:   `SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q`,
		insertBulk: x(`INSERT INTO {s}.messages (queue, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind)
			SELECT q, r, p, 0, md, ` + nowSQL + `, ` + nowSQL + ` + ` + us("d") + `, k
			FROM unnest($2::text[], $3::text[], $4::bytea[], $5::int[], $6::bigint[], $7::text[]) WITH ORDINALITY AS u(q, r, p, md, d, k, ord)
			ORDER BY ord
			RETURNING id`),
		insertOne: x(`INSERT INTO {s}.messages (queue, key, dedup_id, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind)
			VALUES ($2, $3, $4, $5, $6,
				CASE WHEN $3::text IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.messages WHERE queue = $2 AND key = $3 AND state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END,
				$7, ` + nowSQL + `, ` + nowSQL + ` + ` + us("$8") + `, $9)
			RETURNING id`),
		dedupGet:   x(`SELECT id, enqueued_at > ` + nowSQL + ` - ` + us("$4") + ` FROM {s}.messages WHERE queue = $2 AND dedup_id = $3`),
		dedupClear: x(`UPDATE {s}.messages SET dedup_id = NULL WHERE id = $1`),
		// The rows are chosen and locked in a subquery whose ids reach the
		// update as one array, read through the primary key whatever the
		// statistics say (see heldRows); a join of the locked rows with the
		// table could be planned as a scan of the whole table. The rows are
		// locked, so the update needs no second test of their state. The
		// update takes them in id order, so the batch is sorted afterwards,
		// oldest visible first.
		claim: x(`WITH u AS (
				UPDATE {s}.messages m
				SET state = {processing}, deliveries = m.deliveries + 1, fencing_token = nextval('{s}.fence'), worker_id = $4,
					locked_until = ` + nowSQL + ` + ` + us("$5") + `
				WHERE m.id = ANY(ARRAY(
					SELECT id FROM {s}.messages
					WHERE queue = $2 AND state = {pending} AND visible_at <= ` + nowSQL + `
					ORDER BY visible_at, id
					LIMIT $3
					FOR UPDATE SKIP LOCKED))
				RETURNING m.id, m.key, m.payload, m.reply_to, m.dedup_id, m.deliveries, m.max_deliveries, m.enqueued_at, m.fencing_token, m.locked_until, m.visible_at, m.kind)
			SELECT id, key, payload, reply_to, dedup_id, deliveries, max_deliveries, enqueued_at, fencing_token, locked_until, kind
			FROM u ORDER BY visible_at, id`),
		// One row per extended lease, or one row of NULLs when none was: the
		// expiry is reported either way.
		extend: x(`WITH u AS (
				UPDATE {s}.messages m SET locked_until = ` + nowSQL + ` + ` + us("$4") + `
				WHERE ` + heldRows() + `
				RETURNING m.id, m.fencing_token)
			SELECT u.id, u.fencing_token, ` + nowSQL + ` + ` + us("$4") + ` FROM (SELECT 1) AS one LEFT JOIN u ON true`),
		complete: x(`UPDATE {s}.messages m SET state = {completed}, finished_at = ` + nowSQL + `
			WHERE ` + heldRows() + `
			RETURNING m.id, m.fencing_token, m.queue, m.key`),
		promote: x(`UPDATE {s}.messages SET state = {pending} WHERE id = (
			SELECT id FROM {s}.messages WHERE queue = $1 AND key = $2 AND state = {waiting} ORDER BY id LIMIT 1)`),
		current: x(`SELECT m.deliveries, m.max_deliveries, m.queue, m.key FROM {s}.messages m
			WHERE ` + held("m", "$2", "$3") + `
			FOR UPDATE`),
		retry: x(`UPDATE {s}.messages SET state = {pending}, visible_at = ` + nowSQL + ` + ` + us("$3") + `, last_error = $4 WHERE id = $2`),
		kill:  x(`UPDATE {s}.messages SET state = {dead}, dead_reason = $3, last_error = $4, finished_at = ` + nowSQL + ` WHERE id = $2`),
		release: x(`UPDATE {s}.messages m SET state = {pending}, visible_at = ` + nowSQL + ` + ` + us("$4") + `, deliveries = m.deliveries - 1
			WHERE ` + held("m", "$2", "$3") + `
			RETURNING m.queue`),
		// The reaper reads messages_processing in order (see Reap), and its
		// ids reach the update as one array, as the claim's do.
		reap: x(`UPDATE {s}.messages m SET
				state = CASE WHEN m.deliveries >= m.max_deliveries THEN {dead} ELSE {pending} END,
				visible_at = ` + nowSQL + `,
				dead_reason = CASE WHEN m.deliveries >= m.max_deliveries THEN 'lease_expired' ELSE m.dead_reason END,
				last_error = CASE WHEN m.deliveries >= m.max_deliveries THEN 'lease expired' ELSE m.last_error END,
				finished_at = CASE WHEN m.deliveries >= m.max_deliveries THEN ` + nowSQL + ` END
			WHERE m.id = ANY(ARRAY(
				SELECT id FROM {s}.messages WHERE state = {processing} AND locked_until <= ` + nowSQL + `
				FOR UPDATE SKIP LOCKED))
			RETURNING m.id, m.queue, m.key, m.state, ` + nowSQL + ` - m.locked_until`),
		deadRows: x(`SELECT id, key FROM {s}.messages
			WHERE queue = $1 AND state = {dead} AND ($3 OR id = ANY($2::bigint[]))
			ORDER BY id FOR UPDATE`),
		redrive: x(`UPDATE {s}.messages m SET deliveries = 0, dead_reason = NULL, finished_at = NULL, visible_at = ` + nowSQL + `,
				state = CASE WHEN m.key IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.messages h
					WHERE h.queue = m.queue AND h.key = m.key AND h.state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END
			WHERE m.id = $2`),
		purge: x(`DELETE FROM {s}.messages WHERE id = ANY($1::bigint[])`),
		// Each live state is counted through its partial index, completed
		// messages from their count: nothing reads the completed rows.
		stats: x(`SELECT
				(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {pending}),
				(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {waiting}),
				(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {processing}),
				(SELECT COALESCE(sum(n), 0) FROM {s}.completed_counts WHERE queue = $2),
				(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {dead}),
				(SELECT count(DISTINCT key) FROM {s}.messages WHERE queue = $2 AND state = {waiting}),
				COALESCE((SELECT ` + nowSQL + ` - min(visible_at) FROM {s}.messages
					WHERE queue = $2 AND state = {pending} AND visible_at <= ` + nowSQL + `), interval '0')`),
		// countCompleted adds $2[i] to queue $1[i]'s completed count, in the
		// shard of this connection.
		countCompleted: x(`INSERT INTO {s}.completed_counts AS c (queue, shard, n)
			SELECT q, (pg_backend_pid() % 16)::smallint, n FROM unnest($1::text[], $2::bigint[]) AS t(q, n) ORDER BY q
			ON CONFLICT (queue, shard) DO UPDATE SET n = c.n + excluded.n`),
		deleteCompleted: x(`WITH gone AS (
				DELETE FROM {s}.messages WHERE id IN (
					SELECT id FROM {s}.messages
					WHERE state = {completed} AND finished_at <= ` + nowSQL + ` - ` + us("$2") + ` AND enqueued_at <= ` + nowSQL + ` - ` + us("$3") + `
					LIMIT $4 FOR UPDATE SKIP LOCKED)
				RETURNING queue),
			counted AS (
				INSERT INTO {s}.completed_counts AS c (queue, shard, n)
				SELECT queue, (pg_backend_pid() % 16)::smallint, -count(*) FROM gone GROUP BY queue ORDER BY queue
				ON CONFLICT (queue, shard) DO UPDATE SET n = c.n + excluded.n)
			SELECT count(*) FROM gone`),
	}
	for state := range st.list {
		// The state is a literal so that the planner can use its partial index.
		st.list[state] = x(fmt.Sprintf(`SELECT id, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
				worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind
			FROM {s}.messages WHERE queue = $1 AND state = %d AND id > $2 ORDER BY id LIMIT $3`, state))
	}
	return st
}
