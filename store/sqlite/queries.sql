-- Every statement the SQLite store runs, by name. Each "-- name: X"
-- line starts one; the comments under it say why it is written so.
--
-- Written in when the store opens:
--   {pending}, {waiting}, {processing}, {completed}, {dead}, {cancelled}
--                             the message states' codes
--   {state}                   in list and prune: the state's code
-- Written in by each listing:
--   {index}                   in list: the index it reads
--
-- Times are the store clock's, in microseconds since the Unix epoch: the
-- store's clock is the time authority, and processes sharing a file share
-- a host and so a clock.
--
-- The hot path's statements, insert to promote, are prepared once on the
-- store's single connection; the others run as they are.

-- name: insert
-- One message, waiting behind its key's unfinished head if there is one.
-- A message of a fairness group (?13) that is ready at once (?8 is ?7,
-- now) is placed right behind its group's last ready message, a
-- microsecond after it, or at the queue's first ready message of its
-- priority when that is later, and never after now: two index lookups.
INSERT INTO leasehold_messages (queue, key, dedup_id, reply_to, payload, state, max_deliveries, enqueued_at, visible_at, kind, priority, attributes,
	dead_letter_queue, fair_group, unique_key)
VALUES (?1, ?2, ?3, ?4, ?5,
	CASE WHEN ?2 IS NOT NULL AND EXISTS (SELECT 1 FROM leasehold_messages WHERE queue = ?1 AND key = ?2 AND state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END,
	?6, ?7,
	CASE WHEN ?13 IS NULL OR ?8 > ?7 THEN ?8 ELSE min(?7, max(
		coalesce((SELECT min(visible_at) FROM leasehold_messages WHERE queue = ?1 AND state = {pending} AND priority = ?10 AND visible_at <= ?7), ?7),
		coalesce((SELECT max(visible_at) FROM leasehold_messages WHERE queue = ?1 AND fair_group = ?13 AND state = {pending} AND visible_at <= ?7) + 1, 0)))
	END,
	?9, ?10, ?11, ?12, ?13, ?14)

-- name: dedupGet
SELECT id, enqueued_at FROM leasehold_messages WHERE queue = ? AND dedup_id = ?

-- name: uniqueGet
-- The first message of a unique key (?1) whose state is one of a set,
-- given as a bit mask (?2, bit n for state n).
SELECT id FROM leasehold_messages WHERE unique_key = ?1 AND (?2 >> state) & 1 = 1 ORDER BY id LIMIT 1

-- name: dedupClear
UPDATE leasehold_messages SET dedup_id = NULL WHERE id = ?

-- name: fenceGet
-- The last fencing token handed out, and the ceiling (see durability.go).
SELECT (SELECT value FROM leasehold_meta WHERE name = 'fence'), (SELECT value FROM leasehold_meta WHERE name = 'fence_ceiling')

-- name: fenceAdd
UPDATE leasehold_meta SET value = value + ? WHERE name = 'fence'

-- name: fenceRaise
-- Raises the ceiling of the fencing tokens to ?1, never lowering it.
UPDATE leasehold_meta SET value = max(value, ?1) WHERE name = 'fence_ceiling'

-- name: fenceFloor
-- Moves the fence up to its ceiling: the tokens under it may have been
-- handed out by claims that a power failure undid.
UPDATE leasehold_meta SET value = (SELECT value FROM leasehold_meta WHERE name = 'fence_ceiling')
WHERE name = 'fence' AND value < (SELECT value FROM leasehold_meta WHERE name = 'fence_ceiling')

-- name: claim
-- Claims up to ?6 visible pending messages of queue ?4 at time ?5, in
-- claim order, for worker ?2 until ?3, fencing them from ?1 on. A
-- message's first claim records its time; its lease is not independent.
-- A limit written as a bare parameter makes SQLite compile the statement
-- again whenever its value changes, as a claim's does with the free
-- slots; "?6 + 0" is the same number, compiled once.
UPDATE leasehold_messages AS m
SET state = {processing}, deliveries = m.deliveries + 1, fencing_token = ?1 + c.rn, worker_id = ?2, locked_until = ?3,
	first_claimed_at = coalesce(m.first_claimed_at, ?5), independent = 0
FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, visible_at, id) AS rn
	-- LIMIT inside, so the numbering never walks the backlog.
	FROM (SELECT id, priority, visible_at FROM leasehold_messages
		WHERE queue = ?4 AND state = {pending} AND visible_at <= ?5
			AND NOT EXISTS (SELECT 1 FROM leasehold_queues WHERE queue = ?4 AND paused)
		ORDER BY priority DESC, visible_at, id LIMIT ?6 + 0)) AS c
