CREATE SEQUENCE {s}.fence;

-- state: a store.State, written here by name ({pending}, {waiting},
-- {processing}, {completed}, {dead}) and stored as its code.
CREATE TABLE {s}.messages (
	id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue          text        NOT NULL,
	key            text,
	dedup_id       text,
	reply_to       text,
	payload        bytea       NOT NULL,
	state          smallint    NOT NULL,
	deliveries     integer     NOT NULL DEFAULT 0,
	max_deliveries integer     NOT NULL,
	fencing_token  bigint      NOT NULL DEFAULT 0,
	worker_id      text,
	last_error     text,
	dead_reason    text,
	enqueued_at    timestamptz NOT NULL,
	visible_at     timestamptz NOT NULL,
	locked_until   timestamptz,
	finished_at    timestamptz
);

-- Partial indexes hold live rows only, so claims, key lookups and the
-- reaper cost the same however much history the table keeps.
CREATE INDEX messages_ready ON {s}.messages (queue, visible_at, id) WHERE state = {pending};
CREATE INDEX messages_waiting ON {s}.messages (queue, key, id) WHERE state = {waiting};
CREATE INDEX messages_processing ON {s}.messages (locked_until) WHERE state = {processing};
CREATE INDEX messages_completed ON {s}.messages (finished_at) WHERE state = {completed};
CREATE INDEX messages_dead ON {s}.messages (queue, id) WHERE state = {dead};
-- At most one message of a key is pending or processing: its head.
CREATE UNIQUE INDEX messages_key_head ON {s}.messages (queue, key) WHERE state IN ({pending}, {processing}) AND key IS NOT NULL;
CREATE UNIQUE INDEX messages_dedup ON {s}.messages (queue, dedup_id) WHERE dedup_id IS NOT NULL;
