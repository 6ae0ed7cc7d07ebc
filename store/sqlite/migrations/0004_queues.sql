-- Settings of a queue: paused is 1 while no claim may take its messages.
-- A queue without a row runs.
CREATE TABLE leasehold_queues (
	queue  TEXT PRIMARY KEY,
	paused INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
