-- Every statement the PostgreSQL store runs, by name. Each "-- name: X"
-- line starts one; the comments under it say why it is written so.
--
-- Written in when the store opens:
--   {s}                       the schema, quoted
--   {pending}, {waiting}, {processing}, {completed}, {dead}, {cancelled}
--                             the message states' codes
--   {state}                   in list, listBefore and prune: the state's code
--
-- In every statement with a time, $1 is the time authority's now: the
-- injected clock's time, or NULL for the database's now(), hence
-- COALESCE($1::timestamptz, now()). Durations travel as microseconds.
--
-- The statements are written by hand, not generated: the schema is chosen
-- when the store opens (one per test, or per deployment), and a generator
-- of Go from SQL fixes the names it reads at build time.

-- name: lockKeys
-- Transaction-scoped advisory locks on key and dedup names, given sorted.
SELECT pg_advisory_xact_lock(hashtextextended(n, 0)) FROM unnest($1::text[]) AS n

-- name: notify
-- Wakes receivers of each queue in every process once the transaction
-- commits.
SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q

-- name: begin
-- READ COMMITTED whatever the server's default: key order relies on each
-- statement seeing what committed before a key's lock was granted.
BEGIN ISOLATION LEVEL READ COMMITTED

-- name: commit
COMMIT

-- name: indexScans
-- For the rest of the transaction, plans read tables through their
-- indexes wherever one serves: sequential and bitmap scans cost the
-- planner more than any index scan. A plan made once and reused (a
-- prepared statement's generic plan) is then index-backed whatever the
-- table's size when it was made; without this, one made on a tiny table
-- keeps scanning it as it grows. The statements run after it in one
-- transaction may be prepared once per connection.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)

-- name: isolation
SELECT current_setting('transaction_isolation')

-- name: insertBulk
-- Messages without keys or dedup ids, in one statement, ids drawn in
-- input order.
INSERT INTO {s}.messages (queue, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind, priority, attributes,
	dead_letter_queue)
SELECT q, r, p, {pending}, md, COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()) + d * interval '1 microsecond', k, pr, a, dl
FROM unnest($2::text[], $3::text[], $4::bytea[], $5::int[], $6::bigint[], $7::text[], $8::smallint[], $9::bytea[], $10::text[])
	WITH ORDINALITY AS u(q, r, p, md, d, k, pr, a, dl, ord)
ORDER BY ord
RETURNING id

-- name: insertOne
-- One message, waiting behind its key's unfinished head if there is one.
-- The caller holds the key's lock. A message of a fairness group ($13)
-- is placed as insertPlaced places it.
INSERT INTO {s}.messages (queue, key, dedup_id, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind, priority, attributes,
	dead_letter_queue, fair_group, unique_key)
VALUES ($2, $3, $4, $5, $6,
	CASE WHEN $3::text IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.messages WHERE queue = $2 AND key = $3 AND state IN ({pending}, {processing}))
		THEN {waiting} ELSE {pending} END,
	$7, COALESCE($1::timestamptz, now()),
	CASE WHEN $13::text IS NULL OR $8::bigint > 0 THEN COALESCE($1::timestamptz, now()) + $8 * interval '1 microsecond'
	ELSE LEAST(COALESCE($1::timestamptz, now()), GREATEST(
		(SELECT min(visible_at) FROM {s}.messages
			WHERE queue = $2 AND state = {pending} AND priority = $10 AND visible_at <= COALESCE($1::timestamptz, now())),
		(SELECT max(visible_at) FROM {s}.messages
			WHERE queue = $2 AND fair_group = $13 AND state = {pending} AND visible_at <= COALESCE($1::timestamptz, now()))
			+ interval '1 microsecond'))
	END,
	$9, $10, $11::bytea, $12, $13, $14)
RETURNING id

-- name: insertPlaced
-- Messages without keys, some of fairness groups ($11), in one
-- statement, ids drawn in input order, with the notification of their
-- queues ($12): one round trip, planned at each execution as the
-- placement reads indexes. A message of a group that is ready at once
-- (no delay) is placed right behind its group's last ready message, a
-- microsecond after it, or at the queue's first ready message of its
-- priority when that is later, and never after now (GREATEST and LEAST
-- skip NULLs: with no ready message, now): two index lookups, and no
-- lock, as placement is fairness, not order. The statement's rows do not
-- see each other, so a batch's messages of one group are placed as if
-- one by one: the nth a microsecond after the (n-1)th.
WITH ins AS (
	INSERT INTO {s}.messages (queue, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind, priority, attributes,
		dead_letter_queue, fair_group)
	SELECT q, r, p, {pending}, md, COALESCE($1::timestamptz, now()),
		CASE WHEN g IS NULL OR d > 0 THEN COALESCE($1::timestamptz, now()) + d * interval '1 microsecond'
		ELSE LEAST(COALESCE($1::timestamptz, now()), GREATEST(
			(SELECT min(visible_at) FROM {s}.messages
				WHERE queue = q AND state = {pending} AND priority = pr AND visible_at <= COALESCE($1::timestamptz, now())),
			(SELECT max(visible_at) FROM {s}.messages
				WHERE queue = q AND fair_group = g AND state = {pending} AND visible_at <= COALESCE($1::timestamptz, now()))
				+ interval '1 microsecond') + (gn - 1) * interval '1 microsecond')
		END,
		k, pr, a, dl, g
	FROM (SELECT *, row_number() OVER (PARTITION BY q, g ORDER BY ord) AS gn
		FROM unnest($2::text[], $3::text[], $4::bytea[], $5::int[], $6::bigint[], $7::text[], $8::smallint[], $9::bytea[], $10::text[], $11::text[])
			WITH ORDINALITY AS u(q, r, p, md, d, k, pr, a, dl, g, ord)) AS u
	ORDER BY ord
	RETURNING id, queue)
SELECT (SELECT array_agg(id ORDER BY id) FROM ins),
	(SELECT count(pg_notify($12, q)) FROM (SELECT DISTINCT queue AS q FROM ins) AS w)

-- name: dedupGet
-- The message holding a dedup id, and whether it is inside the window ($4).
SELECT id, enqueued_at > COALESCE($1::timestamptz, now()) - $4 * interval '1 microsecond'
FROM {s}.messages WHERE queue = $2 AND dedup_id = $3

-- name: uniqueGet
-- The first message of a unique key ($1) whose state is one of a set,
-- given as a bit mask ($2, bit n for state n). The caller holds the
-- key's lock.
SELECT id FROM {s}.messages WHERE unique_key = $1 AND ($2::int >> state) & 1 = 1 ORDER BY id LIMIT 1