WHERE m.id = c.id
RETURNING id, key, payload, reply_to, dedup_id, deliveries, max_deliveries, enqueued_at, fencing_token, kind, priority,
	attributes, first_claimed_at, dead_letter_source

-- name: claimable
-- Up to ?3 visible pending messages of queue ?1 at time ?2, in claim
-- order, with their keys and places in their lines: the heads a claim
-- with runs takes, each with the rest of its run.
SELECT id, key, COALESCE(arrival, id) FROM leasehold_messages
WHERE queue = ?1 AND state = {pending} AND visible_at <= ?2
	AND NOT EXISTS (SELECT 1 FROM leasehold_queues WHERE queue = ?1 AND paused)
ORDER BY priority DESC, visible_at, id LIMIT ?3 + 0 -- compiled once, as in claim

-- name: runNext
-- The next ?3 waiting messages of key ?2 of queue ?1 after its head (in
-- its line at ?4), in their line's order (see arrival in the
-- migrations), with their visible times, up to the key's first message
-- after the head that is processing (read from leasehold_key_head, whose
-- WHERE term the first test repeats): the rest of a run, which the claim
-- cuts at the first that is not visible.
SELECT id, visible_at FROM leasehold_messages WHERE queue = ?1 AND key = ?2 AND state = {waiting}
	AND COALESCE(arrival, id) < coalesce((SELECT min(COALESCE(arrival, id)) FROM leasehold_messages
		WHERE queue = ?1 AND key = ?2 AND state IN ({pending}, {processing}) AND state = {processing} AND COALESCE(arrival, id) > ?4),
		9223372036854775807)
ORDER BY COALESCE(arrival, id) LIMIT ?3 + 0 -- compiled once, as in claim

-- name: claimRun
-- Claims the pending and waiting messages in the JSON array of ids ?6 as
-- claim claims, fencing the array's nth (from 0) with ?1 + n + 1, so that
-- the tokens follow the array's order; with ?7 their leases are
-- independent.
UPDATE leasehold_messages AS m
SET state = {processing}, deliveries = m.deliveries + 1, fencing_token = ?1 + j.key + 1, worker_id = ?2, locked_until = ?3,
	first_claimed_at = coalesce(m.first_claimed_at, ?5), independent = ?7
FROM json_each(?6) AS j
WHERE m.id = j.value AND m.queue = ?4 AND m.state IN ({pending}, {waiting})
RETURNING id, key, payload, reply_to, dedup_id, deliveries, max_deliveries, enqueued_at, fencing_token, kind, priority,
	attributes, first_claimed_at, dead_letter_source

-- name: extend
-- Batches of leases arrive as a JSON array of [id, fencing token] pairs
-- (?3), so a batch is one statement.
UPDATE leasehold_messages AS m SET locked_until = ?1
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?3)) AS j
WHERE m.id = j.id AND m.fencing_token = j.fence AND m.state = {processing} AND m.locked_until > ?2
RETURNING id, fencing_token

-- name: complete
-- The batch of leases (?2) as extend takes it.
UPDATE leasehold_messages AS m SET state = {completed}, finished_at = ?1
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?2)) AS j
WHERE m.id = j.id AND m.fencing_token = j.fence AND m.state = {processing} AND m.locked_until > ?1
RETURNING id, fencing_token, queue, key

-- name: completeLate
-- Completes, for the batch of leases (?2, a JSON array of [id, fencing
-- token, late] triples), each message still under its lease: processing
-- under a current lease or, for a late one, processing or pending under
-- its token whatever the expiry.
UPDATE leasehold_messages AS m SET state = {completed}, finished_at = ?1
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence, value ->> 2 AS late FROM json_each(?2)) AS j
WHERE m.id = j.id AND m.fencing_token = j.fence
	AND (m.state = {processing} AND m.locked_until > ?1 OR j.late AND m.state IN ({processing}, {pending}))
RETURNING id, fencing_token, queue, key

-- name: completedUnder
-- Of a batch of leases (?1, a JSON array of [id, fencing token] pairs),
-- those whose message is completed under them already.
SELECT m.id, m.fencing_token, m.queue, m.key FROM leasehold_messages AS m
JOIN (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?1)) AS j ON m.id = j.id AND m.fencing_token = j.fence
WHERE m.state = {completed}

