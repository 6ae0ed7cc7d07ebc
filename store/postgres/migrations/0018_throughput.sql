-- What each queue's messages did in each minute: completions, failed
-- deliveries that will be retried, and dead-letterings, added by the
-- settling transactions in their last statement, beside the completed
-- counts, so that every process of the database draws the same chart
-- and it outlives restarts. As completed_counts is, a queue's minute is
-- the sum of its shards: concurrent settlements add to different rows
-- instead of queueing on one. A row exists only for a minute in which
-- something was counted, and the cleaner deletes the rows past a day, so
-- the table stays small.
CREATE TABLE {s}.throughput (
	queue     text        NOT NULL,
	minute    timestamptz NOT NULL,
	shard     smallint    NOT NULL,
	completed bigint      NOT NULL,
	failed    bigint      NOT NULL,
	dead      bigint      NOT NULL,
	PRIMARY KEY (queue, minute, shard)
);