-- name: dedupClear
UPDATE {s}.messages SET dedup_id = NULL WHERE id = $1

-- name: claim
-- The rows are chosen and locked in a subquery, read from messages_ready
-- in claim order: the highest priority first, then the oldest visible.
-- Delayed messages are read past in the index, whatever their priority.
-- A paused queue gives nothing. The locked row versions reach the update
-- as one array of their physical addresses (ctid), updated where they
-- stand with no second lookup: locked, they cannot change before the
-- update. The update takes them in address order and returns them so,
-- with the visible_at that orders them: the store puts them back in claim
-- order, at a fraction of what a sort here costs the server. A message's
-- first claim records its time. The leases are not independent. Prepared
-- once per connection, and run after indexScans, which keeps its plan
-- index-backed.
UPDATE {s}.messages m
SET state = {processing}, deliveries = m.deliveries + 1, fencing_token = nextval('{s}.fence'), worker_id = $4,
	locked_until = COALESCE($1::timestamptz, now()) + $5 * interval '1 microsecond',
	first_claimed_at = COALESCE(m.first_claimed_at, COALESCE($1::timestamptz, now())), independent = false
WHERE m.ctid = ANY(ARRAY(
	SELECT ctid FROM {s}.messages
	WHERE queue = $2 AND state = {pending} AND visible_at <= COALESCE($1::timestamptz, now())
		AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE queue = $2 AND paused)
	ORDER BY priority DESC, visible_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED))
RETURNING m.id, m.key, m.payload, m.reply_to, m.dedup_id, m.deliveries, m.max_deliveries, m.enqueued_at,
	m.fencing_token, m.locked_until, m.kind, m.priority, m.attributes, m.first_claimed_at, m.dead_letter_source, m.visible_at

-- name: claimRuns
-- Claims as claim does, each keyed message bringing the rest of its run:
-- the next waiting messages of its key, in order, up to the first that is
-- not visible, and before the key's first processing message after the
-- head (read through messages_key_head); up to $3 messages in all, in
-- claim order with each key's run after its head. With $6 their leases
-- are independent. The heads are locked as claim locks them; their
-- keys' waiting messages are read through messages_waiting in their
-- lines' order (see arrival in the migrations), at most $3 of each,
-- without a lock: a message that changed meanwhile (a cancel)
-- fails the update's second test of its state and is left out. The
-- batch comes back in its order. Line order is messages_waiting's and
-- not the primary key's, so no statistics (say, gathered while the key's
-- messages were most of the table) can make reading them in id order
-- through the primary key, filtered, past every finished message of the
-- table, look cheaper.
WITH heads AS (
	SELECT id, key, priority, visible_at, COALESCE(arrival, id) AS arrival FROM {s}.messages
	WHERE queue = $2 AND state = {pending} AND visible_at <= COALESCE($1::timestamptz, now())
		AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE queue = $2 AND paused)
	ORDER BY priority DESC, visible_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED),
members AS (
	SELECT h.id, row_number() OVER (ORDER BY h.priority DESC, h.visible_at, h.id) AS hn, 0::bigint AS rn, 0::bigint AS hidden FROM heads h
	UNION ALL
	SELECT f.id, hn.hn, f.rn, f.hidden
	FROM (SELECT id, key, arrival, row_number() OVER (ORDER BY priority DESC, visible_at, id) AS hn FROM heads) AS hn
	CROSS JOIN LATERAL (
		SELECT w.id, row_number() OVER (ORDER BY w.arrival) AS rn,
			count(*) FILTER (WHERE w.visible_at > COALESCE($1::timestamptz, now())) OVER (ORDER BY w.arrival) AS hidden
		FROM (SELECT id, visible_at, COALESCE(arrival, id) AS arrival FROM {s}.messages
			WHERE queue = $2 AND key = hn.key AND state = {waiting}
				AND COALESCE(arrival, id) < COALESCE((SELECT min(COALESCE(p.arrival, p.id)) FROM {s}.messages p
					WHERE p.queue = $2 AND p.key = hn.key AND p.state IN ({pending}, {processing}) AND p.state = {processing}
						AND COALESCE(p.arrival, p.id) > hn.arrival), 9223372036854775807)
			ORDER BY COALESCE(arrival, id) LIMIT $3 - 1) AS w) AS f
	WHERE hn.key IS NOT NULL),
picked AS (
	SELECT id, hn, rn FROM (SELECT id, hn, rn, row_number() OVER (ORDER BY hn, rn) AS n FROM members WHERE hidden = 0) AS m
	WHERE n <= $3),
u AS (
	UPDATE {s}.messages m
	SET state = {processing}, deliveries = m.deliveries + 1, fencing_token = nextval('{s}.fence'), worker_id = $4,
		locked_until = COALESCE($1::timestamptz, now()) + $5 * interval '1 microsecond',
		first_claimed_at = COALESCE(m.first_claimed_at, COALESCE($1::timestamptz, now())), independent = $6
	WHERE m.id = ANY(ARRAY(SELECT id FROM picked)) AND m.state IN ({pending}, {waiting})
	RETURNING m.id, m.key, m.payload, m.reply_to, m.dedup_id, m.deliveries, m.max_deliveries, m.enqueued_at,
		m.fencing_token, m.locked_until, m.kind, m.priority, m.attributes, m.first_claimed_at, m.dead_letter_source)
SELECT u.id, u.key, u.payload, u.reply_to, u.dedup_id, u.deliveries, u.max_deliveries, u.enqueued_at, u.fencing_token, u.locked_until,
	u.kind, u.priority, u.attributes, u.first_claimed_at, u.dead_letter_source
FROM u JOIN picked p ON p.id = u.id ORDER BY p.hn, p.rn

-- name: extend
-- Renews the current leases among those in the arrays of ids ($2) and
-- fencing tokens ($3). One row per extended lease, or one row of NULLs when
-- none was: the expiry is reported either way.
--
-- Each lease's row is looked up on its own, through the primary key, and
-- the ids found reach the update as one array. A join of the arrays with
-- the table would leave the planner a choice between those lookups and a
-- scan of the whole table with a hash join, and with statistics gathered at
-- the wrong moment (a histogram of lease expiries all in the past, say) it
-- picks the scan, whose cost grows with the table. An array computed in
-- the statement has a length the planner does not know and guesses small,
-- so the update reads its rows through the primary key whatever the
-- statistics say. The second test of the fence and the expiry on m is for a
-- row that changed while the statement ran; tokens come from one sequence,
-- so a token of the batch on that row is a lease of the batch.
--
-- "state + 0" keeps the lookup off messages_processing, whose predicate
-- "state = {processing}" the planner would otherwise prove: that index
-- keeps an entry for every lease taken since the last VACUUM (entries a
-- bitmap scan never marks dead), so a scan of its unexpired range costs in
-- proportion to throughput times the lease duration, not to the leases
-- asked about.
WITH u AS (
	UPDATE {s}.messages m SET locked_until = COALESCE($1::timestamptz, now()) + $4 * interval '1 microsecond'
	WHERE m.id = ANY(ARRAY(
			SELECT h.id FROM unnest($2::bigint[], $3::bigint[]) AS l(id, fence)
			CROSS JOIN LATERAL (SELECT h.id FROM {s}.messages h
				WHERE h.id = l.id AND h.fencing_token = l.fence AND h.state + 0 = {processing}
					AND h.locked_until > COALESCE($1::timestamptz, now())
				LIMIT 1) AS h))
		AND m.fencing_token = ANY($3::bigint[]) AND m.state + 0 = {processing} AND m.locked_until > COALESCE($1::timestamptz, now())
	RETURNING m.id, m.fencing_token)
