-- What each queue's messages did in each minute: completions, failed
-- deliveries that will be retried, and dead-letterings, added by the
-- settling transactions as they commit, so that every process of the
-- database draws the same chart and it outlives restarts. minute is in
-- Unix minutes. A queue has a row for a minute only when something was
-- counted in it, and the cleaner deletes the rows past a day, so the
-- table stays small.
CREATE TABLE leasehold_throughput (
	queue     TEXT    NOT NULL,
	minute    INTEGER NOT NULL,
	completed INTEGER NOT NULL,
	failed    INTEGER NOT NULL,
	dead      INTEGER NOT NULL,
	PRIMARY KEY (queue, minute)
) WITHOUT ROWID;