-- name: current
SELECT deliveries, max_deliveries, queue, key, dead_letter_queue, COALESCE(arrival, id), independent FROM leasehold_messages
WHERE id = ? AND fencing_token = ? AND state = {processing} AND locked_until > ?

-- name: given
-- The message of a lease if no claim has taken it since: processing under
-- its token, whatever the expiry, or pending under it.
SELECT deliveries, max_deliveries, queue, key, dead_letter_queue, COALESCE(arrival, id), independent FROM leasehold_messages
WHERE id = ? AND fencing_token = ? AND state IN ({processing}, {pending})

-- name: promote
-- Lets the next waiting message of key ?2 go, in its line's order, if
-- none of the key's messages is pending, nor processing (a run's other
-- messages may be) unless leased independent and after it in the line.
UPDATE leasehold_messages SET state = {pending} WHERE id = (
	SELECT id FROM leasehold_messages WHERE queue = ?1 AND key = ?2 AND state = {waiting} ORDER BY COALESCE(arrival, id) LIMIT 1)
	AND NOT EXISTS (SELECT 1 FROM leasehold_messages h WHERE h.queue = ?1 AND h.key = ?2 AND h.state IN ({pending}, {processing})
		AND (h.state = {pending} OR NOT h.independent
			OR COALESCE(h.arrival, h.id) < COALESCE(leasehold_messages.arrival, leasehold_messages.id)))

-- name: running
-- The pending and processing messages of key ?2 of queue ?1, read from
-- leasehold_key_head.
SELECT id, fencing_token, queue, key, COALESCE(arrival, id), independent, state = {pending} FROM leasehold_messages
WHERE queue = ?1 AND key = ?2 AND state IN ({pending}, {processing})

-- name: hold
-- Puts the messages in the JSON array of ids ?2 back in their keys'
-- lines, waiting; with ?1, each takes back the delivery its claim
-- counted. Their tokens go to 0, which no claim mints: the handles of
-- their claims are lost, and never complete them late.
UPDATE leasehold_messages SET state = {waiting}, fencing_token = 0, deliveries = CASE WHEN ?1 THEN deliveries - 1 ELSE deliveries END WHERE id IN (SELECT value FROM json_each(?2))

-- name: cancelledOf
-- Of a batch of leases (?1, a JSON array of [id, fencing token] pairs),
-- those whose message was cancelled under them.
SELECT m.id, m.fencing_token FROM leasehold_messages AS m
JOIN (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(?1)) AS j ON m.id = j.id AND m.fencing_token = j.fence
WHERE m.state = {cancelled}

-- name: messageOf
-- What cancelling a message needs.
SELECT queue, state, key FROM leasehold_messages WHERE id = ?

-- name: cancel
-- Cancels the messages in the JSON array of ids ?2 that have not finished.
UPDATE leasehold_messages SET state = {cancelled}, finished_at = ?1
WHERE id IN (SELECT value FROM json_each(?2)) AND state IN ({pending}, {waiting}, {processing})

-- name: kill
-- Dead-letters the messages in the JSON array of ids ?5 at time ?3; with
-- ?4, their visible time becomes ?3 too.
UPDATE leasehold_messages SET state = {dead}, dead_reason = ?1, last_error = ?2, finished_at = ?3,
	visible_at = CASE WHEN ?4 THEN ?3 ELSE visible_at END
WHERE id IN (SELECT value FROM json_each(?5))

-- name: noteError
-- Adds error ?2 at time ?3 to the error histories of the messages in the
-- JSON array of ids ?1: the attempt is their deliveries, the worker that
-- of their last lease, and only the newest {maxErrors} are kept.
UPDATE leasehold_messages SET errors = json_insert(
	CASE WHEN json_array_length(coalesce(errors, '[]')) >= {maxErrors}
		THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END,
	'$[#]', json_object('attempt', deliveries, 'at', ?3, 'worker', worker_id, 'error', ?2))
WHERE id IN (SELECT value FROM json_each(?1))

-- name: retry
-- Makes the messages in the JSON array of ids ?4 pending again, visible
-- from ?1; with ?3, ?2 becomes their last error, else they keep theirs;
-- with ?5, each takes back the delivery its claim counted.
UPDATE leasehold_messages SET state = {pending}, visible_at = ?1,
	last_error = CASE WHEN ?3 THEN ?2 ELSE last_error END, deliveries = CASE WHEN ?5 THEN deliveries - 1 ELSE deliveries END
WHERE id IN (SELECT value FROM json_each(?4))