SELECT u.id, u.fencing_token, COALESCE($1::timestamptz, now()) + $4 * interval '1 microsecond'
FROM (SELECT 1) AS one LEFT JOIN u ON true

-- name: complete
-- Completes the current leases among those in the arrays of ids ($2) and
-- fencing tokens ($3). Each lease's row is looked up on its own, through
-- the primary key, as extend looks them up, and the row versions found
-- are updated where they stand, read through one array of their physical
-- addresses (ctid): no second lookup, and one scan by address, which
-- reads the table's size from the kernel as it starts, rather than one
-- for each row. The update tests each row again: a row that another
-- transaction changed since the statement began is read again at its
-- latest version, and the address alone says nothing of it (older
-- PostgreSQL releases do not even compare the address again). That
-- version must still be processing and unexpired, under a token no
-- higher than the highest of the rows found. Only a claim makes a row
-- processing, and every claim draws its token from one sequence, so a
-- claim that follows a reap committed while the statement ran has a token
-- above all of theirs, and a completion that began before a reap and a
-- new claim does not complete the new delivery. The bound is of the rows
-- found, not of the tokens asked for, so that a token never handed out
-- cannot widen it. A row changed meanwhile may be left out;
-- completeAgain completes the leases left out, if any are still current.
WITH found AS MATERIALIZED (
	SELECT h.ctid, h.fencing_token FROM unnest($2::bigint[], $3::bigint[]) AS l(id, fence)
	CROSS JOIN LATERAL (SELECT h.ctid, h.fencing_token FROM {s}.messages h
		WHERE h.id = l.id AND h.fencing_token = l.fence AND h.state + 0 = {processing}
			AND h.locked_until > COALESCE($1::timestamptz, now())
		LIMIT 1) AS h)
UPDATE {s}.messages m SET state = {completed}, finished_at = COALESCE($1::timestamptz, now())
WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM found))
	AND m.fencing_token <= (SELECT max(fencing_token) FROM found) AND m.state + 0 = {processing}
	AND m.locked_until > COALESCE($1::timestamptz, now())
RETURNING m.id, m.fencing_token, m.queue, m.key

-- name: completeAgain
-- Completes as complete does the leases in the arrays of ids ($2) and
-- fencing tokens ($3), for the few that complete left out: their rows
-- are read through the primary key, and the latest version of each is
-- tested. Tokens come from one sequence, so a token of the batch on one
-- of the rows is a lease of the batch.
UPDATE {s}.messages m SET state = {completed}, finished_at = COALESCE($1::timestamptz, now())
WHERE m.id = ANY($2::bigint[]) AND m.fencing_token = ANY($3::bigint[]) AND m.state + 0 = {processing}
	AND m.locked_until > COALESCE($1::timestamptz, now())
RETURNING m.id, m.fencing_token, m.queue, m.key

-- name: completeLate
-- Completes as complete does the leases in the arrays of ids ($2),
-- fencing tokens ($3) and whether late ($4): a late one also when its
-- message is still processing under its token after the lease expired,
-- or pending under it (given back, not claimed since). The rows of late
-- leases whose message is completed under them already come back too,
-- marked repeated. Unlike complete, the lookup locks the rows it finds,
-- in id order: a late completion that waits for another of the same
-- lease then reads the row as that one left it, completed, and reports
-- a repeat, where a read of the statement's snapshot would find it
-- processing and the update would pass it over.
WITH found AS (
	SELECT h.id, h.state FROM (SELECT * FROM unnest($2::bigint[], $3::bigint[], $4::bool[]) AS l(id, fence, late) ORDER BY id) AS l
	CROSS JOIN LATERAL (SELECT h.id, h.state FROM {s}.messages h
		WHERE h.id = l.id AND h.fencing_token = l.fence
			AND (h.state + 0 = {processing} AND h.locked_until > COALESCE($1::timestamptz, now())
				OR l.late AND h.state + 0 IN ({processing}, {pending}, {completed}))
		LIMIT 1 FOR UPDATE) AS h),
u AS (
	UPDATE {s}.messages m SET state = {completed}, finished_at = COALESCE($1::timestamptz, now())
	WHERE m.id = ANY(ARRAY(SELECT id FROM found WHERE state <> {completed}))
	RETURNING m.id, m.fencing_token, m.queue, m.key)
SELECT id, fencing_token, queue, key, false FROM u
UNION ALL
SELECT m.id, m.fencing_token, m.queue, m.key, true FROM found f JOIN {s}.messages m ON m.id = f.id
WHERE f.state = {completed}

-- name: cancelledOf
-- Of the leases in the arrays of ids ($1) and fencing tokens ($2), those
-- whose message was cancelled under them.
SELECT m.id, m.fencing_token FROM unnest($1::bigint[], $2::bigint[]) AS l(id, fence)
JOIN {s}.messages m ON m.id = l.id AND m.fencing_token = l.fence
WHERE m.state = {cancelled}

-- name: keysOf
-- The queues and keys of messages, unlocked.
SELECT queue, key FROM {s}.messages WHERE id = ANY($1::bigint[]) AND key IS NOT NULL

-- name: cancelRows
-- The messages to cancel, rerun or delete, locked, in id order, once
-- their keys' locks are held.
SELECT id, queue, state, key FROM {s}.messages WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE

-- name: cancel
UPDATE {s}.messages SET state = {cancelled}, finished_at = COALESCE($1::timestamptz, now())
WHERE id = ANY($2::bigint[]) AND state IN ({pending}, {waiting}, {processing})

