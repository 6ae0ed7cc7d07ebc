-- How many completed messages each queue holds, kept by triggers, so that
-- counting them never scans the completed rows, which grow with history.
CREATE TABLE leasehold_completed_counts (
	queue TEXT PRIMARY KEY,
	n     INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO leasehold_completed_counts (queue, n)
	SELECT queue, count(*) FROM leasehold_messages WHERE state = {completed} GROUP BY queue;

CREATE TRIGGER leasehold_completed_insert AFTER INSERT ON leasehold_messages WHEN NEW.state = {completed}
BEGIN
	INSERT INTO leasehold_completed_counts (queue, n) VALUES (NEW.queue, 1)
		ON CONFLICT (queue) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER leasehold_completed_enter AFTER UPDATE OF state ON leasehold_messages
	WHEN NEW.state = {completed} AND OLD.state <> {completed}
BEGIN
	INSERT INTO leasehold_completed_counts (queue, n) VALUES (NEW.queue, 1)
		ON CONFLICT (queue) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER leasehold_completed_leave AFTER UPDATE OF state ON leasehold_messages
	WHEN OLD.state = {completed} AND NEW.state <> {completed}
BEGIN
	UPDATE leasehold_completed_counts SET n = n - 1 WHERE queue = OLD.queue;
END;

CREATE TRIGGER leasehold_completed_delete AFTER DELETE ON leasehold_messages WHEN OLD.state = {completed}
BEGIN
	UPDATE leasehold_completed_counts SET n = n - 1 WHERE queue = OLD.queue;
END;