-- name: takeBackDelivery
-- Takes back the delivery that the claim of each message in the JSON
-- array of ids ?1 counted.
UPDATE leasehold_messages SET deliveries = deliveries - 1 WHERE id IN (SELECT value FROM json_each(?1))

-- name: expired
-- The processing messages whose leases expired by ?1.
SELECT id, fencing_token, queue, key, deliveries, max_deliveries, locked_until, dead_letter_queue, COALESCE(arrival, id), independent
FROM leasehold_messages WHERE state = {processing} AND locked_until <= ?1

-- name: deadIDs
-- A queue's dead messages.
SELECT id FROM leasehold_messages WHERE queue = ? AND state = {dead} ORDER BY id

-- name: isDead
-- Whether a message of the queue is dead.
SELECT 1 FROM leasehold_messages WHERE id = ? AND queue = ? AND state = {dead}

-- name: redrive
-- Brings a finished message (dead, completed or cancelled) back at time
-- ?1: behind its key's unfinished head, or pending. Its fencing token
-- becomes 0, which no claim mints, so that no lease from before it
-- finished completes it late. A completed one leaves its count by
-- trigger.
UPDATE leasehold_messages SET deliveries = 0, dead_reason = NULL, finished_at = NULL, visible_at = ?1, fencing_token = 0,
	state = CASE WHEN key IS NOT NULL AND EXISTS (SELECT 1 FROM leasehold_messages h
		WHERE h.queue = leasehold_messages.queue AND h.key = leasehold_messages.key AND h.state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END
WHERE id = ?2 AND state IN ({dead}, {completed}, {cancelled})

-- name: snoozed
-- Counts a snooze of message ?1.
UPDATE leasehold_messages SET snoozes = snoozes + 1 WHERE id = ?1

-- name: hasten
-- Makes the pending messages in the JSON array of ids ?2 that are not
-- visible by ?1 visible then.
UPDATE leasehold_messages SET visible_at = ?1
WHERE id IN (SELECT value FROM json_each(?2)) AND state = {pending} AND visible_at > ?1

-- name: movablePending
-- Up to ?3 visible pending messages of queue ?1 at time ?2, in claim
-- order, read through the ready index as claim reads it; with ?4 only
-- those that have a dead-letter source, passing over the others.
SELECT id, key, dead_letter_source FROM leasehold_messages
WHERE queue = ?1 AND state = {pending} AND visible_at <= ?2 AND (NOT ?4 OR dead_letter_source IS NOT NULL)
ORDER BY priority DESC, visible_at, id LIMIT ?3

-- name: movableDead
-- Up to ?3 dead messages of queue ?1 by id, through the dead index; with
-- ?2 only those that have a dead-letter source.
SELECT id, key, dead_letter_source FROM leasehold_messages INDEXED BY leasehold_dead
WHERE queue = ?1 AND state = {dead} AND (NOT ?2 OR dead_letter_source IS NOT NULL)
ORDER BY id LIMIT ?3

-- name: transfer
-- Moves message ?1 to queue ?2 at time ?3, as a new message of it:
-- behind its key's unfinished head there, or pending. With ?4 it is a
-- dead letter: the queue it leaves becomes its source (every right-hand
-- side reads the row as it was), reason ?5 and error ?6 are recorded;
-- else its source and reason are cleared. A dead letter keeps its
-- deliveries and first claim, as Amazon SQS keeps a message's receive
-- count in its dead-letter queue; any other starts them again. ?7 and ?8
-- are its budget and dead-letter queue from now on. Its fencing token
-- becomes 0, which no
-- claim mints, so that no earlier lease completes it late. ?9 is its
-- arrival, drawn by arrivals.
UPDATE leasehold_messages SET fencing_token = 0, arrival = ?9,
	dead_letter_source = CASE WHEN ?4 THEN queue END,
	dead_reason = CASE WHEN ?4 THEN ?5 END,
	last_error = CASE WHEN ?4 THEN ?6 ELSE last_error END,
	queue = ?2, max_deliveries = ?7, dead_letter_queue = ?8,
	dedup_id = NULL, finished_at = NULL, visible_at = ?3,
	deliveries = CASE WHEN ?4 THEN deliveries ELSE 0 END,
	first_claimed_at = CASE WHEN ?4 THEN first_claimed_at END,
	state = CASE WHEN key IS NOT NULL AND EXISTS (SELECT 1 FROM leasehold_messages h
		WHERE h.queue = ?2 AND h.key = leasehold_messages.key AND h.state IN ({pending}, {processing})) THEN {waiting} ELSE {pending} END
WHERE id = ?1

-- name: arrivals
-- Draws ?1 numbers from the ids' sequence and returns the last: the
-- arrivals of messages moved into other queues, after every id given so
-- far and before every later one, as an insert would draw them.
UPDATE sqlite_sequence SET seq = seq + ?1 WHERE name = 'leasehold_messages' RETURNING seq

-- name: recorded
-- Whether queue ?1 has a record. The transaction holds the database's
-- write lock, so no DeleteQueue runs until it ends.
SELECT 1 FROM leasehold_queues WHERE queue = ?1 AND created_at IS NOT NULL

-- name: purge
-- Deletes a dead message.
DELETE FROM leasehold_messages WHERE id = ?2 AND state = {dead}

-- name: deleteMessages
-- Deletes the messages in the JSON array of ids ?1 that are not
-- processing; the caller takes the completed ones off their counts.
DELETE FROM leasehold_messages WHERE id IN (SELECT value FROM json_each(?1)) AND state <> {processing}

-- name: stats
-- Counts a queue's messages at time ?2 without reading its history: each
-- live state through its partial index (the state is a literal so that
-- SQLite can use it), completed messages from the count that triggers
-- keep. The one scan of the pending messages counts the delayed ones too.
SELECT
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
	FROM leasehold_messages WHERE queue = ?1 AND state = {pending}) AS pending