-- name: promote
-- Lets the next waiting message of a key go, in its line's order, if
-- none of the key's messages is pending, nor processing (a run's other
-- messages may be) unless leased independent and after it in the line.
-- The caller holds the key's lock, as does every change that makes a
-- message of a key wait.
UPDATE {s}.messages m SET state = {pending} WHERE m.id = (
	SELECT id FROM {s}.messages WHERE queue = $1 AND key = $2 AND state = {waiting} ORDER BY COALESCE(arrival, id) LIMIT 1)
	AND NOT EXISTS (SELECT 1 FROM {s}.messages h WHERE h.queue = $1 AND h.key = $2 AND h.state IN ({pending}, {processing})
		AND (h.state = {pending} OR NOT h.independent OR COALESCE(h.arrival, h.id) < COALESCE(m.arrival, m.id)))

-- name: running
-- The pending and processing messages of the keys in the arrays of
-- queues ($1) and keys ($2), read from messages_key_head. The caller
-- holds the keys' locks; the rows are not locked, so that a completion
-- of one of them that waits for a key's lock holds no row this waits
-- for. hold tests their state again.
SELECT m.id, m.fencing_token, m.queue, m.key, COALESCE(m.arrival, m.id), m.independent, m.state = {pending}
FROM unnest($1::text[], $2::text[]) AS l(queue, key)
JOIN {s}.messages m ON m.queue = l.queue AND m.key = l.key AND m.state IN ({pending}, {processing})

-- name: hold
-- Puts the messages in $1 that are still processing or pending back in
-- their keys' lines, waiting; with $2, each takes back the delivery its
-- claim counted. Their tokens go to 0, which no claim mints: the handles
-- of their claims are lost, and never complete them late.
UPDATE {s}.messages SET state = {waiting}, fencing_token = 0, deliveries = CASE WHEN $2 THEN deliveries - 1 ELSE deliveries END
WHERE id = ANY($1::bigint[]) AND state + 0 IN ({processing}, {pending})

-- name: current
-- The message of one lease ($2, $3) if the lease is current, locked. The
-- row is found through the primary key ("state + 0": see extend).
SELECT m.deliveries, m.max_deliveries, m.queue, m.key, m.dead_letter_queue, COALESCE(m.arrival, m.id), m.independent FROM {s}.messages m
WHERE m.id = $2 AND m.fencing_token = $3 AND m.state + 0 = {processing} AND m.locked_until > COALESCE($1::timestamptz, now())
FOR UPDATE

-- name: given
-- The message of one lease ($1, $2) if no claim has taken it since:
-- processing under its token, whatever the expiry, or pending under it;
-- locked, and found through the primary key ("state + 0": see extend).
SELECT m.deliveries, m.max_deliveries, m.queue, m.key, m.dead_letter_queue, COALESCE(m.arrival, m.id), m.independent FROM {s}.messages m
WHERE m.id = $1 AND m.fencing_token = $2 AND m.state + 0 IN ({processing}, {pending})
FOR UPDATE

-- name: retry
-- Makes the messages in $2 pending again, visible after $3 microseconds;
-- with $5, $4 becomes their last error, added to their error histories;
-- with $6, each takes back the delivery its claim counted.
UPDATE {s}.messages SET state = {pending}, visible_at = COALESCE($1::timestamptz, now()) + $3 * interval '1 microsecond',
	last_error = CASE WHEN $5 THEN $4 ELSE last_error END, deliveries = CASE WHEN $6 THEN deliveries - 1 ELSE deliveries END,
	errors = CASE WHEN $5 THEN {s}.with_error(errors, deliveries, COALESCE($1::timestamptz, now()), worker_id, $4, {maxErrors}) ELSE errors END
WHERE id = ANY($2::bigint[])

-- name: takeBackDelivery
-- Takes back the delivery that the claim of each message in $1 counted.
UPDATE {s}.messages SET deliveries = deliveries - 1 WHERE id = ANY($1::bigint[])

-- name: kill
-- Dead-letters the messages in $2, their error $4 added to their error
-- histories; with $5, their visible time becomes now too.
UPDATE {s}.messages SET state = {dead}, dead_reason = $3, last_error = $4, finished_at = COALESCE($1::timestamptz, now()),
	visible_at = CASE WHEN $5 THEN COALESCE($1::timestamptz, now()) ELSE visible_at END,
	errors = {s}.with_error(errors, deliveries, COALESCE($1::timestamptz, now()), worker_id, $4, {maxErrors})
WHERE id = ANY($2::bigint[])

-- name: expired
-- The processing messages whose leases have expired, locked; those that
-- another transaction holds are passed over, so that reapers running at
-- once never wait on each other. Run after indexScans, it reads
-- messages_processing in order: a bitmap scan, the planner's choice for
-- a range, visits every entry of the range in the table and marks none
-- dead, where an ordered index scan marks the entries of leases that have
-- ended since, so that each reap does not read them again. Finished
-- leases leave such entries at a rate of thousands a second until a
-- VACUUM.
SELECT id, fencing_token, queue, key, deliveries, max_deliveries, COALESCE($1::timestamptz, now()) - locked_until, dead_letter_queue,
	COALESCE(arrival, id), independent
FROM {s}.messages WHERE state = {processing} AND locked_until <= COALESCE($1::timestamptz, now())
FOR UPDATE SKIP LOCKED

-- name: deadRows
-- A queue's dead messages, locked: those in $2, or all when $3.
SELECT id, key FROM {s}.messages
WHERE queue = $1 AND state = {dead} AND ($3 OR id = ANY($2::bigint[]))
ORDER BY id FOR UPDATE

-- name: redrive
-- Brings a finished message (dead, completed or cancelled, locked by the
-- caller, which takes a completed one off its count) back: behind its
-- key's unfinished head, or pending. Its fencing token becomes 0, which
-- the fence sequence never gives, so that no lease from before it
-- finished completes it late.
UPDATE {s}.messages m SET deliveries = 0, dead_reason = NULL, finished_at = NULL, visible_at = COALESCE($1::timestamptz, now()), fencing_token = 0,
	state = CASE WHEN m.key IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.messages h
		WHERE h.queue = m.queue AND h.key = m.key AND h.state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END
WHERE m.id = $2

-- name: hasten
-- Makes the pending messages in $2 that are not visible yet visible now.
UPDATE {s}.messages SET visible_at = COALESCE($1::timestamptz, now())
WHERE id = ANY($2::bigint[]) AND state = {pending} AND visible_at > COALESCE($1::timestamptz, now())

-- name: snoozed
-- Counts a snooze of message $1.
UPDATE {s}.messages SET snoozes = snoozes + 1 WHERE id = $1

