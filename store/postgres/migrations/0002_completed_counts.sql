-- How many completed messages each queue holds, so that counting them never
-- scans the completed rows, which grow with history. A queue's count is the
-- sum of its shards: concurrent completions add to different rows instead
-- of queueing on one.
CREATE TABLE {s}.completed_counts (
	queue text     NOT NULL,
	shard smallint NOT NULL,
	n     bigint   NOT NULL,
	PRIMARY KEY (queue, shard)
);
INSERT INTO {s}.completed_counts (queue, shard, n)
	SELECT queue, 0, count(*) FROM {s}.messages WHERE state = {completed} GROUP BY queue;