-- name: allStats
-- Counts every queue's messages at time ?1 in one statement, for the
-- queues that queues lists: each live state's messages are read once
-- through the state's partial index and grouped by queue, completed ones
-- come from their counts, and the queues' rows give the paused ones and
-- the records. The pending scan counts the delayed messages and finds the
-- oldest visible one too.
SELECT queue, sum(pending), sum(waiting), sum(processing), sum(completed), sum(dead), sum(keys), min(oldest), max(paused),
	sum(cancelled), sum(delayed)
FROM (
	SELECT queue, count(*) AS pending, 0 AS waiting, 0 AS processing, 0 AS completed, 0 AS dead, 0 AS keys,
		min(CASE WHEN visible_at <= ?1 THEN visible_at END) AS oldest, 0 AS paused, 0 AS cancelled, coalesce(sum(visible_at > ?1), 0) AS delayed
	FROM leasehold_messages WHERE state = {pending} GROUP BY queue
	UNION ALL
	SELECT queue, 0, count(*), 0, 0, 0, count(DISTINCT key), NULL, 0, 0, 0
	FROM leasehold_messages WHERE state = {waiting} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, count(*), 0, 0, 0, NULL, 0, 0, 0
	FROM leasehold_messages WHERE state = {processing} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, 0, count(*), 0, NULL, 0, 0, 0
	FROM leasehold_messages WHERE state = {dead} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, 0, 0, 0, NULL, 0, count(*), 0
	FROM leasehold_messages WHERE state = {cancelled} GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, n, 0, 0, NULL, 0, 0, 0 FROM leasehold_completed_counts WHERE n > 0
	UNION ALL
	SELECT queue, 0, 0, 0, 0, 0, 0, NULL, paused, 0, 0 FROM leasehold_queues WHERE paused OR created_at IS NOT NULL)
GROUP BY queue ORDER BY queue