-- name: movablePending
-- Up to $3 visible pending messages of queue $2 in claim order, read
-- through messages_ready as claim reads it, unlocked: the caller takes
-- their keys' locks, then locks them with movableLock. With $4 only
-- those that have a dead-letter source, passing over the others.
SELECT id, key, dead_letter_source FROM {s}.messages
WHERE queue = $2 AND state = {pending} AND visible_at <= COALESCE($1::timestamptz, now())
	AND (NOT $4 OR dead_letter_source IS NOT NULL)
ORDER BY priority DESC, visible_at, id LIMIT $3

-- name: movableDead
-- Up to $3 dead messages of queue $1 by id, through messages_dead,
-- unlocked; with $2 only those that have a dead-letter source.
SELECT id, key, dead_letter_source FROM {s}.messages
WHERE queue = $1 AND state = {dead} AND (NOT $2 OR dead_letter_source IS NOT NULL)
ORDER BY id LIMIT $3

-- name: movableLock
-- Locks the messages of $1 that are still of queue $2 in state $3, once
-- their keys' locks are held, passing over those another transaction
-- holds; found through the primary key ("state + 0": see extend).
SELECT id FROM {s}.messages
WHERE id = ANY($1::bigint[]) AND queue = $2 AND state + 0 = $3
FOR UPDATE SKIP LOCKED

-- name: transfer
-- Moves message $2 to queue $3 as a new message of it: behind its key's
-- unfinished head there, or pending, visible now. With $4 it is a dead
-- letter: the queue it leaves becomes its source (every right-hand side
-- reads the row as it was), reason $5 and error $6 are recorded, the
-- error in its history too; else its source and reason are cleared. A
-- dead letter keeps its deliveries and first claim, as Amazon SQS keeps a
-- message's receive count in its dead-letter queue; any other starts them
-- again. $7 and $8 are its budget and dead-letter queue from now on. Its
-- fencing token becomes 0, which the fence sequence never gives, so that
-- no earlier lease completes it late.
-- Its arrival is drawn from the ids' sequence, so that it goes after
-- every message of its key in $3 and before every later one. The caller
-- holds the lock of its key in $3.
UPDATE {s}.messages m SET fencing_token = 0, arrival = nextval(pg_get_serial_sequence('{s}.messages', 'id')),
	dead_letter_source = CASE WHEN $4::boolean THEN m.queue END,
	dead_reason = CASE WHEN $4::boolean THEN $5::text END,
	last_error = CASE WHEN $4::boolean THEN $6::text ELSE m.last_error END,
	errors = CASE WHEN $4::boolean THEN {s}.with_error(m.errors, m.deliveries, COALESCE($1::timestamptz, now()), m.worker_id, $6::text, {maxErrors})
		ELSE m.errors END,
	queue = $3, max_deliveries = $7, dead_letter_queue = $8,
	dedup_id = NULL, finished_at = NULL, visible_at = COALESCE($1::timestamptz, now()),
	deliveries = CASE WHEN $4::boolean THEN m.deliveries ELSE 0 END,
	first_claimed_at = CASE WHEN $4::boolean THEN m.first_claimed_at END,
	state = CASE WHEN m.key IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.messages h
		WHERE h.queue = $3 AND h.key = m.key AND h.state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END
WHERE m.id = $2

-- name: recorded
-- Those of the queues in $1 that have a record, their rows locked FOR
-- KEY SHARE until the transaction ends: a DeleteQueue of one waits (and
-- then deletes what this moved there), while a change of its attributes
-- does not.
SELECT queue FROM {s}.queues WHERE queue = ANY($1::text[]) AND created_at IS NOT NULL
ORDER BY queue FOR KEY SHARE

-- name: purge
-- Deletes the messages in $1, which the caller has locked and chosen by
-- state (dead ones for Purge; any but processing for Delete, which takes
-- completed ones off their counts).
DELETE FROM {s}.messages WHERE id = ANY($1::bigint[])

-- name: stats
-- Each live state is counted through its partial index, completed messages
-- from their count: nothing reads the completed rows. The one scan of the
-- pending messages counts the delayed ones too.
SELECT
	pending.n,
	(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {waiting}),
	(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {processing}),
	(SELECT COALESCE(sum(n), 0) FROM {s}.completed_counts WHERE queue = $2),
	(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {dead}),
	(SELECT count(DISTINCT key) FROM {s}.messages WHERE queue = $2 AND state = {waiting}),
	COALESCE((WITH RECURSIVE p(priority) AS (
			-- Each priority of the queue's pending messages, one index
			-- probe each: the oldest visible message of a priority is its
			-- first.
			SELECT max(priority) FROM {s}.messages WHERE queue = $2 AND state = {pending}
			UNION ALL
			SELECT (SELECT max(priority) FROM {s}.messages WHERE queue = $2 AND state = {pending} AND priority < p.priority)
			FROM p WHERE p.priority IS NOT NULL)
		SELECT COALESCE($1::timestamptz, now()) - min(v) FROM (
			SELECT (SELECT visible_at FROM {s}.messages WHERE queue = $2 AND state = {pending} AND priority = p.priority
				ORDER BY visible_at LIMIT 1) AS v
			FROM p WHERE p.priority IS NOT NULL) AS firsts
		WHERE v <= COALESCE($1::timestamptz, now())), interval '0'),
	COALESCE((SELECT paused FROM {s}.queues WHERE queue = $2), false),
	(SELECT count(*) FROM {s}.messages WHERE queue = $2 AND state = {cancelled}),
	pending.delayed
FROM (SELECT count(*) AS n, count(*) FILTER (WHERE visible_at > COALESCE($1::timestamptz, now())) AS delayed
	FROM {s}.messages WHERE queue = $2 AND state = {pending}) AS pending

-- name: allStats
-- Counts every queue's messages in one statement, for the queues that
-- queues lists: each live state's messages are read once through the
-- state's partial index and grouped by queue, completed ones come from
-- their counts, and the queues' rows give the paused ones and the
-- records. The pending scan counts the delayed messages and finds the
-- oldest visible one too.
WITH t(now) AS (SELECT COALESCE($1::timestamptz, now()))
SELECT queue, sum(pending)::bigint, sum(waiting)::bigint, sum(processing)::bigint, sum(completed)::bigint, sum(dead)::bigint,
	sum(keys)::bigint, COALESCE((SELECT now FROM t) - min(oldest), interval '0'), bool_or(paused), sum(cancelled)::bigint,
	sum(delayed)::bigint
