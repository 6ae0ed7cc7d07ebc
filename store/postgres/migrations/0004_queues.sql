-- Settings of a queue: paused while no claim may take its messages. A
-- queue without a row runs.
CREATE TABLE {s}.queues (
	queue  text    PRIMARY KEY,
	paused boolean NOT NULL DEFAULT false
);