-- name: prune
-- Deletes up to ?4 messages in one state ({state}: its code is written in,
-- so that SQLite can use the state's partial index) that finished by ?1
-- and were enqueued by ?2 (the dedup window), of queue ?3 or of any queue
-- when it is NULL. It returns each deleted message's queue, for the
-- completed counts.
DELETE FROM leasehold_messages WHERE id IN (
	SELECT id FROM leasehold_messages WHERE state = {state} AND finished_at <= ?1 AND enqueued_at <= ?2
		AND (?3 IS NULL OR queue = ?3) LIMIT ?4)
RETURNING queue

-- name: uncount
-- Takes ?1 completed messages off queue ?2's count.
UPDATE leasehold_completed_counts SET n = n - ?1 WHERE queue = ?2

-- name: deleteQueue
-- Deletes every message of a queue.
DELETE FROM leasehold_messages WHERE queue = ?

-- name: forgetCounts
-- Deletes a queue's completed count.
DELETE FROM leasehold_completed_counts WHERE queue = ?

-- name: forgetQueue
-- Deletes a queue's settings: its pause and its record.
DELETE FROM leasehold_queues WHERE queue = ?

-- name: createQueue
-- Records queue ?1 with attributes ?2 at time ?3, in its row if Pause
-- made one, unless it has a record: then it changes nothing, and no row.
INSERT INTO leasehold_queues (queue, attributes, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
ON CONFLICT (queue) DO UPDATE SET attributes = ?2, created_at = ?3, updated_at = ?3 WHERE created_at IS NULL

-- name: queueRecord
-- A queue's record.
SELECT paused, attributes, created_at, updated_at FROM leasehold_queues WHERE queue = ? AND created_at IS NOT NULL

-- name: setQueueAttributes
-- Sets queue ?1's attributes to ?2 at time ?3.
UPDATE leasehold_queues SET attributes = ?2, updated_at = ?3 WHERE queue = ?1

-- name: holdMaintainer
-- Takes or renews the maintainer lease for ?1 at time ?2 until ?3;
-- maintainer reads it.
INSERT INTO leasehold_maintainer (id, holder, token, expires) VALUES (1, ?1, 1, ?3)
ON CONFLICT (id) DO UPDATE SET
	token = CASE WHEN holder = ?1 AND expires > ?2 THEN token ELSE token + 1 END,
	holder = ?1, expires = ?3
WHERE holder = ?1 OR expires <= ?2

-- name: maintainer
SELECT holder, token, expires FROM leasehold_maintainer WHERE id = 1

-- name: releaseMaintainer
-- Lets the lease lapse, if ?1 holds it under ?2.
UPDATE leasehold_maintainer SET expires = 0 WHERE id = 1 AND holder = ?1 AND token = ?2

-- name: keepSecret
-- Keeps ?2 as the server secret named ?1, unless the name has one.
INSERT INTO leasehold_server_secrets (name, secret) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING

-- name: secret
SELECT secret FROM leasehold_server_secrets WHERE name = ?

-- name: checkWrite
-- Rewrites the one row of the write check.
INSERT INTO leasehold_write_check (id, writes) VALUES (1, 1)
ON CONFLICT (id) DO UPDATE SET writes = writes + 1

-- name: pause
-- Pauses a queue.
INSERT INTO leasehold_queues (queue, paused) VALUES (?, 1) ON CONFLICT (queue) DO UPDATE SET paused = 1

-- name: resume
-- Lets a queue run.
UPDATE leasehold_queues SET paused = 0 WHERE queue = ?

-- name: queues
-- The queues that hold messages, are paused or have a record, without
-- reading the completed rows: the queues with completed messages are those
-- with a positive count; those with pending, waiting, dead or cancelled
-- ones are read from each state's index by queue with a loose index scan
-- (each row of the recursion is the first queue past the one before, one
-- probe per queue, and the last row is NULL); those with processing ones
-- from their index, which holds live rows only.
WITH RECURSIVE
	pending(q) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {pending} ORDER BY queue LIMIT 1)
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {pending} AND queue > p.q ORDER BY queue LIMIT 1) FROM pending AS p WHERE p.q IS NOT NULL),
	waiting(q) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {waiting} ORDER BY queue LIMIT 1)
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {waiting} AND queue > p.q ORDER BY queue LIMIT 1) FROM waiting AS p WHERE p.q IS NOT NULL),
	dead(q) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {dead} ORDER BY queue LIMIT 1)
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {dead} AND queue > p.q ORDER BY queue LIMIT 1) FROM dead AS p WHERE p.q IS NOT NULL),
	cancelled(q) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {cancelled} ORDER BY queue LIMIT 1)
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {cancelled} AND queue > p.q ORDER BY queue LIMIT 1) FROM cancelled AS p WHERE p.q IS NOT NULL)
SELECT q FROM pending WHERE q IS NOT NULL
UNION SELECT q FROM waiting WHERE q IS NOT NULL
UNION SELECT q FROM dead WHERE q IS NOT NULL
UNION SELECT q FROM cancelled WHERE q IS NOT NULL
UNION SELECT queue FROM leasehold_messages WHERE state = {processing}
UNION SELECT queue FROM leasehold_completed_counts WHERE n > 0
UNION SELECT queue FROM leasehold_queues WHERE paused OR created_at IS NOT NULL
ORDER BY 1

