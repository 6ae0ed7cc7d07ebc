-- A message's priority: claims take the highest first.
ALTER TABLE {s}.messages ADD COLUMN priority smallint NOT NULL DEFAULT 0;

-- Claims read a queue's pending messages in claim order: priority, then
-- visibility, then id.
DROP INDEX {s}.messages_ready;
CREATE INDEX messages_ready ON {s}.messages (queue, priority DESC, visible_at, id) WHERE state = {pending};