FROM (
	SELECT queue, count(*) AS pending, 0 AS waiting, 0 AS processing, 0 AS completed, 0 AS dead, 0 AS keys,
		min(visible_at) FILTER (WHERE visible_at <= (SELECT now FROM t)) AS oldest, false AS paused, 0 AS cancelled,
		count(*) FILTER (WHERE visible_at > (SELECT now FROM t)) AS delayed
	FROM {s}.messages WHERE state = {pending} GROUP BY queue
	UNION ALL
	SELECT queue, 0, count(*), 0, 0, 0, count(DISTINCT key), NULL, false, 0, 0
	FROM {s}.messages WHERE state = {waiting} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, count(*), 0, 0, 0, NULL, false, 0, 0
	FROM {s}.messages WHERE state = {processing} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, 0, count(*), 0, NULL, false, 0, 0
	FROM {s}.messages WHERE state = {dead} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, 0, 0, 0, NULL, false, count(*), 0
	FROM {s}.messages WHERE state = {cancelled} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, sum(n), 0, 0, NULL, false, 0, 0
	FROM {s}.completed_counts GROUP BY queue HAVING sum(n) > 0
	UNION ALL
	SELECT queue, 0, 0, 0, 0, 0, 0, NULL, paused, 0, 0 FROM {s}.queues WHERE paused OR created_at IS NOT NULL) AS counts
GROUP BY queue ORDER BY queue

-- name: count
-- Adds a settling transaction's counts: to queue $2[i]'s minute of $1
-- (now when NULL) the completions $3[i], failures $4[i] and dead letters
-- $5[i], and $7[i] to queue $6[i]'s completed count, each in the shard
-- of this connection.
WITH minutes AS (
	INSERT INTO {s}.throughput AS m (queue, minute, shard, completed, failed, dead)
	SELECT q, date_trunc('minute', COALESCE($1::timestamptz, now()), 'UTC'), (pg_backend_pid() % 16)::smallint, c, f, d
	FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS t(q, c, f, d) ORDER BY q
	ON CONFLICT (queue, minute, shard) DO UPDATE
		SET completed = m.completed + excluded.completed, failed = m.failed + excluded.failed, dead = m.dead + excluded.dead)
INSERT INTO {s}.completed_counts AS c (queue, shard, n)
SELECT q, (pg_backend_pid() % 16)::smallint, n FROM unnest($6::text[], $7::bigint[]) AS t(q, n) ORDER BY q
ON CONFLICT (queue, shard) DO UPDATE SET n = c.n + excluded.n

-- name: prune
-- Messages in one state ({state}: completed, dead or cancelled) that
-- finished more than $2 ago and were enqueued before the dedup window
-- ($3), of queue $5 or of any queue when it is NULL, at most $4; the
-- completed ones' counts taken back.
WITH gone AS (
	DELETE FROM {s}.messages WHERE id IN (
		SELECT id FROM {s}.messages
		WHERE state = {state} AND finished_at <= COALESCE($1::timestamptz, now()) - $2 * interval '1 microsecond'
			AND enqueued_at <= COALESCE($1::timestamptz, now()) - $3 * interval '1 microsecond'
			AND ($5::text IS NULL OR queue = $5)
		LIMIT $4 FOR UPDATE SKIP LOCKED)
	RETURNING queue, state),
counted AS (
	INSERT INTO {s}.completed_counts AS c (queue, shard, n)
	SELECT queue, (pg_backend_pid() % 16)::smallint, -count(*) FROM gone WHERE state = {completed} GROUP BY queue ORDER BY queue
	ON CONFLICT (queue, shard) DO UPDATE SET n = c.n + excluded.n)
SELECT count(*) FROM gone

-- name: deleteQueue
-- Every message of a queue and its settings: its pause and its record.
-- The completed ones are taken off the queue's count as purgeQueue takes
-- them, and for the same reason: a stray count would list the deleted
-- queue in queues. A transaction that moves messages into the queue
-- holds its record (see recorded), so the record's deletion may wait for
-- it to commit, after this statement's snapshot: purgeQueue runs next in
-- the same transaction, with a new snapshot, and deletes what it moved.
WITH gone AS (DELETE FROM {s}.messages WHERE queue = $1 RETURNING state),
counted AS (
	INSERT INTO {s}.completed_counts AS c (queue, shard, n)
	SELECT $1, (pg_backend_pid() % 16)::smallint, -count(*) FROM gone WHERE state = {completed} HAVING count(*) > 0
	ON CONFLICT (queue, shard) DO UPDATE SET n = c.n + excluded.n),
forgotten AS (DELETE FROM {s}.queues WHERE queue = $1)
SELECT count(*) FROM gone

-- name: purgeQueue
-- Every message of a queue; its settings stay. The completed ones are
-- taken off the queue's count as prune takes them, one for each deleted
-- row that was completed: deleting the count's rows instead would miss a
-- shard row that a completion committing meanwhile made, whose message
-- this statement deletes, and leave that message counted.
WITH gone AS (DELETE FROM {s}.messages WHERE queue = $1 RETURNING state),
counted AS (
	INSERT INTO {s}.completed_counts AS c (queue, shard, n)
	SELECT $1, (pg_backend_pid() % 16)::smallint, -count(*) FROM gone WHERE state = {completed} HAVING count(*) > 0
	ON CONFLICT (queue, shard) DO UPDATE SET n = c.n + excluded.n)
SELECT count(*) FROM gone

-- name: createQueue
-- Records queue $2 with attributes $3, in its row if pause made one,
-- unless it has a record: then nothing changes, and no row comes back.
-- The conflicting row stays locked either way, so that the record read
-- next in the transaction is the one that stands.
INSERT INTO {s}.queues AS q (queue, attributes, created_at, updated_at)
VALUES ($2, $3, COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()))
ON CONFLICT (queue) DO UPDATE SET attributes = excluded.attributes, created_at = excluded.created_at, updated_at = excluded.updated_at
	WHERE q.created_at IS NULL
RETURNING queue

-- name: queueRecord
SELECT paused, attributes, created_at, updated_at FROM {s}.queues WHERE queue = $1 AND created_at IS NOT NULL

-- name: lockQueueRecord
-- A queue's record, locked until the transaction ends.
SELECT paused, attributes, created_at, updated_at FROM {s}.queues WHERE queue = $1 AND created_at IS NOT NULL
FOR UPDATE

-- name: setQueueAttributes
UPDATE {s}.queues SET attributes = $3, updated_at = COALESCE($1::timestamptz, now()) WHERE queue = $2
RETURNING updated_at