-- name: queuesAfter
-- At most ?2 of the queues that queues lists, those after ?1 in name
-- order, read as queues reads them, but each state's loose index scan
-- starts past ?1 and stops after ?2 queues, and the counts and the
-- queues' rows are read from ?1 on through their primary keys: a page
-- costs what its queues cost, however many queues there are. Processing
-- messages, live leases only, are read whole.
WITH RECURSIVE
	pending(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {pending} AND queue > ?1 ORDER BY queue ASC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {pending} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
		FROM pending AS p WHERE p.q IS NOT NULL AND p.n < ?2),
	waiting(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {waiting} AND queue > ?1 ORDER BY queue ASC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {waiting} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
		FROM waiting AS p WHERE p.q IS NOT NULL AND p.n < ?2),
	dead(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {dead} AND queue > ?1 ORDER BY queue ASC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {dead} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
		FROM dead AS p WHERE p.q IS NOT NULL AND p.n < ?2),
	cancelled(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {cancelled} AND queue > ?1 ORDER BY queue ASC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {cancelled} AND queue > p.q ORDER BY queue ASC LIMIT 1), p.n + 1
		FROM cancelled AS p WHERE p.q IS NOT NULL AND p.n < ?2)
SELECT q FROM (
	SELECT q FROM pending WHERE q IS NOT NULL
	UNION SELECT q FROM waiting WHERE q IS NOT NULL
	UNION SELECT q FROM dead WHERE q IS NOT NULL
	UNION SELECT q FROM cancelled WHERE q IS NOT NULL
	UNION SELECT queue FROM leasehold_messages WHERE state = {processing} AND queue > ?1
	UNION SELECT * FROM (SELECT queue FROM leasehold_completed_counts WHERE n > 0 AND queue > ?1 ORDER BY queue ASC LIMIT ?2)
	UNION SELECT * FROM (SELECT queue FROM leasehold_queues WHERE (paused OR created_at IS NOT NULL) AND queue > ?1 ORDER BY queue ASC LIMIT ?2))
ORDER BY q ASC LIMIT ?2

-- name: queuesBefore
-- queuesAfter backwards: at most ?2 of the queues before ?1, the
-- nearest to it, in name order.
WITH RECURSIVE
	pending(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {pending} AND queue < ?1 ORDER BY queue DESC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {pending} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
		FROM pending AS p WHERE p.q IS NOT NULL AND p.n < ?2),
	waiting(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {waiting} AND queue < ?1 ORDER BY queue DESC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {waiting} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
		FROM waiting AS p WHERE p.q IS NOT NULL AND p.n < ?2),
	dead(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {dead} AND queue < ?1 ORDER BY queue DESC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {dead} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
		FROM dead AS p WHERE p.q IS NOT NULL AND p.n < ?2),
	cancelled(q, n) AS (SELECT (SELECT queue FROM leasehold_messages WHERE state = {cancelled} AND queue < ?1 ORDER BY queue DESC LIMIT 1), 1
		UNION ALL SELECT (SELECT queue FROM leasehold_messages WHERE state = {cancelled} AND queue < p.q ORDER BY queue DESC LIMIT 1), p.n + 1
		FROM cancelled AS p WHERE p.q IS NOT NULL AND p.n < ?2)
SELECT q FROM (SELECT q FROM (
	SELECT q FROM pending WHERE q IS NOT NULL
	UNION SELECT q FROM waiting WHERE q IS NOT NULL
	UNION SELECT q FROM dead WHERE q IS NOT NULL
	UNION SELECT q FROM cancelled WHERE q IS NOT NULL
	UNION SELECT queue FROM leasehold_messages WHERE state = {processing} AND queue < ?1
	UNION SELECT * FROM (SELECT queue FROM leasehold_completed_counts WHERE n > 0 AND queue < ?1 ORDER BY queue DESC LIMIT ?2)
	UNION SELECT * FROM (SELECT queue FROM leasehold_queues WHERE (paused OR created_at IS NOT NULL) AND queue < ?1 ORDER BY queue DESC LIMIT ?2))
ORDER BY q DESC LIMIT ?2) ORDER BY q ASC

-- name: list
-- A queue's messages in one state ({state}) after an id, read from the
-- index {index}; the store adds the filters that are set (a filter that is
-- not set is left out) and the page's end and order. The state's code is
-- written in rather than bound, and the index named with INDEXED BY, so
-- that SQLite reads the index the listing needs whatever it guesses of the
-- table: ordered by id, the primary key would look cheaper for a state
-- without an index by queue and id, and reading it walks every row,
-- history included.
SELECT id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
	worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
	attributes, first_claimed_at, dead_letter_queue, dead_letter_source
FROM leasehold_messages INDEXED BY {index} WHERE queue = ? AND state = {state} AND id > ?

