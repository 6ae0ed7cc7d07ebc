CREATE TABLE leasehold_meta (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO leasehold_meta (name, value) VALUES ('fence', 0);

-- state: a store.State, written here by name ({pending}, {waiting},
-- {processing}, {completed}, {dead}) and stored as its code.
-- Times are Unix microseconds.
CREATE TABLE leasehold_messages (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	queue          TEXT    NOT NULL,
	key            TEXT,
	dedup_id       TEXT,
	reply_to       TEXT,
	payload        BLOB    NOT NULL,
	state          INTEGER NOT NULL,
	deliveries     INTEGER NOT NULL DEFAULT 0,
	max_deliveries INTEGER NOT NULL,
	fencing_token  INTEGER NOT NULL DEFAULT 0,
	worker_id      TEXT,
	last_error     TEXT,
	dead_reason    TEXT,
	enqueued_at    INTEGER NOT NULL,
	visible_at     INTEGER NOT NULL,
	locked_until   INTEGER,
	finished_at    INTEGER
);

-- Each index covers only live rows of its state, so claims, key lookups and
-- the reaper cost the same however many finished rows the table holds.
CREATE INDEX leasehold_ready ON leasehold_messages (queue, visible_at, id) WHERE state = {pending};
CREATE INDEX leasehold_waiting ON leasehold_messages (queue, key, id) WHERE state = {waiting};
CREATE INDEX leasehold_processing ON leasehold_messages (locked_until) WHERE state = {processing};
CREATE INDEX leasehold_completed ON leasehold_messages (finished_at) WHERE state = {completed};
CREATE INDEX leasehold_dead ON leasehold_messages (queue, id) WHERE state = {dead};
-- At most one message of a key is pending or processing: its head.
CREATE UNIQUE INDEX leasehold_key_head ON leasehold_messages (queue, key) WHERE state IN ({pending}, {processing}) AND key IS NOT NULL;
CREATE UNIQUE INDEX leasehold_dedup ON leasehold_messages (queue, dedup_id) WHERE dedup_id IS NOT NULL;