-- name: holdMaintainer
-- Takes or renews the maintainer lease for $2 until $3 from now, and reads
-- the lease as it stands: taken, or another's. The token grows when the
-- lease is taken after it lapsed, by anyone.
WITH taken AS (
	INSERT INTO {s}.maintainer AS m (id, holder, token, expires)
	VALUES (1, $2, 1, COALESCE($1::timestamptz, now()) + $3 * interval '1 microsecond')
	-- Always an update, of the latest row, so that RETURNING reads the
	-- lease as it stands even when another process has just taken it.
	ON CONFLICT (id) DO UPDATE SET
		token = CASE WHEN m.expires <= COALESCE($1::timestamptz, now()) THEN m.token + 1 ELSE m.token END,
		holder = CASE WHEN m.holder = $2 OR m.expires <= COALESCE($1::timestamptz, now()) THEN $2 ELSE m.holder END,
		expires = CASE WHEN m.holder = $2 OR m.expires <= COALESCE($1::timestamptz, now()) THEN excluded.expires ELSE m.expires END
	RETURNING holder, token, expires)
SELECT holder, token, expires FROM taken

-- name: releaseMaintainer
-- Lets the lease lapse, if $1 holds it under $2.
UPDATE {s}.maintainer SET expires = '-infinity' WHERE id = 1 AND holder = $1 AND token = $2

-- name: keepSecret
-- Keeps $2 as the server secret named $1, unless the name has one: a
-- concurrent first insert of the name waits for the other to commit,
-- then does nothing, so the secret read after it is the one kept.
INSERT INTO {s}.server_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING

-- name: secret
SELECT secret FROM {s}.server_secrets WHERE name = $1

-- name: checkWrite
-- Rewrites the one row of the write check.
INSERT INTO {s}.write_check AS w (id, writes) VALUES (1, 1)
ON CONFLICT (id) DO UPDATE SET writes = w.writes + 1

-- name: pause
INSERT INTO {s}.queues (queue, paused) VALUES ($1, true)
ON CONFLICT (queue) DO UPDATE SET paused = true

-- name: resume
UPDATE {s}.queues SET paused = false WHERE queue = $1

-- name: queues
-- The queues that hold messages, are paused or have a record, without
-- reading the completed rows: the queues with completed messages are those
-- whose count is positive; those with pending, waiting, dead or cancelled
-- ones are read from each state's index by queue with a loose index scan
-- (each row of the recursion is the first queue past the one before, one
-- index probe per queue, and the last row is NULL); those with processing
-- ones from messages_processing, which holds live rows.
WITH RECURSIVE
pending(q) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {pending} ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {pending} AND queue > p.q ORDER BY queue LIMIT 1)
	FROM pending p WHERE p.q IS NOT NULL),
waiting(q) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {waiting} ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {waiting} AND queue > p.q ORDER BY queue LIMIT 1)
	FROM waiting p WHERE p.q IS NOT NULL),
dead(q) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {dead} ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {dead} AND queue > p.q ORDER BY queue LIMIT 1)
	FROM dead p WHERE p.q IS NOT NULL),
cancelled(q) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {cancelled} ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {cancelled} AND queue > p.q ORDER BY queue LIMIT 1)
	FROM cancelled p WHERE p.q IS NOT NULL)
SELECT q FROM pending WHERE q IS NOT NULL
UNION SELECT q FROM waiting WHERE q IS NOT NULL
UNION SELECT q FROM dead WHERE q IS NOT NULL
UNION SELECT q FROM cancelled WHERE q IS NOT NULL
UNION SELECT queue FROM {s}.messages WHERE state = {processing}
UNION SELECT queue FROM {s}.completed_counts GROUP BY queue HAVING sum(n) > 0
UNION SELECT queue FROM {s}.queues WHERE paused OR created_at IS NOT NULL
ORDER BY 1

-- name: queuesAfter
-- At most $2 of the queues that queues lists, those after $1 in name
-- order, read as queues reads them, but each state's loose index scan
-- starts past $1 and stops after $2 queues, and the counts and the
-- queues' rows are read from $1 on through their primary keys: a page
-- costs what its queues cost, however many queues there are. Processing
-- messages, live leases only, are read whole.
WITH RECURSIVE
pending(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {pending} AND queue > $1 ORDER BY queue ASC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {pending} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
	FROM pending p WHERE p.q IS NOT NULL AND p.n < $2),
waiting(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {waiting} AND queue > $1 ORDER BY queue ASC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {waiting} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
	FROM waiting p WHERE p.q IS NOT NULL AND p.n < $2),
dead(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {dead} AND queue > $1 ORDER BY queue ASC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {dead} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
	FROM dead p WHERE p.q IS NOT NULL AND p.n < $2),
cancelled(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {cancelled} AND queue > $1 ORDER BY queue ASC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {cancelled} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
	FROM cancelled p WHERE p.q IS NOT NULL AND p.n < $2)
SELECT q FROM (
	SELECT q FROM pending WHERE q IS NOT NULL
	UNION SELECT q FROM waiting WHERE q IS NOT NULL
	UNION SELECT q FROM dead WHERE q IS NOT NULL
	UNION SELECT q FROM cancelled WHERE q IS NOT NULL
	UNION SELECT queue FROM {s}.messages WHERE state = {processing} AND queue > $1
	UNION (SELECT queue FROM {s}.completed_counts WHERE queue > $1 GROUP BY queue HAVING sum(n) > 0 ORDER BY queue ASC LIMIT $2)
	UNION (SELECT queue FROM {s}.queues WHERE (paused OR created_at IS NOT NULL) AND queue > $1 ORDER BY queue ASC LIMIT $2)) AS page
ORDER BY q ASC LIMIT $2

-- name: queuesBefore
-- queuesAfter backwards: at most $2 of the queues before $1, the
-- nearest to it, in name order.
WITH RECURSIVE
pending(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {pending} AND queue < $1 ORDER BY queue DESC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {pending} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
	FROM pending p WHERE p.q IS NOT NULL AND p.n < $2),
waiting(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {waiting} AND queue < $1 ORDER BY queue DESC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {waiting} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
	FROM waiting p WHERE p.q IS NOT NULL AND p.n < $2),
dead(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {dead} AND queue < $1 ORDER BY queue DESC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {dead} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
	FROM dead p WHERE p.q IS NOT NULL AND p.n < $2),