-- name: get
-- One message by its id, through the primary key, with its error history
-- and snooze count.
SELECT errors, snoozes, id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
	worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
	attributes, first_claimed_at, dead_letter_queue, dead_letter_source
FROM leasehold_messages WHERE id = ?

-- name: blockedKeys
-- Up to ?3 keys of queue ?1 after key ?2 that have waiting messages, with
-- how many and their head. The keys come from leasehold_waiting one probe
-- each (a loose index scan: the next key is the first entry past the last
-- one), so the cost is in proportion to the keys listed and their waiting
-- messages; the head is the key's first entry in leasehold_key_head in
-- its line's order (a run has several), NULL when there is none. The recursion's LIMIT ends it: its last row, once the
-- keys run out, is a NULL.
WITH RECURSIVE k(key) AS (
	SELECT (SELECT key FROM leasehold_messages WHERE queue = ?1 AND state = {waiting} AND key > ?2 ORDER BY key LIMIT 1)
	UNION ALL
	SELECT (SELECT key FROM leasehold_messages WHERE queue = ?1 AND state = {waiting} AND key > k.key ORDER BY key LIMIT 1)
	FROM k WHERE k.key IS NOT NULL
	LIMIT ?3)
SELECT k.key, (SELECT count(*) FROM leasehold_messages WHERE queue = ?1 AND state = {waiting} AND key = k.key),
	h.id, h.queue, h.state, h.key, h.dedup_id, h.payload, h.deliveries, h.max_deliveries, h.fencing_token,
	h.worker_id, h.last_error, h.dead_reason, h.enqueued_at, h.visible_at, h.locked_until, h.finished_at, h.kind, h.priority,
	h.attributes, h.first_claimed_at, h.dead_letter_queue, h.dead_letter_source
FROM k LEFT JOIN leasehold_messages AS h ON h.id = (SELECT id FROM leasehold_messages
	WHERE queue = ?1 AND key = k.key AND state IN ({pending}, {processing}) ORDER BY COALESCE(arrival, id) LIMIT 1)
WHERE k.key IS NOT NULL
ORDER BY k.key

-- name: tally
-- Adds a settling transaction's counts to queue ?1's minute ?2 (in Unix
-- minutes).
INSERT INTO leasehold_throughput (queue, minute, completed, failed, dead) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (queue, minute) DO UPDATE SET completed = completed + excluded.completed,
	failed = failed + excluded.failed, dead = dead + excluded.dead

-- name: throughput
-- Queue ?1's minutes from minute ?2 on, through the primary key.
SELECT minute, completed, failed, dead FROM leasehold_throughput WHERE queue = ?1 AND minute >= ?2 ORDER BY minute

-- name: pruneThroughput
-- Every queue's minutes before minute ?1: the table holds about a day of
-- rows, so reading it whole is cheap.
DELETE FROM leasehold_throughput WHERE minute < ?1

-- name: scheduledPriorities
-- The priorities that queue ?1's pending messages have, highest first,
-- one probe of leasehold_ready each (a loose index scan, as blockedKeys
-- reads keys).
WITH RECURSIVE p(priority) AS (
	SELECT (SELECT priority FROM leasehold_messages INDEXED BY leasehold_ready
		WHERE queue = ?1 AND state = {pending} ORDER BY priority DESC LIMIT 1)
	UNION ALL
	SELECT (SELECT priority FROM leasehold_messages INDEXED BY leasehold_ready
		WHERE queue = ?1 AND state = {pending} AND priority < p.priority ORDER BY priority DESC LIMIT 1)
	FROM p WHERE p.priority IS NOT NULL)
SELECT priority FROM p WHERE priority IS NOT NULL

-- name: scheduled
-- Up to ?6 of queue ?1's pending messages of priority ?2 that become
-- visible after ?3 (now) and come after (?4, ?5) in (visible time, id)
-- order, in that order: one range of leasehold_ready, which holds a
-- priority's messages by visible time and id.
SELECT id, queue, state, key, dedup_id, payload, deliveries, max_deliveries, fencing_token,
	worker_id, last_error, dead_reason, enqueued_at, visible_at, locked_until, finished_at, kind, priority,
	attributes, first_claimed_at, dead_letter_queue, dead_letter_source
FROM leasehold_messages INDEXED BY leasehold_ready
WHERE queue = ?1 AND state = {pending} AND priority = ?2 AND visible_at > ?3 AND (visible_at, id) > (?4, ?5)
ORDER BY visible_at, id LIMIT ?6