cancelled(q, n) AS (
	SELECT (SELECT queue FROM {s}.messages WHERE state = {cancelled} AND queue < $1 ORDER BY queue DESC LIMIT 1), 1
	UNION ALL
	SELECT (SELECT queue FROM {s}.messages WHERE state = {cancelled} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
	FROM cancelled p WHERE p.q IS NOT NULL AND p.n < $2)
SELECT q FROM (SELECT q FROM (
	SELECT q FROM pending WHERE q IS NOT NULL
	UNION SELECT q FROM waiting WHERE q IS NOT NULL
	UNION SELECT q FROM dead WHERE q IS NOT NULL
	UNION SELECT q FROM cancelled WHERE q IS NOT NULL
	UNION SELECT queue FROM {s}.messages WHERE state = {processing} AND queue < $1
	UNION (SELECT queue FROM {s}.completed_counts WHERE queue < $1 GROUP BY queue HAVING sum(n) > 0 ORDER BY queue DESC LIMIT $2)
	UNION (SELECT queue FROM {s}.queues WHERE (paused OR created_at IS NOT NULL) AND queue < $1 ORDER BY queue DESC LIMIT $2)) AS page
ORDER BY q DESC LIMIT $2) AS last ORDER BY q ASC

-- name: list
-- A queue's messages in one state ({state}), by id: those after $2 and
-- before $4 (NULL for no bound) that pass the filters on key ($5), kind
-- ($6) and dead reason ($7), each NULL when not set. The state is written
-- in rather than bound, so that the planner can use its partial index. The
-- statement is planned at each execution with its arguments as constants
-- (see replan), so a filter that is not set drops out of the plan, a key
-- proves the predicate of the key's indexes (messages_key_head for a
-- pending or processing message, messages_waiting, messages_finished_key
-- for a finished one) and a kind that of messages_completed_kind.
--
-- The queue is matched as a one-element array rather than with "=", and
-- the rows are sorted by queue and id: a column equal to a constant drops
-- out of the sort, and sorted by id alone the planner may read the primary
-- key in order, which passes over every row of the other queues and states
-- with smaller ids before the page (100,000 rows of another queue's
-- history, in a measurement). Sorted by queue and id, the page is read in
-- order only from an index that starts with the queue and ends with the
-- id: the state's, or the key's.
SELECT id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
	worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
	attributes, first_claimed_at, dead_letter_queue, dead_letter_source
FROM {s}.messages
WHERE queue = ANY(ARRAY[$1::text]) AND state = {state} AND id > $2 AND ($4::bigint IS NULL OR id < $4)
	AND ($5::text IS NULL OR key = $5) AND ($6::text IS NULL OR kind = $6) AND ($7::text IS NULL OR dead_reason = $7)
ORDER BY queue, id LIMIT $3

-- name: listBefore
-- list, newest first: the page before $4, which is set.
SELECT id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
	worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
	attributes, first_claimed_at, dead_letter_queue, dead_letter_source
FROM {s}.messages
WHERE queue = ANY(ARRAY[$1::text]) AND state = {state} AND id > $2 AND ($4::bigint IS NULL OR id < $4)
	AND ($5::text IS NULL OR key = $5) AND ($6::text IS NULL OR kind = $6) AND ($7::text IS NULL OR dead_reason = $7)
ORDER BY queue DESC, id DESC LIMIT $3

-- name: get
-- One message by id, through the primary key, with its error history
-- and snooze count.
SELECT errors, snoozes, id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
	worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
	attributes, first_claimed_at, dead_letter_queue, dead_letter_source
FROM {s}.messages WHERE id = $1

-- name: blockedKeys
-- Up to $3 keys of queue $1 after key $2 that have waiting messages, with
-- how many and their head. The keys come from messages_waiting one probe
-- each (a loose index scan, as in queues), and the recursion runs only as
-- far as the LIMIT reads it, so the cost is in proportion to the keys
-- listed and their waiting messages. The head is the key's first entry in
-- messages_key_head in its line's order (a run has several), its columns
-- NULL when there is none.
WITH RECURSIVE k(key) AS (
	SELECT (SELECT key FROM {s}.messages WHERE queue = $1 AND state = {waiting} AND key > $2 ORDER BY key LIMIT 1)
	UNION ALL
	SELECT (SELECT key FROM {s}.messages WHERE queue = $1 AND state = {waiting} AND key > k.key ORDER BY key LIMIT 1)
	FROM k WHERE k.key IS NOT NULL)
SELECT k.key, w.n, h.id, h.queue, h.state, h.key, h.dedup_id, h.payload, h.deliveries, h.max_deliveries, h.fencing_token,
	h.worker_id, h.last_error, h.dead_reason, h.enqueued_at, h.visible_at, h.locked_until, h.finished_at, h.kind, h.priority,
	h.attributes, h.first_claimed_at, h.dead_letter_queue, h.dead_letter_source
FROM (SELECT key FROM k WHERE key IS NOT NULL LIMIT $3) AS k
CROSS JOIN LATERAL (SELECT count(*) FROM {s}.messages WHERE queue = $1 AND state = {waiting} AND key = k.key) AS w(n)
LEFT JOIN LATERAL (SELECT * FROM {s}.messages
	WHERE queue = $1 AND key = k.key AND state IN ({pending}, {processing}) ORDER BY COALESCE(arrival, id) LIMIT 1) AS h ON true
ORDER BY k.key

-- name: throughput
-- Queue $1's minutes from $2 on, their shards summed, through the
-- primary key.
SELECT minute, sum(completed)::bigint, sum(failed)::bigint, sum(dead)::bigint
FROM {s}.throughput WHERE queue = $1 AND minute >= date_trunc('minute', $2::timestamptz, 'UTC')
GROUP BY minute ORDER BY minute

-- name: pruneThroughput
-- Every queue's minutes that began more than $2 ago (from $1, now when
-- NULL): the table holds about a day of rows, so reading it whole is
-- cheap.
DELETE FROM {s}.throughput WHERE minute < COALESCE($1::timestamptz, now()) - $2 * interval '1 microsecond'

-- name: scheduled
-- Up to $5 of queue $1's pending messages that become visible after now
-- ($2, the database's when NULL) and come after ($3, $4) in (visible
-- time, id) order, in that order. messages_ready holds them by priority
-- first, so the statement finds the queue's priorities one probe each (a
-- loose index scan) and reads a range of each, then merges them.
WITH RECURSIVE p(priority) AS (
	(SELECT priority FROM {s}.messages WHERE queue = $1 AND state = {pending} ORDER BY priority DESC LIMIT 1)
	UNION ALL
	SELECT (SELECT m.priority FROM {s}.messages AS m WHERE m.queue = $1 AND m.state = {pending} AND m.priority < p.priority
		ORDER BY m.priority DESC LIMIT 1)
	FROM p WHERE p.priority IS NOT NULL)
SELECT m.* FROM p CROSS JOIN LATERAL (
	SELECT id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
		worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
		attributes, first_claimed_at, dead_letter_queue, dead_letter_source
	FROM {s}.messages
	WHERE queue = $1 AND state = {pending} AND priority = p.priority
		AND visible_at > COALESCE($2::timestamptz, now()) AND (visible_at, id) > ($3::timestamptz, $4::bigint)
	ORDER BY visible_at, id LIMIT $5) AS m
WHERE p.priority IS NOT NULL
ORDER BY m.visible_at, m.id LIMIT $5
